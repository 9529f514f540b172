"""Two runs paired by case id: every metric's per-case values in both runs, oriented once.

This is the one place that pairs a baseline with a candidate; the comparison
(:mod:`gate.decision.compare`) and the reports' case views (:mod:`gate.report.cases`) both read
it, so a case is paired, counted and oriented the same way wherever it is shown.

Pairs. The cases of the candidate that the baseline has too, in the candidate's order. For a
metric, a case pairs when both runs scored it (status ``scored`` with a value), or when one run
scored it and the other could not because of its own output (below). A failed row (adapter
error, timeout) carries no score: it pairs only in ``adapter.failure_rate`` (1 for a failed
case, 0 otherwise), which every common case pairs for.

Missing outputs are losses. A metric skipped because the run's output lacked what it needs
-- no answer, an empty answer, no retrieved list, no context (:data:`MISSING_OUTPUT_REASONS`)
-- counts, in the pairs, as the metric's worst possible value (the low end of its
``value_range`` when higher is better, the high end otherwise), when the other run scored the
case. A candidate that stops answering 25 of 70 cases therefore loses those cases instead of
being compared on the other 45. The rule is symmetric (a case the baseline left unanswered and
the candidate answers is a gain), so the same rate of missing outputs in both runs does not
bias the difference. It applies to ``qa`` and ``injection`` cases; ``unanswerable`` cases keep
their own rules (not answering one may be right). A metric the registry does not know has no
known worst value and keeps only the cases both runs scored. A run's own summary is
unchanged: there, undefined is skipped with its reason, never 0.

Orientation. ``diff = candidate - baseline``, sign-flipped where lower is better, so a
positive difference is always an improvement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gate.core.errors import NotComparableError
from gate.decision.comparison import DatasetChange
from gate.metrics import registry
from gate.metrics.base import REASON_NO_ANSWER, REASON_NO_CONTEXT, REASON_NO_RETRIEVE, MetricSpec
from gate.metrics.diagnostics import REASON_ANSWER_NO_TOKENS, REASON_EMPTY_ANSWER
from gate.metrics.diagnostics import REASON_EMPTY_CONTEXT as REASON_EMPTY_DIAGNOSTIC_CONTEXT
from gate.metrics.judged import REASON_EMPTY_CONTEXT as REASON_EMPTY_JUDGED_CONTEXT
from gate.model.artifact import FAILURE_RATE_METRIC, Row, RunArtifact
from gate.model.slices import ALL_SLICE, slice_masks

# Skip reasons that say the run's own output lacked what the metric needs.
MISSING_OUTPUT_REASONS = frozenset(
    {
        REASON_NO_ANSWER,
        REASON_NO_RETRIEVE,
        REASON_NO_CONTEXT,
        REASON_EMPTY_ANSWER,
        REASON_ANSWER_NO_TOKENS,
        REASON_EMPTY_DIAGNOSTIC_CONTEXT,
        REASON_EMPTY_JUDGED_CONTEXT,
    }
)
# Case kinds where a missing output is a loss (an unanswerable case may rightly get no answer).
LOSS_KINDS = frozenset({"qa", "injection"})


@dataclass(frozen=True)
class Direction:
    """How a metric reads: ``higher_is_better`` None when unknown (unregistered, in no summary)."""

    higher_is_better: bool | None
    gate_by_default: bool
    categorical: bool
    worst: float | None  # its worst possible value, when the registry knows its range
    value_range: tuple[float, float] | None = None  # [low, high] of its values, when known


@dataclass(frozen=True)
class PairedColumn:
    """One metric over the paired cases.

    ``baseline`` / ``candidate``: the values the pairs use (NaN where the case does not pair),
    a missing output counted as ``worst``; ``diff``: oriented, NaN where unpaired;
    ``missing_baseline`` / ``missing_candidate``: where that run's value is such a loss.
    """

    name: str
    higher_is_better: bool
    baseline: np.ndarray
    candidate: np.ndarray
    diff: np.ndarray
    missing_baseline: np.ndarray
    missing_candidate: np.ndarray
    value_range: tuple[float, float] | None = None  # [low, high] of its values, when known

    @property
    def paired(self) -> np.ndarray:
        mask: np.ndarray = ~np.isnan(self.diff)
        return mask


@dataclass
class Pairing:
    """The rows of the cases present in both runs (candidate order), and their columns."""

    baseline: RunArtifact
    candidate: RunArtifact
    baseline_rows: list[Row]
    candidate_rows: list[Row]
    dataset: DatasetChange
    names: list[str]  # the metrics either run scored, in registry order
    _columns: dict[str, PairedColumn | None] = field(default_factory=dict, repr=False)
    _tables: dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = field(
        default_factory=dict, repr=False
    )
    _masks: dict[tuple[str, ...], dict[str, np.ndarray]] = field(default_factory=dict, repr=False)

    def masks(self, slices: Sequence[str]) -> dict[str, np.ndarray]:
        """Slice key -> membership mask over the pairs (:func:`gate.model.slices.slice_masks` of
        the candidate's rows), computed once per list of slice dimensions."""
        key = tuple(slices)
        if key not in self._masks:
            self._masks[key] = slice_masks(self.candidate_rows, slices)
        return self._masks[key]

    def direction(self, name: str) -> Direction:
        return metric_direction(name, self.baseline, self.candidate)

    def column(self, name: str) -> PairedColumn | None:
        """The metric's paired column, computed once; None when it is categorical or scored in
        neither run (nothing to pair)."""
        if name not in self._columns:
            self._columns[name] = self._column(name)
        return self._columns[name]

    def columns(self, names: Iterable[str] | None = None) -> dict[str, PairedColumn]:
        """Every pairable metric's column (``names``: default every metric either run scored),
        then ``adapter.failure_rate``."""
        out = {}
        for name in [*(self.names if names is None else names), FAILURE_RATE_METRIC]:
            column = self.column(name)
            if column is not None:
                out[name] = column
        return out

    def _table(self, role: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        if role not in self._tables:
            rows = self.baseline_rows if role == "baseline" else self.candidate_rows
            self._tables[role] = _score_table(rows, self.names)
        return self._tables[role]

    def _column(self, name: str) -> PairedColumn | None:
        if name == FAILURE_RATE_METRIC:
            b = np.array([r.status != "ok" for r in self.baseline_rows], dtype=np.float64)
            c = np.array([r.status != "ok" for r in self.candidate_rows], dtype=np.float64)
            none = np.zeros(b.size, dtype=bool)
            return PairedColumn(name, False, b, c, b - c, none, none, (0.0, 1.0))
        if name not in self.names:
            return None
        direction = self.direction(name)
        if direction.categorical:
            return None
        (b_values, b_missing), (c_values, c_missing) = (
            (t[0][name], t[1][name]) for t in (self._table("baseline"), self._table("candidate"))
        )
        if np.isnan(b_values).all() and np.isnan(c_values).all():
            return None
        b, c = b_values.copy(), c_values.copy()
        lost_b = np.zeros(b.size, dtype=bool)
        lost_c = np.zeros(b.size, dtype=bool)
        if direction.worst is not None:
            lost_c = c_missing & ~np.isnan(b_values)
            lost_b = b_missing & ~np.isnan(c_values)
            c[lost_c] = direction.worst
            b[lost_b] = direction.worst
        both = ~np.isnan(b) & ~np.isnan(c)
        hib = direction.higher_is_better is not False
        sign = 1.0 if hib else -1.0
        return PairedColumn(
            name,
            hib,
            np.where(both, b, np.nan),
            np.where(both, c, np.nan),
            np.where(both, sign * (c - b), np.nan),
            lost_b,
            lost_c,
            direction.value_range,
        )


def feasible(
    lo: float, hi: float, value_range: tuple[float, float] | None, *, level: bool = False
) -> tuple[float, float]:
    """``[lo, hi]`` clipped to what the quantity can be: a mean difference of values in
    ``[low, high]`` lies in ``[−(high − low), high − low]`` (``level``: a mean value lies in
    ``[low, high]``). Unknown range: unchanged. An interval method may reach past the bounds
    (a t interval on a few skewed pairs printed an MRR interval of [−1.013, +0.837]); no
    decision changes, since the bounds are beyond any margin a metric's range allows."""
    if value_range is None:
        return lo, hi
    low, high = value_range
    bottom, top = (low, high) if level else (low - high, high - low)
    return min(max(lo, bottom), top), max(min(hi, top), bottom)


def pair_runs(baseline: RunArtifact, candidate: RunArtifact) -> Pairing:
    """The cases of ``candidate`` that ``baseline`` has too; NotComparableError when none."""
    base_by_id = {r.case_id: r for r in baseline.rows}
    cand_ids = {r.case_id for r in candidate.rows}
    cand_rows = [r for r in candidate.rows if r.case_id in base_by_id]
    if not cand_rows:
        raise NotComparableError(
            f"runs not comparable: no case id in common between {baseline.source or 'baseline'} "
            f"and {candidate.source or 'candidate'}"
        )
    dataset = DatasetChange(
        same=baseline.meta.dataset.sha256 == candidate.meta.dataset.sha256,
        baseline_sha256=baseline.meta.dataset.sha256,
        candidate_sha256=candidate.meta.dataset.sha256,
        common=len(cand_rows),
        added=[r.case_id for r in candidate.rows if r.case_id not in base_by_id],
        removed=[r.case_id for r in baseline.rows if r.case_id not in cand_ids],
    )
    base_rows = [base_by_id[r.case_id] for r in cand_rows]
    return Pairing(baseline, candidate, base_rows, cand_rows, dataset, metric_names(baseline, candidate))


def metric_names(baseline: RunArtifact, candidate: RunArtifact) -> list[str]:
    """The metrics either run lists or scored, in registry order (unregistered ones after, by name)."""
    seen: set[str] = set()
    for art in (baseline, candidate):
        seen.update(art.meta.metrics)
        for row in art.rows:
            seen.update(row.metrics)
    order = {name: i for i, name in enumerate(registry())}
    return sorted(seen, key=lambda n: (order.get(n, len(order)), n))


def spec_direction(spec: MetricSpec) -> Direction:
    """How a registered metric reads, from its registry entry."""
    low, high = spec.value_range
    worst = low if spec.higher_is_better else high
    return Direction(spec.higher_is_better, spec.gate_by_default, spec.categorical, float(worst), (low, high))


def metric_direction(name: str, baseline: RunArtifact, candidate: RunArtifact) -> Direction:
    """The registry's facts for ``name``; else what either run's summary recorded (no worst value)."""
    spec = registry().get(name)
    if spec is not None:
        return spec_direction(spec)
    for art in (candidate, baseline):
        overall = art.summary.slices.get(ALL_SLICE, {}).get(name)
        if overall is not None:
            return Direction(overall.higher_is_better, True, overall.distribution is not None, None)
    return Direction(None, True, False, None)


def _score_table(rows: list[Row], names: list[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per metric: each row's score (NaN where not scored or the case failed), and whether the
    row's own output was missing for it (:data:`MISSING_OUTPUT_REASONS`, on a case of
    :data:`LOSS_KINDS`), in one pass."""
    size = len(rows)
    values: dict[str, list[float]] = {name: [math.nan] * size for name in names}
    missing_at: dict[str, list[int]] = {name: [] for name in names}
    for i, row in enumerate(rows):
        if row.status != "ok":
            continue
        loss = row.kind in LOSS_KINDS
        for name, result in row.metrics.items():
            column = values.get(name)
            if column is None:
                continue
            if result.status == "scored":
                if result.value is not None:
                    column[i] = result.value
            elif loss and result.reason in MISSING_OUTPUT_REASONS:
                missing_at[name].append(i)
    missing = {}
    for name, at in missing_at.items():
        mask = np.zeros(size, dtype=bool)
        mask[at] = True
        missing[name] = mask
    return {name: np.array(column, dtype=np.float64) for name, column in values.items()}, missing
