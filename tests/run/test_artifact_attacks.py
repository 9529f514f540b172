"""Hostile run artifacts: each is refused by ``ragproof report`` with exit 65 and one line on
stderr, within bounded memory and CPU time, measured on the child process alone (``os.wait4``).

The bounds are generous enough for a loaded 2-core machine and far below what the attacks
cost before (the newline zip: 8.8 GB and 94 s; a million entries: 581 MB read).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from github_helpers import GOOD, REPO_ROOT, write_run

from gate.model.artifact import ROWS_FILE, RUN_FILE, SUMMARY_FILE

pytestmark = pytest.mark.slow

MAX_RSS_BYTES = 256 << 20
MAX_CPU_SECONDS = 30.0
MB = 1 << 20


@dataclass
class Outcome:
    returncode: int
    stderr: str
    peak_rss: int  # bytes
    cpu_seconds: float


# Runs the command and reports its resource use. A child's ru_maxrss counts what it held
# before exec too, i.e. a copy of the forking process: pytest, holding the attack files, would
# be counted. This small launcher forks the command instead.
LAUNCHER = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.buffer.write(proc.stderr)
print(proc.returncode, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""


def report(path: Path) -> Outcome:
    """``python -m gate report PATH`` in a child process; its own peak memory and CPU time."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, sys.executable, "-m", "gate", "report", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    code, peak_kb, cpu = proc.stdout.split()
    return Outcome(int(code), proc.stderr, int(peak_kb) * 1024, float(cpu))


def assert_refused(path: Path, message: str) -> None:
    outcome = report(path)
    assert outcome.returncode == 65, outcome.stderr
    assert outcome.stderr.splitlines() == [f"ragproof: error: {message}"]
    assert outcome.peak_rss < MAX_RSS_BYTES, f"peak {outcome.peak_rss / MB:.0f} MB"
    assert outcome.cpu_seconds < MAX_CPU_SECONDS, f"{outcome.cpu_seconds:.1f} s of CPU"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The three files of a valid 20-case run."""
    directory = write_run(tmp_path_factory.mktemp("good") / "run", GOOD)
    return {name: (directory / name).read_bytes() for name in (RUN_FILE, ROWS_FILE, SUMMARY_FILE)}


def _zip(path: Path, files: dict[str, bytes], **extra: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in {**files, **extra}.items():
            archive.writestr(name, data)
    return path


def test_a_good_run_is_read_within_the_same_bounds(tmp_path: Path, good: dict[str, bytes]) -> None:
    # The bounds leave room: the same child reading a valid run stays well inside them.
    outcome = report(_zip(tmp_path / "good.zip", good))
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.peak_rss < MAX_RSS_BYTES / 2


def _bomb(path: Path, good: dict[str, bytes], head: bytes, block: bytes, megabytes: int) -> Path:
    """A run zip whose rows.jsonl is ``head`` then ``megabytes`` MB (10**6 bytes) of ``block``,
    deflated as written."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr(RUN_FILE, good[RUN_FILE])
        archive.writestr(SUMMARY_FILE, good[SUMMARY_FILE])
        with archive.open(ROWS_FILE, "w", force_zip64=True) as member:
            member.write(head)
            data = block * (1_000_000 // len(block))
            for _ in range(megabytes):
                member.write(data)
    return path


def test_a_zip_of_newlines_is_refused_without_expanding_it(tmp_path: Path, good: dict[str, bytes]) -> None:
    # 999 MB of newlines, under the 1 GB cap of rows.jsonl, deflate to about 1 MB: formerly
    # 8.8 GB of memory, 94 s, then a 0-row run.
    path = _bomb(tmp_path / "newlines.zip", good, b"", b"\n", 999)
    assert path.stat().st_size < 2 * MB
    assert_refused(path, f"{path}/{ROWS_FILE}:10001: more than 10000 blank lines")


def test_one_endless_line_is_refused_at_the_line_limit(tmp_path: Path, good: dict[str, bytes]) -> None:
    path = _bomb(tmp_path / "line.zip", good, b'{"case_id": "', b"a", 200)
    assert_refused(path, f"{path}/{ROWS_FILE}:1: line longer than the 32000000 byte limit")


def _central_entry(name: bytes, offset: int) -> bytes:
    # version made by/needed, flags, method, time, date, crc, sizes, name length, extra,
    # comment, disk, internal and external attributes, local header offset
    return (
        struct.pack(
            "<4s4B4HL2L5H2L",
            b"PK\x01\x02",
            20,
            3,
            20,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            len(name),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        + name
    )


def test_a_million_entries_are_refused_from_the_directory_record(tmp_path: Path) -> None:
    # 1,000,003 entries: formerly the whole central directory was loaded before the 64-entry cap.
    count = 1_000_003
    directory = b"".join(_central_entry(b"f%07d" % i, 0) for i in range(count))
    end64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(directory), 0)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(directory), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    path = tmp_path / "entries.zip"
    path.write_bytes(directory + end64 + locator + end)
    assert zipfile.is_zipfile(path)
    assert_refused(path, f"{path}: 1000003 zip entries exceed the limit of 64")


def test_a_directory_record_that_understates_its_entries_is_still_bounded(tmp_path: Path) -> None:
    # The record claims 3 entries; its directory holds 100,000: the directory's size is capped.
    count = 100_000
    directory = b"".join(_central_entry(b"f%07d" % i, 0) for i in range(count))
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 3, 3, len(directory), 0, 0)
    path = tmp_path / "understated.zip"
    path.write_bytes(directory + end)
    assert_refused(
        path, f"{path}: zip central directory of {len(directory)} bytes exceeds the limit of 1048576"
    )


def test_duplicate_entry_names_are_refused(tmp_path: Path, good: dict[str, bytes]) -> None:
    # Formerly the last rows.jsonl won.
    path = tmp_path / "twice.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile warns about the duplicate
        for name, data in good.items():
            archive.writestr(name, data)
        archive.writestr(ROWS_FILE, b"")
    assert_refused(path, f"{path}: duplicate zip entry '{ROWS_FILE}'")


def test_corrupt_deflate_data_is_a_data_error(tmp_path: Path, good: dict[str, bytes]) -> None:
    # Formerly a zlib.error traceback, exit 1.
    path = _zip(tmp_path / "corrupt.zip", good)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(ROWS_FILE)
    start = info.header_offset + 30 + len(info.filename.encode())
    data[start : start + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    outcome = report(path)
    assert outcome.returncode == 65, outcome.stderr
    [line] = outcome.stderr.splitlines()
    assert line.startswith(
        f"ragproof: error: {path}: cannot read {ROWS_FILE}: Error -3 while decompressing data"
    )


def test_a_member_larger_than_declared_is_refused(tmp_path: Path, good: dict[str, bytes]) -> None:
    # The header says 10 bytes; the data holds the whole file: only the declared bytes are
    # taken and their checksum fails, whatever is in the rest.
    path = _zip(tmp_path / "lying.zip", good)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(ROWS_FILE)
    for offset in _central_offsets(bytes(data), ROWS_FILE.encode()):
        data[offset + 24 : offset + 28] = struct.pack("<L", 10)
    data[info.header_offset + 22 : info.header_offset + 26] = struct.pack("<L", 10)
    path.write_bytes(bytes(data))
    assert_refused(path, f"{path}: cannot read {ROWS_FILE}: Bad CRC-32 for file '{ROWS_FILE}'")


def _central_offsets(data: bytes, name: bytes) -> list[int]:
    found, at = [], data.find(b"PK\x01\x02")
    while at >= 0:
        (length,) = struct.unpack("<H", data[at + 28 : at + 30])
        if data[at + 46 : at + 46 + length] == name:
            found.append(at)
        at = data.find(b"PK\x01\x02", at + 46)
    return found


@pytest.mark.parametrize("name", [ROWS_FILE, RUN_FILE, SUMMARY_FILE])
def test_deep_nesting_is_a_data_error(tmp_path: Path, good: dict[str, bytes], name: str) -> None:
    # 100,000 levels: formerly a RecursionError traceback, exit 1.
    deep = b"[" * 100_000 + b"]" * 100_000
    if name == ROWS_FILE:
        content = b'{"case_id": "x", "kind": "qa", "status": "ok", "metadata": {"a": ' + deep + b"}}\n"
        where = f"{name}:1"
    else:
        content = good[name][:-2] + b', "deep": ' + deep + b"}\n"
        where = name
    path = _zip(tmp_path / "deep.zip", {**good, name: content})
    assert_refused(path, f"{path}/{where}: JSON nested too deeply")


@pytest.mark.parametrize(
    ("value", "shown"),
    [("Infinity", "inf"), ("1e999", "inf"), ("NaN", "nan"), ("1e6", "1000000.0"), ("-0.5", "-0.5")],
)
def test_metric_values_outside_the_range_are_refused(
    tmp_path: Path, good: dict[str, bytes], value: str, shown: str
) -> None:
    # One +inf formerly turned a clear block into review.
    lines = good[ROWS_FILE].decode().splitlines()
    row = json.loads(lines[3])
    metric = next(iter(row["metrics"]))
    lines[3] = json.dumps(row).replace('"value": 1.0', f'"value": {value}', 1)
    assert value in lines[3]
    path = _zip(tmp_path / "inf.zip", {**good, ROWS_FILE: ("\n".join(lines) + "\n").encode()})
    assert_refused(path, f"{path}/{ROWS_FILE}:4: metrics.{metric}.value: {shown} is not within [0, 1]")


def test_summary_values_outside_the_range_are_refused(tmp_path: Path, good: dict[str, bytes]) -> None:
    summary = json.loads(good[SUMMARY_FILE])
    metric = next(iter(summary["slices"]["all"]))
    summary["slices"]["all"][metric]["mean"] = 1e6
    path = _zip(tmp_path / "summary.zip", {**good, SUMMARY_FILE: json.dumps(summary).encode()})
    assert_refused(path, f"{path}/{SUMMARY_FILE}: slices.all.{metric}.mean: 1000000.0 is not within [0, 1]")


def test_a_value_an_ulp_above_one_is_float_rounding_not_an_attack(
    tmp_path: Path, good: dict[str, bytes]
) -> None:
    rows = good[ROWS_FILE].decode().replace('"value":1.0', f'"value":{1.0 + 2**-52!r}', 1)
    assert rows != good[ROWS_FILE].decode()
    outcome = report(_zip(tmp_path / "ulp.zip", {**good, ROWS_FILE: rows.encode()}))
    assert outcome.returncode == 0, outcome.stderr


def test_bad_utf8_in_a_row_names_the_line(tmp_path: Path, good: dict[str, bytes]) -> None:
    rows = good[ROWS_FILE].split(b"\n")
    rows[1] = rows[1].replace(b"case-01", b"case-\xff1")
    path = _zip(tmp_path / "utf8.zip", {**good, ROWS_FILE: b"\n".join(rows)})
    assert_refused(path, f"{path}/{ROWS_FILE}:2: not UTF-8 text")


def test_many_small_distinct_rows_are_refused_beyond_the_case_count(
    tmp_path: Path, good: dict[str, bytes]
) -> None:
    # A million valid rows of 50 bytes (~1 KB each once parsed): formerly read whole, about 1 GB
    # of memory, all under the 1 GB cap of rows.jsonl. One row a case: row 21 of a 20-case run.
    path = tmp_path / "rows.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(RUN_FILE, good[RUN_FILE])
        archive.writestr(SUMMARY_FILE, good[SUMMARY_FILE])
        with archive.open(ROWS_FILE, "w", force_zip64=True) as member:
            member.write(good[ROWS_FILE])
            for start in range(0, 1_000_000, 10_000):
                member.write(
                    "".join(
                        f'{{"case_id":"x{i}","kind":"qa","status":"ok"}}\n'
                        for i in range(start, start + 10_000)
                    ).encode()
                )
    assert json.loads(good[RUN_FILE])["dataset"]["case_count"] == 20
    assert_refused(path, f"{path}/{ROWS_FILE}:21: more rows than run.json's dataset.case_count 20")


def test_a_case_count_beyond_the_limit_is_refused_from_run_json(
    tmp_path: Path, good: dict[str, bytes]
) -> None:
    from gate.model.dataset import MAX_CASES

    meta = json.loads(good[RUN_FILE])
    meta["dataset"]["case_count"] = MAX_CASES + 1
    path = _zip(tmp_path / "count.zip", {**good, RUN_FILE: json.dumps(meta).encode()})
    assert_refused(
        path, f"{path}/{RUN_FILE}: dataset.case_count: Input should be less than or equal to {MAX_CASES}"
    )
