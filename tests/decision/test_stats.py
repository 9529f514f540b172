"""gate.stats: the 001 worked example, agreement with scipy, simulations, determinism, memory."""

from __future__ import annotations

import hashlib
import math
import random
import subprocess
import sys
import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate import stats
from gate.stats import BootstrapResult, bootstrap_means, cohen_kappa, intervals, resampling


def paired(
    baseline: Sequence[float | None] | np.ndarray, candidate: Sequence[float | None] | np.ndarray, **kw: Any
) -> tuple[float, float, float]:
    """(mean, lo, hi) of the bootstrap of candidate - baseline (None/NaN: not a pair)."""
    b = np.array([np.nan if v is None else v for v in baseline], dtype=float)
    c = np.array([np.nan if v is None else v for v in candidate], dtype=float)
    r = bootstrap_means(c - b, **kw)
    return float(r.estimate[0]), float(r.lo[0]), float(r.hi[0])


def seed_systems() -> tuple[list[float], list[float]]:
    """001's two retriever configs on 300 questions, regenerated as the seed does."""
    rng = random.Random(1)
    base = [1.0 if rng.random() < 0.72 else 0.0 for _ in range(300)]
    cand = [b if rng.random() < 0.9 else 1.0 - b for b in base]
    return base, cand


# -- the worked example ---------------------------------------------------------------------


def test_kappa_of_the_200_labels() -> None:
    human = [1] * 150 + [0] * 50
    judge = [1] * 142 + [0] * 8 + [1] * 22 + [0] * 28
    # observed 0.85, expected 0.75*0.82 + 0.25*0.18 = 0.66 -> 0.19 / 0.34
    assert cohen_kappa(human, judge) == pytest.approx(19 / 34, abs=1e-12)
    assert round(cohen_kappa(human, judge), 3) == 0.559


def test_kappa_edge_cases() -> None:
    assert cohen_kappa(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))  # chance explains all agreement
    assert cohen_kappa([1, 0], [0, 1]) == -1.0
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 0])
    with pytest.raises(ValueError):
        cohen_kappa([], [])


def test_seed_systems_block_at_margin_002() -> None:
    base, cand = seed_systems()
    assert sum(base) / 300 == pytest.approx(0.717, abs=5e-4)
    assert sum(cand) / 300 == pytest.approx(0.673, abs=5e-4)
    mean, lo, hi = paired(base, cand)
    assert mean == pytest.approx(-13 / 300, abs=1e-12)  # -0.043
    # 001 prints [-0.077, -0.010] from another RNG; the Monte-Carlo error of a 2.5% quantile
    # with 10,000 resamples is about 0.001 here.
    assert lo == pytest.approx(-0.077, abs=0.006)
    assert hi == pytest.approx(-0.010, abs=0.006)
    assert hi < 0 and lo < -0.02  # wholly below zero, reaching below -margin: a block
    for seed in (1, 2, 3):
        _, lo_s, hi_s = paired(base, cand, seed=seed)
        assert hi_s < 0 and lo_s < -0.02


# -- agreement with scipy -------------------------------------------------------------------


def test_agrees_with_scipy_bootstrap() -> None:
    from scipy.stats import bootstrap

    rng = np.random.default_rng(42)
    for trial in range(3):
        base = rng.beta(2, 3, size=150)
        cand = np.clip(base + rng.normal(0.02, 0.1, size=150), 0, 1)
        mean, lo, hi = paired(base, cand, seed=trial)
        ref = bootstrap(
            (base, cand),
            lambda b, c, axis: np.mean(c - b, axis=axis),
            paired=True,
            vectorized=True,
            method="percentile",
            n_resamples=10_000,
            random_state=trial,
        )
        se = np.std(cand - base, ddof=1) / np.sqrt(150)
        assert mean == pytest.approx(np.mean(cand - base), abs=1e-12)
        # quantiles of 10,000 resamples differ by about 0.03 SE between generators
        assert lo == pytest.approx(ref.confidence_interval.low, abs=0.12 * se)
        assert hi == pytest.approx(ref.confidence_interval.high, abs=0.12 * se)


# -- simulations ----------------------------------------------------------------------------


def _synthetic(sets: int, n: int, flip: float, seed: int, *, null: bool = False) -> tuple[np.ndarray, float]:
    """``sets`` independent data sets of paired differences as columns, and the true mean."""
    rng = np.random.default_rng(seed)
    base = (rng.random((n, sets)) < 0.7).astype(float)
    if null:
        # Changed cases are redrawn from the same distribution: no true change.
        redraw = (rng.random((n, sets)) < 0.7).astype(float)
        cand = np.where(rng.random((n, sets)) < flip, redraw, base)
        return cand - base, 0.0
    cand = np.where(rng.random((n, sets)) < flip, 1 - base, base)
    return cand - base, flip * (0.3 - 0.7)


def test_coverage_of_95_percent_intervals() -> None:
    diffs, truth = _synthetic(1000, 200, 0.15, seed=7)
    result = bootstrap_means(diffs, resamples=2000, seed=11)
    covered = np.mean((result.lo <= truth) & (truth <= result.hi))
    assert covered >= 0.93, covered


def test_no_change_block_rate() -> None:
    diffs, _ = _synthetic(1000, 200, 0.2, seed=8, null=True)
    result = bootstrap_means(diffs, resamples=2000, seed=12)
    blocks = result.hi < 0  # a single gate blocks when its interval lies wholly below zero
    # nominal 2.5% (one side of a 95% interval) plus three binomial SEs over 1000 sets
    assert blocks.mean() <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 1000), blocks.mean()


def test_cluster_bootstrap_widens_for_grouped_questions() -> None:
    rng = np.random.default_rng(3)
    groups, size = 40, 10
    effect = np.repeat(rng.normal(0, 0.2, groups), size)  # questions of one document move together
    diffs = effect + rng.normal(0, 0.05, groups * size)
    labels = np.repeat(np.arange(groups), size)
    naive = bootstrap_means(diffs, resamples=4000, seed=1)
    grouped = bootstrap_means(diffs, resamples=4000, seed=1, clusters=labels)
    assert grouped.estimate[0] == pytest.approx(naive.estimate[0])
    width_naive = naive.hi[0] - naive.lo[0]
    width_grouped = grouped.hi[0] - grouped.lo[0]
    # design effect 1 + (m - 1) * ICC with ICC ~ 0.94: the SE grows about 3x
    assert width_grouped > 2 * width_naive
    assert int(grouped.units[0]) == groups


def test_cluster_coverage_holds_where_naive_fails() -> None:
    rng = np.random.default_rng(5)
    sets, groups, size = 300, 30, 8
    effect = np.repeat(rng.normal(0, 0.3, (groups, sets)), size, axis=0)
    diffs = effect + rng.normal(0, 0.1, (groups * size, sets))
    labels = np.repeat(np.arange(groups), size)
    naive = bootstrap_means(diffs, resamples=1000, seed=2)
    grouped = bootstrap_means(diffs, resamples=1000, seed=2, clusters=labels)

    def cover(r: BootstrapResult) -> float:
        return float(np.mean((r.lo <= 0) & (r.hi >= 0)))

    assert cover(grouped) >= 0.90
    assert cover(naive) < 0.75


# -- missing values, batching, determinism ---------------------------------------------------


def test_missing_values_drop_pairs() -> None:
    base = [1.0, None, 0.0, 1.0, 0.5, float("nan")] * 20
    cand = [1.0, 1.0, None, 0.0, 1.0, 1.0] * 20
    mean, lo, hi = paired(base, cand, resamples=4000)
    kept = [
        (b, c)
        for b, c in zip(base, cand, strict=True)
        if b is not None and c is not None and not math.isnan(b)
    ]
    assert mean == pytest.approx(sum(c - b for b, c in kept) / len(kept))
    _, lo2, hi2 = paired([b for b, _ in kept], [c for _, c in kept], resamples=4000)
    se = float(np.std([c - b for b, c in kept], ddof=1)) / math.sqrt(len(kept))
    assert lo == pytest.approx(lo2, abs=0.2 * se) and hi == pytest.approx(hi2, abs=0.2 * se)


def test_fraction_columns_match_the_float64_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(21)
    data = np.column_stack(
        [(rng.random(900) < 0.6) * 1.0 - (rng.random(900) < 0.5), rng.integers(0, 6, 900) / 5]
    )
    data = data.astype(float)
    data[::9, 1] = np.nan
    assert resampling._integer_scale(np.array([1.0, -1.0, 0.0]), 900) == 1
    assert resampling._integer_scale(np.array([0.2, -0.4, 0.6]), 900) == 5
    assert resampling._integer_scale(np.array([0.1234567]), 900) is None
    assert resampling._integer_scale(np.array([1.0]), 2**24) is None  # sums could leave float32's exact range
    fast = bootstrap_means(data, resamples=500, seed=8)
    monkeypatch.setattr(resampling, "_FRACTION_SCALES", ())  # force the float64 product
    slow = bootstrap_means(data, resamples=500, seed=8)
    assert np.allclose(fast.lo, slow.lo, rtol=0, atol=1e-12)
    assert np.allclose(fast.hi, slow.hi, rtol=0, atol=1e-12)
    assert np.allclose(fast.se, slow.se, rtol=0, atol=1e-12)


def test_sparse_float64_columns_match_the_dense_product(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    n = 600
    changed = rng.random((n, 2)) < 0.1  # most cases score the same in both runs
    diffs = np.where(changed, rng.random((n, 2)) - 0.5, 0.0)  # arbitrary reals: the float64 path
    in_slice = rng.random(n) < 0.3
    values = np.column_stack([diffs, np.where(in_slice[:, None], diffs, np.nan)])
    taken: list[Any] = []
    real_groups = resampling._sparse_groups

    def recording(rhs: np.ndarray) -> Any:
        taken.append(real_groups(rhs))
        return taken[-1]

    monkeypatch.setattr(resampling, "_sparse_groups", recording)
    sparse = bootstrap_means(values, resamples=700, seed=4)
    assert taken and taken[0] is not None and len(taken[0]) == 2  # one group per metric
    monkeypatch.setattr(resampling, "_sparse_groups", lambda rhs: None)
    dense = bootstrap_means(values, resamples=700, seed=4)
    for field in ("estimate", "lo", "hi", "se"):
        assert np.array_equal(getattr(sparse, field), getattr(dense, field), equal_nan=True), field


@pytest.mark.parametrize("clustered", [False, True])
def test_real_valued_columns_in_float32_limbs_match_the_float64_product(
    monkeypatch: pytest.MonkeyPatch, clustered: bool
) -> None:
    rng = np.random.default_rng(3)
    n = 900
    changed = rng.random((n, 3)) < 0.4
    # arbitrary reals of mixed signs and magnitudes (the float64 grid), mostly zero as paired
    # differences are, one column with a single huge value and a slice with missing values
    diffs = np.where(changed, (rng.random((n, 3)) - 0.5) * [1.0, 1e-7, 3e5], 0.0)
    diffs[17, 2] = -7.5e8
    in_slice = rng.random(n) < 0.3
    values = np.column_stack([diffs, np.where(in_slice[:, None], diffs, np.nan)])
    clusters = np.arange(n) // 4 if clustered else None
    split: list[Any] = []
    real_split = resampling._limb_split

    def recording(*args: Any) -> Any:
        split.append(real_split(*args))
        return split[-1]

    monkeypatch.setattr(resampling, "_limb_split", recording)
    limbs = bootstrap_means(values, resamples=700, seed=4, clusters=clusters)
    assert split and split[0] is not None and split[0][1] >= 3  # several limbs a column
    monkeypatch.setattr(resampling, "_limb_base", lambda n_units: 1)  # no limbs: float64
    dense = bootstrap_means(values, resamples=700, seed=4, clusters=clusters)
    assert split[-1] is None
    for field in ("estimate", "lo", "hi", "se"):
        assert np.array_equal(getattr(limbs, field), getattr(dense, field), equal_nan=True), field


def test_limbs_stay_in_float32_exact_range() -> None:
    assert resampling._limb_base(10_000) == 1024  # 10,000 * 1023 < 2^24 <= 10,000 * 2047
    assert resampling._limb_base(2**23) == 1  # one-bit digits would already overflow: none
    assert resampling._limb_base(1) == 2**23
    sums = np.array([[3.0 * 2**-40, -(2.0**-10)], [-(2.0**-40), 0.0]])
    steps = np.array([2.0**-40, 2.0**-40])
    matrix, limbs = resampling._limb_split(sums, steps, 1024) or (np.empty(0), 0)
    assert limbs == 4 and matrix.dtype == np.float32  # |m| = 2^30 needs 31 bits: 4 of 10
    assert np.abs(matrix).max() <= 1023
    once_each = np.ones((1, 2), dtype=np.float32) @ matrix  # a resample drawing each unit once
    joined = resampling._join_limbs(once_each.astype(np.float64), limbs, 1024, steps)
    assert np.array_equal(joined, sums.sum(axis=0, keepdims=True))
    assert resampling._limb_split(sums, np.array([2.0**-40, 0.0]), 1024) is None  # a column without a grid
    assert resampling._limb_split(sums + 2.0**-45, steps, 1024) is None  # values off the grid


def test_columns_share_resamples_and_batching_does_not_change_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(9)
    data = rng.random((700, 5))
    data[rng.random((700, 5)) < 0.2] = np.nan
    first = bootstrap_means(data, resamples=1000, seed=4)
    monkeypatch.setattr(resampling, "TASK_CELLS", 1)  # one block per task
    monkeypatch.setattr(resampling, "MAX_WORKERS", 1)
    monkeypatch.setattr(resampling, "COLUMN_GROUP", 2)
    second = bootstrap_means(data, resamples=1000, seed=4)
    for field in ("estimate", "lo", "hi", "se"):
        assert np.array_equal(getattr(first, field), getattr(second, field))
    # identical columns get identical intervals (common random numbers)
    twin = bootstrap_means(np.column_stack([data[:, 0], data[:, 0]]), resamples=1000, seed=4)
    assert twin.lo[0] == twin.lo[1] == first.lo[0]
    assert not np.array_equal(first.lo, bootstrap_means(data, resamples=1000, seed=5).lo)


_DIGEST = """
import hashlib, numpy as np
from gate.stats import bootstrap_means
dense = np.random.default_rng(0).random((3000, 37)) * 3 - 1
# binary and fifths columns take the float32 path, the rest the float64 one
data = np.column_stack([dense, (dense[:, :5] > 0).astype(float), np.round(dense[:, 5:9] * 5) / 5])
data[::7, 38] = np.nan
r = bootstrap_means(data, resamples=700, seed=3, clusters=np.arange(3000) // 3)
s = bootstrap_means(data, resamples=700, seed=3)
print(hashlib.sha256(r.lo.tobytes() + r.hi.tobytes() + s.lo.tobytes() + s.hi.tobytes()).hexdigest())
"""


@pytest.mark.slow
def test_deterministic_whatever_the_thread_count() -> None:
    digests = set()
    for threads in ("1", "2", "3"):
        env = {
            "OPENBLAS_NUM_THREADS": threads,
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "PATH": "",
        }
        out = subprocess.run(
            [sys.executable, "-c", _DIGEST], capture_output=True, text=True, env=env, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_worker_threads_run_blas_single_threaded_and_restore_it() -> None:
    blas = resampling._openblas_threads()
    if blas is None:
        pytest.skip("this numpy does not use OpenBLAS")
    get, put = blas
    before = get()
    put(2)
    try:
        with resampling._one_blas_thread():
            assert get() == 1
        assert get() == 2
    finally:
        put(before)


@pytest.mark.slow
def test_memory_stays_bounded_at_100k_cases() -> None:
    data = np.random.default_rng(1).random((100_000, 8))
    tracemalloc.start()
    try:
        bootstrap_means(data, resamples=256, seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 512 * 2**20, peak


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1, 1), min_size=2, max_size=40), st.integers(0, 2**32))
def test_interval_contains_estimate_and_is_ordered(values: list[float], seed: int) -> None:
    r = bootstrap_means(np.array(values), resamples=200, seed=seed)
    assert r.lo[0] <= r.hi[0]
    assert min(values) - 1e-9 <= r.lo[0] and r.hi[0] <= max(values) + 1e-9
    digest = hashlib.sha256(r.lo.tobytes()).hexdigest()
    assert (
        digest
        == hashlib.sha256(
            bootstrap_means(np.array(values), resamples=200, seed=seed).lo.tobytes()
        ).hexdigest()
    )


def test_constant_column_and_empty() -> None:
    r = bootstrap_means(np.full(30, 0.25), resamples=300)
    assert (r.lo[0], r.hi[0], r.estimate[0]) == pytest.approx((0.25, 0.25, 0.25))
    empty = bootstrap_means(np.full((5, 1), np.nan), resamples=100)
    assert math.isnan(empty.lo[0]) and empty.n[0] == 0
    with pytest.raises(ValueError):
        bootstrap_means(np.zeros(3), confidence=1.0)


# -- calibrated intervals ---------------------------------------------------------------------


def _tango_by_brute_force(b: int, c: int, n: int, z: float) -> tuple[float, float]:
    """Tango's interval from first principles: the constrained MLE by bounded 1-D maximisation
    of the trinomial likelihood, the score statistic, and its inversion on a fine grid."""
    from scipy.optimize import minimize_scalar

    def score(d: float) -> float:
        low, high = max(0.0, -d) + 1e-12, (1 - d) / 2 - 1e-12

        def nll(q: float) -> float:
            terms = [(b, q + d), (c, q), (n - b - c, 1 - 2 * q - d)]
            return -sum(k * math.log(p) for k, p in terms if k)

        q = minimize_scalar(nll, bounds=(low, high), method="bounded", options={"xatol": 1e-13}).x
        return (b - c - n * d) / math.sqrt(n * (2 * q + d - d * d))

    grid = np.linspace(-0.999, 0.999, 19981)
    inside = [d for d in grid if abs(score(float(d))) <= z]
    return float(min(inside)), float(max(inside))


@pytest.mark.slow
@pytest.mark.parametrize("b,c,n", [(3, 7, 50), (0, 9, 20), (12, 4, 300), (1, 0, 10)])
def test_tango_interval_matches_its_definition(b: int, c: int, n: int) -> None:
    lo, hi = stats.tango_bounds(b, c, n, 0.025)
    ref_lo, ref_hi = _tango_by_brute_force(b, c, n, 1.959963984540054)
    assert float(lo) == pytest.approx(ref_lo, abs=1e-4)  # grid step 1e-4
    assert float(hi) == pytest.approx(ref_hi, abs=1e-4)
    # swapping improvements and drops mirrors the interval
    lo2, hi2 = stats.tango_bounds(c, b, n, 0.025)
    assert (float(lo2), float(hi2)) == pytest.approx((-float(hi), -float(lo)), abs=1e-12)


def test_tango_with_no_discordant_pair_and_all_worsened() -> None:
    z2 = 1.959963984540054**2
    lo, hi = stats.tango_bounds([0, 0], [0, 0], [10, 1000], 0.025)
    assert lo.tolist() == pytest.approx([-z2 / (10 + z2), -z2 / (1000 + z2)], rel=1e-9)
    assert hi.tolist() == pytest.approx([z2 / (10 + z2), z2 / (1000 + z2)], rel=1e-9)
    lo, hi = stats.tango_bounds(0, 10, 10, 0.025)
    # every pair worsened: the lower end is -1; p(+1) may still be up to ~0.28, so hi ~ -0.44
    assert float(lo) == -1.0 and float(hi) == pytest.approx(-0.4449344, abs=1e-6)


def test_t_bounds_match_scipy_ttest() -> None:
    from scipy.stats import ttest_1samp

    rng = np.random.default_rng(4)
    d = rng.normal(-0.01, 0.2, size=(25, 1)) * rng.random((25, 1))
    facts = stats.column_facts(d)
    assert facts.method == ["t"]
    lo = stats.column_bounds(facts, None, 0.025, upper=False)[0]
    hi = stats.column_bounds(facts, None, 0.025, upper=True)[0]
    ref = ttest_1samp(d[:, 0], 0.0).confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12)


def test_cluster_t_with_equal_sizes_is_the_t_interval_on_cluster_means() -> None:
    from scipy.stats import ttest_1samp

    rng = np.random.default_rng(5)
    labels = np.repeat(np.arange(12), 4)
    d = (np.repeat(rng.normal(0, 0.1, 12), 4) + rng.normal(0, 0.05, 48))[:, None]
    facts = stats.column_facts(d, clusters=labels)
    assert facts.method == ["cluster-t"] and facts.units[0] == 12
    lo = stats.column_bounds(facts, None, 0.025, upper=False)[0]
    hi = stats.column_bounds(facts, None, 0.025, upper=True)[0]
    ref = ttest_1samp(d[:, 0].reshape(12, 4).mean(axis=1), 0.0).confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-10)


def test_methods_chosen_by_the_data() -> None:
    ternary = np.tile([1.0, -1.0, 0.0, 0.0], 50)[:, None]
    unchanged = np.zeros((200, 1))
    sparse = np.zeros((200, 1))
    sparse[:20, 0] = np.linspace(-0.5, 0.4, 20)
    dense = np.linspace(-0.3, 0.3, 200)[:, None]
    facts = stats.column_facts(np.hstack([ternary, unchanged, sparse, dense]))
    assert facts.method == ["tango", "no-change", "t", "bootstrap"]
    assert facts.nonzero.tolist() == [100, 0, 20, 200]  # linspace of even length skips 0
    # The unchanged set reports what 200 pairs can rule out, never [0, 0].
    nc = stats.column_facts(unchanged)
    z2 = 1.959963984540054**2
    assert stats.column_bounds(nc, None, 0.025, upper=False)[0] == pytest.approx(-z2 / (200 + z2))
    assert stats.column_facts(dense, method="percentile").method == ["percentile"]


def test_upper_quantile_reads_the_kept_tail_like_numpy() -> None:
    rng = np.random.default_rng(6)
    values = rng.normal(size=(80, 3))
    r = bootstrap_means(values, resamples=999, seed=3, keep_tail=0.025)
    full = bootstrap_means(values, resamples=999, seed=3, confidence=1 - 2 * 0.001)
    for j in range(3):
        assert stats.upper_quantile(r, j, 0.975) == r.hi[j]
        assert stats.upper_quantile(r, j, 0.999) == pytest.approx(full.hi[j], abs=1e-15)
    with pytest.raises(ValueError):
        stats.upper_quantile(r, 0, 0.5)


def test_family_max_statistic_lies_between_one_gate_and_bonferroni() -> None:
    rng = np.random.default_rng(8)
    base = rng.normal(0, 0.2, size=(300, 1))
    # ten overlapping slices of one metric: strongly correlated gates
    columns = np.hstack([np.where(rng.random((300, 1)) < 0.8, base, np.nan) for _ in range(10)])
    facts = stats.column_facts(columns)
    r = bootstrap_means(columns, resamples=4000, seed=1, family_scale=1 / facts.se)
    assert r.family_max is not None
    c, kind = stats.family_critical_value(r.family_max, 10, 0.95)
    assert kind == "max-statistic"
    assert intervals._z(0.025) < c < intervals._z(0.0025)
    # independent gates need about Bonferroni
    c1, _ = stats.family_critical_value(np.full(10, 1e9), 10, 0.95)
    assert c1 == pytest.approx(intervals._z(0.0025))
    none_c, none_kind = stats.family_critical_value(np.zeros(0), 1, 0.95)
    assert none_c == pytest.approx(1.959964, abs=1e-6) and none_kind == "none"


def test_pairs_needed_and_minimum_nonzero() -> None:
    # 0/1 metric with 5% churn: Tango's score test of Δ = -0.02 has per-pair variance
    # v1 = 2q - m - m² with q = (0.09 + √(0.09² - 4·0.05·0.02·1.02))/4 = 0.03877, so
    # v1 = 0.05714, v0 = 0.05: ((1.96 √v1 + 0.8416 √v0) / 0.02)² = 1066.4 -> 1067
    assert stats.pairs_needed(math.sqrt(0.05), 0.02, ternary=True).item() == 1067
    # churn 1%, 10%: 390, 2005 (the exact pass probability there: 0.82, 0.80; docs/methods.md)
    assert stats.pairs_needed(np.sqrt([0.01, 0.10]), 0.02, ternary=True).tolist() == [390, 2005]
    # an unchanged set still needs z²(1-m)/m = 188.2 -> 189 pairs before it can pass, 0/1 or not
    assert stats.pairs_needed(0.0, 0.02, ternary=True).item() == 189
    assert stats.pairs_needed(0.0, 0.02).item() == 189
    # graded: ((t + 0.8416) σ0 / m)², t at n · share - 1 degrees of freedom: about z's 196 at σ0 0.1
    assert stats.pairs_needed(0.1, 0.02, nonzero_share=0.5).item() == 200
    # a design effect of 2 doubles a 0/1 gate's pairs
    assert stats.pairs_needed(math.sqrt(0.05), 0.02, ternary=True, deff=2.0).item() == 2134  # 2 x 1066.4
    assert math.isnan(stats.pairs_needed(0.1, 0.0).item())
    assert stats.minimum_nonzero(0.025) == 6  # 2^-5 = 3.1% > 2.5% >= 2^-6
    assert stats.minimum_nonzero(0.025 / 89) == 12


def test_clustered_0_1_differences_take_tango_over_the_design_effect() -> None:
    labels = np.repeat(np.arange(20), 5)
    d = np.zeros((100, 1))
    d[:10, 0] = -1.0  # two whole documents lost
    d[50, 0] = 1.0
    facts = stats.column_facts(d, clusters=labels)
    assert facts.method == ["cluster-tango"] and facts.units[0] == 20 and facts.nonzero[0] == 3
    assert facts.deff is not None
    deff = float(facts.deff[0])
    case_se = float(np.std(d[:, 0], ddof=1) / 10)
    assert deff == pytest.approx((float(facts.se[0]) / case_se) ** 2) and deff > 1
    lo = stats.column_bounds(facts, None, 0.025, upper=False)[0]
    hi = stats.column_bounds(facts, None, 0.025, upper=True)[0]
    ref_lo, ref_hi = stats.tango_bounds(1 / deff, 10 / deff, 100 / deff, 0.025)
    assert (lo, hi) == (float(ref_lo), float(ref_hi))
    case_lo, case_hi = stats.tango_bounds(1, 10, 100, 0.025)
    assert lo < float(case_lo) and hi > float(case_hi)  # wider than as independent cases


def test_few_clusters_take_the_exact_sign_flip_over_clusters() -> None:
    # 8 documents x 6 questions: below MIN_CLUSTERS every column takes the sign-flip test of the
    # cluster totals, inverted for its bounds, never Rao-Scott's Tango on a design effect from 8
    import itertools

    labels = np.repeat(np.arange(8), 6)
    d = np.zeros((48, 1))
    d[[0, 1, 2, 6, 7, 12, 20, 30, 31, 40], 0] = [-1, -1, -1, -1, 1, -1, 1, -1, -1, 1]
    facts = stats.column_facts(d, clusters=labels)
    assert facts.method == ["cluster-sign-flip"] and facts.units[0] == 8
    totals = d[:, 0].reshape(8, 6).sum(axis=1)

    def p_lower(mu: float) -> float:  # P(Σ ε (S - 6 mu) <= Σ (S - 6 mu)) by brute force
        a = totals - 6 * mu
        flips = [
            sum(e * x for e, x in zip(signs, a, strict=True))
            for signs in itertools.product((1, -1), repeat=8)
        ]
        return float(sum(f <= a.sum() + 1e-12 for f in flips)) / 256

    lo = stats.column_bounds(facts, None, 0.025, upper=False)[0]
    hi = stats.column_bounds(facts, None, 0.025, upper=True)[0]
    # the upper bound (a block, "worse") inverts the exact sign-flip: zero is rejected or not
    assert p_lower(hi + 1e-6) <= 0.025 < p_lower(hi - 1e-6)
    # the lower bound (a pass) is Rao-Scott's Tango for 0/1 pairs
    deff = float(facts.deff[0])
    assert lo == float(stats.tango_bounds(3 / deff, 7 / deff, 48 / deff, 0.025)[0][()])
    assert lo < d.mean() < hi
    # its drop p-value is the sign-flip's lower tail at zero: P(Σ ε S <= Σ S)
    flips = [
        sum(e * x for e, x in zip(signs, totals, strict=True))
        for signs in itertools.product((1, -1), repeat=8)
    ]
    expected = sum(f <= totals.sum() + 1e-12 for f in flips) / 256
    assert stats.drop_p_values(facts)[0] == pytest.approx(expected, abs=1e-15)
    # ten clusters and more: Rao-Scott's Tango again
    more = stats.column_facts(np.tile(d, (2, 1)), clusters=np.repeat(np.arange(16), 6))
    assert more.method == ["cluster-tango"]


def test_drop_p_values_and_weighted_bh() -> None:
    # 0/1 pairs: the exact sign test given the changed pairs, P(Bin(b + c, 1/2) >= c)
    d = np.zeros((40, 3))
    d[:8, 0] = -1.0  # 8 lost, none gained: 2^-8
    d[:6, 1], d[6:8, 1] = -1.0, 1.0  # 6 lost, 2 gained: P(Bin(8, 1/2) >= 6) = 37/256
    facts = stats.column_facts(d)
    p = stats.drop_p_values(facts)
    assert p.tolist() == pytest.approx([1 / 256, 37 / 256, 1.0], abs=1e-15)
    # step-up: the largest k with the k-th smallest p/w at or below q k / G
    assert stats.weighted_bh_cutoff([0.001, 0.02, 0.04, 0.5], [1, 1, 1, 1], 0.1) == pytest.approx(0.075)
    assert stats.weighted_bh_cutoff([0.06, 0.5], [1, 1], 0.1) == 0.0
    # weights (rescaled to average 1) move the budget: a heavy gate rejects alone
    assert stats.weighted_bh_cutoff([0.06, 0.5], [3, 1], 0.1) == pytest.approx(0.05)  # 0.06 / 1.5


def test_the_sign_test_matches_scipy_stats_binomial_tail() -> None:
    # drop_p_values takes the tail from scipy.special (bdtrc), which loads in a fraction of
    # scipy.stats' time: the same P(Bin(b + c, 1/2) >= c) for every b, c up to 12 of 30 pairs.
    from scipy.stats import binom

    pairs = [(b, c) for b in range(13) for c in range(13)]
    d = np.zeros((30, len(pairs)))
    for j, (b, c) in enumerate(pairs):
        d[:b, j], d[b : b + c, j] = 1.0, -1.0
    p = stats.drop_p_values(stats.column_facts(d))
    expected = [binom.sf(c - 1, b + c, 0.5) if b + c else 1.0 for b, c in pairs]
    assert p.tolist() == pytest.approx(expected, rel=1e-11, abs=1e-15)
