"""``ragproof demo`` as a real subprocess: offline, both runs, the three outputs, exit 0."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gate.commands.demo import demo_dir
from gate.decision.comparison import Comparison
from gate.run.artifact_io import read_artifact

pytestmark = pytest.mark.slow


def test_demo_dir_finds_the_bundled_example() -> None:
    folder = demo_dir()
    assert (folder / "ragproof.yaml").is_file() and (folder / "candidate.yaml").is_file()


def test_demo_end_to_end(tmp_path: Path) -> None:
    env = {"PATH": "", "HOME": str(tmp_path), "RAGPROOF_JUDGE_MODEL": "would-need-network"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "gate", "demo", "--out", "tmp"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "tmp"
    decision = Comparison.model_validate_json((out / "decision.json").read_text())
    assert proc.stdout.startswith(f"ragproof compare: {decision.overall}")
    for name in ("comment.md", "decision.json", "report.html"):
        assert str(out / name) in proc.stdout
    baseline, candidate = read_artifact(out / "baseline"), read_artifact(out / "candidate")
    assert baseline.meta.status == candidate.meta.status == "complete"
    assert baseline.meta.judge.model is None  # offline: RAGPROOF_* from the shell are ignored
    assert decision.dataset.common == len(baseline.rows) == len(candidate.rows)
    assert decision.baseline.run_id == baseline.meta.run_id
    comment = (out / "comment.md").read_text()
    assert comment.startswith("## ragproof: ")
    assert (out / "report.html").read_text().count("<circle ") >= 1
    assert elapsed < 60
