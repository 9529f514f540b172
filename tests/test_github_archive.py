"""Safe extraction of untrusted artifact zips."""

from __future__ import annotations

import contextlib
import stat
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.errors import DataError
from gate.github.archive import extract_zip, run_directory


def _zip(path: Path, entries: list[tuple[str, bytes]], *, link: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries:
            archive.writestr(name, data)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return path


def _all_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_plain_artifact_extracts_at_the_root(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", [("run.json", b"{}"), ("rows.jsonl", b""), ("logs/x.txt", b"x")])
    out = extract_zip(archive, tmp_path / "out")
    assert _all_files(out) == {"run.json", "rows.jsonl", "logs", "logs/x.txt"}
    assert run_directory(out, "a") == out


def test_single_top_level_directory_is_accepted(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", [("run/run.json", b"{}")])
    out = extract_zip(archive, tmp_path / "out")
    assert run_directory(out, "a") == out / "run"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("../evil.txt", "'..' component"),
        ("run/../../evil.txt", "'..' component"),
        ("/tmp/evil.txt", "absolute path"),
        ("C:evil.txt", "absolute path"),
        ("run\\..\\evil.txt", "backslash"),
    ],
)
def test_zip_slip_names_are_rejected_and_nothing_is_written(tmp_path: Path, name: str, problem: str) -> None:
    archive = _zip(tmp_path / "a.zip", [("run.json", b"{}"), (name, b"owned")])
    out = tmp_path / "deep" / "out"
    with pytest.raises(DataError, match=problem):
        extract_zip(archive, out, source="baseline artifact")
    assert not out.exists()
    assert _all_files(tmp_path) == {"a.zip", "deep"} or _all_files(tmp_path) == {"a.zip"}
    assert not Path("/tmp/evil.txt").exists() or name != "/tmp/evil.txt"


def test_symlinks_are_rejected(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", [("run.json", b"{}")], link="rows.jsonl")
    with pytest.raises(DataError, match="symbolic link"):
        extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_caps_on_count_and_size(tmp_path: Path) -> None:
    many = _zip(tmp_path / "many.zip", [(f"f{i}", b"") for i in range(6)])
    with pytest.raises(DataError, match="6 entries exceeds the limit of 5"):
        extract_zip(many, tmp_path / "o1", max_files=5)
    big = _zip(tmp_path / "big.zip", [("run.json", b"x" * 5000)])
    with pytest.raises(DataError, match="5000 uncompressed bytes exceeds the limit of 4096"):
        extract_zip(big, tmp_path / "o2", max_total_bytes=4096)
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


def test_forged_declared_size_is_stopped_while_streaming(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "a.zip", [("run.json", b"y" * 10_000)])
    data = bytearray(archive.read_bytes())
    # Patch the central directory's uncompressed size (offset 24 of the entry) to claim 10 bytes.
    central = data.rindex(b"PK\x01\x02")
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    with pytest.raises(DataError):
        extract_zip(archive, tmp_path / "out", max_total_bytes=1000)
    assert not (tmp_path / "out").exists()


def test_not_a_zip_and_no_run_json(tmp_path: Path) -> None:
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a valid zip archive"):
        extract_zip(junk, tmp_path / "o")
    out = extract_zip(_zip(tmp_path / "a.zip", [("other.txt", b"")]), tmp_path / "o2")
    with pytest.raises(DataError, match="holds no run.json"):
        run_directory(out, "baseline artifact")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab./\\:", min_size=1, max_size=12), min_size=1, max_size=4, unique=True))
def test_no_name_ever_writes_outside_the_destination(names: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        archive = root / "a.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for name in names:
                zf.writestr(name, b"x")
        box = root / "box"
        box.mkdir()
        with contextlib.suppress(DataError):  # rejected: fine; anything else fails the test
            extract_zip(archive, box / "out")
        outside = {p for p in root.rglob("*") if not p.is_relative_to(box)}
        assert outside == {archive}
