"""GitHub's payloads as GitHub sends them: ``ragproof action`` on GitHub's official webhook
examples (tests/data/github/webhooks/, from @octokit/webhooks-examples) against the GitHub API
test server, whose requests and responses are checked against GitHub's OpenAPI description
by the shared fixture in conftest.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from github_helpers import GOOD, ActionRun, make_workspace, run_action, write_run
from servers.github_server import GitHubServer, GitHubState, minimal_pull, zip_directory

from gate.github.models import Artifact, CheckRun, EventPayload, IssueComment, PullRequest, WorkflowRun

pytestmark = pytest.mark.slow

WEBHOOKS = Path(__file__).resolve().parents[1] / "data" / "github" / "webhooks"
EXAMPLES = sorted(p.name for p in WEBHOOKS.glob("*.json"))
PR_ACTIONS = ["opened", "synchronize", "reopened", "labeled"]


def example(name: str) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads((WEBHOOKS / name).read_text()))


def test_the_vendored_examples_are_the_ones_the_action_handles() -> None:
    expected = [f"pull_request.{action}.json" for action in sorted(PR_ACTIONS)]
    expected += ["push.json", "workflow_dispatch.json", "workflow_run.completed.json"]
    assert expected == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_parses(name: str) -> None:
    payload = EventPayload.model_validate(example(name))
    assert payload.repository is not None and payload.repository.full_name


def test_a_run_pull_request_is_the_short_form_github_sends() -> None:
    run = WorkflowRun.model_validate(example("workflow_run.completed.json")["workflow_run"])
    (entry,) = run.pull_requests
    assert (entry.number, entry.head.sha, entry.head.ref) == (
        2,
        "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
        "changes",
    )
    assert entry.head.repo is not None and (entry.head.repo.id, entry.head.repo.full_name) == (
        186853002,
        None,
    )
    # GitHub's schema lets pull_requests be null.
    nulled = {**example("workflow_run.completed.json")["workflow_run"], "pull_requests": None}
    assert WorkflowRun.model_validate(nulled).pull_requests == []


def test_models_require_only_what_the_action_reads() -> None:
    pull = PullRequest.model_validate({"number": 2, "head": {"sha": "a1", "ref": "changes", "repo": None}})
    assert (pull.number, pull.head.sha, pull.head.repo, pull.base, pull.state) == (
        2,
        "a1",
        None,
        None,
        "open",
    )
    run = WorkflowRun.model_validate(
        {
            "id": 1,
            "event": "push",
            "head_sha": "a1",
            "created_at": "2026-03-01T00:00:00Z",
            "head_repository": None,
        }
    )
    assert (run.pull_requests, run.head_repository, run.path, run.conclusion) == ([], None, None, None)
    assert Artifact.model_validate({"id": 3, "name": "ragproof-run", "workflow_run": None}).expired is False
    assert IssueComment.model_validate({"id": 4, "user": None, "body": None}).user is None  # a ghost
    assert CheckRun.model_validate({"html_url": None}).id is None


def _world(event: dict[str, Any], *, base_sha: str, head_sha: str | None, workflow: str) -> GitHubState:
    """The example's repository on the test server, with a baseline push run at ``base_sha``."""
    repository = event["repository"]
    owner, name = repository["full_name"].split("/")
    state = GitHubState(
        owner=owner, name=name, repo_id=repository["id"], default_branch=repository["default_branch"]
    )
    day = datetime(2026, 3, 1, tzinfo=UTC)
    state.add_commit(base_sha, [], day)
    state.branches[state.default_branch] = base_sha
    if head_sha:
        state.add_commit(head_sha, [base_sha], day.replace(hour=2))
    return state


def _baseline(state: GitHubState, root: Path, sha: str, workflow: str, **kw: Any) -> None:
    run_id = state.add_run(head_sha=sha, workflow=workflow, **kw)
    state.add_artifact(run_id, "ragproof-run", zip_directory(write_run(root / "baseline", GOOD, commit=sha)))


def _action(root: Path, server: GitHubServer, event_name: str, event: dict[str, Any], **kw: Any) -> ActionRun:
    workspace = make_workspace(root)
    write_run(workspace / "candidate", GOOD, commit=kw.get("sha", "e" * 40), run_id="candidate")
    env = {"GITHUB_REPOSITORY": server.state.full_name, **kw.pop("extra_env", {})}
    return run_action(
        root,
        server.url,
        event_name=event_name,
        event=event,
        inputs={"candidate": "candidate", **kw.pop("inputs", {})},
        extra_env=env,
        **kw,
    )


@pytest.mark.parametrize("action", PR_ACTIONS)
def test_pull_request_examples_are_gated(tmp_path: Path, action: str) -> None:
    event = example(f"pull_request.{action}.json")
    pull = event["pull_request"]
    base, head = pull["base"]["sha"], pull["head"]["sha"]
    state = _world(event, base_sha=base, head_sha=head, workflow="pr-gate.yml")
    number = state.add_pull(event["number"], head_sha=head, head_ref=pull["head"]["ref"])["number"]
    # The open PR also shows in the baseline push run's pull_requests, in GitHub's short form.
    _baseline(state, tmp_path, base, "pr-gate.yml", pull_requests=[state.pulls[number]])
    assert state.runs[0]["pull_requests"][0]["head"]["repo"] == {
        "id": 186853002,
        "url": "https://api.github.com/repos/Codertocat/Hello-World",
        "name": "Hello-World",
    }
    with GitHubServer(state) as server:
        result = _action(
            tmp_path, server, "pull_request", event, sha="m" * 40, ref=f"refs/pull/{number}/merge"
        )
    assert result.returncode == 0, result.stderr
    assert (result.outputs["decision"], result.outputs["baseline-sha"]) == ("pass", base)
    (comment,) = state.comments[number]
    assert comment["body"].startswith("<!-- ragproof:ragproof -->")
    (check,) = state.check_runs
    assert (check["head_sha"], check["conclusion"]) == (head, "success")


def test_push_example_records_a_baseline(tmp_path: Path) -> None:
    event = example("push.json")
    assert event["ref"] == f"refs/heads/{event['repository']['default_branch']}"
    state = _world(event, base_sha=event["before"], head_sha=event["after"], workflow="pr-gate.yml")
    with GitHubServer(state) as server:
        result = _action(tmp_path, server, "push", event, sha=event["after"], ref=event["ref"])
    assert result.returncode == 0, result.stderr
    assert result.outputs["decision"] == "none"
    assert "records a baseline" in result.summary
    assert state.requests == []  # a baseline run needs no API call


def test_workflow_dispatch_example_compares_with_the_default_branch(tmp_path: Path) -> None:
    event = example("workflow_dispatch.json")
    head = "d1" * 20
    base = "b0" * 20
    state = _world(event, base_sha=base, head_sha=head, workflow="dispatch.yml")
    _baseline(state, tmp_path, base, "pr-gate.yml")
    with GitHubServer(state) as server:
        result = _action(
            tmp_path,
            server,
            "workflow_dispatch",
            event,
            sha=head,
            ref=event["ref"],
            workflow_file="dispatch.yml",
            inputs={"baseline-workflow": "pr-gate.yml"},
        )
    assert result.returncode == 0, result.stderr
    assert (result.outputs["decision"], result.outputs["baseline-sha"]) == ("pass", base)
    assert "🔍 No regression detected" in result.summary
    assert state.comments == {} and state.check_runs == []  # no pull request named: summary only


def test_workflow_run_example_is_read_and_not_gated(tmp_path: Path) -> None:
    event = example("workflow_run.completed.json")
    run = event["workflow_run"]
    assert run["event"] == "repository_dispatch"
    state = _world(event, base_sha="b0" * 20, head_sha=run["head_sha"], workflow="test.yml")
    with GitHubServer(state) as server:
        result = _action(tmp_path, server, "workflow_run", event, workflow_file="gate.yml")
    assert result.returncode == 0, result.stderr
    assert (
        f"::notice::run {run['id']} was triggered by repository_dispatch, not a pull request: nothing to gate"
    ) in result.stdout
    assert result.outputs["decision"] == "none"


def test_workflow_run_of_a_same_repository_pull_request_is_gated(tmp_path: Path) -> None:
    # The trigger as the REST API and the webhook send it: GitHub's workflow-run example whose
    # pull_requests names the PR with short repositories {id, url, name}.
    base, head = "c1" * 20, "a1" * 20
    state = _world({"repository": GitHubState().repository()}, base_sha=base, head_sha=head, workflow="x")
    pull = state.add_pull(7, head_sha=head)
    _baseline(state, tmp_path, base, "candidate.yml")
    trigger = state.add_run(
        head_sha=head,
        event="pull_request",
        head_branch="feature",
        workflow="candidate.yml",
        pull_requests=[pull],
    )
    candidate = zip_directory(write_run(tmp_path / "pr-run", GOOD, commit=head, run_id="pr"))
    state.add_artifact(trigger, "ragproof-run", candidate)
    run = next(r for r in state.runs if r["id"] == trigger)
    # GitHub's example names the workflow file with a ref; the baseline workflow is the file.
    run["path"] = ".github/workflows/candidate.yml@main"
    assert run["pull_requests"] == [minimal_pull(pull)]
    assert set(run["pull_requests"][0]["head"]["repo"]) == {"id", "url", "name"}
    event = {"action": "completed", "workflow_run": run, "repository": state.repository()}
    make_workspace(tmp_path)  # nothing of the pull request runs here: the candidate is the artifact
    with GitHubServer(state) as server:
        result = run_action(
            tmp_path,
            server.url,
            event_name="workflow_run",
            event=event,
            # the baselines' (and candidate's) workflow: never taken from the trigger's name
            inputs={"baseline-workflow": "candidate.yml"},
            sha=base,
            ref="refs/heads/main",
            workflow_file="gate.yml",
        )
    assert result.returncode == 0, result.stderr
    assert (result.outputs["decision"], result.outputs["baseline-sha"]) == ("pass", base)
    (comment,) = state.comments[7]
    assert f"({run['html_url']}#artifacts)" in comment["body"]
    assert state.check_runs[0]["head_sha"] == head
    # The PR came from the run's own list: no search of open pull requests was needed.
    assert not any(r["path"].endswith("/pulls") for r in state.requests)
