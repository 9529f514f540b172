"""Re-scoring a stored run's answers with the current judge (``ragproof rescore``).

A judge change (model or prompt) makes old and new scores incomparable; instead of mixing
them, the baseline's stored answers and contexts are judged again. Only the metrics that
depend on the judge are recomputed: the judge metrics, the metrics that consult the judge
when one is configured (abstention, over-refusal) and the composites built on them. Every
other result, and the rows of failed cases, are kept as stored.

The cases come from the dataset (rows store no question or expected answer), which must be
the run's: its sha256 must match ``run.json``.
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gate.core.errors import BudgetExceeded, DataError
from gate.metrics.base import MetricSpec, ScoringContext
from gate.model.artifact import Row, RunArtifact
from gate.model.dataset import Case, Dataset
from gate.model.records import CaseOutput, MetricResult

REASON_NOT_RESCORED = "not re-scored: the judge budget (RAGPROOF_MAX_COST_USD) was exhausted"


def judge_dependent(spec: MetricSpec) -> bool:
    """True for the metrics a judge change can move."""
    return spec.kind == "judge" or spec.uses_judge_when_available or spec.name.startswith("composite.")


@dataclass
class Rescored:
    rows: list[Row]
    budget_exhausted: bool
    rescored_metrics: list[str]


def _output(row: Row) -> CaseOutput:
    return CaseOutput(
        retrieved=row.retrieved,
        answer=row.answer,
        supports_retrieve=row.retrieved is not None,
        supports_answer=row.answer is not None,
    )


def rescore_rows(
    artifact: RunArtifact, dataset: Dataset, ctx: ScoringContext, concurrency: int = 4
) -> Rescored:
    """The artifact's rows with every judge-dependent metric recomputed under ``ctx.judge``.

    On BudgetExceeded, rows not finished keep no stale judge result: those metrics become
    skipped with :data:`REASON_NOT_RESCORED`.
    """
    from gate.metrics import registry

    if dataset.sha256 != artifact.meta.dataset.sha256:
        raise DataError(
            f"{artifact.source}: the run's dataset (sha256 {artifact.meta.dataset.sha256[:12]}) is not "
            f"{dataset.path} (sha256 {dataset.sha256[:12]}); rescore needs the dataset the run used"
        )
    specs = registry()
    names = [n for n in artifact.meta.metrics if n in specs and judge_dependent(specs[n])]
    cases = dataset.by_id()
    stop = threading.Event()

    def rescore(row: Row) -> Row | None:
        if row.status != "ok" or not names:
            return row
        case: Case | None = cases.get(row.case_id)
        if case is None:
            raise DataError(f"{artifact.source}: row {row.case_id!r} is not a case of {dataset.path}")
        if stop.is_set():
            return None
        results = dict(row.metrics)
        case_ctx = dataclasses.replace(ctx, results=results)
        output = _output(row)
        try:
            for name in names:
                results[name] = specs[name].score(case, output, case_ctx)
        except BudgetExceeded:
            stop.set()
            return None
        return row.model_copy(update={"metrics": results})

    with ThreadPoolExecutor(max(1, concurrency), "rescore") as pool:
        done = list(pool.map(rescore, artifact.rows))
    rows = []
    for original, new in zip(artifact.rows, done, strict=True):
        if new is None:
            stale = dict(original.metrics)
            for name in names:
                stale[name] = MetricResult.skipped(REASON_NOT_RESCORED)
            new = original.model_copy(update={"metrics": stale})
        rows.append(new)
    return Rescored(rows, stop.is_set(), names)
