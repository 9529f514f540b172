"""Retrieval metrics: every rule of metrics.md "Source matching" and "Retrieval metrics"."""

from __future__ import annotations

import math
import random
from collections.abc import Hashable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from metric_helpers import chunk, defined, make_case, make_output, score

from gate.metrics.base import REASON_NO_EXPECTED_IDS, REASON_NO_RETRIEVE, ScoringContext
from gate.metrics.retrieval import (
    REASON_NO_POSITIVE_GRADE,
    dedup,
    hit_rate_at_k,
    matched_ranking,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    retrieval_scores,
)
from gate.model.config import Gain, ScoringSettings, SourceMatch
from gate.model.dataset import Case
from gate.model.records import CaseOutput

RETRIEVAL = (
    "retrieval.precision_at_k",
    "retrieval.recall_at_k",
    "retrieval.mrr",
    "retrieval.ndcg_at_k",
    "retrieval.hit_rate_at_k",
)


def recall(case: Case, output: CaseOutput, source_match: SourceMatch) -> float | None:
    """retrieval.recall_at_k of one case under ``source_match`` (the other settings default)."""
    settings = ScoringSettings(source_match=source_match)
    return score("retrieval.recall_at_k", case, output, ScoringContext(settings=settings)).value


def scores_of(case: Case, output: CaseOutput, ctx: ScoringContext | None = None) -> dict[str, float | None]:
    return {name.split(".")[1]: score(name, case, output, ctx).value for name in RETRIEVAL}


# ---------------------------------------------------------------- the worked example of 001


def test_worked_example_of_001_binary_metrics() -> None:
    ranked = ["d7", "d2", "d9", "d4", "d1"]
    gold = {"d2", "d4", "d5"}
    assert round(recall_at_k(ranked, gold, 5), 3) == 0.667
    assert precision_at_k(ranked, gold, 5) == pytest.approx(0.400, abs=1e-12)
    assert reciprocal_rank(ranked, gold) == 0.5


def test_worked_example_of_001_graded_ndcg_exp2_is_0_516() -> None:
    ranked = ["d7", "d2", "d9", "d4", "d1"]
    grades: dict[Hashable, float] = {"d2": 3, "d4": 1, "d5": 2}
    value = ndcg_at_k(ranked, set(grades), 5, grades=grades, gain="exp2")
    assert round(value, 3) == 0.516
    expected = (7 / math.log2(3) + 1 / math.log2(5)) / (7 + 3 / math.log2(3) + 1 / 2)
    assert value == pytest.approx(expected, abs=1e-12)


def test_worked_example_of_001_what_ifs_d2_first_0_791_d5_third_0_676() -> None:
    grades: dict[Hashable, float] = {"d2": 3, "d4": 1, "d5": 2}
    assert (
        round(ndcg_at_k(["d2", "d7", "d9", "d4", "d1"], set(grades), 5, grades=grades, gain="exp2"), 3)
        == 0.791
    )
    assert (
        round(ndcg_at_k(["d7", "d2", "d5", "d4", "d1"], set(grades), 5, grades=grades, gain="exp2"), 3)
        == 0.676
    )


def test_worked_example_through_registered_metrics_with_exp2_config() -> None:
    case = make_case(expected_source_ids=["d2", "d4", "d5"], relevance={"d2": 3, "d4": 1, "d5": 2})
    out = make_output(["d7", "d2", "d9", "d4", "d1"])
    got = scores_of(case, out, ScoringContext(settings=ScoringSettings(k=5, ndcg_gain="exp2")))
    assert round(defined(got["recall_at_k"]), 3) == 0.667
    assert got["precision_at_k"] == pytest.approx(0.4)
    assert got["mrr"] == 0.5
    assert round(defined(got["ndcg_at_k"]), 3) == 0.516
    assert got["hit_rate_at_k"] == 1.0


def test_graded_ndcg_linear_gain_uses_grade_itself() -> None:
    grades: dict[Hashable, float] = {"d2": 3, "d4": 1, "d5": 2}
    value = ndcg_at_k(["d7", "d2", "d9", "d4", "d1"], set(grades), 5, grades=grades, gain="linear")
    expected = (3 / math.log2(3) + 1 / math.log2(5)) / (3 + 2 / math.log2(3) + 1 / 2)
    assert value == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- precision@k


def test_precision_denominator_is_always_k() -> None:
    case = make_case(expected_source_ids=["a", "b"])
    assert score(
        "retrieval.precision_at_k", case, make_output(["a", "x", "b", "y", "z"])
    ).value == pytest.approx(0.4)


def test_precision_fewer_than_k_results_one_relevant_of_one_returned_scores_1_over_k() -> None:
    case = make_case(expected_source_ids=["a"])
    assert (
        score(
            "retrieval.precision_at_k",
            case,
            make_output(["a"]),
            ScoringContext(settings=ScoringSettings(k=5)),
        ).value
        == 0.2
    )


def test_precision_empty_retrieval_scores_0() -> None:
    case = make_case(expected_source_ids=["a"])
    result = score("retrieval.precision_at_k", case, make_output([]))
    assert (result.status, result.value) == ("scored", 0.0)


# ---------------------------------------------------------------- recall@k


def test_recall_is_hits_over_expected_count() -> None:
    case = make_case(expected_source_ids=["a", "b", "c", "d"])
    assert score("retrieval.recall_at_k", case, make_output(["a", "x", "c"])).value == 0.5


def test_recall_relevant_item_ranked_below_k_does_not_count() -> None:
    case = make_case(expected_source_ids=["a", "b"])
    out = make_output(["x1", "x2", "a", "x3", "b"])
    assert (
        score("retrieval.recall_at_k", case, out, ScoringContext(settings=ScoringSettings(k=3))).value == 0.5
    )


def test_recall_empty_retrieval_scores_0() -> None:
    case = make_case(expected_source_ids=["a"])
    assert score("retrieval.recall_at_k", case, make_output([])).value == 0.0


def test_recall_duplicate_expected_ids_count_once() -> None:
    case = make_case(expected_source_ids=["a", "a", "b"])
    assert score("retrieval.recall_at_k", case, make_output(["a"])).value == 0.5


# ---------------------------------------------------------------- MRR


def test_mrr_looks_at_full_list_not_just_top_k() -> None:
    case = make_case(expected_source_ids=["a"])
    out = make_output([f"x{i}" for i in range(7)] + ["a"])
    result = score("retrieval.mrr", case, out, ScoringContext(settings=ScoringSettings(k=5)))
    assert result.value == 0.125


def test_mrr_no_relevant_id_scores_0() -> None:
    case = make_case(expected_source_ids=["a"])
    assert score("retrieval.mrr", case, make_output(["x", "y"])).value == 0.0


def test_mrr_duplicated_irrelevant_chunk_before_first_hit_does_not_push_it_down() -> None:
    case = make_case(expected_source_ids=["a"])
    out = make_output(["x", "x", "x", "a"])
    assert score("retrieval.mrr", case, out).value == 0.5


# ---------------------------------------------------------------- nDCG@k


def test_ndcg_binary_formula() -> None:
    case = make_case(expected_source_ids=["a", "b", "c"])
    value = score(
        "retrieval.ndcg_at_k",
        case,
        make_output(["x", "a", "y", "b"]),
        ScoringContext(settings=ScoringSettings(k=5)),
    ).value
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
    assert value == pytest.approx(expected, abs=1e-12)


def test_ndcg_idcg_uses_min_of_k_and_relevant_count() -> None:
    case = make_case(expected_source_ids=[f"r{i}" for i in range(10)])
    out = make_output(["r0", "r1", "r2"])
    assert score(
        "retrieval.ndcg_at_k", case, out, ScoringContext(settings=ScoringSettings(k=3))
    ).value == pytest.approx(1.0, abs=1e-12)


def test_ndcg_fewer_than_k_results_ideal_still_counts_all_relevant() -> None:
    case = make_case(expected_source_ids=["a", "b"])
    value = score(
        "retrieval.ndcg_at_k", case, make_output(["a"]), ScoringContext(settings=ScoringSettings(k=5))
    ).value
    assert value == pytest.approx(1 / (1 + 1 / math.log2(3)), abs=1e-12)


def test_recall_fewer_than_k_results() -> None:
    case = make_case(expected_source_ids=["a", "b"])
    assert (
        score(
            "retrieval.recall_at_k", case, make_output(["a"]), ScoringContext(settings=ScoringSettings(k=5))
        ).value
        == 0.5
    )


def test_deep_ranks_beyond_the_discount_table() -> None:
    ranked = [f"d{i}" for i in range(1500)]
    assert ndcg_at_k(ranked, {"d1400"}, 1500) == pytest.approx(1 / math.log2(1402), abs=1e-15)
    assert reciprocal_rank(ranked, {"d1400"}) == 1 / 1401


def test_ndcg_empty_retrieval_scores_0() -> None:
    case = make_case(expected_source_ids=["a"])
    result = score("retrieval.ndcg_at_k", case, make_output([]))
    assert (result.status, result.value) == ("scored", 0.0)


def test_ndcg_binary_case_is_the_same_for_both_gains() -> None:
    case = make_case(expected_source_ids=["a", "b"])
    out = make_output(["x", "b", "a"])
    linear = score(
        "retrieval.ndcg_at_k", case, out, ScoringContext(settings=ScoringSettings(ndcg_gain="linear"))
    ).value
    exp2 = score(
        "retrieval.ndcg_at_k", case, out, ScoringContext(settings=ScoringSettings(ndcg_gain="exp2"))
    ).value
    assert linear == exp2 == pytest.approx((1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3)), abs=1e-12)


def test_ndcg_graded_expected_id_not_in_relevance_has_grade_1() -> None:
    case = make_case(expected_source_ids=["a", "b"], relevance={"a": 3})
    value = score(
        "retrieval.ndcg_at_k",
        case,
        make_output(["b"]),
        ScoringContext(settings=ScoringSettings(k=5, ndcg_gain="linear")),
    ).value
    assert value == pytest.approx(1 / (3 + 1 / math.log2(3)), abs=1e-12)


def test_ndcg_graded_all_grades_zero_skips_with_reason() -> None:
    case = make_case(expected_source_ids=["a"], relevance={"a": 0})
    result = score("retrieval.ndcg_at_k", case, make_output(["a"]))
    assert (result.status, result.reason) == ("skipped", REASON_NO_POSITIVE_GRADE)
    # the other metrics still use expected_source_ids
    assert score("retrieval.recall_at_k", case, make_output(["a"])).value == 1.0


# ---------------------------------------------------------------- hit rate


def test_hit_rate_is_1_when_any_expected_id_in_top_k() -> None:
    case = make_case(expected_source_ids=["a", "b"])
    assert (
        score(
            "retrieval.hit_rate_at_k",
            case,
            make_output(["x", "b"]),
            ScoringContext(settings=ScoringSettings(k=2)),
        ).value
        == 1.0
    )
    assert (
        score(
            "retrieval.hit_rate_at_k",
            case,
            make_output(["x", "y", "b"]),
            ScoringContext(settings=ScoringSettings(k=2)),
        ).value
        == 0.0
    )


# ---------------------------------------------------------------- rules shared by every retrieval metric


@pytest.mark.parametrize("name", RETRIEVAL)
def test_empty_retrieval_scores_0_for_every_retrieval_metric(name: str) -> None:
    case = make_case(expected_source_ids=["a", "b"])
    result = score(name, case, make_output([]))
    assert (result.status, result.value, result.reason) == ("scored", 0.0, None)


def test_duplicated_irrelevant_chunk_before_the_first_hit_every_metric_exact() -> None:
    # raw ["x", "x", "x", "a", "y"] deduplicates to ["x", "a", "y"]: the hit is at rank 2
    case = make_case(expected_source_ids=["a", "b"])
    out = make_output(["x", "x", "x", "a", "y"])
    got = scores_of(case, out, ScoringContext(settings=ScoringSettings(k=2)))
    assert got == {
        "precision_at_k": 0.5,
        "recall_at_k": 0.5,
        "mrr": 0.5,
        "ndcg_at_k": pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)), abs=1e-12),
        "hit_rate_at_k": 1.0,
    }


def test_document_fallback_to_id_every_metric_exact() -> None:
    # c9 has no document_id and matches by its own id; c1 and c2 both map to doc1 (kept once)
    case = make_case(expected_source_ids=["doc1", "c9"])
    out = make_output(
        [chunk("c0"), chunk("c1", document_id="doc1"), chunk("c2", document_id="doc1"), chunk("c9")]
    )
    got = scores_of(case, out, ScoringContext(settings=ScoringSettings(k=3, source_match="document")))
    assert got == {
        "precision_at_k": pytest.approx(2 / 3, abs=1e-15),
        "recall_at_k": 1.0,
        "mrr": 0.5,
        "ndcg_at_k": pytest.approx((1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3)), abs=1e-12),
        "hit_rate_at_k": 1.0,
    }


# ---------------------------------------------------------------- skips and applicability


def test_adapter_without_retrieve_skips_every_retrieval_metric() -> None:
    case = make_case(expected_source_ids=["a"])
    for name in RETRIEVAL:
        result = score(name, case, make_output(None, answer="x"))
        assert (result.status, result.reason, result.value) == ("skipped", REASON_NO_RETRIEVE, None)


def test_case_without_expected_source_ids_skips_every_retrieval_metric() -> None:
    case = make_case()
    for name in RETRIEVAL:
        result = score(name, case, make_output(["a"]))
        assert (result.status, result.reason) == ("skipped", REASON_NO_EXPECTED_IDS)


def test_unanswerable_cases_never_enter_retrieval_means() -> None:
    case = make_case(kind="unanswerable", expected_source_ids=["a"])
    for name in RETRIEVAL:
        result = score(name, case, make_output(["a"]))
        assert (result.status, result.reason) == ("skipped", "applies to injection and qa cases only")


def test_injection_cases_with_expected_ids_are_scored() -> None:
    case = make_case(kind="injection", expected_source_ids=["a"], adversarial_payload="instruction_override")
    assert score("retrieval.recall_at_k", case, make_output(["a"])).value == 1.0


# ---------------------------------------------------------------- source matching


def test_chunk_matching_uses_chunk_id_and_ignores_document_id() -> None:
    case = make_case(expected_source_ids=["doc1"])
    out = make_output([chunk("c1", document_id="doc1")])
    assert recall(case, out, "chunk") == 0.0


def test_document_matching_maps_chunks_to_document_id() -> None:
    case = make_case(expected_source_ids=["doc1", "doc2"])
    out = make_output([chunk("c1", document_id="doc1"), chunk("c2", document_id="doc2")])
    assert recall(case, out, "document") == 1.0


def test_document_matching_falls_back_to_chunk_id_without_document_id() -> None:
    case = make_case(expected_source_ids=["doc1", "c9"])
    out = make_output([chunk("c1", document_id="doc1"), chunk("c9")])
    assert recall(case, out, "document") == 1.0


def test_document_matching_empty_document_id_falls_back_to_chunk_id() -> None:
    case = make_case(expected_source_ids=["c1"])
    out = make_output([chunk("c1", document_id="")])
    assert recall(case, out, "document") == 1.0


def test_document_matching_dedups_chunks_of_one_document_keeping_first_rank() -> None:
    case = make_case(expected_source_ids=["doc1", "doc2"])
    out = make_output(
        [chunk("c1", document_id="doc1"), chunk("c2", document_id="doc1"), chunk("c3", document_id="doc2")]
    )
    ctx = ScoringContext(settings=ScoringSettings(k=2, source_match="document"))
    # deduplicated ranking: doc1, doc2 -> both in the top 2
    assert score("retrieval.recall_at_k", case, out, ctx).value == 1.0
    assert score("retrieval.precision_at_k", case, out, ctx).value == 1.0


def test_dedup_keeps_first_rank_duplicated_irrelevant_does_not_take_top_k_slots() -> None:
    case = make_case(expected_source_ids=["a"])
    out = make_output(["x", "x", "x", "a"])
    assert (
        score("retrieval.recall_at_k", case, out, ScoringContext(settings=ScoringSettings(k=2))).value == 1.0
    )
    assert (
        score("retrieval.precision_at_k", case, out, ScoringContext(settings=ScoringSettings(k=2))).value
        == 0.5
    )


def test_dedup_relevant_duplicate_counts_once_for_precision() -> None:
    case = make_case(expected_source_ids=["a"])
    assert score(
        "retrieval.precision_at_k",
        case,
        make_output(["a", "a", "a"]),
        ScoringContext(settings=ScoringSettings(k=3)),
    ).value == (pytest.approx(1 / 3))


def test_substring_matching_is_case_insensitive() -> None:
    case = make_case(expected_source_ids=["Refund Window"])
    out = make_output([chunk("c1", "the REFUND window is 30 days")])
    assert recall(case, out, "substring") == 1.0


def test_substring_two_chunks_with_same_string_dedup_to_first() -> None:
    case = make_case(expected_source_ids=["30 days"])
    out = make_output([chunk("c1", "x"), chunk("c2", "within 30 days"), chunk("c3", "30 days, again")])
    ctx = ScoringContext(settings=ScoringSettings(k=3, source_match="substring"))
    assert score("retrieval.precision_at_k", case, out, ctx).value == pytest.approx(1 / 3)
    assert score("retrieval.mrr", case, out, ctx).value == 0.5


def test_substring_chunk_with_two_strings_claims_only_the_first_unclaimed() -> None:
    case = make_case(expected_source_ids=["alpha", "beta"])
    one_chunk = make_output([chunk("c1", "alpha and beta")])
    ctx = ScoringContext(settings=ScoringSettings(k=5, source_match="substring"))
    assert score("retrieval.recall_at_k", case, one_chunk, ctx).value == 0.5
    two_chunks = make_output([chunk("c1", "alpha"), chunk("c2", "alpha and beta")])
    assert score("retrieval.recall_at_k", case, two_chunks, ctx).value == 1.0
    assert score("retrieval.precision_at_k", case, two_chunks, ctx).value == pytest.approx(0.4)


def test_substring_unmatched_chunks_are_distinct_even_if_id_equals_expected_string() -> None:
    case = make_case(expected_source_ids=["alpha"])
    matched = matched_ranking(case, [chunk("alpha", "nothing here"), chunk("c2", "nothing")], "substring")
    assert len(dedup(matched.ranked)) == 2
    assert not set(matched.ranked) & matched.relevant


def test_substring_graded_relevance_keys_are_case_insensitive() -> None:
    case = make_case(expected_source_ids=["Alpha", "beta"], relevance={"ALPHA": 3})
    out = make_output([chunk("c1", "beta"), chunk("c2", "alpha")])
    value = score(
        "retrieval.ndcg_at_k", case, out, ScoringContext(settings=ScoringSettings(source_match="substring"))
    ).value
    assert value == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)), abs=1e-12)


# ---------------------------------------------------------------- pure function contracts


def test_pure_functions_reject_k_below_1_and_empty_relevant() -> None:
    with pytest.raises(ValueError):
        precision_at_k(["a"], {"a"}, 0)
    with pytest.raises(ValueError):
        recall_at_k(["a"], set(), 5)
    with pytest.raises(ValueError):
        retrieval_scores(["a"], set(), 5)


def test_single_metric_functions_equal_retrieval_scores_on_random_data() -> None:
    rng = random.Random(7)
    for _ in range(200):
        ranked = [f"d{rng.randrange(30)}" for _ in range(rng.randrange(0, 25))]
        relevant = {f"d{rng.randrange(30)}" for _ in range(rng.randrange(1, 8))}
        grades: dict[Hashable, float] | None = (
            {d: rng.choice([0, 1, 2, 3]) for d in relevant} if rng.random() < 0.5 else None
        )
        k = rng.randrange(1, 12)
        both = retrieval_scores(ranked, relevant, k, grades=grades, gain="exp2")
        assert both.precision_at_k == precision_at_k(ranked, relevant, k)
        assert both.recall_at_k == recall_at_k(ranked, relevant, k)
        assert both.reciprocal_rank == reciprocal_rank(ranked, relevant)
        assert both.hit_rate_at_k == hit_rate_at_k(ranked, relevant, k)
        if both.ndcg_at_k is not None:
            assert both.ndcg_at_k == ndcg_at_k(ranked, relevant, k, grades=grades, gain="exp2")


# ---------------------------------------------------------------- properties

ids = st.sampled_from([f"d{i}" for i in range(12)])
rankings = st.lists(ids, max_size=30)
relevant_sets = st.lists(ids, min_size=1, max_size=8)
ks = st.integers(min_value=1, max_value=15)
grade_maps = st.one_of(st.none(), st.dictionaries(ids, st.integers(min_value=0, max_value=4), max_size=8))


@given(rankings, relevant_sets, ks, grade_maps, st.sampled_from(["linear", "exp2"]))
def test_property_values_in_unit_interval(
    ranked: list[str], relevant: list[str], k: int, grades: dict[Hashable, float] | None, gain: Gain
) -> None:
    s = retrieval_scores(ranked, relevant, k, grades=grades, gain=gain)
    values = [s.precision_at_k, s.recall_at_k, s.reciprocal_rank, s.hit_rate_at_k]
    values += [s.ndcg_at_k] if s.ndcg_at_k is not None else []
    for v in values:
        assert 0.0 <= v <= 1.0 + 1e-12


@given(rankings, relevant_sets, ks, grade_maps)
def test_property_dedup_idempotent(
    ranked: list[str], relevant: list[str], k: int, grades: dict[Hashable, float] | None
) -> None:
    once = dedup(ranked)
    assert dedup(once) == once
    assert retrieval_scores(once, relevant, k, grades=grades) == retrieval_scores(
        ranked, relevant, k, grades=grades
    )


@given(rankings, relevant_sets, ks, st.randoms(use_true_random=False))
def test_property_permuting_expected_set_changes_nothing(
    ranked: list[str], relevant: list[str], k: int, rnd: random.Random
) -> None:
    shuffled = list(relevant)
    rnd.shuffle(shuffled)
    assert retrieval_scores(ranked, shuffled, k) == retrieval_scores(ranked, relevant, k)
    case_a = make_case(expected_source_ids=relevant)
    case_b = make_case(expected_source_ids=shuffled)
    out = make_output(ranked)
    ctx = ScoringContext(settings=ScoringSettings(k=k))
    assert scores_of(case_a, out, ctx) == scores_of(case_b, out, ctx)


@given(rankings, relevant_sets, ks)
def test_property_precision_times_k_equals_recall_times_relevant(
    ranked: list[str], relevant: list[str], k: int
) -> None:
    s = retrieval_scores(ranked, relevant, k)
    assert s.precision_at_k * k == pytest.approx(s.recall_at_k * len(set(relevant)), abs=1e-9)


@given(
    st.lists(st.sampled_from(["alpha", "beta", "gamma", "noise", "alpha beta"]), max_size=12),
    st.lists(st.sampled_from(["alpha", "beta", "gamma"]), min_size=1, max_size=3),
    ks,
)
def test_property_substring_precision_times_k_equals_recall_times_relevant(
    texts: list[str], expected: list[str], k: int
) -> None:
    case = make_case(expected_source_ids=expected)
    matched = matched_ranking(case, [chunk(f"c{i}", t) for i, t in enumerate(texts)], "substring")
    s = retrieval_scores(matched.ranked, matched.relevant, k)
    assert s.precision_at_k * k == pytest.approx(s.recall_at_k * len(matched.relevant), abs=1e-9)
