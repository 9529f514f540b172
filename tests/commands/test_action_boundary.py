"""What the action refuses before untrusted code runs, and that a pull request still gets its check.

``ragproof action`` as a subprocess against the GitHub API test server, on pull request #7:

- a checkout that keeps the job's token in ``.git/config`` (``actions/checkout``'s default
  ``persist-credentials: true``) runs no install and no pipeline: one line naming
  ``persist-credentials: false``, exit 64, a failing check run with that line;
- the pull request's own files are parsed with bounds before the trusted policy is known: a
  dataset that is a device, a YAML alias bomb, 50,000-deep nesting in YAML or JSON each give one
  line and a failing check run, within 60 s and a 1 GB address space.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import test_cli_action as base
from servers.github_server import GitHubServer, GitHubState
from test_cli_action import _pr, _project, checkout

pytestmark = pytest.mark.slow
runs = base.runs
state = base.state
server = base.server

PROBE = "python -c \"import pathlib; pathlib.Path('installed.txt').write_text('ran')\""
GIGABYTE = 1 << 30
DEPTH = 50_000


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith("ragproof: error: "), lines
    assert "Traceback" not in stderr
    return lines[0].removeprefix("ragproof: error: ")


def _failing_check(state: GitHubState, line: str) -> None:
    (check,) = state.check_runs
    assert (check["head_sha"], check["conclusion"]) == (state.pulls[7]["head"]["sha"], "failure")
    # The line, as inert Markdown: compare what survives escaping (its words).
    words = [word for word in line.split() if word.isalnum()]
    assert words and all(word in check["output"]["summary"] for word in words), check["output"]["summary"]


def test_a_checkout_holding_the_job_token_runs_no_untrusted_code(
    tmp_path: Path, server: GitHubServer
) -> None:
    workspace = _project(tmp_path)
    checkout(workspace)
    subprocess.run(
        [
            "git",
            "config",
            "--local",
            "http.https://github.com/.extraheader",
            "AUTHORIZATION: basic eC1hY2Nlc3M=",
        ],
        cwd=workspace,
        check=True,
    )
    result = _pr(tmp_path, server, inputs={"install": PROBE})
    assert result.returncode == 64, result.stderr[-3000:]
    line = _one_error_line(result.stderr)
    assert line.startswith(f"{workspace / '.git' / 'config'}: holds an http.extraheader (the job's token)")
    assert "`persist-credentials: false`" in line
    assert not (workspace / "installed.txt").exists()  # the install command never ran
    assert not (workspace / "seen-env.json").exists()  # nor did the pipeline
    _failing_check(server.state, line)


def test_a_credential_store_in_the_checkout_is_refused_too(tmp_path: Path, server: GitHubServer) -> None:
    workspace = _project(tmp_path)
    (workspace / ".git-credentials").write_text("https://x-access-token:ghs_secret@github.com\n")
    result = _pr(tmp_path, server, inputs={"install": PROBE})
    assert result.returncode == 64, result.stderr[-3000:]
    assert _one_error_line(result.stderr).startswith(
        f"{workspace / '.git-credentials'}: holds a git credential store"
    )
    assert not (workspace / "installed.txt").exists()


def _alias_bomb() -> str:
    """Nine levels of nine references: 387,420,489 strings once the aliases are followed."""
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, 10):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _config(dataset: str) -> str:
    return (
        (Path(base.FIXTURE) / "ragproof.yaml")
        .read_text()
        .replace("dataset: cases.jsonl", f"dataset: {dataset}")
    )


ATTACKS = {
    # the pull request's ragproof.yaml names a device as its dataset
    "dataset-device": ({"ragproof.yaml": _config("/dev/zero")}, "/dev/zero: dataset file is /dev/zero, a file of the kernel"),
    "dataset-alias-bomb": (
        {
            "ragproof.yaml": _config("cases.yaml"),
            "cases.yaml": _alias_bomb() + "cases:\n  - {id: c1, question: 'q', metadata: {bomb: *l9}}\n",
        },
        "invalid YAML (expands to more than 20,000,000 nodes (aliases followed))",
    ),
    "dataset-deep-yaml": (
        {"ragproof.yaml": _config("cases.yaml"), "cases.yaml": "cases: " + "[" * DEPTH + "]" * DEPTH + "\n"},
        "invalid YAML (nested deeper than 100 levels)",
    ),
    "dataset-deep-json": (
        {"cases.jsonl": json.dumps({"id": "c", "question": "q?"})[:-1] + ', "metadata": ' + "[" * DEPTH + "]" * DEPTH + "}\n"},
        "cases.jsonl:1: JSON nested too deeply",
    ),
    "config-alias-bomb": (
        {"ragproof.yaml": _config("cases.jsonl") + _alias_bomb().replace("l0:", "x-l0:")},
        "expands to more than 20,000,000 nodes",
    ),
    "config-deep": ({"ragproof.yaml": _config("cases.jsonl") + "gate: " + "{a: " * DEPTH + "1" + "}" * DEPTH + "\n"}, "nested deeper than 100 levels"),
}  # fmt: skip


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_pull_requests_files_are_parsed_within_bounds(
    tmp_path: Path, state: GitHubState, attack: str
) -> None:
    """Fails closed, with its line and a failing check, in 60 s and 1 GB (was: OOM or a traceback)."""
    files, expected = ATTACKS[attack]
    state.runs.clear()  # no baseline: the pull request's own dataset is the one run
    workspace = _project(tmp_path)
    for name, text in files.items():
        (workspace / name).write_text(text)
    with GitHubServer(state) as server:
        result = _pr(tmp_path, server, timeout=60, memory_limit=GIGABYTE)
    assert result.returncode in (64, 65), result.stderr[-3000:]
    line = _one_error_line(result.stderr)
    assert expected in line, line
    _failing_check(state, line)


def test_a_dataset_outside_the_checkout_is_not_read(tmp_path: Path, state: GitHubState) -> None:
    """Root reads what the config names and an error line may quote it: only the checkout's files."""
    state.runs.clear()
    workspace = _project(tmp_path)
    secret = tmp_path / "root-only.jsonl"
    secret.write_text("not json: the-root-only-secret\n")
    secret.chmod(0o600)
    (workspace / "ragproof.yaml").write_text(_config(str(secret)))
    with GitHubServer(state) as server:
        result = _pr(tmp_path, server, timeout=60, memory_limit=GIGABYTE)
    assert result.returncode in (64, 65), result.stderr[-3000:]
    line = _one_error_line(result.stderr)
    assert f"dataset file is {secret}, outside the checkout" in line, line
    assert "the-root-only-secret" not in result.stderr + result.stdout
    _failing_check(state, line)
