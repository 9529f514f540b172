"""Bounded reading of what a pull request controls, and writing through descriptors only."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gate.boundary.files import open_directory, read_text_file, refuse_unsafe_directory, replace_file
from gate.boundary.sandbox import Sandbox, activate
from gate.core.errors import DataError, UsageError
from gate.core.yamllines import YamlLines

UID = 64117


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """An active sandbox (as in the action); its uid only where this process may switch users."""
    box = Sandbox(uid=UID if os.geteuid() == 0 else None)
    activate(box)
    yield box
    activate(None)


def test_read_text_file_names_what_is_missing_or_unreadable(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_text("héllo\n", encoding="utf-8")
    assert read_text_file(tmp_path / "ok.txt", "dataset") == "héllo\n"
    with pytest.raises(DataError, match=r"nope.jsonl: dataset file not found$"):
        read_text_file(tmp_path / "nope.jsonl", "dataset")
    (tmp_path / "latin1.yaml").write_bytes(b"caf\xe9\n")
    with pytest.raises(UsageError, match=r"latin1.yaml: cannot read config: not UTF-8 text \(byte 3\)$"):
        read_text_file(tmp_path / "latin1.yaml", "config", UsageError)


def test_only_regular_files_within_the_cap_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "cases.jsonl"
    os.mkfifo(fifo)  # no writer: a blocking open would wait for ever
    with pytest.raises(DataError, match=r"cases.jsonl: dataset file is a FIFO, not a regular file$"):
        read_text_file(fifo, "dataset")
    with pytest.raises(DataError, match=r"is a directory, not a regular file$"):
        read_text_file(tmp_path, "dataset")
    for kernel in ("/dev/zero", "/proc/self/environ", "/sys/kernel/mm"):
        with pytest.raises(DataError, match=r"a file of the kernel, not a regular file$"):
            read_text_file(Path(kernel), "dataset")
    linked = tmp_path / "linked.jsonl"
    linked.symlink_to("/dev/zero")
    with pytest.raises(DataError, match=r"linked.jsonl: dataset file is /dev/zero"):
        read_text_file(linked, "dataset")
    big = tmp_path / "big.yaml"
    big.write_text("x" * 11)
    assert read_text_file(big, "config", cap=11) == "x" * 11
    with pytest.raises(DataError, match=r"big.yaml: config file is larger than 10 bytes$"):
        read_text_file(big, "config", cap=10)


def test_yaml_bounds_aliases_and_depth_before_constructing() -> None:
    bomb = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [" + ", ".join([f"*{previous}"] * 9) + "]\n"
    with pytest.raises(yaml.YAMLError, match=r"expands to more than 20,000,000 nodes"):
        YamlLines.load(bomb)
    with pytest.raises(yaml.YAMLError, match=r"nested deeper than 100 levels"):
        YamlLines.load("[" * 50_000 + "]" * 50_000)
    with pytest.raises(yaml.YAMLError, match=r"a recursive alias"):
        YamlLines.load("a: &a [1, *a]\n")
    # within the bounds: shared aliases count each time they are used, nesting of 100 is fine
    data, _ = YamlLines.load("a: &a [1, 2]\nb: [*a, *a]\nc: " + "[" * 99 + "]" * 99 + "\n")
    assert data["b"] == [[1, 2], [1, 2]]


def test_a_symbolic_link_on_the_way_is_refused_in_the_action(tmp_path: Path, sandbox: Sandbox) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / ".ragproof").symlink_to(tmp_path / "elsewhere")
    target = tmp_path / "workspace" / ".ragproof" / "run"
    with pytest.raises(
        UsageError, match=r"workspace/\.ragproof: a symbolic link; ragproof writes there as root"
    ):
        refuse_unsafe_directory(target)
    with pytest.raises(UsageError, match=r"\.ragproof: a symbolic link"):
        replace_file(target / "report.md", b"x")
    assert list((tmp_path / "elsewhere").iterdir()) == []
    activate(None)  # ragproof run on a laptop: the link is the user's own, followed as meant
    replace_file(target / "report.md", b"x")
    assert (tmp_path / "elsewhere" / "run" / "report.md").read_bytes() == b"x"


@pytest.mark.skipif(os.geteuid() != 0, reason="a pipeline user exists only where root may switch to it")
def test_a_directory_the_pipeline_user_may_write_is_refused(sandbox: Sandbox) -> None:
    root = Path(tempfile.mkdtemp(prefix="ragproof-dirs-"))  # under /tmp: sticky, passed through
    try:
        root.chmod(0o755)
        fd = open_directory(root / "fine" / "run")
        os.close(fd)
        owned = root / "owned"
        owned.mkdir(mode=0o555)
        os.chown(owned, UID, UID)  # read-only, but its owner may chmod it
        with pytest.raises(UsageError, match=r"owned: the pipeline user may write this directory"):
            refuse_unsafe_directory(owned / "run")
        shared = root / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        with pytest.raises(UsageError, match=r"shared: the pipeline user may write this directory"):
            open_directory(shared / "run")
        assert not (shared / "run").exists()
    finally:
        import shutil

        shutil.rmtree(root)
