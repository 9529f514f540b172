"""The action's image, really built with podman and run the way the GitHub runner runs it.

scripts/container-smoke.sh does the work (base image from Debian's packages, build, the hostile
pipeline as a python, command and http-served pipeline with a hostile install command and secrets
in the environment, the symlinked-out-parent attack with a setsid daemon, a push run and a
pull_request run against the GitHub API test server). Without podman the test is
skipped, unless RAGPROOF_REQUIRE_CONTAINER=1 (CI), where a missing podman is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tools import missing_message

pytestmark = pytest.mark.container

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "container-smoke.sh"
TOOLS = ("podman", "buildah", "runc", "mmdebstrap")


@pytest.mark.timeout(1200)
def test_image_builds_and_gates_a_pull_request() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        reason = "; ".join(missing_message(tool) for tool in missing)
        if os.environ.get("RAGPROOF_REQUIRE_CONTAINER") == "1":
            pytest.fail(f"RAGPROOF_REQUIRE_CONTAINER=1 but {reason}")
        pytest.skip(reason)
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1150)
    log = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, log
    assert "container smoke: comment https://github.example/acme/rag/pull/7#issuecomment-" in proc.stdout, log
    for kind in ("python", "command", "http"):
        # 1 install probe + 2 cases x (retrieve, answer); each found no secret and wrote nothing
        line = f"container smoke: hostile {kind} pipeline: 5 probes, nothing found, nothing obeyed"
        assert line in proc.stdout, log
    assert proc.stdout.rstrip().endswith("container smoke: ok"), log
    # `.ragproof -> /opt/pipeline` refused before any untrusted code ran; the daemon an install
    # command left (double fork + setsid) ended before the run was written
    assert (
        "container smoke: .ragproof -> /opt/pipeline refused before any untrusted code ran" in proc.stdout
    ), log
    assert "container smoke: the setsid daemon was ended before the run was written" in proc.stdout, log
