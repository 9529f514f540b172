"""The release workflow: schema and actionlint, the image it pushes is the one action.yml is pinned to."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
import yaml
from tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
PIN = ROOT / "scripts" / "pin-action-image.py"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=cwd)


def _image() -> str:
    return cast("str", yaml.safe_load(RELEASE.read_text(encoding="utf-8"))["env"]["IMAGE"])


def test_release_workflow_matches_the_schema_and_passes_actionlint() -> None:
    proc = _run(require_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(RELEASE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run(require_tool("actionlint"), "-no-color", str(RELEASE))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_release_builds_both_platforms_and_pushes_the_tagged_version() -> None:
    workflow = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    assert workflow[True] == {"push": {"tags": ["v[0-9]+.[0-9]+.[0-9]+"]}}  # YAML reads `on` as True
    build = next(s for s in workflow["jobs"]["image"]["steps"] if s.get("id") == "build")
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64" and build["with"]["push"] is True
    assert build["with"]["tags"] == "${{ env.IMAGE }}:${{ steps.version.outputs.version }}"
    assert workflow["jobs"]["image"]["permissions"] == {"contents": "read", "packages": "write"}
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:  # third-party actions pinned by commit
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]


def test_action_yml_and_the_release_workflow_agree_on_the_image(tmp_path: Path) -> None:
    image = _image()
    # the action's repository (as the example workflows use it) is the image's name on ghcr.io
    example = (ROOT / "examples" / "workflows" / "pr-gate.yml").read_text(encoding="utf-8")
    repository = re.search(r"uses: ([\w-]+/[\w-]+)@v", example)
    assert repository is not None and image == f"ghcr.io/{repository[1]}"
    action = (ROOT / "action.yml").read_text(encoding="utf-8")
    assert f"docker://{image}@sha256:" in action  # the comment over runs.image names it
    assert yaml.safe_load(action)["runs"] == {"using": "docker", "image": "Dockerfile"}

    pinned = tmp_path / "action.yml"
    pinned.write_text(action, encoding="utf-8")
    done = _run(sys.executable, str(PIN), str(pinned), f"docker://{image}@{DIGEST}")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(pinned.read_text())["runs"] == {
        "using": "docker",
        "image": f"docker://{image}@{DIGEST}",
    }
    changed = [line for line in pinned.read_text().splitlines() if line not in action.splitlines()]
    assert changed == [f"  image: docker://{image}@{DIGEST}"]
    proc = _run(require_tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(pinned))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "image",
    [
        "docker://ghcr.io/ragproof/ragproof:1.2.3",
        "ghcr.io/ragproof/ragproof@" + DIGEST,
        "docker://x@sha256:abc",
    ],
)
def test_pinning_refuses_anything_but_a_digest(tmp_path: Path, image: str) -> None:
    action = tmp_path / "action.yml"
    action.write_text((ROOT / "action.yml").read_text(encoding="utf-8"), encoding="utf-8")
    done = _run(sys.executable, str(PIN), str(action), image)
    assert done.returncode == 65
    assert done.stderr == (
        f"pin-action-image: {action}: expected docker://REGISTRY/NAME@sha256:<64 hex>, got {image!r}\n"
    )
    assert action.read_text() == (ROOT / "action.yml").read_text()
