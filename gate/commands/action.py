"""``ragproof action``: the entrypoint of the GitHub Action's container.

Reads the job's context (``GITHUB_*``, the event file, ``INPUT_*``) once, masks the secrets,
removes every credential from the process environment before any user code runs (the
``install`` command, a ``python`` adapter importing the pipeline), then runs the flow of
:mod:`gate.github.flow` for the event and writes the report, the job summary and the step's
outputs. Exit codes are those of ``ragproof compare`` (0 on push/baseline runs).
"""

from __future__ import annotations

import argparse

from gate.environment import Environment

HELP = "GitHub Action entrypoint: run, find the baseline, compare, comment and set the check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Everything comes from the Actions environment (action.yml documents the inputs).
    del parser


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.errors import RagproofError
    from gate.github.workflow import WorkflowCommands

    del args
    commands = WorkflowCommands(output_path=None, summary_path=None)
    try:
        return _run(env, commands)
    except RagproofError as exc:
        commands.error(str(exc), title="ragproof")
        raise


def _pipeline_environment(env: Environment, cwd: object) -> Environment:
    """The Environment handed to the runner: no GitHub/Actions credentials, no inputs."""
    from pathlib import Path
    from types import MappingProxyType

    from gate.github.context import SECRET_VARIABLES

    kept = {
        k: v for k, v in env.variables.items() if k not in SECRET_VARIABLES and not k.startswith("INPUT_")
    }
    return Environment(variables=MappingProxyType(kept), cwd=Path(str(cwd)), stderr_is_tty=env.stderr_is_tty)


def _scrub_process_environment(names: list[str]) -> None:
    # The entry point owns the process: user code imported later must not find these.
    import os

    for name in names:
        os.environ.pop(name, None)


def _install(command: str, env: Environment, commands: object) -> None:
    import subprocess

    from gate.errors import RagproofError

    with commands.group(f"install: {command}"):  # type: ignore[attr-defined]
        proc = subprocess.run(command, shell=True, cwd=env.cwd, env=dict(env.variables), check=False)
    if proc.returncode != 0:
        raise RagproofError(f"input install: command {command!r} failed with exit code {proc.returncode}")


def _run(env: Environment, commands: object) -> int:
    import os

    from gate.config import load_config
    from gate.github.context import SECRET_VARIABLES, build_context
    from gate.github.flow import ActionFlow
    from gate.github.workflow import WorkflowCommands

    ctx = build_context(env)
    commands = WorkflowCommands(output_path=ctx.output_path, summary_path=ctx.summary_path)
    if ctx.token is not None:
        commands.add_mask(ctx.token.get_secret_value())
    if ctx.workspace.is_dir():
        os.chdir(ctx.workspace)
    config = load_config(ctx.workspace_path(ctx.inputs.config), env.variables)
    judge_key = env.get(config.judge.api_key_env)
    if judge_key:
        commands.add_mask(judge_key)

    # The judge key stays in the Environment snapshot (the judge reads it from there) but
    # leaves os.environ; the pipeline's Environment has neither it (the adapters withhold it)
    # nor any GitHub credential.
    _scrub_process_environment([*SECRET_VARIABLES, config.judge.api_key_env])
    pipeline_env = _pipeline_environment(env, ctx.workspace)
    if ctx.inputs.install:
        install_env = Environment(
            variables={k: v for k, v in pipeline_env.variables.items() if k != config.judge.api_key_env},
            cwd=pipeline_env.cwd,
        )
        _install(ctx.inputs.install, install_env, commands)

    flow = ActionFlow(ctx, pipeline_env, commands, config)
    result = flow.execute()

    outputs = {"decision": result.decision}
    if result.report:
        report_path = flow.out_dir.parent / f"{flow.out_dir.name}-report.md"
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(result.report, encoding="utf-8")
        outputs["report"] = str(report_path)
        commands.append_summary(result.report)
    if (flow.out_dir / "run.json").is_file():
        outputs["run-dir"] = str(flow.out_dir)
    elif ctx.inputs.candidate:
        outputs["run-dir"] = str(ctx.workspace_path(ctx.inputs.candidate))
    search = result.baseline
    if search is not None and search.baseline is not None:
        outputs["baseline-run-id"] = str(search.baseline.run.id)
        outputs["baseline-sha"] = search.baseline.run.head_sha
    outputs.update(result.outputs)
    for name, value in outputs.items():
        commands.set_output(name, value)
    print(f"ragproof: decision {result.decision}", flush=True)
    return result.exit_code
