"""Builders shared by the runner, store and CLI tests: small datasets and configs on disk."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gate.adapters import Adapter
from gate.model.artifact import Row, RunArtifact
from gate.model.dataset import Case
from gate.model.records import CaseOutput

PIPELINES = Path(__file__).parent / "pipelines"
TOPICS = ("refunds", "shipping", "warranty", "support", "pricing")
ANSWERS = {
    "refunds": ("doc-1", "Refunds are accepted within 30 days."),
    "shipping": ("doc-2", "Orders ship within 2 business days."),
    "warranty": ("doc-3", "The warranty lasts 12 months."),
    "support": ("doc-4", "Support is open 9 to 5 on weekdays."),
}


def make_cases(n: int, extra: str = "") -> list[dict[str, Any]]:
    """``n`` cases cycling over the topics; "pricing" has no document, so it is unanswerable."""
    cases = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        case: dict[str, Any] = {"id": f"case-{i:03d}", "question": f"Q{i}: tell me about {topic}{extra}"}
        if topic in ANSWERS:
            doc, answer = ANSWERS[topic]
            case.update(expected_source_ids=[doc], expected_answer=answer, tags=[f"topic:{topic}"])
        else:
            case.update(kind="unanswerable", tags=["topic:pricing"])
        cases.append(case)
    return cases


def write_dataset(directory: Path, cases: list[dict[str, Any]], name: str = "cases.jsonl") -> Path:
    path = directory / name
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def write_config(directory: Path, adapter: dict[str, Any] | None = None, **sections: Any) -> Path:
    """A ragproof.yaml using the tiny pipeline (copied next to it) unless ``adapter`` says otherwise."""
    shutil.copy(PIPELINES / "tiny_pipeline.py", directory / "tiny_pipeline.py")
    data: dict[str, Any] = {
        "version": 1,
        "dataset": "cases.jsonl",
        "adapter": adapter
        or {"type": "python", "target": "tiny_pipeline:Tiny", "concurrency": 4, "timeout_s": 5},
        "run": {"k": 3, "store": str(directory / ".ragproof" / "store.sqlite"), **sections.pop("run", {})},
        **sections,
    }
    path = directory / "ragproof.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def comparable_rows(rows: list[Row]) -> list[dict[str, Any]]:
    """Rows as dicts without the timing, which differs between any two runs."""
    return [row.model_dump(mode="json", exclude={"latency_ms"}) for row in rows]


def comparable(artifact: RunArtifact) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return comparable_rows(artifact.rows), artifact.summary.model_dump(mode="json")


def ragproof(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "gate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_one_case(adapter: Adapter, question: str, k: int) -> CaseOutput:
    """``adapter`` started, given one case, and closed (also when the case fails)."""

    async def go() -> CaseOutput:
        await adapter.start()
        try:
            return await adapter.run_case(Case(id="c1", question=question), k)
        finally:
            await adapter.close()

    return asyncio.run(go())
