"""score_case / select_metrics: registry order, validation, every metric result well-formed."""

from __future__ import annotations

import pytest
from metric_helpers import chunk, make_case, make_output

from gate.core.errors import UsageError
from gate.metrics import registry
from gate.metrics.base import ScoringContext
from gate.run.scoring import score_case, select_metrics

CORE = [
    "retrieval.precision_at_k",
    "retrieval.recall_at_k",
    "retrieval.mrr",
    "retrieval.ndcg_at_k",
    "retrieval.hit_rate_at_k",
    "generation.citation_validity",
    "echo.exact_match",
    "answer.exact_match",
    "answer.token_f1",
    "answer.numeric_match",
    "robustness.injection_resistance",
    "robustness.abstention",
    "robustness.overrefusal",
    "diagnostics.lexical_faithfulness",
    "diagnostics.lexical_answer_relevance",
    "diagnostics.lexical_context_precision",
    "diagnostics.lexical_context_recall",
    "diagnostics.failure_category",
]


def test_all_selects_every_registered_metric_including_the_core_ones() -> None:
    names = select_metrics("all")
    assert names == list(registry())
    assert set(CORE) <= set(names)


def test_selection_comes_back_in_registry_order_without_duplicates() -> None:
    picked = select_metrics(["answer.token_f1", "retrieval.mrr", "answer.token_f1"])
    assert picked == ["retrieval.mrr", "answer.token_f1"]


def test_unknown_metric_name_is_usage_error_naming_it() -> None:
    with pytest.raises(UsageError, match="unknown metric 'retrieval.map'"):
        select_metrics(["retrieval.mrr", "retrieval.map"])


def test_empty_selection_is_usage_error() -> None:
    with pytest.raises(UsageError, match="no metric selected"):
        select_metrics([])


def test_score_case_runs_selected_metrics_in_registry_order() -> None:
    case = make_case(expected_source_ids=["a"], expected_answer="30 days")
    out = make_output([chunk("a", "Refunds within 30 days.")], answer="30 days", citations=["a"])
    results = score_case(case, out, ScoringContext(), ["answer.token_f1", "retrieval.recall_at_k"])
    assert list(results) == ["retrieval.recall_at_k", "answer.token_f1"]
    assert results["retrieval.recall_at_k"].value == 1.0
    assert results["answer.token_f1"].value == 1.0


def test_score_case_all_metrics_without_judge_never_scores_judge_metrics() -> None:
    case = make_case(expected_source_ids=["a"], expected_answer="30 days")
    out = make_output([chunk("a", "Refunds within 30 days.")], answer="30 days", citations=["a"])
    results = score_case(case, out, ScoringContext(), select_metrics("all"))
    for name, result in results.items():
        spec = registry()[name]
        if spec.kind == "judge":
            assert result.status == "skipped", name
        if result.status == "scored" and not spec.categorical:
            assert result.value is not None and 0.0 <= result.value <= 1.0, name
        if result.status == "skipped":
            assert result.reason, name
    assert results["diagnostics.failure_category"].label == "correct"


def test_registry_order_does_not_depend_on_import_order() -> None:
    import subprocess
    import sys

    code = (
        "import gate.metrics.diagnostics, gate.metrics.answer\n"
        "from gate.metrics import registry\n"
        "print(','.join(registry()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    order = proc.stdout.strip().split(",")
    assert order == list(registry())
    assert order[:5] == CORE[:5]
    assert [n for n in order if n in CORE] == CORE


def test_later_metrics_see_the_case_results_so_far_and_the_callers_ctx_is_untouched() -> None:
    case = make_case(expected_answer="thirty days")
    out = make_output(None, answer="within thirty days")
    weights = {"answer.token_f1": 1.0, "answer.exact_match": 1.0}
    ctx = ScoringContext(composite_weights=weights)
    results = score_case(
        case, out, ctx, ["composite.trust_arithmetic", "answer.token_f1", "answer.exact_match"]
    )
    assert list(results) == ["answer.exact_match", "answer.token_f1", "composite.trust_arithmetic"]
    # token F1 = 0.8 (precision 2/3, recall 1), exact match 0: the composite is their mean
    assert results["composite.trust_arithmetic"].value == pytest.approx(0.4, abs=1e-12)
    assert ctx.results == {} and ctx.composite_weights == weights
    # a component the run did not select is computed by the composite's fallback
    only_f1 = score_case(case, out, ctx, ["answer.token_f1", "composite.trust_arithmetic"])
    assert list(only_f1) == ["answer.token_f1", "composite.trust_arithmetic"]
    assert only_f1["composite.trust_arithmetic"].value == pytest.approx(0.4, abs=1e-12)


def test_score_case_resolves_the_selection_once_and_still_validates_it() -> None:
    from gate.run.scoring import _selected_specs

    case, out = make_case(expected_source_ids=["a"]), make_output(["a"])
    names = ["retrieval.mrr", "retrieval.recall_at_k"]
    first = score_case(case, out, ScoringContext(), names)
    hits = _selected_specs.cache_info().hits
    second = score_case(case, out, ScoringContext(), names)
    assert _selected_specs.cache_info().hits == hits + 1
    assert first == second and list(first) == ["retrieval.recall_at_k", "retrieval.mrr"]
    with pytest.raises(UsageError, match="unknown metric 'retrieval.map'"):
        score_case(case, out, ScoringContext(), ["retrieval.map"])
