"""The bundled example: corpus, dataset, both pipeline variants and the effect the demo relies on.

The demo compares a baseline with a candidate that is better overall but worse on one topic
(billing, whose answers sit in table cells that the candidate's smaller chunks cut off from
their header row). These tests score both variants over the bundled dataset with the real
metric registry and check that the effect holds the way the gate will see it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from bench_helpers import load_file
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.adapters.base import parse_answer, parse_chunks
from gate.adapters.python import load_pipeline
from gate.metrics import registry
from gate.metrics.base import ScoringContext
from gate.metrics.robustness import detect_refusal
from gate.model.config import ScoringSettings, load_config
from gate.model.dataset import Case, Dataset, load_dataset
from gate.model.records import CaseOutput
from gate.stats import bootstrap_means

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"
HURT_TOPIC = "topic:billing"
RETRIEVAL = (
    "retrieval.recall_at_k",
    "retrieval.hit_rate_at_k",
    "retrieval.mrr",
    "retrieval.ndcg_at_k",
    "retrieval.precision_at_k",
)
ANSWER = ("answer.exact_match", "answer.token_f1")


# A private name, so this copy never collides with the adapter's own import of "pipeline".
demo = load_file("demo_pipeline_under_test", DEMO / "pipeline.py")

Scores = dict[str, dict[str, float | None]]


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    config = load_config(DEMO / "ragproof.yaml")
    return load_dataset(config.resolve(config.dataset))


def run_variant(pipe: Any, cases: Iterable[Case], k: int = 5) -> tuple[Scores, dict[str, dict[str, Any]]]:
    """Per-case metric values (None unless scored) and raw answers, through the adapter's parsers."""
    specs = registry()
    names = [*RETRIEVAL, *ANSWER, "answer.numeric_match", "generation.citation_validity"]
    names += ["robustness.injection_resistance", "robustness.abstention", "robustness.overrefusal"]
    ctx = ScoringContext(settings=ScoringSettings(k=k, source_match="document"))
    scores: Scores = {}
    answers: dict[str, dict[str, Any]] = {}
    for case in cases:
        raw_answer = pipe.answer(case.question)
        output = CaseOutput(
            retrieved=parse_chunks(pipe.retrieve(case.question, k)),
            answer=parse_answer(raw_answer),
            supports_retrieve=True,
            supports_answer=True,
        )
        results = {name: specs[name].score(case, output, ctx) for name in names}
        scores[case.id] = {n: (r.value if r.status == "scored" else None) for n, r in results.items()}
        answers[case.id] = raw_answer
    return scores, answers


@pytest.fixture(scope="module")
def runs(dataset: Dataset) -> dict[str, tuple[Scores, dict[str, dict[str, Any]]]]:
    return {
        "baseline": run_variant(demo.make_baseline(), dataset.cases),
        "candidate": run_variant(demo.make_candidate(), dataset.cases),
    }


def slice_ids(dataset: Dataset, tag: str | None) -> list[str]:
    return [c.id for c in dataset.cases if tag is None or tag in c.tags]


def paired(scores_a: Scores, scores_b: Scores, ids: list[str], name: str) -> tuple[list[float], list[float]]:
    pairs = [(scores_a[i][name], scores_b[i][name]) for i in ids]
    kept = [(a, b) for a, b in pairs if a is not None and b is not None]
    return [a for a, _ in kept], [b for _, b in kept]


# ------------------------------------------------------------------ corpus and chunks


def test_corpus_has_forty_documents_on_at_least_three_topics() -> None:
    docs = demo.load_documents()
    assert len(docs) >= 40
    assert len({d.id for d in docs}) == len(docs)
    topics = {d.topic for d in docs}
    assert {"billing", "security", "sync", "installation", "backup"} <= topics
    for doc in docs:
        assert Path(demo.CORPUS_DIR / f"{doc.id}.md").is_file(), "file name must equal the front-matter id"


@pytest.mark.parametrize("factory", ["make_baseline", "make_candidate"])
def test_chunk_ids_and_metadata_shape(factory: str) -> None:
    pipe = getattr(demo, factory)()
    doc_ids = {d.id for d in demo.load_documents()}
    ids = [c["id"] for c in pipe.chunks]
    assert len(ids) == len(set(ids))
    per_doc: dict[str, list[int]] = {}
    for chunk in pipe.chunks:
        match = re.fullmatch(r"(.+)#(\d+)", chunk["id"])
        assert match, chunk["id"]
        assert chunk["metadata"]["document_id"] == match.group(1) in doc_ids
        assert chunk["text"].strip()
        per_doc.setdefault(match.group(1), []).append(int(match.group(2)))
    # every document is chunked, numbered 0..n-1 in order
    assert set(per_doc) == doc_ids
    assert all(nums == list(range(len(nums))) for nums in per_doc.values())
    hits = pipe.retrieve("How many devices can one user connect?", 5)
    assert 0 < len(hits) <= 5
    for hit in hits:
        assert set(hit) == {"id", "text", "score", "metadata"}
        assert isinstance(hit["score"], float)
        assert hit["metadata"]["document_id"] in doc_ids
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_candidate_chunks_are_smaller_and_split_tables_from_their_header() -> None:
    base, cand = demo.make_baseline(), demo.make_candidate()
    assert len(cand.chunks) > 1.5 * len(base.chunks)
    plans = [c["text"] for c in cand.chunks if c["metadata"]["document_id"] == "billing-plans"]
    header_free_rows = [t for t in plans if t.startswith("| Team") and "Price per seat" not in t]
    assert header_free_rows, plans
    whole_table = [c["text"] for c in base.chunks if c["metadata"]["document_id"] == "billing-plans"]
    assert any("Price per seat" in t and "| Enterprise |" in t for t in whole_table)


def test_bm25_ties_break_by_collection_order_and_unknown_terms_weigh_most() -> None:
    index = demo.BM25([["alpha", "beta"], ["alpha", "beta"], ["gamma"]])
    assert index.top(["alpha"], 5) == [
        (0, pytest.approx(index.score(["alpha"], 0))),
        (1, pytest.approx(index.score(["alpha"], 1))),
    ]
    assert index.top(["delta"], 5) == []
    assert index.idf("delta") > index.idf("gamma") > index.idf("alpha") > 0
    assert index.idf_mass(["alpha", "alpha", "delta"]) == pytest.approx(
        index.idf("alpha") + index.idf("delta")
    )


_WORDS = st.sampled_from(["seat", "plan", "price", "sync", "note", "key", "trash", "port"])


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(_WORDS, max_size=8), min_size=1, max_size=12),
    query=st.lists(_WORDS, min_size=1, max_size=5),
    k=st.integers(min_value=1, max_value=15),
)
def test_bm25_ranking_is_total_positive_and_ignores_repeated_query_words(
    docs: list[list[str]], query: list[str], k: int
) -> None:
    index = demo.BM25(docs)
    top = index.top(query, k)
    assert len(top) <= k
    assert all(score > 0 for _, score in top)
    assert [i for i, _ in top] == sorted(
        (i for i in range(len(docs)) if index.score(query, i) > 0), key=lambda i: (-index.score(query, i), i)
    )[:k]
    assert index.top(query + query, k) == top
    # a chunk holding none of the query words never appears
    assert all(set(docs[i]) & set(query) for i, _ in top)


def test_light_stemmer_joins_common_forms() -> None:
    stem = demo.light_stem
    assert stem("rotate") == stem("rotated") == stem("rotating")
    assert stem("copies") == stem("copy")
    assert stem("attachments") == stem("attachment")
    assert stem("access") == "access" and stem("status") == "status"


# ------------------------------------------------------------------ dataset


def test_dataset_loads_and_every_expected_source_and_answer_is_in_the_corpus(dataset: Dataset) -> None:
    docs = {d.id: d for d in demo.load_documents()}
    kinds = [c.kind for c in dataset.cases]
    assert len(dataset) >= 80
    assert kinds.count("qa") >= 60 and kinds.count("unanswerable") >= 10 and kinds.count("injection") >= 10
    topics = {t for c in dataset.cases for t in c.tags if t.startswith("topic:")}
    assert len(topics) >= 3
    for case in dataset.cases:
        if case.kind == "qa":
            assert case.expected_source_ids and case.expected_answer, case.id
            for source in case.expected_source_ids:
                assert source in docs, f"{case.id}: unknown document {source}"
            # extractive: the expected answer is text of its source page
            assert case.expected_answer in docs[case.expected_source_ids[0]].body, case.id
            assert case.metadata["document_id"] == case.expected_source_ids[0]
        else:
            assert not case.expected_source_ids and case.expected_answer is None, case.id
        if case.kind == "injection":
            assert case.adversarial_payload, case.id
    numeric = [c for c in dataset.cases if c.expected_answer and re.search(r"\d", c.expected_answer)]
    assert len(numeric) >= 30
    hurt = [c for c in dataset.cases if c.kind == "qa" and HURT_TOPIC in c.tags]
    assert len(hurt) >= 15


def test_literal_markers_of_indirect_injections_are_planted_in_the_corpus(dataset: Dataset) -> None:
    corpus = " ".join(d.body for d in demo.load_documents())
    indirect = [c for c in dataset.cases if "attack:indirect" in c.tags]
    assert len(indirect) >= 5
    for case in indirect:
        assert case.adversarial_payload is not None and case.adversarial_payload in corpus, case.id
    direct_markers = [c.adversarial_payload or "" for c in dataset.cases if "attack:direct" in c.tags]
    assert all(m not in corpus for m in direct_markers)


def test_configs_name_the_two_factories_and_the_adapter_loads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # the adapter puts the config's folder on sys.path and imports "pipeline": undo both afterwards
    monkeypatch.setattr(sys, "path", list(sys.path))
    if "pipeline" not in sys.modules:
        monkeypatch.setitem(sys.modules, "pipeline", None)
        monkeypatch.delitem(sys.modules, "pipeline")
    for name, factory in (("ragproof.yaml", "make_baseline"), ("candidate.yaml", "make_candidate")):
        config = load_config(DEMO / name)
        assert config.adapter.type == "python"
        assert config.adapter.target == f"pipeline:{factory}"
        assert config.run.source_match == "document" and config.run.k == 5
        assert config.judge.model is None
        pipe = load_pipeline(config.adapter.target, [config.base_dir])
        assert pipe.settings.name == factory.removeprefix("make_")


# ------------------------------------------------------------------ behaviour


def test_answers_are_deterministic_across_instances(dataset: Dataset) -> None:
    for factory in (demo.make_baseline, demo.make_candidate):
        first, second = factory(), factory()
        for case in dataset.cases:
            assert first.answer(case.question) == second.answer(case.question), case.id
            assert first.retrieve(case.question, 5) == second.retrieve(case.question, 5), case.id


def test_answers_cite_retrieved_chunks_or_decline(runs: dict[str, Any]) -> None:
    for variant, (_, answers) in runs.items():
        for case_id, answer in answers.items():
            retrieved = {c["id"] for c in answer["retrieved_chunks"]}
            if answer["text"] == demo.REFUSAL:
                assert answer["citations"] == [], (variant, case_id)
            else:
                assert len(answer["citations"]) == 1 and set(answer["citations"]) <= retrieved, (
                    variant,
                    case_id,
                )


def test_refusal_is_detected_by_the_heuristic_and_most_unanswerables_are_declined(
    dataset: Dataset, runs: dict[str, Any]
) -> None:
    assert detect_refusal(demo.REFUSAL)
    unanswerable = [c.id for c in dataset.cases if c.kind == "unanswerable"]
    for variant, (scores, answers) in runs.items():
        declined = [scores[i]["robustness.abstention"] for i in unanswerable]
        assert mean(declined) >= 0.75, variant
        # ...but not all: a question near a real topic still draws a confident wrong answer
        assert mean(declined) < 1.0, variant
        assert all(
            detect_refusal(answers[i]["text"]) == (answers[i]["text"] == demo.REFUSAL) for i in answers
        )


def test_injections_give_a_mix_of_outcomes(dataset: Dataset, runs: dict[str, Any]) -> None:
    injected = [c.id for c in dataset.cases if c.kind == "injection"]
    indirect = [c.id for c in dataset.cases if "attack:indirect" in c.tags]
    for variant, (scores, _) in runs.items():
        resisted = [scores[i]["robustness.injection_resistance"] for i in injected]
        assert None not in resisted
        assert 0.6 <= mean(resisted) < 1.0, variant
        # planted sentences that slip past the naive filter are what gets through
        assert 0 < mean(scores[i]["robustness.injection_resistance"] for i in indirect) < 1, variant
        direct = [scores[i]["robustness.injection_resistance"] for i in injected if i not in indirect]
        assert mean(direct) == 1.0, variant


def difference_interval(b: list[float], c: list[float]) -> tuple[float, float, float]:
    """(mean, lo, hi) of the percentile bootstrap of c - b, 10,000 resamples, seed 0."""
    r = bootstrap_means([y - x for x, y in zip(b, c, strict=True)], resamples=10_000, seed=0)
    return float(r.estimate[0]), float(r.lo[0]), float(r.hi[0])


def test_candidate_is_better_overall(dataset: Dataset, runs: dict[str, Any]) -> None:
    base, cand = runs["baseline"][0], runs["candidate"][0]
    everyone = slice_ids(dataset, None)
    for name in (*RETRIEVAL, *ANSWER):
        b, c = paired(base, cand, everyone, name)
        assert len(b) >= 80
        assert mean(c) > mean(b), name
    b, c = paired(base, cand, everyone, "robustness.overrefusal")
    assert mean(c) < mean(b) - 0.05
    # retrieval gates pass overall: the interval's lower end is above -margin
    for name in ("retrieval.recall_at_k", "retrieval.mrr", "retrieval.ndcg_at_k"):
        _, lo, _ = difference_interval(*paired(base, cand, everyone, name))
        assert lo >= -0.02, name


def test_candidate_is_clearly_worse_on_billing_and_better_on_every_other_topic(
    dataset: Dataset, runs: dict[str, Any]
) -> None:
    base, cand = runs["baseline"][0], runs["candidate"][0]
    hurt = [i for i in slice_ids(dataset, HURT_TOPIC) if base[i]["answer.exact_match"] is not None]
    assert len(hurt) >= 15
    for name in (*ANSWER, "answer.numeric_match"):
        b, c = paired(base, cand, hurt, name)
        assert mean(c) <= mean(b) - 0.25, name
        delta, lo, hi = difference_interval(b, c)
        # hi < 0: the slice's own interval lies wholly below zero, whatever the margin
        assert hi < 0, (name, delta, lo, hi)
    topics = {t for c in dataset.cases for t in c.tags if t.startswith("topic:")} - {HURT_TOPIC}
    for topic in sorted(topics):
        b, c = paired(base, cand, slice_ids(dataset, topic), "answer.token_f1")
        assert mean(c) > mean(b), topic


# ------------------------------------------------------------------ through the command line

_DUMP = """
import json, sys
sys.path.insert(0, sys.argv[1])
import pipeline
from gate.model.dataset import load_dataset
cases = load_dataset(sys.argv[1] + "/cases.jsonl").cases
for factory in (pipeline.make_baseline, pipeline.make_candidate):
    pipe = factory()
    for case in cases:
        print(json.dumps([pipe.retrieve(case.question, 5), pipe.answer(case.question)], sort_keys=True))
"""


def test_answers_do_not_depend_on_the_hash_seed() -> None:
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _DUMP, str(DEMO)], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].count("\n") == 2 * len(load_dataset(DEMO / "cases.jsonl"))


@pytest.mark.slow
def test_ragproof_run_scores_the_demo_like_the_registry_does(tmp_path: Path, runs: dict[str, Any]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gate",
            "run",
            "-c",
            str(DEMO / "ragproof.yaml"),
            "--out",
            "base",
            "--no-progress",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "base" / "rows.jsonl").read_text().splitlines()]
    scores = runs["baseline"][0]
    assert [r["case_id"] for r in rows] == list(scores)
    for row in rows:
        assert row["status"] == "ok", row["case_id"]
        for name, value in scores[row["case_id"]].items():
            assert row["metrics"][name]["value"] == value, (row["case_id"], name)
