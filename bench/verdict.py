"""The verdict as a whole, by simulation: silence, monotonicity, reviews over the family, power.

Every replicate builds two runs (:func:`runs`) and decides them with ``compare_runs`` at the
default gate settings (margin 0.02, 95%, family-wise blocks, reviews at false-discovery level
0.10, ``cluster_by: auto``), with ``--resamples`` bootstrap resamples (2,000 by default: only
the family's max-statistic and bootstrap-method gates resample, and fewer resamples only add
quantile noise to them). Headline scenarios are also run through the real ``ragproof compare
--json`` on written artifacts for their first ``--cli`` replicates, and each must give the
same verdict as the in-process path.

The data: ``n`` cases (200 unless said) in 6 topic slices (``tags=topic:t0`` holds 20 cases,
the rest share the others evenly), each case answered right in the baseline with probability
0.7. One latent "answered right" per case and run drives every metric: ``M`` metrics, half 0/1
(the latent, except 0 on a fixed 10% of the cases that metric misses), half continuous (a fixed
Beta(5, 1.5) value ``h`` when right, ``h`` times a fixed Beta(1, 4) share when wrong), so every
metric changes on the cases whose answer changed, the metrics are strongly correlated, and a
lost answer never raises any metric (a larger drop is larger in every metric). ``churn`` is the share
of cases whose answer changes with no net effect (right->wrong on ``churn/2/0.7`` of the right
ones, wrong->right on ``churn/2/0.3`` of the wrong ones); a drop then turns ``lost`` right
answers wrong (on one slice, or anywhere). Metrics: 6 (48 gates: all, kind=qa and 6 topics)
or 15 (120 gates), plus ``adapter.failure_rate``.

Scenarios (``--scenario``; default all) and what each reports, with Wilson 95% intervals:

- ``null``: no change, 12.6% churn, 48 and 120 gates: P(review), P(block), the causes;
- ``slice``: the 20-case slice loses 8 (-0.40) or 5 (-0.25), no churn and 10% churn;
- ``whole``: 60 cases lose 6 (-0.10) with no churn; 200 cases lose 20 (-0.10) with 10% churn;
- ``monotone``: per replicate one dataset (5% churn), k = 0..10 answers lost on the 20-case
  slice; the overall rank (verified 0 < no regression / worse unconfirmed 1 < review 2 <
  block 3) must never drop as k grows;
- ``clusters``: 8 documents x 6 questions, ``cluster_by: auto``, no change, paired differences
  with intra-document correlation 0.38 (80% of pairs change, each document leaning one way):
  P(block), coverage of the true zero;
- ``power``: one 0/1 metric at n = pairs_needed for churn 1%, 5%, 10%, no change: P(pass),
  and the exact probability from the counts' distribution;
- never silent: over every replicate of every scenario, a gating gate whose interval lies
  wholly below zero must leave the verdict review, block or ``worse_unconfirmed``.

Usage::

    nice -n 10 python bench/verdict.py [--replicates 300] [--resamples 2000] [--cli 10]
                                       [--scenario null slice whole monotone clusters power]
                                       [--only TEXT]

``--only TEXT`` keeps, of the ``null``, ``slice`` and ``whole`` scenarios, the runs whose label
contains TEXT (``--scenario whole --only 200`` runs the 200-case drop alone). Each run draws from
its own seed, so skipping the others changes no figure, and the first R replicates of a longer
run are the R replicates of a shorter one: same seed and options, same figures.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate.decision.compare import compare_runs
from gate.decision.comparison import Comparison
from gate.metrics.aggregate import summarize
from gate.model.artifact import DatasetInfo, Row, RunArtifact, RunMeta, Summary, ToolInfo
from gate.model.config import GateConfig
from gate.model.records import MetricResult
from gate.run.artifact_io import write_artifact
from gate.stats import pairs_needed

SLICES = ["kind", "tags"]
RANK = {
    "verified_within_margin": 0,
    "no_regression_detected": 1,
    "worse_unconfirmed": 1,
    "review": 2,
    "block": 3,
}


@dataclass(frozen=True)
class Design:
    """The cases of one scenario: their slice (topic index) and document."""

    n: int = 200
    metrics: int = 6
    small: int = 20  # cases of topic t0
    documents: int | None = None  # cases per document when clustered (metadata.document_id)


def topics(design: Design) -> np.ndarray:
    rest = np.arange(design.n - design.small) % 5 + 1
    return np.concatenate([np.zeros(design.small, dtype=int), rest])


def latent(
    design: Design, churn: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(baseline right, candidate right, topic) with symmetric churn and no drop yet."""
    base = rng.random(design.n) < 0.7
    u = rng.random(design.n)
    flip = np.where(base, u < churn / 2 / 0.7, u < churn / 2 / 0.3)
    return base, base ^ flip, topics(design)


def lose(cand: np.ndarray, where: np.ndarray, lost: int, rng: np.random.Generator) -> np.ndarray:
    """``cand`` with ``lost`` right answers among ``where`` turned wrong (as many as there are)."""
    right = np.flatnonzero(cand & where)
    out = cand.copy()
    out[rng.permutation(right)[:lost]] = False
    return out


def metric_values(right: np.ndarray, fixed: dict[str, np.ndarray], j: int) -> np.ndarray:
    """Metric ``j`` of every case given its answer is ``right``: a lost answer never raises it."""
    if j % 2 == 0:
        return (right & ~fixed["miss"][j]).astype(float)
    return np.where(right, fixed["high"][j], fixed["high"][j] * fixed["shrink"][j])


def fixed_parts(design: Design, rng: np.random.Generator) -> dict[str, np.ndarray]:
    shape = (design.metrics, design.n)
    return {
        "miss": rng.random(shape) < 0.1,
        "high": rng.beta(5, 1.5, shape),
        "shrink": rng.beta(1, 4, shape),
    }


def names(design: Design) -> list[str]:
    return [f"sim.{'binary' if j % 2 == 0 else 'graded'}_{j:02d}" for j in range(design.metrics)]


def build(
    design: Design,
    values: dict[str, list[np.ndarray]],
    topic: np.ndarray,
    documents: np.ndarray | None = None,
) -> tuple[RunArtifact, RunArtifact]:
    """Two run artifacts from per-run metric columns (``values[run][j]``)."""
    metric_names = names(design)
    out = []
    for run in ("baseline", "candidate"):
        rows = [
            Row(
                case_id=f"c{i:04d}",
                position=i,
                kind="qa",
                tags=[f"topic:t{topic[i]}"],
                metadata={"document_id": f"d{documents[i]}"} if documents is not None else {},
                status="ok",
                metrics={
                    name: MetricResult.scored(float(values[run][j][i])) for j, name in enumerate(metric_names)
                },
            )
            for i in range(design.n)
        ]
        meta = RunMeta(
            run_id=run,
            created_at="2026-12-01T00:00:00Z",
            tool=ToolInfo(version="bench"),
            dataset=DatasetInfo(path="bench.jsonl", sha256="0" * 64, case_count=design.n),
            config_hash="0" * 64,
            k=5,
            source_match="chunk",
            metrics=metric_names,
            slices=SLICES,
        )
        summary: Summary = summarize(rows, metric_names, SLICES)
        out.append(RunArtifact(meta=meta, rows=rows, summary=summary))
    return out[0], out[1]


def runs(
    design: Design, churn: float, lost: int, rng: np.random.Generator, *, on_slice: bool = True
) -> tuple[RunArtifact, RunArtifact]:
    """One replicate: ``lost`` answers turned wrong on the 20-case slice (or anywhere)."""
    base, cand, topic = latent(design, churn, rng)
    where = topic == 0 if on_slice else np.ones(design.n, dtype=bool)
    cand = lose(cand, where, lost, rng)
    fixed = fixed_parts(design, rng)
    values = {
        "baseline": [metric_values(base, fixed, j) for j in range(design.metrics)],
        "candidate": [metric_values(cand, fixed, j) for j in range(design.metrics)],
    }
    return build(design, values, topic)


def wilson(k: int, n: int) -> str:
    """``k/n = p [lo, hi]`` with the Wilson 95% interval."""
    if n == 0:
        return "0/0"
    z = 1.959964
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{k}/{n} = {p:.3f} [{max(0.0, centre - half):.3f}, {min(1.0, centre + half):.3f}]"


class Tally:
    """Verdicts of one scenario, and the never-silent check over every replicate."""

    silent: list[str] = []  # replicates where a gate was wholly below zero and nothing said so
    checked = 0

    def __init__(self, label: str) -> None:
        self.label = label
        self.causes: Counter[str] = Counter()
        self.decisions: Counter[str] = Counter()
        self.n = 0

    def add(self, result: Comparison) -> None:
        self.n += 1
        self.causes[str(result.verdict.cause)] += 1
        self.decisions[result.verdict.decision] += 1
        if any(g.gating and g.hi is not None and g.hi < 0 for g in result.gates):
            Tally.checked += 1
            if result.verdict.decision == "pass" and result.verdict.cause != "worse_unconfirmed":
                Tally.silent.append(self.label)

    def line(self) -> str:
        causes = ", ".join(f"{c} {k}" for c, k in self.causes.most_common())
        unqualified = self.causes["verified_within_margin"] + self.causes["no_regression_detected"]
        return (
            f"{self.label}: pass (exit 0) {wilson(self.decisions['pass'], self.n)}; "
            f"unqualified pass {wilson(unqualified, self.n)}; review {wilson(self.decisions['review'], self.n)}; "
            f"block {wilson(self.decisions['block'], self.n)} ({causes})"
        )


def cli_verdict(base: RunArtifact, cand: RunArtifact, config: GateConfig, root: Path) -> dict[str, object]:
    """``ragproof compare --json`` on the two runs written as artifacts; its verdict."""
    for art in (base, cand):
        write_artifact(root / art.meta.run_id, art.meta, art.rows, art.summary)
    (root / "ragproof.yaml").write_text(
        "version: 1\ndataset: bench.jsonl\nadapter: {type: replay, path: replay.jsonl}\n"
        + f"gate: {json.dumps(config.model_dump(mode='json', exclude_defaults=True))}\n"
    )
    subprocess.run(
        [sys.executable, "-m", "gate", "compare", str(root / "baseline"), str(root / "candidate")]
        + [
            "--json",
            str(root / "decision.json"),
            "--config",
            str(root / "ragproof.yaml"),
            "--fail-on",
            "never",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    verdict: dict[str, object] = json.loads((root / "decision.json").read_text())["verdict"]
    return verdict


def scenario(
    label: str,
    make: Callable[[np.random.Generator], tuple[RunArtifact, RunArtifact]],
    config: GateConfig,
    replicates: int,
    cli: int,
    seed: int,
    only: str = "",
) -> Tally | None:
    """``replicates`` verdicts drawn from ``seed``; skipped (None) unless ``label`` contains ``only``."""
    if only not in label:
        return None
    rng = np.random.default_rng(seed)
    tally = Tally(label)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gate-verdict-") as tmp:
        for r in range(replicates):
            base, cand = make(rng)
            result = compare_runs(base, cand, config)
            tally.add(result)
            if r < cli:
                via_cli = cli_verdict(base, cand, config, Path(tmp))
                same = (via_cli["decision"], via_cli["cause"]) == (
                    result.verdict.decision,
                    result.verdict.cause,
                )
                if not same:
                    raise SystemExit(
                        f"{label}: the CLI decided {via_cli} where compare_runs decided {result.verdict}"
                    )
    print(
        f"{tally.line()} [{time.perf_counter() - start:.0f} s, {min(cli, replicates)} via the CLI]",
        flush=True,
    )
    return tally


def null_family(config: GateConfig, replicates: int, cli: int, only: str = "") -> None:
    for metrics in (6, 15):
        design = Design(metrics=metrics)
        gates = metrics * 8
        scenario(
            f"null, 12.6% churn, {gates} gates",
            lambda rng, d=design: runs(d, 0.126, 0, rng),
            config,
            replicates,
            cli,
            seed=metrics,
            only=only,
        )


def slice_drops(config: GateConfig, replicates: int, cli: int, only: str = "") -> None:
    design = Design()
    for lost in (8, 5):
        for churn in (0.0, 0.10):
            scenario(
                f"20-case slice loses {lost} (-{lost / 20:.2f}), churn {churn:.0%}",
                lambda rng, k=lost, c=churn: runs(design, c, k, rng),
                config,
                replicates,
                cli,
                seed=100 + lost + int(churn * 100),
            )


def whole_drops(config: GateConfig, replicates: int, cli: int, only: str = "") -> None:
    small = Design(n=60, small=10)
    scenario(
        "whole run of 60 loses 6 (-0.10), no churn",
        lambda rng: runs(small, 0.0, 6, rng, on_slice=False),
        config,
        replicates,
        cli,
        seed=200,
        only=only,
    )
    scenario(
        "whole run of 200 loses 20 (-0.10), churn 10%",
        lambda rng: runs(Design(), 0.10, 20, rng, on_slice=False),
        config,
        replicates,
        cli,
        seed=201,
        only=only,
    )


def monotone(config: GateConfig, replicates: int) -> None:
    """k = 0..10 answers lost on the 20-case slice of one dataset: the rank never drops."""
    design = Design()
    rng = np.random.default_rng(300)
    broken = 0
    ranks_seen: Counter[tuple[int, ...]] = Counter()
    start = time.perf_counter()
    for _ in range(max(1, replicates // 10)):
        base, cand0, topic = latent(design, 0.05, rng)
        fixed = fixed_parts(design, rng)
        order = rng.permutation(np.flatnonzero(cand0 & (topic == 0)))
        ranks = []
        for k in range(11):
            cand = cand0.copy()
            cand[order[:k]] = False
            values = {
                "baseline": [metric_values(base, fixed, j) for j in range(design.metrics)],
                "candidate": [metric_values(cand, fixed, j) for j in range(design.metrics)],
            }
            result = compare_runs(*build(design, values, topic), config)
            Tally("monotone").add(result)
            ranks.append(RANK[str(result.verdict.cause)])
        ranks_seen[tuple(ranks)] += 1
        broken += any(b < a for a, b in zip(ranks, ranks[1:], strict=False))
    datasets = sum(ranks_seen.values())
    print(
        f"monotone, k = 0..10 lost on the 20-case slice, 5% churn: rank dropped in {wilson(broken, datasets)} "
        f"datasets; most common rank sequences {ranks_seen.most_common(3)} [{time.perf_counter() - start:.0f} s]",
        flush=True,
    )


def clusters(config: GateConfig, replicates: int) -> None:
    """8 documents x 6 questions, no change, intra-document correlation 0.38 of the differences."""
    design = Design(n=48, metrics=1, small=8, documents=6)
    rng = np.random.default_rng(400)
    churn, lean = 0.8, math.sqrt(0.38 / 0.8)  # ICC = churn * lean²
    blocks = covered = 0
    tally = Tally("few clusters")
    start = time.perf_counter()
    documents = np.repeat(np.arange(8), 6)
    for _ in range(replicates):
        sign = np.where(rng.random(8) < 0.5, -lean, lean)[documents]
        u = rng.random(48)
        up = u < churn * (1 + sign) / 2
        down = ~up & (u < churn)
        base = np.where(up, 0.0, np.where(down, 1.0, (rng.random(48) < 0.7).astype(float)))
        cand = base + up - down
        values = {"baseline": [base], "candidate": [cand]}
        b, c = build(design, values, topics(design), documents)
        result = compare_runs(b, c, config)
        tally.add(result)
        [g] = [x for x in result.gates if x.slice == "all" and x.metric == "sim.binary_00"]
        blocks += g.decision == "block"
        covered += g.lo is not None and g.hi is not None and g.lo <= 0.0 <= g.hi
        method = (g.method, g.clusters)
    print(
        f"8 documents x 6 questions, ICC 0.38, no change ({method[0]}, {method[1]} clusters): "
        f"P(block) {wilson(blocks, replicates)}; coverage {wilson(covered, replicates)} "
        f"[{time.perf_counter() - start:.0f} s]",
        flush=True,
    )


def exact_pass(n: int, churn: float, margin: float = 0.02) -> float:
    """P(Tango's lower bound >= -margin) at no change, summed over the counts' distribution."""
    from scipy.stats import binom

    from gate.stats import tango_bounds

    total = 0.0
    discordant = np.arange(n + 1)
    weights = binom.pmf(discordant, n, churn)
    for d in np.flatnonzero(weights > 1e-10):
        b = np.arange(d + 1)
        lo, _ = tango_bounds(b, d - b, np.full(d + 1, n), 0.025)
        total += float(weights[d] * binom.pmf(b, d, 0.5)[lo >= -margin].sum())
    return total


def power(config: GateConfig, replicates: int) -> None:
    """At n = pairs_needed (from the true churn) and no change: how often one 0/1 gate passes."""
    for churn in (0.01, 0.05, 0.10):
        n = int(pairs_needed(math.sqrt(churn), 0.02, ternary=True))
        design = Design(n=n, metrics=1, small=n)
        rng = np.random.default_rng(500 + int(churn * 100))
        passes = 0
        start = time.perf_counter()
        for _ in range(replicates):
            base = rng.random(n) < 0.7
            u = rng.random(n)
            cand = base ^ np.where(base, u < churn / 2 / 0.7, u < churn / 2 / 0.3)
            values = {"baseline": [base.astype(float)], "candidate": [cand.astype(float)]}
            result = compare_runs(*build(design, values, np.zeros(n, dtype=int)), config)
            [g] = [x for x in result.gates if x.slice == "all" and x.metric == "sim.binary_00"]
            passes += g.decision == "pass"
        print(
            f"n = pairs_needed = {n} at churn {churn:.0%}, no change: P(pass) {wilson(passes, replicates)}; "
            f"exact {exact_pass(n, churn):.3f} [{time.perf_counter() - start:.0f} s]",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=300)
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument(
        "--cli", type=int, default=10, help="replicates of each headline scenario run via the CLI"
    )
    parser.add_argument(
        "--scenario",
        nargs="*",
        default=["null", "slice", "whole", "monotone", "clusters", "power"],
    )
    parser.add_argument(
        "--only", default="", help="of null, slice and whole, run only the labels containing this text"
    )
    args = parser.parse_args()
    config = GateConfig(resamples=args.resamples)
    if "null" in args.scenario:
        null_family(config, args.replicates, args.cli, args.only)
    if "slice" in args.scenario:
        slice_drops(config, args.replicates, args.cli, args.only)
    if "whole" in args.scenario:
        whole_drops(config, args.replicates, args.cli, args.only)
    if "monotone" in args.scenario:
        monotone(config, args.replicates)
    if "clusters" in args.scenario:
        clusters(config, args.replicates)
    if "power" in args.scenario:
        power(config, args.replicates)
    print(
        f"never silent: {len(Tally.silent)} of {Tally.checked} replicates with a gating gate wholly below zero "
        f"passed without naming it {Counter(Tally.silent).most_common(3)}"
    )


if __name__ == "__main__":
    main()
