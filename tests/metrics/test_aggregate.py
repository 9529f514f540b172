"""Aggregation: nearest-rank percentiles, counts, case failures, NaN, slices, distributions."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.metrics.aggregate import nearest_rank, summarize
from gate.model.artifact import Row
from gate.model.records import MetricResult


def row(case_id: str, metrics: dict[str, MetricResult] | None = None, **fields: Any) -> Row:
    fields.setdefault("kind", "qa")
    fields.setdefault("status", "ok")
    return Row(case_id=case_id, metrics=metrics or {}, **fields)


def scored(v: float) -> MetricResult:
    return MetricResult.scored(v)


M = "retrieval.recall_at_k"


def test_nearest_rank_position_is_max_1_ceil_f_n() -> None:
    values = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    assert nearest_rank(values, 0.5) == 50.0  # ceil(5) = 5
    assert nearest_rank(values, 0.95) == 100.0  # ceil(9.5) = 10
    assert nearest_rank(values, 0.0) == 10.0  # max(1, 0) = 1
    assert nearest_rank(values, 0.51) == 60.0  # ceil(5.1) = 6
    assert nearest_rank([7.0], 0.95) == 7.0
    assert nearest_rank([1.0, 2.0, 3.0], 0.5) == 2.0  # ceil(1.5) = 2


def test_nearest_rank_rejects_empty_and_bad_fraction() -> None:
    with pytest.raises(ValueError):
        nearest_rank([], 0.5)
    with pytest.raises(ValueError):
        nearest_rank([1.0], 1.5)


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=50), st.floats(0, 1))
def test_property_nearest_rank_is_a_sample_value(values: list[float], fraction: float) -> None:
    ordered = sorted(values)
    got = nearest_rank(ordered, fraction)
    assert got in ordered
    assert got == ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def test_mean_p50_p95_and_counts() -> None:
    rows = [row(f"c{i}", {M: scored(v)}) for i, v in enumerate([0.0, 0.5, 1.0, 1.0])]
    rows.append(row("s", {M: MetricResult.skipped("case has no expected_source_ids")}))
    rows.append(row("n", {M: MetricResult.not_applicable("no claims")}))
    s = summarize(rows, [M], [])
    m = s.slices["all"][M]
    assert (m.mean, m.p50, m.p95) == (0.625, 0.5, 1.0)
    assert (m.scored, m.skipped, m.not_applicable, m.errored) == (4, 1, 1, 0)
    assert s.cases == 6 and s.failures == 0 and s.adapter_failure_rate == 0.0


def test_case_failures_count_in_every_metrics_errored_and_in_no_mean() -> None:
    names = [M, "answer.token_f1"]
    rows = [
        row("a", {M: scored(1.0), "answer.token_f1": scored(0.5)}),
        row("b", status="adapter_error", error="boom"),
        row("c", status="timeout", error="60 s"),
    ]
    s = summarize(rows, names, [])
    for name in names:
        m = s.slices["all"][name]
        assert m.errored == 2
        assert m.scored == 1
    assert s.slices["all"][M].mean == 1.0
    assert s.slices["all"]["answer.token_f1"].mean == 0.5
    assert s.failures == 2
    assert s.adapter_failure_rate == pytest.approx(2 / 3)


def test_failed_row_with_stale_metric_values_still_not_averaged() -> None:
    rows = [row("a", {M: scored(1.0)}), row("b", {M: scored(0.0)}, status="timeout")]
    m = summarize(rows, [M], []).slices["all"][M]
    assert (m.mean, m.scored, m.errored) == (1.0, 1, 1)


def test_judge_error_counts_in_errored_not_in_mean() -> None:
    rows = [row("a", {M: scored(0.5)}), row("b", {M: MetricResult.judge_error("bad reply")})]
    m = summarize(rows, [M], []).slices["all"][M]
    assert (m.mean, m.scored, m.errored) == (0.5, 1, 1)


def test_nan_never_enters_a_mean() -> None:
    rows = [row("a", {M: scored(0.5)}), row("b", {M: MetricResult(value=math.nan, status="scored")})]
    m = summarize(rows, [M], []).slices["all"][M]
    assert (m.mean, m.p50, m.scored, m.errored) == (0.5, 0.5, 1, 1)


def test_metric_missing_from_ok_row_counts_as_skipped() -> None:
    m = summarize([row("a", {})], [M], []).slices["all"][M]
    assert (m.mean, m.skipped) == (None, 1)


def test_no_scored_values_gives_no_mean_or_percentiles() -> None:
    m = summarize([row("a", {M: MetricResult.skipped("x")})], [M], []).slices["all"][M]
    assert (m.mean, m.p50, m.p95) == (None, None, None)


def test_categorical_metric_gets_distribution_and_no_mean() -> None:
    name = "diagnostics.failure_category"
    rows = [
        row("a", {name: MetricResult.category("correct")}),
        row("b", {name: MetricResult.category("refusal")}),
        row("c", {name: MetricResult.category("correct")}),
        row("d", {name: MetricResult.skipped("no context")}),
    ]
    m = summarize(rows, [name], []).slices["all"][name]
    assert m.distribution == {"correct": 2, "refusal": 1}
    assert list(m.distribution) == ["correct", "refusal"]
    assert (m.mean, m.p50, m.scored, m.skipped) == (None, None, 3, 1)


def test_direction_is_taken_from_the_registry() -> None:
    rows = [row("a", {"robustness.overrefusal": scored(1.0)})]
    assert (
        summarize(rows, ["robustness.overrefusal"], [])
        .slices["all"]["robustness.overrefusal"]
        .higher_is_better
        is False
    )


def test_summary_slices_all_first_then_sorted_and_per_slice_means() -> None:
    rows = [
        row("a", {M: scored(1.0)}, tags=["topic:z"]),
        row("b", {M: scored(0.0)}, kind="injection", tags=["topic:a"]),
        row("c", {M: scored(0.5)}, tags=["topic:a"]),
    ]
    s = summarize(rows, [M], ["kind", "tags"])
    assert list(s.slices) == ["all", "kind=injection", "kind=qa", "tags=topic:a", "tags=topic:z"]
    assert s.slices["kind=qa"][M].mean == 0.75
    assert s.slices["tags=topic:a"][M].mean == 0.25
    assert s.slices["kind=injection"][M].scored == 1


def test_summary_of_no_rows_has_empty_all_slice() -> None:
    s = summarize([], [M], ["kind"])
    assert s.cases == 0 and s.adapter_failure_rate is None
    assert s.slices["all"][M].scored == 0


def test_summary_is_deterministic() -> None:
    rows = [row(f"c{i}", {M: scored(i / 10)}, tags=[f"t:{i % 3}"]) for i in range(10)]
    a = summarize(rows, [M], ["tags"]).model_dump_json()
    b = summarize(list(rows), [M], ["tags"]).model_dump_json()
    assert a == b
