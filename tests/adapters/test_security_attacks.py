"""Attacks on the action from the code it runs: a hostile pipeline (python, command, http-served)
and a hostile ``install`` command try to read the job's credentials and to speak to the runner.

``ragproof action`` runs as a subprocess with a runner-like environment holding secrets of each
kind the job has (the token input, the Actions runtime tokens and URLs, the judge key, a secret
the workflow passes in ``env:``), with the capability set Docker and podman give a container by
default (no CAP_SYS_PTRACE; ``setpriv``), and the file-command files of a real step. The hostile
code (tests/pipelines/hostile.py) reports every secret-looking string it found in its
environment, in ``/proc/*/environ`` and in the memory of every ancestor it could open, and every
file it could write; it prints workflow commands on both streams. The tests then read the step's
stdout and stderr the way the runner does (tests/log_commands.py).

Where the test process may switch users (root, with a Python the sandbox user can run), the action
also runs untrusted code as another uid (RAGPROOF_PIPELINE_UID, as the image does): then no
file-command file changes either. The container smoke test checks the same in the real image.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from github_helpers import REPO_ROOT
from log_commands import obeyed_commands
from tools import require_tool

pytestmark = pytest.mark.slow

HOSTILE = REPO_ROOT / "tests" / "pipelines" / "hostile.py"
SANDBOX_UID = 64000
FILE_COMMANDS = {
    "GITHUB_ENV": "set_env",
    "GITHUB_OUTPUT": "set_output",
    "GITHUB_PATH": "add_path",
    "GITHUB_STATE": "save_state",
    "GITHUB_STEP_SUMMARY": "step_summary",
}
# Docker's and podman's default capabilities (no CAP_SYS_PTRACE, no CAP_SYS_ADMIN).
CONTAINER_CAPS = (
    "chown,dac_override,fowner,fsetid,kill,setgid,setuid,setpcap,net_bind_service,net_raw,"
    "sys_chroot,mknod,audit_write,setfcap"
)


def _container_capabilities() -> list[str]:
    """A prefix that runs a command with the default container capabilities (root only)."""
    if os.geteuid() != 0:
        return []  # an ordinary user has none of them anyway
    setpriv = require_tool("setpriv")  # drops CAP_SYS_PTRACE as a container does
    bounding = "-all," + ",".join(f"+{cap}" for cap in CONTAINER_CAPS.split(","))
    return [setpriv, f"--bounding-set={bounding}", "--inh-caps=-all"]


def _runs_as_sandbox_user(python: str, code: str) -> bool:
    """Whether ``python -c code`` runs when started the way the sandbox starts processes."""
    if os.geteuid() != 0:
        return False
    try:
        probe = subprocess.run(
            [python, "-c", code],
            env={"PYTHONPATH": str(REPO_ROOT), "PATH": os.environ.get("PATH", "")},
            user=SANDBOX_UID,
            group=SANDBOX_UID,
            extra_groups=[],
            capture_output=True,
            check=False,
        )
    except OSError:
        return False
    return probe.returncode == 0


# The python adapter's worker needs ragproof's packages; command pipelines and install commands
# (the hostile one is standard library only) need just an interpreter the sandbox user can run.
SWITCHES_USER = _runs_as_sandbox_user(sys.executable, "import gate, pydantic")
SANDBOX_PYTHON = next(
    (
        p
        for p in (sys.executable, "/usr/bin/python3")
        if os.path.exists(p) and _runs_as_sandbox_user(p, "import http.server, json, socket")
    ),
    None,
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Attack:
    returncode: int
    pid: int
    stdout: str
    stderr: str
    secrets: dict[str, str]
    workspace: Path
    file_commands: Path

    def rows(self) -> list[dict[str, Any]]:
        rows = self.workspace / ".ragproof" / "run" / "rows.jsonl"
        return [json.loads(line) for line in rows.read_text().splitlines()]

    def pipeline_findings(self) -> list[dict[str, Any]]:
        """What the hostile pipeline reported, once per row and call (its answer and chunk text)."""
        found = []
        for row in self.rows():
            assert row["status"] == "ok", (row["status"], row["error"])
            texts = [row["answer"]["text"], *(c["text"] for c in row["retrieved"])]
            for text in texts:
                assert text.startswith("HOSTILE-FINDINGS "), text[:200]
                found.append(json.loads(text.removeprefix("HOSTILE-FINDINGS ")))
        return found

    def install_findings(self) -> list[dict[str, Any]]:
        return [
            json.loads(line.split("HOSTILE-FINDINGS ", 1)[1])
            for line in self.stdout.splitlines()
            if "HOSTILE-FINDINGS " in line
        ]


def _install_read_only(destination: Path) -> Path:
    """A copy of ragproof's code as the image installs it: owned by root, not writable by others.

    The checkout the tests run from may be writable by everybody (a CI clone made under umask
    000); the action refuses to run untrusted code as another user from such an install.
    """
    destination.mkdir(mode=0o755)
    destination.chmod(0o755)
    shutil.copytree(REPO_ROOT / "gate", destination / "gate", ignore=shutil.ignore_patterns("__pycache__"))
    for directory, _subdirectories, files in os.walk(destination / "gate"):
        Path(directory).chmod(0o755)
        for name in files:
            Path(directory, name).chmod(0o644)
    return destination


@pytest.fixture(scope="module")
def read_only_install() -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix="ragproof-install-"))
    parent.chmod(0o755)
    yield _install_read_only(parent / "site")
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def base(read_only_install: Path) -> Iterator[Path]:
    # Not under pytest's own temporary directory (mode 0700): the sandbox user must read it.
    directory = Path(tempfile.mkdtemp(prefix="ragproof-attack-"))
    directory.chmod(0o755)
    os.symlink(read_only_install, directory / "code")  # _attack's PYTHONPATH
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _push_action_env(
    runner: Path, workspace: Path, code: Path, file_commands: dict[str, Path], *, run_id: str, install: str
) -> dict[str, str]:
    """The environment the runner gives ``ragproof action`` (mode run) on a push to main, the
    push event written to ``runner/event.json``: ``code`` is ragproof's install (its
    PYTHONPATH), ``file_commands`` the GITHUB_* file-command variables and their files."""
    event = runner / "event.json"
    repository = {"id": 1001, "full_name": "acme/rag", "default_branch": "main"}
    event.write_text(json.dumps({"ref": "refs/heads/main", "after": "c1" * 20, "repository": repository}))
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(runner),
        "PYTHONPATH": str(code),
        # as the image's install, compiled once: the action (root) writes no __pycache__ there
        "PYTHONDONTWRITEBYTECODE": "1",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "acme/rag",
        "GITHUB_API_URL": "http://127.0.0.1:9",
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_SHA": "c1" * 20,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_RUN_ID": run_id,
        "GITHUB_WORKSPACE": str(workspace),
        "RUNNER_TEMP": str(runner / "temp"),
        "INPUT_MODE": "run",
        "INPUT_CONFIG": "ragproof.yaml",
        "INPUT_OUT": ".ragproof/run",
        "INPUT_INSTALL": install,
        **{name: str(path) for name, path in file_commands.items()},
    }


def _attack(
    base: Path,
    adapter: str,
    *,
    install: str = "",
    switch_user: bool = False,
    existing_workspace: bool = False,
) -> Attack:
    workspace = base / "workspace"
    runner = base / "runner"
    file_commands = base / "file_commands"
    for directory in (workspace, runner, file_commands):
        directory.mkdir(mode=0o755, exist_ok=existing_workspace and directory == workspace)
    shutil.copy(HOSTILE, workspace / "hostile.py")
    (workspace / "hostile.json").write_text(
        json.dumps({"file_commands": str(file_commands), "scan": [str(file_commands), str(runner)]})
    )
    cases = [{"id": f"case-{i}", "question": f"fact {i}?", "expected_source_ids": ["doc-1"]} for i in (1, 2)]
    (workspace / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (workspace / "ragproof.yaml").write_text(
        "version: 1\ndataset: cases.jsonl\n"
        # retries: the hostile http server (a stdlib HTTP/1.0 server) may drop a connection on a
        # loaded machine; what is under test is what it can reach, not its transport.
        f"adapter:\n{adapter}  timeout_s: 60\n  concurrency: 1\n  retries: 2\n"
        "run:\n  k: 1\n  metrics: [retrieval.hit_rate_at_k]\n"
    )
    for name in FILE_COMMANDS.values():
        (file_commands / name).write_text("")
        (file_commands / name).chmod(0o644)  # as the runner leaves them, whatever the umask
    values = {
        name: f"RPSECRET-{secrets.token_hex(8)}"
        for name in (
            "INPUT_GITHUB-TOKEN", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_CACHE_URL", "ACTIONS_RESULTS_URL", "OPENAI_API_KEY",
            "DEPLOY_PASSWORD",  # a secret the workflow passes in env:
        )
    }  # fmt: skip
    env = {
        **_push_action_env(
            runner,
            workspace,
            (base / "code").resolve(),
            {name: file_commands / file for name, file in FILE_COMMANDS.items()},
            run_id="9001",
            install=install,
        ),
        **values,
    }
    if switch_user:
        env["RAGPROOF_PIPELINE_UID"] = str(SANDBOX_UID)
    proc = subprocess.Popen(
        [*_container_capabilities(), sys.executable, "-m", "gate", "action"],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = proc.communicate(timeout=300)
    return Attack(proc.returncode, proc.pid, stdout, stderr, values, workspace, file_commands)


PY = sys.executable
ADAPTERS = {
    "python": "  type: python\n  target: hostile:Pipeline\n",
    "command": f"  type: command\n  command: [{PY}, hostile.py, stdio]\n",
}


def _assert_nothing_reached(attack: Attack, findings: list[dict[str, Any]]) -> None:
    assert attack.returncode == 0, attack.stderr[-3000:]
    assert findings
    secret_names = set(attack.secrets) | set(FILE_COMMANDS)
    for found in findings:
        assert found["secrets"] == [], found
        # The action's own process (PID 1 in the image): neither its environ nor its memory.
        assert f"/proc/{attack.pid}/environ" not in found["opened"]
        assert f"/proc/{attack.pid}/mem" not in found["opened"]
        assert secret_names.isdisjoint(found["env"]), found["env"]


def _assert_no_command_obeyed(attack: Attack) -> None:
    obeyed = obeyed_commands(attack.stdout)
    assert [c for c in obeyed if "HOSTILE" in c[1] or "HOSTILE" in c[0]] == []
    # ragproof's own commands still work after the hostile output: its masks are obeyed.
    masks = {data for name, data in obeyed if name == "add-mask"}
    assert attack.secrets["INPUT_GITHUB-TOKEN"] in masks
    # stderr carries only ragproof's own neutralised text: nothing there can start a command.
    assert "::" not in attack.stderr and "##[" not in attack.stderr, attack.stderr[-2000:]


@pytest.mark.parametrize("kind", ["python", "command"])
def test_hostile_pipeline_finds_no_credential_and_commands_nothing(base: Path, kind: str) -> None:
    attack = _attack(base, ADAPTERS[kind], switch_user=SWITCHES_USER)
    _assert_nothing_reached(attack, attack.pipeline_findings())
    _assert_no_command_obeyed(attack)
    # What it printed went to the pipeline's log in the run directory, not to the step's log.
    assert "HOSTILE" not in attack.stdout
    logs = list(attack.workspace.parent.rglob("adapter-stderr.log"))  # with the store, RUNNER_TEMP
    assert logs and all("::error::HOSTILE-error" in log.read_text() for log in logs)


def test_hostile_http_server_started_by_install_finds_no_credential(base: Path) -> None:
    port = _free_port()
    install = f"{PY} hostile.py serve {port} & {PY} hostile.py wait {port}"
    attack = _attack(
        base, f"  type: http\n  url: http://127.0.0.1:{port}\n", install=install, switch_user=SWITCHES_USER
    )
    _assert_nothing_reached(attack, attack.pipeline_findings())
    _assert_no_command_obeyed(attack)
    # The server's lines (printed after the install step ended) were relayed, inside a stop pair.
    assert "::error::HOSTILE-error (http)" in attack.stdout
    assert "::error::HOSTILE-error (http, stderr)" in attack.stdout
    # The server the install command left running was ended with the step.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_hostile_install_command_finds_no_credential_and_commands_nothing(base: Path) -> None:
    attack = _attack(base, ADAPTERS["python"], install=f"{PY} hostile.py install", switch_user=SWITCHES_USER)
    _assert_nothing_reached(attack, attack.install_findings())
    _assert_no_command_obeyed(attack)
    # Its output is in the log, both streams, verbatim but inside a stop-commands pair.
    for line in ("::error::HOSTILE-error (install)", "::error::HOSTILE-error (install, stderr)"):
        assert line in attack.stdout
    assert "::group::install: " in attack.stdout and "::endgroup::" in attack.stdout


@pytest.mark.parametrize("kind", ["python", "command", "install"])
def test_as_another_user_no_file_command_changes(base: Path, kind: str) -> None:
    """The image's arrangement on this machine: untrusted code as uid 64000, the action as root."""
    python = sys.executable if kind == "python" and SWITCHES_USER else SANDBOX_PYTHON
    if python is None or (kind == "python" and not SWITCHES_USER):
        pytest.skip(
            f"switching to uid {SANDBOX_UID} needs root and a Python that uid can run"
            + (" with ragproof's packages" if kind == "python" else "")
            + " (the container smoke test checks it in the image)"
        )
    adapter = (
        ADAPTERS["python"]
        if kind == "python"
        else f"  type: command\n  command: [{python}, hostile.py, stdio]\n"
    )
    install = f"{python} hostile.py install" if kind == "install" else ""
    attack = _attack(base, adapter, install=install, switch_user=True)
    findings = attack.install_findings() if kind == "install" else attack.pipeline_findings()
    _assert_nothing_reached(attack, findings)
    _assert_no_command_obeyed(attack)
    for found in findings:
        assert found["written"] == []
    contents = {path.name: path.read_text() for path in attack.file_commands.iterdir()}
    assert set(contents) == set(FILE_COMMANDS.values())
    assert "HOSTILE" not in "".join(contents.values())


def test_error_messages_of_the_pipeline_cannot_command_the_runner(base: Path) -> None:
    """Text ragproof prints itself (the import error of the target, on stderr and as ::error::)."""
    attack_dir = base / "workspace"
    attack_dir.mkdir(mode=0o755)
    (attack_dir / "broken.py").write_text(
        "raise RuntimeError('no model\\n::error::HOSTILE-newline ##[warning]HOSTILE-legacy ::add-mask::HOSTILE')\n"
    )
    attack = _attack(base, "  type: python\n  target: broken:Pipeline\n", existing_workspace=True)
    assert attack.returncode == 64, attack.stderr
    assert "HOSTILE-newline" in attack.stderr  # the message is shown...
    # ...as text: in ragproof's own annotation (its one command quoting it) and on stderr.
    quoting = [(name, data) for name, data in obeyed_commands(attack.stdout) if "HOSTILE" in data]
    assert [name for name, _ in quoting] == ["error"]
    assert "::" not in quoting[0][1] and "##[" not in quoting[0][1]
    assert obeyed_commands(attack.stderr) == []
    assert "::" not in attack.stderr and "##[" not in attack.stderr


def test_code_the_pipeline_user_could_write_is_refused_before_anything_runs(base: Path) -> None:
    """An install the sandbox user could change (here one package directory mode 0777): exit 64."""
    if os.geteuid() != 0:
        pytest.skip(f"switching to uid {SANDBOX_UID} needs root")
    (base / "code").unlink()
    writable = _install_read_only(base / "code") / "gate" / "adapters"
    writable.chmod(0o777)
    attack = _attack(base, ADAPTERS["command"], install=f"{PY} hostile.py install", switch_user=True)
    assert attack.returncode == 64, attack.stderr
    lines = attack.stderr.strip().splitlines()
    assert len(lines) == 1, attack.stderr
    assert lines[0] == (
        f"ragproof: error: RAGPROOF_PIPELINE_UID: ragproof's own code is writable by the pipeline "
        f"user (uid {SANDBOX_UID}): {writable}; a pipeline could change the gate. Install ragproof "
        "owned by root and not writable by that user (as the action's image does)"
    )
    assert attack.install_findings() == []  # the install command never ran
    assert not (attack.workspace / ".ragproof").exists()  # nor did the pipeline
