"""Required checks mean something, and events that carry danger are refused (issue 11).

``ragproof action`` as a subprocess against the GitHub API test server: review concludes
``action_required``; a maintainer's accept label turns review or block into a success naming
them, anyone else's is ignored with a note; ``pull_request_target`` is refused; a dispatch for a
fork's pull request runs no code; a checkout that is not the pull request's head refuses; a
``workflow_run`` from another workflow file refuses; forged scores are re-scored.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import test_cli_action as base
from github_helpers import ActionRun, pull_request_event
from servers.github_server import GitHubServer, GitHubState, user
from test_cli_action import MARKER, MERGE_BASE, _fork_world, _ours, _pr, _project, _trusted_stage, checkout

from gate.github.flow import NO_BASELINE_CHECK
from gate.github.plan import checkout_head
from gate.report.escape import md_escape

pytestmark = pytest.mark.slow

runs = base.runs
state = base.state
server = base.server

LABEL = "ragproof:accept"
WORSE = 14
PROBE = "python -c \"import pathlib; pathlib.Path('installed.txt').write_text('ran')\""


# -- review and acceptance ------------------------------------------------------------------


def test_review_conclusion_input(tmp_path: Path, server: GitHubServer) -> None:
    workspace = _project(tmp_path)
    (workspace / "ragproof.yaml").write_text((workspace / "ragproof.yaml").read_text() + "  margin: 0.05\n")
    result = _pr(tmp_path, server, inputs={"review-conclusion": "failure"})
    assert result.outputs["decision"] == "review"
    assert server.state.check_runs[0]["conclusion"] == "failure"
    again = _pr(tmp_path, server, inputs={"review-conclusion": "neutral"})
    assert again.outputs["decision"] == "review"
    assert server.state.check_runs[1]["conclusion"] == "neutral"


def _labeled(label: str, sender: str) -> dict[str, Any]:
    """The fields of a ``pull_request`` event with ``action: labeled`` (GitHub's webhook shape)."""
    return {"action": "labeled", "label": {"name": label, "color": "0e8a16"}, "sender": user(sender)}


def test_a_maintainers_accept_label_turns_block_into_success(tmp_path: Path, server: GitHubServer) -> None:
    server.state.roles["mia"] = "maintain"
    server.state.label(7, "unrelated", "rex")
    server.state.label(7, LABEL, "mia")
    result = _pr(tmp_path, server, misses=WORSE, event_fields=_labeled(LABEL, "mia"))
    assert result.returncode == 0, result.stderr
    assert result.outputs["decision"] == "block"  # the gate's finding is kept
    assert result.outputs["accepted-by"] == "mia"
    (check,) = server.state.check_runs
    assert check["conclusion"] == "success"
    assert check["output"]["title"].startswith("✅ Accepted by mia · ❌ Blocked: ")
    body = _ours(server.state)[0]["body"]
    assert md_escape(f"Accepted by mia (maintain permission) with the label {LABEL}.") in body
    asked = [r["path"] for r in server.state.requests if "/collaborators/" in r["path"]]
    assert asked == ["/repos/acme/rag/collaborators/mia/permission"]
    # the acceptance is recorded for this commit, on the comment's second line
    head = server.state.pulls[7]["head"]["sha"]
    assert body.splitlines()[:2] == [MARKER, f"<!-- ragproof:accepted sha={head} by=mia -->"]


def test_an_acceptance_holds_for_its_commit_only(tmp_path: Path, server: GitHubServer) -> None:
    """Accepted on commit A; a re-run of A keeps it; a push of B is a fresh look; B needs the label again."""
    server.state.roles["mia"] = "write"
    server.state.label(7, LABEL, "mia")
    accepted = _pr(tmp_path, server, misses=WORSE, event_fields=_labeled(LABEL, "mia"))
    assert accepted.outputs["accepted-by"] == "mia"
    first_head = server.state.pulls[7]["head"]["sha"]
    # the same commit again (a synchronize re-run, another label): the record keeps it accepted
    before = len(server.state.requests)
    again = _pr(tmp_path, server, misses=WORSE, same_commit=True, event_fields={"action": "reopened"})
    assert server.state.pulls[7]["head"]["sha"] == first_head
    assert again.returncode == 0, again.stderr
    assert again.outputs["accepted-by"] == "mia"
    # the comments were listed once in that run (for the record, then reused to update it)
    listed = [
        (r["path"], str(r["query"]))
        for r in server.state.requests[before:]
        if r["method"] == "GET" and r["path"] == "/repos/acme/rag/issues/7/comments"
    ]
    assert listed and len(listed) == len(set(listed))
    assert [c["conclusion"] for c in server.state.check_runs] == ["success", "success"]
    # a new commit: the label is still on the pull request, but it was given for commit A
    (tmp_path / "workspace" / "later.txt").write_text("a later push\n")
    pushed = _pr(tmp_path, server, misses=WORSE)  # action: synchronize, sender: whoever pushed
    assert server.state.pulls[7]["head"]["sha"] != first_head
    assert pushed.returncode == 1, pushed.stderr
    assert "accepted-by" not in pushed.outputs
    check = server.state.check_runs[-1]
    assert (check["head_sha"], check["conclusion"]) == (server.state.pulls[7]["head"]["sha"], "failure")
    body = _ours(server.state)[0]["body"]
    assert "ragproof:accepted" not in body
    note = f"The label {LABEL} by mia does not accept this commit: an acceptance holds for the commit"
    assert md_escape(note) in body
    assert f"::notice title=ragproof::{note}" in pushed.stdout
    # another user's label event does not carry mia's acceptance over either
    server.state.roles["rex"] = "write"
    labeled_other = _pr(tmp_path, server, misses=WORSE, same_commit=True, event_fields=_labeled("bug", "rex"))
    assert labeled_other.returncode == 1 and "accepted-by" not in labeled_other.outputs
    # mia applies it again: this commit is accepted
    server.state.label(7, LABEL, "mia", removed=True)
    server.state.label(7, LABEL, "mia")
    renewed = _pr(tmp_path, server, misses=WORSE, same_commit=True, event_fields=_labeled(LABEL, "mia"))
    assert renewed.returncode == 0, renewed.stderr
    assert renewed.outputs["accepted-by"] == "mia"


def test_a_label_applied_while_the_commit_passes_is_recorded_for_it(
    tmp_path: Path, server: GitHubServer
) -> None:
    """Labeled on a passing commit: nothing to accept yet, but the record is kept, so a later run
    of the same commit that blocks (here the pipeline's behaviour changes through the job's
    environment, not its code) is accepted."""
    server.state.roles["mia"] = "write"
    server.state.label(7, LABEL, "mia")
    passing = _pr(tmp_path, server, event_fields=_labeled(LABEL, "mia"))
    assert passing.returncode == 0 and passing.outputs["decision"] == "pass"
    assert "accepted-by" not in passing.outputs
    body = _ours(server.state)[0]["body"]
    head = server.state.pulls[7]["head"]["sha"]
    assert body.splitlines()[1] == f"<!-- ragproof:accepted sha={head} by=mia -->"
    assert "Accepted by" not in body  # no acceptance to state on a pass
    # a run of another event on the same passing commit keeps the record
    again = _pr(tmp_path, server, same_commit=True, event_fields={"action": "reopened"})
    assert again.outputs["decision"] == "pass"
    assert _ours(server.state)[0]["body"].splitlines()[1] == f"<!-- ragproof:accepted sha={head} by=mia -->"
    worse = _pr(tmp_path, server, misses=WORSE, same_commit=True, event_fields={"action": "reopened"})
    assert worse.returncode == 0, worse.stderr
    assert (worse.outputs["decision"], worse.outputs["accepted-by"]) == ("block", "mia")


def test_a_forged_record_of_an_acceptance_accepts_nothing(tmp_path: Path, server: GitHubServer) -> None:
    """The record counts only on the token's own sticky comment: not in another user's comment,
    nor in a bot's comment that quotes it below the first lines."""
    server.state.roles["mia"] = "maintain"
    server.state.label(7, LABEL, "mia")
    _project(tmp_path)
    head = checkout(tmp_path / "workspace")
    record = f"<!-- ragproof:accepted sha={head} by=mia -->"
    server.state.add_comment(7, f"{MARKER}\n{record}\n## ragproof: ✅ Passed", user("mallory"))
    result = _pr(tmp_path, server, misses=WORSE, same_commit=True)  # synchronize, sent by the author
    assert result.returncode == 1, result.stderr
    assert "accepted-by" not in result.outputs
    assert server.state.check_runs[-1]["conclusion"] == "failure"
    # the forged comment is left alone; ours is a new one, and it records nothing
    ours = [c for c in _ours(server.state) if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and "ragproof:accepted" not in ours[0]["body"]


def test_a_labeled_event_sent_by_someone_else_accepts_nothing(tmp_path: Path, server: GitHubServer) -> None:
    """The label's last applier is a maintainer, but this run was started by another user's event."""
    server.state.roles["mia"] = "admin"
    server.state.label(7, LABEL, "mia")
    result = _pr(tmp_path, server, misses=WORSE, event_fields=_labeled(LABEL, "mallory"))
    assert result.returncode == 1, result.stderr
    assert "accepted-by" not in result.outputs
    assert server.state.check_runs[0]["conclusion"] == "failure"


def test_a_label_by_a_reader_is_ignored_with_a_note(tmp_path: Path, server: GitHubServer) -> None:
    server.state.roles["mia"] = "admin"
    server.state.label(7, LABEL, "mia")
    server.state.label(7, LABEL, "mia", removed=True)
    server.state.roles["tom"] = "triage"
    server.state.label(7, LABEL, "tom")  # the last one to apply it: only triage
    result = _pr(tmp_path, server, misses=WORSE)
    assert result.returncode == 1, result.stderr
    assert "accepted-by" not in result.outputs
    assert server.state.check_runs[0]["conclusion"] == "failure"
    body = _ours(server.state)[0]["body"]
    assert md_escape(f"The label {LABEL} was applied by tom, whose permission is triage: ignored") in body
    assert "::notice title=ragproof::The label ragproof:accept was applied by tom" in result.stdout


def test_a_removed_label_accepts_nothing(tmp_path: Path, server: GitHubServer) -> None:
    server.state.roles["mia"] = "write"
    server.state.label(7, LABEL, "mia")
    server.state.label(7, LABEL, "mia", removed=True)
    result = _pr(tmp_path, server, misses=WORSE)
    assert result.returncode == 1
    assert server.state.check_runs[0]["conclusion"] == "failure"
    assert "Accepted by" not in _ours(server.state)[0]["body"]


def test_no_baseline_stays_neutral_and_says_why(tmp_path: Path, state: GitHubState) -> None:
    state.runs.clear()
    state.artifacts.clear()
    with GitHubServer(state) as github:
        result = _pr(tmp_path, github)
    assert result.returncode == 0, result.stderr
    assert state.check_runs[0]["conclusion"] == "neutral"
    assert md_escape(NO_BASELINE_CHECK) in _ours(state)[0]["body"]


# -- events ---------------------------------------------------------------------------------


def test_pull_request_target_is_refused_unless_allowed(tmp_path: Path, server: GitHubServer) -> None:
    result = _pr(tmp_path, server, event_name="pull_request_target", inputs={"install": PROBE})
    assert result.returncode == 64
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert line.startswith("ragproof: error: refusing to run on pull_request_target:")
    assert server.state.requests == []
    assert not (result.workspace / "installed.txt").exists()
    assert not (result.workspace / "seen-env.json").exists()
    allowed = _pr(
        tmp_path, server, event_name="pull_request_target", inputs={"allow-pull-request-target": "true"}
    )
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.outputs["decision"] == "pass"


def _dispatch(tmp_path: Path, server: GitHubServer, number: int, **inputs: str) -> ActionRun:
    event = {
        "inputs": {"pr-number": str(number)},
        "repository": {"full_name": "acme/rag", "default_branch": "main"},
    }
    return _pr(
        tmp_path,
        server,
        event_name="workflow_dispatch",
        event=event,
        inputs={"pr-number": str(number), "baseline-workflow": "pr-gate.yml", **inputs},
        sha=MERGE_BASE,
        ref="refs/heads/main",
        workflow_file="dispatch.yml",
    )


def test_dispatch_for_a_fork_pull_request_runs_no_code(
    tmp_path: Path, server: GitHubServer, runs: dict[str, bytes]
) -> None:
    workspace = _project(tmp_path)
    fork_head = base.checkout(workspace)
    server.state.add_commit(fork_head, [MERGE_BASE])
    server.state.add_pull(9, head_sha=fork_head, head_repo=("mallory/rag", 2002))
    result = _dispatch(tmp_path, server, 9, install=PROBE)
    assert result.returncode == 64
    assert "input pr-number: pull request #9 comes from mallory/rag, not this repository" in result.stderr
    assert not (workspace / "installed.txt").exists() and not (workspace / "seen-env.json").exists()
    assert server.state.check_runs == [] and server.state.comments.get(9, []) == []
    # Gating a run made elsewhere runs nothing, and is allowed.
    with zipfile.ZipFile(io.BytesIO(runs["worse"])) as archive:
        archive.extractall(workspace / "cand")
    compared = _dispatch(tmp_path, server, 9, mode="compare", candidate="cand")
    assert compared.returncode == 1, compared.stderr
    assert compared.outputs["decision"] == "block"
    assert not (workspace / "seen-env.json").exists()
    assert server.state.check_runs[0]["head_sha"] == fork_head


def test_a_checkout_that_is_not_the_pr_head_refuses(tmp_path: Path, server: GitHubServer) -> None:
    # The PR (and its event) say a1a1…; the workspace holds another commit.
    event = pull_request_event(head_sha="a1" * 20)
    result = _pr(tmp_path, server, event=event, move_head=False, inputs={"install": PROBE})
    assert result.returncode == 64
    head = checkout_head(result.workspace)
    assert head is not None
    assert (
        f"ragproof: error: the checkout is at {head[:12]}, not pull request #7's head commit a1a1a1a1a1a1"
        in (result.stderr)
    )
    assert not (result.workspace / "installed.txt").exists()
    assert not (result.workspace / "seen-env.json").exists()
    # The required check fails with the reason instead of staying pending.
    (check,) = server.state.check_runs
    assert (check["head_sha"], check["conclusion"]) == ("a1" * 20, "failure")
    assert f"the checkout is at {head[:12]}" in check["output"]["summary"]


def _workflow_run(tmp_path: Path, state: GitHubState, event: dict[str, Any], **inputs: str) -> ActionRun:
    with GitHubServer(state) as github:
        return _trusted_stage(tmp_path, github, event, **inputs)


def test_workflow_run_from_another_workflow_path_refuses(
    tmp_path: Path, state: GitHubState, runs: dict[str, bytes]
) -> None:
    event = _fork_world(state, runs, pr_head="f1" * 20)
    # A fork's evil.yml with the same `name:` as the candidate workflow triggered the gate.
    trigger = event["workflow_run"]
    trigger["path"] = ".github/workflows/evil.yml"
    result = _workflow_run(tmp_path, state, event)
    assert result.returncode == 1, result.stderr
    expected = (
        f"the triggering run {trigger['id']} comes from the workflow .github/workflows/evil.yml, "
        "not .github/workflows/fork-safe-candidate.yml"
    )
    assert f"::error title=ragproof::{expected}" in result.stdout
    (check,) = state.check_runs
    assert (check["head_sha"], check["conclusion"]) == ("f1" * 20, "failure")
    assert md_escape(expected) in _ours(state, 8)[0]["body"]
    candidate_id = state.artifacts[trigger["id"]][0]["id"]
    assert not any(r["path"].endswith(f"/artifacts/{candidate_id}/zip") for r in state.requests)
    # Named by an input, the same path is accepted.
    state.check_runs.clear()
    moved = _workflow_run(tmp_path, state, event, **{"candidate-workflow": ".github/workflows/evil.yml"})
    assert moved.outputs["decision"] == "block", moved.stderr


def _forged(worse: bytes, good: bytes) -> bytes:
    """The worse run's outputs with the baseline's scores and summary pasted in."""
    with zipfile.ZipFile(io.BytesIO(good)) as archive:
        good_rows = {json.loads(x)["case_id"]: json.loads(x) for x in archive.read("rows.jsonl").splitlines()}
        summary = archive.read("summary.json")
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(worse)) as source, zipfile.ZipFile(buffer, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name == "rows.jsonl":
                rows = [json.loads(x) for x in data.splitlines()]
                for row in rows:
                    row["metrics"] = good_rows[row["case_id"]]["metrics"]
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
            elif name == "summary.json":
                data = summary
            target.writestr(name, data)
    return buffer.getvalue()


def test_forged_scores_in_a_candidate_artifact_are_rescored(
    tmp_path: Path, state: GitHubState, runs: dict[str, bytes]
) -> None:
    event = _fork_world(state, runs, pr_head="f1" * 20)
    trigger = event["workflow_run"]["id"]
    forged = _forged(runs["worse"], runs["baseline"])
    state.blobs[state.artifacts[trigger][0]["id"]] = forged
    result = _workflow_run(tmp_path, state, event)
    assert result.returncode == 1, result.stderr
    assert result.outputs["decision"] == "block"  # as scored here from the retrieved chunks
    assert state.check_runs[0]["conclusion"] == "failure"
    assert not (result.workspace / "seen-env.json").exists()  # nothing of the PR ran


def test_in_the_fork_safe_pair_the_label_accepts_the_run_it_started(
    tmp_path: Path, state: GitHubState, runs: dict[str, bytes]
) -> None:
    """workflow_run: the stage-one run started by the labeler after the label accepts its commit;
    one started by the fork's author (a later push) or re-run by someone else does not."""
    from datetime import UTC, datetime, timedelta

    event = _fork_world(state, runs, pr_head="f1" * 20)
    state.roles["mia"] = "maintain"
    state.label(8, LABEL, "mia")
    trigger = event["workflow_run"]
    pushed = {**trigger, "actor": user("mallory"), "triggering_actor": user("mallory")}
    pushed["created_at"] = (datetime.now(UTC) + timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    by_author = _workflow_run(tmp_path, state, {**event, "workflow_run": pushed})
    assert by_author.returncode == 1, by_author.stderr
    assert state.check_runs[-1]["conclusion"] == "failure"
    assert md_escape(f"The label {LABEL} by mia does not accept this commit") in _ours(state, 8)[0]["body"]
    rerun = {**pushed, "actor": user("mallory"), "triggering_actor": user("mia")}
    assert _workflow_run(tmp_path, state, {**event, "workflow_run": rerun}).returncode == 1
    started = {**pushed, "actor": user("mia"), "triggering_actor": user("mia")}
    by_labeler = _workflow_run(tmp_path, state, {**event, "workflow_run": started})
    assert by_labeler.returncode == 0, by_labeler.stderr
    assert by_labeler.outputs["accepted-by"] == "mia"
    check = state.check_runs[-1]
    assert (check["head_sha"], check["conclusion"]) == ("f1" * 20, "success")
    # a run the labeler started before applying the label is not an acceptance
    earlier = {**started, "created_at": "2026-03-03T00:00:00Z"}
    state.label(8, LABEL, "mia", removed=True)
    state.label(8, LABEL, "mia")
    state.check_runs.clear()  # no record of the acceptance above either (it lives on the check run)
    assert _workflow_run(tmp_path, state, {**event, "workflow_run": earlier}).returncode == 1
