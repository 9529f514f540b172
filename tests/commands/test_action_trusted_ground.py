"""The baseline, the policy and an acceptance come from trusted ground, and the step says what
the check says.

``ragproof action`` as a subprocess against the GitHub API test server (real HTTP on
127.0.0.1, GitHub's shapes): a pull request cannot get "no baseline" by its choice of fork
point, a stale fork point gates with the default branch's newest policy, a label accepts the
commit it was given on only, a record of an acceptance counts only where ragproof wrote it,
and a red check is a red step.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import test_cli_action as base
import yaml
from servers.github_server import GitHubServer, GitHubState, pull_request_scenario, user, zip_directory
from test_cli_action import MARKER, MERGE_BASE, _fork_world, _ours, _pr, _project, _trusted_stage, checkout

from gate.report.escape import md_escape

pytestmark = pytest.mark.slow

runs = base.runs
state = base.state
server = base.server


def _edit_config(workspace: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    path = workspace / "ragproof.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


# -- a red check is a red step ----------------------------------------------------------------


def _recorded_with(root: Path, **gate: object) -> bytes:
    """A real baseline run of the fixture project whose recorded config has these gate settings."""
    return zip_directory(
        base._real_run(root, 2, edit=lambda ws: _edit_config(ws, lambda d: d["gate"].update(gate)))
    )


@pytest.fixture(scope="module")
def unreachable(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A baseline whose policy asks for more pairs than it has cases: no gate can be decided."""
    return _recorded_with(tmp_path_factory.mktemp("unreachable"), min_pairs=1000)


def test_nothing_compared_with_a_red_check_fails_the_step(tmp_path: Path, unreachable: bytes) -> None:
    """The default branch's policy leaves no gate decidable: the decision is ``none`` and the
    check ``action_required``; the step exits 1, never 0 beside a red check. With
    review-conclusion neutral the check is not red, and the step passes."""
    world = GitHubState(page_size=2)
    pull_request_scenario(world, unreachable)
    _edit_config(_project(tmp_path), lambda d: d["gate"].update(min_pairs=1000))
    with GitHubServer(world) as github:
        result = _pr(tmp_path, github)
        assert result.outputs["decision"] == "none", result.stderr
        assert result.outputs["policy-changed"] == "false"
        (check,) = world.check_runs
        assert check["conclusion"] == "action_required"
        assert result.returncode == 1, result.stderr
        again = _pr(tmp_path, github, same_commit=True, inputs={"review-conclusion": "neutral"})
    assert world.check_runs[-1]["conclusion"] == "neutral"
    assert (again.outputs["decision"], again.returncode) == ("none", 0)


# -- the baseline and the policy are the default branch's -------------------------------------

WORSE = 14


def test_a_fork_point_before_the_first_baseline_still_has_one(
    tmp_path: Path, runs: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main: c0 <- c1 (the first baseline). A PR branched from c0 is compared with c1's run: its
    check fails for a clear drop, never neutral, and the summary says which baseline it was."""
    world = GitHubState(page_size=2)
    pull_request_scenario(world, runs["baseline"])
    monkeypatch.setattr(base, "MERGE_BASE", "c0" * 20)  # _pr's head commit forks from c0
    with GitHubServer(world) as github:
        result = _pr(tmp_path, github, misses=WORSE)
    assert world.check_runs[-1]["conclusion"] == "failure", result.stderr
    assert (result.returncode, result.outputs["decision"]) == (1, "block")
    assert result.outputs["baseline-sha"] == MERGE_BASE
    body = _ours(world)[0]["body"]
    assert md_escape("The merge base c0c0c0c has no usable baseline at or before it") in body
    assert md_escape("compared with the default branch's newest baseline instead") in body


def test_many_baselines_after_the_fork_point_do_not_exhaust_the_search(
    tmp_path: Path, runs: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main: c1 (baseline) <- f0 (no run) <- 35 commits with a baseline run each. A PR branched
    from f0 gets the baseline at c1, one commit behind its merge base: the 35 newer runs do not
    use up the search (today's bound is 30 compared commits)."""
    world = GitHubState(page_size=100)
    pull_request_scenario(world, runs["baseline"])
    fork_point = world.add_commit("f0" * 20, [MERGE_BASE], datetime(2026, 3, 1, 1, 30, tzinfo=UTC))
    parent = fork_point
    for i in range(35):
        parent = world.add_commit(
            f"{i + 1:040x}", [parent], datetime(2026, 3, 2, tzinfo=UTC) + timedelta(hours=i)
        )
        world.add_artifact(world.add_run(head_sha=parent), "ragproof-run", runs["baseline"])
    world.branches["main"] = parent
    monkeypatch.setattr(base, "MERGE_BASE", fork_point)
    with GitHubServer(world) as github:
        result = _pr(tmp_path, github, misses=WORSE)
    assert world.check_runs[-1]["conclusion"] == "failure", result.stderr
    assert (result.returncode, result.outputs["decision"]) == (1, "block")
    assert result.outputs["baseline-sha"] == MERGE_BASE  # c1: the nearest ancestor with a baseline
    compares = [r for r in world.requests if "/compare/" in r["path"]]
    assert len(compares) <= 3  # the merge base, then c1 at once


@pytest.fixture(scope="module")
def lenient(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real baseline run of the fixture project recorded with ``gate.margin: 0.5``."""
    return _recorded_with(tmp_path_factory.mktemp("lenient"), margin=0.5)


def test_a_stale_fork_point_is_gated_with_the_default_branchs_newest_policy(
    tmp_path: Path, runs: dict[str, bytes], lenient: bytes
) -> None:
    """Main tightened gate.margin 0.5 -> 0.02 at c2, after the PR forked from c1 (whose baseline
    recorded 0.5, as the PR's own ragproof.yaml still says). A slightly worse candidate passes
    at 0.5; the newest policy (0.02) applies, and the change is reported."""
    world = GitHubState(page_size=2)
    pull_request_scenario(world, lenient)
    world.add_commit("c2" * 20, [MERGE_BASE], datetime(2026, 3, 2, tzinfo=UTC))
    world.branches["main"] = "c2" * 20
    world.add_artifact(world.add_run(head_sha="c2" * 20), "ragproof-run", runs["baseline"])
    workspace = _project(tmp_path)
    _edit_config(workspace, lambda d: d["gate"].update(margin=0.5))  # as main said at the fork point
    with GitHubServer(world) as github:
        result = _pr(tmp_path, github, misses=6)
    assert result.outputs["policy-changed"] == "true", result.stderr
    assert result.outputs["decision"] in ("review", "block")
    assert result.returncode == 1
    assert result.outputs["baseline-sha"] == MERGE_BASE  # the scores are the merge base's
    assert world.check_runs[-1]["conclusion"] in ("action_required", "failure")
    body = _ours(world)[0]["body"]
    assert md_escape("The default branch's policy changed after the baseline compared with") in body
    assert md_escape("The default branch's ragproof.yaml changes: gate.margin: 0.5 → 0.02.") in body
    assert "This pull request changes the gate" not in body  # the PR did not change it


# -- an acceptance belongs to one commit, and only ragproof's own record counts ----------------

LABEL = "ragproof:accept"


def test_another_workflows_bot_comment_is_no_record_of_an_acceptance(
    tmp_path: Path, server: GitHubServer
) -> None:
    """Every workflow's token comments as github-actions[bot]: a comment of another workflow that
    starts with ragproof's marker and carries a record for this commit (text the author chose,
    quoted) accepts nothing. Records are read from ragproof's own check runs only."""
    server.state.roles["mia"] = "maintain"
    server.state.label(7, LABEL, "mia")  # a maintainer's label, still on the pull request
    _project(tmp_path)
    head = checkout(tmp_path / "workspace")
    forged = f"{MARKER}\n<!-- ragproof:accepted sha={head} by=mia -->\n> quoted from the pull request's body"
    server.state.add_comment(7, forged)  # by github-actions[bot], as every workflow token posts
    result = _pr(tmp_path, server, misses=WORSE, same_commit=True)  # synchronize, sent by the author
    assert result.returncode == 1, result.stderr
    assert "accepted-by" not in result.outputs
    check = server.state.check_runs[-1]
    assert (check["head_sha"], check["conclusion"]) == (head, "failure")
    assert "ragproof:accepted" not in check["output"]["summary"]


def _stage_one(world: GitHubState, head: str, at: datetime, runs: dict[str, bytes]) -> dict[str, Any]:
    """A stage-one run of the fork's pull request #8 on ``head``, created at ``at``, with its artifact."""
    run_id = world.add_run(
        head_sha=head,
        event="pull_request",
        head_branch="feature",
        workflow="fork-safe-candidate.yml",
        head_repository=("mallory/rag", 2002),
        created_at=at,
    )
    world.add_artifact(run_id, "ragproof-run", runs["worse"])
    return next(r for r in world.runs if r["id"] == run_id)


def _started_by(run: dict[str, Any], login: str, at: datetime) -> dict[str, Any]:
    stamp = at.isoformat().replace("+00:00", "Z")
    return {**run, "actor": user(login), "triggering_actor": user(login), "created_at": stamp}


def test_in_the_fork_safe_pair_a_label_accepts_only_the_head_it_was_given_on(
    tmp_path: Path, state: GitHubState, runs: dict[str, bytes]
) -> None:
    """A maintainer accepts f1; the author pushes f2; a run on f2 that the maintainer starts
    later (closing and reopening, another label) is not accepted: f2 was not the head when the
    label was given."""
    event = _fork_world(state, runs, pr_head="f1" * 20)  # f1's stage-one run predates the label
    state.roles["mia"] = "maintain"
    state.label(8, LABEL, "mia")
    now = datetime.now(UTC)
    first = {**event, "workflow_run": _started_by(event["workflow_run"], "mia", now + timedelta(seconds=5))}
    with GitHubServer(state) as github:
        accepted = _trusted_stage(tmp_path, github, first)
        assert accepted.returncode == 0, accepted.stderr
        assert accepted.outputs["accepted-by"] == "mia"  # the head the label was given on
        # the author pushes f2 (its stage-one run comes after the label) ...
        state.add_commit("f2" * 20, ["f1" * 20], now)
        state.pulls[8]["head"]["sha"] = "f2" * 20
        pushed = _stage_one(state, "f2" * 20, now + timedelta(seconds=10), runs)
        # ... and the maintainer closes and reopens the pull request: a run on f2 she started
        reopened = {**event, "workflow_run": _started_by(pushed, "mia", now + timedelta(seconds=20))}
        result = _trusted_stage(tmp_path, github, reopened)
    assert result.returncode == 1, result.stderr
    assert "accepted-by" not in result.outputs
    check = state.check_runs[-1]
    assert (check["head_sha"], check["conclusion"]) == ("f2" * 20, "failure")
    assert "ragproof:accepted" not in check["output"]["summary"]
    assert md_escape(f"The label {LABEL} by mia does not accept this commit") in _ours(state, 8)[0]["body"]
