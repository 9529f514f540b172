"""The check every GitHub API test runs under (conftest.py): requests and responses of the
test server against GitHub's OpenAPI description. Each rule is seen catching a violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from github_helpers import client_for, pull_request_server
from servers import github_contract as contract

DATA = Path(__file__).resolve().parents[1] / "data" / "github"
CHECK = "/repos/acme/rag/check-runs"


def test_the_vendored_operations_are_the_ones_the_action_calls() -> None:
    calls = {op.raw["x-ragproof-call"] for op in contract.operations()}
    assert calls == {
        "repos.get",
        "repos.compare_commits",
        "actions.list_workflow_runs",
        "actions.list_workflow_run_artifacts",
        "download_artifact",
        "pulls.get",
        "pulls.list",
        "issues.list_comments",
        "issues.create_comment",
        "issues.update_comment",
        "checks.create",
        "issues.list_events",
        "repos.get_collaborator_permission_level",
        "checks.list_for_ref",
    }
    gate_sources = "".join(
        p.read_text() for p in (Path(__file__).parents[2] / "gate" / "github").glob("*.py")
    )
    for call in calls - {"download_artifact"}:
        assert f'"{call}"' in gate_sources, call


def test_per_page_keeps_the_limit_github_states_in_words() -> None:
    (per_page,) = [
        p
        for p in contract.spec()["components"]["parameters"].values()
        if p.get("name") == "per_page" and p["in"] == "query"
    ]
    assert per_page["schema"] == {"type": "integer", "default": 30, "maximum": 100}


def test_a_request_that_matches_an_operation_has_no_errors() -> None:
    path = "/repos/acme/rag/actions/workflows/pr-gate.yml/runs"
    query = {"branch": ["main"], "event": ["push"], "status": ["success"], "per_page": ["100"], "page": ["2"]}
    assert contract.request_errors("GET", path, query, None) == []
    assert (
        contract.request_errors("GET", "/repos/acme/rag/compare/c1c1...a1a1", {"per_page": ["1"]}, None) == []
    )
    body = {"name": "ragproof", "head_sha": "a1" * 20, "status": "completed", "conclusion": "neutral"}
    assert contract.request_errors("POST", CHECK, {}, body) == []


def test_requests_outside_the_contract_are_named() -> None:
    runs = "/repos/acme/rag/actions/workflows/pr-gate.yml/runs"
    assert contract.request_errors("GET", "/user", {}, None) == [
        "GET /user: no operation of the GitHub API (tests/data/github/openapi.json) matches"
    ]
    assert contract.request_errors("DELETE", "/repos/acme/rag", {}, None)[0].endswith("matches")
    (error,) = contract.request_errors("GET", runs, {"per_page": ["101"]}, None)
    assert error == (
        "GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs (actions/list-workflow-runs): "
        "query parameter per_page='101': (root): 101 is greater than the maximum of 100"
    )
    (error,) = contract.request_errors("GET", runs, {"sort": ["created"]}, None)
    assert "query parameter 'sort' is not declared" in error
    (error,) = contract.request_errors("GET", runs, {"page": ["1", "2"]}, None)
    assert error.endswith("query parameter 'page' given 2 times")
    (error,) = contract.request_errors("GET", "/repos/acme/rag/actions/runs/abc/artifacts", {}, None)
    assert "path parameter run_id='abc': (root): 'abc' is not of type 'integer'" in error
    (error,) = contract.request_errors("GET", "/repos/acme/rag/pulls/7", {}, {"x": 1})
    assert error.endswith("the operation takes no request body")


def test_request_bodies_are_checked_against_their_schema() -> None:
    errors = contract.request_errors("POST", CHECK, {}, {"name": "ragproof", "conclusion": "passed"})
    assert errors == [
        "POST /repos/{owner}/{repo}/check-runs (checks/create): request body: (root): "
        "'head_sha' is a required property",
        "POST /repos/{owner}/{repo}/check-runs (checks/create): request body: conclusion: "
        "'passed' is not one of ['action_required', 'cancelled', 'failure', 'neutral', 'success', "
        "'skipped', 'stale', 'timed_out']",
    ]
    long = {"name": "r", "head_sha": "a", "output": {"title": "t", "summary": "x" * 65_536}}
    (error,) = contract.request_errors("POST", CHECK, {}, long)
    assert error.endswith("request body: output/summary: breaks maxLength: 65535")
    (error,) = contract.request_errors("POST", "/repos/acme/rag/issues/7/comments", {}, None)
    assert error.endswith("the request body is required")


def test_responses_are_checked_against_the_declared_schema() -> None:
    pull = contract.example("pull-request")
    pull["requested_teams"] = []
    assert contract.response_errors("GET", "/repos/acme/rag/pulls/7", 200, pull) == []
    del pull["head"]
    assert contract.response_errors("GET", "/repos/acme/rag/pulls/7", 200, pull) == [
        "GET /repos/{owner}/{repo}/pulls/{pull_number} (pulls/get) -> 200: response body: (root): "
        "'head' is a required property"
    ]
    run = contract.example("workflow-run-paginated")
    run["workflow_runs"][0]["pull_requests"][:] = [{"number": 2, "head": {"sha": "a"}}]
    errors = contract.response_errors("GET", "/repos/acme/rag/actions/workflows/x.yml/runs", 200, run)
    assert "workflow_runs/0/pull_requests" in errors[0]
    # An error status the operation does not declare may come from any call (rate limits, outages).
    assert contract.response_errors("GET", "/repos/acme/rag/pulls/7", 429, {"message": "slow down"}) == []
    assert contract.response_errors("GET", "/repos/acme/rag/pulls/7", 204, None) == [
        "GET /repos/{owner}/{repo}/pulls/{pull_number} (pulls/get) -> 204: status 204 is not a declared response"
    ]


def test_the_test_server_records_what_breaks_the_contract() -> None:
    with pull_request_server() as server:
        items = list(client_for(server).paginate("issues.list_comments", issue_number=7, per_page=101))
        assert items == []
        with server.state.lock:
            violations = list(server.state.contract_violations)
            server.state.contract_violations.clear()  # seen here; the shared fixture would fail the test
    assert violations == [
        "GET /repos/{owner}/{repo}/issues/{issue_number}/comments (issues/list-comments): "
        "query parameter per_page='101': (root): 101 is greater than the maximum of 100"
    ]


@pytest.mark.parametrize("name", ["LICENSE-octokit-webhooks", "LICENSE-octokit-openapi"])
def test_the_vendored_data_carries_its_licence(name: str) -> None:
    text = (DATA / name).read_text()
    assert text.startswith("MIT License") or text.startswith("The MIT License")
    assert "Permission is hereby granted, free of charge" in text
    readme = (DATA / "README.md").read_text()
    assert name in readme


def test_the_vendored_description_is_small_and_generated() -> None:
    raw = (DATA / "openapi.json").read_bytes()
    assert len(raw) < 300_000
    spec = json.loads(raw)
    assert sorted(spec) == ["components", "info", "openapi", "paths", "servers"]
