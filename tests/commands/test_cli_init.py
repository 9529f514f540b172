"""``ragproof init``: the files it writes pass validate and run as generated, with the stub of the framework found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from frameworks import require
from run_helpers import ragproof

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "gate" / "commands" / "init_files"
# framework -> the package that makes it "installed"
PACKAGES = {"langchain": "langchain_core", "llamaindex": "llama_index", "haystack": "haystack"}


def _init_with_only(framework: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """``ragproof init`` in a process where the other frameworks' packages cannot be imported."""
    blocked = [package for name, package in PACKAGES.items() if name != framework]
    code = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None\n"
        "from gate.cli import main\n"
        "sys.exit(main(['init']))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize("framework", ["python", "langchain", "llamaindex", "haystack"])
def test_init_then_validate_and_run_pass_with_the_installed_frameworks_stub(
    framework: str, tmp_path: Path
) -> None:
    if framework != "python":
        require(PACKAGES[framework] if framework != "llamaindex" else "llama_index.core")
    done = _init_with_only(framework, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"pipeline stub: {framework}. Next:")
    assert (tmp_path / "pipeline.py").read_text() == (FILES / f"pipeline_{framework}.py.txt").read_text()
    config = yaml.safe_load((tmp_path / "ragproof.yaml").read_text())
    assert config["adapter"]["type"] == framework

    valid = ragproof("validate", cwd=tmp_path)
    assert valid.returncode == 0, valid.stderr
    assert (
        valid.stdout.startswith("ok: ragproof.yaml: 4 cases (dataset sha256 ")
        # a python target is imported and its methods named
        and f"adapter {framework} (retrieve and answer)," in valid.stdout
    )
    run = ragproof("run", "--no-progress", cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("complete: 4 cases in ") and "warning" not in run.stderr
    rows = [
        json.loads(line) for line in (tmp_path / ".ragproof" / "run" / "rows.jsonl").read_text().splitlines()
    ]
    assert [(r["case_id"], r["status"], r["answer"]["text"]) for r in rows] == [
        ("qa-1", "ok", "I don't know."),
        ("qa-2", "ok", "I don't know."),
        ("unanswerable-1", "ok", "I don't know."),
        ("injection-1", "ok", "I don't know."),
    ]
    assert rows[0]["metrics"]["retrieval.recall_at_k"] == {
        "value": 1.0,
        "status": "scored",
        "reason": None,
        "judge": None,
        "label": None,
    }
    # the project's own distribution name: the registry's "ragproof" is somebody else's package
    requirement = "" if framework == "python" else f"ragproof-gate[{framework}]\n"
    assert (tmp_path / "requirements.txt").read_text() == (
        "# What the pipeline needs; the workflow installs it before the run.\n" + requirement
    )
    # the starter k is a production-like depth, and the stub fills it (no short-retrieval warning)
    assert config["run"]["k"] == 5
    assert [len(r["retrieved"]) for r in rows] == [5, 5, 5, 5]
    assert (tmp_path / ".gitignore").read_text() == "# ragproof's runs and judge cache\n.ragproof/\nruns/\n"


def test_init_writes_the_pr_gate_workflow_and_refuses_to_overwrite(tmp_path: Path) -> None:
    first = ragproof("init", "--framework", "python", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    workflow = tmp_path / ".github" / "workflows" / "ragproof.yml"
    assert workflow.read_text() == (ROOT / "examples" / "workflows" / "pr-gate.yml").read_text()
    (tmp_path / "cases.jsonl").write_text('{"id": "mine", "question": "kept?"}\n')
    again = ragproof("init", "--framework", "python", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (
        64,
        f"ragproof: error: {tmp_path}: ragproof.yaml, cases.jsonl, pipeline.py, .github/workflows/ragproof.yml "
        "exist(s); pass --force to overwrite\n",
    )
    assert (tmp_path / "cases.jsonl").read_text() == '{"id": "mine", "question": "kept?"}\n'
    forced = ragproof("init", "--framework", "python", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "cases.jsonl").read_text() == (FILES / "cases.jsonl").read_text()


def test_init_adds_the_output_directories_to_an_existing_gitignore_once(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules/\nruns\n")
    done = ragproof("init", "--framework", "python", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"updated {tmp_path / '.gitignore'}" in done.stdout.splitlines()
    assert (tmp_path / ".gitignore").read_text() == (
        "node_modules/\nruns\n# ragproof's runs and judge cache\n.ragproof/\n"
    )
    again = ragproof("init", "--framework", "python", "--force", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / ".gitignore").read_text().count(".ragproof/") == 1


def test_init_for_a_framework_that_is_not_installed_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['llama_index'] = None\n"
        "from gate.cli import main\n"
        "sys.exit(main(['init', '--framework', 'llamaindex']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "ragproof: warning: llamaindex is not installed here (llama_index.core does not import); "
        "`ragproof validate` needs it: pip install 'ragproof-gate[llamaindex]'\n"
    )
    assert done.stdout.splitlines()[-1].startswith("pipeline stub: llamaindex. Next:")
