"""The sandbox of untrusted processes: allow-listed environment, user switch, non-dumpable holder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from github_helpers import REPO_ROOT

from gate.boundary.sandbox import Sandbox

JOB = {
    "PATH": "/usr/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "HTTPS_PROXY": "http://proxy:3128",
    "GITHUB_SHA": "c1" * 20,
    "GITHUB_REPOSITORY": "acme/rag",
    "RUNNER_OS": "Linux",
    "GITHUB_TOKEN": "ghs_x",
    "GITHUB_OUTPUT": "/github/file_commands/set_output",
    "GITHUB_ENV": "/github/file_commands/set_env",
    "INPUT_GITHUB-TOKEN": "ghs_x",
    "ACTIONS_RUNTIME_TOKEN": "rt",
    "OPENAI_API_KEY": "sk-judge",
    "DEPLOY_PASSWORD": "from the workflow's env:",
    "PIPELINE_INDEX": "/data/index",
    "RAGPROOF_PIPELINE_UID": "64000",
}


def test_untrusted_environment_is_an_allow_list_without_any_credential() -> None:
    sandbox = Sandbox(home=Path("/tmp/home"))
    env = sandbox.environment(
        JOB, "OPENAI_API_KEY", passthrough=["PIPELINE_INDEX", "OPENAI_API_KEY", "GITHUB_ENV"]
    )
    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HTTPS_PROXY": "http://proxy:3128",
        "GITHUB_SHA": "c1" * 20,
        "GITHUB_REPOSITORY": "acme/rag",
        "RUNNER_OS": "Linux",
        # named by env_passthrough; the judge key and a file-command variable never are
        "PIPELINE_INDEX": "/data/index",
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp/home/tmp",
    }


def test_a_venv_for_the_sandbox_user_goes_first_on_path(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    sandbox = Sandbox.from_environment({"RAGPROOF_PIPELINE_VENV": str(tmp_path)})
    env = sandbox.environment({"PATH": "/usr/bin"}, None)
    assert env == {"PATH": f"{tmp_path}/bin:/usr/bin", "VIRTUAL_ENV": str(tmp_path)}


def test_the_user_is_switched_only_where_the_process_can() -> None:
    sandbox = Sandbox.from_environment({"RAGPROOF_PIPELINE_UID": "64000:64001"})
    if os.geteuid() == 0:
        assert (sandbox.uid, sandbox.gid) == (64000, 64001)
        assert sandbox.popen_kwargs() == {
            "start_new_session": True,
            "close_fds": True,
            "user": 64000,
            "group": 64001,
            "extra_groups": [],
            "umask": 0o022,
        }
    else:
        assert sandbox.uid is None and sandbox.popen_kwargs() == {
            "start_new_session": True,
            "close_fds": True,
        }


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_DUMPABLE) is Linux only")
def test_the_process_holding_secrets_becomes_non_dumpable() -> None:
    code = (
        "import ctypes; from gate.boundary.reexec import set_non_dumpable;"
        "dumpable = lambda: ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 1;"  # PR_GET_DUMPABLE
        "before = dumpable(); done = set_non_dumpable(); print(before, done, dumpable())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["True", "True", "False"]


def _package(root: Path) -> Path:
    package = root / "site" / "gate"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    for path in (root / "site", package, package / "__pycache__"):
        path.chmod(0o755)
    for path in (package / "__init__.py", package / "__pycache__" / "x.cpython-311.pyc"):
        path.chmod(0o644)
    return package


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to the sandbox uid needs root")
def test_code_the_sandbox_user_could_change_is_found(tmp_path: Path) -> None:
    package = _package(tmp_path)
    sandbox = Sandbox(uid=64000, gid=64001)
    assert sandbox.writable_code(package) is None  # root-owned, 755 / 644
    assert Sandbox().writable_code(package) is None  # no user switch: nothing to check
    pyc = package / "__pycache__" / "x.cpython-311.pyc"
    cases = [
        # (path, owner, group, mode): each alone makes the install writable for uid 64000
        (pyc, 64000, 0, 0o644),  # owned by it
        (pyc, 0, 64001, 0o664),  # its group may write
        (package / "__pycache__", 0, 0, 0o1777),  # world-writable, sticky or not
        (package.parent, 0, 0, 0o757),  # where a .pth file or a module could be planted
    ]
    for path, uid, gid, mode in cases:
        original = path.stat()
        os.chown(path, uid, gid)
        path.chmod(mode)
        assert sandbox.writable_code(package) == path, (path, uid, gid, oct(mode))
        os.chown(path, original.st_uid, original.st_gid)
        path.chmod(original.st_mode & 0o7777)
    # the group write bit of a group that is not the sandbox user's is no way in
    os.chown(pyc, 0, 64002)
    pyc.chmod(0o664)
    assert sandbox.writable_code(package) is None
