"""Pair two run artifacts by case id and gate every metric and slice (design.md decision rule).

:func:`compare_runs` checks that the runs measure the same thing, pairs the cases present in
both, bootstraps every (metric, slice) difference in one pass with shared resamples
(:func:`gate.stats.bootstrap_means`) and applies :mod:`gate.decision.decide`. The returned
:class:`Comparison` is also the ``--json`` document (``docs/gate.md``).

Comparability:

- a different dataset sha256 pairs on the common case ids and lists cases added and removed;
- a different ``k``, ``source_match`` or nDCG gain convention is not comparable;
- a different judge model or prompt template hash is not comparable unless
  ``allow_mixed_judges`` (then a warning names what differs);
- a run whose status is not ``complete`` is compared with a warning;
- no case in common is not comparable.

Pairs are per metric: a case pairs for a metric when both runs scored it (status ``scored``
with a value). Rows whose case failed (adapter error, timeout) carry no scores; they enter
only the ``adapter.failure_rate`` gate, which every common case pairs for.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from pydantic import Field

from gate.core.errors import NotComparableError
from gate.core.strict import StrictModel
from gate.decision.decide import (
    ALL_SLICE,
    FAILURE_RATE_METRIC,
    MetricPolicy,
    family_confidence,
    interval_decision,
    interval_reason,
    level_breach,
    metric_policy,
    overall_decision,
    skip_reason,
    slice_gates,
)
from gate.metrics import registry
from gate.metrics.aggregate import slice_keys
from gate.model.artifact import Row, RunArtifact
from gate.model.config import GateConfig
from gate.stats import COLUMN_GROUP, bootstrap_means, minimum_detectable_effect

COMPARISON_SCHEMA_VERSION = 1
TOP_DROPS = 10


class RunIdentity(StrictModel):
    run_id: str
    created_at: str
    commit: str | None = None
    ref: str | None = None
    status: str
    dataset_path: str
    dataset_sha256: str
    dataset_version: str | None = None
    case_count: int
    judge_model: str | None = None


class RunCounts(StrictModel):
    """Error, skip and cost counts of one run (over all its rows)."""

    cases: int
    failures: int  # rows with status adapter_error or timeout
    scored: int  # metric results with status scored
    skipped: int  # skipped + not_applicable
    judge_errors: int
    cost_usd: float
    input_tokens: int
    output_tokens: int
    judge_calls: int
    cost_estimated: bool = False


class DatasetChange(StrictModel):
    same: bool
    baseline_sha256: str
    candidate_sha256: str
    common: int
    added: list[str] = Field(default_factory=list)  # only in the candidate
    removed: list[str] = Field(default_factory=list)  # only in the baseline


class Settings(StrictModel):
    margin: float
    confidence: float
    # the level every interval was computed at (differs from confidence in family-wise mode)
    interval_confidence: float
    interval: Literal["percentile", "bca"]
    resamples: int
    seed: int
    min_pairs: int
    family_wise: bool
    family_size: int
    cluster_by: str | None = None
    slices: list[str]
    gate_slices: list[str]


class GateResult(StrictModel):
    """One metric on one slice. ``delta``, ``lo``, ``hi`` are oriented: positive = better."""

    metric: str
    slice: str
    gating: bool  # counts toward the overall decision
    higher_is_better: bool
    n: int  # pairs
    clusters: int | None = None  # clusters holding the pairs (cluster bootstrap only)
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    delta: float | None = None
    lo: float | None = None
    hi: float | None = None
    margin: float
    floor: float | None = None
    ceiling: float | None = None
    candidate_lo: float | None = None
    candidate_hi: float | None = None
    decision: Literal["pass", "review", "block", "skipped"]
    reason: str
    mde: float | None = None
    mde_exceeds_margin: bool = False
    note: str | None = None  # why a shown gate does not count


class CaseDrop(StrictModel):
    case_id: str
    worst: float  # the largest oriented drop over the metrics
    drops: dict[str, float]  # metric -> oriented drop (> 0), largest first


class Comparison(StrictModel):
    """The result of :func:`compare_runs`: also the ``ragproof compare --json`` document."""

    schema_version: int = COMPARISON_SCHEMA_VERSION
    overall: Literal["pass", "review", "block"]
    baseline: RunIdentity
    candidate: RunIdentity
    settings: Settings
    dataset: DatasetChange
    gates: list[GateResult]
    top_drops: list[CaseDrop] = Field(default_factory=list)
    counts: dict[str, RunCounts]  # "baseline" and "candidate"
    warnings: list[str] = Field(default_factory=list)

    def gating(self) -> list[GateResult]:
        return [g for g in self.gates if g.gating]

    def by_decision(self, decision: str) -> list[GateResult]:
        return [g for g in self.gates if g.gating and g.decision == decision]


# -- comparability ------------------------------------------------------------------------


def check_comparable(baseline: RunArtifact, candidate: RunArtifact, *, allow_mixed_judges: bool) -> list[str]:
    """Raise NotComparableError for runs that measure different things; return warnings."""
    b, c = baseline.meta, candidate.meta
    for field, label in (("k", "k"), ("source_match", "source_match"), ("ndcg_gain", "nDCG gain convention")):
        bv, cv = getattr(b, field), getattr(c, field)
        if bv != cv:
            raise NotComparableError(
                f"runs not comparable: {label} differs (baseline {bv!r}, candidate {cv!r})"
            )
    if b.source_match == "document" and b.document_id_key != c.document_id_key:
        raise NotComparableError(
            "runs not comparable: document_id_key differs "
            f"(baseline {b.document_id_key!r}, candidate {c.document_id_key!r})"
        )
    warnings: list[str] = []
    judge_diffs: list[str] = []
    if (b.judge.provider, b.judge.model) != (c.judge.provider, c.judge.model):
        judge_diffs.append(f"judge model (baseline {b.judge.model!r}, candidate {c.judge.model!r})")
    for name in sorted(set(b.judge.prompts) | set(c.judge.prompts)):
        bh, ch = b.judge.prompts.get(name), c.judge.prompts.get(name)
        if bh != ch:
            judge_diffs.append(f"judge prompt {name} (baseline {_short(bh)}, candidate {_short(ch)})")
    if judge_diffs:
        what = "; ".join(judge_diffs)
        if not allow_mixed_judges:
            raise NotComparableError(
                f"runs not comparable: {what}; re-score the baseline or pass --allow-mixed-judges"
            )
        warnings.append(f"mixed judges allowed: {what}")
    for role, meta in (("baseline", b), ("candidate", c)):
        if meta.status != "complete":
            warnings.append(f"{role} run {meta.run_id} has status {meta.status}: it is compared as it is")
        warnings.extend(f"{role} run: {w}" for w in meta.warnings)
    return warnings


def _short(sha: str | None) -> str:
    return "absent" if sha is None else sha[:12]


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


def _cluster_labels(rows: list[Row], field: str) -> list[Any]:
    labels: list[Any] = []
    for i, row in enumerate(rows):
        head, _, rest = field.partition(".")
        value: Any = row.metadata if head == "metadata" else getattr(row, head, None)
        for part in rest.split(".") if rest else ():
            value = value.get(part) if isinstance(value, dict) else None
        # A case without the field is a cluster of its own.
        labels.append(("value", repr(value)) if value is not None else ("case", i))
    return labels


def _run_counts(art: RunArtifact) -> RunCounts:
    scored = skipped = judge_errors = 0
    for row in art.rows:
        for result in row.metrics.values():
            if result.status == "scored":
                scored += 1
            elif result.status == "judge_error":
                judge_errors += 1
            else:
                skipped += 1
    cost = art.meta.cost
    return RunCounts(
        cases=len(art.rows),
        failures=sum(1 for r in art.rows if r.status != "ok"),
        scored=scored,
        skipped=skipped,
        judge_errors=judge_errors,
        cost_usd=cost.usd,
        input_tokens=cost.input_tokens,
        output_tokens=cost.output_tokens,
        judge_calls=cost.judge_calls,
        cost_estimated=cost.estimated,
    )


def _identity(art: RunArtifact) -> RunIdentity:
    m = art.meta
    return RunIdentity(
        run_id=m.run_id,
        created_at=m.created_at,
        commit=m.git.commit,
        ref=m.git.ref,
        status=m.status,
        dataset_path=m.dataset.path,
        dataset_sha256=m.dataset.sha256,
        dataset_version=m.dataset.version,
        case_count=m.dataset.case_count,
        judge_model=m.judge.model,
    )


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# -- the comparison -----------------------------------------------------------------------


class _Gate:
    """A gate under construction: its column of oriented differences and its policy."""

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
    base_by_id = {r.case_id: r for r in baseline.rows}
    cand_ids = {r.case_id for r in candidate.rows}
    cand_rows = [r for r in candidate.rows if r.case_id in base_by_id]
    if not cand_rows:
        raise NotComparableError(
            f"runs not comparable: no case id in common between {baseline.source or 'baseline'} "
            f"and {candidate.source or 'candidate'}"
        )
    base_rows = [base_by_id[r.case_id] for r in cand_rows]
    dataset = DatasetChange(
        same=baseline.meta.dataset.sha256 == candidate.meta.dataset.sha256,
        baseline_sha256=baseline.meta.dataset.sha256,
        candidate_sha256=candidate.meta.dataset.sha256,
        common=len(cand_rows),
        added=[r.case_id for r in candidate.rows if r.case_id not in base_by_id],
        removed=[r.case_id for r in baseline.rows if r.case_id not in cand_ids],
    )
    if not dataset.same:
        warnings.append(
            f"datasets differ: compared on {dataset.common} common cases "
            f"({len(dataset.added)} added, {len(dataset.removed)} removed)"
        )

    # Oriented per-case differences and candidate levels, one entry per metric.
    diffs: dict[str, np.ndarray] = {}
    levels: dict[str, np.ndarray] = {}
    base_levels: dict[str, np.ndarray] = {}
    policies: dict[str, MetricPolicy] = {}
    names = _metric_names(baseline, candidate)
    base_table, cand_table = _score_table(base_rows, names), _score_table(cand_rows, names)
    for name in names:
        hib, by_default, categorical = _direction(name, baseline, candidate)
        policy = metric_policy(
            name, gate_config, higher_is_better=hib, gate_by_default=by_default, categorical=categorical
        )
        if categorical:
            continue
        b, c = base_table[name], cand_table[name]
        paired = ~np.isnan(b) & ~np.isnan(c)
        if not paired.any() and np.isnan(b).all() and np.isnan(c).all():
            continue  # never scored in either run (e.g. a judge metric without a judge)
        sign = 1.0 if policy.higher_is_better else -1.0
        diffs[name] = np.where(paired, sign * (c - b), np.nan)
        levels[name], base_levels[name] = np.where(paired, c, np.nan), np.where(paired, b, np.nan)
        policies[name] = policy
    fail_b = np.array([r.status != "ok" for r in base_rows], dtype=np.float64)
    fail_c = np.array([r.status != "ok" for r in cand_rows], dtype=np.float64)
    policies[FAILURE_RATE_METRIC] = metric_policy(
        FAILURE_RATE_METRIC, gate_config, higher_is_better=False, gate_by_default=True
    )
    diffs[FAILURE_RATE_METRIC] = fail_b - fail_c
    levels[FAILURE_RATE_METRIC], base_levels[FAILURE_RATE_METRIC] = fail_c, fail_b

    # Slice membership over the paired cases (from the candidate's rows).
    members: dict[str, list[int]] = {}
    for i, row in enumerate(cand_rows):
        for key in slice_keys(row, gate_config.slices):
            members.setdefault(key, []).append(i)
    slice_order = [ALL_SLICE] + sorted(k for k in members if k != ALL_SLICE)
    n = len(cand_rows)
    masks = {}
    for key in slice_order:
        mask = np.zeros(n, dtype=bool)
        mask[members.get(key, range(n) if key == ALL_SLICE else [])] = True
        masks[key] = mask

    gates: list[_Gate] = []
    for name, policy in policies.items():
        for key in slice_order:
            gates.append(
                _Gate(
                    policy,
                    key,
                    masks[key] & ~np.isnan(diffs[name]),
                    policy.gated and slice_gates(key, gate_config),
                )
            )
    pairs = [int(g.mask.sum()) for g in gates]
    family = sum(1 for g, p in zip(gates, pairs, strict=True) if g.gating and p >= gate_config.min_pairs)
    level = (
        family_confidence(gate_config.confidence, family)
        if gate_config.family_wise
        else gate_config.confidence
    )
    clusters = _cluster_labels(cand_rows, gate_config.cluster_by) if gate_config.cluster_by else None

    # Gates of one batch share one resampling pass; a batch's columns (cases x up to two per
    # gate, a few working copies) stay within tens of MB whatever the case count.
    per_batch = max(16, min(COLUMN_GROUP // 2, (1 << 21) // n))
    results = [
        _decide_batch(batch, diffs, levels, base_levels, gate_config, level, clusters)
        for batch in (gates[i : i + per_batch] for i in range(0, len(gates), per_batch))
    ]
    gate_results = [g for batch in results for g in batch]
    overall = overall_decision(g.decision for g in gate_results if g.gating)
    return Comparison(
        overall=overall,
        baseline=_identity(baseline),
        candidate=_identity(candidate),
        settings=Settings(
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
        ),
        dataset=dataset,
        gates=gate_results,
        top_drops=_top_drops(cand_rows, diffs, policies),
        counts={"baseline": _run_counts(baseline), "candidate": _run_counts(candidate)},
        warnings=warnings,
    )


def _decide_batch(
    batch: list[_Gate],
    diffs: dict[str, np.ndarray],
    levels: dict[str, np.ndarray],
    base_levels: dict[str, np.ndarray],
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
            np.where(g.mask, diffs[g.policy.name], np.nan) if n_pairs >= cfg.min_pairs else nothing
        )
    for i, g in enumerate(batch):
        if pairs[i] >= cfg.min_pairs and (g.policy.floor is not None or g.policy.ceiling is not None):
            level_col[i] = len(columns)
            columns.append(np.where(g.mask, levels[g.policy.name], np.nan))
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
        bmean = _finite(float(np.nanmean(base_levels[p.name][g.mask]))) if n_pairs else None
        cmean = _finite(float(np.nanmean(levels[p.name][g.mask]))) if n_pairs else None
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
            delta = _finite(float(np.mean(diffs[p.name][g.mask]))) if n_pairs else None
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


def _top_drops(
    rows: list[Row], diffs: dict[str, np.ndarray], policies: dict[str, MetricPolicy]
) -> list[CaseDrop]:
    """The cases whose gated metrics dropped most (largest single oriented drop first)."""
    gated = [name for name, p in policies.items() if p.gated]
    if not gated:
        return []
    stack = np.column_stack([diffs[name] for name in gated])
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
