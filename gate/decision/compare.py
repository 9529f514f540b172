"""Pair two run artifacts by case id and gate every metric and slice (design.md decision rule).

:func:`compare_runs` checks that the runs measure the same thing, pairs the cases present in
both, bootstraps every (metric, slice) difference in one pass with shared resamples
(:func:`gate.stats.bootstrap_means`) and applies :mod:`gate.decision.decide`. The returned
:class:`Comparison` is also the ``--json`` document (``docs/gate.md``).

Comparability is :mod:`gate.decision.comparable`; in addition, a different dataset sha256
pairs on the common case ids and lists cases added and removed, and no case in common is not
comparable.

Pairs are per metric: a case pairs for a metric when both runs scored it (status ``scored``
with a value). Rows whose case failed (adapter error, timeout) carry no scores; they enter
only the ``adapter.failure_rate`` gate, which every common case pairs for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gate.core.errors import NotComparableError
from gate.core.fieldpath import record_field
from gate.decision.comparable import check_comparable
from gate.decision.comparison import (
    CaseDrop,
    Comparison,
    DatasetChange,
    GateResult,
    RunCounts,
    RunIdentity,
    Settings,
)
from gate.decision.decide import (
    FAILURE_RATE_METRIC,
    MetricPolicy,
    family_confidence,
    interval_decision,
    interval_reason,
    level_breach,
    metric_policy,
    overall_decision,
    skip_reason,
)
from gate.metrics import distinct_name, registry
from gate.model.artifact import Row, RunArtifact
from gate.model.config import GateConfig
from gate.model.slices import ALL_SLICE, slice_gates, slice_masks
from gate.stats import COLUMN_GROUP, bootstrap_means, minimum_detectable_effect

TOP_DROPS = 10


@dataclass(frozen=True)
class PairedRuns:
    """The rows of the cases present in both runs, in the candidate's order."""

    baseline_rows: list[Row]
    candidate_rows: list[Row]
    dataset: DatasetChange


@dataclass(frozen=True)
class MetricColumns:
    """One metric over the paired cases: its policy and per-case values (NaN where unpaired).

    ``diff`` is oriented (candidate − baseline, sign-flipped when lower is better), so a
    positive difference is always an improvement.
    """

    policy: MetricPolicy
    diff: np.ndarray
    candidate: np.ndarray
    baseline: np.ndarray


class _Gate:
    """A gate under construction: its policy, slice and mask of paired cases."""

    __slots__ = ("key", "mask", "policy", "gating")

    def __init__(self, policy: MetricPolicy, key: str, mask: np.ndarray, gating: bool) -> None:
        self.policy, self.key, self.mask, self.gating = policy, key, mask, gating


def compare_runs(
    baseline: RunArtifact,
    candidate: RunArtifact,
    gate_config: GateConfig,
    *,
    allow_mixed_judges: bool = False,
) -> Comparison:
    """Pair ``baseline`` and ``candidate`` by case id and decide every gate.

    Raises NotComparableError (exit 3) for runs that cannot be compared.
    """
    warnings = check_comparable(baseline, candidate, allow_mixed_judges=allow_mixed_judges)
    paired = pair_runs(baseline, candidate)
    warnings += _dataset_warnings(paired.dataset)
    columns_of = metric_columns(paired, baseline, candidate, gate_config)
    masks = slice_masks(paired.candidate_rows, gate_config.slices)
    gates = [
        _Gate(c.policy, key, mask & ~np.isnan(c.diff), c.policy.gated and slice_gates(key, gate_config))
        for c in columns_of.values()
        for key, mask in masks.items()
    ]
    # Distinct gates: an alias gated beside its original (both listed in gate.include) is one
    # number, so it widens the family-wise intervals once.
    family = len(
        {
            (distinct_name(g.policy.name), g.key)
            for g in gates
            if g.gating and int(g.mask.sum()) >= gate_config.min_pairs
        }
    )
    level = (
        family_confidence(gate_config.confidence, family)
        if gate_config.family_wise
        else gate_config.confidence
    )
    clusters = (
        cluster_labels(paired.candidate_rows, gate_config.cluster_by) if gate_config.cluster_by else None
    )
    gate_results = decide_gates(gates, columns_of, gate_config, level, clusters)
    return Comparison(
        overall=overall_decision(g.decision for g in gate_results if g.gating),
        baseline=RunIdentity.of(baseline),
        candidate=RunIdentity.of(candidate),
        settings=_settings(gate_config, level, family),
        dataset=paired.dataset,
        gates=gate_results,
        top_drops=_top_drops(paired.candidate_rows, columns_of),
        counts={"baseline": RunCounts.of(baseline), "candidate": RunCounts.of(candidate)},
        warnings=warnings,
    )


def pair_runs(baseline: RunArtifact, candidate: RunArtifact) -> PairedRuns:
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
    return PairedRuns([base_by_id[r.case_id] for r in cand_rows], cand_rows, dataset)


def _dataset_warnings(dataset: DatasetChange) -> list[str]:
    if dataset.same:
        return []
    return [
        f"datasets differ: compared on {dataset.common} common cases "
        f"({len(dataset.added)} added, {len(dataset.removed)} removed)"
    ]


def metric_columns(
    paired: PairedRuns, baseline: RunArtifact, candidate: RunArtifact, gate_config: GateConfig
) -> dict[str, MetricColumns]:
    """Every comparable metric's columns, then ``adapter.failure_rate`` over every paired case.

    Categorical metrics and metrics scored in neither run (e.g. a judge metric without a
    judge) have no columns. A failed case (adapter error, timeout) counts 1 in the failure
    rate and carries no other score.
    """
    names = _metric_names(baseline, candidate)
    base_table = _score_table(paired.baseline_rows, names)
    cand_table = _score_table(paired.candidate_rows, names)
    out: dict[str, MetricColumns] = {}
    for name in names:
        hib, by_default, categorical = _direction(name, baseline, candidate)
        policy = metric_policy(
            name, gate_config, higher_is_better=hib, gate_by_default=by_default, categorical=categorical
        )
        if categorical:
            continue
        b, c = base_table[name], cand_table[name]
        both = ~np.isnan(b) & ~np.isnan(c)
        if not both.any() and np.isnan(b).all() and np.isnan(c).all():
            continue
        sign = 1.0 if policy.higher_is_better else -1.0
        out[name] = MetricColumns(
            policy,
            np.where(both, sign * (c - b), np.nan),
            np.where(both, c, np.nan),
            np.where(both, b, np.nan),
        )
    fail_b = np.array([r.status != "ok" for r in paired.baseline_rows], dtype=np.float64)
    fail_c = np.array([r.status != "ok" for r in paired.candidate_rows], dtype=np.float64)
    out[FAILURE_RATE_METRIC] = MetricColumns(
        metric_policy(FAILURE_RATE_METRIC, gate_config, higher_is_better=False, gate_by_default=True),
        fail_b - fail_c,
        fail_c,
        fail_b,
    )
    return out


def cluster_labels(rows: Sequence[Row], field: str) -> list[Any]:
    """The resampling unit of each row: its value of ``field``; a row without one is its own cluster."""
    labels: list[Any] = []
    for i, row in enumerate(rows):
        value = record_field(row, field)
        labels.append(("value", repr(value)) if value is not None else ("case", i))
    return labels


def decide_gates(
    gates: list[_Gate],
    columns_of: dict[str, MetricColumns],
    cfg: GateConfig,
    level: float,
    clusters: list[Any] | None,
) -> list[GateResult]:
    """Every gate's interval and decision, bootstrapped in batches that share resamples.

    A batch's columns (cases x up to two per gate, a few working copies) stay within tens of
    MB whatever the case count.
    """
    if not gates:
        return []
    n = gates[0].mask.size
    per_batch = max(16, min(COLUMN_GROUP // 2, (1 << 21) // max(n, 1)))
    return [
        result
        for start in range(0, len(gates), per_batch)
        for result in _decide_batch(gates[start : start + per_batch], columns_of, cfg, level, clusters)
    ]


def _settings(gate_config: GateConfig, level: float, family: int) -> Settings:
    return Settings(
        margin=gate_config.margin,
        confidence=gate_config.confidence,
        interval_confidence=level,
        interval=gate_config.interval,
        resamples=gate_config.resamples,
        seed=gate_config.seed,
        min_pairs=gate_config.min_pairs,
        family_wise=gate_config.family_wise,
        family_size=family,
        cluster_by=gate_config.cluster_by,
        slices=list(gate_config.slices),
        gate_slices=list(
            gate_config.gate_slices if gate_config.gate_slices is not None else gate_config.slices
        ),
    )


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# -- per-case values ----------------------------------------------------------------------


def _metric_names(baseline: RunArtifact, candidate: RunArtifact) -> list[str]:
    seen: dict[str, None] = {}
    for art in (baseline, candidate):
        for name in art.meta.metrics:
            seen.setdefault(name, None)
        for row in art.rows:
            for name in row.metrics:
                seen.setdefault(name, None)
    order = {name: i for i, name in enumerate(registry())}
    return sorted(seen, key=lambda n: (order.get(n, len(order)), n))


def _score_table(rows: list[Row], names: list[str]) -> dict[str, np.ndarray]:
    """metric -> per-row scores (NaN where not scored or where the case failed), in one pass."""
    table = {name: np.full(len(rows), np.nan) for name in names}
    for i, row in enumerate(rows):
        if row.status != "ok":
            continue
        for name, result in row.metrics.items():
            column = table.get(name)
            if column is not None and result.status == "scored" and result.value is not None:
                column[i] = result.value
    return table


def _direction(name: str, baseline: RunArtifact, candidate: RunArtifact) -> tuple[bool | None, bool, bool]:
    """(higher_is_better or None if unknown, gate_by_default, categorical)."""
    spec = registry().get(name)
    if spec is not None:
        return spec.higher_is_better, spec.gate_by_default, spec.categorical
    for art in (candidate, baseline):
        overall = art.summary.slices.get(ALL_SLICE, {}).get(name)
        if overall is not None:
            return overall.higher_is_better, True, overall.distribution is not None
    return None, True, False


def _decide_batch(
    batch: list[_Gate],
    columns_of: dict[str, MetricColumns],
    cfg: GateConfig,
    level: float,
    clusters: list[Any] | None,
) -> list[GateResult]:
    """Bootstrap one batch of gates together (differences, plus candidate levels for floors)."""
    n = batch[0].mask.size
    pairs = [int(g.mask.sum()) for g in batch]
    columns: list[np.ndarray] = []
    level_col: dict[int, int] = {}
    nothing = np.full(n, np.nan)
    for g, n_pairs in zip(batch, pairs, strict=True):
        # A gate too small to decide needs no resampling: its column is empty (and deduplicated).
        columns.append(
            np.where(g.mask, columns_of[g.policy.name].diff, np.nan) if n_pairs >= cfg.min_pairs else nothing
        )
    for i, g in enumerate(batch):
        if pairs[i] >= cfg.min_pairs and (g.policy.floor is not None or g.policy.ceiling is not None):
            level_col[i] = len(columns)
            columns.append(np.where(g.mask, columns_of[g.policy.name].candidate, np.nan))
    matrix = np.column_stack(columns) if columns else np.empty((n, 0))
    boot = bootstrap_means(
        matrix,
        resamples=cfg.resamples,
        confidence=level,
        seed=cfg.seed,
        clusters=clusters,
        method=cfg.interval,
    )
    out: list[GateResult] = []
    for i, g in enumerate(batch):
        p = g.policy
        n_pairs = pairs[i]
        bmean = _finite(float(np.nanmean(columns_of[p.name].baseline[g.mask]))) if n_pairs else None
        cmean = _finite(float(np.nanmean(columns_of[p.name].candidate[g.mask]))) if n_pairs else None
        common = dict(
            metric=p.name,
            slice=g.key,
            gating=g.gating,
            higher_is_better=p.higher_is_better,
            n=n_pairs,
            clusters=len({clusters[k] for k in np.flatnonzero(g.mask)}) if clusters is not None else None,
            baseline_mean=bmean,
            candidate_mean=cmean,
            margin=p.margin,
            floor=p.floor,
            ceiling=p.ceiling,
            note=p.note,
        )
        skipped = skip_reason(n_pairs, cfg.min_pairs)
        if skipped:
            delta = _finite(float(np.mean(columns_of[p.name].diff[g.mask]))) if n_pairs else None
            out.append(GateResult(**common, delta=delta, decision="skipped", reason=skipped))
            continue
        lo, hi = float(boot.lo[i]), float(boot.hi[i])
        decision = interval_decision(lo, hi, p.margin)
        reason = interval_reason(decision, lo, hi, p.margin)
        cand_lo = cand_hi = None
        if i in level_col:
            j = level_col[i]
            cand_lo, cand_hi = float(boot.lo[j]), float(boot.hi[j])
            breach = level_breach(cand_lo, cand_hi, p.floor, p.ceiling)
            if breach:
                decision, reason = "block", breach
        se = boot.se[i] if clusters is not None else boot.sd[i] / math.sqrt(n_pairs)
        mde = _finite(minimum_detectable_effect(float(se), confidence=level)) if math.isfinite(se) else None
        out.append(
            GateResult(
                **common,
                delta=_finite(boot.estimate[i]),
                lo=lo,
                hi=hi,
                candidate_lo=cand_lo,
                candidate_hi=cand_hi,
                decision=decision,
                reason=reason,
                mde=mde,
                mde_exceeds_margin=bool(mde is not None and mde > p.margin),
            )
        )
    return out


def _top_drops(rows: list[Row], columns_of: dict[str, MetricColumns]) -> list[CaseDrop]:
    """The cases whose gated metrics dropped most (largest single oriented drop first)."""
    gated = [name for name, c in columns_of.items() if c.policy.gated]
    if not gated:
        return []
    stack = np.column_stack([columns_of[name].diff for name in gated])
    with np.errstate(invalid="ignore"):
        drops = np.where(np.isnan(stack), 0.0, -stack)
    worst = drops.max(axis=1)
    order = sorted(
        (i for i in range(len(rows)) if worst[i] > 0),
        key=lambda i: (-worst[i], -drops[i].sum(), rows[i].case_id),
    )
    out = []
    for i in order[:TOP_DROPS]:
        per_metric = {
            gated[j]: float(drops[i, j]) for j in np.argsort(-drops[i], kind="stable") if drops[i, j] > 0
        }
        out.append(CaseDrop(case_id=rows[i].case_id, worst=float(worst[i]), drops=per_metric))
    return out
