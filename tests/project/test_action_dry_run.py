"""docs/action.md's dry run on a laptop: the documented commands, run as written, give the comment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the documented commands end to end: two runs and a comparison

ROOT = Path(__file__).resolve().parents[2]


def documented_commands() -> str:
    text = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    section = text.split("**A dry run on your laptop.**", 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def test_the_documented_dry_run_writes_the_comment_a_pull_request_would_get(tmp_path: Path) -> None:
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "ragproof").write_text(f'#!/bin/sh\nexec {sys.executable} -m gate "$@"\n')
    (shims / "ragproof").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    repo = tmp_path / "repo"
    repo.mkdir()

    def sh(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    sh("git", "init", "-q", "-b", "main")
    sh("ragproof", "init", "--framework", "python")
    sh("git", "add", "-A")
    sh("git", "commit", "-q", "-m", "ragproof init")
    sh("git", "checkout", "-q", "-b", "better-answers")
    pipeline = repo / "pipeline.py"
    pipeline.write_text(pipeline.read_text().replace('"I don\'t know."}', '"Every case of cases.jsonl."}'))

    done = subprocess.run(
        ["bash", "-c", documented_commands()], cwd=repo, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    comment = (repo / "comment.md").read_text(encoding="utf-8")
    assert comment.startswith("## ragproof: ")
    assert "4 paired cases" in comment  # the starter set: too few to gate, said in the comment
    # the baseline ran main's pipeline, the candidate the working tree's
    for run, answer in (("base", "I don't know."), ("candidate", "Every case of cases.jsonl.")):
        rows = (repo / ".ragproof" / run / "rows.jsonl").read_text(encoding="utf-8")
        assert rows.count(f'"text":"{answer}"') == 4, run
    assert not (repo / ".ragproof" / "base-tree").exists()  # the worktree is gone
    # only the edit and the comment: the runs stay in the ignored .ragproof/
    assert sh("git", "status", "--porcelain").stdout == " M pipeline.py\n?? comment.md\n"
