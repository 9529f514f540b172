"""The step's log as a trust boundary: untrusted lines relayed, everything else neutralised.

Once untrusted code may print (``ragproof action``), stdout belongs to a :class:`LogGuard`:
untrusted lines are relayed inside a stop-commands pair, everything else ragproof prints is
neutralised, and ragproof's own workflow commands (:mod:`gate.github.workflow`) go through the
guard as commands.
"""

from __future__ import annotations

import io
import secrets
import sys
import threading
from typing import IO, TextIO

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
            # Joined with the previous tail: one-character writes ("#", "#", "[") must still
            # leave the last two characters written, or the third cannot see the marker.
            self._tail = (self._tail + text)[-2:]

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
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase declares a plain attribute; this reads the target's
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


class CommandStream:
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
