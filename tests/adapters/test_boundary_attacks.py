"""Attacks on what root writes: a pull request that points the run's directory at one the pipeline
user owns, and a pipeline that leaves a daemon behind (double fork + ``setsid``) to swap the
staging directory while root writes the run.

``ragproof action`` runs as root here, as in the image, with untrusted code as another uid
(tests/pipelines/swapper.py: standard library only, run by an interpreter that uid can run).
The container smoke test runs the same attack in the real image.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from github_helpers import REPO_ROOT
from test_security_attacks import _install_read_only, _push_action_env, _runs_as_sandbox_user

from gate.boundary.sandbox import processes_of

SWAPPER = REPO_ROOT / "tests" / "pipelines" / "swapper.py"
# A uid of its own: the action ends every process of the pipeline user, so no other test's.
UID = 64117
PYTHON = next(
    (
        p
        for p in ("/usr/bin/python3", sys.executable)
        if os.path.exists(p) and _runs_as_sandbox_user(p, "import json")
    ),
    None,
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or PYTHON is None,
        reason=f"root, and a Python uid {UID} can run, are needed to run untrusted code as another user",
    ),
]
FILE_COMMANDS = {
    "GITHUB_ENV": "set_env",
    "GITHUB_OUTPUT": "set_output",
    "GITHUB_STEP_SUMMARY": "step_summary",
}
ORIGINAL = "# a module of ragproof's that the action has not imported yet\n"


@dataclass
class Scene:
    base: Path
    workspace: Path
    pipeline: Path  # a directory the pipeline user owns (the image's /opt/pipeline)
    victim: Path  # a file only root may write
    file_commands: Path

    @property
    def pid_file(self) -> Path:
        return self.pipeline / "daemon.pid"

    @property
    def marker(self) -> Path:
        return self.pipeline / "saw-artifact"


@pytest.fixture
def scene() -> Iterator[Scene]:
    base = Path(tempfile.mkdtemp(prefix="ragproof-boundary-"))
    base.chmod(0o755)
    _install_read_only(base / "code")
    pipeline = base / "pipeline"
    pipeline.mkdir(mode=0o755)
    os.chown(pipeline, UID, UID)
    workspace = base / "workspace"
    file_commands = base / "file_commands"
    for directory in (workspace, file_commands, base / "runner"):
        directory.mkdir(mode=0o755)
    for name in FILE_COMMANDS.values():
        (file_commands / name).write_text("")
        (file_commands / name).chmod(0o644)
    victim = base / "code" / "gate" / "later.py"
    victim.write_text(ORIGINAL)
    victim.chmod(0o644)
    shutil.copy(SWAPPER, workspace / "swapper.py")
    cases = [
        {"id": f"case-{i}", "question": f"fact {i}?", "expected_source_ids": ["doc-1"]} for i in range(1, 4)
    ]
    (workspace / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (workspace / "ragproof.yaml").write_text(
        "version: 1\ndataset: cases.jsonl\n"
        f"adapter:\n  type: command\n  command: [{PYTHON}, swapper.py, stdio]\n  timeout_s: 60\n  concurrency: 1\n"
        "run:\n  k: 1\n  metrics: [retrieval.hit_rate_at_k]\n"
    )
    scene = Scene(base, workspace, pipeline, victim, file_commands)
    yield scene
    with contextlib.suppress(OSError, ValueError):  # the daemon this test started, if it still runs
        os.kill(int(scene.pid_file.read_text()), signal.SIGKILL)
    shutil.rmtree(base, ignore_errors=True)


def _action(scene: Scene, settings: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    (scene.workspace / "settings.json").write_text(json.dumps(settings))
    env = {
        **_push_action_env(
            scene.base / "runner",
            scene.workspace,
            scene.base / "code",
            {name: scene.file_commands / file for name, file in FILE_COMMANDS.items()},
            run_id="9002",
            install=f"{PYTHON} swapper.py daemon settings.json",
        ),
        "RAGPROOF_PIPELINE_UID": str(UID),
    }
    return subprocess.run(
        [sys.executable, "-m", "gate", "action"],
        cwd=scene.workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _settings(scene: Scene, watch: Path | None) -> dict[str, Any]:
    return {
        "watch": str(watch) if watch else None,
        "artifact": str(scene.workspace / ".ragproof" / "run" / "run.json"),
        "marker": str(scene.marker),
        "pid_file": str(scene.pid_file),
        "log_target": str(scene.victim),
        "summary_target": str(scene.file_commands / "set_env"),
        "seconds": 60,
    }


def test_a_run_directory_linked_into_the_pipeline_users_directory_is_refused(scene: Scene) -> None:
    """`.ragproof -> /opt/pipeline` committed by the pull request, a daemon left by the install.

    Unprotected, root creates the staging directory inside the pipeline's directory, the daemon
    swaps it and root copies the pipeline's log over a module of ragproof (and writes the
    summary into GITHUB_ENV). Now: refused before any untrusted code runs, one line, exit 64.
    """
    os.symlink(scene.pipeline, scene.workspace / ".ragproof")
    proc = _action(scene, _settings(scene, scene.pipeline))
    assert scene.victim.read_text() == ORIGINAL
    assert (scene.file_commands / "set_env").read_text() == ""
    assert proc.returncode == 64, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"ragproof: error: {scene.workspace / '.ragproof'}: a symbolic link; "), lines
    assert not scene.pid_file.exists()  # the install command never ran
    assert os.listdir(scene.pipeline) == []


def test_a_daemon_that_left_its_session_is_ended_before_the_run_is_written(scene: Scene) -> None:
    """The run's directory is the workspace's own; the daemon outlives the install's session.

    Every process of the pipeline user is ended before root writes the artifact: the daemon
    never sees the finished run, and none of that user's processes is left after the step.
    """
    proc = _action(scene, _settings(scene, None))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert scene.pid_file.exists()  # the daemon did start
    assert processes_of(UID) == []
    assert not scene.marker.exists()
    assert (scene.workspace / ".ragproof" / "run" / "run.json").is_file()
    log = (scene.workspace / ".ragproof" / "run" / "adapter-stderr.log").read_text()
    assert "PWNED" in log  # the pipeline's log is copied, into the run, as data
    assert scene.victim.read_text() == ORIGINAL
