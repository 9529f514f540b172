"""``ragproof validate``: config, dataset and metric names checked early; the adapter target
imported and its methods checked; ``--smoke N`` runs N cases end to end (real subprocesses)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from run_helpers import make_cases, ragproof, write_config, write_dataset


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("GITHUB_", "RAGPROOF_"))}
    return {**env, **extra}


def _edit_config(path: Path, **sections: dict) -> None:
    data = yaml.safe_load(path.read_text())
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_misspelt_gate_metric_stops_validate_and_run_with_its_line(tmp_path: Path, command: str) -> None:
    write_dataset(tmp_path, make_cases(3))
    config = write_config(tmp_path, gate={"metrics": {"answer.f1": {"margin": 0.05}}})
    line_no = config.read_text().splitlines().index("    answer.f1:") + 1
    proc = ragproof(command, "-c", "ragproof.yaml", cwd=tmp_path, env=_env())
    assert proc.returncode == 64, proc.stderr
    assert proc.stderr == (
        f"ragproof: error: {config}:{line_no}: gate.metrics.answer.f1: unknown metric 'answer.f1'; "
        "did you mean answer.token_f1?\n"
    )
    assert not (tmp_path / ".ragproof" / "run").exists()


def test_compare_checks_the_gate_metrics_of_its_config(tmp_path: Path) -> None:
    (tmp_path / "gate.yaml").write_text(
        "dataset: cases.jsonl\nadapter: {type: replay, path: r.jsonl}\n"
        "gate:\n  metrics:\n    robustness.injection_resistence: {min: 0.95}\n"
    )
    proc = ragproof("compare", "a", "b", "-c", "gate.yaml", cwd=tmp_path, env=_env())
    assert proc.returncode == 64
    assert proc.stderr == (
        f"ragproof: error: {tmp_path / 'gate.yaml'}:5: gate.metrics.robustness.injection_resistence: "
        "unknown metric 'robustness.injection_resistence'; did you mean robustness.injection_resistance?\n"
    )
