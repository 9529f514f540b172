"""The comparison document: what :func:`gate.decision.compare.compare_runs` returns.

It is also the ``ragproof compare --json`` document (``docs/gate.md``): every model here is
part of that public contract and changes only with ``COMPARISON_SCHEMA_VERSION``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gate.core.strict import StrictModel
from gate.decision.decide import Decision, GateCause, Outcome, VerdictCause
from gate.model.artifact import RunArtifact

# 2: per-gate method, unit, block bound and power; family settings
# 3: per-gate cause, counts and worse; the verdict (its cause, the gates worse on their own evidence,
#    what the set rules out)
COMPARISON_SCHEMA_VERSION = 3


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

    @classmethod
    def of(cls, art: RunArtifact) -> RunIdentity:
        """The run's identity as recorded in its ``run.json``."""
        m = art.meta
        return cls(
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

    @classmethod
    def of(cls, art: RunArtifact) -> RunCounts:
        """Counts over every row of ``art`` (metric results by status, cost totals)."""
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
        return cls(
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
    # the two-sided level of every gate's [lo, hi] (a pass needs lo >= -margin at this level)
    interval_confidence: float
    # auto: each gate's interval chosen by its data (GateResult.method); percentile: bootstrap
    interval: Literal["auto", "percentile"]
    resamples: int
    seed: int
    min_pairs: int  # the pairs floor in force (configured, or derived)
    family_wise: bool
    # distinct gating gates with enough pairs, and the floor/ceiling tests (identical columns once)
    family_size: int
    # how the family's block bound was set: max-statistic | bonferroni | none (per gate)
    family_method: str = "none"
    # critical value c of the block bound (per gate: z of (1 + confidence) / 2)
    family_critical: float | None = None
    # one-sided level of each gate's block bound: 1 - Φ(-c)
    block_confidence: float | None = None
    # non-zero differences a block needs at that level: ceil(log2(1 / (1 - block_confidence)))
    min_nonzero: int | None = None
    # inform | review: whether a gate that neither passed nor showed a confirmed drop makes the
    # overall decision review
    underpowered: str = "inform"
    # the false-discovery level of reviews, and the distinct gates tested for a drop
    review_fdr: float = 0.10
    review_family_size: int = 0
    # the case field whose clusters were resampled (None: cases), and where it came from
    cluster_by: str | None = None
    cluster_source: Literal["config", "default"] | None = None
    slices: list[str]
    gate_slices: list[str]


class GateResult(StrictModel):
    """One metric on one slice. ``delta``, ``lo``, ``hi`` are oriented: positive = better."""

    metric: str
    slice: str
    gating: bool  # counts toward the overall decision
    higher_is_better: bool
    n: int  # pairs
    clusters: int | None = None  # clusters holding the pairs (when clusters were resampled)
    # the interval behind the decision: tango | t | bootstrap | cluster-tango | cluster-t |
    # cluster-bootstrap | cluster-sign-flip (fewer than 10 clusters) | no-change (no pair changed) |
    # percentile (forced); None when skipped
    method: str | None = None
    unit: Literal["case", "cluster"] | None = None  # what the interval treats as independent
    nonzero: int | None = None  # units whose difference is not zero
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
    block_hi: float | None = None  # the family-wise upper bound a block needs below zero
    # one-sided p-value of H0: Δ >= 0 (small: evidence of a drop), by the gate's method
    p_value: float | None = None
    # its threshold in the review family (weight x weighted Benjamini-Hochberg cutoff); a review
    # needs p_value <= review_threshold; None when the gate is not in the family
    review_threshold: float | None = None
    decision: Decision
    # why (one home: reports render it, never re-derive it)
    cause: GateCause = GateCause.TOO_FEW_PAIRS
    # its decision enters the overall one (a gating gate whose pass, review or block counts)
    counts: bool = False
    # its own interval lies wholly below zero (hi < 0), whatever the family says
    worse: bool = False
    reason: str
    # smallest true drop that blocks with 80% probability at the family-wise level,
    # (c + 0.84) σ0 / √n with σ0 the spread under no change (from the improvements only)
    mde: float | None = None
    mde_exceeds_margin: bool = False
    # pairs to pass with 80% probability when nothing changed, from σ0 (a regression cannot
    # inflate it): gate.stats.pairs_needed
    pairs_needed: int | None = None
    # fewer pairs than pairs_needed (whatever the decision)
    underpowered: bool = False
    note: str | None = None  # why a shown gate does not count


class GateRef(StrictModel):
    """One gate named in the verdict, with its interval (oriented: positive = better)."""

    metric: str
    slice: str
    n: int
    delta: float | None = None
    lo: float | None = None
    hi: float | None = None
    cause: GateCause

    @classmethod
    def of(cls, g: GateResult) -> GateRef:
        return cls(metric=g.metric, slice=g.slice, n=g.n, delta=g.delta, lo=g.lo, hi=g.hi, cause=g.cause)


class Verdict(StrictModel):
    """The overall result and why: what the data decided, then the policy change and acceptance.

    ``decision`` is final (exit code and check conclusion follow it); ``comparison_decision``
    and ``comparison_cause`` are what the two runs alone decided.
    """

    decision: Outcome
    cause: VerdictCause
    comparison_decision: Outcome
    comparison_cause: VerdictCause
    # gating gates whose own interval lies wholly below zero and that neither review nor block,
    # worst upper bound first
    worse: list[GateRef] = Field(default_factory=list)
    # the largest drop the `all` quality gates leave possible: max(0, -lo) over them (None: none decided)
    ruled_out: float | None = None
    # the pairs the margin needs on `all`: the largest pairs_needed of its quality gates that did not pass
    cases_needed: int | None = None
    policy_changed: bool = False
    accepted_by: str | None = None
    accepted_commit: str | None = None


class CaseDrop(StrictModel):
    case_id: str
    worst: float  # the largest oriented drop over the metrics
    drops: dict[str, float]  # metric -> oriented drop (> 0), largest first


class Comparison(StrictModel):
    """The result of :func:`compare_runs`: also the ``ragproof compare --json`` document."""

    schema_version: int = COMPARISON_SCHEMA_VERSION
    overall: Outcome
    # why the overall result is "none" (nothing could be compared); None otherwise
    overall_reason: str | None = None
    verdict: Verdict
    baseline: RunIdentity
    candidate: RunIdentity
    settings: Settings
    dataset: DatasetChange
    gates: list[GateResult]
    top_drops: list[CaseDrop] = Field(default_factory=list)
    counts: dict[str, RunCounts]  # "baseline" and "candidate"
    warnings: list[str] = Field(default_factory=list)
    # gating metrics scored on no case in either run
    unscored: list[str] = Field(default_factory=list)

    def gating(self) -> list[GateResult]:
        return [g for g in self.gates if g.gating]
