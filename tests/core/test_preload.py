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


ROOT_FINDER = textwrap.dedent(
    """
    import sys
    import gate.decision.compare
    from gate.stats import load_root_finder, tango_bounds
    print("scipy.optimize" in sys.modules)
    load_root_finder()  # in a thread; the bounds below wait for it if it is still loading
    lo, hi = tango_bounds(3, 9, 40, 0.025)
    print(round(float(lo), 6), round(float(hi), 6), "scipy.optimize" in sys.modules)
    """
)


def test_the_root_finder_loads_apart_and_tango_waits_for_it() -> None:
    # scipy.optimize (0.1 s of imports) is not part of the decision modules: compare loads it
    # in a thread while the bootstrap runs, before any Tango bound needs it.
    proc = subprocess.run([sys.executable, "-c", ROOT_FINDER], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == ["False", "-0.320865 0.021988 True", ""]
