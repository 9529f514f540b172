"""The judge cache: validated verdicts in the SQLite store, keyed by (model, prompt sha256, input sha256).

The table ``judge_cache`` lives in the run store's database file (or ``judge.cache_path``)
beside the runner's own tables. Each thread opens its own connection (sqlite3 connections
are not shared across threads); the database is in WAL mode so readers and the writer do not
block each other. Only validated replies are stored: a failed judge call is retried on the
next run rather than frozen.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.core.errors import DataError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_cache (
    model TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    input_sha256 TEXT NOT NULL,
    reply_json TEXT NOT NULL,
    raw_json TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    PRIMARY KEY (model, prompt_sha256, input_sha256)
)
"""


@dataclass(frozen=True)
class CachedVerdict:
    reply: dict[str, Any]  # the validated reply object
    raw: list[str]  # the judge's raw reply texts (two when a repair was needed)
    input_tokens: int
    output_tokens: int


class JudgeCache:
    """Thread-safe access to ``judge_cache`` in the database at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            conn = self._connection()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            conn.commit()
        except sqlite3.Error as exc:
            raise DataError(f"{self.path}: cannot open the judge cache: {exc}") from None

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def get(self, model: str, prompt_sha256: str, input_sha256: str) -> CachedVerdict | None:
        row = (
            self._connection()
            .execute(
                "SELECT reply_json, raw_json, input_tokens, output_tokens FROM judge_cache"
                " WHERE model = ? AND prompt_sha256 = ? AND input_sha256 = ?",
                (model, prompt_sha256, input_sha256),
            )
            .fetchone()
        )
        if row is None:
            return None
        return CachedVerdict(json.loads(row[0]), json.loads(row[1]), int(row[2]), int(row[3]))

    def put(self, model: str, prompt_sha256: str, input_sha256: str, verdict: CachedVerdict) -> None:
        conn = self._connection()
        with conn:
            conn.execute(
                "INSERT OR REPLACE INTO judge_cache VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    model,
                    prompt_sha256,
                    input_sha256,
                    json.dumps(verdict.reply, sort_keys=True),
                    json.dumps(verdict.raw),
                    verdict.input_tokens,
                    verdict.output_tokens,
                ),
            )

    def count(self) -> int:
        return int(self._connection().execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
