"""Calibration of the gate's decisions by simulation: a reduced grid of bench/calibration.py.

Each cell decides R = 2,000 simulated pull requests with the gate's own interval code. Monte
Carlo tolerances: a coverage of 0.95 has a standard error of about 0.005 at R = 2,000, so the
acceptance bounds (coverage >= 0.93, one-sided null block rate <= 3.5%, a drop of 2.5 margins
passed in <= 5% of pull requests at n >= 20) sit three or more standard errors from the
values the bench measures at R = 10,000 (docs/methods.md).
"""

from __future__ import annotations

import pytest
from bench_helpers import load_bench

pytestmark = pytest.mark.slow

calibration = load_bench("calibration")

R = 2_000
SEED = 11
M = calibration.MARGIN

# (scenario, n): small n everywhere, where the percentile bootstrap failed; one large-n cell
# per interval family (Tango, t, the percentile bootstrap, cluster t).
GRID = [
    (s, n)
    for s in ("binary-5%", "binary-20%", "f1-like", "ndcg-like", "clustered+cluster_by")
    for n in (10, 20, 50)
] + [
    ("binary-5%", 300),
    ("ndcg-like", 300),
    ("clustered+cluster_by", 300),
    ("clustered-0/1+cluster_by", 50),
    ("clustered-0/1+cluster_by", 300),
]


@pytest.mark.parametrize("scenario,n", GRID)
def test_coverage_null_blocks_and_large_drops(scenario: str, n: int) -> None:
    s = calibration.SCENARIOS[scenario]
    zero = calibration.run_cell(s, n, 0.0, R, SEED)
    half = calibration.run_cell(s, n, -M / 2, R, SEED)
    drop = calibration.run_cell(s, n, -2.5 * M, R, SEED)
    for cell in (zero, half, drop):
        assert cell.covered >= 0.93, (cell.delta, cell.covered)
    assert zero.blocked <= 0.035
    if n >= 20:
        assert drop.passed <= 0.05
    # Nothing is ever decided on a zero-width interval: the unchanged sets have an interval too.
    assert "percentile" not in zero.methods and "bca" not in zero.methods


def test_bootstrap_cell_at_large_n() -> None:
    """F1-like at n = 1,000: the percentile bootstrap decides, and holds its level."""
    s = calibration.SCENARIOS["f1-like"]
    cell = calibration.run_cell(s, 1000, 0.0, R, SEED)
    assert cell.methods == {"bootstrap": R}
    assert cell.covered >= 0.93
    assert cell.blocked <= 0.035
    # Power to pass at true zero: about Φ(m√n/σ_d − 1.96) with σ_d ≈ 0.27 → 0.40.
    assert 0.33 <= cell.passed <= 0.48


def test_clustered_data_without_cluster_by_undercovers() -> None:
    """The failure that makes cluster_by default to the document id: case-level intervals on
    clustered data (clusters of 5, ICC 0.37) cover ~0.78 and block ~10% of unchanged sets."""
    s = calibration.SCENARIOS["clustered"]
    cell = calibration.run_cell(s, 50, 0.0, R, SEED)
    assert cell.covered < 0.85
    assert cell.blocked > 0.06


def test_power_to_pass_grows_as_the_formula_says() -> None:
    """0/1 metric, 5% flips: pass rate at true zero ≈ Φ(m√n/σ_d − 1.96), σ_d = √0.05."""
    s = calibration.SCENARIOS["binary-5%"]
    small = calibration.run_cell(s, 100, 0.0, R, SEED)
    large = calibration.run_cell(s, 1000, 0.0, R, SEED)
    assert small.passed <= 0.2  # formula: Φ(0.894 − 1.96) = 0.14
    assert 0.72 <= large.passed <= 0.86  # formula: Φ(2.83 − 1.96) = 0.81
