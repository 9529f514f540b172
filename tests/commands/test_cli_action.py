"""``ragproof action`` end to end: a subprocess with a real GITHUB_* environment and event file,
against the GitHub REST test server (real HTTP on 127.0.0.1) and a real pipeline run."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from github_helpers import REPO_ROOT, ActionRun, pull_request_event, run_action
from servers.github_server import BOT, GitHubServer, GitHubState, pull_request_scenario, zip_directory

from gate.github.plan import checkout_head
from gate.report.escape import md_escape

pytestmark = pytest.mark.slow

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "action_project"
HEAD = "a1" * 20  # the scenario's PR head, until a test checks out a real commit
MERGE_BASE = "c1" * 20
MARKER = "<!-- ragproof:ragproof -->"
SECRETS = {
    "ACTIONS_RUNTIME_TOKEN": "runtime-secret",
    "OPENAI_API_KEY": "sk-judge-secret",
    "GITHUB_TOKEN": "ghs_write",
    "GH_TOKEN": "ghs_write",
}


def _project(root: Path) -> Path:
    workspace = root / "workspace"
    shutil.copytree(FIXTURE, workspace, ignore=shutil.ignore_patterns("seen-env.json", ".ragproof"))
    return workspace


GIT_ENV = {
    "GIT_AUTHOR_NAME": "dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
    "GIT_AUTHOR_DATE": "2026-03-01T02:00:00Z",
    "GIT_COMMITTER_DATE": "2026-03-01T02:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


def _git(workspace: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], **GIT_ENV}
    proc = subprocess.run(["git", *args], cwd=workspace, env=env, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def checkout(workspace: Path) -> str:
    """Commit the workspace as it is (a real checkout of the pull request) and return HEAD."""
    if not (workspace / ".git").exists():
        _git(workspace, "init", "-q")
        (workspace / ".gitignore").write_text("seen-env.json\n.ragproof/\n")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-q", "--allow-empty", "-m", "pull request")
    return _git(workspace, "rev-parse", "HEAD")


def _as_pr_head(state: GitHubState, sha: str, number: int = 7) -> None:
    """The pull request's head is ``sha`` (a commit on the merge base, as HEAD was)."""
    if sha not in state.commits:
        state.add_commit(sha, [MERGE_BASE], datetime(2026, 3, 1, 2, tzinfo=UTC))
    state.pulls[number]["head"]["sha"] = sha
    state.branches["feature"] = sha


def _real_run(
    root: Path,
    misses: int,
    *,
    edit: Callable[[Path], object] | None = None,
    env: dict[str, str] | None = None,
) -> Path:
    """A real ``ragproof run`` of the fixture project (``edit(workspace)`` first) into root/run."""
    workspace = _project(root)
    if edit is not None:
        edit(workspace)
    env = {
        **os.environ,
        "PIPELINE_MISSES": str(misses),
        "PIPELINE_SEEN_FILE": str(root / "seen.json"),
        **(env or {}),
    }
    subprocess.run(
        [sys.executable, "-m", "gate", "run", "-c", "ragproof.yaml", "--out", str(root / "run")],
        cwd=workspace,
        env=env,
        check=False,  # a run whose cases all failed exits non-zero and still writes its artifact
        capture_output=True,
        timeout=60,
    )
    return root / "run"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Zips of real runs of the fixture project: the baseline (2 misses), a worse one (14), and
    one whose every case failed."""
    return {
        "baseline": zip_directory(_real_run(tmp_path_factory.mktemp("base"), 2)),
        "worse": zip_directory(_real_run(tmp_path_factory.mktemp("worse"), 14)),
        "failed": zip_directory(_real_run(tmp_path_factory.mktemp("failed"), 2, env={"PIPELINE_FAIL": "1"})),
    }


@pytest.fixture
def state(runs: dict[str, bytes]) -> GitHubState:
    state = GitHubState(page_size=2)
    pull_request_scenario(state, runs["baseline"])
    return state


@pytest.fixture
def server(state: GitHubState) -> Iterator[GitHubServer]:
    with GitHubServer(state) as srv:
        yield srv


def _pr(tmp_path: Path, server: GitHubServer, *, misses: int = 2, **kw: Any) -> ActionRun:
    """Run the action on PR #7, checked out at a real commit of the workspace (its head)."""
    if not (tmp_path / "workspace").exists():
        _project(tmp_path)
    # a new commit of the workspace as it is, or (same_commit) a second run of the same one
    head = (
        checkout_head(tmp_path / "workspace")
        if kw.pop("same_commit", False)
        else checkout(tmp_path / "workspace")
    )
    assert head is not None
    if kw.pop("move_head", True) and 7 in server.state.pulls:
        _as_pr_head(server.state, head)
    extra = {**SECRETS, "PIPELINE_MISSES": str(misses), **kw.pop("extra_env", {})}
    return run_action(
        tmp_path,
        server.url,
        event_name=kw.pop("event_name", "pull_request"),
        event=kw.pop("event", None) or {**pull_request_event(head_sha=head), **kw.pop("event_fields", {})},
        inputs=kw.pop("inputs", {}),
        extra_env=extra,
        **kw,
    )


def _ours(state: GitHubState, number: int = 7) -> list[dict[str, Any]]:
    return [c for c in state.comments.get(number, []) if c["body"].lstrip().startswith(MARKER)]


def _downloads(state: GitHubState) -> list[dict[str, Any]]:
    return [r for r in state.requests if r["path"].endswith("/zip")]


def test_pull_request_comments_and_checks_the_head_commit(tmp_path: Path, server: GitHubServer) -> None:
    result = _pr(tmp_path, server)
    assert result.returncode == 0, result.stderr
    state = server.state
    (comment,) = _ours(state)
    assert comment["user"] == BOT
    # 20 cases: nothing verified at the 0.02 margin, and the headline says so
    assert "## ragproof: 🔍 No regression detected" in comment["body"]
    assert "(https://github.example/acme/rag/actions/runs/9001#artifacts)" in comment["body"]
    (check,) = state.check_runs
    assert (check["name"], check["head_sha"], check["status"], check["conclusion"]) == (
        "ragproof",
        state.pulls[7]["head"]["sha"],  # pull_request.head.sha (the checkout), not GITHUB_SHA
        "completed",
        "success",
    )
    assert check["output"]["summary"] == comment["body"]
    assert (
        "- **Reproduce:** download both runs (artifact `ragproof-run` of the [baseline run]("
        in comment["body"]
    )
    # the check: title = the decision and its why; text = every gate in one table
    # 20 cases cannot show a 0.02 margin: a pass by the rule, and the title says what was ruled out
    assert check["output"]["title"] == (
        "🔍 No regression detected: nothing was verified at the margin: this set rules out drops "
        "larger than 0.161 on all cases; margin 0.02 needs 189+ cases."
    )
    assert check["output"]["text"].startswith("| Gate | Baseline → candidate | Δ [95% interval] |")
    assert result.summary.strip().endswith(comment["body"].strip())  # the job summary is the comment
    assert result.outputs["decision"] == "pass"
    assert result.outputs["baseline-sha"] == MERGE_BASE
    assert result.outputs["comment-url"] == comment["html_url"]
    assert result.outputs["run-dir"] == ".ragproof/run"  # relative: later steps run on the host
    assert (result.workspace / result.outputs["report"]).read_text() == comment["body"]
    # run.json records the head commit that ran, not the merge commit in GITHUB_SHA.
    meta = json.loads((result.workspace / ".ragproof" / "run" / "run.json").read_text())
    assert meta["git"]["commit"] == state.pulls[7]["head"]["sha"] == checkout_head(result.workspace)
    assert "🔍 No regression detected" in result.summary
    assert "::add-mask::ghs_write" in result.stdout and "::add-mask::sk-judge-secret" in result.stdout
    # The pipeline was imported after every credential had left the process environment.
    seen = json.loads((result.workspace / "seen-env.json").read_text())
    assert seen == {
        "GITHUB_TOKEN": False,
        "INPUT_GITHUB-TOKEN": False,
        "ACTIONS_RUNTIME_TOKEN": False,
        "OPENAI_API_KEY": False,
        "DEPLOY_PASSWORD": False,
    }
    assert all(b["authorization"] is None for b in state.blob_requests) and state.blob_requests
    assert not any(r["path"] == "/user" for r in state.requests)  # 403 for installation tokens


def test_rerun_updates_the_one_comment(tmp_path: Path, server: GitHubServer) -> None:
    first = _pr(tmp_path, server)
    assert first.returncode == 0, first.stderr
    server.state.add_comment(7, "a reviewer's reply", {"login": "alice", "type": "User"})
    second = _pr(tmp_path, server, misses=14)
    assert second.returncode == 1, second.stderr
    (comment,) = _ours(server.state)
    assert "## ragproof: ❌ Blocked" in comment["body"]
    assert len(server.state.comments[7]) == 2
    assert second.outputs["comment-url"] == first.outputs["comment-url"]
    assert [c["conclusion"] for c in server.state.check_runs] == ["success", "failure"]
    blocked = server.state.check_runs[1]["output"]
    assert blocked["title"].startswith("❌ Blocked: ") and " dropped: Δ −" in blocked["title"]
    assert blocked["title"].startswith("❌ Blocked: retrieval.hit_rate_at_k on all dropped: Δ −0.600")
    assert "**Why:** retrieval.hit\\_rate\\_at\\_k on all dropped: Δ −0.600" in comment["body"]
    assert blocked["text"].count("❌&nbsp;real drop") >= 1
    third = _pr(tmp_path, server, misses=14, inputs={"fail-on": "never"})
    # fail-on never cannot turn a failing check into a passing step: a red check is a red step
    assert third.returncode == 1 and third.outputs["decision"] == "block"
    assert len(_ours(server.state)) == 1


def test_merge_base_run_is_chosen_over_newer_default_branch_runs(
    tmp_path: Path, server: GitHubServer, runs: dict[str, bytes]
) -> None:
    """The scores compared with are the merge base's; the newest usable default-branch run is read
    for its policy (a refused newer artifact is skipped with a warning, the next one is used)."""
    state = server.state
    later = datetime(2026, 3, 2, tzinfo=UTC)
    state.add_commit("c2" * 20, [MERGE_BASE], later)
    state.branches["main"] = "c2" * 20
    usable = state.add_run(head_sha="c2" * 20, created_at=later + timedelta(hours=1))
    state.add_artifact(usable, "ragproof-run", runs["baseline"])
    broken = state.add_run(head_sha="c2" * 20, created_at=later + timedelta(hours=2))
    state.add_artifact(broken, "ragproof-run", b"would fail validation if it were used")
    result = _pr(tmp_path, server)
    assert result.returncode == 0, result.stderr
    assert result.outputs["baseline-sha"] == MERGE_BASE
    assert len(_downloads(state)) == 3  # the broken newest, the newest usable, the merge base's
    assert f"skipped baseline artifact 'ragproof-run' of run {broken}" in result.stdout


def test_same_named_artifact_of_a_pr_run_or_a_fork_is_never_used(
    runs: dict[str, bytes], tmp_path: Path
) -> None:
    state = GitHubState(page_size=2)
    pull_request_scenario(state, runs["baseline"])
    state.runs.clear()
    state.artifacts.clear()
    pr_run = state.add_run(head_sha=MERGE_BASE, event="pull_request")
    fork_run = state.add_run(head_sha=MERGE_BASE, head_repository=("mallory/rag", 2002))
    for run in (pr_run, fork_run):
        state.add_artifact(run, "ragproof-run", runs["worse"])
    with GitHubServer(state) as server:
        result = _pr(tmp_path, server)
    assert result.returncode == 0, result.stderr
    assert _downloads(state) == []
    assert result.outputs["decision"] == "none"
    (comment,) = _ours(state)
    assert "No baseline" in comment["body"]
    assert state.check_runs[0]["conclusion"] == "neutral"


def test_expired_artifact_is_skipped(runs: dict[str, bytes], tmp_path: Path) -> None:
    state = GitHubState(page_size=2)
    pull_request_scenario(state, runs["baseline"])
    merge_base_run = state.runs[0]["id"]
    state.artifacts[merge_base_run][0]["expired"] = True
    older = state.add_run(head_sha="c0" * 20)
    state.add_artifact(older, "ragproof-run", runs["baseline"])
    with GitHubServer(state) as server:
        result = _pr(tmp_path, server)
    assert result.returncode == 0, result.stderr
    assert result.outputs["baseline-run-id"] == str(older)
    body = _ours(state)[0]["body"]
    assert f"1 commit behind the merge base {MERGE_BASE[:7]}" in body
    assert "skipped expired artifact" in body


def _no_baseline_written(result: ActionRun, state: GitHubState, warning: str) -> None:
    """The refused baseline was skipped with a warning; the no-baseline path wrote everything."""
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert f"::warning title=ragproof::{warning}" in result.stdout
    (comment,) = _ours(state)
    assert "No baseline yet" in comment["body"]
    assert md_escape(warning) in comment["body"]
    assert state.check_runs[0]["conclusion"] == "neutral"
    assert result.outputs["decision"] == "none" and result.outputs["run-dir"]
    assert "No baseline" in result.summary


def test_a_poisoned_baseline_is_skipped_with_nothing_written_outside(
    tmp_path: Path, state: GitHubState
) -> None:
    # Used to stop the action with exit 65: no summary, no comment, no check, no run-dir.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("run.json", "{}")
        archive.writestr("../../../../escaped.txt", "owned")
    state.blobs[state.artifacts[state.runs[0]["id"]][0]["id"]] = buffer.getvalue()
    with GitHubServer(state) as server:
        result = _pr(tmp_path, server)
    _no_baseline_written(
        result,
        state,
        "skipped baseline artifact 'ragproof-run' of run 5001: "
        "unsafe zip entry '../../../../escaped.txt' (absolute path or '..')",
    )
    assert not list(tmp_path.rglob("escaped.txt"))
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_a_baseline_whose_every_case_failed_is_not_used(runs: dict[str, bytes], tmp_path: Path) -> None:
    # Used to be "✅ Passed (9 pass, 145 skipped)"-style: every metric gate skipped, the
    # failure-rate gates "improved".
    state = GitHubState(page_size=2)
    pull_request_scenario(state, runs["failed"])
    with GitHubServer(state) as server:
        result = _pr(tmp_path, server)
    _no_baseline_written(
        result,
        state,
        "skipped baseline artifact 'ragproof-run' of run 5001: not a usable baseline: "
        "adapter-failure rate 1.0000 (20 of 20 cases failed) exceeds run.max_failure_rate 0.5",
    )
    assert "✅" not in result.summary


def test_read_only_token_warns_and_still_writes_the_summary(tmp_path: Path, server: GitHubServer) -> None:
    result = _pr(tmp_path, server, token="ghs_read", extra_env={"GITHUB_TOKEN": "ghs_read"})
    assert result.returncode == 0, result.stderr
    assert "::warning title=ragproof::cannot comment on the pull request" in result.stdout
    assert "`permissions%3A checks%3A write`" not in result.stdout  # messages are data, not properties
    assert "checks: write" in result.stdout
    assert server.state.comments.get(7, []) == [] and server.state.check_runs == []
    assert "🔍 No regression detected" in result.summary
    assert result.outputs["decision"] == "pass"


def test_dispatch_rerun_for_a_pull_request(tmp_path: Path, server: GitHubServer) -> None:
    event = {"inputs": {"pr-number": "7"}, "repository": {"full_name": "acme/rag", "default_branch": "main"}}
    result = _pr(
        tmp_path,
        server,
        event_name="workflow_dispatch",
        event=event,
        inputs={"pr-number": "7"},
        sha=MERGE_BASE,
        ref="refs/heads/main",
        workflow_file="dispatch.yml",
        extra_env={"INPUT_BASELINE-WORKFLOW": "pr-gate.yml"},
    )
    assert result.returncode == 0, result.stderr
    assert len(_ours(server.state)) == 1
    # from the pulls API, and the commit checked out
    assert server.state.check_runs[0]["head_sha"] == server.state.pulls[7]["head"]["sha"]
    assert any(r["path"] == "/repos/acme/rag/pulls/7" for r in server.state.requests)


def test_dispatch_without_a_pull_request_writes_only_the_summary(
    tmp_path: Path, server: GitHubServer
) -> None:
    result = _pr(
        tmp_path,
        server,
        event_name="workflow_dispatch",
        event={"inputs": {}},
        sha=HEAD,
        ref="refs/heads/feature",
        inputs={"baseline-workflow": "pr-gate.yml"},
    )
    assert result.returncode == 0, result.stderr
    assert "🔍 No regression detected" in result.summary
    assert server.state.comments.get(7, []) == [] and server.state.check_runs == []


def test_push_to_the_default_branch_is_a_baseline_run(tmp_path: Path, server: GitHubServer) -> None:
    event = {
        "ref": "refs/heads/main",
        "after": MERGE_BASE,
        "repository": {"full_name": "acme/rag", "default_branch": "main"},
    }
    result = _pr(
        tmp_path, server, event_name="push", event=event, sha=MERGE_BASE, ref="refs/heads/main", token=""
    )
    assert result.returncode == 0, result.stderr
    out = result.workspace / ".ragproof" / "run"
    assert (out / "run.json").is_file() and (out / "rows.jsonl").is_file()
    assert json.loads((out / "run.json").read_text())["git"]["commit"] == MERGE_BASE
    assert result.outputs["decision"] == "none" and result.outputs["run-dir"] == ".ragproof/run"
    assert result.summary.startswith("<!-- ragproof:ragproof -->\n## ragproof: 📌 Baseline run")
    assert (
        "This run of refs/heads/main records a baseline: no gate is decided on it. Once .ragproof/run "
        "is uploaded as the ragproof-run artifact, pull requests are gated against these scores."
    ) in result.summary
    assert "retrieval.recall\\_at\\_k" in result.summary and "No baseline" not in result.summary
    assert (result.workspace / ".ragproof" / "run-report.md").read_text() == result.summary
    assert server.state.requests == []  # no comparison, no comment, no check, not even a token needed


def test_a_push_run_whose_cases_failed_is_loud(tmp_path: Path, server: GitHubServer) -> None:
    # Formerly exit 0: the push run then became the baseline every pull request passed against.
    event = {"ref": "refs/heads/main", "after": MERGE_BASE, "repository": {"full_name": "acme/rag"}}
    result = _pr(
        tmp_path,
        server,
        event_name="push",
        event=event,
        sha=MERGE_BASE,
        ref="refs/heads/main",
        token="",
        extra_env={"PIPELINE_FAIL": "1"},
    )
    why = (
        "this run is no usable baseline: adapter-failure rate 1.0000 (20 of 20 cases failed) "
        "exceeds run.max_failure_rate 0.5"
    )
    assert result.returncode == 4, result.stderr
    assert f"::error title=ragproof::{why}" in result.stdout
    assert "pull requests will not be gated against it" in result.summary
    assert result.outputs["run-dir"] == ".ragproof/run"  # the artifact is still there to look at


def test_secondary_rate_limit_then_success(tmp_path: Path, server: GitHubServer) -> None:
    server.state.secondary_rate_limit("POST", r"/issues/7/comments$", retry_after=1)
    result = _pr(tmp_path, server)
    assert result.returncode == 0, result.stderr
    assert len(_ours(server.state)) == 1
    posts = [r for r in server.state.requests if r["method"] == "POST" and r["path"].endswith("/comments")]
    assert len(posts) == 2


def test_no_baseline_at_all(tmp_path: Path, state: GitHubState) -> None:
    state.runs.clear()
    state.artifacts.clear()
    with GitHubServer(state) as server:
        result = _pr(tmp_path, server, inputs={"baseline-workflow": ".github/workflows/pr-gate.yml"})
    assert result.returncode == 0, result.stderr
    (comment,) = _ours(state)
    body = comment["body"]
    assert "No baseline" in body and "No baseline yet" in body
    assert "uploads the run directory as the ragproof-run artifact" in body
    assert "retrieval.recall\\_at\\_k" in body  # the absolute scores
    assert state.check_runs[0]["conclusion"] == "neutral"
    assert result.outputs["decision"] == "none"


def _fork_world(state: GitHubState, runs: dict[str, bytes], *, pr_head: str) -> dict[str, Any]:
    """A fork PR #8 (mallory:feature at f1) whose pull_request run uploaded the candidate."""
    state.add_commit("f1" * 20, [MERGE_BASE], datetime(2026, 3, 3, tzinfo=UTC))
    for run in state.runs:
        run["path"] = ".github/workflows/fork-safe-candidate.yml"
    state.add_pull(8, head_sha=pr_head, head_repo=("mallory/rag", 2002))
    state.pulls[8]["head"]["ref"] = "feature"
    trigger = state.add_run(
        head_sha="f1" * 20,
        event="pull_request",
        head_branch="feature",
        workflow="fork-safe-candidate.yml",
        head_repository=("mallory/rag", 2002),
    )
    state.add_artifact(trigger, "ragproof-run", runs["worse"])
    run = next(r for r in state.runs if r["id"] == trigger)
    return {"action": "completed", "workflow_run": run, "repository": state.repository()}


def _trusted_stage(tmp_path: Path, server: GitHubServer, event: dict[str, Any], **inputs: str) -> ActionRun:
    """The fork-safe pair's trusted stage: the workflow_run on the default branch."""
    return _pr(
        tmp_path,
        server,
        event_name="workflow_run",
        event=event,
        sha=MERGE_BASE,
        ref="refs/heads/main",
        workflow_file="fork-safe-gate.yml",
        inputs={"baseline-workflow": "fork-safe-candidate.yml", **inputs},
    )


def test_workflow_run_gates_the_fork_candidate_artifact(
    tmp_path: Path, state: GitHubState, runs: dict[str, bytes]
) -> None:
    event = _fork_world(state, runs, pr_head="f1" * 20)
    with GitHubServer(state) as server:
        result = _trusted_stage(tmp_path, server, event)
    assert result.returncode == 1, result.stderr
    assert not (result.workspace / "seen-env.json").exists()  # nothing from the PR was executed
    (comment,) = _ours(state, 8)
    assert "❌ Blocked" in comment["body"]
    trigger = event["workflow_run"]["html_url"]
    assert f"({trigger}#artifacts)" in comment["body"]  # where the candidate's artifact is
    assert state.check_runs[0]["head_sha"] == "f1" * 20 and state.check_runs[0]["conclusion"] == "failure"
    assert result.outputs["baseline-sha"] == MERGE_BASE


def test_workflow_run_with_a_refused_candidate_still_writes_everything(
    tmp_path: Path, state: GitHubState, runs: dict[str, bytes]
) -> None:
    # Formerly: exit 65 with no comment, no check, no summary and no outputs.
    event = _fork_world(state, runs, pr_head="f1" * 20)
    trigger = event["workflow_run"]["id"]
    with zipfile.ZipFile(io.BytesIO(runs["worse"])) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    lines = files["rows.jsonl"].decode().splitlines()
    lines[0] = lines[0].replace('"value":0.0', '"value":1e6', 1).replace('"value":1.0', '"value":1e6', 1)
    files["rows.jsonl"] = ("\n".join(lines) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    state.blobs[state.artifacts[trigger][0]["id"]] = buffer.getvalue()
    with GitHubServer(state) as server:
        result = _trusted_stage(tmp_path, server, event)
    why = f"candidate artifact 'ragproof-run' of run {trigger}: rows.jsonl:1: metrics."
    assert result.returncode == 65
    [line] = result.stderr.splitlines()
    assert line.startswith(f"ragproof: error: {why}") and line.endswith(": 1000000.0 is not within [0, 1]")
    assert f"::error title=ragproof::{why}" in result.stdout
    (comment,) = _ours(state, 8)
    assert "## ragproof: candidate artifact refused" in comment["body"]
    assert md_escape(line.removeprefix("ragproof: error: ")) in comment["body"]
    (check,) = state.check_runs
    assert check["head_sha"] == "f1" * 20 and check["conclusion"] == "failure"
    assert check["output"]["title"] == "ragproof: candidate artifact refused"
    assert "candidate artifact refused" in result.summary
    assert result.outputs["decision"] == "none" and result.outputs["report"]


def test_workflow_run_does_not_post_on_a_pr_that_moved_on(
    tmp_path: Path, state: GitHubState, runs: dict[str, bytes]
) -> None:
    state.add_commit("f2" * 20, ["f1" * 20])
    event = _fork_world(state, runs, pr_head="f2" * 20)
    with GitHubServer(state) as server:
        result = _pr(
            tmp_path,
            server,
            event_name="workflow_run",
            event=event,
            workflow_file="fork-safe-gate.yml",
            inputs={"baseline-workflow": "fork-safe-candidate.yml"},
        )
    assert result.returncode == 0, result.stderr
    assert "has moved on to f2f2f2f" in result.stdout
    assert state.comments.get(8, []) == [] and state.check_runs == []


def test_bad_input_is_one_line_usage_error(tmp_path: Path, server: GitHubServer) -> None:
    result = _pr(tmp_path, server, inputs={"fail-on": "sometimes"})
    assert result.returncode == 64
    (line,) = [x for x in result.stderr.splitlines() if "error" in x]  # after the run's progress
    assert line.startswith("ragproof: error: input fail-on (INPUT_FAIL-ON):")
    assert server.state.requests == []


def test_install_runs_first_without_any_credential(tmp_path: Path, server: GitHubServer) -> None:
    probe = (
        "python -c \"import os, pathlib; pathlib.Path('installed.txt').write_text(','.join(sorted("
        "k for k in os.environ if 'TOKEN' in k or 'KEY' in k or k.startswith('INPUT_'))))\""
    )
    result = _pr(tmp_path, server, inputs={"install": probe, "comment": "false"})
    assert result.returncode == 0, result.stderr
    assert (result.workspace / "installed.txt").read_text() == ""
    assert "::group::install: python -c" in result.stdout
    assert server.state.comments.get(7, []) == []  # comment: false
    assert len(server.state.check_runs) == 1
    failing = _pr(tmp_path, server, inputs={"install": "exit 3"})
    assert failing.returncode == 1
    assert "input install: command 'exit 3' failed with exit code 3" in failing.stderr


def test_compare_mode_gates_the_run_an_earlier_step_wrote(
    tmp_path: Path, server: GitHubServer, runs: dict[str, bytes]
) -> None:
    workspace = _project(tmp_path)
    with zipfile.ZipFile(io.BytesIO(runs["worse"])) as archive:
        archive.extractall(workspace / ".ragproof" / "run")
    result = _pr(tmp_path, server, inputs={"mode": "compare"})
    assert result.returncode == 1, result.stderr
    assert result.outputs["decision"] == "block"
    assert not (workspace / "seen-env.json").exists()  # nothing was run


def test_runs_that_cannot_be_compared_exit_3(
    tmp_path: Path, server: GitHubServer, runs: dict[str, bytes]
) -> None:
    workspace = _project(tmp_path)
    with zipfile.ZipFile(io.BytesIO(runs["baseline"])) as archive:
        archive.extractall(workspace / "cand")
    meta = json.loads((workspace / "cand" / "run.json").read_text())
    meta["k"] = 5
    (workspace / "cand" / "run.json").write_text(json.dumps(meta))
    result = _pr(tmp_path, server, inputs={"candidate": "cand"})
    assert result.returncode == 3, result.stderr
    assert "::error title=ragproof::runs not comparable: k differs" in result.stdout
    (comment,) = _ours(server.state)
    assert "runs not comparable" in comment["body"]
    assert server.state.check_runs[0]["conclusion"] == "failure"
    assert result.outputs["decision"] == "none"


def test_run_mode_on_a_pull_request_only_runs(tmp_path: Path, server: GitHubServer) -> None:
    result = _pr(tmp_path, server, inputs={"mode": "run"}, token="")
    assert result.returncode == 0, result.stderr
    assert result.outputs["decision"] == "none" and result.outputs["run-dir"] == ".ragproof/run"
    assert server.state.requests == []


def test_a_failure_to_publish_is_loud_and_loses_nothing(tmp_path: Path, server: GitHubServer) -> None:
    """GitHub refuses the check run twice (422) and the comment once: each write is tried, the
    summary and outputs are written, every failure is an ::error, and the step fails (exit 1)."""
    server.state.fail("POST", r"/check-runs$", 422, message="Validation Failed", times=2)
    result = _pr(tmp_path, server)
    assert result.returncode == 1
    assert server.state.check_runs == []
    (comment,) = _ours(server.state)  # the other write still happened
    assert "## ragproof: 🔍 No regression detected" in comment["body"]
    head = server.state.pulls[7]["head"]["sha"]
    (line,) = [x for x in result.stderr.splitlines() if "error" in x]  # after the run's progress
    assert line.startswith(f"ragproof: error: could not write the check run on {head[:7]}: ")
    assert "Validation Failed" in line
    assert line.endswith("; the decision (pass) and the report are in the job summary and the outputs")
    assert f"::error title=ragproof::could not write the check run on {head[:7]}: " in result.stdout
    assert result.outputs["decision"] == "pass" and result.outputs["comment-url"] == comment["html_url"]
    assert "🔍 No regression detected" in result.summary
    # the comment refused instead: the check run is still created, and the step still fails
    server.state.fail("POST", r"/issues/7/comments$", 422, message="Body is too long")
    server.state.fail("PATCH", r"/issues/comments/\d+$", 422, message="Body is too long")
    again = _pr(tmp_path, server)
    assert again.returncode == 1
    assert [c["conclusion"] for c in server.state.check_runs] == ["success"]
    assert "could not write the comment on pull request #7: " in again.stderr
    assert "comment-url" not in again.outputs and again.outputs["decision"] == "pass"
