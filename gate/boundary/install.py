"""The action's ``install`` command: untrusted code, run in the sandbox, its output relayed."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol


class LogGroups(Protocol):
    """Folds log lines under a title (gate.github.workflow.WorkflowCommands, a later stage)."""

    def group(self, title: str) -> AbstractContextManager[None]: ...


# How long the install step waits for its output after the shell exited (a server it left
# running keeps the pipe open; its later lines are still relayed, inside a stop-commands pair).
RELAY_GRACE_S = 2.0


def run_install(command: str, variables: dict[str, str], cwd: Path, commands: LogGroups) -> None:
    """Run the install command in the sandbox; its output is relayed as untrusted lines."""
    import subprocess

    from gate.boundary.logguard import guard_standard_streams
    from gate.boundary.sandbox import active
    from gate.core.errors import RagproofError

    guard = guard_standard_streams()
    sandbox = active()
    with commands.group(f"install: {command}"):
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
