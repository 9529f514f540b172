"""The judge inside ``ragproof run`` / ``rescore`` / ``run --estimate`` (real subprocesses, real store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers.judge_server import JudgeServer, Step, reply, user_prompt

from gate.model.config import load_config
from gate.model.dataset import load_dataset
from gate.run.estimate import estimate_run
from gate.run.rescore import REASON_NOT_RESCORED

pytestmark = pytest.mark.slow

CASES: list[dict[str, Any]] = [
    {
        "id": "q1",
        "question": "How long is the refund window?",
        "expected_answer": "30 days",
        "expected_source_ids": ["c1"],
    },
    {"id": "q2", "question": "Who is the CEO?", "kind": "unanswerable"},
    {"id": "q3", "question": "What does the Team plan cost?", "expected_source_ids": ["c2"]},
]
REPLAY: list[dict[str, Any]] = [
    {
        "id": "q1",
        "retrieved": [{"id": "c1", "text": "Refunds within 30 days."}],
        "answer": {"text": "Within 30 days [c1].", "citations": ["c1"]},
    },
    {
        "id": "q2",
        "retrieved": [{"id": "c3", "text": "Offices in Rotterdam."}],
        "answer": {"text": "I don't know."},
    },
    {
        "id": "q3",
        "retrieved": [{"id": "c2", "text": "Team costs EUR 12."}],
        "answer": {"text": "EUR 12 per member."},
    },
]
REFUSAL_TEXT = "I don't know."


def responder(body: dict[str, Any]) -> Step:
    """A consistent judge: supports everything, declines only the refusal, no claims in a refusal."""
    prompt = user_prompt(body)
    refusal = REFUSAL_TEXT in prompt
    if '"entailed"' in prompt:
        return reply({"claims": [] if refusal else [{"claim": "x", "entailed": True}]})
    if '"covered"' in prompt:
        return reply({"claims": [{"claim": "x", "covered": True}]})
    if '"claims"' in prompt:
        return reply(
            {
                "claims": []
                if refusal
                else [{"claim": "x", "supported": True}, {"claim": "y", "supported": False}]
            }
        )
    if '"relevant": true' in prompt:
        return reply({"verdicts": [{"chunk_id": c, "relevant": True} for c in ("c1", "c2", "c3")]})
    if '"chunk_id"' in prompt:
        return reply({"verdicts": [{"chunk_id": "c1", "supported": True}]})
    if '"declined"' in prompt:
        return reply({"declined": refusal})
    if '"complete"' in prompt:
        return reply({"verdict": "partial"})
    return reply({"verdict": "relevant"})


def _project(
    root: Path, cases: list[dict[str, Any]], replay: list[dict[str, Any]], extra_yaml: str = ""
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "replay.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replay))
    (root / "ragproof.yaml").write_text(
        "dataset: cases.jsonl\nadapter: {type: replay, path: replay.jsonl, concurrency: 1}\n"
        "run: {store: .ragproof/store.sqlite}\n" + extra_yaml
    )
    return root


def _ragproof(
    cwd: Path, server: JudgeServer, *args: str, **variables: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPROOF_")}
    env.update(
        RAGPROOF_JUDGE_MODEL="judge-a", RAGPROOF_JUDGE_BASE_URL=server.openai_url, OPENAI_API_KEY="sk-x"
    )
    env.update(variables)
    return subprocess.run(
        [sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {row["case_id"]: row for row in map(json.loads, (run_dir / "rows.jsonl").read_text().splitlines())}


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer(responder) as srv:
        yield srv


def test_second_identical_run_makes_zero_judge_requests(server: JudgeServer, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", CASES, REPLAY)
    first = _ragproof(root, server, "run", "--out", "run1", "--no-progress")
    assert first.returncode == 0, first.stderr
    calls = server.count
    assert calls == 18  # q1: 8 tasks (7 prompts + refusal); q2, q3: 5 each (no expected answer, no citations)
    second = _ragproof(root, server, "run", "--out", "run2", "--no-progress")
    assert second.returncode == 0, second.stderr
    assert server.count == calls  # every verdict from the cache
    meta1, meta2 = (json.loads((root / d / "run.json").read_text()) for d in ("run1", "run2"))
    assert meta1["cost"]["judge_calls"] == 18 and meta1["cost"]["cache_hits"] == 0
    assert meta2["cost"]["judge_calls"] == 0 and meta2["cost"]["cache_hits"] == 18
    assert meta1["judge"] == meta2["judge"] and meta1["judge"]["model"] == "judge-a"
    values1 = {
        cid: {n: m["value"] for n, m in r["metrics"].items()} for cid, r in _rows(root / "run1").items()
    }
    values2 = {
        cid: {n: m["value"] for n, m in r["metrics"].items()} for cid, r in _rows(root / "run2").items()
    }
    assert values1 == values2
    assert all(b["temperature"] == 0 and b["model"] == "judge-a" for b in server.requests)
    nocache = _ragproof(root, server, "run", "--out", "run3", "--no-progress", "--no-cache")
    assert nocache.returncode == 0 and server.count == 2 * calls


def test_run_rows_carry_verdicts_and_refusal_is_not_applicable(server: JudgeServer, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", CASES, REPLAY)
    assert _ragproof(root, server, "run", "--out", "run1", "--no-progress").returncode == 0
    rows = _rows(root / "run1")
    grounded = rows["q1"]["metrics"]["generation.groundedness"]
    assert (grounded["status"], grounded["value"]) == ("scored", 0.5)
    assert grounded["judge"]["judge_raw_json"] and grounded["judge"]["model"] == "judge-a"
    refusal = rows["q2"]["metrics"]
    assert refusal["generation.groundedness"]["status"] == "not_applicable"
    assert refusal["judge.faithfulness"]["status"] == "not_applicable"
    assert (refusal["robustness.abstention"]["status"], refusal["robustness.abstention"]["value"]) == (
        "scored",
        1.0,
    )
    assert rows["q1"]["metrics"]["generation.completeness"]["value"] == 0.5
    summary = json.loads((root / "run1" / "summary.json").read_text())
    assert summary["slices"]["all"]["generation.groundedness"]["not_applicable"] == 1


def _six_case_project(tmp_path: Path) -> Path:
    """Six qa cases scored by answer relevance alone, one judge call at a time."""
    cases = [{"id": f"q{i}", "question": f"Question number {i}?"} for i in range(6)]
    replay = [{"id": f"q{i}", "answer": {"text": f"Answer {i}."}} for i in range(6)]
    metrics = "run: {store: s.sqlite, metrics: [generation.answer_relevance]}\njudge: {concurrency: 1}\n"
    return _project(tmp_path / "p", cases, replay, metrics)


def _run_to_the_budget(
    root: Path, server: JudgeServer, usd: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``run --out run1`` at $1 per million input tokens under a budget of ``usd``: exit 2, aborted:budget."""
    proc = _ragproof(
        root,
        server,
        "run",
        "--out",
        "run1",
        "--no-progress",
        RAGPROOF_JUDGE_INPUT_COST_PER_MTOK="1",
        RAGPROOF_JUDGE_OUTPUT_COST_PER_MTOK="0",
        RAGPROOF_MAX_COST_USD=usd,
    )
    assert proc.returncode == 2, proc.stderr
    meta = json.loads((root / "run1" / "run.json").read_text())
    assert meta["status"] == "aborted:budget"
    return proc, meta


def test_budget_breach_mid_run_exits_2_and_keeps_finished_rows(server: JudgeServer, tmp_path: Path) -> None:
    root = _six_case_project(tmp_path)
    server.responder = lambda body: reply({"verdict": "relevant"}, usage=(1_000_000, 0))  # $1.00 a call
    proc, meta = _run_to_the_budget(root, server, "3")
    assert (meta["cost"]["usd"], meta["cost"]["judge_calls"]) == (3.0, 3)
    rows = _rows(root / "run1")
    assert len(rows) == 3 and server.count == 3
    assert all(r["metrics"]["generation.answer_relevance"]["value"] == 1.0 for r in rows.values())
    assert "Traceback" not in proc.stderr


def test_judge_cost_at_a_budget_stop_equals_the_calls_the_judge_received(
    server: JudgeServer, tmp_path: Path
) -> None:
    """Two judge calls at a time: q0 answers at once, q1 after 0.3 s, q2 after 1.5 s. After q1
    settles ($2 spent of $1.50), the next call is refused: q2's call is in flight at the stop.
    Its cost counts too (the run waits for it), so run.json matches the server's own counter."""
    cases = [{"id": f"q{i}", "question": f"Question number {i}?"} for i in range(6)]
    replay = [{"id": f"q{i}", "answer": {"text": f"Answer {i}."}} for i in range(6)]
    root = _project(tmp_path / "p", cases, replay)
    (root / "ragproof.yaml").write_text(
        "dataset: cases.jsonl\nadapter: {type: replay, path: replay.jsonl, concurrency: 2}\n"
        "run: {store: s.sqlite, metrics: [generation.answer_relevance]}\njudge: {concurrency: 2}\n"
    )
    delays = {"Question number 0?": 0.0, "Question number 1?": 0.3}

    def responder(body: dict[str, Any]) -> Step:
        prompt = user_prompt(body)
        delay = next((d for q, d in delays.items() if q in prompt), 1.5)
        return Step(text=json.dumps({"verdict": "relevant"}), delay_s=delay, usage=(1_000_000, 0))

    server.responder = responder
    _, meta = _run_to_the_budget(root, server, "1.5")
    assert server.count == 3  # q0, q1 and the call in flight at the stop
    assert (meta["cost"]["judge_calls"], meta["cost"]["usd"]) == (server.count, 3.0)
    assert sorted(_rows(root / "run1")) == ["q0", "q1"]


def test_rescore_rejudges_with_the_current_judge(server: JudgeServer, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", CASES, REPLAY)
    assert _ragproof(root, server, "run", "--out", "base", "--no-progress").returncode == 0
    before = server.count
    server.responder = lambda body: (
        reply({"verdict": "irrelevant"}) if '"irrelevant"' in user_prompt(body) else responder(body)
    )
    proc = _ragproof(root, server, "rescore", "base", "--out", "base-b", RAGPROOF_JUDGE_MODEL="judge-b")
    assert proc.returncode == 0, proc.stderr
    assert server.count == before + 18 and all(b["model"] == "judge-b" for b in server.requests[before:])
    old, new = _rows(root / "base"), _rows(root / "base-b")
    for cid in old:
        assert new[cid]["metrics"]["generation.answer_relevance"]["value"] == 0.0
        # deterministic results are kept as stored
        assert (
            new[cid]["metrics"]["generation.citation_validity"]
            == old[cid]["metrics"]["generation.citation_validity"]
        )
    meta = json.loads((root / "base-b" / "run.json").read_text())
    assert meta["judge"]["model"] == "judge-b" and meta["cost"]["judge_calls"] == 18
    summary = json.loads((root / "base-b" / "summary.json").read_text())
    assert summary["slices"]["all"]["generation.answer_relevance"]["mean"] == 0.0


def test_rescore_refuses_another_dataset(server: JudgeServer, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", CASES, REPLAY)
    assert _ragproof(root, server, "run", "--out", "base", "--no-progress").returncode == 0
    (root / "cases.jsonl").write_text("".join(json.dumps({**c, "tags": ["edited"]}) + "\n" for c in CASES))
    proc = _ragproof(root, server, "rescore", "base")
    assert proc.returncode == 65
    assert (
        "rescore needs the dataset the run used" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    )


def test_estimate_calls_nothing_and_counts_tasks(server: JudgeServer, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", CASES, REPLAY)
    proc = _ragproof(
        root,
        server,
        "run",
        "--estimate",
        RAGPROOF_JUDGE_INPUT_COST_PER_MTOK="2.5",
        RAGPROOF_JUDGE_OUTPUT_COST_PER_MTOK="10",
    )
    assert proc.returncode == 0, proc.stderr
    assert server.count == 0
    config = load_config(
        root / "ragproof.yaml",
        {
            "RAGPROOF_JUDGE_MODEL": "judge-a",
            "RAGPROOF_JUDGE_INPUT_COST_PER_MTOK": "2.5",
            "RAGPROOF_JUDGE_OUTPUT_COST_PER_MTOK": "10",
        },
    )
    estimate = estimate_run(config, load_dataset(root / "cases.jsonl"))
    # q1: 8 tasks (all, with refusal for over-refusal); q2 (unanswerable): 6; q3 (no expected answer): 6
    assert estimate.calls == 20
    assert estimate.calls_by_task == {
        "answer_relevance": 3,
        "citation_support": 3,
        "claims": 3,
        "completeness": 1,
        "context_recall": 1,
        "context_relevance": 3,
        "faithfulness": 3,
        "refusal": 3,
    }
    assert estimate.usd == pytest.approx(
        (estimate.input_tokens * 2.5 + estimate.output_tokens * 10) / 1e6, abs=1e-12
    )
    first = proc.stdout.splitlines()[0]
    assert first == (
        f"judge judge-a: 20 calls for 3 cases, {estimate.input_tokens} input tokens, "
        f"{estimate.output_tokens} output tokens, ${estimate.usd:.4f}"
    )


def test_rescored_baseline_becomes_comparable(server: JudgeServer, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", CASES, REPLAY)
    judge_b = {"RAGPROOF_JUDGE_MODEL": "judge-b"}
    assert _ragproof(root, server, "run", "--out", "base", "--no-progress").returncode == 0
    assert _ragproof(root, server, "run", "--out", "cand", "--no-progress", **judge_b).returncode == 0
    mixed = _ragproof(root, server, "compare", "base", "cand")
    assert mixed.returncode == 3 and "judge model" in mixed.stderr
    assert _ragproof(root, server, "rescore", "base", "--out", "base-b", **judge_b).returncode == 0
    fixed = _ragproof(root, server, "compare", "base-b", "cand")
    assert fixed.returncode == 0, fixed.stderr


def test_rescore_budget_breach_exits_2_without_stale_verdicts(server: JudgeServer, tmp_path: Path) -> None:
    root = _six_case_project(tmp_path)
    assert _ragproof(root, server, "run", "--out", "base", "--no-progress").returncode == 0
    server.responder = lambda body: reply({"verdict": "partial"}, usage=(1_000_000, 0))
    prices = {"RAGPROOF_JUDGE_INPUT_COST_PER_MTOK": "1", "RAGPROOF_MAX_COST_USD": "3"}
    proc = _ragproof(root, server, "rescore", "base", "--out", "b", RAGPROOF_JUDGE_MODEL="judge-b", **prices)
    assert proc.returncode == 2, proc.stderr
    assert json.loads((root / "b" / "run.json").read_text())["status"] == "aborted:budget"
    results = [r["metrics"]["generation.answer_relevance"] for r in _rows(root / "b").values()]
    assert [r["value"] for r in results] == [0.5, 0.5, 0.5, None, None, None]
    assert [r["reason"] for r in results[3:]] == [REASON_NOT_RESCORED] * 3


def test_composite_trust_in_a_run_costs_no_extra_calls(server: JudgeServer, tmp_path: Path) -> None:
    weights = "composite: {weights: {generation.groundedness: 0.5, generation.answer_relevance: 0.5}}\n"
    root = _project(tmp_path / "p", CASES, REPLAY, weights)
    proc = _ragproof(root, server, "run", "--out", "run1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert server.count == 18  # as without the composite
    rows = _rows(root / "run1")
    q1, q2 = rows["q1"]["metrics"], rows["q2"]["metrics"]
    # q1: groundedness 0.5, relevance 1.0; q2: groundedness not_applicable, dropped
    assert q1["composite.trust"]["value"] == pytest.approx(0.5**0.5, abs=1e-12)
    assert q1["composite.trust_arithmetic"]["value"] == pytest.approx(0.75, abs=1e-12)
    assert (q2["composite.trust"]["value"], q2["composite.trust_arithmetic"]["value"]) == (1.0, 1.0)


def test_estimate_counts_composite_components(tmp_path: Path) -> None:
    root = _project(
        tmp_path / "p",
        CASES,
        REPLAY,
        "judge: {model: m}\ncomposite: {weights: {judge.faithfulness: 1}}\n",
    )
    config = load_config(root / "ragproof.yaml", {})
    dataset = load_dataset(root / "cases.jsonl")
    only_composite = estimate_run(config, dataset, ["composite.trust"])
    assert (only_composite.calls, only_composite.calls_by_task) == (3, {"faithfulness": 3})
    assert estimate_run(config, dataset, ["answer.token_f1"]).calls == 0
    config.judge.model = None
    assert estimate_run(config, dataset, ["judge.faithfulness"]).calls == 0


def test_estimate_without_a_judge(server: JudgeServer, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", CASES, REPLAY)
    proc = _ragproof(root, server, "run", "--estimate", RAGPROOF_JUDGE_MODEL="")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "no judge configured (RAGPROOF_JUDGE_MODEL): 0 judge calls for 3 cases, $0.0000\n"
    assert server.count == 0
