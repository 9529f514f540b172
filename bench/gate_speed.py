"""Gate speed: ``ragproof compare`` end to end vs scipy.stats.bootstrap vs a pure-Python loop.

Workload: 10,000 cases, 8 metrics (some cases unscored, so pair sets differ per metric),
10 overlapping tag slices, 10,000 resamples, 95% percentile intervals. Every gate of the
comparison (8 metrics + the adapter-failure rate, on ``all``, ``kind=qa`` and the 10 slices)
is bootstrapped three ways:

- ragproof: ``ragproof compare BASE CAND --json`` as a subprocess (imports, artifact reading
  and validation, all gates, the JSON written);
- scipy: ``scipy.stats.bootstrap((b, c), mean-of-difference, paired=True, vectorized=True,
  method="percentile", n_resamples=10000)`` per gate on the already-paired arrays (the
  bootstrap alone, no reading), in a subprocess;
- Python loop: the textbook per-resample loop (``rng.randrange`` per draw), timed on one gate
  of 300 cases and extrapolated linearly in cases x resamples to the whole workload.

A second workload, ``--workload artifacts``, is what a real run writes: 10,000 cases, each
with a question, an expected answer, expected sources, five retrieved chunks of text, an
answer citing two of them, the dataset copy (``dataset.jsonl``) in both artifacts; 8 metrics
scored by the registry itself (the five retrieval metrics, citation validity, echo exact
match and token F1) on 10 overlapping tag slices. It times ``ragproof compare BASE CAND
--json`` end to end (best of ``--repeat`` runs, with peak memory) and its phases in one
process: imports, reading the two artifacts, the comparison, the JSON.

Peak memory is each subprocess's maximum resident set size. Usage::

    python bench/gate_speed.py [--workload synthetic|artifacts|both] [--cases 10000]
                               [--resamples 10000] [--quick] [--repeat 3]

``--quick`` times scipy on the gates of one metric and multiplies by the number of metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METRICS = (
    "retrieval.precision_at_k",
    "retrieval.recall_at_k",
    "retrieval.mrr",
    "retrieval.ndcg_at_k",
    "retrieval.hit_rate_at_k",
    "answer.exact_match",
    "answer.token_f1",
    "generation.citation_validity",
)
SLICES = 10
PEAK = "import resource, sys; print('peak_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"


def build_runs(root: Path, cases: int, seed: int = 0) -> None:
    from gate.metrics.aggregate import summarize
    from gate.model.artifact import DatasetInfo, Row, RunMeta, ToolInfo
    from gate.model.records import MetricResult
    from gate.run.artifact_io import write_artifact

    rng = random.Random(seed)
    rows = {"baseline": [], "candidate": []}
    for i in range(cases):
        tags = [f"slice:{s}" for s in range(SLICES) if rng.random() < 0.25]
        per_run = {"baseline": {}, "candidate": {}}
        for m, name in enumerate(METRICS):
            if m >= 5 and rng.random() < 0.2:  # answer metrics unscored on a fifth of the cases
                for run in per_run:
                    per_run[run][name] = MetricResult.skipped("case has no expected_answer")
                continue
            base = rng.random() if m in (2, 3, 6) else float(rng.random() < 0.7)
            cand = base if rng.random() < 0.9 else (rng.random() if m in (2, 3, 6) else 1.0 - base)
            per_run["baseline"][name] = MetricResult.scored(base)
            per_run["candidate"][name] = MetricResult.scored(cand)
        for run in rows:
            rows[run].append(
                Row(case_id=f"case-{i:05d}", kind="qa", tags=tags, status="ok", metrics=per_run[run])
            )
    for run, run_rows in rows.items():
        meta = RunMeta(
            run_id=run,
            created_at="2026-12-01T00:00:00Z",
            tool=ToolInfo(version="bench"),
            dataset=DatasetInfo(path="bench.jsonl", sha256="0" * 64, case_count=cases),
            config_hash="0" * 64,
            k=5,
            source_match="chunk",
            metrics=list(METRICS),
            slices=["kind", "tags"],
        )
        write_artifact(root / run, meta, run_rows, summarize(run_rows, list(METRICS), ["kind", "tags"]))


ARTIFACT_METRICS = (
    "retrieval.precision_at_k",
    "retrieval.recall_at_k",
    "retrieval.mrr",
    "retrieval.ndcg_at_k",
    "retrieval.hit_rate_at_k",
    "generation.citation_validity",
    "echo.exact_match",
    "answer.token_f1",
)
WORDS = ("retrieval", "answer", "source", "index", "token", "chunk", "policy", "billing", "refund")
WORDS += ("account", "invoice", "export", "limit", "quota", "region", "backup", "restore", "release")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def build_artifact_runs(root: Path, cases: int, seed: int = 0) -> None:
    """Two full run artifacts (rows with text, dataset copies), scored by the registry's metrics."""
    from gate.metrics import registry
    from gate.metrics.aggregate import summarize
    from gate.metrics.base import ScoringContext
    from gate.model.artifact import DatasetInfo, Row, RunMeta, ToolInfo
    from gate.model.config import ScoringSettings
    from gate.model.dataset import Case, dataset_sha256
    from gate.model.records import Answer, CaseOutput, Chunk
    from gate.run.artifact_io import write_artifact
    from gate.run.scoring import score_case

    registry()
    rng = random.Random(seed)
    ctx = ScoringContext(settings=ScoringSettings(k=5))
    dataset: list[Case] = []
    for i in range(cases):
        doc = f"doc-{i % 2000:04d}"
        dataset.append(
            Case(
                id=f"case-{i:05d}",
                question=_text(rng, 14) + "?",
                expected_answer=_text(rng, 8),
                expected_source_ids=[f"{doc}#0", f"{doc}#1"],
                tags=[f"slice:{s}" for s in range(SLICES) if rng.random() < 0.25],
                metadata={"source": doc, "topic": f"topic-{i % 12}"},
            )
        )
    sha = dataset_sha256(dataset)
    for run in ("baseline", "candidate"):
        run_rng = random.Random(f"{seed}-{run}")
        rows = []
        for case in dataset:
            doc = case.metadata["source"]
            hits = [f"{doc}#{j}" for j in range(2) if run_rng.random() < 0.7]
            others = [f"doc-{run_rng.randrange(2000):04d}#{run_rng.randrange(4)}" for _ in range(5)]
            ids = (hits + others)[:5]
            run_rng.shuffle(ids)
            chunks = [
                Chunk(
                    id=cid,
                    text=_text(run_rng, 60),
                    score=round(1 - j / 10, 3),
                    metadata={"document_id": cid.split("#")[0]},
                )
                for j, cid in enumerate(ids)
            ]
            expected = case.expected_answer or ""
            answer_text = expected if run_rng.random() < 0.5 else _text(run_rng, 30)
            answer = Answer(
                text=answer_text,
                citations=[ids[0], ids[1]] if run_rng.random() < 0.9 else [ids[0], "nowhere"],
            )
            output = CaseOutput(retrieved=chunks, answer=answer, supports_retrieve=True, supports_answer=True)
            rows.append(
                Row.of(
                    case,
                    output,
                    score_case(case, output, ctx, ARTIFACT_METRICS),
                    position=len(rows),
                    latency_ms=round(run_rng.uniform(20, 400), 3),
                )
            )
        meta = RunMeta(
            run_id=run,
            created_at="2026-12-01T00:00:00Z",
            tool=ToolInfo(version="bench"),
            dataset=DatasetInfo(path="bench.jsonl", sha256=sha, case_count=cases),
            config_hash="0" * 64,
            k=5,
            source_match="chunk",
            metrics=list(ARTIFACT_METRICS),
            slices=["kind", "tags"],
        )
        summary = summarize(rows, list(ARTIFACT_METRICS), ["kind", "tags"])
        write_artifact(root / run, meta, rows, summary, cases=dataset)


def write_config(root: Path, resamples: int) -> Path:
    path = root / "ragproof.yaml"
    path.write_text(
        "version: 1\ndataset: bench.jsonl\nadapter: {type: replay, path: replay.jsonl}\n"
        f"gate: {{resamples: {resamples}, slices: [kind, tags]}}\n"
    )
    return path


def run_timed(code: str, *args: str) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("peak_kb")]
    if proc.returncode not in (0, 1) or not peak:
        raise SystemExit(f"benchmark step failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, peak[0], proc.stdout


SCIPY = f"""
import json, sys, time
import numpy as np
from scipy.stats import bootstrap
from gate.run.artifact_io import read_artifact
from gate.model.slices import slice_keys
root, resamples, only = sys.argv[1], int(sys.argv[2]), sys.argv[3]
base, cand = read_artifact(root + "/baseline"), read_artifact(root + "/candidate")
metrics = sorted({{n for r in cand.rows for n in r.metrics}})
if only != "all":
    metrics = metrics[: int(only)]
keys = {{}}
for i, r in enumerate(cand.rows):
    for k in slice_keys(r, ["kind", "tags"]):
        keys.setdefault(k, []).append(i)
def value(r, n):
    m = r.metrics.get(n)
    return m.value if m is not None and m.status == "scored" else np.nan
def stat(b, c, axis):
    return np.mean(c - b, axis=axis)
start = time.perf_counter()
gates = 0
for n in metrics:
    b_all = np.array([value(r, n) for r in base.rows]); c_all = np.array([value(r, n) for r in cand.rows])
    for k, idx in keys.items():
        b, c = b_all[idx], c_all[idx]
        keep = ~np.isnan(b) & ~np.isnan(c)
        bootstrap((b[keep], c[keep]), stat, paired=True, vectorized=True, method="percentile",
                  n_resamples=resamples, batch=1000, random_state=0)
        gates += 1
print(json.dumps({{"seconds": time.perf_counter() - start, "gates": gates, "metrics": len(metrics)}}))
{PEAK}
"""


PHASES = f"""
import json, sys, time
t0 = time.perf_counter()
from gate.run.artifact_io import read_artifact
from gate.decision.compare import compare_runs
from gate.model.config import GateConfig
from gate.stats.counts import draw_ahead
t1 = time.perf_counter()
config = GateConfig(resamples=int(sys.argv[2]), slices=["kind", "tags"])
# as the command reads: the counts drawn ahead by a child meanwhile, the dataset copies by hash
ahead = draw_ahead(config.seed, int(sys.argv[3]), config.resamples)
base = read_artifact(sys.argv[1] + "/baseline", cases=False)
cand = read_artifact(sys.argv[1] + "/candidate", cases=False)
t2 = time.perf_counter()
comparison = compare_runs(base, cand, config, ahead=ahead)
t3 = time.perf_counter()
comparison.model_dump_json(indent=2)
t4 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "read": t2 - t1, "compare": t3 - t2, "json": t4 - t3}}))
{PEAK}
"""


def python_loop_seconds_per_draw(n: int = 300, resamples: int = 10_000) -> float:
    """Seconds per (case x resample) of the textbook loop, measured on one gate of ``n`` cases."""
    rng = random.Random(7)
    base = [float(rng.random() < 0.7) for _ in range(n)]
    cand = [b if rng.random() < 0.9 else 1.0 - b for b in base]
    start = time.perf_counter()
    diffs = [c - b for b, c in zip(base, cand, strict=True)]
    means = []
    for _ in range(resamples):
        sample = [diffs[rng.randrange(n)] for _ in range(n)]
        means.append(sum(sample) / n)
    means.sort()
    return (time.perf_counter() - start) / (n * resamples)


def compare_timed(root: Path, config: Path) -> tuple[float, int, str]:
    """``python -m gate compare ROOT/baseline ROOT/candidate -c CONFIG --json ROOT/decision.json``:
    the console script's process, timed from start to exit, with its peak resident set (KB)."""
    base, cand, out = (str(root / name) for name in ("baseline", "candidate", "decision.json"))
    command = [sys.executable, "-m", "gate", "compare", base, cand, "-c", str(config), "--json", out]
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out_file, stderr=err_file)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak RSS
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_file.seek(0)
        err_file.seek(0)
        stdout, stderr = out_file.read().decode(), err_file.read().decode()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"ragproof compare failed ({proc.returncode}): {stderr[-2000:]}")
    peak = usage.ru_maxrss
    return wall, peak, stdout


def artifacts_workload(cases: int, resamples: int, repeat: int) -> None:
    """The full-artifact workload: best-of-``repeat`` end-to-end compare, then its phases."""
    with tempfile.TemporaryDirectory(prefix="gate-bench-") as tmp:
        root = Path(tmp)
        build_artifact_runs(root, cases)
        config = write_config(root, resamples)
        runs = [compare_timed(root, config) for _ in range(repeat)]
        gates = len(json.loads((root / "decision.json").read_text())["gates"])
        _, _, phases_out = run_timed(PHASES, str(root), str(resamples), str(cases))
        phases = json.loads(phases_out)
        size = sum(f.stat().st_size for f in (root / "baseline").iterdir())
    walls = sorted(wall for wall, _, _ in runs)
    peak = max(peak for _, peak, _ in runs) / 1024
    print(
        f"artifacts workload: {cases} cases with text and dataset copies ({size / 1e6:.0f} MB an artifact), "
        f"{len(ARTIFACT_METRICS)} metrics, {SLICES} overlapping slices, {resamples} resamples; {gates} gates"
    )
    print(
        f"ragproof compare (end to end): best {walls[0]:.2f} s of {repeat} "
        f"({', '.join(f'{w:.2f}' for w in walls)}), peak {peak:.0f} MB"
    )
    print("ragproof phases (in one process): " + ", ".join(f"{n} {s:.2f} s" for n, s in phases.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("synthetic", "artifacts", "both"), default="both")
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="end-to-end runs of the artifacts workload")
    parser.add_argument("--quick", action="store_true", help="scipy on one metric's gates, extrapolated")
    args = parser.parse_args()
    if args.workload in ("artifacts", "both"):
        artifacts_workload(args.cases, args.resamples, args.repeat)
    if args.workload == "artifacts":
        return
    with tempfile.TemporaryDirectory(prefix="gate-bench-") as tmp:
        root = Path(tmp)
        build_runs(root, args.cases)
        config = write_config(root, args.resamples)
        out = root / "decision.json"
        wall, peak_ours, _ = compare_timed(root, config)
        decision = json.loads(out.read_text())
        gates = len(decision["gates"])
        bootstrapped = [g for g in decision["gates"] if g["metric"] != "adapter.failure_rate"]
        case_units = sum(g["n"] for g in bootstrapped)

        _, _, phases_out = run_timed(PHASES, str(root), str(args.resamples), str(args.cases))
        phases = json.loads(phases_out)
        _, peak_scipy, scipy_out = run_timed(
            SCIPY, str(root), str(args.resamples), "1" if args.quick else "all"
        )
        scipy = json.loads(scipy_out)
        scipy_seconds = scipy["seconds"] * (len(METRICS) / scipy["metrics"])
        loop_seconds = python_loop_seconds_per_draw() * case_units * args.resamples

    rows = [
        ("ragproof compare (end to end)", wall, peak_ours / 1024, "measured"),
        (
            "scipy.stats.bootstrap (bootstrap only)",
            scipy_seconds,
            peak_scipy / 1024,
            "extrapolated from 1 metric" if args.quick else "measured",
        ),
        ("pure-Python loop (bootstrap only)", loop_seconds, float("nan"), "extrapolated from n=300"),
    ]
    print(
        f"workload: {args.cases} cases, {len(METRICS)} metrics, {SLICES} overlapping slices (+ all, kind=qa), "
        f"{args.resamples} resamples; {gates} gates ({len(bootstrapped)} metric gates over {case_units} pairs)"
    )
    print(
        "ragproof phases (in one process): "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items())
    )
    print(f"{'method':42} {'seconds':>10} {'vs ragproof':>12} {'peak MB':>9}  note")
    for name, seconds, peak, note in rows:
        ratio = seconds / wall
        peak_text = f"{peak:9.0f}" if peak == peak else f"{'-':>9}"
        print(f"{name:42} {seconds:10.2f} {ratio:11.1f}x {peak_text}  {note}")


if __name__ == "__main__":
    main()
