"""Which credentials of a checkout the pipeline user could read (``persist-credentials``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gate.boundary.credentials import readable_credentials
from gate.boundary.sandbox import Sandbox

UID = 64117
CLEAN = '[core]\n\tbare = false\n[remote "origin"]\n\turl = https://github.com/acme/rag\n'


def _checkout(root: Path, config: str) -> Path:
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text(config)
    return root


def test_a_clean_checkout_holds_nothing(tmp_path: Path) -> None:
    assert readable_credentials(_checkout(tmp_path, CLEAN), None, {}) == []


def test_the_checkouts_token_is_found_where_actions_checkout_keeps_it(tmp_path: Path) -> None:
    # persist-credentials: true, older versions: the header in .git/config itself
    header = CLEAN + '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3M=\n'
    (tmp_path / "a").mkdir()
    workspace = _checkout(tmp_path / "a", header)
    assert readable_credentials(workspace, None, {}) == [
        (workspace / ".git" / "config", "an http.extraheader (the job's token)")
    ]
    # newer versions: a file of their own, included from .git/config
    other = tmp_path / "b"
    other.mkdir()
    included = tmp_path / "git-credentials-1234.config"
    included.write_text('[http "https://github.com/"]\n\tExtraHeader = AUTHORIZATION: basic eA==\n')
    workspace = _checkout(other, CLEAN + f'[includeIf "gitdir:{other}/.git"]\n\tpath = {included}\n')
    assert readable_credentials(workspace, None, {}) == [(included, "an http.extraheader (the job's token)")]


def test_passwords_in_urls_and_credential_stores(tmp_path: Path) -> None:
    workspace = _checkout(
        tmp_path, CLEAN.replace("https://github.com", "https://x-access-token:ghs_1@github.com")
    )
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "credentials").write_text("https://bot:ghp_2@github.com\n")
    assert readable_credentials(workspace, None, {"HOME": str(home)}) == [
        (workspace / ".git" / "config", "a password in remote.url"),
        (home / ".config" / "git" / "credentials", "a git credential store"),
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="a pipeline user exists only where root may switch to it")
def test_only_what_the_pipeline_user_may_read_counts(tmp_path: Path) -> None:
    header = CLEAN + "[http]\n\textraheader = AUTHORIZATION: basic eA==\n"
    workspace = _checkout(tmp_path, header)
    config = workspace / ".git" / "config"
    sandbox = Sandbox(uid=UID)
    config.chmod(0o600)  # root's alone
    assert readable_credentials(workspace, sandbox, {}) == []
    config.chmod(0o644)  # as actions/checkout leaves it
    assert [what for _, what in readable_credentials(workspace, sandbox, {})] == [
        "an http.extraheader (the job's token)"
    ]
