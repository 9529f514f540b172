"""action.yml, the Dockerfile and the example workflows: schemas, linters, consistency."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from tools import require_tool

from gate.github.context import INPUT_FIELDS

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "examples" / "workflows").glob("*.yml"))
ISSUE_INPUTS = {
    "config", "github-token", "mode", "candidate", "baseline-artifact", "baseline-workflow",
    "pr-number", "comment", "check-name", "fail-on", "out", "allow-mixed-judges", "install",
    # issue 11: trust
    "review-conclusion", "accept-label", "comment-author", "allow-pull-request-target",
    "candidate-workflow", "store-dir", "judge-provider", "judge-model", "judge-base-url",
    "judge-api-key-env",
}  # fmt: skip
ISSUE_OUTPUTS = {
    "decision", "run-dir", "report", "comment-url", "baseline-run-id", "baseline-sha",
    "accepted-by", "policy-changed",
}  # fmt: skip


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_action_yml_matches_the_github_actions_schema() -> None:
    proc = _run(require_tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", "action.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_example_workflows_match_the_github_workflows_schema() -> None:
    assert {p.name for p in WORKFLOWS} >= {
        "pr-gate.yml",
        "dispatch.yml",
        "sharded.yml",
        "fork-safe-candidate.yml",
        "fork-safe-gate.yml",
        "calibrate.yml",
    }
    proc = _run(
        require_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_example_workflows_pass_actionlint() -> None:
    proc = _run(require_tool("actionlint"), "-no-color", *map(str, WORKFLOWS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_passes_hadolint() -> None:
    proc = _run(require_tool("hadolint"), "Dockerfile")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dockerfile_contract() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.12-slim$", text, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.M)
    assert 'ENTRYPOINT ["ragproof", "action"]' in text
    assert not re.search(r"^USER\b", text, re.M)  # Docker actions run as the image's default user
    installs = [
        line for line in text.splitlines() if "pip install" in line and not line.lstrip().startswith("#")
    ]
    assert installs and all("--no-cache-dir" in line for line in installs)


def test_action_yml_documents_every_input_and_output() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"] == {"using": "docker", "image": "Dockerfile"}
    assert action["branding"]["icon"] and action["branding"]["color"]
    inputs, outputs = action["inputs"], action["outputs"]
    assert set(inputs) == ISSUE_INPUTS
    # every declared input is read, and vice versa (the token is read apart, to be masked first)
    assert set(inputs) == set(INPUT_FIELDS) | {"github-token"}
    assert set(outputs) == ISSUE_OUTPUTS
    for name, spec in {**inputs, **outputs}.items():
        assert len(spec["description"]) > 20, name
    assert inputs["github-token"]["default"] == "${{ github.token }}"
    assert inputs["config"]["default"] == "ragproof.yaml"
    assert inputs["baseline-artifact"]["default"] == "ragproof-run"
    assert inputs["review-conclusion"]["default"] == "action_required"
    assert inputs["accept-label"]["default"] == "ragproof:accept"
    assert inputs["allow-pull-request-target"]["default"] == "false"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflows_pin_actions_and_grant_least_privilege(path: Path) -> None:
    workflow = yaml.safe_load(path.read_text())
    assert workflow["permissions"] == {"contents": "read"}
    allowed = {"contents": "read", "actions": "read", "pull-requests": "write", "checks": "write"}
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} has no permissions block"
        for scope, level in job["permissions"].items():
            assert allowed.get(scope) == level, f"{path.name}: {name} grants {scope}: {level}"
        for step in job.get("steps", []):
            uses = step.get("uses")
            path_of_upload = (
                str(step.get("with", {}).get("path", "")) if "upload-artifact" in str(uses) else ""
            )
            if "run-dir" in path_of_upload or path_of_upload.startswith("."):
                # upload-artifact >= 4.4 leaves out hidden files; the default out is .ragproof/run
                assert step["with"].get("include-hidden-files") is True, f"{path.name}: {step}"
            if uses and uses.startswith("actions/"):
                assert re.fullmatch(r"actions/[\w-]+@[0-9a-f]{40}", uses), (
                    f"{path.name}: {uses} is not pinned"
                )
            elif uses:
                assert re.fullmatch(r"[\w-]+/[\w-]+@v\d+\.\d+\.\d+", uses), (
                    f"{path.name}: {uses} is not pinned"
                )


def test_readme_workflow_is_valid_and_matches_the_example(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("<!-- section:action:start -->", 1)[1].split("<!-- section:action:end -->", 1)[0]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    workflow = tmp_path / "ragproof.yml"
    workflow.write_text(block)
    proc = _run(
        require_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run(require_tool("actionlint"), "-no-color", str(workflow))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The copy-paste workflow is the example, to the letter.
    example = yaml.safe_load((ROOT / "examples" / "workflows" / "pr-gate.yml").read_text())
    assert yaml.safe_load(block) == example
    for link in re.findall(r"\]\(((?:examples|docs)/[^)#]+)\)", section):
        assert (ROOT / link).exists(), link


def _table_names(markdown: str, heading: str) -> set[str]:
    section = markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w-]+)` \|", section, re.M))


def test_docs_list_exactly_the_inputs_and_outputs_of_action_yml() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    docs = (ROOT / "docs" / "action.md").read_text()
    assert _table_names(docs, "Inputs") == set(action["inputs"])
    assert _table_names(docs, "Outputs") == set(action["outputs"])


@pytest.mark.parametrize("name", ["pr-gate.yml", "fork-safe-candidate.yml", "sharded.yml"])
def test_pull_request_runs_check_out_the_head_commit(name: str) -> None:
    # The baseline is the run at the merge base: evaluating GitHub's merge commit instead would
    # count the default branch's newer commits as the pull request's change.
    workflow = yaml.safe_load((ROOT / "examples" / "workflows" / name).read_text())
    for job in workflow["jobs"].values():
        (checkout,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
        assert checkout["with"]["ref"] == "${{ github.event.pull_request.head.sha || github.sha }}"


def test_the_fork_safe_gate_follows_the_candidate_workflow() -> None:
    def load(name: str) -> dict[Any, Any]:
        return cast("dict[Any, Any]", yaml.safe_load((ROOT / "examples" / "workflows" / name).read_text()))

    candidate, gate = load("fork-safe-candidate.yml"), load("fork-safe-gate.yml")
    # PyYAML reads the key `on` as True.
    assert gate[True]["workflow_run"]["workflows"] == [candidate["name"]]
    (upload,) = [s for s in candidate["jobs"]["run"]["steps"] if "upload-artifact" in str(s.get("uses"))]
    (action,) = [s for s in gate["jobs"]["gate"]["steps"] if str(s.get("uses", "")).startswith("ragproof/")]
    assert upload["with"]["name"] == action["with"]["baseline-artifact"]
    # Stage 1 runs the pull request's code: no token, nothing posted, read-only permissions.
    (run,) = [s for s in candidate["jobs"]["run"]["steps"] if str(s.get("uses", "")).startswith("ragproof/")]
    assert (run["with"]["mode"], run["with"]["github-token"]) == ("run", "")
    assert candidate["jobs"]["run"]["permissions"] == {"contents": "read"} and "env" not in run
