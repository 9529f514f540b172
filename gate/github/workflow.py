"""Workflow commands of the GitHub Actions runner: outputs, job summary, annotations, masks.

The runner reads workflow commands from the step's stdout (``::error::message``) and two
files named by the environment: ``$GITHUB_OUTPUT`` (``name=value`` lines, or a heredoc
``name<<DELIMITER`` ... ``DELIMITER`` for multi-line values) and ``$GITHUB_STEP_SUMMARY``
(Markdown appended to the job's summary page).

Edge cases:
- a multi-line output uses a fresh random delimiter; a value that happens to contain that
  delimiter on a line of its own gets a new one (so a value can never end its own heredoc);
- annotation and mask values are escaped the way the runner unescapes them (``%``, CR, LF;
  ``:`` and ``,`` in properties), so a message cannot smuggle a second command;
- without ``$GITHUB_OUTPUT`` / ``$GITHUB_STEP_SUMMARY`` (a local run) the writes are skipped;
- once untrusted code may print (``ragproof action``), stdout belongs to a LogGuard
  (:mod:`gate.boundary.logguard`): ragproof's own commands go through it as commands.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from gate.boundary.logguard import CommandStream, NeutralisingStream, neutralise


def escape_data(text: str) -> str:
    """Escape a command's message the way the runner decodes it (``%``, ``\\r``, ``\\n``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a command property value (additionally ``:`` and ``,``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class WorkflowCommands:
    """Writes workflow commands to a stream and the output/summary files of one step."""

    def __init__(
        self,
        *,
        output_path: Path | None,
        summary_path: Path | None,
        stream: TextIO | None = None,
    ) -> None:
        self.output_path = output_path
        self.summary_path = summary_path
        self._stream = stream

    @property
    def stream(self) -> TextIO:
        stream = self._stream if self._stream is not None else sys.stdout
        if isinstance(stream, NeutralisingStream):
            # ragproof's own commands must stay commands: they go through the guard as such.
            return CommandStream(stream.commands)  # type: ignore[return-value]  # has the write/flush used here
        return stream

    def _command(self, name: str, message: str, **properties: str | None) -> None:
        props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items() if value)
        head = f"::{name} {props}::" if props else f"::{name}::"
        self.stream.write(head + escape_data(message) + "\n")
        self.stream.flush()

    # Messages may quote user text (case ids, errors a pipeline raised): neutralised like the
    # rest of what ragproof prints, although the runner reads one command per line.
    def error(self, message: str, *, title: str | None = None, file: str | None = None) -> None:
        self._command("error", neutralise(message), title=title, file=file)

    def warning(self, message: str, *, title: str | None = None, file: str | None = None) -> None:
        self._command("warning", neutralise(message), title=title, file=file)

    def notice(self, message: str, *, title: str | None = None) -> None:
        self._command("notice", neutralise(message), title=title)

    def add_mask(self, secret: str) -> None:
        """Ask the runner to redact ``secret`` from all later log lines (each line of it)."""
        for line in secret.splitlines():
            if line.strip():
                self._command("add-mask", line)

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """Fold the log lines written inside the block under ``title``."""
        self._command("group", neutralise(title))
        try:
            yield
        finally:
            self.stream.write("::endgroup::\n")
            self.stream.flush()

    def set_output(self, name: str, value: str) -> None:
        """Append one output to ``$GITHUB_OUTPUT``; multi-line values use a heredoc."""
        if self.output_path is None:
            return
        if "\n" not in value and "\r" not in value:
            entry = f"{name}={value}\n"
        else:
            lines = value.splitlines()
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
            while delimiter in lines:
                delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
            entry = f"{name}<<{delimiter}\n{value}\n{delimiter}\n"
        with self.output_path.open("a", encoding="utf-8") as handle:
            handle.write(entry)

    def append_summary(self, markdown: str) -> None:
        """Append Markdown to the job summary (``$GITHUB_STEP_SUMMARY``)."""
        if self.summary_path is None:
            return
        with self.summary_path.open("a", encoding="utf-8") as handle:
            handle.write(markdown.rstrip("\n") + "\n")
