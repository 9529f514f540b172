"""How the GitHub Actions runner reads workflow commands from a step's log (for the attack tests).

A model of the runner's ActionCommandManager: lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r``
(.NET ``ReadLine``); ``::name props::data`` at the start of a (trimmed) line and the legacy
``##[name props]data`` anywhere in a line are commands when ``name`` is a registered command;
``::stop-commands::TOKEN`` ignores everything until a line that is exactly ``::TOKEN::``
(trimmed, case-insensitive).
"""

from __future__ import annotations

import re

REGISTERED = frozenset(
    {
        "add-mask", "add-matcher", "add-path", "debug", "echo", "endgroup", "error", "group",
        "notice", "remove-matcher", "save-state", "set-env", "set-output", "stop-commands", "warning",
    }
)  # fmt: skip


def _command(line: str) -> tuple[str, str] | None:
    text = line.strip()
    if text.startswith("::"):
        end = text.find("::", 2)
        if end > 2:
            name = text[2:end].split(" ", 1)[0]
            if name in REGISTERED:
                return name, text[end + 2 :]
    start = line.find("##[")
    if start >= 0:
        close = line.find("]", start)
        if close > start:
            name = line[start + 3 : close].split(" ", 1)[0]
            if name in REGISTERED:
                return name, line[close + 1 :]
    return None


def obeyed_commands(log: str) -> list[tuple[str, str]]:
    """The (command, data) pairs the runner would act on, in order."""
    obeyed: list[tuple[str, str]] = []
    token: str | None = None
    for line in re.split(r"\r\n|\r|\n", log):
        if token is not None:
            if line.strip().lower() == f"::{token}::".lower():
                token = None
            continue
        command = _command(line)
        if command is None:
            continue
        obeyed.append(command)
        if command[0] == "stop-commands":
            token = command[1]
    return obeyed
