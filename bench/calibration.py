"""Calibration of the gate's intervals and decisions by simulation (docs/methods.md, "Methods chosen by the data").

For every scenario of the grid -- a paired 0/1 metric with 5% and 20% of the pairs changed, an
F1-like metric, a sparse nDCG-like metric, clustered differences with and without clusters
given -- and every n in 10..1,000, ``R`` simulated pull requests are decided by the gate's own
code (``gate.stats.column_facts`` / ``column_bounds`` / ``bootstrap_means``: the same interval
chosen by the data as ``ragproof compare``) and counted:

- coverage: the two-sided interval ``[lo, hi]`` holds the true change, at true changes 0,
  -margin/2 and -2.5 margins;
- null block rate: a block (``hi < 0`` with at least ``minimum_nonzero`` non-zero units) when
  nothing changed;
- pass rate at true zero: ``lo >= -margin`` when nothing changed (the power to pass);
- large-drop pass rate: ``lo >= -margin`` at a true drop of 2.5 margins (must be rare).

The replicates of one cell are the columns of one matrix, so one call of ``bootstrap_means``
bootstraps all of them with one shared matrix of resample counts (each column's interval is
an ordinary bootstrap interval; the sharing only correlates the replicates' resamples).
Replicates in the bootstrap cells use ``BOOT_RESAMPLES`` resamples (the gate uses 10,000; fewer
resamples add quantile noise, which can only lower the measured coverage).

Usage::

    python bench/calibration.py [--replicates 10000] [--scenario NAME ...] [--n 10 20 ...]

``tests/decision/test_calibration.py`` runs a reduced grid of the same cells with Monte Carlo
tolerances.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate.stats import bootstrap_means, column_bounds, column_facts, minimum_nonzero

MARGIN = 0.02
CONFIDENCE = 0.95
TAIL = (1 - CONFIDENCE) / 2
BOOT_RESAMPLES = 2_000
N_GRID = (10, 20, 30, 50, 100, 300, 1000)
DELTAS = {"zero": 0.0, "half margin": -MARGIN / 2, "2.5 margins": -2.5 * MARGIN}
CLUSTER_SIZE = 5
REPLICATE_CHUNK = 2_000  # replicates bootstrapped together (memory: n x chunk floats, a few copies)


@dataclass(frozen=True)
class Scenario:
    name: str
    describe: str
    # (n, delta, replicates, rng) -> differences (n x replicates), oriented: positive = better
    draw: Callable[[int, float, int, np.random.Generator], np.ndarray]
    clustered: bool = False  # the data are clustered in groups of CLUSTER_SIZE
    use_clusters: bool = False  # the gate is told the clusters (cluster_by)


def _binary(flip: float) -> Callable[[int, float, int, np.random.Generator], np.ndarray]:
    """A 0/1 metric whose pairs change with probability ``flip``: P(+1) - P(-1) = delta."""

    def draw(n: int, delta: float, reps: int, rng: np.random.Generator) -> np.ndarray:
        up, down = (flip + delta) / 2, (flip - delta) / 2
        u = rng.random((n, reps))
        return np.where(u < up, 1.0, np.where(u < up + down, -1.0, 0.0))

    return draw


def _f1_mixture(zero_share: np.ndarray | float, u: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """F1-like values: 0 with ``zero_share``, 1 with 0.25, Beta(2, 3) otherwise."""
    return np.where(u < zero_share, 0.0, np.where(u < zero_share + 0.25, 1.0, beta))


def _f1_like(n: int, delta: float, reps: int, rng: np.random.Generator) -> np.ndarray:
    """25% zeros, 25% ones, Beta(2,3) between (mean 0.45); half the pairs keep their score,
    the other half draw afresh from a mixture whose zero share sets the true change:
    delta = 0.5 * (mean' - 0.45), mean' = 0.55 - 0.4 * zero_share'."""
    base = _f1_mixture(0.25, rng.random((n, reps)), rng.beta(2, 3, (n, reps)))
    zero_share = (0.55 - (0.45 + 2 * delta)) / 0.4
    fresh = _f1_mixture(zero_share, rng.random((n, reps)), rng.beta(2, 3, (n, reps)))
    changed = rng.random((n, reps)) < 0.5
    return np.where(changed, fresh - base, 0.0)


# Reciprocal-rank-like gains of a sparse ranking metric: rank 1..5 or a miss.
_GAINS = np.array([1.0, 1 / math.log2(3), 0.5, 1 / math.log2(5), 1 / math.log2(6), 0.0])
_RANKS = np.array([0.4, 0.075, 0.075, 0.075, 0.075, 0.3])
_GAIN_MEAN = float(_GAINS @ _RANKS)
_SPARSE_CHANGE = 0.15


def _ndcg_like(n: int, delta: float, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Sparse nDCG-like: 15% of the pairs are re-ranked, the rest keep their score exactly.
    A re-ranked case draws a fresh rank; with probability 1 - w it becomes a miss, so
    delta = 0.15 * mean * (w - 1)."""
    w = 1 + delta / (_SPARSE_CHANGE * _GAIN_MEAN)
    base = _GAINS[rng.choice(6, size=(n, reps), p=_RANKS)]
    fresh = _GAINS[rng.choice(6, size=(n, reps), p=_RANKS)]
    fresh = np.where(rng.random((n, reps)) < w, fresh, 0.0)
    changed = rng.random((n, reps)) < _SPARSE_CHANGE
    return np.where(changed, fresh - base, 0.0)


def _clustered(n: int, delta: float, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Clusters of 5 questions on one document: d = delta + u_cluster + e, sd 0.12 in all,
    intra-cluster correlation 0.37."""
    total = 0.12
    tau, sigma = total * math.sqrt(0.37), total * math.sqrt(0.63)
    k = n // CLUSTER_SIZE
    shared = np.repeat(rng.normal(0, tau, (k, reps)), CLUSTER_SIZE, axis=0)
    return delta + shared + rng.normal(0, sigma, (n, reps))


def _clustered_binary(n: int, delta: float, reps: int, rng: np.random.Generator) -> np.ndarray:
    """A 0/1 metric on clusters of 5 questions: a fifth of the documents are affected by the
    change and their questions change with probability 0.5 each (10% of pairs overall), the
    direction set so that P(+1) - P(-1) = delta."""
    k = n // CLUSTER_SIZE
    affected = np.repeat(rng.random((k, reps)) < 0.2, CLUSTER_SIZE, axis=0)
    shift = delta / 0.2  # within an affected document: P(+1) - P(-1)
    up, down = (0.5 + shift) / 2, (0.5 - shift) / 2
    u = rng.random((n, reps))
    d = np.where(u < up, 1.0, np.where(u < up + down, -1.0, 0.0))
    return np.where(affected, d, 0.0)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("binary-5%", "0/1 metric, 5% of pairs change", _binary(0.05)),
        Scenario("binary-20%", "0/1 metric, 20% of pairs change", _binary(0.20)),
        Scenario("f1-like", "F1-like: 25% zeros, 25% ones, Beta(2,3); half the pairs change", _f1_like),
        Scenario("ndcg-like", "sparse nDCG-like: 15% of pairs re-ranked", _ndcg_like),
        Scenario("clustered", "clusters of 5, ICC 0.37, without cluster_by", _clustered, clustered=True),
        Scenario(
            "clustered+cluster_by",
            "clusters of 5, ICC 0.37, with cluster_by",
            _clustered,
            clustered=True,
            use_clusters=True,
        ),
        Scenario(
            "clustered-0/1",
            "0/1 metric, clusters of 5, a fifth of documents changed, without cluster_by",
            _clustered_binary,
            clustered=True,
        ),
        Scenario(
            "clustered-0/1+cluster_by",
            "0/1 metric, clusters of 5, a fifth of documents changed, with cluster_by",
            _clustered_binary,
            clustered=True,
            use_clusters=True,
        ),
    )
}


@dataclass(frozen=True)
class Cell:
    scenario: str
    n: int
    delta: float
    replicates: int
    covered: float  # share of replicates whose [lo, hi] holds delta
    blocked: float  # share blocked (hi < 0 with enough non-zero units)
    passed: float  # share passed (lo >= -margin)
    methods: dict[str, int]  # method -> replicates decided with it


def decide_replicates(
    diffs: np.ndarray, clusters: np.ndarray | None, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(lo, hi, block, methods) for every column of ``diffs`` with the gate's own methods."""
    facts = column_facts(diffs, clusters=clusters)
    boot = None
    if facts.needs_bootstrap():
        boot = _bootstrap(diffs, facts.method, clusters, seed)
    lo = column_bounds(facts, boot, TAIL, upper=False)
    hi = column_bounds(facts, boot, TAIL, upper=True)
    block = (hi < 0) & (facts.nonzero >= minimum_nonzero(TAIL))
    return lo, hi, block, facts.method


def _bootstrap(diffs: np.ndarray, methods: list[str], clusters: np.ndarray | None, seed: int) -> object:
    """bootstrap_means over the columns that need it (the others are left empty, NaN)."""
    needed = np.array([m in ("bootstrap", "cluster-bootstrap") for m in methods])
    data = np.where(needed[None, :], diffs, np.nan)
    return bootstrap_means(
        data,
        resamples=BOOT_RESAMPLES,
        confidence=CONFIDENCE,
        seed=seed,
        clusters=clusters,
        keep_tail=TAIL,
    )


def run_cell(scenario: Scenario, n: int, delta: float, replicates: int, seed: int) -> Cell:
    rng = np.random.default_rng([seed, n, round(-delta * 1e6), len(scenario.name)])
    clusters = np.repeat(np.arange(n // CLUSTER_SIZE), CLUSTER_SIZE) if scenario.use_clusters else None
    covered = blocked = passed = 0
    methods: dict[str, int] = {}
    for start in range(0, replicates, REPLICATE_CHUNK):
        reps = min(REPLICATE_CHUNK, replicates - start)
        diffs = scenario.draw(n, delta, reps, rng)
        lo, hi, block, used = decide_replicates(diffs, clusters, seed + start)
        covered += int(np.count_nonzero((lo <= delta) & (delta <= hi)))
        blocked += int(np.count_nonzero(block))
        passed += int(np.count_nonzero(lo >= -MARGIN))
        for m in used:
            methods[m] = methods.get(m, 0) + 1
    return Cell(
        scenario.name,
        n,
        delta,
        replicates,
        covered / replicates,
        blocked / replicates,
        passed / replicates,
        methods,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=10_000)
    parser.add_argument("--scenario", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--n", nargs="*", type=int, default=list(N_GRID))
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    r = args.replicates
    print(
        f"R = {r} replicates per cell; margin {MARGIN}; 95% intervals; bootstrap cells {BOOT_RESAMPLES} resamples"
    )
    print(
        f"{'scenario':22} {'n':>5} {'cov@0':>6} {'cov@-m/2':>8} {'cov@-2.5m':>9} "
        f"{'block@0':>7} {'pass@0':>6} {'pass@-2.5m':>10}  methods"
    )
    for name in args.scenario:
        scenario = SCENARIOS[name]
        for n in args.n:
            start = time.perf_counter()
            cells = {label: run_cell(scenario, n, d, r, args.seed) for label, d in DELTAS.items()}
            zero, half, drop = cells["zero"], cells["half margin"], cells["2.5 margins"]
            used = {}
            for c in cells.values():
                for m, k in c.methods.items():
                    used[m] = used.get(m, 0) + k
            total = sum(used.values())
            method_text = ", ".join(
                f"{m} {k / total:.0%}" for m, k in sorted(used.items(), key=lambda x: -x[1])
            )
            print(
                f"{name:22} {n:5d} {zero.covered:6.3f} {half.covered:8.3f} {drop.covered:9.3f} "
                f"{zero.blocked:7.4f} {zero.passed:6.3f} {drop.passed:10.4f}  {method_text}"
                f"  ({time.perf_counter() - start:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
