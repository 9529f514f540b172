"""The resampling engine: the paired (and clustered) bootstrap of column means on shared resamples.

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
from ``PCG64(SeedSequence([seed, i]))`` (:mod:`gate.stats.counts`), so results do not depend on
how blocks are grouped into tasks, on the number of worker threads, on memory limits, or on
whether a child process drew the counts ahead. Values are rounded to a
binary grid fine enough (at least 2^-52 of the largest possible resample sum) that every
count-weighted sum is exact in float64: the matrix product gives the same bits whatever
summation order the BLAS library or its thread count chooses. While worker threads multiply, OpenBLAS
runs one thread per product (two levels of threads on the same cores only spin). The rounding moves a value by
less than 1e-9 of the column's largest magnitude; point estimates use the unrounded values.
Denominators (integer counts) and columns of small fractions (0/1 scores, k-ths: values times
a small L are integers) are multiplied as integers in float32, exact while every partial sum
stays below 2^24, at twice the speed. The rest are integers on their grid too: sparse ones are
multiplied in float64 over their nonzero units, dense ones in float32 as limbs of a few bits
each (base 2^10 at 10,000 units), joined back exactly in float64 -- the same bits as a float64
product, without a float64 copy of the counts.

Memory: a task holds one group of count blocks (about ``TASK_CELLS`` cells, at least one
block; 8 bytes a cell for the counts plus 12 for one block's draws and their positions), worker threads are limited so that
running tasks stay under ``MEMORY_BUDGET``, and the resample statistics are ``resamples x
columns`` floats for at most ``COLUMN_GROUP`` (1,024) columns at a time: at 100,000 cases and 10,000
resamples peak use stays near 300 MB.

Besides each column's percentile interval and spread, one pass gives the block family's
max-statistic (``family_scale``: per resample, the largest standardised deviation over the
family's columns) and each column's upper tail (``keep_tail``); which interval a gate takes
is chosen in :mod:`gate.stats.intervals`.
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
from typing import Any

import numpy as np

from gate.stats.counts import BLOCK, DrawnAhead, block_counts

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


def _exact_grid(values: np.ndarray, max_multiplier: float) -> tuple[np.ndarray, np.ndarray]:
    """Each column rounded onto a power-of-two grid so that sums up to ``max_multiplier * max|x|``
    are exact, and each column's grid step (0 for a column of zeros or non-finite values, left
    as they are)."""
    steps = np.zeros(values.shape[1])
    peak = np.max(np.abs(values), axis=0) if values.size else np.zeros(values.shape[1])
    for j, top in enumerate(peak):
        if top == 0 or not np.isfinite(top):
            continue
        exponent = math.ceil(math.log2(top)) + math.ceil(math.log2(max(max_multiplier, 1.0))) - 52
        # Below 2^-1074 there is no float64 grid: subnormal columns are already on the finest one.
        steps[j] = 2.0 ** max(exponent, -1074)
    # Every column at once (the same operations on each value as column by column); those
    # without a grid are put back as they were.
    scale = np.where(steps > 0, steps, 1.0)
    out = np.round(values / scale)
    out *= scale
    ungridded = steps == 0
    if ungridded.any():
        out[:, ungridded] = values[:, ungridded]
    return out, steps


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
    nonzero = column[column != 0]  # zeros are integers at any scale (most paired differences)
    top = float(np.max(np.abs(nonzero), initial=0.0))
    for scale in _FRACTION_SCALES:
        if top * scale * bound >= _FLOAT32_EXACT:
            return None
        scaled = nonzero * scale
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


def _limb_base(n_units: int) -> int:
    """The largest power of two ``D`` with ``n_units * (D - 1) < 2^24`` (1: no such limbs)."""
    if n_units < 1:
        return 1
    return 1 << max(0, int(math.floor(math.log2((_FLOAT32_EXACT - 1) / n_units))))


def _limb_split(sums: np.ndarray, steps: np.ndarray, base: int) -> tuple[np.ndarray, int] | None:
    """Columns on their exact grid split into integer limbs that float32 multiplies exactly.

    A column's unit sums are integers ``m`` times its grid ``step``, with ``sum_u c_u |m_u| <=
    2^52`` for any resample's counts (the grid's promise). Written in ``base`` (``D``, from
    :func:`_limb_base`) as ``m = sign(m) * sum_k d_k D^k`` with digits ``0 <= d_k < D``, each
    limb column ``sign(m) d_k`` times counts that add up to ``n_units`` stays below 2^24 in
    every partial sum: exact in float32, in any order. :func:`_join_limbs` adds the limb sums
    back in float64, exactly.

    Returns (units x limbs*columns, limb-major: limb k of column j at ``k * columns + j``) in
    float32 and the number of limbs, or None when there are no columns, a column has no grid
    (``steps`` 0), or ``base`` is below 2 (too many units): the caller multiplies in float64.
    """
    if base < 2 or sums.shape[1] == 0 or not np.all(steps > 0):
        return None
    scaled = sums / steps
    if not np.array_equal(scaled, np.round(scaled)):  # not on the grid after all
        return None
    magnitude = np.abs(scaled).astype(np.int64)
    width = base.bit_length() - 1
    limbs = max(1, -(-int(magnitude.max()).bit_length() // width))
    sign = np.sign(scaled)
    parts = [sign * ((magnitude >> (width * k)) & (base - 1)) for k in range(limbs)]
    return np.hstack(parts).astype(np.float32), limbs


def _join_limbs(limb_sums: np.ndarray, limbs: int, base: int, steps: np.ndarray) -> np.ndarray:
    """Count-weighted column sums from their limb sums (resamples x limbs*columns, limb-major,
    integers in float64): Horner's rule from the top limb, then each column's step.

    Every partial result is an integer of magnitude at most ``sum_u c_u |m_u| <= 2^52``, so
    each operation is exact and the result has the bits of the exact sum, which is what the
    float64 product gives on the same grid.
    """
    columns = steps.shape[0]
    total = limb_sums[:, (limbs - 1) * columns :].copy()
    for k in range(limbs - 2, -1, -1):
        total *= base
        total += limb_sums[:, k * columns : (k + 1) * columns]
    total *= steps
    return total


def _resample_means(
    sums: np.ndarray,
    weights: np.ndarray,
    steps: np.ndarray,
    resamples: int,
    seed: int,
    ahead: DrawnAhead | None = None,
) -> np.ndarray:
    """Resample statistics (resamples x columns) from the shared count blocks.

    One exact float32 product per task covers the denominators (integer weights) and the
    columns of small fractions (binary scores, k-ths: integers after scaling). The rest, on
    their exact grid (``steps``), multiply in float64 over their few nonzero units when they
    are sparse (:func:`_sparse_groups`), else join the float32 product as integer limbs
    (:func:`_limb_split`); where limbs cannot be formed (a non-finite column, or millions of
    units) a dense float64 product takes them. Counts come from ``ahead`` when it drew
    this bootstrap's (:mod:`gate.stats.counts`), else are drawn here.
    """
    n_units, q = sums.shape
    if ahead is not None and not ahead.matches(seed, n_units, resamples):
        ahead = None
    # Every product sums at most n_units draws of one unit: |partial sums| <= n_units * max|x|.
    bound = n_units * max(float(weights.max(initial=1.0)), 1.0)
    # Identical weight columns (same pair set) share one denominator product.
    first_columns, inverse = _distinct_columns(weights)
    scales = [_integer_scale(sums[:, j], bound) for j in range(q)]
    fast = [j for j in range(q) if scales[j] is not None]
    slow = [j for j in range(q) if scales[j] is None]
    fast_scale = np.array([scales[j] for j in fast], dtype=np.float64)
    single = np.float32 if bound < _FLOAT32_EXACT else np.float64
    slow_rhs = sums[:, slow]
    # Sparse columns multiply over their few nonzero units in float64; the rest in float32 limbs.
    slow_groups = _sparse_groups(slow_rhs)
    base = _limb_base(n_units)
    split = _limb_split(slow_rhs, steps[slow], base) if slow and slow_groups is None else None
    parts = [np.round(sums[:, fast] * fast_scale), weights[:, first_columns]]
    if split is not None:
        parts.append(split[0])
    rhs = np.hstack(parts).astype(single)
    n_den = len(first_columns)
    n_blocks = -(-resamples // BLOCK)
    per_task = max(1, TASK_CELLS // (BLOCK * n_units))
    tasks = [range(s, min(s + per_task, n_blocks)) for s in range(0, n_blocks, per_task)]

    # Each task writes its resamples' rows straight into ``out``: no list of partial results
    # and no stacked copy of them (resamples x columns floats: 80 MB at 1,024 columns).
    out = np.empty((resamples, q))

    def run(blocks: range) -> None:
        sizes = [min(BLOCK, resamples - b * BLOCK) for b in blocks]
        counts = np.empty((sum(sizes), n_units), dtype=single)
        if ahead is None or not ahead.fill(blocks[0] * BLOCK, counts):
            start = 0
            for b, rows in zip(blocks, sizes, strict=True):
                block_counts(seed, b, counts[start : start + rows])
                start += rows
        product = (counts @ rhs).astype(np.float64)
        num = np.empty((counts.shape[0], q))
        num[:, fast] = product[:, : len(fast)] / fast_scale
        den = product[:, len(fast) : len(fast) + n_den][:, inverse]
        if split is not None:
            num[:, slow] = _join_limbs(product[:, len(fast) + n_den :], split[1], base, steps[slow])
        elif slow:
            num[:, slow] = _float64_product(counts, slow_rhs, slow_groups)
        first = blocks[0] * BLOCK
        with np.errstate(invalid="ignore", divide="ignore"):
            out[first : first + counts.shape[0]] = np.where(
                den > 0, num / np.where(den > 0, den, 1.0), np.nan
            )

    # A running task holds about 24 bytes per count cell (draws as positions, float32 counts,
    # and a float64 copy where limbs cannot be formed).
    task_bytes = 24 * BLOCK * min(per_task, n_blocks) * n_units
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
    ahead: DrawnAhead | None = None,
) -> BootstrapResult:
    """Bootstrap the mean of every column of ``values`` (cases x columns, NaN = absent).

    All columns share one set of resamples of the cases (or of ``clusters``: one label per
    case; cases with equal labels are resampled together). Percentile intervals take the
    ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the resample means with
    linear interpolation, as ``numpy.quantile`` and ``scipy.stats.bootstrap`` do.

    ``family_scale`` (one factor per column, 0 outside the family) adds ``family_max``: per
    resample ``max_j (estimate_j - mean*_j) * scale_j`` (``-inf`` when no family column has a
    statistic), the input of :func:`gate.stats.intervals.family_critical_value`. ``keep_tail`` keeps each column's
    largest ``ceil(keep_tail * resamples) + 2`` resample means so that any quantile at level
    ``>= 1 - keep_tail`` can be read afterwards with :func:`upper_quantile`. ``ahead``: the
    counts a child process drew for this bootstrap (:func:`gate.stats.counts.draw_ahead`),
    used when its seed, units and resamples match; the results are the same to the bit.
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
            ahead=ahead,
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
    exact, steps = _exact_grid(filled, n_units * max(biggest_unit, 1.0))
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
        boot = _resample_means(exact_sums[:, cols], weights[:, cols], steps[cols], resamples, seed, ahead)
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
