"""The cases behind a gate, for a reviewer: which ones moved, what they asked, what each run did.

:class:`PairedCases` pairs the two runs' rows by case id (as the comparison does: candidate
order, cases present in both), knows every slice's members (``gate.model.slices.slice_masks``
over the candidate's rows, ``gate.slices`` from the comparison's settings) and every case's value of
a metric in each run. From that:

- :meth:`PairedCases.moved` — for one (metric, slice) gate, the paired cases whose oriented
  difference ``d`` (candidate − baseline, sign-flipped where lower is better) is most negative
  (dropped) and most positive (improved), ties broken by case id;
- :meth:`PairedCases.fingerprint` — a digest of the gate's paired cases and their values in
  both runs. Two gates with equal fingerprints were computed from the same numbers (the same
  cases, the same values), so their decisions are necessarily identical and a report shows
  them once, naming both (``all`` and ``kind=qa`` when every case is qa; two metrics that
  score every case alike).

The adapter-failure rate (``adapter.failure_rate``) is 1 for a case whose row failed
(``adapter_error``, ``timeout``) and 0 otherwise, over every paired case.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gate.decision.comparison import Comparison, GateResult
from gate.decision.decide import FAILURE_RATE_METRIC
from gate.model.artifact import Row, RunArtifact
from gate.model.records import Chunk
from gate.model.slices import slice_masks


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


def _value(row: Row, metric: str) -> float | None:
    if metric == FAILURE_RATE_METRIC:
        return 0.0 if row.status == "ok" else 1.0
    if row.status != "ok":
        return None
    result = row.metrics.get(metric)
    if result is None or result.status != "scored" or result.value is None:
        return None
    return float(result.value) if math.isfinite(result.value) else None


def _matches(chunk: Chunk, expected: set[str]) -> bool:
    document = chunk.metadata.get("document_id") if isinstance(chunk.metadata, dict) else None
    return chunk.id in expected or (isinstance(document, str) and document in expected)


def _side(row: Row, metric: str, expected: set[str]) -> Side:
    chunks = row.retrieved or []
    return Side(
        value=_value(row, metric),
        status=row.status,
        answer=row.answer.text if row.answer is not None else None,
        error=row.error,
        retrieved=tuple(Retrieved(c.id, _matches(c, expected)) for c in chunks),
    )


class PairedCases:
    """The two runs' rows paired by case id, with slice membership for the comparison's slices."""

    def __init__(self, comparison: Comparison, baseline: RunArtifact, candidate: RunArtifact) -> None:
        base_by_id = {r.case_id: r for r in baseline.rows}
        self.pairs: list[tuple[Row, Row]] = [
            (base_by_id[r.case_id], r) for r in candidate.rows if r.case_id in base_by_id
        ]
        masks = slice_masks([cand for _, cand in self.pairs], comparison.settings.slices)
        self._indices = {key: mask.nonzero()[0] for key, mask in masks.items()}
        self.members: dict[str, list[int]] = {key: index.tolist() for key, index in self._indices.items()}
        self._columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._prints: dict[tuple[str, str], str] = {}
        self._moves: dict[tuple[str, str, int, int], Moves] = {}

    def _column(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """The metric's value for every pair in each run (NaN: not scored), computed once."""
        if metric not in self._columns:
            values = [(_value(b, metric), _value(c, metric)) for b, c in self.pairs]
            base = np.array([math.nan if b is None else b for b, _ in values], dtype=np.float64)
            cand = np.array([math.nan if c is None else c for _, c in values], dtype=np.float64)
            self._columns[metric] = (base, cand)
        return self._columns[metric]

    def values(self, metric: str) -> tuple[list[float | None], list[float | None]]:
        """The metric's value for every pair in each run, None where not scored."""
        return tuple(  # type: ignore[return-value]
            [None if math.isnan(x) else x for x in column.tolist()] for column in self._column(metric)
        )

    def _scored(self, gate: GateResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The gate's pairs scored in both runs: their indices, baseline and candidate values."""
        index = self._indices.get(gate.slice, np.zeros(0, dtype=np.intp))
        base, cand = self._column(gate.metric)
        b, c = base[index], cand[index]
        keep = ~(np.isnan(b) | np.isnan(c))
        return index[keep], b[keep], c[keep]

    def _paired(self, gate: GateResult) -> list[tuple[int, float, float]]:
        index, b, c = self._scored(gate)
        return list(zip(index.tolist(), b.tolist(), c.tolist(), strict=True))

    def fingerprint(self, gate: GateResult) -> str:
        """A digest of the gate's paired cases (their positions among the pairs, which name the
        case ids) and their values in both runs, as float64 bytes."""
        key = (gate.metric, gate.slice)
        if key not in self._prints:
            index, b, c = self._scored(gate)
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
        sign = 1.0 if gate.higher_is_better else -1.0
        scored = [(sign * (c - b), i) for i, b, c in self._paired(gate)]
        down = sorted((x for x in scored if x[0] < 0), key=lambda x: (x[0], self.pairs[x[1]][1].case_id))
        up = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], self.pairs[x[1]][1].case_id))
        return Moves(
            dropped=[self.case(i, gate.metric, d) for d, i in down[:dropped]],
            improved=[self.case(i, gate.metric, d) for d, i in up[:improved]],
        )

    def case(self, index: int, metric: str, d: float) -> CaseMove:
        base, cand = self.pairs[index]
        sources = tuple(cand.expected_source_ids or base.expected_source_ids or ())
        expected = set(sources)
        return CaseMove(
            case_id=cand.case_id,
            d=d,
            question=cand.question or base.question,
            expected_answer=cand.expected_answer
            if cand.expected_answer is not None
            else base.expected_answer,
            expected_sources=sources,
            baseline=_side(base, metric, expected),
            candidate=_side(cand, metric, expected),
        )


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
    d: float | None  # oriented; None unless scored in both runs


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
    columns = {name: paired.values(name) for name in directions}
    out = []
    for i, (_base, cand) in enumerate(paired.pairs):
        values = []
        worst, best = 0.0, 0.0
        for name, hib in directions.items():
            b, c = columns[name][0][i], columns[name][1][i]
            d = None if b is None or c is None else (c - b if hib else b - c)
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
