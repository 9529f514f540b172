"""Baseline discovery against the GitHub test server (real HTTP, real zips, real validation)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from github_helpers import GOOD, write_run
from servers.github_server import GitHubServer, GitHubState, zip_directory

from gate.github.baseline import BaselineSearch, find_baseline
from gate.github.client import GitHubClient

DAY = datetime(2026, 3, 1, tzinfo=UTC)
FORK = ("mallory/rag", 2002)


def sha(tag: str) -> str:
    return (tag * 20)[:40]


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    """main: c0 <- c1 <- c2 <- c3; the PR head a1 branched from c1 (merge base c1)."""
    state = GitHubState(page_size=2)
    for i in range(4):
        state.add_commit(sha(f"c{i}"), [sha(f"c{i - 1}")] if i else [], DAY + timedelta(hours=i))
    state.add_commit(sha("a1"), [sha("c1")], DAY + timedelta(hours=5))
    state.branches["main"] = sha("c3")
    with GitHubServer(state) as srv:
        yield srv


def _artifact(tmp_path: Path, run_id: str) -> bytes:
    return zip_directory(write_run(tmp_path / "runs" / run_id, GOOD, run_id=run_id))


def _push_run(server: GitHubServer, tmp_path: Path, commit: str, *, expired: bool = False, **kw: Any) -> int:
    run = server.state.add_run(head_sha=sha(commit), **kw)
    server.state.add_artifact(run, "ragproof-run", _artifact(tmp_path, f"{commit}-{run}"), expired=expired)
    return run


def _search(server: GitHubServer, tmp_path: Path) -> BaselineSearch:
    client = GitHubClient(api_url=server.url, repository="acme/rag", token="ghs_write", backoff_factor=0.01)
    return find_baseline(
        client,
        head_sha=sha("a1"),
        workflow="pr-gate.yml",
        artifact_name="ragproof-run",
        work_dir=tmp_path / "dl",
    )


def test_merge_base_run_wins_over_newer_and_untrusted_runs(server: GitHubServer, tmp_path: Path) -> None:
    _push_run(server, tmp_path, "c0")
    chosen = _push_run(server, tmp_path, "c1")
    _push_run(server, tmp_path, "c2")
    _push_run(server, tmp_path, "c3")
    # Same artifact name, at the merge-base commit, newer, but not trusted:
    _push_run(server, tmp_path, "c1", event="pull_request", created_at=DAY + timedelta(days=2))
    _push_run(server, tmp_path, "c1", head_repository=FORK, created_at=DAY + timedelta(days=2))
    _push_run(server, tmp_path, "c1", conclusion="failure", created_at=DAY + timedelta(days=2))
    search = _search(server, tmp_path)
    assert search.merge_base_sha == sha("c1")
    assert search.baseline is not None
    assert search.baseline.run.id == chosen
    assert search.baseline.commits_behind == 0
    assert search.baseline.artifact.meta.run_id == f"c1-{chosen}"
    assert "at the merge base" in search.baseline.staleness()
    assert all(b["authorization"] is None for b in server.state.blob_requests)


def test_a_fork_run_on_a_branch_named_main_is_never_used(server: GitHubServer, tmp_path: Path) -> None:
    _push_run(server, tmp_path, "c1", event="pull_request", head_repository=FORK)
    _push_run(server, tmp_path, "c1", head_repository=FORK)
    search = _search(server, tmp_path)
    assert search.baseline is None
    assert "no successful push run of pr-gate.yml on main at or before the merge base c1c1c1c" in (
        search.reason or ""
    )
    downloads = [r for r in server.state.requests if r["path"].endswith("/zip")]
    assert downloads == []


def test_expired_artifact_is_skipped_for_the_newest_older_run(server: GitHubServer, tmp_path: Path) -> None:
    older = _push_run(server, tmp_path, "c0")
    expired = _push_run(server, tmp_path, "c1", expired=True)
    _push_run(server, tmp_path, "c3")  # newer than the merge base: not an ancestor
    search = _search(server, tmp_path)
    assert search.baseline is not None and search.baseline.run.id == older
    assert search.baseline.commits_behind == 1
    assert search.baseline.staleness(now=DAY + timedelta(days=3)) == (
        f"baseline from run {older} at commit c0c0c0c (1 commit behind the merge base c1c1c1c; 3.0 days old)"
    )
    assert any("skipped expired artifact 'ragproof-run'" in n and str(expired) in n for n in search.notes)
    gone = [r["path"] for r in server.state.requests if r["path"].endswith("/zip")]
    expired_id = server.state.artifacts[expired][0]["id"]
    assert len(gone) == 2 and not any(f"/{expired_id}/" in p for p in gone)  # c3's (the policy), c0's
    assert search.latest is not None and search.latest.run.head_sha == sha("c3")


def test_no_runs_at_all(server: GitHubServer, tmp_path: Path) -> None:
    server.state.add_run(head_sha=sha("c1"), workflow="other.yml")
    search = _search(server, tmp_path)
    assert search.baseline is None
    assert "workflow 'pr-gate.yml' was not found" in (search.reason or "")


def _zip_slip() -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("run.json", "{}")
        archive.writestr("../../escaped.txt", "owned")
    return buffer.getvalue()


def test_a_poisoned_baseline_is_skipped_for_the_next_older_run(server: GitHubServer, tmp_path: Path) -> None:
    older = _push_run(server, tmp_path, "c0")
    poisoned = server.state.add_run(head_sha=sha("c1"))
    server.state.add_artifact(poisoned, "ragproof-run", _zip_slip())
    search = _search(server, tmp_path)
    assert search.baseline is not None and search.baseline.run.id == older
    assert search.warnings == [
        f"skipped baseline artifact 'ragproof-run' of run {poisoned}: "
        "unsafe zip entry '../../escaped.txt' (absolute path or '..')"
    ]
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not (tmp_path.parent / "escaped.txt").exists()
    # The archive is read in place, never extracted, and the downloaded zip is removed.
    assert [p for p in (tmp_path / "dl").rglob("*") if p.is_file()] == []


def _unusable_run(server: GitHubServer, tmp_path: Path, commit: str, **kw: Any) -> int:
    run = server.state.add_run(head_sha=sha(commit))
    values = kw.pop("values", GOOD)
    data = zip_directory(write_run(tmp_path / "runs" / f"bad-{run}", values, run_id=f"bad-{run}", **kw))
    server.state.add_artifact(run, "ragproof-run", data)
    return run


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        # 20 of 20 cases failed: every candidate would "improve" on it
        (
            {"failed": 20},
            "adapter-failure rate 1.0000 (20 of 20 cases failed) exceeds run.max_failure_rate 0.5",
        ),
        (
            {"failed": 11},
            "adapter-failure rate 0.5500 (11 of 20 cases failed) exceeds run.max_failure_rate 0.5",
        ),
        ({"status": "aborted:budget"}, "status aborted:budget, not complete"),
        ({"status": "partial"}, "status partial, not complete"),
        ({"values": []}, "it has no rows"),
    ],
)
def test_a_run_that_is_no_usable_baseline_is_skipped(
    server: GitHubServer, tmp_path: Path, kw: dict[str, Any], why: str
) -> None:
    older = _push_run(server, tmp_path, "c0")
    unusable = _unusable_run(server, tmp_path, "c1", **kw)
    search = _search(server, tmp_path)
    assert search.baseline is not None and search.baseline.run.id == older
    assert search.warnings == [
        f"skipped baseline artifact 'ragproof-run' of run {unusable}: not a usable baseline: {why}"
    ]


def test_half_failed_is_still_a_baseline(server: GitHubServer, tmp_path: Path) -> None:
    usable = _unusable_run(server, tmp_path, "c1", failed=10)
    search = _search(server, tmp_path)
    assert search.baseline is not None and search.baseline.run.id == usable and search.warnings == []


def test_every_run_unusable_is_the_no_baseline_path(server: GitHubServer, tmp_path: Path) -> None:
    first = _unusable_run(server, tmp_path, "c1", failed=20)
    # two runs at one older commit: the second is tried after the first is skipped
    second = _unusable_run(server, tmp_path, "c0", status="partial")
    third = _unusable_run(server, tmp_path, "c0", values=[])
    search = _search(server, tmp_path)
    assert search.baseline is None
    assert [w.split(":")[0] for w in search.warnings] == [
        f"skipped baseline artifact 'ragproof-run' of run {run}" for run in (first, second, third)
    ]
    assert search.reason == (
        "no successful push run of pr-gate.yml on main at or before the merge base c1c1c1c has an "
        "unexpired artifact 'ragproof-run' that is a usable baseline (3 skipped: see the warnings)"
    )
    compares = [r for r in server.state.requests if "/compare/" in r["path"]]
    # the merge base only: with no usable run on the default branch, no ancestry is asked
    assert len(compares) == 1


def test_a_baseline_with_an_out_of_range_score_is_skipped(server: GitHubServer, tmp_path: Path) -> None:
    # One 1e6 score formerly turned a clear block into review.
    older = _push_run(server, tmp_path, "c0")
    directory = write_run(tmp_path / "runs" / "inflated", GOOD, run_id="inflated")
    rows = directory / "rows.jsonl"
    rows.write_text(rows.read_text().replace('"value":1.0', '"value":1e6', 1))
    inflated = server.state.add_run(head_sha=sha("c1"))
    server.state.add_artifact(inflated, "ragproof-run", zip_directory(directory))
    search = _search(server, tmp_path)
    assert search.baseline is not None and search.baseline.run.id == older
    assert search.warnings == [
        f"skipped baseline artifact 'ragproof-run' of run {inflated}: rows.jsonl:1: "
        "metrics.retrieval.recall_at_k.value: 1000000.0 is not within [0, 1]"
    ]


def test_a_commit_without_shared_history_still_gets_the_newest_baseline(
    server: GitHubServer, tmp_path: Path
) -> None:
    """No merge base (the compare API answers 404): never "no baseline" while the default branch
    has one; the newest is compared with and its policy applies."""
    _push_run(server, tmp_path, "c1")
    newest = _push_run(server, tmp_path, "c3")
    server.state.add_commit(sha("z9"), [], DAY + timedelta(hours=9))  # an unrelated history
    client = GitHubClient(api_url=server.url, repository="acme/rag", token="ghs_write", backoff_factor=0.01)
    search = find_baseline(
        client,
        head_sha=sha("z9"),
        workflow="pr-gate.yml",
        artifact_name="ragproof-run",
        work_dir=tmp_path / "dl",
    )
    assert search.merge_base_sha is None
    assert search.baseline is not None and search.baseline.run.id == newest
    assert search.latest is not None and search.latest.run.id == newest
    assert search.fallback
    assert "shares no history with the default branch" in search.baseline.staleness()
    assert any("commit z9z9z9z shares no history with main" in note for note in search.notes)
