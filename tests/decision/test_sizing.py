"""gate.decision.sizing: what ragproof validate says a dataset can detect before any run,
per gating metric."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gate.decision.sizing import detectable_drop, metric_sizings, sizing_lines
from gate.metrics import registry
from gate.model.config import Config
from gate.model.dataset import Case

# Hand-computed figures: (z_0.975 + z_0.80) = 2.801585; drop = 2.801585 * sqrt(c / n).
#   n = 52: 0.0869 / 0.1229   n = 60: 0.0809 / 0.1144   n = 12: 0.1808 / 0.2557   n = 20: 0.1401 / 0.1981
# Pairs needed (Tango score, 80% power): margin 0.02 -> 1,067 / 2,005 (189 with no churn);
# margin 0.05 -> 215 / 350 (73).


def _config(sections: dict[str, Any] | None = None, **gate: Any) -> Config:
    return Config.model_validate(
        {
            "version": 1,
            "dataset": "cases.jsonl",
            "adapter": {"type": "replay", "path": "r.jsonl"},
            "gate": gate,
            **(sections or {}),
        }
    )


def _cases() -> list[Case]:
    """60 qa cases (topic:a the first 20, topic:b the rest), all with an expected answer, the
    first 8 without expected ids; 12 unanswerable cases tagged topic:c."""
    cases = [
        Case(
            id=f"q{i}",
            question="q",
            tags=["topic:a" if i < 20 else "topic:b"],
            expected_answer="yes",
            expected_source_ids=[] if i < 8 else ["d"],
        )
        for i in range(60)
    ]
    return cases + [Case(id=f"u{i}", question="q", kind="unanswerable", tags=["topic:c"]) for i in range(12)]


METRICS = [
    "retrieval.mrr",
    "retrieval.hit_rate_at_k",
    "echo.exact_match",  # a diagnostic: does not gate
    "answer.exact_match",
    "robustness.abstention",
    "generation.groundedness",  # a judge metric, and no judge: skipped by design
]


def test_detectable_drop_formula() -> None:
    # (1.959964 + 0.841621) * sqrt(0.05 / 200)
    assert detectable_drop(200, 0.05) == pytest.approx(2.801585 * math.sqrt(0.05 / 200), rel=1e-6)


def test_each_gating_metric_is_counted_on_the_cases_it_can_be_scored_on() -> None:
    sizings = metric_sizings(_cases(), _config(metrics={"answer.exact_match": {"margin": 0.05}}), METRICS)
    assert [(s.name, s.binary, s.margin, s.n_all, s.slice_key, s.n_slice) for s in sizings] == [
        # 8 cases lack expected ids; unanswerable cases never enter retrieval: 52, of which 12 in topic:a
        ("retrieval.mrr", False, 0.02, 52, "tags=topic:a", 12),
        ("retrieval.hit_rate_at_k", True, 0.02, 52, "tags=topic:a", 12),
        # every qa case has an expected answer (the unanswerable ones have none): 60, 20 in topic:a
        ("answer.exact_match", True, 0.05, 60, "tags=topic:a", 20),
        # unanswerable cases only; topic:c and kind=unanswerable tie at 12, the first key wins
        ("robustness.abstention", True, 0.02, 12, "kind=unanswerable", 12),
    ]


def test_sizing_prints_a_line_per_group_of_gating_metrics() -> None:
    lines = sizing_lines(_cases(), _config(metrics={"answer.exact_match": {"margin": 0.05}}), METRICS)
    assert lines == [
        "sizing, if 5% / 10% of the cases change between runs with no net effect: margin 0.02 needs "
        "1,067 / 2,005 cases (189 if none change); the drop each gating metric detects 80% of the time "
        "(exact for 0/1 metrics; for the others, with values in [0, 1], 'at most': they need at most as "
        "many cases)",
        # MRR is not 0/1: the same figures as hit rate, given as bounds
        "  retrieval.mrr: all (52 cases) at most 0.09 / 0.12; smallest gating slice tags=topic:a (12 cases) "
        "at most 0.18 / 0.26",
        "  retrieval.hit_rate_at_k: all (52 cases) 0.09 / 0.12; smallest gating slice tags=topic:a (12 cases) "
        "0.18 / 0.26",
        "  answer.exact_match: all (60 cases) 0.08 / 0.11; smallest gating slice tags=topic:a (20 cases) "
        "0.14 / 0.20; margin 0.05 needs 215 / 350 cases (73 if none change)",
        "  robustness.abstention: all (12 cases) 0.18 / 0.26; its smallest gating slice, kind=unanswerable, "
        "has the same cases",
    ]


def test_metrics_with_the_same_figures_share_a_line_in_registry_order() -> None:
    names = ["answer.exact_match", "retrieval.ndcg_at_k", "retrieval.hit_rate_at_k", "retrieval.mrr"]
    assert sizing_lines(_cases(), _config(), names)[1:] == [
        "  retrieval.mrr, retrieval.ndcg_at_k: all (52 cases) at most 0.09 / 0.12; smallest gating slice "
        "tags=topic:a (12 cases) at most 0.18 / 0.26",
        "  retrieval.hit_rate_at_k: all (52 cases) 0.09 / 0.12; smallest gating slice tags=topic:a (12 cases) "
        "0.18 / 0.26",
        "  answer.exact_match: all (60 cases) 0.08 / 0.11; smallest gating slice tags=topic:a (20 cases) "
        "0.14 / 0.20",
    ]


def test_the_smallest_gating_slice_is_chosen_per_metric_and_among_gating_dimensions() -> None:
    # min_pairs 15: topic:a has 12 cases with expected ids (too few for retrieval) but 20 with an answer
    picked = {
        s.name: (s.slice_key, s.n_slice) for s in metric_sizings(_cases(), _config(min_pairs=15), METRICS)
    }
    assert picked["retrieval.mrr"] == ("tags=topic:b", 40)
    assert picked["answer.exact_match"] == ("tags=topic:a", 20)
    # abstention's 12 cases are below min_pairs everywhere
    lines = sizing_lines(_cases(), _config(min_pairs=15), ["robustness.abstention"])
    assert lines[1:] == [
        "  robustness.abstention: all (12 cases): fewer than min_pairs 15: its gates are skipped"
    ]
    # only kind gates: the tag slices are not candidates
    only_kind = {
        s.name: (s.slice_key, s.n_slice)
        for s in metric_sizings(_cases(), _config(gate_slices=["kind"]), METRICS)
    }
    assert only_kind["retrieval.mrr"] == ("kind=qa", 52)
    # no gating slice at all
    none = sizing_lines(_cases(), _config(gate_slices=["tags:owner"]), ["answer.exact_match"])
    assert none[1:] == [
        "  answer.exact_match: all (60 cases) 0.08 / 0.11; no gating slice has 10+ of these cases"
    ]


def test_gate_include_and_gate_false_decide_which_metrics_gate() -> None:
    only = metric_sizings(_cases(), _config(include=["retrieval.mrr"]), METRICS)
    assert [s.name for s in only] == ["retrieval.mrr"]
    off = metric_sizings(_cases(), _config(metrics={"retrieval.mrr": {"gate": False}}), METRICS)
    assert "retrieval.mrr" not in [s.name for s in off]
    assert sizing_lines(_cases(), _config(include=["answer.token_f1"]), METRICS)[1:] == [
        "  no metric gates (see gate.include, gate.metrics and run.metrics)"
    ]


def test_a_metrics_own_case_rule_counts_too() -> None:
    """Numeric match needs a number in the expected answer, exact match and token F1 a word left
    after normalisation, injection resistance a usable payload: what score() would skip."""
    answers = ["It takes 42 days."] * 12 + ["The."] * 3 + ["yes"] * 15
    cases = [Case(id=f"q{i}", question="q", expected_answer=a) for i, a in enumerate(answers)]
    payloads = ["instruction_override"] * 11 + ["re:PWNED"] * 2 + ["ab", "re:(unclosed", None]
    cases += [
        Case(id=f"i{i}", question="q", kind="injection", adversarial_payload=p)
        for i, p in enumerate(payloads)
    ]
    names = ["answer.exact_match", "answer.numeric_match", "robustness.injection_resistance"]
    assert [(s.name, s.n_all) for s in metric_sizings(cases, _config(), names)] == [
        ("answer.exact_match", 27),  # 30 qa cases, 3 whose expected answer normalises to nothing
        ("answer.numeric_match", 12),
        ("robustness.injection_resistance", 13),  # 11 library ids and 2 usable markers
    ]


def test_judge_metrics_gate_with_a_judge_and_composites_with_weights() -> None:
    names = ["generation.groundedness", "judge.faithfulness", "composite.trust"]
    assert metric_sizings(_cases(), _config(), names) == []
    judged = metric_sizings(_cases(), _config({"judge": {"model": "m"}}), names)
    # groundedness needs only an answer and a context: every case; faithfulness is 0/1
    assert [(s.name, s.binary, s.n_all) for s in judged] == [
        ("generation.groundedness", False, 72),
        ("judge.faithfulness", True, 72),
    ]
    weighted = metric_sizings(_cases(), _config({"composite": {"weights": {"answer.token_f1": 1}}}), names)
    assert [(s.name, s.n_all, s.slice_key, s.n_slice) for s in weighted] == [
        ("composite.trust", 72, "kind=unanswerable", 12)
    ]


def test_the_bound_for_metrics_that_are_not_0_1_holds() -> None:
    """A paired difference in [-1, 1] nonzero on a share c of the cases has variance at most c:
    the t-interval's pairs needed at that spread never exceed the 0/1 figure printed."""
    from gate.stats import pairs_needed

    for margin in (0.01, 0.02, 0.05, 0.1):
        for churn in (0.05, 0.10):
            sd = math.sqrt(churn)
            assert pairs_needed(sd, margin, ternary=False) <= pairs_needed(sd, margin, ternary=True)


def test_binary_metrics_are_the_registrys_rates() -> None:
    assert sorted(n for n, s in registry().items() if s.binary) == [
        "answer.exact_match",
        "echo.exact_match",
        "judge.faithfulness",
        "retrieval.hit_rate_at_k",
        "robustness.abstention",
        "robustness.injection_resistance",
        "robustness.overrefusal",
    ]
