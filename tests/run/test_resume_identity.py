"""``--resume`` and ``merge`` refuse rows of another pipeline: the run key covers the adapter's
identity (python target, http url, command argv, replay path), not only its type."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from run_helpers import make_cases, ragproof, write_config, write_dataset

from gate.model.config import parse_config

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("GITHUB_", "RAGPROOF_"))}


def _set_target(config: Path, target: str) -> None:
    data = yaml.safe_load(config.read_text())
    data["adapter"]["target"] = target
    config.write_text(yaml.safe_dump(data, sort_keys=False))


def test_resume_with_another_target_is_refused_in_one_line(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(6))
    config = write_config(tmp_path)
    first = ragproof("run", "-c", "ragproof.yaml", "--out", "run", "--no-progress", cwd=tmp_path, env=_env())
    assert first.returncode == 0, first.stderr
    before = (tmp_path / "run" / "rows.jsonl").read_bytes()
    _set_target(config, "tiny_pipeline:TinySync")
    expected = (
        f"ragproof: error: --resume {tmp_path / 'run'}: that run called another pipeline (python target "
        "tiny_pipeline:Tiny; this config: python target tiny_pipeline:TinySync); its rows cannot be mixed "
        "with this run's, start a new run instead\n"
    )
    again = ragproof(
        "run", "-c", "ragproof.yaml", "--resume", "run", "--no-progress", cwd=tmp_path, env=_env()
    )
    assert (again.returncode, again.stderr) == (64, expected)
    # without the store (another machine) the artifact's own run.json says the same
    for leftover in (tmp_path / ".ragproof").glob("store.sqlite*"):
        leftover.unlink()
    again = ragproof(
        "run", "-c", "ragproof.yaml", "--resume", "run", "--no-progress", cwd=tmp_path, env=_env()
    )
    assert (again.returncode, again.stderr) == (64, expected)
    assert (tmp_path / "run" / "rows.jsonl").read_bytes() == before
    # the same pipeline resumes (nothing left to run)
    _set_target(config, "tiny_pipeline:Tiny")
    same = ragproof(
        "run", "-c", "ragproof.yaml", "--resume", "run", "--no-progress", cwd=tmp_path, env=_env()
    )
    assert same.returncode == 0, same.stderr


def test_shards_of_two_pipelines_do_not_merge(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(6))
    config = write_config(tmp_path)
    args = ("run", "-c", "ragproof.yaml", "--no-progress", "--shard")
    assert ragproof(*args, "1/2", "--out", "p1", cwd=tmp_path, env=_env()).returncode == 0
    _set_target(config, "tiny_pipeline:TinySync")
    assert ragproof(*args, "2/2", "--out", "p2", cwd=tmp_path, env=_env()).returncode == 0
    merged = ragproof("merge", "p1", "p2", "--out", "all", cwd=tmp_path, env=_env())
    assert merged.returncode == 65
    assert (
        merged.stderr == "ragproof: error: p2: config hash differs from p1's; parts of one run must agree\n"
    )
    metas = [json.loads((tmp_path / p / "run.json").read_text()) for p in ("p1", "p2")]
    assert [m["adapter"]["target"] for m in metas] == ["tiny_pipeline:Tiny", "tiny_pipeline:TinySync"]


def _hash(adapter: dict[str, Any]) -> str:
    return parse_config({"dataset": "d.jsonl", "adapter": adapter}, "c.yaml").config_hash()


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"type": "python", "target": "a:make"}, {"type": "python", "target": "b:make"}),
        ({"type": "http", "url": "http://127.0.0.1:8001"}, {"type": "http", "url": "http://127.0.0.1:8002"}),
        (
            {"type": "command", "command": ["python", "a.py"]},
            {"type": "command", "command": ["python", "b.py"]},
        ),
        ({"type": "replay", "path": "a.jsonl"}, {"type": "replay", "path": "b.jsonl"}),
        (
            {"type": "http", "url": "http://p:1", "methods": ["retrieve", "answer"]},
            {"type": "http", "url": "http://p:1", "methods": ["retrieve"]},
        ),
    ],
)
def test_the_adapter_identity_is_part_of_the_config_hash(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert _hash(one) != _hash(other)


def test_how_the_adapter_is_called_is_not_its_identity() -> None:
    base = {"type": "http", "url": "http://user:old@p:1/api"}
    tuned = {**base, "url": "http://user:rotated@p:1/api", "concurrency": 32, "timeout_s": 5, "retries": 0}
    assert _hash(base) == _hash(tuned)
