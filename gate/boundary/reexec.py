"""The process that holds the job's secrets: non-dumpable, re-executed with a clean environment.

1. The process marks itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): without
   ``CAP_SYS_PTRACE`` (not in Docker's or podman's default set) no other process, root's
   included, can read its ``/proc/PID/environ``, ``mem`` or file descriptors.
2. It then re-executes itself with an allow-listed environment; the full one travels through
   an anonymous memory file (``memfd``) that the new image reads and closes, so even the
   initial ``/proc/1/environ`` of the container's PID 1 holds no secret.
3. Where no re-exec is possible, the withheld names leave ``os.environ`` (a scrub).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from types import MappingProxyType

from gate.core.environment import Environment


def set_non_dumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` for this process; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    pr_set_dumpable = 4
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(pr_set_dumpable, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def clean_process_environment(variables: Mapping[str, str]) -> dict[str, str]:
    """What stays in ``os.environ`` after the re-exec: the sandbox allow-list, no credential."""
    from gate.boundary.sandbox import Sandbox

    return Sandbox().environment(dict(variables), judge_key_env=None)


def reexec_clean(env: Environment) -> None:
    """Re-execute ``ragproof action`` with a clean environment; the full one goes over a memfd."""
    if not hasattr(os, "memfd_create") or not hasattr(os, "execve"):
        return  # best effort outside Linux: the scrub still applies
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


def received_environment(fd: int, env: Environment) -> Environment:
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


def scrub_process_environment(judge_key_env: str | None) -> None:
    # Where no re-exec was possible: code started later must not inherit what is withheld.
    from gate.boundary.secrets import SECRET_VARIABLES, is_withheld

    for name in [*SECRET_VARIABLES, *(n for n in os.environ if is_withheld(n, judge_key_env))]:
        os.environ.pop(name, None)
