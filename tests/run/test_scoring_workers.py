"""Scoring on judge threads gives the same results as scoring inline."""

from __future__ import annotations

import asyncio
from typing import cast

from gate.judge.session import JudgeSession
from gate.metrics.base import ScoringContext
from gate.model.config import ScoringSettings
from gate.model.dataset import Case
from gate.model.records import Answer, CaseOutput, Chunk, MetricResult
from gate.run.scoring import select_metrics
from gate.run.scoring_workers import InlineScorer, ThreadScorer, make_scorer


def _cases() -> list[tuple[Case, CaseOutput]]:
    out = []
    for i in range(6):
        case = Case(
            id=str(i),
            question="How long is the warranty?",
            expected_source_ids=["d1"],
            expected_answer="12 months",
            kind="qa" if i % 3 else "unanswerable",
        )
        output = CaseOutput(
            retrieved=[Chunk(id="d1" if i % 2 else "d2", text="The warranty lasts 12 months.")],
            answer=Answer(text="12 months" if i % 2 else "I cannot answer that.", citations=["d1"]),
            supports_retrieve=True,
            supports_answer=True,
        )
        out.append((case, output))
    return out


def _score_all(scorer: InlineScorer) -> list[dict[str, MetricResult]]:
    async def go() -> list[dict[str, MetricResult]]:
        return [await scorer.score(case, output) for case, output in _cases()]

    try:
        return asyncio.run(go())
    finally:
        scorer.close()


def test_thread_scoring_equals_inline_scoring() -> None:
    ctx = ScoringContext(settings=ScoringSettings(k=3))
    names = select_metrics("all")
    inline = _score_all(InlineScorer(ctx, names))
    assert any(r.status == "scored" for results in inline for r in results.values())
    dumped = [{n: r.model_dump() for n, r in results.items()} for results in inline]
    threaded = _score_all(ThreadScorer(ctx, names, 2))
    assert [{n: r.model_dump() for n, r in results.items()} for results in threaded] == dumped


def test_choice_of_scorer() -> None:
    ctx = ScoringContext()
    plain = make_scorer(ctx, [], judge_threads=2)
    judged = make_scorer(ScoringContext(judge=cast("JudgeSession", object())), [], judge_threads=2)
    try:
        assert type(plain) is InlineScorer and type(judged) is ThreadScorer
    finally:
        for scorer in (plain, judged):
            scorer.close()
