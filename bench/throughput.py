"""Runner throughput against a local HTTP pipeline that takes 50 ms per call.

For each concurrency (1, 8, 32, 64) this runs ``execute_run`` end to end — http adapter
(one ``/answer`` call per case, so a case takes exactly the pipeline's latency), every metric
scored, every case committed to the SQLite store, the artifact written — and prints cases/s
beside the ideal (concurrency / latency) and the efficiency. Beside it, the same load driven
the other common way: ``requests`` with a pooled session on a thread per in-flight case and
one SQLite commit per case. Goal: >= 85% of the ideal at concurrency 32.

The pipeline server runs in its own process (tests/servers/pipeline_server.py), as a real
pipeline would, so it does not compete with the client for the interpreter lock.

Usage: python bench/throughput.py [--latency-ms 50] [--seconds 2.5] [--levels 1,8,32,64]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "servers" / "pipeline_server.py"


def _start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--latency-ms", str(latency_ms)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{port}"


def _write_inputs(directory: Path, url: str, cases: int, concurrency: int, metrics: Any) -> Path:
    import yaml

    with open(directory / "cases.jsonl", "w", encoding="utf-8") as handle:
        for i in range(cases):
            case = {"id": f"c{i}", "question": f"ok: question {i}", "expected_source_ids": ["doc-1"]}
            handle.write(json.dumps(case) + "\n")
    config = {
        "dataset": "cases.jsonl",
        "adapter": {
            "type": "http",
            "url": url,
            "methods": ["answer"],
            "concurrency": concurrency,
            "timeout_s": 30,
            "retries": 0,
        },
        "run": {"k": 5, "store": str(directory / "store.sqlite"), "metrics": metrics},
    }
    path = directory / "ragproof.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def ragproof_rate(url: str, concurrency: int, cases: int, metrics: Any = "all") -> tuple[float, float]:
    """(cases/s while running cases, cases/s end to end including setup and the artifact)."""
    from gate.core.environment import Environment
    from gate.model.config import load_config
    from gate.run.runner import execute_run

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        config = load_config(_write_inputs(directory, url, cases, concurrency, metrics))
        env = Environment(variables={}, cwd=directory)
        started = time.perf_counter()
        outcome = execute_run(config, env, directory / "run", progress=False)
        elapsed = time.perf_counter() - started
        assert outcome.status == "complete" and outcome.failures == 0, outcome
    return cases / outcome.loop_s, cases / elapsed


def threads_rate(url: str, concurrency: int, cases: int) -> float:
    """The comparison: requests + a thread per in-flight case + a SQLite commit per case."""
    import threading

    import requests
    from requests.adapters import HTTPAdapter

    session = requests.Session()
    session.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=concurrency))
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "store.sqlite", check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE results (case_id TEXT PRIMARY KEY, row_json TEXT)")

        def one(i: int) -> None:
            answer = session.post(f"{url}/answer", json={"question": f"ok: question {i}"}, timeout=30).json()
            row = json.dumps({"answer": answer})
            with lock, conn:
                conn.execute("INSERT INTO results VALUES (?, ?)", (f"c{i}", row))

        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, range(cases)))
        elapsed = time.perf_counter() - started
        conn.close()
    return cases / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=2.5, help="target duration of each measurement")
    parser.add_argument("--levels", default="1,8,32,64")
    parser.add_argument("--no-threads", action="store_true", help="skip the requests+threads comparison")
    parser.add_argument(
        "--metrics", default="all", help="'all' (default) or comma-separated metric names to score"
    )
    args = parser.parse_args()
    latency = args.latency_ms / 1000.0
    metrics: Any = "all" if args.metrics == "all" else args.metrics.split(",")
    sys.path.insert(0, str(ROOT))
    server, url = _start_server(args.latency_ms)
    try:
        print(
            f"pipeline latency {args.latency_ms:g} ms per call, {os.cpu_count()} CPUs, metrics: {args.metrics}"
        )
        header = (
            f"{'concurrency':>11}  {'ideal/s':>8}  {'ragproof/s':>10}  {'efficiency':>10}  {'end-to-end':>10}"
        )
        if not args.no_threads:
            header += f"  {'threads/s':>9}  {'efficiency':>10}"
        print(header)
        for level in (int(x) for x in args.levels.split(",")):
            ideal = level / latency
            cases = max(20, int(ideal * args.seconds))
            ours, whole = ragproof_rate(url, level, cases, metrics)
            line = f"{level:>11}  {ideal:>8.1f}  {ours:>10.1f}  {ours / ideal:>10.1%}  {whole / ideal:>10.1%}"
            if not args.no_threads:
                theirs = threads_rate(url, level, cases)
                line += f"  {theirs:>9.1f}  {theirs / ideal:>10.1%}"
            print(line, flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
