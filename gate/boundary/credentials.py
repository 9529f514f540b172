"""Credentials a checkout may hold, which the code under test could read.

``actions/checkout`` keeps the job's token in the repository's git configuration unless the
workflow sets ``persist-credentials: false``: an ``http.<url>.extraheader`` (``AUTHORIZATION:
basic ...``) in ``.git/config``, or in a file that configuration includes (newer versions of the
action keep it under ``RUNNER_TEMP`` and add an ``includeIf``). Any pipeline or ``install``
command that can read it holds the token. Found as well: a password in a remote's URL
(``https://user:TOKEN@host/...``) and a credential store file (``.git-credentials``, git's
``credentials`` under ``$XDG_CONFIG_HOME`` or ``~/.config``).

"Could read" is judged by the file's mode for the pipeline user (:class:`Sandbox`): its owner
bit when it owns the file, the group bit when its group owns it, else the "other" bit. Without
a user switch the pipeline runs with ragproof's own rights: every credential found is readable.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from gate.boundary.sandbox import Sandbox, active
from gate.core.errors import UsageError

# How far includes are followed, and how much of a configuration file is read.
MAX_INCLUDES = 10
MAX_CONFIG_BYTES = 1_000_000
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]')
_ENTRY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$")
_URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@", re.IGNORECASE)


def _readable_by(path: Path, sandbox: Sandbox | None) -> bool:
    try:
        status = path.stat()
    except OSError:
        return False
    if not stat.S_ISREG(status.st_mode):
        return False
    if sandbox is None or sandbox.uid is None:
        return True
    gid = sandbox.gid if sandbox.gid is not None else sandbox.uid
    if status.st_uid == sandbox.uid:
        return bool(status.st_mode & stat.S_IRUSR)
    if status.st_gid == gid:
        return bool(status.st_mode & stat.S_IRGRP)
    return bool(status.st_mode & stat.S_IROTH)


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _git_directory(workspace: Path) -> Path | None:
    git = workspace / ".git"
    if git.is_dir():
        return git
    if git.is_file():
        pointer = _read(git).strip()
        if pointer.startswith("gitdir:"):
            return (workspace / pointer[len("gitdir:") :].strip()).resolve()
    return None


def _config_findings(path: Path, base: Path, depth: int) -> list[tuple[Path, str]]:
    """(file, what) for each credential in git configuration file ``path`` and its includes."""
    found: list[tuple[Path, str]] = []
    section = ""
    for line in _read(path).splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            line = line[header.end() :]
        entry = _ENTRY.match(line.split("#", 1)[0].split(";", 1)[0])
        if not entry:
            continue
        key, value = entry.group(1).lower(), (entry.group(2) or "").strip().strip('"')
        if section == "http" and key == "extraheader":
            found.append((path, "an http.extraheader (the job's token)"))
        elif _URL_PASSWORD.search(value):
            found.append((path, f"a password in {section}.{key}"))
        elif section in ("include", "includeif") and key == "path" and value and depth < MAX_INCLUDES:
            included = Path(os.path.expanduser(value))
            included = included if included.is_absolute() else base / included
            found += _config_findings(included, included.parent, depth + 1)
    return found


def readable_credentials(
    workspace: Path, sandbox: Sandbox | None, variables: Mapping[str, str]
) -> list[tuple[Path, str]]:
    """(file, what) for every credential of the checkout the pipeline user could read.

    ``variables``: the job's environment (``HOME``, ``XDG_CONFIG_HOME`` for git's credential
    store files).
    """
    candidates: list[tuple[Path, str]] = []
    git = _git_directory(workspace)
    if git is not None:
        candidates += _config_findings(git / "config", git, 0)
    home = variables.get("HOME")
    stores = [workspace / ".git-credentials"]
    if home:
        stores += [Path(home) / ".git-credentials", Path(home) / ".config" / "git" / "credentials"]
    if variables.get("XDG_CONFIG_HOME"):
        stores.append(Path(variables["XDG_CONFIG_HOME"]) / "git" / "credentials")
    for store in stores:
        if _URL_PASSWORD.search(_read(store)):
            candidates.append((store, "a git credential store"))
    return [(path, what) for path, what in candidates if _readable_by(path, sandbox)]


def refuse_persisted_credentials(workspace: Path, variables: Mapping[str, str]) -> None:
    """UsageError (exit 64) naming the first credential the pipeline user could read, before
    any untrusted code (the ``install`` command, the pipeline) runs."""
    sandbox = active()
    found = readable_credentials(workspace, sandbox, variables)
    if found:
        path, what = found[0]
        who = (
            f"uid {sandbox.uid}"
            if sandbox is not None and sandbox.uid is not None
            else "it runs as this user"
        )
        raise UsageError(
            f"{path}: holds {what}, which the pipeline under test could read ({who}): refusing to run "
            "untrusted code; check out with `persist-credentials: false` (actions/checkout) and keep "
            "credential stores out of the job"
        )
