"""Paired (and clustered) bootstrap, calibrated intervals, drop p-values and power, Cohen's kappa.

The bootstrap works on *units*: cases, or clusters of cases when ``clusters`` is given
(Miller 2024, "Adding Error Bars to Evals": grouped questions make case-level intervals too
narrow, so whole groups are resampled). One resample draws as many units as there are, with
replacement, uniformly; its statistic for a column is the ratio of count-weighted sums

    mean* = sum_u c_u * S_u / sum_u c_u * W_u

where ``S_u`` is the sum of the column's values in unit u and ``W_u`` the number of its
values present. With one case per unit and every value present this is the ordinary mean of
a resample of the paired differences.

Missing values (NaN) are how the batched form handles different pair sets per metric and
slice: every column shares one matrix of resample counts over *all* units (common random
numbers across metrics and slices), and a column only sums the units where it has values.
Conditional on how many of its own cases a resample drew, a column sees an ordinary uniform
bootstrap resample of its cases, so slices and per-metric pair sets cost one resampling pass
instead of one each. A resample that drew none of a column's cases has no statistic for it
and is left out of that column's percentiles (probability about exp(-n) for n cases).

Determinism: resample counts come in fixed blocks of ``BLOCK`` resamples, block ``i`` drawn
from ``PCG64(SeedSequence([seed, i]))``, so results do not depend on how blocks are grouped
into tasks, on the number of worker threads, or on memory limits. Values are rounded to a
binary grid fine enough (at least 2^-52 of the largest possible resample sum) that every
count-weighted sum is exact in float64: the matrix product gives the same bits whatever
summation order the BLAS library or its thread count chooses. While worker threads multiply, OpenBLAS
runs one thread per product (two levels of threads on the same cores only spin). The rounding moves a value by
less than 1e-9 of the column's largest magnitude; point estimates use the unrounded values.
Denominators (integer counts) and columns of small fractions (0/1 scores, k-ths: values times
a small L are integers) are multiplied as integers in float32, exact while every partial sum
stays below 2^24, at twice the speed; the rest in float64.

Memory: a task holds one group of count blocks (about ``TASK_CELLS`` cells, at least one
block; 8 bytes a cell for the counts plus 4 for one block's draws), worker threads are limited so that
running tasks stay under ``MEMORY_BUDGET``, and the resample statistics are ``resamples x
columns`` floats for at most ``COLUMN_GROUP`` (1,024) columns at a time: at 100,000 cases and 10,000
resamples peak use stays near 300 MB.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np
from scipy.optimize import brentq
from scipy.special import bdtrc, ndtr, ndtri, stdtr, stdtrit

BLOCK = 64  # resamples per independent random stream
TASK_CELLS = 1 << 19  # counts held by one task (blocks grouped up to about this many cells)
COLUMN_GROUP = 1024  # columns whose resample statistics are held at once
MAX_WORKERS = min(4, os.cpu_count() or 1)  # threads drawing and multiplying count blocks
MEMORY_BUDGET = 320 << 20  # bytes of count matrices alive at once across worker threads


@dataclass(frozen=True)
class BootstrapResult:
    """Per-column results of :func:`bootstrap_means` (arrays of length ``columns``).

    ``estimate`` is the observed mean over the column's present values; ``lo``/``hi`` the
    interval; ``se`` the standard deviation of the resample means; ``sd`` the sample standard
    deviation (ddof=1) of the column's values; ``n`` how many values are present; ``units``
    how many units (clusters) hold at least one of them. Columns with no values are NaN.
    """

    estimate: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    se: np.ndarray
    sd: np.ndarray
    n: np.ndarray
    units: np.ndarray
    # With ``family_scale``: per resample, max over the family's columns of (estimate - mean*) x scale.
    family_max: np.ndarray | None = None
    # With ``keep_tail``: per column its largest resample means, ascending (NaN-padded in front),
    # and how many resamples had a statistic; :func:`upper_quantile` reads quantiles from them.
    top: np.ndarray | None = None
    valid: np.ndarray | None = None


# Fields of BootstrapResult indexed by column (family_max is indexed by resample).
_COLUMN_FIELDS = ("estimate", "lo", "hi", "se", "sd", "n", "units", "top", "valid")


def upper_quantile(result: BootstrapResult, column: int, level: float) -> float:
    """The ``level`` quantile (linear interpolation, as ``numpy.quantile``) of one column's
    resample means, for ``level`` at or above ``1 - keep_tail`` (read from ``result.top``)."""
    if result.top is None or result.valid is None:
        raise ValueError("bootstrap_means was called without keep_tail")
    valid = int(result.valid[column])
    if valid == 0:
        return math.nan
    top = result.top[column]
    k = top.shape[0]
    h = (valid - 1) * level
    i = math.floor(h)
    first = valid - k  # order statistic held in top[0]
    if i < first:
        raise ValueError(f"level {level} lies outside the kept tail")
    j = min(i + 1, valid - 1)
    a, b = float(top[i - first]), float(top[j - first])
    return a + (h - i) * (b - a)


def _rng(seed: int, block: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed % (1 << 64), block])))


def _block_counts(seed: int, block: int, out: np.ndarray) -> None:
    """Fill ``out`` (rows x units) with one block's resample counts: how often each unit was drawn."""
    rows, units = out.shape
    # One generator per block and one call, so 32-bit draws (buffered in pairs) stay reproducible.
    dtype = np.uint32 if units <= np.iinfo(np.uint32).max else np.int64
    draws = _rng(seed, block).integers(0, units, size=(rows, units), dtype=dtype)
    for i in range(rows):
        # Row by row: each count vector stays in cache, unlike one bincount over rows x units.
        out[i] = np.bincount(draws[i], minlength=units)


def _exact_grid(values: np.ndarray, max_multiplier: float) -> np.ndarray:
    """Round each column onto a power-of-two grid so sums up to ``max_multiplier * max|x|`` are exact."""
    out = values.copy()
    peak = np.max(np.abs(values), axis=0) if values.size else np.zeros(values.shape[1])
    for j, top in enumerate(peak):
        if top == 0 or not np.isfinite(top):
            continue
        exponent = math.ceil(math.log2(top)) + math.ceil(math.log2(max(max_multiplier, 1.0))) - 52
        # Below 2^-1074 there is no float64 grid: subnormal columns are already on the finest one.
        step = 2.0 ** max(exponent, -1074)
        out[:, j] = np.round(values[:, j] / step) * step
    return out


def _unit_sums(
    values: np.ndarray, present: np.ndarray, codes: np.ndarray | None, n_units: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit sums of values and counts of present values (units x columns).

    ``codes`` number the units 0..n_units-1 in order of first appearance, so after a stable
    sort the runs of equal codes are the units in order.
    """
    if codes is None:
        return values, present
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    return np.add.reduceat(values[order], starts, axis=0), np.add.reduceat(present[order], starts, axis=0)


def _distinct_columns(matrix: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Indices of the first of each group of identical columns, and each column's group."""
    slot_of: dict[bytes, int] = {}
    first_columns: list[int] = []
    inverse = np.empty(matrix.shape[1], dtype=np.int64)
    for j in range(matrix.shape[1]):
        key = np.ascontiguousarray(matrix[:, j]).tobytes()
        if key not in slot_of:
            slot_of[key] = len(first_columns)
            first_columns.append(j)
        inverse[j] = slot_of[key]
    return first_columns, inverse


# Denominators tried for columns whose values are small fractions (rates, k-ths, j/|gold|).
_FRACTION_SCALES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 20, 24, 30, 60, 120)
_FLOAT32_EXACT = float(2**24)


def _integer_scale(column: np.ndarray, bound: float) -> int | None:
    """Smallest L making every value times L an integer, with ``max|v L| * bound < 2^24``.

    Then every partial sum of counts times ``v L`` is an integer below 2^24, exact in float32
    in any summation order, and the column's product runs at float32 speed.
    """
    top = float(np.max(np.abs(column), initial=0.0))
    for scale in _FRACTION_SCALES:
        if top * scale * bound >= _FLOAT32_EXACT:
            return None
        scaled = column * scale
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9):
            return scale
    return None


def _sparse_groups(rhs: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """Float64 columns grouped by the units where they are nonzero (units, columns, their rhs),
    or None to multiply densely.

    Paired differences are mostly zero (most cases score the same in both runs) and a slice's
    column is zero outside the slice, so a metric's columns usually fit in the few units where
    its "all" column is nonzero. Sums over those units alone are the same exact sums (every
    partial sum is exact on the grid), so a group multiplies only its units' counts. Grouping
    pays when it avoids the float64 copy of the whole count matrix: every column must fit in a
    group and the groups must cover under half the units in all.
    """
    n_units, q = rhs.shape
    if q == 0:
        return None
    support = rhs != 0
    sizes = support.sum(axis=0)
    groups: list[tuple[np.ndarray, list[int]]] = []
    for j in sorted(range(q), key=lambda j: (-int(sizes[j]), j)):
        where = np.flatnonzero(support[:, j])
        home = next((members for mask, members in groups if mask[where].all()), None)
        if home is not None:
            home.append(j)
        elif len(groups) < 16:
            groups.append((support[:, j], [j]))
        else:
            return None
    units = [np.flatnonzero(mask) for mask, _ in groups]
    if sum(u.size for u in units) * 2 > n_units:
        return None
    out = []
    for u, (_, members) in zip(units, groups, strict=True):
        columns = np.array(sorted(members))
        out.append((u, columns, rhs[np.ix_(u, columns)]))
    return out


def _float64_product(
    counts: np.ndarray, rhs: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None
) -> np.ndarray:
    """``counts @ rhs`` in float64, over each group's units only when ``groups`` is given."""
    if groups is None:
        product: np.ndarray = counts.astype(np.float64) @ rhs
        return product
    out = np.zeros((counts.shape[0], rhs.shape[1]))
    for units, members, sub_rhs in groups:
        out[:, members] = counts[:, units].astype(np.float64) @ sub_rhs
    return out


def _resample_means(sums: np.ndarray, weights: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Resample statistics (resamples x columns) from the shared count blocks.

    Two exact products per task: float32 for the denominators (integer weights) and for columns
    of small fractions (binary scores, k-ths), float64 on the exact grid for the rest.
    """
    n_units, q = sums.shape
    # Every product sums at most n_units draws of one unit: |partial sums| <= n_units * max|x|.
    bound = n_units * max(float(weights.max(initial=1.0)), 1.0)
    # Identical weight columns (same pair set) share one denominator product.
    first_columns, inverse = _distinct_columns(weights)
    scales = [_integer_scale(sums[:, j], bound) for j in range(q)]
    fast = [j for j in range(q) if scales[j] is not None]
    slow = [j for j in range(q) if scales[j] is None]
    fast_scale = np.array([scales[j] for j in fast], dtype=np.float64)
    single = np.float32 if bound < _FLOAT32_EXACT else np.float64
    fast_rhs = np.hstack([np.round(sums[:, fast] * fast_scale), weights[:, first_columns]]).astype(single)
    slow_rhs = sums[:, slow]
    slow_groups = _sparse_groups(slow_rhs)
    n_blocks = -(-resamples // BLOCK)
    per_task = max(1, TASK_CELLS // (BLOCK * n_units))
    tasks = [range(s, min(s + per_task, n_blocks)) for s in range(0, n_blocks, per_task)]

    # Each task writes its resamples' rows straight into ``out``: no list of partial results
    # and no stacked copy of them (resamples x columns floats: 80 MB at 1,024 columns).
    out = np.empty((resamples, q))

    def run(blocks: range) -> None:
        sizes = [min(BLOCK, resamples - b * BLOCK) for b in blocks]
        counts = np.empty((sum(sizes), n_units), dtype=single)
        start = 0
        for b, rows in zip(blocks, sizes, strict=True):
            _block_counts(seed, b, counts[start : start + rows])
            start += rows
        product = (counts @ fast_rhs).astype(np.float64)
        num = np.empty((counts.shape[0], q))
        num[:, fast] = product[:, : len(fast)] / fast_scale
        if slow:
            num[:, slow] = _float64_product(counts, slow_rhs, slow_groups)
        den = product[:, len(fast) :][:, inverse]
        first = blocks[0] * BLOCK
        with np.errstate(invalid="ignore", divide="ignore"):
            out[first : first + counts.shape[0]] = np.where(
                den > 0, num / np.where(den > 0, den, 1.0), np.nan
            )

    # A running task holds about 16 bytes per count cell (draws, float32 counts, a float64 copy).
    task_bytes = 16 * BLOCK * min(per_task, n_blocks) * n_units
    workers = min(MAX_WORKERS, len(tasks), max(1, MEMORY_BUDGET // task_bytes))
    if workers <= 1:
        for t in tasks:
            run(t)
    else:
        with _one_blas_thread(), ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(run, tasks))
    return out


@cache
def _openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """OpenBLAS's get/set thread-count functions in this process (Linux), or None if not found."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1].lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (
            ("scipy_openblas", "64_"),
            ("scipy_openblas", ""),
            ("openblas", "64_"),
            ("openblas", ""),
        ):
            get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                put.argtypes, put.restype = [ctypes.c_int], None
                get.argtypes, get.restype = [], ctypes.c_int
                return get, put
    return None


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run the block's matrix products on one OpenBLAS thread each.

    Our worker threads already keep every core busy; OpenBLAS threads on top of them
    oversubscribe the cores and spin (about 1.5x the CPU time for the same wall time on two
    cores). The thread count does not change any result: every sum is exact.
    """
    blas = _openblas_threads()
    if blas is None:
        yield
        return
    get, put = blas
    before = get()
    put(1)
    try:
        yield
    finally:
        put(before)


def _as_matrix(values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError("values must be a 1-D or 2-D array (cases x columns)")
    return arr


def _cluster_codes(clusters: Sequence[Any] | np.ndarray | None, n: int) -> tuple[np.ndarray | None, int]:
    if clusters is None:
        return None, n
    labels = list(clusters)
    if len(labels) != n:
        raise ValueError(f"clusters has {len(labels)} entries for {n} cases")
    index: dict[Any, int] = {}
    codes = np.fromiter((index.setdefault(label, len(index)) for label in labels), dtype=np.int64, count=n)
    return codes, len(index)


def _group_scale(family_scale: np.ndarray | None, inverse: np.ndarray, groups: int) -> np.ndarray | None:
    """Family factors per group of identical columns: identical columns have identical
    deviations, so the group keeps its largest factor (None without a family)."""
    if family_scale is None:
        return None
    scale = np.zeros(groups)
    np.maximum.at(scale, inverse, np.asarray(family_scale, dtype=np.float64))
    return scale


def _mean_sd(
    data: np.ndarray, present: np.ndarray, filled: np.ndarray, counts_n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean over its present values and sample standard deviation (ddof 1; NaN
    below two values)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = filled.sum(axis=0) / counts_n
        centred = np.where(present, data - estimate, 0.0)
        sd = np.sqrt((centred**2).sum(axis=0) / (counts_n - 1))
    return estimate, np.where(counts_n > 1, sd, np.nan)


def _tails(
    q: int, resamples: int, n_top: int, *, family: bool, keep: bool
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """The running family maximum (``-inf`` per resample), the kept largest means (NaN) and
    their counts (0), each None when not asked for."""
    return (
        np.full(resamples, -np.inf) if family else None,
        np.full((q, n_top), np.nan) if keep else None,
        np.zeros(q) if keep else None,
    )


def _family_deviations(
    family_max: np.ndarray, estimate: np.ndarray, boot: np.ndarray, scale: np.ndarray
) -> None:
    """Raise ``family_max`` (in place) to each resample's ``max_j (estimate_j - mean*_j) * scale_j``
    over the family's columns of this group (a missing mean counts as ``-inf``)."""
    members = np.flatnonzero(scale > 0)
    if members.size:
        dev = (estimate[members] - boot[:, members]) * scale[members]
        dev = np.where(np.isnan(dev), -np.inf, dev)
        np.maximum(family_max, dev.max(axis=1), out=family_max)


def _largest(boot: np.ndarray, missing: np.ndarray, n_top: int) -> np.ndarray:
    """Each column's ``n_top`` largest resample means, ascending (NaN where fewer exist), as
    columns x n_top."""
    resamples = boot.shape[0]
    # In place on the one copy with -inf for the missing: the same order statistics as
    # np.partition, without a second resamples x columns array.
    ranked = np.where(missing, -np.inf, boot)
    ranked.partition(resamples - n_top, axis=0)
    ranked = np.sort(ranked[resamples - n_top :], axis=0)
    return np.where(np.isneginf(ranked), np.nan, ranked).T


def _percentiles(
    boot: np.ndarray, missing: np.ndarray, alpha: float, lo: np.ndarray, hi: np.ndarray, se: np.ndarray
) -> None:
    """Fill (in place) each column's percentile interval at ``alpha`` and its resample spread,
    skipping columns with no statistic in any resample (they stay NaN)."""
    resamples = boot.shape[0]
    has = ~np.all(missing, axis=0)
    # Columns with a statistic in every resample (nearly all) at once: the same order
    # statistics and interpolation as the per-column nanquantile, and each column's
    # spread summed along a contiguous row as nanstd sums a column.
    whole = np.flatnonzero(~missing.any(axis=0))
    if whole.size:
        lo[whole], hi[whole] = np.quantile(boot[:, whole], (alpha / 2, 1 - alpha / 2), axis=0)
        spread = np.nanstd(np.ascontiguousarray(boot[:, whole].T), axis=1, ddof=1)
        se[whole] = spread if resamples > 1 else 0.0
        has[whole] = False
    for j in np.flatnonzero(has):
        column = boot[:, j]
        lo[j], hi[j] = np.nanquantile(column, (alpha / 2, 1 - alpha / 2))
        se[j] = np.nanstd(column, ddof=1) if np.count_nonzero(~np.isnan(column)) > 1 else 0.0


def bootstrap_means(
    values: Any,
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    clusters: Sequence[Any] | np.ndarray | None = None,
    family_scale: np.ndarray | None = None,
    keep_tail: float | None = None,
) -> BootstrapResult:
    """Bootstrap the mean of every column of ``values`` (cases x columns, NaN = absent).

    All columns share one set of resamples of the cases (or of ``clusters``: one label per
    case; cases with equal labels are resampled together). Percentile intervals take the
    ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the resample means with
    linear interpolation, as ``numpy.quantile`` and ``scipy.stats.bootstrap`` do.

    ``family_scale`` (one factor per column, 0 outside the family) adds ``family_max``: per
    resample ``max_j (estimate_j - mean*_j) * scale_j`` (``-inf`` when no family column has a
    statistic), the input of :func:`family_critical_value`. ``keep_tail`` keeps each column's
    largest ``ceil(keep_tail * resamples) + 2`` resample means so that any quantile at level
    ``>= 1 - keep_tail`` can be read afterwards with :func:`upper_quantile`.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if resamples < 1:
        raise ValueError("resamples must be >= 1")
    data = _as_matrix(values)
    first_columns, inverse = _distinct_columns(data)
    if len(first_columns) < data.shape[1]:
        # Identical columns (e.g. slice "all" and "kind=qa" when every case is qa) are computed once.
        distinct = bootstrap_means(
            data[:, first_columns],
            resamples=resamples,
            confidence=confidence,
            seed=seed,
            clusters=clusters,
            family_scale=_group_scale(family_scale, inverse, len(first_columns)),
            keep_tail=keep_tail,
        )
        return dataclasses.replace(
            distinct,
            **{f: getattr(distinct, f)[inverse] for f in _COLUMN_FIELDS if getattr(distinct, f) is not None},
        )
    n, q = data.shape
    present = ~np.isnan(data)
    filled = np.where(present, data, 0.0)
    weights_case = present.astype(np.float64)
    codes, n_units = _cluster_codes(clusters, n)
    counts_n = weights_case.sum(axis=0)
    estimate, sd = _mean_sd(data, present, filled, counts_n)
    n_top = min(resamples, math.ceil(keep_tail * resamples) + 2) if keep_tail is not None else 0
    if n == 0:
        nan = np.full(q, np.nan)
        return BootstrapResult(
            nan,
            nan,
            nan,
            nan,
            nan,
            counts_n,
            np.zeros(q),
            *_tails(q, resamples, n_top, family=family_scale is not None, keep=keep_tail is not None),
        )

    _, weights = _unit_sums(filled, weights_case, codes, n_units)
    units_present = (weights > 0).sum(axis=0).astype(np.float64)
    biggest_unit = float(weights.max()) if weights.size else 1.0
    exact = _exact_grid(filled, n_units * max(biggest_unit, 1.0))
    exact_sums, _ = _unit_sums(exact, weights_case, codes, n_units)

    alpha = 1 - confidence
    lo = np.full(q, np.nan)
    hi = np.full(q, np.nan)
    se = np.full(q, np.nan)
    family_max, top, valid = _tails(
        q, resamples, n_top, family=family_scale is not None, keep=keep_tail is not None
    )
    for start in range(0, q, COLUMN_GROUP):
        cols = slice(start, min(start + COLUMN_GROUP, q))
        boot = _resample_means(exact_sums[:, cols], weights[:, cols], resamples, seed)
        missing = np.isnan(boot)
        if family_max is not None and family_scale is not None:
            _family_deviations(
                family_max, estimate[cols], boot, np.asarray(family_scale, dtype=np.float64)[cols]
            )
        if top is not None and valid is not None:
            valid[cols] = (~missing).sum(axis=0)
            top[cols] = _largest(boot, missing, n_top)
        _percentiles(boot, missing, alpha, lo[cols], hi[cols], se[cols])
    return BootstrapResult(estimate, lo, hi, se, sd, counts_n, units_present, family_max, top, valid)


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels (any hashable labels, e.g. 0/1).

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed agreement and ``p_e`` the
    agreement expected from each rater's label frequencies. NaN when ``p_e == 1`` (both raters
    used one and the same label: chance explains everything and kappa is undefined). Raises
    ValueError for unequal lengths or empty input.
    """
    if len(a) != len(b):
        raise ValueError(f"rater lists differ in length ({len(a)} vs {len(b)})")
    n = len(a)
    if n == 0:
        raise ValueError("no labels")
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    labels = set(a) | set(b)
    expected = sum((list(a).count(label) / n) * (list(b).count(label) / n) for label in labels)
    if expected == 1:
        return float("nan")
    return float((observed - expected) / (1 - expected))


# -- calibrated intervals: chosen by the data -----------------------------------------------
#
# The percentile bootstrap under-covers at small n and reports a zero-width interval when no
# pair changed (docs/gate.md, "Methods and their calibration", has the simulation tables). The
# decision therefore takes, per gate, the interval that holds its level at that data type and n:
#
# - differences in {-1, 0, +1} (paired 0/1 metrics): Tango's score interval at every n;
# - other differences, case units: the t interval (degrees of freedom: non-zero differences
#   minus one) below ``BOOTSTRAP_MIN_NONZERO`` non-zero differences, the percentile bootstrap from there on (a sparse metric's bootstrap is only as
#   good as its non-zero differences: at 100 pairs with 15 of them it blocked 3.7% of unchanged
#   gates);
# - cluster units, differences in {-1, 0, +1}: Tango's interval on the counts divided by the
#   design effect (Rao-Scott), below ``BOOTSTRAP_MIN_NONZERO`` clusters with a non-zero total;
# - other cluster units: the t interval on cluster totals (ratio estimator; degrees of freedom:
#   clusters with a non-zero total minus one) below
#   ``BOOTSTRAP_MIN_NONZERO`` clusters with a non-zero total, the cluster bootstrap from there on;
# - no non-zero difference at all (any type): the interval of "no case changed", Tango's
#   ``±z²/(n+z²)``, never a zero-width interval.

BOOTSTRAP_MIN_NONZERO = 100  # non-zero units from which the percentile bootstrap is used
CALIBRATED_MIN_PAIRS = 10  # smallest n the simulation suite validates; the derived min_pairs floor
MIN_CLUSTERS = 10  # fewer clusters in a comparison: the exact sign-flip over clusters ("cluster-sign-flip")
POWER = 0.8  # the power behind ``pairs_needed`` and ``mde``

GateMethod = Literal[
    "tango",
    "cluster-sign-flip",
    "t",
    "bootstrap",
    "cluster-tango",
    "cluster-t",
    "cluster-bootstrap",
    "no-change",
    "percentile",
]


def normal_quantile(tail: float) -> float:
    """The standard normal quantile with ``tail`` probability above it (``-ndtri(tail)``)."""
    return float(-ndtri(tail))


_z = normal_quantile


def _tango_score(delta: float, improved: float, worsened: float, n: float) -> float:
    """Tango's score statistic for ``Δ = p(+1) - p(-1)`` at ``delta`` (decreasing in delta).

    ``Z(Δ) = (b - c - nΔ) / sqrt(n (2 q + Δ - Δ²))`` with ``b``/``c`` the counts of +1/-1
    differences and ``q`` the maximum-likelihood ``p(-1)`` under the constraint
    ``p(+1) = p(-1) + Δ``: the positive root of ``2n q² - W q - c Δ (1 - Δ) = 0``,
    ``W = b + c + Δ (b - c - 2n)``.
    """
    b, c = improved, worsened
    w = b + c + delta * (b - c - 2 * n)
    q = (w + math.sqrt(max(w * w + 8.0 * n * c * delta * (1.0 - delta), 0.0))) / (4.0 * n)
    variance = max(2.0 * q + delta - delta * delta, 1e-300)
    return (b - c - n * delta) / math.sqrt(n * variance)


@cache
def _tango_pair(improved: float, worsened: float, n: float, z: float) -> tuple[float, float]:
    estimate = (improved - worsened) / n
    edge = 1.0 - 1e-12

    def lower(d: float) -> float:
        return _tango_score(d, improved, worsened, n) - z

    def upper(d: float) -> float:
        return _tango_score(d, improved, worsened, n) + z

    lo = -1.0 if lower(-edge) <= 0 else float(brentq(lower, -edge, estimate, xtol=1e-13, rtol=1e-13))
    hi = 1.0 if upper(edge) >= 0 else float(brentq(upper, estimate, edge, xtol=1e-13, rtol=1e-13))
    return lo, hi


def tango_bounds(improved: Any, worsened: Any, n: Any, tail: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Tango score bounds for a difference of paired proportions (Tango 1998).

    ``improved``/``worsened``/``n``: arrays of the counts of +1 and -1 differences and of pairs.
    Returns ``(lo, hi)`` with ``tail`` probability beyond each bound, found by inverting the
    score statistic (``Z(lo) = z``, ``Z(hi) = -z``, ``z = Φ⁻¹(1 - tail)``) with
    ``scipy.optimize.brentq``. With no discordant pair the bounds are ``±z²/(n + z²)``; with
    every pair worsened ``lo = -1``. Each distinct ``(b, c, n)`` is solved once. Counts may be
    fractional: clustered pairs divide all three by the design effect (Rao and Scott).
    """
    b = np.asarray(improved, dtype=np.float64)
    c = np.asarray(worsened, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    b, c, m = np.broadcast_arrays(b, c, m)
    z = _z(tail)
    lo = np.empty(b.shape)
    hi = np.empty(b.shape)
    keys = np.stack([b.ravel(), c.ravel(), m.ravel()], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    solved = np.array([_tango_pair(float(x), float(y), float(k), z) for x, y, k in unique]).reshape(-1, 2)
    lo.ravel()[:] = solved[inverse.ravel(), 0] if unique.size else []
    hi.ravel()[:] = solved[inverse.ravel(), 1] if unique.size else []
    return lo, hi


def t_quantile(tail: Any, df: Any) -> np.ndarray:
    """Student's t quantile with ``tail`` probability above it (``scipy.special.stdtrit``)."""
    return np.asarray(stdtrit(df, 1.0 - np.asarray(tail, dtype=np.float64)), dtype=np.float64)


def no_change_halfwidth(n: Any, tail: float) -> np.ndarray:
    """Half-width ``z²/(n + z²)`` of the interval when no pair changed (Tango's, at zero counts).

    For differences bounded in [-1, 1] the worst case consistent with n unchanged pairs is the
    0/1 one; the bound is what the data can rule out, never zero.
    """
    z2 = _z(tail) ** 2
    return z2 / (np.asarray(n, dtype=np.float64) + z2)


def cluster_standard_error(sums: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standard error of the ratio mean ``Σ S_u / Σ W_u`` over clusters, and the cluster count.

    ``sums``/``weights``: clusters x columns (a cluster's sum of values and count of values).
    Linearised (delta-method) variance with the small-sample factor ``K/(K-1)``:
    ``se² = K/(K-1) · Σ_u (S_u - mean·W_u)² / (Σ_u W_u)²`` over the K clusters holding values.
    With equal cluster sizes this is the t interval on cluster means.
    """
    sums = np.atleast_2d(sums)
    weights = np.atleast_2d(weights)
    total_w = weights.sum(axis=0)
    k = (weights > 0).sum(axis=0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=0) / total_w
        resid = sums - mean * weights
        var = (k / (k - 1)) * (resid**2).sum(axis=0) / total_w**2
    return np.sqrt(np.where(k > 1, var, np.nan)), k


def pairs_needed(
    null_sd: Any,
    margin: Any,
    *,
    ternary: Any = False,
    deff: Any = 1.0,
    nonzero_share: Any = 1.0,
    confidence: float = 0.95,
    power: float = POWER,
) -> np.ndarray:
    """Pairs a gate needs to pass with probability ``power`` when nothing changed.

    ``null_sd`` is one pair's standard deviation *under no change*, estimated from the
    improvements alone (:func:`null_spread`), so a regression cannot inflate it. A pass needs
    the lower bound at or above ``-m``:

    - 0/1 pairs (Tango's score interval): with churn ``π = null_sd²`` (the share of pairs that
      change), the score test of ``Δ = -m`` has variance ``v1 = 2q - m - m²`` per pair, ``q`` the
      constrained maximum-likelihood ``p(-1)``, ``q = (w + √(w² - 4πm(1+m)))/4``, ``w = π + 2m``,
      while the difference's own variance is ``v0 = π``; it passes with probability ``power``
      from ``n = deff · ((z √v1 + z_power √v0) / m)²`` (``deff`` the clusters' design effect,
      Rao-Scott). With ``π = 0`` this is ``z²(1 - m)/m``, where even an unchanged set can pass
      (189 at m = 0.02).
    - other pairs (t interval): ``n = ((t + z_power) · null_sd / m)²`` with ``t`` the quantile at
      ``n · nonzero_share - 1`` degrees of freedom (iterated); with no spread at all (nothing
      improved), the no-change floor ``z²(1 - m)/m``.

    Rounded up; NaN where the margin is zero.
    """
    tail = (1 - confidence) / 2
    z = _z(tail)
    zp = float(ndtri(power))
    sd, m, tern, de, share = np.broadcast_arrays(
        np.asarray(null_sd, dtype=np.float64),
        np.asarray(margin, dtype=np.float64),
        np.asarray(ternary, dtype=bool),
        np.asarray(deff, dtype=np.float64),
        np.asarray(nonzero_share, dtype=np.float64),
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        pi = np.where(np.isfinite(sd), sd * sd, 0.0)
        w = pi + 2 * m
        q = (w + np.sqrt(np.maximum(w * w - 4 * pi * m * (1 + m), 0.0))) / 4
        v1 = np.maximum(2 * q - m - m * m, 0.0)
        by_score = np.maximum(de, 1.0) * ((z * np.sqrt(v1) + zp * np.sqrt(pi)) / m) ** 2
        floor = z * z * (1 - m) / m
        spread = np.where(np.isfinite(sd), sd, 0.0)
        by_t = ((z + zp) * spread / m) ** 2
        for _ in range(4):
            df = np.maximum(by_t * np.clip(share, 1e-9, 1.0) - 1, 1.0)
            by_t = ((t_quantile(tail, df) + zp) * spread / m) ** 2
        by_t = np.where(spread > 0, by_t, floor)
        need = np.ceil(np.where(tern, by_score, by_t) - 1e-9)
    return np.where(m > 0, need, np.nan)


def null_spread(
    values: Any, clusters: Sequence[Any] | np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per column: one pair's standard deviation under no change, and the clusters' design effect.

    Under no change a paired difference is symmetric about zero, so ``E[d² ; d > 0]`` is half
    its variance: ``σ0² = 2 Σ_{d>0} d² / n`` uses the improvements only, which a regression
    cannot inflate (it turns gains into losses, never the reverse). For 0/1 pairs this is the
    churn ``2 · improved / n``. With clusters, the same on cluster totals ``S_u``:
    ``se0² = 2 Σ_{S_u>0} S_u² / (Σ W_u)²``, and the design effect ``n · se0² / σ0²`` (at least 1).
    """
    data = _as_matrix(values)
    present = ~np.isnan(data)
    filled = np.where(present, data, 0.0)
    n = present.sum(axis=0).astype(np.float64)
    gains = np.where(filled > 0, filled, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd0 = np.sqrt(2 * (gains**2).sum(axis=0) / n)
    deff = np.ones(data.shape[1])
    if clusters is not None and data.shape[0]:
        codes, n_units = _cluster_codes(clusters, data.shape[0])
        sums, weights = _unit_sums(filled, present.astype(np.float64), codes, n_units)
        with np.errstate(invalid="ignore", divide="ignore"):
            se0 = np.sqrt(2 * (np.where(sums > 0, sums, 0.0) ** 2).sum(axis=0)) / weights.sum(axis=0)
            ratio = n * se0**2 / sd0**2
        deff = np.where(np.isfinite(ratio), np.maximum(ratio, 1.0), 1.0)
    return np.where(n > 0, sd0, np.nan), deff


def drop_p_values(facts: ColumnFacts) -> np.ndarray:
    """One-sided p-value per column for ``H0: mean d >= 0`` (small = evidence of a drop).

    By the column's method: ``tango`` (0/1 pairs) the exact sign test, ``P(Bin(b + c, ½) >= c)``
    for ``b`` improved and ``c`` worsened pairs (exact under no change, given the changed pairs);
    ``cluster-tango`` its Rao-Scott form ``Φ((b - c) / √((b + c) · deff))``; ``t`` and
    ``cluster-t`` Student's t at the interval's degrees of freedom; the bootstrap methods
    ``Φ(estimate / se)``; ``no-change`` 1.
    """
    kinds = np.array(facts.method, dtype=object)
    out = np.ones(facts.n.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        idx = np.flatnonzero(kinds == "tango")
        if idx.size:
            b, c = facts.improved[idx], facts.worsened[idx]
            # P(Bin(b + c, ½) >= c) = bdtrc(c - 1, b + c, ½): scipy.special's, which loads in a
            # fraction of scipy.stats' import time (0.3 s of CPU per process)
            k, n = np.asarray(c, dtype=np.int64), np.asarray(b + c, dtype=np.int64)
            out[idx] = bdtrc(k - 1, n, 0.5)
        idx = np.flatnonzero(kinds == "cluster-tango")
        if idx.size:
            b, c = facts.improved[idx], facts.worsened[idx]
            out[idx] = ndtr((b - c) / np.sqrt((b + c) * facts.deff[idx]))
        idx = np.flatnonzero((kinds == "t") | (kinds == "cluster-t"))
        if idx.size:
            out[idx] = stdtr(facts.df[idx], facts.estimate[idx] / facts.se[idx])
        idx = np.flatnonzero(np.isin(kinds, _BOOTSTRAP_METHODS))
        if idx.size:
            out[idx] = ndtr(facts.estimate[idx] / facts.se[idx])
    for j in np.flatnonzero(kinds == "cluster-sign-flip"):
        assert facts.unit_sums is not None and facts.unit_weights is not None
        out[j] = sign_flip_p(facts.unit_sums[:, j], facts.unit_weights[:, j], 0.0, upper=False)
    return np.where(np.isfinite(out), np.clip(out, 0.0, 1.0), 1.0)


@cache
def _sign_matrix(g: int) -> np.ndarray:
    """Every vector of ``g`` signs (2^g x g), the first all +1."""
    bits = (np.arange(1 << g)[:, None] >> np.arange(g)[None, :]) & 1
    signs: np.ndarray = 1.0 - 2.0 * bits
    return signs


def sign_flip_p(sums: np.ndarray, weights: np.ndarray, mu: float, *, upper: bool) -> float:
    """Exact sign-flip p-value over clusters for ``H0: mean = mu``.

    With ``a_u = S_u - mu W_u`` (cluster sum minus ``mu`` times its pairs), symmetric about zero
    under H0, ``upper``: ``P_ε(Σ ε_u a_u >= Σ a_u)`` (evidence the mean exceeds ``mu``); otherwise
    ``P_ε(Σ ε_u a_u <= Σ a_u)``; over all ``2^G`` sign vectors, ties counted (conservative).
    """
    keep = weights > 0
    a = sums[keep] - mu * weights[keep]
    flipped = _sign_matrix(int(a.size)) @ a
    observed = float(a.sum())
    tol = 1e-12 * max(1.0, float(np.abs(a).sum()))
    hits = flipped >= observed - tol if upper else flipped <= observed + tol
    return float(np.mean(hits))


def sign_flip_bound(sums: np.ndarray, weights: np.ndarray, tail: float, *, upper: bool) -> float:
    """One-sided bound of the ratio mean ``Σ S_u / Σ W_u`` by inverting the exact sign-flip test
    over clusters (few clusters: ``MIN_CLUSTERS`` or fewer).

    Lower bound: the smallest ``mu`` whose upper-tail p-value exceeds ``tail`` (bisection to
    1e-10); upper bound likewise. With ``2^G <= 1/tail`` no ``mu`` can be rejected: the bound
    lies ``max |S_u / W_u| + |estimate| + 1`` beyond the estimate, past any feasible difference.
    """
    keep = weights > 0
    if not keep.any():
        return math.nan
    means = sums[keep] / weights[keep]
    estimate = float(sums[keep].sum() / weights[keep].sum())
    reach = float(np.max(np.abs(means))) + abs(estimate) + 1.0
    inner, outer = estimate, estimate + reach if upper else estimate - reach
    if sign_flip_p(sums, weights, outer, upper=not upper) > tail:
        return outer
    for _ in range(60):
        mid = (inner + outer) / 2
        if sign_flip_p(sums, weights, mid, upper=not upper) > tail:
            inner = mid
        else:
            outer = mid
    return inner


def weighted_bh_cutoff(p: Any, weights: Any, q: float) -> float:
    """The weighted Benjamini-Hochberg cutoff: reject ``H_i`` when ``p_i / w_i`` is at or below it.

    Weights are positive and rescaled to average 1 over the ``G`` hypotheses; the step-up rule
    takes the largest ``k`` with the k-th smallest ``p_i / w_i`` at or below ``q k / G`` and
    returns ``q k / G`` (0 when none qualifies: nothing is rejected). With positively dependent
    p-values this controls the false-discovery rate at ``q``; when every hypothesis is true it
    is the chance of any rejection (Genovese, Roeder and Wasserman 2006).
    """
    p_arr = np.asarray(p, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    g = p_arr.size
    if g == 0:
        return 0.0
    w = w * g / w.sum()
    ratio = np.sort(p_arr / w)
    steps = q * np.arange(1, g + 1) / g
    passing = np.flatnonzero(ratio <= steps + 1e-15)
    return float(steps[passing[-1]]) if passing.size else 0.0


def minimum_nonzero(tail: float) -> int:
    """Fewest non-zero differences with which a one-sided level-``tail`` block is possible.

    Under no change each non-zero difference is as likely up as down, so ``k`` differences all
    pointing down have probability ``2^-k``: no test at level ``tail`` can reject with fewer
    than ``ceil(log2(1 / tail))`` of them (6 at 2.5%).
    """
    return max(1, math.ceil(math.log2(1.0 / tail) - 1e-12))


def family_critical_value(deviations: np.ndarray, family_size: int, confidence: float) -> tuple[float, str]:
    """Critical value ``c`` for simultaneous one-sided upper bounds over a family of gates.

    ``deviations``: per resample, the largest standardised deviation ``max_g (est_g - mean*_g)
    / se_g`` over the family (NaN-free). The max-statistic bound takes its ``1 - tail``
    quantile (``tail = (1 - confidence)/2``); with overlapping slices and shared cases it is
    far below Bonferroni's ``Φ⁻¹(1 - tail/G)``, which caps it (both control the chance of any
    false block at ``tail``). Returns ``(c, "max-statistic" | "bonferroni" | "none")``; a
    family of one or none takes the per-gate ``z``.
    """
    tail = (1 - confidence) / 2
    if family_size <= 1:
        return _z(tail), "none"
    bonferroni = _z(tail / family_size)
    if deviations.size == 0:
        return bonferroni, "bonferroni"
    maxstat = float(np.quantile(deviations, 1 - tail))
    if maxstat < bonferroni:
        return max(maxstat, _z(tail)), "max-statistic"
    return bonferroni, "bonferroni"


def normal_tail(c: float) -> float:
    """``1 - Φ(c)``: the one-sided tail probability of a normal critical value."""
    return float(ndtr(-c))


_BOOTSTRAP_METHODS = ("bootstrap", "cluster-bootstrap", "percentile")


@dataclass(frozen=True)
class ColumnFacts:
    """Closed-form facts of every column (cases x columns of paired differences, NaN = absent).

    ``n`` pairs; ``units`` independent units (clusters holding pairs, or ``n``); ``nonzero``
    units whose difference (cluster total) is not zero; ``improved``/``worsened`` the counts of
    +1/-1 differences; ``ternary`` every difference in {-1, 0, +1}; ``estimate`` the mean;
    ``se`` its standard error (``sd/√n``, or the cluster ratio standard error); ``sd`` the
    per-pair standard deviation behind ``se`` (``√n · se`` for clusters); ``method`` the
    interval each column's decision uses.
    """

    n: np.ndarray
    units: np.ndarray
    nonzero: np.ndarray
    improved: np.ndarray
    worsened: np.ndarray
    ternary: np.ndarray
    estimate: np.ndarray
    se: np.ndarray
    sd: np.ndarray
    method: list[GateMethod]
    # cluster design effect (cluster variance over the case variance, at least 1; 1 for cases)
    deff: np.ndarray
    # degrees of freedom of the t methods: non-zero units minus one
    df: np.ndarray
    # one pair's standard deviation under no change, from the improvements only, and the
    # clusters' design effect under no change (null_spread): what pairs_needed rests on
    null_sd: np.ndarray
    null_deff: np.ndarray
    # units x columns: each cluster's sum of values and count of values (clustered columns only)
    unit_sums: np.ndarray | None = None
    unit_weights: np.ndarray | None = None

    def needs_bootstrap(self) -> bool:
        return any(m in _BOOTSTRAP_METHODS for m in self.method)


def _method(
    nonzero_cases: int, nonzero: float, *, few: bool, clustered: bool, ternary: bool, cluster_labels: bool
) -> GateMethod:
    """The interval one column's data call for (see the module docstring): ``nonzero_cases``
    non-zero differences, ``nonzero`` non-zero units; ``few`` clusters in the whole comparison;
    the column's units are ``clustered``; its differences are ``ternary`` (in {-1, 0, +1});
    ``cluster_labels`` were given (then case-unit columns never take the case bootstrap, since
    the shared resampling is by cluster)."""
    if nonzero_cases == 0:
        return "no-change"
    if few:
        # Few clusters: Rao-Scott's design effect, t and the cluster bootstrap all rest on a
        # variance estimated from a handful of clusters; the sign-flip test of the cluster
        # totals is exact under symmetry (t on cluster means with G - 1 df blocked 3.7% of
        # unchanged 8-document sets and covered 0.917).
        return "cluster-sign-flip"
    if clustered and ternary and nonzero < BOOTSTRAP_MIN_NONZERO:
        return "cluster-tango"
    if clustered:
        return "cluster-bootstrap" if nonzero >= BOOTSTRAP_MIN_NONZERO else "cluster-t"
    if ternary:
        return "tango"
    if nonzero_cases >= BOOTSTRAP_MIN_NONZERO and not cluster_labels:
        return "bootstrap"
    return "t"


def column_facts(
    values: Any,
    *,
    clusters: Sequence[Any] | np.ndarray | None = None,
    method: Literal["auto", "percentile"] = "auto",
) -> ColumnFacts:
    """Per-column facts and the interval method chosen by the data (see the section comment).

    With ``clusters``, a column's units are clusters when its pairs span two clusters or more
    and some cluster holds two pairs or more (the t interval on few clusters stays valid, only
    wide); otherwise its units are its cases and it takes the
    closed-form case method (Tango or t), since the shared resampling is by cluster.
    ``method="percentile"`` forces the percentile bootstrap everywhere (older decisions; not
    calibrated at small n).
    """
    data = _as_matrix(values)
    n_rows, q = data.shape
    present = ~np.isnan(data)
    filled = np.where(present, data, 0.0)
    n = present.sum(axis=0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = filled.sum(axis=0) / n
        centred = np.where(present, data - estimate, 0.0)
        sd = np.sqrt((centred**2).sum(axis=0) / (n - 1))
    sd = np.where(n > 1, sd, np.nan)
    improved = (filled == 1.0).sum(axis=0)
    worsened = (filled == -1.0).sum(axis=0)
    nonzero_cases = (filled != 0).sum(axis=0)
    ternary = (improved + worsened) == nonzero_cases
    units = n.copy()
    nonzero = nonzero_cases.astype(np.float64)
    se = sd / np.sqrt(n)
    clustered = np.zeros(q, dtype=bool)
    deff = np.ones(q)
    unit_sums = unit_weights = None
    n_units_all = 0
    if clusters is not None and n_rows:
        codes, n_units = _cluster_codes(clusters, n_rows)
        assert codes is not None
        n_units_all = n_units
        sums, weights = _unit_sums(filled, present.astype(np.float64), codes, n_units)
        unit_sums, unit_weights = sums, weights
        cl_se, k = cluster_standard_error(sums, weights)
        clustered = (k >= 2) & (weights.max(axis=0, initial=0) > 1)
        units = np.where(clustered, k, n)
        nonzero = np.where(clustered, (np.abs(sums) > 0).sum(axis=0), nonzero)
        with np.errstate(invalid="ignore", divide="ignore"):
            deff = np.where(clustered & (se > 0), np.maximum((cl_se / se) ** 2, 1.0), 1.0)
        deff = np.where(np.isfinite(deff), deff, 1.0)
        se = np.where(clustered, cl_se, se)
        with np.errstate(invalid="ignore"):
            sd = np.where(clustered, cl_se * np.sqrt(n), sd)
    # Few clusters in the whole comparison (fewer than MIN_CLUSTERS): every clustered column
    # takes the exact sign-flip over its clusters. With enough clusters overall, a slice holding
    # few of them keeps Rao-Scott's Tango or t (its interval is only wide).
    few = clustered & (n_units_all < MIN_CLUSTERS)
    df = nonzero - 1
    df = np.maximum(np.where(np.isfinite(df), df, 1.0), 1.0)
    methods: list[GateMethod] = [
        method
        if method != "auto"
        else _method(
            int(nonzero_cases[j]),
            float(nonzero[j]),
            few=bool(few[j]),
            clustered=bool(clustered[j]),
            ternary=bool(ternary[j]),
            cluster_labels=clusters is not None,
        )
        for j in range(q)
    ]
    null_sd, null_deff = null_spread(data, clusters if clusters is not None and n_rows else None)
    null_deff = np.where(clustered, null_deff, 1.0)
    return ColumnFacts(
        n=n,
        units=units,
        nonzero=nonzero,
        improved=improved,
        worsened=worsened,
        ternary=ternary,
        estimate=estimate,
        se=se,
        sd=sd,
        method=methods,
        deff=deff,
        df=df,
        null_sd=null_sd,
        null_deff=null_deff,
        unit_sums=unit_sums,
        unit_weights=unit_weights,
    )


def _few_cluster_bounds(
    out: np.ndarray, facts: ColumnFacts, idx: np.ndarray, tail: float, *, upper: bool
) -> None:
    """Fill ``out[idx]``, the few-cluster columns' bounds (in place).

    The upper bound (what a block and "worse" read: zero rejected or not) from the exact
    sign-flip, valid at zero where no change makes cluster totals symmetric; the lower bound
    (what a pass reads: -margin rejected) from t on the cluster means with G - 1 degrees of
    freedom, or Rao-Scott's Tango for 0/1 pairs, since away from zero sparse 0/1 totals are not
    symmetric (the sign-flip's lower bound passed 12% of 2.5-margin drops at 6 clusters, t's 6%).
    """
    if upper:
        for j in idx:
            assert facts.unit_sums is not None and facts.unit_weights is not None
            out[j] = sign_flip_bound(facts.unit_sums[:, j], facts.unit_weights[:, j], tail, upper=True)
        return
    graded = idx[~facts.ternary[idx]]
    if graded.size:
        df_few = np.maximum(facts.units[graded] - 1, 1)
        out[graded] = facts.estimate[graded] - t_quantile(tail, df_few) * facts.se[graded]
    binary = idx[facts.ternary[idx]]
    if binary.size:
        # 0/1 pairs: Rao-Scott's Tango, whose lower bound held at 2 to 9 clusters
        out[binary] = tango_bounds(
            facts.improved[binary] / facts.deff[binary],
            facts.worsened[binary] / facts.deff[binary],
            facts.n[binary] / facts.deff[binary],
            tail,
        )[0]


def column_bounds(
    facts: ColumnFacts, boot: BootstrapResult | None, tail: float, *, upper: bool
) -> np.ndarray:
    """Each column's one-sided bound with ``tail`` probability beyond it, by its method.

    Lower bounds from a bootstrap are read at the level ``bootstrap_means`` was called with
    (``boot.lo``); upper bounds at any ``tail`` up to its ``keep_tail``.
    """
    q = facts.n.size
    out = np.full(q, np.nan)
    sign = 1.0 if upper else -1.0
    kinds = np.array(facts.method, dtype=object)
    tango = np.flatnonzero((kinds == "tango") | (kinds == "cluster-tango"))
    if tango.size:
        # Clustered pairs: Rao-Scott -- every count over the design effect (1 for cases).
        deff = facts.deff[tango]
        lo, hi = tango_bounds(
            facts.improved[tango] / deff, facts.worsened[tango] / deff, facts.n[tango] / deff, tail
        )
        out[tango] = hi if upper else lo
    # Degrees of freedom from the non-zero units: a sparse metric's variance estimate rests on
    # its few non-zero differences, and t on n - 1 covered 0.91 at 30 pairs with ~5 of them.
    df = facts.df
    for name in ("t", "cluster-t"):
        idx = np.flatnonzero(kinds == name)
        if idx.size:
            out[idx] = facts.estimate[idx] + sign * t_quantile(tail, df[idx]) * facts.se[idx]
    idx = np.flatnonzero(kinds == "no-change")
    if idx.size:
        out[idx] = facts.estimate[idx] + sign * no_change_halfwidth(facts.n[idx], tail)
    _few_cluster_bounds(out, facts, np.flatnonzero(kinds == "cluster-sign-flip"), tail, upper=upper)
    for j in np.flatnonzero(np.isin(kinds, _BOOTSTRAP_METHODS)):
        if boot is None:
            raise ValueError("bootstrap columns need the bootstrap result")
        out[j] = upper_quantile(boot, int(j), 1 - tail) if upper else boot.lo[j]
    return out
