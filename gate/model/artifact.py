"""Run artifacts: ``run.json``, ``rows.jsonl`` and ``summary.json`` (schemas: docs/reference/schemas/).

This module holds the artifact's pydantic models: the contract every later stage reads.
Writing and reading live in :mod:`gate.run.artifact_io`.

Slice keys are ``dimension=value``: ``all``, ``kind=qa``, ``tags=topic:billing``,
``metadata.FIELD=value``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.strict import StrictModel
from gate.model.config import Gain, JudgeProvider, SourceMatch
from gate.model.dataset import MAX_CASES, Case, CaseKind
from gate.model.records import Answer, CaseOutput, Chunk, MetricResult

SCHEMA_VERSION = 1

RUN_FILE = "run.json"
ROWS_FILE = "rows.jsonl"
SUMMARY_FILE = "summary.json"
# The run's dataset, one canonical case JSON a line (its sha256 is run.json's dataset.sha256):
# the gate of a pull request runs on the baseline's cases, never on the pull request's own.
DATASET_FILE = "dataset.jsonl"
MAX_DATASET_BYTES = 200_000_000

# The gate over row failures (adapter errors and timeouts), a metric of its own in a comparison:
# 1 per failed case.
FAILURE_RATE_METRIC = "adapter.failure_rate"

RunStatus = Literal["complete", "aborted:budget", "partial"]
RowStatus = Literal["ok", "adapter_error", "timeout"]


class ToolInfo(StrictModel):
    name: str = "ragproof"
    version: str


class GitInfo(StrictModel):
    commit: str | None = None
    ref: str | None = None


class DatasetInfo(StrictModel):
    path: str
    sha256: str
    version: str | None = None
    case_count: int = Field(ge=0, le=MAX_CASES)


class JudgeInfo(StrictModel):
    provider: JudgeProvider | None = None
    model: str | None = None
    temperature: float = 0.0
    # prompt template name -> sha256 of its source
    prompts: dict[str, str] = Field(default_factory=dict)


class ShardInfo(StrictModel):
    index: int  # 1-based
    count: int


class CostInfo(StrictModel):
    usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    judge_calls: int = 0
    cache_hits: int = 0
    estimated: bool = False  # True when any usage was estimated at 4 characters per token


class RunMeta(StrictModel):
    """``run.json``."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    created_at: str  # ISO 8601, UTC
    tool: ToolInfo
    git: GitInfo = Field(default_factory=GitInfo)
    dataset: DatasetInfo
    config_hash: str
    # the scoring settings that change a value (ScoringSettings; numeric_tolerance is in config)
    k: int
    source_match: SourceMatch
    document_id_key: str = "document_id"
    ndcg_gain: Gain = "linear"
    metrics: list[str] = Field(default_factory=list)
    # slice dimensions of summary.json (gate.slices), so a merge can rebuild the summary
    slices: list[str] = Field(default_factory=lambda: ["kind", "tags"])
    judge: JudgeInfo = Field(default_factory=JudgeInfo)
    shard: ShardInfo | None = None
    status: RunStatus = "complete"
    cost: CostInfo = Field(default_factory=CostInfo)
    wall_time_s: float = 0.0
    adapter: dict[str, Any] = Field(default_factory=dict)  # type and non-secret settings
    # end-of-run warnings (gate.run.checks): the run completed but measured less than it seems
    warnings: list[str] = Field(default_factory=list)
    # The full resolved configuration the run used (adapter headers redacted): the policy a
    # pull request is gated by comes from the baseline's, never from the pull request's file.
    config: dict[str, Any] | None = None


class Row(StrictModel):
    """One line of ``rows.jsonl``: one case as run and scored."""

    # Only keys are looked up in pydantic's string cache when a line is parsed: a row's values
    # (ids, texts, answers) rarely repeat across rows, and skipping the cache reads rows.jsonl
    # a fifth faster (0.30 -> 0.24 s of CPU for 10,000 rows with retrieved text). Equal metric
    # results are shared after parsing (gate.run.artifact_io), which keeps their strings once.
    model_config = ConfigDict(cache_strings="keys")

    case_id: str
    # 0-based position of the case in the dataset: rows are written in this order
    position: int | None = None
    kind: CaseKind
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # what a reviewer needs to judge the case (from the dataset; absent in older artifacts)
    question: str | None = None
    expected_answer: str | None = None
    expected_source_ids: list[str] | None = None
    status: RowStatus
    error: str | None = None
    latency_ms: float | None = None
    retrieved: list[Chunk] | None = None
    answer: Answer | None = None
    metrics: dict[str, MetricResult] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        case: Case,
        output: CaseOutput | None,
        metrics: dict[str, MetricResult],
        *,
        position: int | None = None,
        status: RowStatus = "ok",
        error: str | None = None,
        latency_ms: float | None = None,
    ) -> Row:
        """The row of ``case`` run to ``output`` (None when the case failed) and scored ``metrics``."""
        return cls(
            case_id=case.id,
            position=position,
            kind=case.kind,
            tags=list(case.tags),
            metadata=dict(case.metadata),
            question=case.question,
            expected_answer=case.expected_answer,
            expected_source_ids=list(case.expected_source_ids),
            status=status,
            error=error,
            latency_ms=latency_ms,
            retrieved=output.retrieved if output is not None else None,
            answer=output.answer if output is not None else None,
            metrics=metrics,
        )


class MetricSummary(StrictModel):
    """Aggregate of one metric over one slice (``summary.json``)."""

    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    scored: int = 0
    skipped: int = 0
    not_applicable: int = 0
    errored: int = 0  # judge errors + case failures (adapter_error, timeout)
    higher_is_better: bool = True
    # categorical metrics only: label -> count
    distribution: dict[str, int] | None = None


class Summary(StrictModel):
    """``summary.json``: slice key -> metric name -> summary."""

    schema_version: int = SCHEMA_VERSION
    cases: int
    failures: int  # rows with status other than ok
    adapter_failure_rate: float | None = None
    slices: dict[str, dict[str, MetricSummary]] = Field(default_factory=dict)


def error_groups(rows: Iterable[Row]) -> list[tuple[str, int]]:
    """Failed rows grouped by ``"STATUS: ERROR"``, most frequent first (then by text).

    Identical messages count together; a failed row without a message counts as
    ``"STATUS: no message"``.
    """
    counts = Counter(f"{r.status}: {r.error or 'no message'}" for r in rows if r.status != "ok")
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


class RunArtifact(BaseModel):
    """A loaded artifact: the three files, validated."""

    meta: RunMeta
    rows: list[Row]
    summary: Summary
    source: str = ""  # where it was read from (for messages)
    # The run's cases (``dataset.jsonl``), validated and checked against meta.dataset.sha256;
    # None for an artifact written without them (older ragproof) or read without them
    # (``read_artifact(cases=False)``, for ``compare``, which never uses them).
    cases: tuple[Case, ...] | None = None

    def failure_rate(self) -> float | None:
        """Failed cases (status other than ``ok``) over cases, from the rows; None without rows."""
        if not self.rows:
            return None
        return sum(1 for r in self.rows if r.status != "ok") / len(self.rows)

    def unusable_as_baseline(self, max_failure_rate: float) -> str | None:
        """Why this run cannot be a baseline, or None when it can.

        Refused: a status other than ``complete`` (a budget stop or a partial merge measured
        only part of the dataset), zero rows, or an adapter-failure rate above
        ``max_failure_rate`` (``run.max_failure_rate``): a baseline whose cases failed has
        nothing to compare, and every candidate would "improve" on it.
        """
        if self.meta.status != "complete":
            return f"status {self.meta.status}, not complete"
        rate = self.failure_rate()
        if rate is None:
            return "it has no rows"
        if rate > max_failure_rate:
            failed = sum(1 for r in self.rows if r.status != "ok")
            return (
                f"adapter-failure rate {rate:.4f} ({failed} of {len(self.rows)} cases failed) "
                f"exceeds run.max_failure_rate {max_failure_rate:g}"
            )
        return None
