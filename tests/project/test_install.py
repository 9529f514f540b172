"""The documented install line resolves to this project from a fresh virtual environment.

The package index is simulated by a local directory (``--no-index --find-links``; no network):
it holds this project's wheel, built from a copy of the source tree, and a stand-in for what
the public index really serves under the name ``ragproof`` (an unrelated 1.0.0 command-line
tool with no ``validate`` command). The venv sees the already installed site packages
(``--system-site-packages``), so the ``[haystack]`` extra is satisfied offline; the project
itself must come from the wheel.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from frameworks import require

import gate

ROOT = Path(__file__).resolve().parents[2]

# What the public index serves as "ragproof": another author's typer CLI, version 1.0.0.
DECOY_PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "ragproof"
version = "1.0.0"

[project.scripts]
ragproof = "ragproof_other:main"
"""
DECOY_MODULE = """\
import sys

def main():
    print("Error: No such command " + repr(sys.argv[1] if len(sys.argv) > 1 else ""), file=sys.stderr)
    return 2
"""


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_NO_INPUT"] = "1"
    return env


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_clean_env())


def _wheel(source: Path, wheelhouse: Path) -> None:
    done = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(wheelhouse), str(source)],
        cwd=source,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def documented_requirement() -> str:
    """The requirement of the Haystack install line in docs/pipelines.md's quick start."""
    text = (ROOT / "docs" / "pipelines.md").read_text(encoding="utf-8")
    (found,) = re.findall(r"^python -m pip install '([^' ]*\[haystack\])'", text, re.M)
    return cast("str", found)


@pytest.mark.slow
def test_the_documented_haystack_install_line_gives_a_working_ragproof(tmp_path: Path) -> None:
    require("haystack")
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".ragproof", "build", "dist", "*.egg-info", "__pycache__", "tests"
        ),
    )
    wheelhouse = tmp_path / "index"
    _wheel(source, wheelhouse)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "pyproject.toml").write_text(DECOY_PYPROJECT)
    (decoy / "ragproof_other.py").write_text(DECOY_MODULE)
    _wheel(decoy, wheelhouse)

    venv = tmp_path / "venv"
    assert (
        _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], cwd=tmp_path).returncode
        == 0
    )
    requirement = documented_requirement()
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--no-index",
        "--find-links",
        str(wheelhouse),
    ]
    # The site packages hold this project's development install (the same name and version),
    # which would satisfy the requirement as nothing would in a fresh venv: the first call
    # installs what the requirement resolves to into the venv regardless (its dependencies
    # come from the site packages, where a registry would serve them), the second checks that
    # the requirement, extra included, is then satisfied by what is installed.
    installed = _run([*pip, "--ignore-installed", "--no-deps", requirement], cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    satisfied = _run([*pip, requirement], cwd=tmp_path)
    assert satisfied.returncode == 0, satisfied.stdout + satisfied.stderr
    assert "Successfully installed" not in satisfied.stdout, satisfied.stdout
    version = _run([str(venv / "bin" / "ragproof"), "--version"], cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, f"ragproof {gate.__version__}\n"), version.stderr
    where = _run([str(venv / "bin" / "python"), "-c", "import gate; print(gate.__file__)"], cwd=tmp_path)
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's copy, not a checkout

    project = tmp_path / "project"
    project.mkdir()
    ragproof = str(venv / "bin" / "ragproof")
    init = _run([ragproof, "init", "--framework", "haystack"], cwd=project)
    assert init.returncode == 0, init.stderr
    assert (project / "requirements.txt").read_text().splitlines()[-1] == requirement
    valid = _run([ragproof, "validate", "--smoke", "2"], cwd=project)
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("ok: ragproof.yaml: 4 cases (dataset sha256 ")
    assert "adapter haystack (retrieve and answer)," in valid.stdout
