"""The metric registry: what each metric is, what it needs, and the shared skip rules.

A metric is a function ``compute(case, output, ctx) -> MetricResult`` registered with
:func:`metric`. Preconditions common to many metrics (case kind, retrieve(), an answer,
expected ids, expected answer, a judge, a context) are checked here, once, in a fixed order,
so every metric reports the same reason for the same missing input:

1. case kind not in ``applies_to``      -> skipped, "applies to <kinds> cases only"
2. ``retrieve`` needed, not exposed      -> skipped, "adapter does not expose retrieval"
3. ``expected_source_ids`` needed, empty -> skipped, "case has no expected_source_ids"
4. ``answer`` needed, none produced      -> skipped, "adapter produced no answer"
5. ``expected_answer`` needed, none      -> skipped, "case has no expected_answer"
6. ``context`` needed, none available    -> skipped, "no context: ..."
7. ``judge`` needed, none configured     -> skipped, "no judge configured (set RAGPROOF_JUDGE_MODEL)"
8. the metric's own ``case_rule``        -> skipped with its reason (the case alone decides it:
   an expected answer without a number for numeric match, ...)

A metric that cannot be computed is skipped with a reason, never scored 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from gate.model.config import ScoringSettings
from gate.model.dataset import Case
from gate.model.records import CaseOutput, MetricResult

if TYPE_CHECKING:
    # Only the type: the session (HTTP client, templates) loads with the first judge.
    from gate.judge.session import JudgeSession

MetricKind = Literal["deterministic", "heuristic", "judge"]
Need = Literal["retrieve", "expected_source_ids", "answer", "expected_answer", "context", "judge"]

REASON_NO_RETRIEVE = "adapter does not expose retrieval"
REASON_NO_EXPECTED_IDS = "case has no expected_source_ids"
REASON_NO_ANSWER = "adapter produced no answer"
REASON_NO_EXPECTED_ANSWER = "case has no expected_answer"
REASON_NO_CONTEXT = "no context: the answer has no retrieved_chunks and the adapter does not expose retrieval"
REASON_NO_JUDGE = "no judge configured (set RAGPROOF_JUDGE_MODEL)"


@dataclass
class ScoringContext:
    """Run-wide scoring settings handed to every metric."""

    # k, source matching, nDCG gain, numeric tolerance: the run section of ragproof.yaml
    settings: ScoringSettings = field(default_factory=ScoringSettings)
    # The run's judge session when a judge is configured, else None (judge metrics skip).
    judge: JudgeSession | None = None
    # composite.weights of ragproof.yaml (component metric -> weight); empty: no composite
    composite_weights: dict[str, float] = field(default_factory=dict)
    # The case's results of the metrics scored before this one (registry order), which the
    # composites read instead of scoring their components again.
    results: dict[str, MetricResult] = field(default_factory=dict)

    def judge_session(self) -> JudgeSession:
        """The judge, for metrics that declare ``needs=("judge",)`` (skipped before compute without one)."""
        if self.judge is None:
            raise ValueError("judge_session() without a judge: declare needs=('judge',)")
        return self.judge


ComputeFn = Callable[[Case, CaseOutput, ScoringContext], MetricResult]
# The skip reason a case alone decides, beyond the shared needs; None: the case can be scored.
CaseRule = Callable[[Case], "str | None"]


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: MetricKind
    higher_is_better: bool
    applies_to: frozenset[str]
    needs: frozenset[str]
    compute: ComputeFn
    description: str = ""
    categorical: bool = False
    # Diagnostics are shown but never gate by default.
    gate_by_default: bool = True
    # An alias: the same number as another metric under a second name (shown, gates only when
    # asked, and never counted twice in the gate family).
    same_as: str | None = None
    # When a judge is configured, heuristic metrics may consult it (abstention/overrefusal).
    uses_judge_when_available: bool = False
    # Every value the metric can score lies in [low, high]; a value outside it in an artifact
    # is refused as bad data.
    value_range: tuple[float, float] = (0.0, 1.0)
    # Every scored value is 0 or 1 (a rate); the sizing before a run gives exact figures for
    # these and bounds for the others.
    binary: bool = False
    # The metric's own rule on the case alone (checked after the shared needs, which it may
    # assume met): the sizing before a run counts the cases it lets through.
    case_rule: CaseRule | None = None

    def scorable_on(self, case: Case) -> bool:
        """Whether the case itself has what the metric needs: its kind, the expected ids or
        expected answer when needed, and what its ``case_rule`` asks. The pipeline's outputs and
        the judge are not looked at: a run may still skip the case for them."""
        if case.kind not in self.applies_to or not all(_case_has(need, case) for need in self.needs):
            return False
        return self.case_rule is None or self.case_rule(case) is None

    def check_preconditions(self, case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult | None:
        """The skip result for the first unmet precondition, or None when the metric can run."""
        if case.kind not in self.applies_to:
            kinds = " and ".join(sorted(self.applies_to))
            return MetricResult.skipped(f"applies to {kinds} cases only")
        needs = self.needs
        if "retrieve" in needs and (not output.supports_retrieve or output.retrieved is None):
            return MetricResult.skipped(REASON_NO_RETRIEVE)
        if "expected_source_ids" in needs and not _case_has("expected_source_ids", case):
            return MetricResult.skipped(REASON_NO_EXPECTED_IDS)
        if "answer" in needs and output.answer is None:
            return MetricResult.skipped(REASON_NO_ANSWER)
        if "expected_answer" in needs and not _case_has("expected_answer", case):
            return MetricResult.skipped(REASON_NO_EXPECTED_ANSWER)
        if "context" in needs and output.context_chunks() is None:
            return MetricResult.skipped(REASON_NO_CONTEXT)
        if "judge" in needs and ctx.judge is None:
            return MetricResult.skipped(REASON_NO_JUDGE)
        reason = self.case_rule(case) if self.case_rule is not None else None
        return MetricResult.skipped(reason) if reason is not None else None

    def score(self, case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
        skip = self.check_preconditions(case, output, ctx)
        if skip is not None:
            return skip
        return self.compute(case, output, ctx)


def _case_has(need: str, case: Case) -> bool:
    """Whether the case provides ``need``; needs met by the pipeline or the run are not the case's."""
    if need == "expected_source_ids":
        return bool(case.expected_source_ids)
    if need == "expected_answer":
        return case.expected_answer is not None
    return True


REGISTRY: dict[str, MetricSpec] = {}

ALL_KINDS = frozenset({"qa", "unanswerable", "injection"})


def metric(
    name: str,
    *,
    kind: MetricKind,
    higher_is_better: bool = True,
    applies_to: Iterable[str] = ALL_KINDS,
    needs: Iterable[Need] = (),
    description: str = "",
    categorical: bool = False,
    gate_by_default: bool = True,
    uses_judge_when_available: bool = False,
    same_as: str | None = None,
    value_range: tuple[float, float] = (0.0, 1.0),
    binary: bool = False,
    case_rule: CaseRule | None = None,
) -> Callable[[ComputeFn], ComputeFn]:
    """Register ``compute`` under ``name``. Registering a name twice is a programming error.

    ``same_as`` marks an alias of another metric (the same value on every case): it does not
    gate by default, so no number blocks twice.
    """

    def register(fn: ComputeFn) -> ComputeFn:
        if name in REGISTRY:
            raise ValueError(f"metric {name!r} registered twice")
        REGISTRY[name] = MetricSpec(
            name=name,
            kind=kind,
            higher_is_better=higher_is_better,
            applies_to=frozenset(applies_to),
            needs=frozenset(needs),
            compute=fn,
            description=description or (fn.__doc__ or "").strip().split("\n")[0],
            categorical=categorical,
            gate_by_default=gate_by_default and not categorical and same_as is None,
            uses_judge_when_available=uses_judge_when_available,
            same_as=same_as,
            value_range=value_range,
            binary=binary,
            case_rule=case_rule,
        )
        return fn

    return register
