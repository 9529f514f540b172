"""Ending the console script without freeing kept data: nothing written or registered is lost."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

from gate.core import process_exit

SCRIPT = textwrap.dedent(
    """
    import atexit, sys
    from gate.core import process_exit
    mode, marker = sys.argv[1], sys.argv[2]
    atexit.register(lambda: open(marker, "w").write("atexit ran"))
    process_exit.as_console()
    if mode == "keep":
        process_exit.keep_until_exit([object() for _ in range(100_000)])
    sys.stdout.write("x" * 300_000)  # more than a pipe holds: written only by the final flush
    sys.stderr.write("last words")
    process_exit.end(3)
    """
)


def run_script(mode: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    marker = tmp_path / f"{mode}.txt"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(marker)], capture_output=True, text=True, timeout=60
    )
    return proc, marker


def test_kept_data_ends_at_once_with_everything_flushed_and_atexit_run(tmp_path: Path) -> None:
    for mode in ("keep", "nothing kept"):
        proc, marker = run_script(mode, tmp_path)
        assert proc.returncode == 3, (mode, proc.stderr)
        assert proc.stdout == "x" * 300_000, mode
        assert proc.stderr == "last words", mode
        assert marker.read_text() == "atexit ran", mode


def test_outside_the_console_script_nothing_is_kept() -> None:
    frozen = gc.get_freeze_count()
    process_exit.keep_until_exit(list(range(1000)))
    assert process_exit._kept == [] and gc.get_freeze_count() == frozen
