"""The judge cache: keyed rows in the store database, one connection per thread, WAL."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from gate.core.errors import DataError
from gate.judge.cache import CachedVerdict, JudgeCache


def test_round_trip_and_key_parts(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "store.sqlite")
    verdict = CachedVerdict({"declined": True}, ["raw one", "raw two"], 120, 9)
    cache.put("m", "p" * 64, "i" * 64, verdict)
    assert cache.get("m", "p" * 64, "i" * 64) == verdict
    assert cache.get("other", "p" * 64, "i" * 64) is None
    assert cache.get("m", "q" * 64, "i" * 64) is None
    assert cache.get("m", "p" * 64, "j" * 64) is None
    cache.put("m", "p" * 64, "i" * 64, CachedVerdict({"declined": False}, ["r"], 1, 1))
    cached = cache.get("m", "p" * 64, "i" * 64)
    assert cache.count() == 1 and cached is not None and cached.reply == {"declined": False}
    cache.close()


def test_shares_the_store_file_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE runs (id TEXT)")
    other.commit()
    cache = JudgeCache(path)
    cache.put("m", "p", "i", CachedVerdict({}, [], 0, 0))
    other.close()
    other = sqlite3.connect(path)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in other.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"runs", "judge_cache"}
    other.close()
    cache.close()


def test_threads_write_through_their_own_connections(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "store.sqlite")

    def write(n: int) -> None:
        for i in range(20):
            cache.put("m", "p", f"{n}-{i}", CachedVerdict({"n": n}, [], i, 0))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.count() == 80
    assert len(cache._connections) == 5  # the creating thread and one per writer
    cache.close()


def test_unreadable_database_is_one_line_data_error(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DataError, match=r"store.sqlite: cannot open the judge cache"):
        JudgeCache(path)
