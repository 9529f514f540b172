"""``ragproof action``: the entrypoint of the GitHub Action's container.

Reads the job's context (``GITHUB_*``, the event file, ``INPUT_*``) once, refuses
``pull_request_target`` unless allowed, masks the secrets, keeps every credential out of reach
of the code it runs (the ``install`` command, the pipeline of every adapter type), then runs
the flow of :mod:`gate.github.flow` for the event (which calls ``install`` only after its
checks, right before the pipeline) and writes the report, the job summary and the step's
outputs. Exit codes are those of ``ragproof compare`` (0 on push/baseline runs).

How the credentials are kept is the trust boundary's (:mod:`gate.boundary`; the security model
is in docs/action.md): the re-exec with a clean environment, the sandbox every untrusted
process starts in, the store directory, the install runner and the log guard.

Paths in the outputs are relative to the workspace: the container sees the workspace at
``/github/workspace`` while later steps of the job run on the host, in the same directory.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.environment import Environment

if TYPE_CHECKING:
    from gate.core.errors import RagproofError
    from gate.github.context import GitHubContext
    from gate.github.flow import ActionFlow
    from gate.github.publish import Result
    from gate.github.workflow import WorkflowCommands

HELP = "GitHub Action entrypoint: run, find the baseline, compare, comment and set the check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Everything comes from the Actions environment (action.yml documents the inputs); the one
    # argument is internal: the memory file holding the environment after the re-exec.
    parser.add_argument("--environment-fd", type=int, default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.boundary.logguard import guard_standard_streams
    from gate.boundary.reexec import received_environment, reexec_clean, set_non_dumpable
    from gate.core.errors import RagproofError
    from gate.github.workflow import WorkflowCommands

    set_non_dumpable()
    if args.environment_fd is None:
        reexec_clean(env)  # returns only where a re-exec is not possible
    else:
        env = received_environment(args.environment_fd, env)
    guard_standard_streams()
    try:
        return _run(env)
    except RagproofError as exc:
        # Besides the CLI's line on stderr: an annotation shown on the run's page.
        WorkflowCommands(output_path=None, summary_path=None).error(str(exc), title="ragproof")
        raise


def workspace_relative(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace when inside it (as later host steps see it)."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return str(path)


def _run(env: Environment) -> int:
    from gate.boundary.sandbox import Sandbox, activate, refuse_writable_code

    sandbox = Sandbox.from_environment(env.variables)
    refuse_writable_code(sandbox)
    activate(sandbox)
    try:
        return _run_in(env)
    finally:
        sandbox.terminate()  # what the install command or a pipeline left running
        activate(None)


def _run_in(env: Environment) -> int:
    from gate.core.errors import RagproofError
    from gate.github.context import build_context
    from gate.github.plan import refuse_dangerous_event
    from gate.github.workflow import WorkflowCommands

    ctx = build_context(env)
    # Before anything is read from the checkout: an event that hands secrets to PR code.
    refuse_dangerous_event(ctx.event_name, ctx.inputs.allow_pull_request_target)
    commands = WorkflowCommands(output_path=ctx.output_path, summary_path=ctx.summary_path)
    if ctx.token is not None:
        commands.add_mask(ctx.token.get_secret_value())
    try:
        flow, result = _gate(env, ctx, commands)
    except RagproofError as exc:
        # Stopped before a result: a pull request still gets a failing check with the line.
        _publish_stop(ctx, commands, exc)
        raise
    return _write_step(ctx, commands, flow, result)


def _gate(env: Environment, ctx: GitHubContext, commands: WorkflowCommands) -> tuple[ActionFlow, Result]:
    """Everything up to the flow's result: the checks of the boundary, the config, the flow."""
    from gate.boundary.credentials import refuse_persisted_credentials
    from gate.boundary.files import refuse_unsafe_directory
    from gate.boundary.install import run_install
    from gate.boundary.reexec import scrub_process_environment
    from gate.boundary.sandbox import active, end_untrusted_processes, untrusted_environment
    from gate.boundary.secrets import runner_environment
    from gate.boundary.store import store_directory
    from gate.commands._common import load_checked_config
    from gate.github.flow import DOWNLOADS, ActionFlow
    from gate.model.config import Config

    if ctx.workspace.is_dir():
        os.chdir(ctx.workspace)
        sandbox = active()
        if sandbox is not None:
            sandbox.workspace = Path(os.path.realpath(ctx.workspace))
    # Before any untrusted code runs: every directory ragproof writes into as root (the run, the
    # report beside it, the downloads, the store) holds no link and nothing the pipeline may write.
    out_dir = ctx.workspace_path(ctx.inputs.out)
    store_dir = store_directory(ctx, env)
    for directory in (out_dir, out_dir.parent / DOWNLOADS, store_dir):
        refuse_unsafe_directory(directory)
    config = load_checked_config(ctx.workspace_path(ctx.inputs.config), env)

    # The judge key stays in the Environment snapshot (the judge reads it from there) but
    # leaves os.environ; the pipeline's Environment has no GitHub credential, and the
    # adapters withhold the judge key from it. The checkout's config is the pull request's:
    # the key variable it names, the workflow's and the default are all masked and withheld.
    def protect(key_env: str) -> None:
        key = env.get(key_env)
        if key:
            commands.add_mask(key)
        scrub_process_environment(key_env)

    for key_env in {config.judge.api_key_env, ctx.inputs.judge_api_key_env or "OPENAI_API_KEY"}:
        protect(key_env)
    pull = ctx.event.pull_request
    pipeline_env = runner_environment(env, ctx.workspace, pull.head.sha if pull else None)

    def prepare_pipeline(run_config: Config) -> None:
        # Called by the flow after every check, right before user code runs, with the
        # configuration it runs with (its judge key variable may be the baseline's).
        refuse_persisted_credentials(ctx.workspace, env.variables)
        protect(run_config.judge.api_key_env)
        if ctx.inputs.install:
            install_vars = untrusted_environment(pipeline_env.variables, run_config.judge.api_key_env)
            install_vars = {
                name: value for name, value in install_vars.items() if name != config.judge.api_key_env
            }
            run_install(ctx.inputs.install, install_vars, ctx.workspace, commands)

    flow = ActionFlow(ctx, pipeline_env, commands, config, install=prepare_pipeline, store_dir=store_dir)
    result = flow.execute()
    end_untrusted_processes()  # before anything more is written or read back
    return flow, result


def _write_step(ctx: GitHubContext, commands: WorkflowCommands, flow: ActionFlow, result: Result) -> int:
    """The report file, the job summary and the step's outputs; then the result's error, if any."""
    from gate.boundary.files import replace_file

    outputs = {"decision": result.decision}
    if result.report:
        report_path = flow.report_path()
        replace_file(report_path, result.report.encode("utf-8"))
        outputs["report"] = workspace_relative(report_path, ctx.workspace)
        commands.append_summary(result.report)
    if (flow.out_dir / "run.json").is_file():
        outputs["run-dir"] = workspace_relative(flow.out_dir, ctx.workspace)
    elif ctx.inputs.candidate:
        outputs["run-dir"] = workspace_relative(ctx.workspace_path(ctx.inputs.candidate), ctx.workspace)
    search = result.baseline
    if search is not None and search.baseline is not None:
        outputs["baseline-run-id"] = str(search.baseline.run.id)
        outputs["baseline-sha"] = search.baseline.run.head_sha
    outputs.update(result.outputs)
    for name, value in outputs.items():
        commands.set_output(name, value)
    print(f"ragproof: decision {result.decision}", flush=True)
    if result.error is not None:
        raise result.error  # everything is written: now its one line and exit code
    return result.exit_code


def _publish_stop(ctx: GitHubContext, commands: WorkflowCommands, error: RagproofError) -> None:
    """A failing check run with ``error``'s line on the pull request's head commit, when the step
    stops before it has a result (a refused checkout, a configuration that cannot be read): a
    required check then fails with its reason instead of staying pending. Nothing for other
    events or without a token; a check that cannot be written is a warning (the error follows)."""
    from gate.core.errors import DataError
    from gate.github.checks import create_check_run
    from gate.github.client import GitHubAPIError, GitHubClient
    from gate.report.escape import inert_text, md_escape

    pull = ctx.event.pull_request if ctx.event_name.startswith("pull_request") else None
    if pull is None or ctx.token is None:
        return
    name = ctx.inputs.check_name
    client = GitHubClient(
        api_url=ctx.api_url,
        repository=ctx.repository,
        token=ctx.token.get_secret_value(),
        network=ctx.network,
    )
    try:
        create_check_run(
            client,
            name=name,
            head_sha=pull.head.sha,
            conclusion="failure",
            title=inert_text(f"{name}: stopped (exit {error.exit_code})"),
            summary=f"ragproof stopped before gating this commit:\n\n{md_escape(str(error), max_len=2000)}\n",
            details_url=ctx.run_url,
        )
    except (GitHubAPIError, DataError) as exc:
        commands.warning(f"could not write the failing check run: {exc}", title="ragproof")
