"""Shared pieces of the GitHub action tests: run artifacts, a workspace, ``ragproof action``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from servers.github_server import GitHubServer, GitHubState

from gate import __version__
from gate.github.client import GitHubClient
from gate.model.artifact import (
    DatasetInfo,
    GitInfo,
    MetricSummary,
    Row,
    RunMeta,
    RunStatus,
    Summary,
    ToolInfo,
)
from gate.model.config import parse_config
from gate.model.dataset import Case, dataset_sha256, write_cases
from gate.model.records import Chunk, MetricResult
from gate.run.artifact_io import write_artifact

METRIC = "retrieval.recall_at_k"
REPO_ROOT = Path(__file__).resolve().parents[1]

CONFIG = """\
version: 1
dataset: cases.jsonl
adapter:
  type: replay
  path: replay.jsonl
run:
  k: 3
  metrics: [retrieval.recall_at_k, retrieval.hit_rate_at_k]
gate:
  resamples: 1000
  min_pairs: 5
  slices: [kind]
"""


CASE_COUNT = 20


def cases(count: int = CASE_COUNT) -> list[Case]:
    """The dataset of CONFIG: case ``case-NN`` expects the chunk ``doc-NN``."""
    return [
        Case(id=f"case-{i:02d}", question=f"where is fact {i}?", expected_source_ids=[f"doc-{i:02d}"])
        for i in range(count)
    ]


def write_run(
    directory: Path,
    values: list[float],
    *,
    commit: str = "c1" * 20,
    run_id: str = "run-1",
    failed: int = 0,
    status: RunStatus = "complete",
) -> Path:
    """A run artifact with one scored metric per case (values in case order).

    Each row holds the chunk that scores it (``doc-NN`` for 1.0, another for 0.0), so a gate
    that re-scores raw outputs finds the same values; the run carries CONFIG and its cases.
    The first ``failed`` cases are adapter errors (no scores); ``status`` is run.json's.
    """
    rows = [
        Row(
            case_id=f"case-{i:02d}",
            position=i,
            kind="qa",
            status="ok",
            retrieved=[Chunk(id=f"doc-{i:02d}" if value == 1.0 else "doc-unrelated", text=f"fact {i}")],
            metrics={METRIC: MetricResult.scored(value)},
        )
        if i >= failed
        else Row(case_id=f"case-{i:02d}", position=i, kind="qa", status="adapter_error", error="boom")
        for i, value in enumerate(values)
    ]
    dataset = cases(len(values))
    mean = sum(values) / len(values) if values else None
    meta = RunMeta(
        run_id=run_id,
        created_at="2026-03-01T00:00:00Z",
        tool=ToolInfo(version=__version__),
        git=GitInfo(commit=commit, ref="refs/heads/main"),
        dataset=DatasetInfo(path="cases.jsonl", sha256=dataset_sha256(dataset), case_count=len(values)),
        config_hash="h" * 64,
        k=3,
        source_match="chunk",
        metrics=[METRIC],
        slices=["kind"],
        config=parse_config(yaml.safe_load(CONFIG), "ragproof.yaml").recorded(),
        status=status,
    )
    summary = Summary(
        cases=len(values),
        failures=failed,
        adapter_failure_rate=failed / len(values) if values else None,
        slices={"all": {METRIC: MetricSummary(mean=mean, scored=len(values))}},
    )
    return write_artifact(directory, meta, rows, summary, cases=dataset)


GOOD = [1.0] * 16 + [0.0] * 4  # mean 0.8
BAD = [1.0] * 4 + [0.0] * 16  # mean 0.2: a clear block


@contextmanager
def pull_request_server(page_size: int = 2) -> Iterator[GitHubServer]:
    """A running test server whose repository has the open PR #7 (head ``a1...``)."""
    state = GitHubState(page_size=page_size)
    state.add_pull(7, head_sha="a1" * 20)
    with GitHubServer(state) as server:
        yield server


def client_for(server: GitHubServer, token: str = "ghs_write", **kw: Any) -> GitHubClient:
    """A client of the test server with a short backoff (tests stay fast)."""
    return GitHubClient(api_url=server.url, repository="acme/rag", token=token, backoff_factor=0.01, **kw)


@dataclass
class ActionRun:
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    workspace: Path


def make_workspace(root: Path, *, config: str = CONFIG) -> Path:
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "ragproof.yaml").write_text(config)
    write_cases(workspace / "cases.jsonl", cases())
    return workspace


def _limit_memory(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_action(
    root: Path,
    api_url: str,
    *,
    event_name: str,
    event: dict[str, Any],
    inputs: dict[str, str],
    token: str = "ghs_write",
    sha: str = "m0" * 20,
    ref: str = "refs/pull/7/merge",
    workflow_file: str = "pr-gate.yml",
    extra_env: dict[str, str] | None = None,
    timeout: float = 120,
    memory_limit: int | None = None,
) -> ActionRun:
    """Run ``ragproof action`` as the runner would: a subprocess with GITHUB_*/INPUT_* set.

    ``memory_limit``: the process's address space in bytes (``RLIMIT_AS``), for bounds tests.
    """
    workspace = root / "workspace"
    home = root / "runner"
    home.mkdir(exist_ok=True)
    event_path = home / "event.json"
    event_path.write_text(json.dumps(event))
    output_path = home / "output.txt"
    summary_path = home / "summary.md"
    output_path.write_text("")
    summary_path.write_text("")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "PYTHONPATH": str(REPO_ROOT),
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": "acme/rag",
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_SHA": sha,
        "GITHUB_REF": ref,
        "GITHUB_RUN_ID": "9001",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_WORKFLOW_REF": f"acme/rag/.github/workflows/{workflow_file}@{ref}",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(output_path),
        "GITHUB_STEP_SUMMARY": str(summary_path),
        "INPUT_GITHUB-TOKEN": token,
    }
    env.update({f"INPUT_{name.upper()}": value for name, value in inputs.items()})
    env.update(extra_env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "gate", "action"],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=None if memory_limit is None else lambda: _limit_memory(memory_limit),
    )
    return ActionRun(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        parse_output_file(output_path.read_text()),
        summary_path.read_text(),
        workspace,
    )


def parse_output_file(text: str) -> dict[str, str]:
    """Read a ``$GITHUB_OUTPUT`` file back the way the runner does: ``name=value`` lines and
    ``name<<DELIMITER`` heredocs."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ValueError(f"output {name!r}: heredoc delimiter {delimiter!r} never closed")
            i += 1
            values[name] = "\n".join(body)
        else:
            name, _, value = line.partition("=")
            values[name] = value
    return values


def pull_request_event(
    number: int = 7, head_sha: str = "a1" * 20, head_repo: str = "acme/rag"
) -> dict[str, Any]:
    repo = {"id": 1001, "full_name": "acme/rag", "default_branch": "main"}
    return {
        "action": "synchronize",
        "number": number,
        "repository": repo,
        "pull_request": {
            "number": number,
            "state": "open",
            "head": {"sha": head_sha, "ref": "feature", "repo": {"full_name": head_repo}},
            "base": {"sha": "c1" * 20, "ref": "main", "repo": repo},
        },
    }
