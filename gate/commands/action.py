"""``ragproof action``: the entrypoint of the GitHub Action's container.

Reads the job's context (``GITHUB_*``, the event file, ``INPUT_*``) once, masks the secrets,
removes every credential from the process environment before any user code runs (the
``install`` command, a ``python`` adapter importing the pipeline), then runs the flow of
:mod:`gate.github.flow` for the event and writes the report, the job summary and the step's
outputs. Exit codes are those of ``ragproof compare`` (0 on push/baseline runs).

Paths in the outputs are relative to the workspace: the container sees the workspace at
``/github/workspace`` while later steps of the job run on the host, in the same directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.environment import Environment

HELP = "GitHub Action entrypoint: run, find the baseline, compare, comment and set the check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Everything comes from the Actions environment (action.yml documents the inputs).
    del parser


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.core.errors import RagproofError
    from gate.github.workflow import WorkflowCommands

    del args
    try:
        return _run(env)
    except RagproofError as exc:
        # Besides the CLI's line on stderr: an annotation shown on the run's page.
        WorkflowCommands(output_path=None, summary_path=None).error(str(exc), title="ragproof")
        raise


def pipeline_environment(env: Environment, cwd: Path, head_sha: str | None = None) -> Environment:
    """The Environment handed to the runner: no GitHub/Actions credentials, no inputs.

    On a pull request ``GITHUB_SHA`` is GitHub's merge commit, while the workflows check out
    and run the head commit: ``head_sha`` replaces it so run.json records what really ran.
    """
    from types import MappingProxyType

    from gate.github.context import SECRET_VARIABLES

    kept = {
        name: value
        for name, value in env.variables.items()
        if name not in SECRET_VARIABLES and not name.startswith("INPUT_")
    }
    if head_sha:
        kept["GITHUB_SHA"] = head_sha
    return Environment(variables=MappingProxyType(kept), cwd=cwd, stderr_is_tty=env.stderr_is_tty)


def workspace_relative(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace when inside it (as later host steps see it)."""
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return str(path)


def _scrub_process_environment(judge_key_env: str | None) -> None:
    # The entry point owns the process: code imported or started later (a python adapter's
    # pipeline) must not find what the adapters withhold from a pipeline's process.
    import os

    from gate.adapters.secrets import is_withheld
    from gate.github.context import SECRET_VARIABLES

    for name in [*SECRET_VARIABLES, *(n for n in os.environ if is_withheld(n, judge_key_env))]:
        os.environ.pop(name, None)


def _install(command: str, env: Environment, commands: object) -> None:
    import subprocess

    from gate.core.errors import RagproofError

    with commands.group(f"install: {command}"):  # type: ignore[attr-defined]
        proc = subprocess.run(command, shell=True, cwd=env.cwd, env=dict(env.variables), check=False)
    if proc.returncode != 0:
        raise RagproofError(f"input install: command {command!r} failed with exit code {proc.returncode}")


def _run(env: Environment) -> int:
    import os

    from gate.commands._common import load_checked_config
    from gate.github.context import build_context
    from gate.github.flow import ActionFlow
    from gate.github.workflow import WorkflowCommands

    ctx = build_context(env)
    commands = WorkflowCommands(output_path=ctx.output_path, summary_path=ctx.summary_path)
    if ctx.token is not None:
        commands.add_mask(ctx.token.get_secret_value())
    if ctx.workspace.is_dir():
        os.chdir(ctx.workspace)
    config = load_checked_config(ctx.workspace_path(ctx.inputs.config), env)
    judge_key_env = config.judge.api_key_env
    judge_key = env.get(judge_key_env)
    if judge_key:
        commands.add_mask(judge_key)

    # The judge key stays in the Environment snapshot (the judge reads it from there) but
    # leaves os.environ; the pipeline's Environment has no GitHub credential, and the
    # adapters withhold the judge key from it. `install` runs user code: the same rule as a
    # command pipeline.
    _scrub_process_environment(judge_key_env)
    pull = ctx.event.pull_request
    pipeline_env = pipeline_environment(env, ctx.workspace, pull.head.sha if pull else None)
    if ctx.inputs.install:
        from gate.adapters.secrets import pipeline_environment as allowed_for_pipeline

        install_vars = allowed_for_pipeline(pipeline_env.variables, judge_key_env)
        _install(ctx.inputs.install, Environment(variables=install_vars, cwd=ctx.workspace), commands)

    flow = ActionFlow(ctx, pipeline_env, commands, config)
    result = flow.execute()

    outputs = {"decision": result.decision}
    if result.report:
        report_path = flow.report_path()
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(result.report, encoding="utf-8")
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
    return result.exit_code
