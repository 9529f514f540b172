"""gate.decision.sizing: what ragproof validate says a dataset can detect before any run."""

from __future__ import annotations

import math

import pytest

from gate.decision.sizing import detectable_drop, sizing_lines
from gate.model.config import GateConfig
from gate.model.dataset import Case


def test_detectable_drop_formula() -> None:
    # (1.959964 + 0.841621) * sqrt(0.05 / 200)
    assert detectable_drop(200, 0.05) == pytest.approx(2.801585 * math.sqrt(0.05 / 200), rel=1e-6)


def test_sizing_names_all_and_the_smallest_gating_slice() -> None:
    cases = [Case(id=f"c{i}", question="q", tags=["topic:a" if i < 20 else "topic:b"]) for i in range(200)]
    cases += [Case(id=f"u{i}", question="q", kind="unanswerable") for i in range(5)]  # below min_pairs
    lines = sizing_lines(cases, GateConfig())
    assert lines == [
        "sizing (margin 0.02, a 0/1 metric whose answers change on 5% / 10% of the cases between runs): "
        "passing the margin needs 1,067 / 2,005 cases (189 even if nothing changes)",
        "  all (205 cases): detects drops of 0.04 / 0.06; too few for the margin",
        "  tags=topic:a (20 cases, the smallest gating slice): detects drops of 0.14 / 0.20; too few for the margin",
    ]
    # a slice dimension that does not gate is not the smallest gating slice
    only_kind = sizing_lines(cases, GateConfig(gate_slices=["kind"]))
    assert only_kind[2].startswith("  kind=qa (200 cases, the smallest gating slice)")
