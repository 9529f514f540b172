"""execute_run end to end, in-process: ordering, timeouts, failures, shards, resume, artifact fields."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from run_helpers import PIPELINES, comparable, comparable_rows, make_cases, write_config, write_dataset
from servers.pipeline_server import PipelineServer

from gate.core.environment import Environment
from gate.core.errors import UsageError
from gate.metrics.aggregate import summarize
from gate.model.config import load_config
from gate.run.artifact_io import read_artifact
from gate.run.runner import execute_run
from gate.run.shards import merge_artifacts, parse_shard, shard_of
from gate.run.store import Store


def _env(directory: Path, **variables: str) -> Environment:
    # The pipeline runs in a worker process whose environment comes from this Environment.
    passed = {name: os.environ[name] for name in ("PATH", "TINY_CALL_LOG") if name in os.environ}
    return Environment(variables={**passed, **variables}, cwd=directory)


def _run(directory: Path, out: str = "run", **kwargs: Any) -> Any:
    config = load_config(directory / "ragproof.yaml")
    return execute_run(config, _env(directory), directory / out, progress=False, **kwargs)


def test_rows_in_dataset_order_whatever_the_completion_order(tmp_path: Path) -> None:
    # Earlier cases sleep longer, so they finish last.
    cases = make_cases(8)
    for i, case in enumerate(cases):
        case["question"] += f" [sleep={0.02 * (8 - i):.2f}]"
    write_dataset(tmp_path, cases)
    write_config(tmp_path)
    outcome = _run(tmp_path)
    assert outcome.status == "complete" and outcome.exit_code == 0
    artifact = read_artifact(outcome.artifact_dir)
    assert [r.case_id for r in artifact.rows] == [c["id"] for c in cases]
    assert [r.position for r in artifact.rows] == list(range(8))
    assert all(r.status == "ok" and r.latency_ms is not None and r.latency_ms >= 20 for r in artifact.rows)
    first = artifact.rows[0]
    assert first.answer is not None and first.answer.text == "Refunds are accepted within 30 days."
    assert first.metrics["retrieval.recall_at_k"].value == 1.0
    assert first.tags == ["topic:refunds"]


def test_run_json_records_what_makes_runs_comparable(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(5))
    write_config(tmp_path, run={"metrics": ["retrieval.recall_at_k", "answer.exact_match"]})
    config = load_config(tmp_path / "ragproof.yaml")
    env = _env(tmp_path, GITHUB_SHA="abc123", GITHUB_REF="refs/pull/7/merge")
    outcome = execute_run(config, env, tmp_path / "run", progress=False)
    artifact = read_artifact(outcome.artifact_dir)
    meta = artifact.meta
    assert meta.git.commit == "abc123" and meta.git.ref == "refs/pull/7/merge"
    assert meta.dataset.case_count == 5 and meta.dataset.path == "cases.jsonl"
    assert meta.config_hash == config.config_hash()
    assert meta.metrics == ["retrieval.recall_at_k", "answer.exact_match"]
    assert meta.k == 3 and meta.status == "complete" and meta.shard is None
    assert meta.adapter == {
        "type": "python",
        "target": "tiny_pipeline:Tiny",
        "concurrency": 4,
        "timeout_s": 5.0,
        "retries": 2,
    }
    assert set(artifact.rows[0].metrics) == {"retrieval.recall_at_k", "answer.exact_match"}
    expected = summarize(artifact.rows, meta.metrics, meta.slices)
    assert artifact.summary == expected
    assert (
        artifact.summary.slices["all"]["answer.exact_match"].scored == 4
    )  # the unanswerable case is skipped


@pytest.mark.slow
def test_timeouts_and_failures_are_rows_not_crashes(tmp_path: Path) -> None:
    cases = make_cases(4)
    cases[1]["question"] += " [hang]"
    cases[2]["question"] += " [fail]"
    write_dataset(tmp_path, cases)
    write_config(tmp_path, adapter={"type": "python", "target": "tiny_pipeline:Tiny", "timeout_s": 3})
    outcome = _run(tmp_path)
    rows = read_artifact(outcome.artifact_dir).rows
    assert [r.status for r in rows] == ["ok", "timeout", "adapter_error", "ok"]
    assert rows[1].error == "no result within 3 s" and rows[1].metrics == {}
    assert rows[2].error == "answer raised RuntimeError: index offline" or rows[2].error == (
        "retrieve raised RuntimeError: index offline"
    )
    assert outcome.status == "complete" and outcome.failures == 2


@pytest.mark.slow
def test_http_pipeline_faults_each_end_in_a_row(tmp_path: Path) -> None:
    behaviours = {
        "ok": "ok",
        "flaky": "ok",
        "ratelimit": "ok",
        "drop": "ok",
        "always500": "adapter_error",
        "dropalways": "adapter_error",
        "malformed": "adapter_error",
        "huge": "adapter_error",
        "bad": "adapter_error",
        "hang": "timeout",
    }
    cases = [{"id": name, "question": f"{name}: tell me about refunds"} for name in behaviours]
    write_dataset(tmp_path, cases)
    # The timeout leaves room for Retry-After: 1 and a 50 MB body on a loaded 2-core machine;
    # hang outlasts it.
    with PipelineServer(hang_s=12.0) as server:
        adapter = {
            "type": "http",
            "url": server.url,
            "timeout_s": 6.0,
            "retries": 1,
            "backoff_s": 0.01,
            "concurrency": 10,
            "max_response_bytes": 1_000_000,
        }
        write_config(tmp_path, adapter=adapter)
        outcome = _run(tmp_path)
    rows = read_artifact(outcome.artifact_dir).rows
    assert {r.case_id: r.status for r in rows} == behaviours
    assert all(r.metrics for r in rows if r.status == "ok")
    errors = {r.case_id: r.error for r in rows}
    assert errors["always500"] == "POST /retrieve: HTTP 503 (after 1 retries)" or errors["always500"] == (
        "POST /answer: HTTP 503 (after 1 retries)"
    )
    assert "exceeds max_response_bytes=1000000" in (errors["huge"] or "")


def test_command_pipeline_crashing_mid_run_loses_no_case(tmp_path: Path) -> None:
    script = PIPELINES / "jsonl_pipeline.py"
    expected = {
        "ok: first": "ok",
        "crashonce: the process dies, a new one answers": "ok",
        "ok: after the restart": "ok",
        "crash: dies every time": "adapter_error",
        "ok: after giving up on one case": "ok",
        "error: a reply with an error": "adapter_error",
    }
    write_dataset(tmp_path, [{"id": f"c{i}", "question": q} for i, q in enumerate(expected)])
    adapter = {
        "type": "command",
        "command": [sys.executable, str(script)],
        "methods": ["answer"],
        "retries": 2,
        "concurrency": 1,
    }
    write_config(tmp_path, adapter=adapter)
    config = load_config(tmp_path / "ragproof.yaml")
    outcome = execute_run(config, _env(tmp_path, MARKER_DIR=str(tmp_path)), tmp_path / "run", progress=False)
    rows = read_artifact(outcome.artifact_dir).rows
    assert outcome.status == "complete"
    assert [r.status for r in rows] == list(expected.values())
    assert rows[1].answer is not None and rows[1].answer.text == f"answer: {list(expected)[1]}"
    assert rows[3].error == "answer: command closed its stdout; exit code 3 (after 2 retries)"
    assert rows[5].error == "answer: index unavailable"
    assert (tmp_path / "run" / "adapter-stderr.log").read_text().count("exit code 3") == 4


@pytest.mark.slow
def test_four_shards_partition_the_cases_and_merge_to_the_unsharded_run(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(40))
    write_config(tmp_path)
    whole = read_artifact(_run(tmp_path, "whole").artifact_dir)
    parts = [read_artifact(_run(tmp_path, f"part{i}", shard=(i, 4)).artifact_dir) for i in range(1, 5)]
    ids = [r.case_id for p in parts for r in p.rows]
    assert sorted(ids) == sorted(r.case_id for r in whole.rows) and len(ids) == len(set(ids))
    assert all(p.rows for p in parts)
    meta, rows = merge_artifacts(parts)
    merged_summary = summarize(rows, meta.metrics, meta.slices)
    assert comparable_rows(rows) == comparable_rows(whole.rows)
    assert merged_summary == whole.summary
    assert meta.status == "complete" and meta.shard is None
    assert meta.dataset == whole.meta.dataset and meta.config_hash == whole.meta.config_hash


def _log_pipeline_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Have the tiny pipeline (it reads TINY_CALL_LOG from its environment) log its calls."""
    log = tmp_path / "calls.log"
    monkeypatch.setenv("TINY_CALL_LOG", str(log))
    return log


@pytest.mark.slow
def test_resume_of_a_finished_run_calls_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_dataset(tmp_path, make_cases(6))
    write_config(tmp_path)
    first = _run(tmp_path)
    log = _log_pipeline_calls(monkeypatch, tmp_path)
    again = _run(tmp_path, resume=tmp_path / "run")
    assert not log.exists()
    assert again.meta.run_id == first.meta.run_id
    assert comparable(read_artifact(again.artifact_dir)) == comparable(read_artifact(first.artifact_dir))


@pytest.mark.slow
def test_resume_runs_only_the_missing_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = make_cases(6)
    write_dataset(tmp_path, cases)
    write_config(tmp_path)
    reference = read_artifact(_run(tmp_path, "reference").artifact_dir)
    first = _run(tmp_path)
    # Forget two finished cases, as a kill before their batch was committed would.
    store = Store(tmp_path / ".ragproof" / "store.sqlite")
    store._conn.execute(
        "DELETE FROM case_results WHERE run_id = ? AND case_id IN ('case-001', 'case-004')",
        (first.meta.run_id,),
    )
    store._conn.commit()
    store.close()
    log = _log_pipeline_calls(monkeypatch, tmp_path)
    resumed = _run(tmp_path, resume=tmp_path / "run")
    called = {line.split("\t")[1].split(":")[0] for line in log.read_text().splitlines()}
    assert called == {"Q1", "Q4"}
    assert comparable(read_artifact(resumed.artifact_dir)) == comparable(reference)


@pytest.mark.slow
def test_resume_refuses_a_changed_config(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(3))
    write_config(tmp_path)
    _run(tmp_path)
    write_config(tmp_path, run={"k": 2})
    with pytest.raises(UsageError, match="changed since that run"):
        _run(tmp_path, resume=tmp_path / "run")


def test_out_dir_that_is_not_an_artifact_is_refused_before_running(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(2))
    write_config(tmp_path)
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match="not a run artifact; refusing to replace it"):
        _run(tmp_path, "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"


@given(st.text(min_size=1, max_size=40), st.integers(min_value=1, max_value=16))
def test_shard_of_is_in_range_and_sha256_based(case_id: str, count: int) -> None:
    shard = shard_of(case_id, count)
    assert 1 <= shard <= count
    digest = hashlib.sha256(case_id.encode("utf-8")).digest()
    assert shard == int.from_bytes(digest[:8], "big") % count + 1


@pytest.mark.slow
def test_shard_assignment_does_not_depend_on_the_hash_seed() -> None:
    code = "from gate.run.shards import shard_of; print([shard_of(f'case-{i}', 4) for i in range(50)])"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1 and outputs.pop().startswith("[")


@pytest.mark.parametrize("text", ["0/4", "5/4", "1", "a/b", "1/0", "-1/2"])
def test_bad_shard_specs(text: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        parse_shard(text)


def test_good_shard_spec() -> None:
    assert parse_shard("3/4") == (3, 4)


@pytest.mark.slow
def test_resume_from_the_artifact_alone_when_the_store_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_dataset(tmp_path, make_cases(5))
    write_config(tmp_path)
    first = read_artifact(_run(tmp_path).artifact_dir)
    for leftover in (tmp_path / ".ragproof").glob("store.sqlite*"):
        leftover.unlink()
    log = _log_pipeline_calls(monkeypatch, tmp_path)
    again = _run(tmp_path, resume=tmp_path / "run")
    assert not log.exists()  # every case came from the artifact
    assert again.meta.run_id == first.meta.run_id
    assert comparable(read_artifact(again.artifact_dir)) == comparable(first)
    for leftover in (tmp_path / ".ragproof").glob("store.sqlite*"):
        leftover.unlink()
    with pytest.raises(UsageError, match=r"dataset, config \(adapter included\) or shard changed"):
        _run(tmp_path, resume=tmp_path / "run", shard=(1, 2))


def test_url_credentials_stay_out_of_run_json() -> None:
    from gate.model.config import parse_config
    from gate.run.runner import adapter_description

    def described(url: str) -> str:
        config = parse_config({"dataset": "d", "adapter": {"type": "http", "url": url}}, "c.yaml")
        return cast("str", adapter_description(config)["url"])

    assert described("http://user:secret@pipeline:8000/api") == "http://pipeline:8000/api"
    assert described("http://pipeline:8000") == "http://pipeline:8000"
