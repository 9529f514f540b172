"""Where the runner scores finished cases: on the event loop, on judge threads, or in a child process.

- ``InlineScorer``: in the event loop's thread; for small runs (a child is not worth starting).
- ``ThreadScorer``: a judge is configured; judge metrics block on HTTP, so scoring runs on
  ``judge.concurrency`` threads and the loop keeps driving the pipeline meanwhile.
- ``ProcessScorer``: no judge and many cases. Deterministic metrics are pure CPU (about a
  millisecond a case for the full registry); on the runner's one interpreter they would
  compete with the pipeline calls for the GIL. A forked child scores instead, fed case and
  output as JSON, so the loop's core is left to the I/O (``bench/throughput.py``).

All three return the same results: ``gate.scoring.score_case`` with a fresh context per case.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from gate.dataset import Case
from gate.metrics.base import MetricResult, ScoringContext
from gate.records import CaseOutput

# Below this many cases to score, a child process costs more than it saves.
PROCESS_MIN_CASES = 100


def score_with(
    ctx: ScoringContext, metric_names: list[str], case: Case, output: CaseOutput
) -> dict[str, MetricResult]:
    from gate.scoring import score_case

    # A fresh context per case: metrics may keep per-case state in ctx.extras.
    fresh = dataclasses.replace(ctx, extras=dict(ctx.extras))
    return score_case(case, output, fresh, metric_names)


class InlineScorer:
    def __init__(self, ctx: ScoringContext, metric_names: list[str]) -> None:
        self._ctx = ctx
        self._names = metric_names

    async def score(self, case: Case, output: CaseOutput) -> dict[str, MetricResult]:
        return score_with(self._ctx, self._names, case, output)

    def close(self) -> None:
        pass


class _ExecutorScorer(InlineScorer):
    _executor: Executor

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class ThreadScorer(_ExecutorScorer):
    def __init__(self, ctx: ScoringContext, metric_names: list[str], threads: int) -> None:
        super().__init__(ctx, metric_names)
        self._executor = ThreadPoolExecutor(max(1, threads), thread_name_prefix="judge")

    async def score(self, case: Case, output: CaseOutput) -> dict[str, MetricResult]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, score_with, self._ctx, self._names, case, output)


# -- the child process --------------------------------------------------------------------

_child_ctx: ScoringContext | None = None
_child_names: list[str] = []


def _child_init(ctx: ScoringContext, metric_names: list[str]) -> None:
    global _child_ctx, _child_names
    _child_ctx, _child_names = ctx, metric_names


def _child_score(case_json: str, output_json: str) -> str:
    assert _child_ctx is not None
    case = Case.model_validate_json(case_json)
    output = CaseOutput.model_validate_json(output_json)
    results = score_with(_child_ctx, _child_names, case, output)
    return json.dumps({name: result.model_dump(mode="json") for name, result in results.items()})


class ProcessScorer(_ExecutorScorer):
    def __init__(self, ctx: ScoringContext, metric_names: list[str]) -> None:
        super().__init__(ctx, metric_names)
        methods = multiprocessing.get_all_start_methods()
        # fork: the child starts at once with the metric registry already imported.
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self._executor = ProcessPoolExecutor(
            1, mp_context=context, initializer=_child_init, initargs=(ctx, metric_names)
        )
        # Start the child now, before the adapter starts threads a fork would copy mid-flight.
        self._executor.submit(int).result()

    async def score(self, case: Case, output: CaseOutput) -> dict[str, MetricResult]:
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(
            self._executor, _child_score, case.model_dump_json(), output.model_dump_json()
        )
        # The child validated these already (they are its own MetricResult dumps).
        return {name: MetricResult.model_construct(**value) for name, value in json.loads(text).items()}


def make_scorer(ctx: ScoringContext, metric_names: list[str], *, cases: int, judge_threads: int) -> Any:
    """The scorer for a run of ``cases`` cases (see the module docstring for the choice)."""
    if ctx.judge is not None:
        return ThreadScorer(ctx, metric_names, judge_threads)
    if cases >= PROCESS_MIN_CASES:
        return ProcessScorer(ctx, metric_names)
    return InlineScorer(ctx, metric_names)
