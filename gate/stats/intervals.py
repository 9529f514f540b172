"""The interval choice: which interval each gate's data call for, and the tests built on it.

The percentile bootstrap under-covers at small n and reports a zero-width interval when no
pair changed (docs/methods.md, "Methods chosen by the data", has the simulation tables). The
decision therefore takes, per gate, the interval that holds its level at that data type and n:

- differences in {-1, 0, +1} (paired 0/1 metrics): Tango's score interval at every n;
- other differences, case units: the t interval (degrees of freedom: non-zero differences
  minus one) below ``BOOTSTRAP_MIN_NONZERO`` non-zero differences, the percentile bootstrap from there on (a sparse metric's bootstrap is only as
  good as its non-zero differences: at 100 pairs with 15 of them it blocked 3.7% of unchanged
  gates);
- cluster units, differences in {-1, 0, +1}: Tango's interval on the counts divided by the
  design effect (Rao-Scott), below ``BOOTSTRAP_MIN_NONZERO`` clusters with a non-zero total;
- other cluster units: the t interval on cluster totals (ratio estimator; degrees of freedom:
  clusters with a non-zero total minus one) below
  ``BOOTSTRAP_MIN_NONZERO`` clusters with a non-zero total, the cluster bootstrap from there on;
- no non-zero difference at all (any type): the interval of "no case changed", Tango's
  ``±z²/(n+z²)``, never a zero-width interval.

Also here: the drop p-values and the review family's weighted Benjamini-Hochberg cutoff, the
block family's critical value (the max-statistic quantile from :mod:`gate.stats.resampling`,
capped by Bonferroni), and the power figures (``pairs_needed``, the no-change spread).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np
from scipy.special import bdtrc, ndtr, ndtri, stdtr, stdtrit

from gate.core.preload import Preload
from gate.stats.resampling import (
    BootstrapResult,
    _as_matrix,
    _cluster_codes,
    _mean_sd,
    _unit_sums,
    upper_quantile,
)

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


def load_root_finder() -> None:
    """Start importing ``scipy.optimize`` (Tango's root finder) in a thread, unless loaded.

    For a caller about to wait on work that releases the GIL (the bootstrap's worker threads):
    the import then costs the main thread nothing. The caller's own code imports nothing else
    meanwhile (:mod:`gate.core.preload`); :func:`tango_bounds` waits for it if still loading.
    """
    if "scipy.optimize" not in sys.modules:
        Preload(["scipy.optimize"])


@cache
def _tango_pair(improved: float, worsened: float, n: float, z: float) -> tuple[float, float]:
    # Imported on first use: scipy.optimize loads every solver (0.1 s of the GIL), which
    # :func:`load_root_finder` overlaps with the bootstrap that comes first.
    from scipy.optimize import brentq

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
    """Per-column facts and the interval method chosen by the data (see the module docstring).

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
    estimate, sd = _mean_sd(data, present, filled, n)
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
