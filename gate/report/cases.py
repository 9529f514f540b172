"""The cases behind a gate, for a reviewer: which ones moved, what they asked, what each run did.

:class:`PairedCases` reads the runs' pairing (:mod:`gate.decision.pairing`, the one the
comparison decided on: candidate order, cases present in both, a missing output counted as
the metric's worst value, differences oriented so positive is better), knows every slice's
members (the pairing's slice masks over the candidate's rows, ``gate.slices`` from the
comparison's settings) and marks each retrieved chunk expected or not with the metrics' own
source matching (:func:`gate.metrics.retrieval.expected_flags` under each run's
``source_match`` and ``document_id_key``). From that:

- :meth:`PairedCases.moved` — for one (metric, slice) gate, the paired cases whose oriented
  difference ``d`` is most negative (dropped) and most positive (improved), ties broken by
  case id;
- :meth:`PairedCases.fingerprint` — a digest of the gate's paired cases and their values in
  both runs. Two gates with equal fingerprints were computed from the same numbers (the same
  cases, the same values), so their decisions are necessarily identical and a report shows
  them once, naming both (``all`` and ``kind=qa`` when every case is qa; two metrics that
  score every case alike).

A side's shown value is what that run scored (None: not scored, a missing output included);
the difference is the pairing's.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gate.decision.comparison import Comparison, GateResult
from gate.decision.decide import GateCause
from gate.decision.pairing import PairedColumn, Pairing, pair_runs
from gate.metrics.retrieval import expected_flags
from gate.model.artifact import FAILURE_RATE_METRIC, Row, RunArtifact


@dataclass(frozen=True)
class Retrieved:
    id: str
    expected: bool  # the chunk (or its document) is one of the case's expected sources


@dataclass(frozen=True)
class Side:
    """One run's output for a case."""

    value: float | None  # the metric's value (None: not scored)
    status: str  # row status: ok, adapter_error, timeout
    answer: str | None
    error: str | None
    retrieved: tuple[Retrieved, ...]
    counted: float | None = None  # the value the pairs counted for a missing output (the worst)


@dataclass(frozen=True)
class CaseMove:
    """One case of a gate: its oriented difference and both runs' outputs."""

    case_id: str
    d: float  # oriented: positive = better in the candidate
    question: str | None
    expected_answer: str | None
    expected_sources: tuple[str, ...]
    baseline: Side
    candidate: Side


@dataclass(frozen=True)
class Moves:
    dropped: list[CaseMove]
    improved: list[CaseMove]


def _side(
    row: Row, run: RunArtifact, value: float | None, expected: tuple[str, ...], counted: float | None = None
) -> Side:
    chunks = row.retrieved or []
    meta = run.meta
    flags = expected_flags(chunks, expected, meta.source_match, meta.document_id_key) if chunks else []
    return Side(
        value=value,
        status=row.status,
        answer=row.answer.text if row.answer is not None else None,
        error=row.error,
        retrieved=tuple(Retrieved(c.id, flag) for c, flag in zip(chunks, flags, strict=True)),
        counted=counted,
    )


class PairedCases:
    """The two runs' rows paired by case id, with slice membership for the comparison's slices.

    ``pairing`` (:func:`gate.decision.pairing.pair_runs` of the two runs), when the caller has
    it already; else it is built here. Values and differences are the pairing's: a missing
    output counts as the metric's worst value, as in the comparison.
    """

    def __init__(
        self,
        comparison: Comparison,
        baseline: RunArtifact,
        candidate: RunArtifact,
        *,
        pairing: Pairing | None = None,
    ) -> None:
        self.pairing = pairing if pairing is not None else pair_runs(baseline, candidate)
        self.baseline, self.candidate = baseline, candidate
        self.pairs: list[tuple[Row, Row]] = list(
            zip(self.pairing.baseline_rows, self.pairing.candidate_rows, strict=True)
        )
        masks = self.pairing.masks(comparison.settings.slices)
        self._indices = {key: mask.nonzero()[0] for key, mask in masks.items()}
        self.members: dict[str, list[int]] = {key: index.tolist() for key, index in self._indices.items()}
        self._prints: dict[tuple[str, str], str] = {}
        self._moves: dict[tuple[str, str, int, int], Moves] = {}

    def column(self, metric: str) -> PairedColumn | None:
        return self.pairing.column(metric)

    def indices(self, key: str) -> np.ndarray:
        """Positions among the pairs of the slice's cases (empty for an unknown slice)."""
        return self._indices.get(key, np.zeros(0, dtype=np.intp))

    def _scored(self, gate: GateResult) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The gate's pairs: their indices, baseline and candidate values and oriented differences."""
        index = self.indices(gate.slice)
        column = self.column(gate.metric)
        if column is None:
            empty = np.zeros(0)
            return np.zeros(0, dtype=np.intp), empty, empty, empty
        d = column.diff[index]
        keep = ~np.isnan(d)
        return index[keep], column.baseline[index][keep], column.candidate[index][keep], d[keep]

    def fingerprint(self, gate: GateResult) -> str:
        """A digest of the gate's paired cases (their positions among the pairs, which name the
        case ids) and their values in both runs, as float64 bytes."""
        key = (gate.metric, gate.slice)
        if key not in self._prints:
            index, b, c, _ = self._scored(gate)
            digest = hashlib.sha256()
            for part in (index.astype(np.int64), b, c):
                digest.update(np.ascontiguousarray(part).tobytes())
                digest.update(b"\0")
            self._prints[key] = digest.hexdigest()
        return self._prints[key]

    def moved(self, gate: GateResult, *, dropped: int, improved: int) -> Moves:
        """The ``dropped`` cases that fell most and the ``improved`` ones that rose most (d ≠ 0);
        kept, as the comment asks again for each row limit it tries."""
        key = (gate.metric, gate.slice, dropped, improved)
        if key not in self._moves:
            self._moves[key] = self._moved(gate, dropped, improved)
        return self._moves[key]

    def _moved(self, gate: GateResult, dropped: int, improved: int) -> Moves:
        index, _, _, d = self._scored(gate)
        scored = list(zip(d.tolist(), index.tolist(), strict=True))
        down = sorted((x for x in scored if x[0] < 0), key=lambda x: (x[0], self.pairs[x[1]][1].case_id))
        up = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], self.pairs[x[1]][1].case_id))
        return Moves(
            dropped=[self.case(i, gate.metric, d) for d, i in down[:dropped]],
            improved=[self.case(i, gate.metric, d) for d, i in up[:improved]],
        )

    def _value(self, metric: str, role: str, index: int) -> float | None:
        """The metric's value in one run for one pair as the run scored it (None: not scored,
        a missing output included)."""
        column = self.column(metric)
        if column is None:
            return None
        values = column.baseline if role == "baseline" else column.candidate
        missing = column.missing_baseline if role == "baseline" else column.missing_candidate
        value = float(values[index])
        return None if math.isnan(value) or missing[index] else value

    def _counted(self, metric: str, role: str, index: int) -> float | None:
        """The worst value the pairs counted for this run's missing output, if it was one."""
        column = self.column(metric)
        if column is None:
            return None
        values = column.baseline if role == "baseline" else column.candidate
        missing = column.missing_baseline if role == "baseline" else column.missing_candidate
        return float(values[index]) if missing[index] else None

    def case(self, index: int, metric: str, d: float) -> CaseMove:
        base, cand = self.pairs[index]
        sources = tuple(cand.expected_source_ids or base.expected_source_ids or ())
        return CaseMove(
            case_id=cand.case_id,
            d=d,
            question=cand.question or base.question,
            expected_answer=cand.expected_answer
            if cand.expected_answer is not None
            else base.expected_answer,
            expected_sources=sources,
            baseline=self._side(base, "baseline", metric, index, sources),
            candidate=self._side(cand, "candidate", metric, index, sources),
        )

    def _side(self, row: Row, role: str, metric: str, index: int, sources: tuple[str, ...]) -> Side:
        run = self.baseline if role == "baseline" else self.candidate
        return _side(row, run, self._value(metric, role, index), sources, self._counted(metric, role, index))


def paired_cases(
    comparison: Comparison, baseline: RunArtifact | None, candidate: RunArtifact | None
) -> PairedCases | None:
    """The runs' :class:`PairedCases` when both are given (a report without them shows no cases)."""
    return PairedCases(comparison, baseline, candidate) if baseline and candidate else None


def group_identical(gates: Sequence[GateResult], paired: PairedCases | None) -> list[list[GateResult]]:
    """Gates computed from the same numbers, grouped (first appearance order); singletons otherwise.

    Without the runs (``paired`` None) nothing is grouped: equal figures alone do not prove
    equal cases.
    """
    if paired is None:
        return [[g] for g in gates]
    groups: dict[tuple[object, ...], list[GateResult]] = {}
    for g in gates:
        key = (g.decision, g.gating, g.margin, g.floor, g.ceiling, g.higher_is_better, paired.fingerprint(g))
        groups.setdefault(key, []).append(g)
    return list(groups.values())


@dataclass(frozen=True)
class MetricValues:
    name: str
    higher_is_better: bool
    baseline: float | None
    candidate: float | None
    d: float | None  # oriented, from the pairing; None when the case does not pair


@dataclass(frozen=True)
class ExplorerCase:
    """One paired case for the HTML case explorer."""

    case_id: str
    question: str | None
    expected_answer: str | None
    expected_sources: tuple[str, ...]
    baseline: Side
    candidate: Side
    metrics: tuple[MetricValues, ...]
    slices: tuple[str, ...]
    change: str  # "worse": a gated metric dropped; "better": some rose, none dropped; else "same"
    worst: float  # the most negative oriented d over gated metrics (0 when none dropped)


def explorer_cases(comparison: Comparison, paired: PairedCases) -> list[ExplorerCase]:
    """Every paired case with each metric's value in both runs, most dropped first.

    ``change`` looks at the gating metrics only (as the decision does): a case is "worse" when
    any of them dropped (oriented d < 0), "better" when any rose and none dropped, "same"
    otherwise; ties in the order are broken by case id.
    """
    directions: dict[str, bool] = {}
    gated: set[str] = set()
    for g in comparison.gates:
        directions.setdefault(g.metric, g.higher_is_better)
        if g.gating:
            gated.add(g.metric)
    slices_of: dict[int, list[str]] = {}
    for key, indices in paired.members.items():
        for i in indices:
            slices_of.setdefault(i, []).append(key)
    columns = {name: paired.column(name) for name in directions}
    out = []
    for i, (_base, cand) in enumerate(paired.pairs):
        values = []
        worst, best = 0.0, 0.0
        for name, hib in directions.items():
            column = columns[name]
            raw = float(column.diff[i]) if column is not None else math.nan
            d = None if math.isnan(raw) else raw
            b, c = paired._value(name, "baseline", i), paired._value(name, "candidate", i)
            values.append(MetricValues(name, hib, b, c, d))
            if d is not None and name in gated:
                worst, best = min(worst, d), max(best, d)
        move = paired.case(i, FAILURE_RATE_METRIC, 0.0)
        out.append(
            ExplorerCase(
                case_id=cand.case_id,
                question=move.question,
                expected_answer=move.expected_answer,
                expected_sources=move.expected_sources,
                baseline=move.baseline,
                candidate=move.candidate,
                metrics=tuple(values),
                slices=tuple(slices_of.get(i, [])),
                change="worse" if worst < 0 else "better" if best > 0 else "same",
                worst=worst,
            )
        )
    out.sort(key=lambda c: (c.worst, c.case_id))
    return out


@dataclass(frozen=True)
class SliceMoves:
    """How many cases of one gating slice got worse and better on its gating metrics."""

    key: str
    n: int  # paired cases in the slice
    worse: int  # cases where some gating metric dropped (oriented d < 0)
    better: int  # cases where some rose and none dropped
    worst: GateResult | None  # the slice's most telling decided gating gate (:func:`_severity`)


def _severity(g: GateResult) -> tuple[int, bool, float, str]:
    """A counted block first, then a counted review, a gate worse on its own evidence, the rest,
    gates whose pairs never changed last; quality metrics before the failure rate; then the
    lowest Δ."""
    rank = 4 if g.cause == GateCause.NO_CASE_CHANGED else 3
    if g.counts and g.decision in ("block", "review"):
        rank = 0 if g.decision == "block" else 1
    elif g.worse:
        rank = 2
    return (rank, g.metric == FAILURE_RATE_METRIC, g.delta if g.delta is not None else 0.0, g.metric)


def slice_moves(comparison: Comparison, paired: PairedCases) -> list[SliceMoves]:
    """Per gating slice (one with a gating gate that was decided), worst first: the share of
    cases that got better minus the share that got worse, lowest first; then most cases worse,
    then the slice key. A case counts once per slice whatever the number of metrics that moved,
    with the pairing's differences (a missing output is a loss)."""
    by_slice: dict[str, list[GateResult]] = {}
    for g in comparison.gates:
        if g.gating and g.decision != "skipped":
            by_slice.setdefault(g.slice, []).append(g)
    out = []
    for key, gates in by_slice.items():
        index = paired.indices(key)
        if not index.size:
            continue
        down = np.zeros(index.size, dtype=bool)
        up = np.zeros(index.size, dtype=bool)
        for name in dict.fromkeys(g.metric for g in gates):
            column = paired.column(name)
            if column is None:
                continue
            d = column.diff[index]
            with np.errstate(invalid="ignore"):
                down |= d < 0
                up |= d > 0
        worst = min(gates, key=_severity)
        out.append(SliceMoves(key, int(index.size), int(down.sum()), int((up & ~down).sum()), worst))
    out.sort(key=lambda s: ((s.better - s.worse) / s.n, -s.worse, s.key))
    return out
