"""Run progress on stderr: a redrawn bar on a terminal, one plain line every few seconds elsewhere.

CI logs keep every byte written, so off a terminal nothing is redrawn: a line such as
``ragproof: 40/120 cases (33%), 1 failed, 31.2 cases/s, about 3 s left`` is printed once per
``interval_s`` while the run lasts (also when no case finished meanwhile) and once at the
end. The runner treats a terminal in CI (a runner that allocates a pseudo-terminal) as a log.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 28
TTY_REDRAW_S = 0.1


class Progress:
    def __init__(
        self,
        total: int,
        *,
        tty: bool,
        stream: TextIO | None = None,
        interval_s: float = 5.0,
        already_done: int = 0,
    ) -> None:
        self.total = total
        self.done = already_done
        self.failed = 0
        self._tty = tty
        self._stream = stream if stream is not None else sys.stderr
        self._interval = TTY_REDRAW_S if tty else interval_s
        self._start_done = already_done
        self._started = time.monotonic()
        self._last_draw = self._started if not tty else 0.0
        self._finished = False

    def advance(self, failed: bool = False) -> None:
        """One more case finished (``failed``: not ``ok``); draws when the interval has passed."""
        self.done += 1
        self.failed += int(failed)
        self.tick()

    def tick(self) -> None:
        """Draw if the interval has passed: called periodically, so a log shows a line every few
        seconds even while no case finishes (a slow pipeline)."""
        if self._finished:
            return
        now = time.monotonic()
        if now - self._last_draw >= self._interval:
            self._last_draw = now
            self._draw(now)

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._draw(time.monotonic())
        if self._tty:
            self._stream.write("\n")
        self._stream.flush()

    def _rate(self, now: float) -> float:
        elapsed = now - self._started
        return (self.done - self._start_done) / elapsed if elapsed > 0 else 0.0

    def line(self, now: float | None = None) -> str:
        """The progress text without the bar (the form written to CI logs)."""
        now = time.monotonic() if now is None else now
        rate = self._rate(now)
        percent = 100.0 * self.done / self.total if self.total else 100.0
        text = f"{self.done}/{self.total} cases ({percent:.0f}%)"
        if self.failed:
            text += f", {self.failed} failed"
        text += f", {rate:.1f} cases/s"
        remaining = self.total - self.done
        if rate > 0 and remaining > 0:
            text += f", about {remaining / rate:.0f} s left"
        return text

    def _draw(self, now: float) -> None:
        text = self.line(now)
        if self._tty:
            filled = int(BAR_WIDTH * self.done / self.total) if self.total else BAR_WIDTH
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            self._stream.write(f"\r\x1b[2K[{bar}] {text}")
        else:
            self._stream.write(f"ragproof: {text}\n")
        self._stream.flush()
