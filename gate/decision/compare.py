"""Pair two run artifacts by case id and gate every metric and slice (docs/gate.md, "The decision rule").

:func:`compare_runs` checks that the runs measure the same thing, pairs the cases present in
both, bootstraps every (metric, slice) difference in one pass with shared resamples
(:func:`gate.stats.bootstrap_means`) and applies :mod:`gate.decision.decide`. The returned
:class:`Comparison` is also the ``--json`` document (``docs/gate.md``).

Comparability is :mod:`gate.decision.comparable`; in addition, a different dataset sha256
pairs on the common case ids and lists cases added and removed, and no case in common is not
comparable.

Pairs are per metric and come from :mod:`gate.decision.pairing` (shared with the reports): a
case pairs when both runs scored it, or when one run scored it and the other's output was
missing (no answer, no retrieved list, ...), which counts as the metric's worst value. Rows
whose case failed (adapter error, timeout) carry no scores; they enter only the
``adapter.failure_rate`` gate, which every common case pairs for.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

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
    MetricPolicy,
    counts_toward_overall,
    gate_cause,
    gate_decision,
    level_breach,
    metric_policy,
    nothing_compared,
    review_weights,
    skip_reason,
)
from gate.decision.pairing import Direction, Pairing, feasible, metric_direction, pair_runs
from gate.decision.verdict import comparison_verdict
from gate.metrics import registry
from gate.metrics.base import MetricSpec
from gate.model.artifact import FAILURE_RATE_METRIC, Row, RunArtifact
from gate.model.config import GateConfig
from gate.model.slices import ALL_SLICE, slice_gates
from gate.stats import (
    CALIBRATED_MIN_PAIRS,
    POWER,
    BootstrapResult,
    ColumnFacts,
    bootstrap_means,
    column_bounds,
    column_facts,
    drop_p_values,
    family_critical_value,
    load_root_finder,
    minimum_nonzero,
    normal_quantile,
    normal_tail,
    pairs_needed,
    weighted_bh_cutoff,
)
from gate.stats.counts import DrawnAhead
from gate.stats.resampling import COLUMN_GROUP

# The case field cluster_by defaults to, when the cases carry it.
DEFAULT_CLUSTER_FIELD = "metadata.document_id"

TOP_DROPS = 10


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
    value_range: tuple[float, float] | None = None  # the metric's values' range, when known


class _Gate:
    """A gate under construction: its policy, slice and mask of paired cases."""

    __slots__ = ("key", "mask", "policy", "gating")

    def __init__(self, policy: MetricPolicy, key: str, mask: np.ndarray, gating: bool) -> None:
        self.policy, self.key, self.mask, self.gating = policy, key, mask, gating


def pairs_floor(gate_config: GateConfig) -> int:
    """The fewest pairs a gate is decided on: ``gate.min_pairs``, else the smallest n the
    simulation suite calibrates (:data:`gate.stats.CALIBRATED_MIN_PAIRS`)."""
    return gate_config.min_pairs if gate_config.min_pairs is not None else CALIBRATED_MIN_PAIRS


def compare_runs(
    baseline: RunArtifact,
    candidate: RunArtifact,
    gate_config: GateConfig,
    *,
    allow_mixed_judges: bool = False,
    pairing: Pairing | None = None,
    ahead: DrawnAhead | None = None,
) -> Comparison:
    """Pair ``baseline`` and ``candidate`` by case id and decide every gate.

    ``pairing``: the runs' :func:`gate.decision.pairing.pair_runs`, when the caller keeps it for
    the reports. ``ahead``: resample counts a child process drew meanwhile
    (:func:`gate.stats.counts.draw_ahead`), used if they are this bootstrap's. Raises
    NotComparableError (exit 3) for runs that cannot be compared.
    """
    warnings = check_comparable(baseline, candidate, allow_mixed_judges=allow_mixed_judges)
    paired = pairing if pairing is not None else pair_runs(baseline, candidate)
    warnings += _dataset_warnings(paired.dataset)
    names = paired.names
    columns_of = metric_columns(paired, gate_config)
    warnings += missing_output_warnings(paired, columns_of)
    masks = paired.masks(gate_config.slices)
    gates = [
        _Gate(c.policy, key, mask & ~np.isnan(c.diff), c.policy.gated and slice_gates(key, gate_config))
        for c in columns_of.values()
        for key, mask in masks.items()
    ]
    floor = pairs_floor(gate_config)
    cluster_field, cluster_source = resolve_cluster_by(paired.candidate_rows, gate_config.cluster_by)
    clusters = cluster_labels(paired.candidate_rows, cluster_field) if cluster_field else None
    gate_results, family = decide_gates(gates, columns_of, gate_config, floor, clusters, ahead)
    verdict = comparison_verdict(
        gate_results,
        nothing_compared=nothing_compared((g.metric, g.decision) for g in gate_results if g.gating),
    )
    outcome = verdict.decision
    unscored = _unscored(baseline, candidate, names, columns_of, gate_config)
    return Comparison(
        overall=outcome,
        overall_reason=_nothing_compared(gate_results, paired, floor) if outcome == "none" else None,
        verdict=verdict,
        baseline=RunIdentity.of(baseline),
        candidate=RunIdentity.of(candidate),
        settings=_settings(gate_config, floor, family, cluster_field, cluster_source),
        dataset=paired.dataset,
        gates=gate_results,
        top_drops=_top_drops(paired.candidate_rows, columns_of),
        counts={"baseline": RunCounts.of(baseline), "candidate": RunCounts.of(candidate)},
        warnings=warnings,
        unscored=unscored,
    )


def _unscored(
    baseline: RunArtifact,
    candidate: RunArtifact,
    names: list[str],
    columns_of: dict[str, MetricColumns],
    gate_config: GateConfig,
) -> list[str]:
    """Gating metrics with no column (scored in neither run): the runs' own, then those the
    gate section names (``gate.include`` entries, ``gate.metrics`` keys) that neither run has."""
    specs = registry()
    judged = bool(baseline.meta.judge.model or candidate.meta.judge.model)
    weighted = any(_composite_weighted(run) for run in (baseline, candidate))
    out = []
    for name in names:
        if skipped_by_design(name, specs.get(name), judged=judged, weighted=weighted):
            continue
        policy = direction_policy(name, metric_direction(name, baseline, candidate), gate_config)
        if policy.gated and name not in columns_of:
            out.append(name)
    named = list(gate_config.include) if isinstance(gate_config.include, list) else []
    named += [n for n, o in gate_config.metrics.items() if o.gate]
    out += [n for n in dict.fromkeys(named) if n != FAILURE_RATE_METRIC and n not in names]
    return out


def skipped_by_design(name: str, spec: MetricSpec | None, *, judged: bool, weighted: bool) -> bool:
    """Skipped by design, not missing: a judge metric of runs without a judge ("no judge
    configured"), a composite of runs without composite.weights ("not configured")."""
    if spec is not None and spec.kind == "judge" and not judged:
        return True
    return name.startswith("composite.") and not weighted


def _composite_weighted(run: RunArtifact) -> bool:
    """Whether the run's recorded configuration gives composite weights (unknown: assume so)."""
    config = run.meta.config
    if config is None:
        return True
    composite = config.get("composite")
    return isinstance(composite, dict) and bool(composite.get("weights"))


def _nothing_compared(gates: list[GateResult], paired: Pairing, min_pairs: int) -> str:
    """The reason for an overall ``none``: the most pairs any gating metric had, and the failures."""
    pairs = [g.n for g in gates if g.gating and g.metric != FAILURE_RATE_METRIC and g.slice == ALL_SLICE]
    if pairs:
        why = (
            f"no gating metric was scored on at least min_pairs {min_pairs} cases in both runs "
            f"(at most {max(pairs)})"
        )
    else:
        why = "no gating metric was scored in either run"
    for role, rows in (("baseline", paired.baseline_rows), ("candidate", paired.candidate_rows)):
        failed = sum(1 for r in rows if r.status != "ok")
        if failed:
            why += f"; {failed} of {len(rows)} {role} cases failed"
    return f"nothing could be compared: {why}"


def missing_output_warnings(pairing: Pairing, columns_of: dict[str, MetricColumns]) -> list[str]:
    """One line per run whose missing outputs count as losses (or gains) in gated metrics' pairs."""
    out = []
    for role in ("candidate", "baseline"):
        lost: dict[str, int] = {}
        cases = np.zeros(len(pairing.candidate_rows), dtype=bool)
        for name, columns in columns_of.items():
            column = pairing.column(name)
            if column is None or not columns.policy.gated:
                continue
            mask = column.missing_candidate if role == "candidate" else column.missing_baseline
            if mask.any():
                lost[name] = int(mask.sum())
                cases |= mask
        if lost:
            effect = "losses" if role == "candidate" else "gains for the candidate"
            named = ", ".join(f"{name} {count}" for name, count in lost.items())
            out.append(
                f"{int(cases.sum())} {role} case{'s' if cases.sum() != 1 else ''} produced no output "
                f"a metric needs (no answer, empty answer, no retrieved list or context) where the other "
                f"run scored it: counted at the metric's worst value, as {effect} ({named})"
            )
    return out


def _dataset_warnings(dataset: DatasetChange) -> list[str]:
    if dataset.same:
        return []
    return [
        f"datasets differ: compared on {dataset.common} common cases "
        f"({len(dataset.added)} added, {len(dataset.removed)} removed)"
    ]


def metric_columns(pairing: Pairing, gate_config: GateConfig) -> dict[str, MetricColumns]:
    """Every comparable metric's columns with its policy, then ``adapter.failure_rate``
    (:class:`gate.decision.pairing.Pairing` pairs the cases and orients the differences)."""
    out: dict[str, MetricColumns] = {}
    for name, column in pairing.columns().items():
        if name == FAILURE_RATE_METRIC:
            policy = metric_policy(name, gate_config, higher_is_better=False, gate_by_default=True)
        else:
            policy = direction_policy(name, pairing.direction(name), gate_config)
        out[name] = MetricColumns(policy, column.diff, column.candidate, column.baseline, column.value_range)
    return out


def direction_policy(name: str, d: Direction, gate_config: GateConfig) -> MetricPolicy:
    """The metric's gating (:func:`gate.decision.decide.metric_policy`) from how it reads."""
    return metric_policy(
        name,
        gate_config,
        higher_is_better=d.higher_is_better,
        gate_by_default=d.gate_by_default,
        categorical=d.categorical,
    )


def cluster_labels(rows: Sequence[Row], field: str) -> list[Any]:
    """The resampling unit of each row: its value of ``field``; a row without one is its own cluster."""
    labels: list[Any] = []
    for i, row in enumerate(rows):
        value = record_field(row, field)
        labels.append(("value", repr(value)) if value is not None else ("case", i))
    return labels


def resolve_cluster_by(rows: Sequence[Row], setting: str | None) -> tuple[str | None, str | None]:
    """(field whose clusters are resampled or None, "config" | "default" | None).

    ``"auto"`` takes ``metadata.document_id`` when the paired cases carry it, it spans at least
    two documents and some document holds two cases or more (otherwise clustering changes
    nothing); with fewer than ``MIN_CLUSTERS`` documents the gates take t on cluster means with
    G - 1 degrees of freedom (:func:`gate.stats.column_facts`), never case-level intervals.
    ``None`` or ``"none"`` resamples cases.
    """
    if setting is None or setting == "none":
        return None, None
    if setting != "auto":
        return setting, "config"
    counts: dict[str, int] = {}
    for row in rows:
        value = record_field(row, DEFAULT_CLUSTER_FIELD)
        if value is not None:
            key = repr(value)
            counts[key] = counts.get(key, 0) + 1
    if len(counts) >= 2 and max(counts.values(), default=0) > 1:
        return DEFAULT_CLUSTER_FIELD, "default"
    return None, None


@dataclass
class _Family:
    """The families across batches: the block family's distinct columns and resampled
    deviations, and the review family's distinct columns (their drop p-value and whether one of
    their gates is on ``all``)."""

    confidence: float
    seen: set[bytes]
    deviations: np.ndarray | None = None
    tests: dict[bytes, tuple[float, bool]] = field(default_factory=dict)

    def test(self, key: bytes, p_value: float, whole: bool) -> None:
        _, was_whole = self.tests.get(key, (p_value, False))
        self.tests[key] = (p_value, whole or was_whole)

    def review_thresholds(self, q: float) -> dict[bytes, float]:
        """Each tested column's p-value threshold for a confirmed drop: ``w · cutoff`` of the
        weighted Benjamini-Hochberg rule (:func:`gate.decision.decide.review_weights`), with
        ``cutoff = q / G`` (what one gate would need alone) when the rule confirms nothing."""
        if not self.tests:
            return {}
        keys = list(self.tests)
        p = np.array([self.tests[k][0] for k in keys])
        weights = review_weights([self.tests[k][1] for k in keys])
        # When nothing is confirmed the rule's cutoff is 0; each gate is then shown the
        # threshold it would have needed alone, the first step q / G. No gate reaches it (none
        # qualified), so no decision changes, and a reason never reads "p = 0.0077 > 0".
        cutoff = weighted_bh_cutoff(p, weights, q) or q / len(keys)
        return {k: float(w) * cutoff for k, w in zip(keys, weights, strict=True)}

    def add(self, family_max: np.ndarray | None) -> None:
        if family_max is None:
            return
        self.deviations = family_max if self.deviations is None else np.maximum(self.deviations, family_max)

    def critical(self, family_wise: bool) -> tuple[float, str]:
        tail = (1 - self.confidence) / 2
        if not family_wise:
            return normal_quantile(tail), "none"
        dev = self.deviations if self.deviations is not None else np.empty(0)
        return family_critical_value(dev[np.isfinite(dev)], len(self.seen), self.confidence)


@dataclass(frozen=True)
class _Batch:
    """One batch of gates: its columns' facts and their shared bootstrap (when needed).

    ``level_cols`` maps a gate to its candidate-level columns: the levels for a floor and the
    negated levels for a ceiling, so both block on an upper bound.
    """

    gates: list[_Gate]
    pairs: list[int]
    facts: ColumnFacts
    boot: BootstrapResult | None
    level_cols: dict[int, tuple[int | None, int | None]]
    # per gate: its drop p-value and its column's key in the review family (None: not tested)
    p_values: np.ndarray
    keys: list[bytes | None]


def decide_gates(
    gates: list[_Gate],
    columns_of: dict[str, MetricColumns],
    cfg: GateConfig,
    floor: int,
    clusters: list[Any] | None,
    ahead: DrawnAhead | None = None,
) -> tuple[list[GateResult], dict[str, Any]]:
    """Every gate's intervals and decision, and the family's settings.

    Gates are prepared in batches that share resamples (a batch's columns, cases x up to three
    per gate and a few working copies, stay within tens of MB whatever the case count); the
    block family's critical value needs every batch's resampled deviations, so decisions follow
    once all batches are prepared.
    """
    family = _Family(cfg.confidence, set())
    if not gates:
        c, method = family.critical(cfg.family_wise)
        return [], _family_settings(cfg, 0, c, method)
    n = gates[0].mask.size
    per_batch = max(16, min(COLUMN_GROUP // 3, (1 << 21) // max(n, 1)))
    batches = [
        _prepare_batch(gates[start : start + per_batch], columns_of, cfg, floor, clusters, family, ahead)
        for start in range(0, len(gates), per_batch)
    ]
    critical, method = family.critical(cfg.family_wise)
    block_tail = _block_tail(cfg, critical, method)
    thresholds = family.review_thresholds(cfg.review_fdr)
    results = [
        result
        for batch in batches
        for result in _decide_batch(batch, columns_of, cfg, floor, block_tail, critical, thresholds)
    ]
    return results, _family_settings(cfg, len(family.seen), critical, method, len(family.tests))


def _block_tail(cfg: GateConfig, critical: float, method: str) -> float:
    """One-sided level of the block bounds: the per-gate tail itself when there is no family."""
    tail = (1 - cfg.confidence) / 2
    return tail if method == "none" else min(normal_tail(critical), tail)


def _family_settings(
    cfg: GateConfig, size: int, critical: float, method: str, tests: int = 0
) -> dict[str, Any]:
    tail = _block_tail(cfg, critical, method)
    return {
        "review_family_size": tests,
        "family_size": size,
        "family_method": method,
        "family_critical": critical,
        "block_confidence": 1 - tail,
        "min_nonzero": minimum_nonzero(tail),
    }


def _settings(
    gate_config: GateConfig,
    floor: int,
    family: dict[str, Any],
    cluster_field: str | None,
    cluster_source: str | None,
) -> Settings:
    return Settings(
        margin=gate_config.margin,
        confidence=gate_config.confidence,
        interval_confidence=gate_config.confidence,
        interval=gate_config.interval,
        resamples=gate_config.resamples,
        seed=gate_config.seed,
        min_pairs=floor,
        family_wise=gate_config.family_wise,
        underpowered=gate_config.underpowered,
        review_fdr=gate_config.review_fdr,
        cluster_by=cluster_field,
        cluster_source=cluster_source,  # type: ignore[arg-type]  # one of the Literal's values, chosen above
        slices=list(gate_config.slices),
        gate_slices=list(
            gate_config.gate_slices if gate_config.gate_slices is not None else gate_config.slices
        ),
        **family,
    )


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _batch_columns(
    batch: list[_Gate], pairs: list[int], columns_of: dict[str, MetricColumns], floor: int
) -> tuple[list[np.ndarray], dict[int, tuple[int | None, int | None]]]:
    """Each gate's oriented differences on its cases (all NaN below the pairs floor), then the
    candidate levels of gates with a floor and the negated levels of those with a ceiling,
    with where those level columns are (see :class:`_Batch`)."""
    nothing = np.full(batch[0].mask.size, np.nan)
    columns = [
        np.where(g.mask, columns_of[g.policy.name].diff, np.nan) if p >= floor else nothing
        for g, p in zip(batch, pairs, strict=True)
    ]
    level_cols: dict[int, tuple[int | None, int | None]] = {}
    for i, g in enumerate(batch):
        if pairs[i] < floor or (g.policy.floor is None and g.policy.ceiling is None):
            continue
        values = np.where(g.mask, columns_of[g.policy.name].candidate, np.nan)
        low = high = None
        if g.policy.floor is not None:
            low = len(columns)
            columns.append(values)
        if g.policy.ceiling is not None:
            high = len(columns)
            columns.append(-values)
        level_cols[i] = (low, high)
    return columns, level_cols


def _review_keys(
    batch: list[_Gate],
    pairs: list[int],
    floor: int,
    matrix: np.ndarray,
    p_values: np.ndarray,
    family: _Family,
) -> list[bytes | None]:
    """Each gating gate with enough pairs enters the review family with its drop p-value, under
    its column's bytes (identical columns count once); None for the others."""
    keys: list[bytes | None] = []
    for i, g in enumerate(batch):
        key = None
        if g.gating and pairs[i] >= floor:
            key = np.ascontiguousarray(matrix[:, i]).tobytes()
            family.test(key, float(p_values[i]), g.key == ALL_SLICE)
        keys.append(key)
    return keys


def _family_scale(
    batch: list[_Gate],
    pairs: list[int],
    floor: int,
    matrix: np.ndarray,
    facts: ColumnFacts,
    level_cols: dict[int, tuple[int | None, int | None]],
    family: _Family,
) -> np.ndarray:
    """Per column, 1/se for the block family's max-statistic: the columns of gating gates with
    enough pairs (their level columns with them) join the family; 0 for the others."""
    owner = {j: i for i, cols in level_cols.items() for j in cols if j is not None}
    scale = np.zeros(matrix.shape[1])
    for j in range(matrix.shape[1]):
        i = owner.get(j, j)
        if not batch[i].gating or pairs[i] < floor:
            continue
        family.seen.add(np.ascontiguousarray(matrix[:, j]).tobytes())
        se = float(facts.se[j])
        # A column without spread (every pair changed alike) counts in the family but has no
        # standardised deviation to add to the max-statistic.
        if math.isfinite(se) and se > 0:
            scale[j] = 1.0 / se
    return scale


def _prepare_batch(
    batch: list[_Gate],
    columns_of: dict[str, MetricColumns],
    cfg: GateConfig,
    floor: int,
    clusters: list[Any] | None,
    family: _Family,
    ahead: DrawnAhead | None,
) -> _Batch:
    """A batch's columns, their facts, their family membership and the shared bootstrap.

    Columns: each gate's oriented differences (empty below the pairs floor: nothing to
    resample), then the candidate-level columns of gates with a floor or ceiling. The block
    family holds every gating column with enough pairs, and the level columns: membership is
    fixed by the dataset, not by how many pairs changed, so a growing drop never raises the
    critical value by joining the family. The review family holds the same difference columns
    with their drop p-values. Identical columns (``all`` and ``kind=qa`` when every case is qa,
    two metrics that always agree) count once in both.
    """
    pairs = [int(g.mask.sum()) for g in batch]
    columns, level_cols = _batch_columns(batch, pairs, columns_of, floor)
    matrix = np.column_stack(columns)
    facts = column_facts(matrix, clusters=clusters, method=cfg.interval)
    p_values = drop_p_values(facts)
    keys = _review_keys(batch, pairs, floor, matrix, p_values, family)
    scale = _family_scale(batch, pairs, floor, matrix, facts, level_cols, family)
    in_family = cfg.family_wise and bool(np.any(scale > 0))
    boot = None
    if in_family or facts.needs_bootstrap():
        load_root_finder()  # needed after the bootstrap: imported while its workers compute
        boot = bootstrap_means(
            matrix,
            resamples=cfg.resamples,
            confidence=cfg.confidence,
            seed=cfg.seed,
            clusters=clusters,
            family_scale=scale if in_family else None,
            keep_tail=(1 - cfg.confidence) / 2,
            ahead=ahead,
        )
        family.add(boot.family_max)
    return _Batch(batch, pairs, facts, boot, level_cols, p_values[: len(batch)], keys)


def _common_fields(g: _Gate, cols: MetricColumns, n_pairs: int) -> dict[str, Any]:
    """The fields every gate's result has, decided or skipped: what and where, the runs' means."""
    p = g.policy
    return dict(
        metric=p.name,
        slice=g.key,
        gating=g.gating,
        higher_is_better=p.higher_is_better,
        n=n_pairs,
        baseline_mean=_finite(float(np.nanmean(cols.baseline[g.mask]))) if n_pairs else None,
        candidate_mean=_finite(float(np.nanmean(cols.candidate[g.mask]))) if n_pairs else None,
        margin=p.margin,
        floor=p.floor,
        ceiling=p.ceiling,
        note=p.note,
    )


def _level(
    where: tuple[int | None, int | None] | None,
    lo_all: np.ndarray,
    hi_all: np.ndarray,
    block_all: np.ndarray,
    value_range: tuple[float, float] | None,
    p: MetricPolicy,
) -> tuple[float | None, float | None, str | None, Literal["floor", "ceiling"] | None]:
    """A gate's candidate-level interval, and a floor or ceiling its family-wise bound crosses
    (the reason and which), from its level columns ``where`` (None: the gate has neither)."""
    if where is None:
        return None, None, None, None
    low, high = where
    cand_lo = cand_hi = None
    if low is not None:
        cand_lo, cand_hi = feasible(float(lo_all[low]), float(hi_all[low]), value_range, level=True)
    if high is not None:
        cand_lo, cand_hi = feasible(-float(hi_all[high]), -float(lo_all[high]), value_range, level=True)
    bounds = (
        -float(block_all[high]) if high is not None else cand_lo,
        float(block_all[low]) if low is not None else cand_hi,
    )
    breach = level_breach(*bounds, p.floor, p.ceiling)
    if not breach:
        return cand_lo, cand_hi, None, None
    return cand_lo, cand_hi, breach, "floor" if level_breach(*bounds, p.floor, None) else "ceiling"


def _mde(factor: float, null_sd: float, null_deff: float, n_pairs: int) -> float | None:
    """The drop that blocks with 80% power, ``factor * sd0 / sqrt(n)`` with ``sd0`` the spread
    under no change times the root design effect (a regression cannot inflate it); None when
    nothing changed (``sd0`` zero or undefined)."""
    sd0 = null_sd * math.sqrt(null_deff)
    return _finite(factor * sd0 / math.sqrt(n_pairs)) if math.isfinite(sd0) and sd0 > 0 else None


def _decide_batch(
    batch: _Batch,
    columns_of: dict[str, MetricColumns],
    cfg: GateConfig,
    floor: int,
    block_tail: float,
    critical: float,
    thresholds: dict[bytes, float],
) -> list[GateResult]:
    """Decide one prepared batch: per-gate bounds for passes, family-wise bounds for blocks,
    the review family's thresholds for confirmed drops."""
    facts, boot = batch.facts, batch.boot
    tail = (1 - cfg.confidence) / 2
    lo_all = column_bounds(facts, boot, tail, upper=False)
    hi_all = column_bounds(facts, boot, tail, upper=True)
    block_all = column_bounds(facts, boot, block_tail, upper=True)
    needed_nonzero = minimum_nonzero(block_tail)
    mde_factor = critical + normal_quantile(1 - POWER)
    null_sd, null_deff = facts.null_sd, facts.null_deff
    needed_all = pairs_needed(
        null_sd[: len(batch.gates)],
        [g.policy.margin for g in batch.gates],
        ternary=facts.ternary[: len(batch.gates)],
        deff=null_deff[: len(batch.gates)],
        nonzero_share=(facts.nonzero / np.maximum(facts.units, 1))[: len(batch.gates)],
        confidence=cfg.confidence,
    )
    out: list[GateResult] = []
    for i, g in enumerate(batch.gates):
        p = g.policy
        cols = columns_of[p.name]
        n_pairs = batch.pairs[i]
        common = _common_fields(g, cols, n_pairs)
        skipped = skip_reason(n_pairs, floor)
        if skipped:
            delta = _finite(float(np.mean(cols.diff[g.mask]))) if n_pairs else None
            cause = gate_cause("skipped", gating=g.gating, lo=None, hi=None, margin=p.margin, method=None)
            out.append(GateResult(**common, delta=delta, decision="skipped", cause=cause, reason=skipped))
            continue
        method = facts.method[i]
        clustered = method.startswith("cluster-")
        lo, hi = feasible(float(lo_all[i]), float(hi_all[i]), cols.value_range)
        block_hi = feasible(float(block_all[i]), float(block_all[i]), cols.value_range)[1]
        nonzero = int(facts.nonzero[i])
        p_value = float(batch.p_values[i])
        key = batch.keys[i]
        threshold = thresholds.get(key, 0.0) if key is not None else None
        confirmed = threshold is not None and p_value <= threshold
        need = float(needed_all[i])
        pairs_to_pass = int(need) if math.isfinite(need) else None
        underpowered = pairs_to_pass is not None and n_pairs < pairs_to_pass
        decision, reason = gate_decision(
            lo,
            hi,
            block_hi,
            p.margin,
            nonzero=nonzero,
            needed_nonzero=needed_nonzero,
            method=method,
            p_value=p_value,
            threshold=threshold,
            n=n_pairs,
            pairs_needed=pairs_to_pass,
        )
        family_block = decision == "block"
        level = _level(batch.level_cols.get(i), lo_all, hi_all, block_all, cols.value_range, p)
        cand_lo, cand_hi, breach, breach_kind = level
        if breach:
            decision, reason = "block", breach
        cause = gate_cause(
            decision,
            gating=g.gating,
            lo=lo,
            hi=hi,
            margin=p.margin,
            method=method,
            breach=breach_kind,
            family_block=family_block,
            confirmed=confirmed,
        )
        counts = g.gating and counts_toward_overall(decision, cause, cfg.underpowered)
        mde = _mde(mde_factor, float(null_sd[i]), float(null_deff[i]), n_pairs)
        out.append(
            GateResult(
                **common,
                clusters=int(facts.units[i]) if clustered else None,
                method=method,
                unit="cluster" if clustered else "case",
                nonzero=nonzero,
                delta=_finite(float(facts.estimate[i])),
                lo=lo,
                hi=hi,
                block_hi=block_hi,
                p_value=p_value,
                review_threshold=threshold,
                candidate_lo=cand_lo,
                candidate_hi=cand_hi,
                decision=decision,
                cause=cause,
                counts=counts,
                worse=hi < 0,
                reason=reason,
                mde=mde,
                mde_exceeds_margin=bool(mde is not None and mde > p.margin),
                pairs_needed=pairs_to_pass,
                underpowered=underpowered,
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
    total = drops.sum(axis=1)
    hits = np.flatnonzero(worst > 0).tolist()
    # The TOP_DROPS smallest of (-worst, -total drop, case id): worst first, ties by the total.
    keys = zip(
        (-worst[hits]).tolist(), (-total[hits]).tolist(), (rows[i].case_id for i in hits), hits, strict=True
    )
    out = []
    for i in (key[-1] for key in heapq.nsmallest(TOP_DROPS, keys)):
        per_metric = {
            gated[j]: float(drops[i, j]) for j in np.argsort(-drops[i], kind="stable") if drops[i, j] > 0
        }
        out.append(CaseDrop(case_id=rows[i].case_id, worst=float(worst[i]), drops=per_metric))
    return out
