"""Progress output: a redrawn bar on a terminal, throttled plain lines in CI logs."""

from __future__ import annotations

import io

from gate.run.progress import Progress


def test_ci_prints_plain_lines_at_most_once_per_interval_and_at_the_end() -> None:
    stream = io.StringIO()
    progress = Progress(100, tty=False, stream=stream, interval_s=3600)
    for i in range(100):
        progress.advance(failed=i % 10 == 0)
    progress.finish()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1  # the interval never elapsed: only the final line
    assert lines[0].startswith("ragproof: 100/100 cases (100%), 10 failed, ")
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_ci_lines_every_interval_also_while_no_case_finishes() -> None:
    stream = io.StringIO()
    progress = Progress(3, tty=False, stream=stream, interval_s=0.0)
    progress.tick()  # the runner's periodic call: a line although nothing finished yet
    for _ in range(3):
        progress.advance()
    progress.finish()
    progress.tick()  # after the end: nothing more
    assert [line.split(" cases")[0] for line in stream.getvalue().splitlines()] == [
        "ragproof: 0/3",
        "ragproof: 1/3",
        "ragproof: 2/3",
        "ragproof: 3/3",
        "ragproof: 3/3",
    ]


def test_terminal_redraws_one_line() -> None:
    stream = io.StringIO()
    progress = Progress(4, tty=True, stream=stream, already_done=2)
    progress.advance()
    progress.finish()
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert text.split("\r")[-1].startswith("\x1b[2K[" + "#" * 21 + "-" * 7 + "] 3/4 cases (75%)")


def test_tick_waits_for_the_interval() -> None:
    stream = io.StringIO()
    progress = Progress(10, tty=False, stream=stream, interval_s=3600)
    for _ in range(50):
        progress.tick()
    assert stream.getvalue() == ""
