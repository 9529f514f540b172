"""``ragproof action``: the entrypoint of the GitHub Action's container.

Reads the job's context (``GITHUB_*``, the event file, ``INPUT_*``) once, refuses
``pull_request_target`` unless allowed, masks the secrets, keeps every credential
out of reach of the code it runs (the ``install`` command, the pipeline of every adapter
type), then runs the flow of :mod:`gate.github.flow` for the event (which
calls ``install`` only after its checks, right before the pipeline) and writes the report, the
job summary and the step's outputs. Exit codes are those of ``ragproof compare`` (0 on
push/baseline runs). The run store lives in :func:`store_directory`, never in the checkout.

How the credentials are kept (the security model, docs/action.md):

1. The process marks itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): without
   ``CAP_SYS_PTRACE`` (not in Docker's or podman's default set) no other process, root's
   included, can read its ``/proc/PID/environ``, ``mem`` or file descriptors.
2. It then re-executes itself with an allow-listed environment; the full one travels through
   an anonymous memory file (``memfd``) that the new image reads and closes, so even the
   initial ``/proc/1/environ`` of the container's PID 1 holds no secret.
3. Untrusted processes start through the sandbox (:mod:`gate.adapters.sandbox`): allow-listed
   environment without the file-command variables, a session of their own, and in the image
   the unprivileged ``RAGPROOF_PIPELINE_UID`` (no write access to ``/github/file_commands`` or
   to ragproof's installation).
4. stdout belongs to a LogGuard (:mod:`gate.github.workflow`): the ``install`` command's output
   is relayed inside ``::stop-commands::TOKEN``; everything else printed is neutralised.

Paths in the outputs are relative to the workspace: the container sees the workspace at
``/github/workspace`` while later steps of the job run on the host, in the same directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from gate.core.environment import Environment

HELP = "GitHub Action entrypoint: run, find the baseline, compare, comment and set the check"
# How long the install step waits for its output after the shell exited (a server it left
# running keeps the pipe open; its later lines are still relayed, inside a stop-commands pair).
RELAY_GRACE_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Everything comes from the Actions environment (action.yml documents the inputs); the one
    # argument is internal: the memory file holding the environment after the re-exec.
    parser.add_argument("--environment-fd", type=int, default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.adapters.sandbox import set_non_dumpable
    from gate.core.errors import RagproofError
    from gate.github.workflow import WorkflowCommands, guard_standard_streams

    set_non_dumpable()
    if args.environment_fd is None:
        _reexec_clean(env)  # returns only where a re-exec is not possible
    else:
        env = _received_environment(args.environment_fd, env)
    guard_standard_streams()
    try:
        return _run(env)
    except RagproofError as exc:
        # Besides the CLI's line on stderr: an annotation shown on the run's page.
        WorkflowCommands(output_path=None, summary_path=None).error(str(exc), title="ragproof")
        raise


def clean_process_environment(variables: Mapping[str, str]) -> dict[str, str]:
    """What stays in ``os.environ`` after the re-exec: the sandbox allow-list, no credential."""
    from gate.adapters.sandbox import Sandbox

    return Sandbox().environment(dict(variables), judge_key_env=None)


def _reexec_clean(env: Environment) -> None:
    """Re-execute ``ragproof action`` with a clean environment; the full one goes over a memfd."""
    if not hasattr(os, "memfd_create") or not hasattr(os, "execve"):
        return  # best effort outside Linux: the scrub in _run still applies
    fd = os.memfd_create("ragproof-environment", 0)  # inherited across exec, read once, closed
    payload = json.dumps(dict(env.variables)).encode("utf-8")
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    sys.stdout.flush()
    sys.stderr.flush()
    # -P: the working directory (the pull request's checkout) never shadows ragproof's modules.
    argv = [sys.executable, "-P", "-m", "gate", "action", "--environment-fd", str(fd)]
    os.execve(sys.executable, argv, clean_process_environment(env.variables))


def _received_environment(fd: int, env: Environment) -> Environment:
    from gate.core.errors import UsageError

    try:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        variables = json.loads(b"".join(chunks))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--environment-fd {fd}: cannot read the environment: {exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    if not isinstance(variables, dict):
        raise UsageError(f"--environment-fd {fd}: expected a JSON object")
    return Environment(
        variables=MappingProxyType({str(k): str(v) for k, v in variables.items()}),
        cwd=env.cwd,
        stderr_is_tty=env.stderr_is_tty,
    )


def pipeline_environment(env: Environment, cwd: Path, head_sha: str | None = None) -> Environment:
    """The Environment handed to the runner: no GitHub/Actions credentials, no inputs.

    On a pull request ``GITHUB_SHA`` is GitHub's merge commit, while the workflows check out
    and run the head commit: ``head_sha`` replaces it so run.json records what really ran.
    """
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
    # Where no re-exec was possible: code started later must not inherit what is withheld.
    from gate.adapters.secrets import is_withheld
    from gate.github.context import SECRET_VARIABLES

    for name in [*SECRET_VARIABLES, *(n for n in os.environ if is_withheld(n, judge_key_env))]:
        os.environ.pop(name, None)


def store_directory(ctx: object, env: Environment) -> Path:
    """Where the run store and judge cache live: the ``store-dir`` input (a directory the
    workflow restored, which must hold no file of the checkout), else a fresh directory under
    ``RUNNER_TEMP``. Never a path the pull request's checkout controls."""
    import subprocess
    import tempfile

    from gate.core.errors import UsageError

    workspace: Path = ctx.workspace  # type: ignore[attr-defined]
    given = ctx.inputs.store_dir  # type: ignore[attr-defined]
    if given:
        path = ctx.workspace_path(given)  # type: ignore[attr-defined]
        inside = path.resolve().is_relative_to(workspace.resolve())
        if inside:
            try:
                tracked = subprocess.run(
                    ["git", "-c", f"safe.directory={workspace}", "ls-files", "--", str(path)],
                    cwd=workspace,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                    env={
                        "PATH": env.get("PATH") or "/usr/bin:/bin",
                        "GIT_CONFIG_NOSYSTEM": "1",
                        "HOME": "/nonexistent",
                    },
                )
            except OSError:
                raise UsageError(
                    f"input store-dir ({given}): inside the workspace, and git is not available to show "
                    "that no file of the checkout is in it; restore the store outside the workspace "
                    "(in the container: under /github/home, which is the runner's "
                    "${{ runner.temp }}/_github_home)"
                ) from None
            if tracked.returncode == 0 and tracked.stdout.strip():
                first = tracked.stdout.splitlines()[0]
                raise UsageError(
                    f"input store-dir ({given}): holds {first}, a file of the checkout; the store must be a "
                    "directory the workflow restored (e.g. with actions/cache), never one a commit can fill"
                )
        path.mkdir(parents=True, exist_ok=True)
        return path
    root = env.get("RUNNER_TEMP")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="ragproof-store-", dir=root or None))


def _install(command: str, variables: dict[str, str], cwd: Path, commands: object) -> None:
    """Run the install command in the sandbox; its output is relayed as untrusted lines."""
    import subprocess

    from gate.adapters.sandbox import active
    from gate.core.errors import RagproofError
    from gate.github.workflow import guard_standard_streams

    guard = guard_standard_streams()
    sandbox = active()
    with commands.group(f"install: {command}"):  # type: ignore[attr-defined]
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=variables,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            **(sandbox.popen_kwargs() if sandbox is not None else {"start_new_session": True}),
        )
        if sandbox is not None:
            sandbox.started(proc.pid)
        assert proc.stdout is not None
        relay = guard.relay(proc.stdout, name="install-output")
        code = proc.wait()
        relay.join(RELAY_GRACE_S)
    if code != 0:
        raise RagproofError(f"input install: command {command!r} failed with exit code {code}")


def _run(env: Environment) -> int:
    import gate
    from gate.adapters.sandbox import UID_VARIABLE, Sandbox, activate
    from gate.core.errors import UsageError

    sandbox = Sandbox.from_environment(env.variables)
    writable = sandbox.writable_code(Path(gate.__file__).resolve().parent)
    if writable is not None:
        raise UsageError(
            f"{UID_VARIABLE}: ragproof's own code is writable by the pipeline user "
            f"(uid {sandbox.uid}): {writable}; a pipeline could change the gate. Install ragproof "
            "owned by root and not writable by that user (as the action's image does)"
        )
    activate(sandbox)
    try:
        return _run_in(env)
    finally:
        sandbox.terminate()  # what the install command or a pipeline left running
        activate(None)


def _run_in(env: Environment) -> int:
    from gate.adapters.sandbox import untrusted_environment
    from gate.commands._common import load_checked_config
    from gate.github.context import build_context
    from gate.github.flow import ActionFlow, refuse_dangerous_event
    from gate.github.workflow import WorkflowCommands
    from gate.model.config import Config

    ctx = build_context(env)
    # Before anything is read from the checkout: an event that hands secrets to PR code.
    refuse_dangerous_event(ctx.event_name, ctx.inputs.allow_pull_request_target)
    commands = WorkflowCommands(output_path=ctx.output_path, summary_path=ctx.summary_path)
    if ctx.token is not None:
        commands.add_mask(ctx.token.get_secret_value())
    if ctx.workspace.is_dir():
        os.chdir(ctx.workspace)
    config = load_checked_config(ctx.workspace_path(ctx.inputs.config), env)

    # The judge key stays in the Environment snapshot (the judge reads it from there) but
    # leaves os.environ; the pipeline's Environment has no GitHub credential, and the
    # adapters withhold the judge key from it. The checkout's config is the pull request's:
    # the key variable it names, the workflow's and the default are all masked and withheld.
    def protect(key_env: str) -> None:
        key = env.get(key_env)
        if key:
            commands.add_mask(key)
        _scrub_process_environment(key_env)

    for key_env in {config.judge.api_key_env, ctx.inputs.judge_api_key_env or "OPENAI_API_KEY"}:
        protect(key_env)
    pull = ctx.event.pull_request
    pipeline_env = pipeline_environment(env, ctx.workspace, pull.head.sha if pull else None)

    def prepare_pipeline(run_config: Config) -> None:
        # Called by the flow after every check, right before user code runs, with the
        # configuration it runs with (its judge key variable may be the baseline's).
        protect(run_config.judge.api_key_env)
        if ctx.inputs.install:
            install_vars = untrusted_environment(pipeline_env.variables, run_config.judge.api_key_env)
            install_vars = {
                name: value for name, value in install_vars.items() if name != config.judge.api_key_env
            }
            _install(ctx.inputs.install, install_vars, ctx.workspace, commands)

    flow = ActionFlow(
        ctx, pipeline_env, commands, config, install=prepare_pipeline, store_dir=store_directory(ctx, env)
    )
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
    if result.error is not None:
        raise result.error  # everything is written: now its one line and exit code
    return result.exit_code
