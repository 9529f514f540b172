"""``ragproof compare`` as a real subprocess: outputs and exit codes 0/1/3/64/65."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gate_runs import binary_pair, judge, meta, row, write_run

from gate.decision.comparison import Comparison

pytestmark = pytest.mark.slow

HIT = "retrieval.hit_rate_at_k"
CONFIG = """\
version: 1
dataset: cases.jsonl
adapter: {type: replay, path: replay.jsonl}
gate:
  margin: 0.02
  resamples: 2000
  fail_on: {fail_on}
"""


def ragproof(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    same = [row(f"q{i}", {HIT: 1.0 if i % 3 else 0.0}) for i in range(200)]
    write_run(root / "base", meta("base"), same)
    write_run(root / "same", meta("same"), same)
    b, c = binary_pair(300, seed=1, p_base=0.72, flip=0.1)
    write_run(root / "b300", meta("b300"), b)
    write_run(root / "c300", meta("c300"), c)  # 001's drop: block
    # a likely drop on few cases (5 of 40 worse, none better; a block needs 6): review
    few_b = [row(f"q{i}", {HIT: 1.0}) for i in range(40)]
    few_c = [row(f"q{i}", {HIT: 0.0 if i < 5 else 1.0}) for i in range(40)]
    write_run(root / "few_b", meta("few_b"), few_b)
    write_run(root / "few_c", meta("few_c"), few_c)
    write_run(root / "k10", meta("k10", k=10), same)
    write_run(root / "judged", meta("judged", judge=judge("gpt-x")), same)
    shutil.make_archive(str(root / "same"), "zip", root / "same")
    return root


def test_pass_writes_every_output(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = ragproof(
        "compare",
        str(runs / "base"),
        str(runs / "same.zip"),
        "--json",
        str(out / "decision.json"),
        "--markdown",
        str(out / "comment.md"),
        "--html",
        str(out / "report.html"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ragproof compare: pass")
    decision = Comparison.model_validate_json((out / "decision.json").read_text())
    assert decision.overall == "pass" and decision.dataset.common == 200
    # the same cases unchanged: a pass, but nothing verified on cases that changed
    assert (out / "comment.md").read_text().count("🔍 No regression detected") == 1
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_block_exits_1_unless_fail_on_never(runs: Path, tmp_path: Path) -> None:
    proc = ragproof("compare", str(runs / "b300"), str(runs / "c300"), "--json", "d.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "ragproof compare: block: retrieval.hit_rate_at_k on all dropped: Δ −0.053, "
        "95% interval [−0.094, −0.016] lies wholly below zero, and so does its family-wise bound "
        "over 2 distinct gates; 2 gates block."  # Tango; all = kind=qa, plus the failure rate
    )
    decision = json.loads((tmp_path / "d.json").read_text())
    # the counts add up to the gates of the --json document
    total = len(decision["gates"])
    assert lines[1].startswith(f"  {total} gates: ")
    # every case is qa: all and kind=qa are one line, in the comment's order
    assert (
        "  block  retrieval.hit_rate_at_k [all = kind=qa] 0.693 → 0.640, Δ −0.053 [−0.094, −0.016], "
        "300 pairs: real drop"
    ) in lines
    assert ragproof("compare", "b300", "c300", "--fail-on", "never", cwd=runs).returncode == 0


def test_review_and_fail_on_from_config(runs: Path, tmp_path: Path) -> None:
    assert ragproof("compare", "few_b", "few_c", cwd=runs).returncode == 0
    assert ragproof("compare", "few_b", "few_c", "--fail-on", "review", cwd=runs).returncode == 1
    config = tmp_path / "ragproof.yaml"
    config.write_text(CONFIG.replace("{fail_on}", "review"))
    proc = ragproof("compare", str(runs / "few_b"), str(runs / "few_c"), "-c", str(config), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout.startswith("ragproof compare: review")
    # the command line wins over the config
    proc = ragproof(
        "compare",
        str(runs / "few_b"),
        str(runs / "few_c"),
        "-c",
        str(config),
        "--fail-on",
        "block",
        cwd=tmp_path,
    )
    assert proc.returncode == 0


def test_not_comparable_exits_3(runs: Path, tmp_path: Path) -> None:
    proc = ragproof("compare", str(runs / "base"), str(runs / "k10"), cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stderr.strip() == (
        "ragproof: error: runs not comparable: k differs (baseline 5, candidate 10)"
    )
    proc = ragproof("compare", str(runs / "base"), str(runs / "judged"), cwd=tmp_path)
    assert proc.returncode == 3 and "judge model (baseline None, candidate 'gpt-x')" in proc.stderr
    proc = ragproof("compare", str(runs / "base"), str(runs / "judged"), "--allow-mixed-judges", cwd=tmp_path)
    assert proc.returncode == 0 and "warning: mixed judges allowed" in proc.stdout


def test_usage_errors_exit_64(runs: Path, tmp_path: Path) -> None:
    for args in (
        ("compare", str(runs / "base")),
        ("compare", str(runs / "base"), str(runs / "same"), "--fail-on", "sometimes"),
        ("compare", str(runs / "base"), str(runs / "same"), "-c", str(tmp_path / "missing.yaml")),
    ):
        proc = ragproof(*args, cwd=tmp_path)
        assert proc.returncode == 64, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("{fail_on}", "block") + "  margni: 0.1\n")
    proc = ragproof("compare", str(runs / "base"), str(runs / "same"), "-c", str(bad), cwd=tmp_path)
    assert proc.returncode == 64 and "gate.margni: unknown key" in proc.stderr


def test_bad_artifacts_exit_65(runs: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(runs / "same", broken)
    lines = (broken / "rows.jsonl").read_text().splitlines()
    lines[4] = lines[4][:20]
    (broken / "rows.jsonl").write_text("\n".join(lines) + "\n")
    proc = ragproof("compare", str(runs / "base"), str(broken), cwd=tmp_path)
    assert proc.returncode == 65, proc.stderr
    assert "rows.jsonl:5" in proc.stderr and "Traceback" not in proc.stderr
    proc = ragproof("compare", str(runs / "base"), str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode == 65 and "not found" in proc.stderr
