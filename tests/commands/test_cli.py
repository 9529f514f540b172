"""The command-line entry point: dispatch, usage errors, exit codes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gate import __version__

pytestmark = pytest.mark.slow


def _ragproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gate", *args], capture_output=True, text=True, timeout=60)


def test_version_prints_package_version() -> None:
    proc = _ragproof("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"ragproof {__version__}"


def test_no_command_prints_help_and_exits_64() -> None:
    proc = _ragproof()
    assert proc.returncode == 64
    assert "usage: ragproof" in proc.stderr


def test_unknown_command_is_one_line_usage_error() -> None:
    proc = _ragproof("no-such-command")
    assert proc.returncode == 64
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ragproof: error:")
    assert "no-such-command" in lines[0]
    assert "Traceback" not in proc.stderr
