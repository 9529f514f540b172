"""The SQLite store: per-case results of runs, so a killed run can be resumed.

One database file (``run.store``, default ``.ragproof/store.sqlite``) in WAL mode. Tables:

- ``runs``: one line per run started: run id, run key, output directory, start time;
- ``case_results``: one finished row (rows.jsonl JSON) per (run id, case id).

The run key is the sha256 of (dataset sha256, config hash, shard): a run may only be resumed
by a run with the same key. Results are buffered and committed in batches (every
``batch_rows`` rows or ``batch_seconds`` seconds, whichever comes first, and on
:meth:`flush`), which keeps a commit per case off the critical path; a SIGKILL loses at most
the uncommitted batch, and resuming re-runs exactly those cases.

The judge cache lives in its own tables of the same file, each thread opening its own
connection (``sqlite3`` connections are not shared across threads).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from gate.core.errors import UsageError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    run_key TEXT NOT NULL,
    out_dir TEXT NOT NULL,
    started_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_out_dir ON runs (out_dir, started_at);
CREATE TABLE IF NOT EXISTS case_results (
    run_id TEXT NOT NULL,
    case_id TEXT NOT NULL,
    row_json TEXT NOT NULL,
    PRIMARY KEY (run_id, case_id)
);
"""


def run_key(dataset_sha256: str, config_hash: str, shard: tuple[int, int] | None) -> str:
    """sha256 identifying what a run computes: same key, same rows (timings aside)."""
    shard_text = f"{shard[0]}/{shard[1]}" if shard else "-"
    return hashlib.sha256(f"{dataset_sha256}\n{config_hash}\n{shard_text}".encode()).hexdigest()


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the store at ``path`` in WAL mode (creating the file and its directory)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a commit survives a process kill; only an OS crash may lose the last ones.
        conn.execute("PRAGMA synchronous=NORMAL")
    except (OSError, sqlite3.Error) as exc:
        raise UsageError(f"run.store: cannot open {path}: {exc}") from None
    return conn


class Store:
    def __init__(self, path: Path, *, batch_rows: int = 64, batch_seconds: float = 0.1) -> None:
        self.path = path
        self._conn = connect(path)
        try:
            self._conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"run.store: {path} is not a ragproof store: {exc}") from None
        self._batch_rows = batch_rows
        self.batch_seconds = batch_seconds
        self._pending: list[tuple[str, str, str]] = []
        self._last_commit = time.monotonic()

    def begin_run(self, run_id: str, key: str, out_dir: Path) -> None:
        started = datetime.now(UTC).isoformat(timespec="microseconds")
        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO runs (run_id, run_key, out_dir, started_at) VALUES (?, ?, ?, ?)",
                (run_id, key, str(out_dir.resolve()), started),
            )

    def latest_run_for(self, out_dir: Path) -> tuple[str, str] | None:
        """(run id, run key) of the last run started with this output directory."""
        row = self._conn.execute(
            "SELECT run_id, run_key FROM runs WHERE out_dir = ? ORDER BY started_at DESC LIMIT 1",
            (str(out_dir.resolve()),),
        ).fetchone()
        return (row[0], row[1]) if row else None

    def run_key_of(self, run_id: str) -> str | None:
        row = self._conn.execute("SELECT run_key FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def add_result(self, run_id: str, case_id: str, row_json: str) -> None:
        """Buffer a finished case; commits when the batch is full or old enough."""
        self._pending.append((run_id, case_id, row_json))
        if (
            len(self._pending) >= self._batch_rows
            or time.monotonic() - self._last_commit >= self.batch_seconds
        ):
            self.flush()

    def flush(self) -> None:
        """Commit every buffered result."""
        if self._pending:
            with self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO case_results (run_id, case_id, row_json) VALUES (?, ?, ?)",
                    self._pending,
                )
            self._pending.clear()
        self._last_commit = time.monotonic()

    def results(self, run_id: str) -> dict[str, str]:
        """Committed rows of a run: case id -> row JSON."""
        cursor = self._conn.execute("SELECT case_id, row_json FROM case_results WHERE run_id = ?", (run_id,))
        return dict(cursor.fetchall())

    def close(self) -> None:
        self.flush()
        self._conn.close()
