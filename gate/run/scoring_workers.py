"""Where the runner scores finished cases: on the event loop, or on judge threads.

- ``InlineScorer`` (no judge): deterministic metrics are pure CPU, well under a millisecond a
  case for the whole registry, so they run in the event loop's thread. (A scoring child
  process was measured too: the executor's feeder and manager threads cost the loop more CPU
  per case than the scoring itself.)
- ``ThreadScorer`` (a judge is configured): judge metrics block on HTTP, so scoring runs on
  ``judge.concurrency`` threads and the loop keeps driving the pipeline meanwhile. Closing it
  waits for the scoring in progress (a stop must not leave judge calls uncounted).

Both return the same results: ``gate.run.scoring.score_case``, which gives each case a fresh context.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from gate.metrics.base import ScoringContext
from gate.model.dataset import Case
from gate.model.records import CaseOutput, MetricResult
from gate.run.scoring import score_case


class InlineScorer:
    """Scores on the caller's thread (the event loop's)."""

    def __init__(self, ctx: ScoringContext, metric_names: list[str]) -> None:
        self._ctx = ctx
        self._names = metric_names

    async def score(self, case: Case, output: CaseOutput) -> dict[str, MetricResult]:
        return score_case(case, output, self._ctx, self._names)

    def close(self) -> None:
        pass


class ThreadScorer(InlineScorer):
    def __init__(self, ctx: ScoringContext, metric_names: list[str], threads: int) -> None:
        super().__init__(ctx, metric_names)
        self._executor = ThreadPoolExecutor(max(1, threads), thread_name_prefix="judge")

    def close(self) -> None:
        # Scoring not started is dropped; scoring in progress is waited for, so every judge call
        # already sent settles its cost before run.json is written (at a budget stop, the cost
        # recorded equals the calls the judge received; a verdict obtained also lands in the cache).
        self._executor.shutdown(wait=True, cancel_futures=True)

    async def score(self, case: Case, output: CaseOutput) -> dict[str, MetricResult]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, score_case, case, output, self._ctx, self._names)


def make_scorer(ctx: ScoringContext, metric_names: list[str], *, judge_threads: int) -> InlineScorer:
    """Threads when a judge is configured, else inline (see the module docstring)."""
    if ctx.judge is not None:
        return ThreadScorer(ctx, metric_names, judge_threads)
    return InlineScorer(ctx, metric_names)
