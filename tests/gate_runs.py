"""Build run artifacts for the gate tests: real pydantic models written with write_artifact."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gate.metrics.aggregate import summarize
from gate.model.artifact import (
    CostInfo,
    DatasetInfo,
    GitInfo,
    JudgeInfo,
    Row,
    RowStatus,
    RunArtifact,
    RunMeta,
    Summary,
    ToolInfo,
)
from gate.model.dataset import CaseKind
from gate.model.records import MetricResult
from gate.run.artifact_io import read_artifact, write_artifact

HOSTILE = "@org/team <img src=x> | ---"


def meta(run_id: str, *, commit: str = "0" * 40, sha: str = "a" * 64, cases: int = 0, **kw: Any) -> RunMeta:
    fields: dict[str, Any] = dict(
        run_id=run_id,
        created_at="2026-11-28T12:00:00Z",
        tool=ToolInfo(version="0.1.0"),
        git=GitInfo(commit=commit, ref="refs/heads/main"),
        dataset=DatasetInfo(path="evals/cases.jsonl", sha256=sha, version="v3", case_count=cases),
        config_hash="c" * 64,
        k=5,
        source_match="chunk",
    )
    fields.update(kw)
    return RunMeta(**fields)


def row(
    case_id: str,
    scores: dict[str, float | None],
    *,
    kind: CaseKind = "qa",
    tags: Sequence[str] = (),
    status: RowStatus = "ok",
    metadata: dict[str, Any] | None = None,
) -> Row:
    metrics = {
        name: (
            MetricResult.scored(v)
            if v is not None
            else MetricResult.skipped("case has no expected_source_ids")
        )
        for name, v in scores.items()
    }
    return Row(
        case_id=case_id,
        kind=kind,
        tags=list(tags),
        metadata=metadata or {},
        status=status,
        error="connection refused" if status != "ok" else None,
        metrics=metrics if status == "ok" else {},
    )


def summary(rows: list[Row], slices: Sequence[str] = ("kind", "tags")) -> Summary:
    """summary.json as the runner writes it (gate.metrics.aggregate.summarize)."""
    return summarize(rows, sorted({n for r in rows for n in r.metrics}), list(slices))


def write_run(directory: Path, run_meta: RunMeta, rows: list[Row]) -> Path:
    run_meta = run_meta.model_copy(
        update={
            "dataset": run_meta.dataset.model_copy(update={"case_count": len(rows)}),
            "metrics": sorted({n for r in rows for n in r.metrics}),
        }
    )
    return write_artifact(Path(directory), run_meta, rows, summary(rows))


def artifact(run_meta: RunMeta, rows: list[Row]) -> RunArtifact:
    return RunArtifact(meta=run_meta, rows=rows, summary=summary(rows), source=run_meta.run_id)


def binary_pair(
    n: int,
    *,
    seed: int,
    p_base: float,
    flip: float,
    metric: str = "retrieval.hit_rate_at_k",
    tag_fn: Callable[[int], list[str]] | None = None,
) -> tuple[list[Row], list[Row]]:
    """Two runs of ``n`` cases where the candidate flips each baseline score with probability ``flip``."""
    rng = random.Random(seed)
    base_rows, cand_rows = [], []
    for i in range(n):
        b = 1.0 if rng.random() < p_base else 0.0
        c = b if rng.random() >= flip else 1.0 - b
        tags = tag_fn(i) if tag_fn else []
        base_rows.append(row(f"q{i:04d}", {metric: b}, tags=tags))
        cand_rows.append(row(f"q{i:04d}", {metric: c}, tags=tags))
    return base_rows, cand_rows


def fixed_runs() -> tuple[RunArtifact, RunArtifact]:
    """A fixed pair: retrieval improves, answers drop on the billing topic, one case fails."""
    rng = random.Random(20)
    b_rows, c_rows = [], []
    for i in range(240):
        topic = ("billing", "sync", "security")[i % 3]
        tags = [f"topic:{topic}"]
        kind: CaseKind = "unanswerable" if i % 10 == 0 else "qa"
        if kind == "unanswerable":
            over_b = 1.0 if rng.random() < 0.1 else 0.0
            over_c = 1.0 if rng.random() < 0.1 else 0.0
            b_rows.append(row(f"case-{i:03d}", {"robustness.overrefusal": over_b}, kind=kind, tags=tags))
            c_rows.append(row(f"case-{i:03d}", {"robustness.overrefusal": over_c}, kind=kind, tags=tags))
            continue
        hit_b = 1.0 if rng.random() < 0.75 else 0.0
        hit_c = hit_b if rng.random() < 0.85 else 1.0
        f1_b = round(rng.random(), 3)
        f1_c = round(max(0.0, f1_b - (0.25 if topic == "billing" and rng.random() < 0.5 else 0.0)), 3)
        b_rows.append(
            row(f"case-{i:03d}", {"retrieval.hit_rate_at_k": hit_b, "answer.token_f1": f1_b}, tags=tags)
        )
        if i == 7:
            c_rows.append(row(f"case-{i:03d}", {}, tags=tags, status="timeout"))
        else:
            c_rows.append(
                row(f"case-{i:03d}", {"retrieval.hit_rate_at_k": hit_c, "answer.token_f1": f1_c}, tags=tags)
            )
    base = artifact(meta("20261128T120000Z-base", commit="b" * 40), b_rows)
    cand = artifact(meta("20261201T090000Z-cand", commit="c" * 40, created_at="2026-12-01T09:00:00Z"), c_rows)
    return base, cand


def load(path: Path) -> RunArtifact:
    return read_artifact(path)


def cost(usd: float = 0.0) -> CostInfo:
    return CostInfo(usd=usd)


def judge(model: str | None, prompts: dict[str, str] | None = None) -> JudgeInfo:
    return JudgeInfo(model=model, prompts=prompts or {})
