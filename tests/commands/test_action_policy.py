"""The pull request cannot open its own gate (issue 11): policy, dataset, judge and store come
from trusted ground; review needs a human; dangerous events are refused.

Every test runs ``ragproof action`` as a subprocess against the GitHub API test server, with the
pull request checked out as a real git commit. The "worse" candidate (14 of 20 cases missed)
blocks under the baseline's policy; each attack edits what a pull request controls to try to
turn that into a pass.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import test_cli_action as base
import yaml
from servers.github_server import GitHubServer, GitHubState, pull_request_scenario, zip_directory
from servers.judge_server import JudgeServer, Step, reply, user_prompt
from test_cli_action import SECRETS, _ours, _pr, _project

from gate.report.escape import md_escape

pytestmark = pytest.mark.slow

# The action tests' fixtures: real runs of the fixture project, the scenario, its server.
runs = base.runs
state = base.state
server = base.server

WORSE = 14  # cases the worse candidate misses (case-00 .. case-13)


def _edit_config(workspace: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = workspace / "ragproof.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _edit_cases(workspace: Path, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    path = workspace / "cases.jsonl"
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(c) + "\n" for c in edit(cases)))


def _gate(data: dict[str, Any]) -> dict[str, Any]:
    return cast("dict[str, Any]", data.setdefault("gate", {}))


ATTACKS: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    "margin": (
        lambda ws: _edit_config(ws, lambda d: _gate(d).update(margin=1.0)),
        ["gate.margin: 0.02 → 1.0"],
    ),
    "min_pairs": (
        lambda ws: _edit_config(ws, lambda d: _gate(d).update(min_pairs=1000)),
        ["gate.min_pairs: 5 → 1000"],
    ),
    "include": (
        lambda ws: _edit_config(ws, lambda d: _gate(d).update(include=[])),
        ['gate.include: "all" → []'],
    ),
    "gate_false": (
        lambda ws: _edit_config(
            ws,
            lambda d: _gate(d).update(
                metrics={
                    "retrieval.recall_at_k": {"gate": False},
                    "retrieval.hit_rate_at_k": {"gate": False},
                }
            ),
        ),
        ["gate.metrics.retrieval.recall_at_k.gate: (unset) → false"],
    ),
    "run_metrics": (
        lambda ws: _edit_config(ws, lambda d: d["run"].update(metrics=["retrieval.mrr"])),
        ['run.metrics: ["retrieval.recall_at_k", "retrieval.hit_rate_at_k"] → ["retrieval.mrr"]'],
    ),
    "deleted_cases": (
        lambda ws: _edit_cases(ws, lambda cases: cases[WORSE:]),
        ["Dataset: 14 cases removed: case-00, case-01"],
    ),
    "edited_cases": (
        lambda ws: _edit_cases(
            ws,
            lambda cases: [
                {**c, "expected_source_ids": ["doc-unrelated"]} if i < WORSE else c
                for i, c in enumerate(cases)
            ],
        ),
        ["Dataset: 14 cases edited: case-00, case-01"],
    ),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_policy_bypass_in_the_pull_request_still_blocks_and_is_named(
    attack: str, tmp_path: Path, server: GitHubServer
) -> None:
    edit, named = ATTACKS[attack]
    edit(_project(tmp_path))
    result = _pr(tmp_path, server, misses=WORSE)
    assert result.returncode == 1, result.stderr
    assert result.outputs["decision"] == "block"  # the baseline's policy, on the baseline's cases
    assert result.outputs["policy-changed"] == "true"
    (comment,) = _ours(server.state)
    body = comment["body"]
    assert "## ragproof: ❌ Blocked" in body
    assert md_escape("This pull request changes the gate's policy or dataset.") in body
    for text in named:
        assert md_escape(text) in body, (text, body)
    (check,) = server.state.check_runs
    assert check["conclusion"] == "failure"
    # The candidate ran on all 20 of the baseline's cases, whatever the PR's dataset says.
    rows = (result.workspace / ".ragproof" / "run" / "rows.jsonl").read_text().splitlines()
    assert len(rows) == 20
    assert "::warning title=ragproof%3A policy change::" in result.stdout


def test_a_policy_change_on_an_equal_pipeline_is_review_not_pass(
    tmp_path: Path, server: GitHubServer
) -> None:
    _edit_config(_project(tmp_path), lambda d: _gate(d).update(margin=0.5, seed=7))
    result = _pr(tmp_path, server)  # the same pipeline as the baseline: a pass, but for the change
    assert result.returncode == 1, result.stderr  # the check is action_required: a red step
    assert result.outputs["decision"] == "review"
    body = _ours(server.state)[0]["body"]
    assert "## ragproof: ⚠️ Needs review" in body
    assert md_escape("ragproof.yaml changes: gate.margin: 0.02 → 0.5; gate.seed: 0 → 7.") in body
    assert server.state.check_runs[0]["conclusion"] == "action_required"


def test_the_variables_the_pipeline_may_see_are_the_baselines_choice(
    tmp_path: Path, server: GitHubServer
) -> None:
    """A secret the workflow passes in env: (for another step) stays out when only the PR lists it."""
    workspace = _project(tmp_path)
    _edit_config(workspace, lambda d: d["adapter"]["env_passthrough"].append("DEPLOY_PASSWORD"))
    result = _pr(tmp_path, server, extra_env={"DEPLOY_PASSWORD": "hunter2"})
    assert result.returncode == 1, result.stderr  # review: the check is action_required
    seen = json.loads((workspace / "seen-env.json").read_text())
    assert seen["DEPLOY_PASSWORD"] is False
    assert result.outputs["decision"] == "review"  # a pass, but the pull request changed the policy
    body = _ours(server.state)[0]["body"]
    assert (
        md_escape(
            "adapter.env_passthrough adds DEPLOY_PASSWORD, which the baseline's configuration does not pass "
            "to the pipeline: ignored until merged."
        )
        in body
    )
    # the names the baseline lists still reach the pipeline (the fixture's own PIPELINE_* variables)
    rows = [json.loads(x) for x in (workspace / ".ragproof" / "run" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and {r["status"] for r in rows} == {"ok"}


def test_an_unchanged_policy_passes(tmp_path: Path, server: GitHubServer) -> None:
    _project(tmp_path)
    result = _pr(tmp_path, server)
    assert result.outputs["decision"] == "pass" and result.outputs["policy-changed"] == "false"
    assert "changes the gate's policy" not in _ours(server.state)[0]["body"]


def test_a_committed_store_is_never_opened(tmp_path: Path, server: GitHubServer) -> None:
    workspace = _project(tmp_path)
    forged = b"SQLite format 3\x00 forged judge verdicts, and not a database at all"
    (workspace / ".ragproof").mkdir()
    (workspace / ".ragproof" / "store.sqlite").write_bytes(forged)
    _edit_config(workspace, lambda d: d.setdefault("judge", {}).update(cache_path="forged-cache.sqlite"))
    (workspace / "forged-cache.sqlite").write_bytes(forged)
    result = _pr(tmp_path, server, misses=WORSE)
    assert result.returncode == 1, result.stderr
    assert result.outputs["decision"] == "block"
    # Opened by sqlite it would have been refused ("file is not a database") or rewritten.
    assert (workspace / ".ragproof" / "store.sqlite").read_bytes() == forged
    assert (workspace / "forged-cache.sqlite").read_bytes() == forged
    assert not (workspace / ".ragproof" / "logs").exists()  # the store's directory is elsewhere


def test_a_store_dir_holding_checkout_files_is_refused(tmp_path: Path, server: GitHubServer) -> None:
    workspace = _project(tmp_path)
    (workspace / "cache").mkdir()
    (workspace / "cache" / "store.sqlite").write_bytes(b"committed by the pull request")
    result = _pr(tmp_path, server, inputs={"store-dir": "cache"})
    assert result.returncode == 64
    assert "ragproof: error: input store-dir (cache): holds cache/store.sqlite, a file of the checkout" in (
        result.stderr
    )
    assert not (workspace / "seen-env.json").exists()  # nothing ran


# -- the judge: endpoint, key variable and passthrough are never the pull request's ----------


def _relevant_everything(body: dict[str, Any]) -> Step:
    ids = sorted(set(re.findall(r"doc-[\w-]+", user_prompt(body))))
    return reply({"verdicts": [{"chunk_id": i, "relevant": True} for i in ids]})


@pytest.fixture(scope="module")
def judges() -> Iterator[dict[str, JudgeServer]]:
    with JudgeServer(_relevant_everything) as honest, JudgeServer(_relevant_everything) as evil:
        yield {"honest": honest, "evil": evil}


JUDGED = "judge.context_relevance"


@pytest.fixture(scope="module")
def judged_baseline(tmp_path_factory: pytest.TempPathFactory, judges: dict[str, JudgeServer]) -> bytes:
    """A real baseline run whose config uses the honest judge (key in OPENAI_API_KEY)."""
    root = tmp_path_factory.mktemp("judged")
    run = base._real_run(
        root,
        2,
        edit=lambda ws: _edit_config(ws, lambda d: _judged(d, judges["honest"].openai_url)),
        env={"OPENAI_API_KEY": SECRETS["OPENAI_API_KEY"]},
    )
    judges["honest"].reset()
    return zip_directory(run)


def _judged(data: dict[str, Any], base_url: str) -> None:
    data["run"]["metrics"] = ["retrieval.recall_at_k", "retrieval.hit_rate_at_k", JUDGED]
    data["judge"] = {"model": "judge-test-model", "base_url": base_url, "timeout_s": 5.0, "retries": 0}


def test_the_judge_key_reaches_only_the_baselines_judge(
    tmp_path: Path, judged_baseline: bytes, judges: dict[str, JudgeServer]
) -> None:
    honest, evil = judges["honest"], judges["evil"]
    world = GitHubState(page_size=2)
    pull_request_scenario(world, judged_baseline)
    workspace = _project(tmp_path)

    def hostile(data: dict[str, Any]) -> None:
        _judged(data, evil.openai_url)
        data["judge"]["api_key_env"] = "NOT_THE_KEY"
        # the fixture's own variables stay listed: in the action only listed names reach the pipeline
        data["adapter"]["env_passthrough"] = [
            *data["adapter"].get("env_passthrough", []),
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
        ]

    _edit_config(workspace, hostile)
    honest.reset()
    with GitHubServer(world) as github:
        result = _pr(tmp_path, github, misses=WORSE, extra_env={"NOT_THE_KEY": "nothing"})
    assert result.returncode == 1, result.stderr
    assert result.outputs["decision"] == "block"
    assert evil.count == 0
    assert honest.count == 20  # one context_relevance call per case, none cached from the checkout
    assert {h.get("Authorization") for h in honest.headers} == {f"Bearer {SECRETS['OPENAI_API_KEY']}"}
    seen = json.loads((workspace / "seen-env.json").read_text())
    assert seen["OPENAI_API_KEY"] is False  # env_passthrough cannot name the judge key
    body = _ours(world)[0]["body"]
    for text in (
        f'judge.base_url: "{honest.openai_url}" → "{evil.openai_url}"',
        'judge.api_key_env: "OPENAI_API_KEY" → "NOT_THE_KEY"',
        "adapter.env_passthrough names OPENAI_API_KEY, a credential withheld from the pipeline: ignored.",
        "adapter.env_passthrough names GITHUB_TOKEN, a credential withheld from the pipeline: ignored.",
    ):
        assert md_escape(text) in body, text
    rows = [json.loads(x) for x in (workspace / ".ragproof" / "run" / "rows.jsonl").read_text().splitlines()]
    assert {r["metrics"][JUDGED]["status"] for r in rows} == {"scored"}


def _without_policy(baseline: bytes) -> bytes:
    """The baseline as an older ragproof wrote it: no dataset.jsonl, no run.json config."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(baseline)) as source, zipfile.ZipFile(buffer, "w") as target:
        for name in source.namelist():
            if name == "dataset.jsonl":
                continue
            data = source.read(name)
            if name == "run.json":
                meta = json.loads(data)
                del meta["config"]
                data = json.dumps(meta).encode()
            target.writestr(name, data)
    return buffer.getvalue()


def test_a_baseline_without_a_recorded_policy_needs_review(runs: dict[str, bytes], tmp_path: Path) -> None:
    world = GitHubState(page_size=2)
    pull_request_scenario(world, _without_policy(runs["baseline"]))
    with GitHubServer(world) as github:
        result = _pr(tmp_path, github)
    assert result.returncode == 1, result.stderr  # review: the check is action_required
    assert result.outputs["decision"] == "review" and result.outputs["policy-changed"] == "true"
    body = _ours(world)[0]["body"]
    assert md_escape("records no configuration or dataset (written by an older ragproof)") in body
    assert world.check_runs[0]["conclusion"] == "action_required"
