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
- once untrusted code may print (``ragproof action``), stdout belongs to a LogGuard: untrusted
  lines are relayed inside a stop-commands pair, everything else ragproof prints is neutralised.
"""

from __future__ import annotations

import io
import secrets
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TextIO


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
            return _CommandStream(stream.commands)  # type: ignore[return-value]
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


def parse_output_file(text: str) -> dict[str, str]:
    """Read a ``$GITHUB_OUTPUT`` file back the way the runner does (used by tests and tools)."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"output {name!r}: heredoc delimiter {delimiter!r} never closed")
            i += 1
            values[name] = "\n".join(body)
        else:
            name, _, value = line.partition("=")
            values[name] = value
    return values


# -- the log as a trust boundary --------------------------------------------------------------
#
# The runner parses both stdout and stderr of the step for workflow commands: a line starting
# with ``::`` (``::error::``, ``::add-mask::``, ``::stop-commands::``...) and the legacy form
# ``##[command]`` anywhere in a line, with one state shared by both streams. Untrusted text
# therefore reaches the log in one of two ways only:
#
# - relayed verbatim, as whole lines on stdout, inside ``::stop-commands::TOKEN`` ...
#   ``::TOKEN::`` with a fresh random token the untrusted process never sees (``LogGuard``);
# - inside ragproof's own messages, with every ``::`` and ``##[`` broken by a zero-width space
#   (``neutralise``), so no position of it can start or resume a command.

ZERO_WIDTH_SPACE = "\u200b"
_COMMAND_MARKERS = ("::", "##[")


def neutralise(text: str) -> str:
    """``text`` with a zero-width space before the last character of every ``::`` and ``##[``.

    The mark goes before the *last* character so that a writer that has already sent the
    beginning of a marker (``"#"`` then ``"#["``) can still break it: see NeutralisingStream.
    Runs of colons are all broken (``:::`` -> ``:\\u200b:\\u200b:``).
    """
    for marker in _COMMAND_MARKERS:
        head, last = marker[:-1], marker[-1]
        text = text.replace(marker, head + ZERO_WIDTH_SPACE + last)
    # A run of colons: the replacement above leaves ":\u200b::" -> break the pairs it formed.
    while "::" in text:
        text = text.replace("::", ":" + ZERO_WIDTH_SPACE + ":")
    return text


class LogGuard:
    """The one writer of the step's stdout once untrusted code may print.

    - ``command(line)``: one of ragproof's own workflow commands, written as is, after
      resuming command processing if untrusted lines were relayed since;
    - ``untrusted(text)``: lines of an untrusted process, written inside a stop-commands
      pair with a token of 128 random bits, opened on demand and closed by the next command;
    - ``write_text(text)``: anything else ragproof prints, neutralised.

    Every marker is written at the start of a line (a pending partial line is ended first) so
    the runner recognises it; untrusted text always ends with a newline so the resume marker
    cannot be glued to it. One lock orders the writers (relay threads and the main thread).
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.RLock()
        self._token: str | None = None
        self._at_line_start = True
        self._tail = ""  # the last characters written as text, to break markers across writes

    def _write(self, text: str) -> None:
        if text:
            self._stream.write(text)
            self._at_line_start = text.endswith("\n")
            self._tail = text[-2:]

    def _line_start(self) -> None:
        if not self._at_line_start:
            self._write("\n")

    def _resume(self) -> None:
        if self._token is not None:
            self._line_start()
            self._write(f"::{self._token}::\n")
            self._token = None

    @property
    def stopped(self) -> bool:
        return self._token is not None

    def command(self, text: str) -> None:
        with self._lock:
            self._resume()
            self._line_start()
            self._write(text if text.endswith("\n") else text + "\n")
            self._stream.flush()

    def untrusted(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            if self._token is None:
                self._line_start()
                self._token = secrets.token_hex(16)
                self._write(f"::stop-commands::{self._token}\n")
            self._line_start()
            self._write(text if text.endswith("\n") else text + "\n")
            self._stream.flush()

    def write_text(self, text: str) -> None:
        with self._lock:
            # The tail joins the previous write: "#" then "#[" must still be broken.
            joined = neutralise(self._tail + text)
            self._write(joined[len(self._tail) :] if joined.startswith(self._tail) else joined)

    def flush(self) -> None:
        with self._lock:
            self._stream.flush()

    def relay(self, pipe: IO[bytes], *, name: str = "relay") -> threading.Thread:
        """Copy ``pipe`` line by line as untrusted text until EOF, on a daemon thread."""

        def pump() -> None:
            with pipe:
                for raw in iter(pipe.readline, b""):
                    self.untrusted(raw.decode("utf-8", errors="replace"))

        thread = threading.Thread(target=pump, name=name, daemon=True)
        thread.start()
        return thread


class NeutralisingStream(io.TextIOBase):
    """A text stream (for ``sys.stdout``/``sys.stderr``) whose writes are neutralised.

    On stdout it writes through the LogGuard (shared ordering with relayed lines); on stderr it
    keeps its own tail. ``commands`` is where WorkflowCommands writes: the guard itself on
    stdout, so ragproof's own commands stay commands.
    """

    def __init__(self, target: TextIO, guard: LogGuard | None = None) -> None:
        super().__init__()
        self._target = target
        self._guard = guard if guard is not None else LogGuard(target)
        self.commands = self._guard

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", "utf-8") or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    def write(self, text: str) -> int:
        self._guard.write_text(text)
        return len(text)

    def flush(self) -> None:
        self._guard.flush()


class _CommandStream:
    """The ``stream`` WorkflowCommands writes to when a LogGuard owns stdout."""

    def __init__(self, guard: LogGuard) -> None:
        self._guard = guard
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._guard.command(line + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._guard.command(self._pending)
            self._pending = ""


def guard_standard_streams() -> LogGuard:
    """Route ``sys.stdout``/``sys.stderr`` through neutralising streams; returns the stdout guard.

    Idempotent. WorkflowCommands created afterwards (without an explicit stream) write their
    commands through the guard.
    """
    current = sys.stdout
    if isinstance(current, NeutralisingStream):
        return current.commands
    guard = LogGuard(current)
    sys.stdout = NeutralisingStream(current, guard)
    if not isinstance(sys.stderr, NeutralisingStream):
        sys.stderr = NeutralisingStream(sys.stderr)
    return guard
