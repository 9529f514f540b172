"""Resample counts drawn ahead by a child process are the counts the bootstrap draws itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gate_runs import fixed_runs, write_run

from gate.stats import bootstrap_means, counts, resampling
from gate.stats.counts import BLOCK, DrawnAhead, block_counts, draw_ahead


def _drawn(seed: int, n_units: int, resamples: int) -> np.ndarray:
    out = np.empty((resamples, n_units), dtype=np.float32)
    for block in range(-(-resamples // BLOCK)):
        block_counts(seed, block, out[block * BLOCK : (block + 1) * BLOCK])
    return out


@pytest.mark.parametrize("n_units", [1, 2, 7, 300])
def test_the_child_draws_the_counts_of_every_block(n_units: int) -> None:
    resamples = 3 * BLOCK + 5  # a last block of 5 resamples
    ahead = DrawnAhead(9, n_units, resamples)
    try:
        got = np.full((resamples, n_units), -1.0, dtype=np.float32)
        for first in range(0, resamples, BLOCK):  # as the bootstrap asks: block by block
            assert ahead.fill(first, got[first : first + BLOCK])
        assert np.array_equal(got, _drawn(9, n_units, resamples))
        assert np.all(got.sum(axis=1) == n_units)
    finally:
        ahead.close()


def test_a_bootstrap_takes_the_counts_drawn_ahead_and_gives_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(4)
    data = np.column_stack([rng.random(501) < 0.7, rng.random(501) - 0.5]).astype(float)
    data[::5, 1] = np.nan
    itself = bootstrap_means(data, resamples=700, seed=3, keep_tail=0.025)
    ahead = DrawnAhead(3, 501, 700)
    try:
        # every count now comes from the child: drawing here would fail
        monkeypatch.setattr(resampling, "block_counts", lambda *a: pytest.fail("drew counts itself"))
        taken = bootstrap_means(data, resamples=700, seed=3, keep_tail=0.025, ahead=ahead)
    finally:
        ahead.close()
    for field in ("estimate", "lo", "hi", "se", "top", "valid"):
        assert np.array_equal(getattr(itself, field), getattr(taken, field), equal_nan=True), field


@pytest.mark.parametrize("other", [(4, 501, 700), (3, 500, 700), (3, 501, 640)])
def test_counts_of_another_bootstrap_are_left_alone(other: tuple[int, int, int]) -> None:
    data = np.random.default_rng(1).random((501, 2))
    itself = bootstrap_means(data, resamples=700, seed=3)
    ahead = DrawnAhead(*other)
    try:
        assert not ahead.matches(3, 501, 700)
        taken = bootstrap_means(data, resamples=700, seed=3, ahead=ahead)
    finally:
        ahead.close()
    assert np.array_equal(itself.lo, taken.lo) and np.array_equal(itself.hi, taken.hi)


def test_a_child_that_gives_up_leaves_the_bootstrap_to_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    # A count above what 4 bits hold (here: above 1, in the forked child's copy of the module)
    # makes the child exit without counts; the parent draws them itself, to the same results.
    data = np.random.default_rng(2).random((300, 2))
    itself = bootstrap_means(data, resamples=300, seed=5)
    monkeypatch.setattr(counts, "PACKED_MAX", 1)
    ahead = DrawnAhead(5, 300, 300)
    try:
        assert not ahead.fill(0, np.empty((BLOCK, 300)))
        taken = bootstrap_means(data, resamples=300, seed=5, ahead=ahead)
    finally:
        ahead.close()
    assert np.array_equal(itself.lo, taken.lo) and np.array_equal(itself.hi, taken.hi)


def test_close_ends_a_running_child_and_reaps_it() -> None:
    ahead = DrawnAhead(0, 4_000, 20_000)  # half a second of drawing
    pid = ahead._pid
    ahead.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left behind
    assert not ahead.fill(0, np.empty((BLOCK, 4_000)))
    ahead.close()  # twice is harmless


def test_only_bootstraps_worth_it_are_drawn_ahead() -> None:
    assert draw_ahead(0, 1_000, 10_000) is None  # 10^7 cells: drawn at once
    assert draw_ahead(0, 200_000, 10_000) is None  # 1 GB of counts: not held
    ahead = draw_ahead(0, 10_000, 10_000)
    assert ahead is not None
    ahead.close()


CHECK = """
import sys
from gate.stats import counts
from gate.cli import main
if sys.argv[1] == "ahead":
    counts.AHEAD_MIN_CELLS = 0  # this small comparison too
    real = counts.DrawnAhead.fill
    def fill(self, first_row, out):
        print("filled", file=sys.stderr)
        return real(self, first_row, out)
    counts.DrawnAhead.fill = fill
raise SystemExit(main(["compare", *sys.argv[2:]]))
"""


def test_compare_draws_ahead_and_decides_the_same(tmp_path: Path) -> None:
    base, cand = fixed_runs()
    paths = [str(write_run(tmp_path / role, run.meta, run.rows)) for role, run in (("b", base), ("c", cand))]
    out: dict[str, Any] = {}
    for mode in ("ahead", "itself"):
        proc = subprocess.run(
            [sys.executable, "-c", CHECK, mode, *paths, "--json", str(tmp_path / f"{mode}.json")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert ("filled" in proc.stderr) == (mode == "ahead")
        out[mode] = (proc.returncode, proc.stdout, json.loads((tmp_path / f"{mode}.json").read_text()))
    assert out["ahead"] == out["itself"]
