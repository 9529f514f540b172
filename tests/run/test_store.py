"""The SQLite store: WAL mode, batched commits, what a SIGKILL can lose, run lookup for resume."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import cast

import pytest

from gate.core.errors import UsageError
from gate.run.store import Store, connect, run_key


def _committed(path: Path, run_id: str = "r1") -> int:
    with sqlite3.connect(path) as conn:
        return cast(
            "int", conn.execute("SELECT count(*) FROM case_results WHERE run_id = ?", (run_id,)).fetchone()[0]
        )


def test_wal_mode_and_run_lookup(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "store.sqlite"
    store = Store(path)
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.begin_run("r1", "key1", tmp_path / "out")
    store.begin_run("r2", "key2", tmp_path / "out")
    assert store.latest_run_for(tmp_path / "out") == ("r2", "key2")
    assert store.latest_run_for(tmp_path / "elsewhere") is None
    assert store.run_key_of("r1") == "key1" and store.run_key_of("nope") is None
    store.close()


def test_results_are_committed_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = Store(path, batch_rows=3, batch_seconds=3600)
    store.begin_run("r1", "k", tmp_path)
    store.add_result("r1", "a", "{}")
    store.add_result("r1", "b", "{}")
    assert _committed(path) == 0  # another connection sees nothing until the batch is full
    store.add_result("r1", "c", "{}")
    assert _committed(path) == 3
    store.add_result("r1", "d", '{"x": 1}')
    store.flush()
    assert _committed(path) == 4
    assert store.results("r1")["d"] == '{"x": 1}'
    store.close()


def test_old_batches_commit_on_the_next_result(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = Store(path, batch_rows=1000, batch_seconds=0.0)
    store.add_result("r1", "a", "{}")
    assert _committed(path) == 1
    store.close()


def test_sigkill_loses_at_most_the_uncommitted_batch(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from gate.run.store import Store
        store = Store(Path({str(path)!r}), batch_rows=10, batch_seconds=3600)
        for i in range(25):
            store.add_result("r1", f"case-{{i}}", "{{}}")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9
    assert _committed(path) == 20


def test_another_thread_can_use_its_own_connection_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = Store(path)
    store.add_result("r1", "a", "{}")

    def judge_cache() -> None:
        conn = connect(path)
        with conn:
            conn.execute("CREATE TABLE IF NOT EXISTS cache_probe (k TEXT PRIMARY KEY, v TEXT)")
            conn.execute("INSERT INTO cache_probe VALUES ('k', 'v')")
        conn.close()

    worker = threading.Thread(target=judge_cache)
    worker.start()
    worker.join()
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT v FROM cache_probe").fetchone() == ("v",)


def test_run_key_depends_on_dataset_config_and_shard() -> None:
    key = run_key("d", "c", None)
    assert key == run_key("d", "c", None)
    assert len({key, run_key("d2", "c", None), run_key("d", "c2", None), run_key("d", "c", (1, 2))}) == 4


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(UsageError, match="run.store"):
        Store(path)
