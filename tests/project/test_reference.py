"""The generated references (docs/reference/) are what the code generates now, and the JSON
Schemas accept what ragproof writes and refuse what it would refuse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from bench_helpers import load_file
from gate_runs import fixed_runs, write_run
from jsonschema import Draft202012Validator

from gate.decision.compare import compare_runs
from gate.model.config import GateConfig

ROOT = Path(__file__).resolve().parents[2]


GEN = load_file("gen_reference", ROOT / "scripts" / "gen_reference.py")


def _schema(name: str) -> Draft202012Validator:
    document = json.loads((ROOT / "docs" / "reference" / "schemas" / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


def test_the_references_are_current() -> None:
    stale = [str(p) for p in GEN.stale()]
    assert stale == [], f"stale generated references {stale}: run python scripts/gen_reference.py"


def test_a_changed_or_missing_reference_is_reported(tmp_path: Path) -> None:
    assert sorted(GEN.stale(tmp_path)) == sorted(GEN.render())  # nothing generated there yet
    for path in GEN.render():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    assert GEN.stale(tmp_path) == []
    page = tmp_path / "docs" / "reference" / "config.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| `run.k` |", "| `run.kk` |"), encoding="utf-8")
    assert GEN.stale(tmp_path) == [Path("docs/reference/config.md")]


def test_every_config_key_is_in_the_reference() -> None:
    page = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    for key in ("dataset", "adapter.type", "run.k", "judge.model", "gate.margin", "gate.metrics.NAME.min"):
        assert f"| `{key}` |" in page, key
    assert "|  |" not in page  # every key has a meaning


def test_the_schemas_accept_what_ragproof_writes(tmp_path: Path) -> None:
    base, cand = fixed_runs()
    comparison = json.loads(compare_runs(base, cand, GateConfig(resamples=500)).model_dump_json())
    _schema("comparison.json").validate(comparison)
    run = write_run(tmp_path / "run", cand.meta, cand.rows)
    _schema("run.json").validate(json.loads((run / "run.json").read_text(encoding="utf-8")))
    _schema("summary.json").validate(json.loads((run / "summary.json").read_text(encoding="utf-8")))
    rows = _schema("row.json")
    lines = (run / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 240
    for line in lines:
        rows.validate(json.loads(line))


@pytest.mark.parametrize(
    "change",
    [
        {"unknown_key": 1},  # the models forbid keys they do not declare
        {"status": "finished"},  # not a run status
        {"k": "five"},
    ],
)
def test_the_run_schema_refuses_what_reading_refuses(tmp_path: Path, change: dict[str, Any]) -> None:
    base, _ = fixed_runs()
    run = write_run(tmp_path / "run", base.meta, base.rows)
    document = {**json.loads((run / "run.json").read_text(encoding="utf-8")), **change}
    assert not _schema("run.json").is_valid(document)
