"""Where untrusted code runs: the pipeline (every adapter) and the action's ``install`` command.

``ragproof action`` holds the job's credentials; the code it runs comes from the pull request.
The entry point activates a :class:`Sandbox` once, and every process that runs untrusted code
is started through it:

- **environment**: an allow-list (:data:`BASE_VARIABLES`, the job's non-secret ``GITHUB_*`` /
  ``RUNNER_*`` context, names the config lists in ``adapter.env_passthrough``), minus every
  withheld name (:mod:`gate.boundary.secrets`), so a secret the workflow passes in ``env:``
  stays out too. The file-command variables (``GITHUB_ENV``, ``GITHUB_OUTPUT``, ...) are never
  passed.
- **user**: when the process may switch users (root in the action's image) and a uid is
  configured (``RAGPROOF_PIPELINE_UID``, set by the Dockerfile), untrusted processes run as that
  uid with its own group, no supplementary groups and no capabilities, with a private
  ``HOME``/``TMPDIR``: they cannot write the runner's file-command directory, ragproof's own
  installation or anything else owned by root, nor read ragproof's memory.
- **sessions**: each untrusted process starts a session of its own; ``terminate()`` ends what
  is left of them (a server an ``install`` command left running) when the step ends.

Without an active sandbox (``ragproof run`` on a laptop) the old rule holds: the pipeline gets
the caller's environment minus the withheld names, with the caller's rights.

The other half is :mod:`gate.boundary.reexec`: the process holding the secrets is non-dumpable
and holds no secret in its environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate.boundary.secrets import pipeline_environment
from gate.core.errors import RagproofError

# Variables an untrusted process may see even under the allow-list (no credential among them).
BASE_VARIABLES: frozenset[str] = frozenset(
    {
        "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "CI", "GITHUB_ACTIONS",
        "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
        "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK", "VIRTUAL_ENV",
        "HOME", "TMPDIR", "USER", "LOGNAME", "SHELL",
        # network settings a pip install or a pipeline's own calls need
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT",
    }
)  # fmt: skip
# Job context: which repository, commit, event (no credential; the token is withheld by name).
CONTEXT_PREFIXES: tuple[str, ...] = ("GITHUB_", "RUNNER_", "LC_")

UID_VARIABLE = "RAGPROOF_PIPELINE_UID"
# Rounds of kill(-1) as the pipeline user before its surviving processes are an error.
KILL_ROUNDS = 50
VENV_VARIABLE = "RAGPROOF_PIPELINE_VENV"


@dataclass
class Sandbox:
    """How untrusted processes are started: environment allow-list, user, private home."""

    uid: int | None = None
    gid: int | None = None
    home: Path | None = None
    # a virtual environment the sandbox user may install into (its bin/ goes first on PATH)
    venv: Path | None = None
    sessions: list[int] = field(default_factory=list)
    # the checkout (the action's working directory): what a pull request's files may name
    workspace: Path | None = None

    @classmethod
    def from_environment(cls, variables: Mapping[str, str]) -> Sandbox:
        """The sandbox the environment asks for; a uid only when this process can switch to it."""
        sandbox = cls()
        raw = (variables.get(UID_VARIABLE) or "").strip()
        if raw and hasattr(os, "geteuid") and os.geteuid() == 0:
            uid_text, _, gid_text = raw.partition(":")
            sandbox.uid = int(uid_text)
            sandbox.gid = int(gid_text) if gid_text else sandbox.uid
        venv = (variables.get(VENV_VARIABLE) or "").strip()
        if venv and (Path(venv) / "bin").is_dir():
            sandbox.venv = Path(venv)
        return sandbox

    def prepare(self) -> None:
        """Create the private home (owned by the sandbox user) once."""
        if self.home is not None:
            return
        home = Path(tempfile.mkdtemp(prefix="ragproof-pipeline-"))
        (home / "tmp").mkdir()
        if self.uid is not None:
            for path in (home, home / "tmp"):
                os.chown(path, self.uid, self.gid if self.gid is not None else self.uid)
        self.home = home

    def environment(
        self,
        variables: Mapping[str, str],
        judge_key_env: str | None,
        passthrough: Iterable[str] = (),
    ) -> dict[str, str]:
        """The allow-listed environment of an untrusted process."""
        allowed = set(passthrough)
        kept = {  # the allow-list, over what the secrets rule leaves (no name let through anyway)
            name: value
            for name, value in pipeline_environment(variables, judge_key_env).items()
            if name in BASE_VARIABLES or name.startswith(CONTEXT_PREFIXES) or name in allowed
        }
        if self.home is not None:
            kept["HOME"] = str(self.home)
            kept["TMPDIR"] = str(self.home / "tmp")
        if self.venv is not None:
            kept["VIRTUAL_ENV"] = str(self.venv)
            kept["PATH"] = os.pathsep.join(filter(None, [str(self.venv / "bin"), kept.get("PATH")]))
        return kept

    def python(self) -> str:
        """The interpreter that runs a python-adapter pipeline."""
        if self.venv is not None and (self.venv / "bin" / "python").exists():
            return str(self.venv / "bin" / "python")
        return sys.executable

    def may_write(self, status: os.stat_result) -> bool:
        """Whether the sandbox user may write a file or directory with this ``stat``.

        Always when it owns it (an owner may ``chmod`` a read-only entry writable), the group
        write bit when its (only) group owns it, and the "other" write bit always: a sticky
        world-writable directory still lets it add entries. False when no user is switched
        (the pipeline then runs with the caller's own rights).
        """
        if self.uid is None:
            return False
        gid = self.gid if self.gid is not None else self.uid
        mode = status.st_mode
        return bool(
            self.owns(status) or (status.st_gid == gid and mode & stat.S_IWGRP) or mode & stat.S_IWOTH
        )

    def owns(self, status: os.stat_result) -> bool:
        """Whether the sandbox user owns the entry with this ``stat`` (False when no user is switched)."""
        return self.uid is not None and status.st_uid == self.uid

    def writable_code(self, package: Path) -> Path | None:
        """The first path of ragproof's own code that the sandbox user could change, or None.

        Checked: the directory holding ``package`` (a ``.pth`` file or a module planted there
        would run in the process holding the secrets), ``package`` itself and everything under
        it (sources, ``__pycache__``). A pipeline that can write there can change the gate.
        """
        if self.uid is None:
            return None
        candidates = [package.parent, package]
        for directory, subdirectories, files in os.walk(package):
            subdirectories.sort()
            candidates += [Path(directory, name) for name in sorted(subdirectories + files)]
        for path in candidates:
            with contextlib.suppress(OSError):
                if self.may_write(path.lstat()):
                    return path
        return None

    def popen_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for subprocess.Popen / asyncio.create_subprocess_exec."""
        kwargs: dict[str, Any] = {"start_new_session": True, "close_fds": True}
        if self.uid is not None:
            kwargs.update(user=self.uid, group=self.gid, extra_groups=[], umask=0o022)
        return kwargs

    def started(self, pid: int) -> None:
        """Remember a process started through the sandbox (its session is ended by terminate)."""
        self.sessions.append(pid)

    def end_processes(self) -> None:
        """SIGKILL every process the untrusted side started, before ragproof writes or reads back
        anything it could have touched.

        The sessions started through the sandbox are ended by process group. A process that left
        its session (a double fork and ``setsid``) is still the pipeline user's: as that user,
        ``kill(-1, SIGKILL)`` reaches every process of the user but the caller, repeated until
        no live one is left (a process forking in a loop is caught within a few rounds).
        RagproofError when some are still alive after :data:`KILL_ROUNDS` rounds: nothing may be
        written then. The pipeline user must be one no other process on the machine runs as
        (the image's uid 64000).
        """
        for pid in self.sessions:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.sessions.clear()
        if self.uid is None:
            return
        for _ in range(KILL_ROUNDS):
            if not processes_of(self.uid):
                return
            self._kill_all_as_user()
        if processes_of(self.uid):
            raise RagproofError(
                f"processes of the pipeline user (uid {self.uid}) survive {KILL_ROUNDS} rounds of SIGKILL: "
                "refusing to write or read back anything they could reach"
            )

    def _kill_all_as_user(self) -> None:
        # A forked child that becomes the pipeline user: the kernel sends kill(-1) to every
        # process that user may signal (its own), except the caller. Changing uid makes the child
        # non-dumpable, so the pipeline cannot read its memory in the instant before the signal.
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's only work
            try:
                os.setgroups([])
                os.setgid(self.gid if self.gid is not None else self.uid)  # type: ignore[arg-type]  # run with a uid only
                os.setuid(self.uid)  # type: ignore[arg-type]  # run with a uid only
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(child, 0)

    def terminate(self) -> None:
        """End every untrusted process (:meth:`end_processes`) and remove the private home.

        At the step's end: survivors (an error raised before anything is written) no longer
        stop anything, and must not replace the error the step is ending with."""
        with contextlib.suppress(RagproofError):
            self.end_processes()
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose real uid is ``uid``, from ``/proc``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="utf-8") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:
            continue  # gone meanwhile
        if fields.get("State", "").strip().startswith(("Z", "X")):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            found.append(int(entry.name))
    return found


def end_untrusted_processes() -> None:
    """:meth:`Sandbox.end_processes` of the active sandbox (nothing without one)."""
    if _ACTIVE is not None:
        _ACTIVE.end_processes()


def refuse_writable_code(sandbox: Sandbox) -> None:
    """UsageError when the sandbox user could change ragproof's own code (see ``writable_code``)."""
    import gate
    from gate.core.errors import UsageError

    writable = sandbox.writable_code(Path(gate.__file__).resolve().parent)
    if writable is not None:
        raise UsageError(
            f"{UID_VARIABLE}: ragproof's own code is writable by the pipeline user "
            f"(uid {sandbox.uid}): {writable}; a pipeline could change the gate. Install ragproof "
            "owned by root and not writable by that user (as the action's image does)"
        )


_ACTIVE: Sandbox | None = None


def activate(sandbox: Sandbox | None) -> None:
    """Make ``sandbox`` the one every adapter and the install command use (the entry point's call)."""
    global _ACTIVE
    _ACTIVE = sandbox


def active() -> Sandbox | None:
    return _ACTIVE


def untrusted_environment(
    variables: Mapping[str, str], judge_key_env: str | None, passthrough: Iterable[str] = ()
) -> dict[str, str]:
    """The environment of an untrusted process under the active sandbox, or the deny-list one."""
    sandbox = active()
    if sandbox is None:
        return pipeline_environment(variables, judge_key_env, passthrough)
    sandbox.prepare()
    return sandbox.environment(variables, judge_key_env, passthrough)


__all__ = [
    "BASE_VARIABLES",
    "Sandbox",
    "activate",
    "active",
    "untrusted_environment",
]
