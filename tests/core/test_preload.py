"""Imports in a thread beside the artifact reader: the reader imports nothing once loaded."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gate_runs import meta, row, write_run

from gate.core.preload import Preload

CHECK = textwrap.dedent(
    """
    import sys
    from gate.run.artifact_io import load_reader, read_artifact
    load_reader()
    before = set(sys.modules)
    read_artifact(sys.argv[1])
    print(sorted(set(sys.modules) - before))
    """
)


def test_reading_an_artifact_imports_nothing_after_load_reader(tmp_path: Path) -> None:
    # The compare command imports numpy and scipy in a thread while the main thread reads: safe
    # only while the reader itself imports nothing then (two threads importing the same modules
    # in opposite orders could each see the other's half-initialised module).
    rows = [
        row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0, "answer.token_f1": 0.5}, tags=["t"]) for i in range(5)
    ]
    write_run(tmp_path / "run", meta("run"), rows)
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_path / "run")], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_preload_imports_and_leaves_failures_to_the_callers_import() -> None:
    loading = Preload(["json", "gate.no_such_module"])
    loading.wait()
    assert "json" in sys.modules
    # the thread stopped at the failure; the caller's own import raises it
    with pytest.raises(ModuleNotFoundError) as failure:
        importlib.import_module("gate.no_such_module")
    assert failure.value.name == "gate.no_such_module"
