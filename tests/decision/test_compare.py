"""gate.decision.compare.compare_runs: pairing, comparability, gates per metric and slice."""

from __future__ import annotations

import random
import re
from statistics import NormalDist
from typing import Any

import pytest
from gate_runs import artifact, binary_pair, judge, meta, row

from gate.core.errors import NotComparableError
from gate.decision.compare import compare_runs
from gate.decision.comparison import Comparison, GateResult
from gate.model.artifact import RunArtifact
from gate.model.config import GateConfig
from gate.model.records import MetricResult

HIT = "retrieval.hit_rate_at_k"


def gate_of(comparison: Comparison, metric: str, slice_key: str = "all") -> GateResult:
    [found] = [g for g in comparison.gates if g.metric == metric and g.slice == slice_key]
    return found


def seed_runs(**meta_kw: Any) -> tuple[RunArtifact, RunArtifact]:
    """001's two systems as run artifacts (300 questions, Random(1))."""
    rng = random.Random(1)
    base = [1.0 if rng.random() < 0.72 else 0.0 for _ in range(300)]
    cand = [b if rng.random() < 0.9 else 1.0 - b for b in base]
    b_rows = [row(f"q{i:03d}", {HIT: v}) for i, v in enumerate(base)]
    c_rows = [row(f"q{i:03d}", {HIT: v}) for i, v in enumerate(cand)]
    return artifact(meta("base", **meta_kw), b_rows), artifact(meta("cand"), c_rows)


def test_001_example_blocks() -> None:
    base, cand = seed_runs()
    result = compare_runs(base, cand, GateConfig(margin=0.02))
    g = gate_of(result, HIT)
    assert g.n == 300 and g.gating
    assert g.baseline_mean == pytest.approx(215 / 300) and g.candidate_mean == pytest.approx(202 / 300)
    assert g.delta == pytest.approx(-13 / 300)
    assert g.lo == pytest.approx(-0.077, abs=0.006) and g.hi == pytest.approx(-0.010, abs=0.006)
    assert g.decision == "block" and "below zero" in g.reason
    assert result.overall == "block"
    # MDE at 80% power from the spread under no change, the improvements' alone:
    # 2.80 * sqrt(2 * gains / n) / sqrt(n) (a single gate: its critical value is z)
    rng = random.Random(1)
    b = [1.0 if rng.random() < 0.72 else 0.0 for _ in range(300)]
    c = [x if rng.random() < 0.9 else 1.0 - x for x in b]
    gains = sum(y > x for x, y in zip(b, c, strict=True))
    assert g.mde == pytest.approx(2.8016 * (2 * gains / 300) ** 0.5 / 300**0.5, rel=1e-3)
    assert g.mde_exceeds_margin


def test_same_inputs_same_bytes() -> None:
    base, cand = seed_runs()
    a = compare_runs(base, cand, GateConfig()).model_dump_json()
    assert a == compare_runs(base, cand, GateConfig()).model_dump_json()
    assert Comparison.model_validate_json(a).model_dump_json() == a


def test_lower_is_better_is_sign_flipped() -> None:
    name = "robustness.overrefusal"
    b_rows = [row(f"u{i}", {name: 0.0}, kind="unanswerable") for i in range(100)]
    c_rows = [row(f"u{i}", {name: 1.0 if i < 30 else 0.0}, kind="unanswerable") for i in range(100)]
    result = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), c_rows), GateConfig())
    g = gate_of(result, name)
    assert not g.higher_is_better
    assert g.candidate_mean == pytest.approx(0.3)
    assert g.delta == pytest.approx(-0.3)  # more over-refusal is worse
    assert g.decision == "block"
    improved = compare_runs(artifact(meta("c"), c_rows), artifact(meta("b"), b_rows), GateConfig())
    assert gate_of(improved, name).decision == "pass"


def test_pairs_are_per_metric_and_min_pairs_skips() -> None:
    b_rows, c_rows = [], []
    for i in range(40):
        f1_b = 0.5 if i % 4 else None  # 30 scored in the baseline
        f1_c = 0.5 if i % 5 else None  # 32 scored in the candidate
        b_rows.append(row(f"q{i}", {HIT: 1.0, "answer.token_f1": f1_b}, tags=["rare"] if i < 5 else []))
        c_rows.append(row(f"q{i}", {HIT: 1.0, "answer.token_f1": f1_c}, tags=["rare"] if i < 5 else []))
    result = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), c_rows), GateConfig(min_pairs=10))
    assert gate_of(result, HIT).n == 40
    assert gate_of(result, "answer.token_f1").n == sum(1 for i in range(40) if i % 4 and i % 5)
    rare = gate_of(result, HIT, "tags=rare")
    assert rare.decision == "skipped" and rare.reason == "only 5 pairs scored in both runs (min_pairs 10)"
    assert rare.lo is None and result.overall == "pass"


def test_floor_blocks_on_the_candidate_interval() -> None:
    name = "robustness.injection_resistance"
    rows = [row(f"i{k}", {name: 1.0 if k % 5 else 0.0}, kind="injection") for k in range(200)]  # 0.80
    cfg = GateConfig.model_validate({"metrics": {name: {"min": 0.95}}})
    result = compare_runs(artifact(meta("b"), rows), artifact(meta("c"), rows), cfg)
    g = gate_of(result, name)
    assert g.delta == 0.0 and g.floor == 0.95
    assert g.candidate_lo is not None and g.candidate_hi is not None
    assert g.candidate_hi < 0.95 and g.candidate_lo <= 0.80 <= g.candidate_hi
    assert g.decision == "block" and "wholly below min 0.95" in g.reason
    lenient = GateConfig.model_validate({"metrics": {name: {"min": 0.8}}})
    assert (
        gate_of(compare_runs(artifact(meta("b"), rows), artifact(meta("c"), rows), lenient), name).decision
        == "pass"
    )


def test_ceiling_blocks_a_lower_is_better_level() -> None:
    name = "robustness.overrefusal"
    rows = [row(f"u{k}", {name: 1.0 if k % 4 == 0 else 0.0}, kind="unanswerable") for k in range(200)]  # 0.25
    cfg = GateConfig.model_validate({"metrics": {name: {"max": 0.1}}})
    g = gate_of(compare_runs(artifact(meta("b"), rows), artifact(meta("c"), rows), cfg), name)
    assert g.decision == "block" and "wholly above max 0.1" in g.reason


def test_margin_override() -> None:
    base, cand = binary_pair(400, seed=3, p_base=0.7, flip=0.04)
    b, c = artifact(meta("b"), base), artifact(meta("c"), cand)
    tight = gate_of(compare_runs(b, c, GateConfig(margin=0.0)), HIT)
    loose = gate_of(compare_runs(b, c, GateConfig.model_validate({"metrics": {HIT: {"margin": 0.2}}})), HIT)
    assert tight.margin == 0.0 and loose.margin == 0.2
    assert loose.decision == "pass" and tight.decision != "pass"


def test_non_gating_slices_are_shown_not_counted() -> None:
    # the topic:billing slice collapses, everything else is unchanged
    b_rows, c_rows = [], []
    for i in range(300):
        billing = i < 60
        tags = ["topic:billing"] if billing else ["topic:other"]
        b_rows.append(row(f"q{i}", {HIT: 1.0}, tags=tags))
        c_rows.append(row(f"q{i}", {HIT: 0.0 if billing and i % 2 else 1.0}, tags=tags))
    b, c = artifact(meta("b"), b_rows), artifact(meta("c"), c_rows)
    gated = compare_runs(b, c, GateConfig(margin=0.2))
    assert gate_of(gated, HIT, "tags=topic:billing").decision == "block"
    assert gate_of(gated, HIT).decision == "pass"  # the aggregate hides it within a 0.2 margin
    assert gated.overall == "block"
    shown = compare_runs(b, c, GateConfig(margin=0.2, gate_slices=["kind"]))
    shown_billing = gate_of(shown, HIT, "tags=topic:billing")
    assert shown_billing.decision == "block" and not shown_billing.gating
    assert shown.overall == "pass"


def test_adapter_failures_gate_and_stay_out_of_means() -> None:
    b_rows = [row(f"q{i}", {HIT: 1.0 if i % 2 else 0.0}) for i in range(100)]
    # the candidate fails on the hard (0-scoring) cases: its mean over the rest looks perfect
    c_rows = [
        row(f"q{i}", {HIT: 1.0}) if i % 2 else row(f"q{i}", {}, status="adapter_error") for i in range(100)
    ]
    result = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), c_rows), GateConfig())
    hit = gate_of(result, HIT)
    # no case changed among the 50 pairs: what 50 pairs rule out, not a pass (189 needed)
    assert hit.n == 50 and hit.delta == 0.0 and hit.decision == "review" and hit.method == "no-change"
    assert hit.underpowered and hit.pairs_needed == 189
    fail = gate_of(result, "adapter.failure_rate")
    assert not fail.higher_is_better and fail.n == 100
    assert fail.candidate_mean == 0.5 and fail.baseline_mean == 0.0 and fail.delta == -0.5
    assert fail.decision == "block" and result.overall == "block"
    assert result.counts["candidate"].failures == 50
    assert result.top_drops[0].drops == {"adapter.failure_rate": 1.0}


def test_dataset_change_pairs_common_ids() -> None:
    b_rows = [row(f"q{i}", {HIT: 1.0}) for i in range(50)]
    c_rows = [row(f"q{i}", {HIT: 1.0}) for i in range(5, 60)]
    result = compare_runs(
        artifact(meta("b", sha="1" * 64), b_rows), artifact(meta("c", sha="2" * 64), c_rows), GateConfig()
    )
    assert not result.dataset.same and result.dataset.common == 45
    assert result.dataset.removed == [f"q{i}" for i in range(5)]
    assert result.dataset.added == [f"q{i}" for i in range(50, 60)]
    assert any("datasets differ" in w and "5 removed" in w for w in result.warnings)
    assert gate_of(result, HIT).n == 45


@pytest.mark.parametrize(
    "field,value,text",
    [
        ("k", 10, "k differs"),
        ("source_match", "document", "source_match differs"),
        ("ndcg_gain", "exp2", "nDCG gain"),
    ],
)
def test_settings_that_change_scores_are_not_comparable(field: str, value: object, text: str) -> None:
    base, cand = seed_runs()
    changed: dict[str, Any] = {field: value}
    other = artifact(meta("cand", **changed), cand.rows)
    with pytest.raises(NotComparableError, match=text) as info:
        compare_runs(base, other, GateConfig())
    assert info.value.exit_code == 3


def test_mixed_judges() -> None:
    rows = [row(f"q{i}", {HIT: 1.0}) for i in range(20)]
    b = artifact(meta("b", judge=judge("gpt-a", {"faithfulness": "1" * 64})), rows)
    c = artifact(meta("c", judge=judge("gpt-b", {"faithfulness": "1" * 64})), rows)
    with pytest.raises(NotComparableError, match="judge model .*'gpt-a'.*'gpt-b'"):
        compare_runs(b, c, GateConfig())
    allowed = compare_runs(b, c, GateConfig(), allow_mixed_judges=True)
    assert any("mixed judges allowed" in w for w in allowed.warnings)
    d = artifact(meta("d", judge=judge("gpt-a", {"faithfulness": "2" * 64})), rows)
    with pytest.raises(NotComparableError, match="judge prompt faithfulness"):
        compare_runs(b, d, GateConfig())


def test_incomplete_runs_warn_and_no_common_ids_fail() -> None:
    rows = [row(f"q{i}", {HIT: 1.0}) for i in range(20)]
    result = compare_runs(
        artifact(meta("b", status="partial"), rows), artifact(meta("c"), rows), GateConfig()
    )
    assert any("status partial" in w for w in result.warnings)
    others = [row(f"x{i}", {HIT: 1.0}) for i in range(20)]
    with pytest.raises(NotComparableError, match="no case id in common"):
        compare_runs(artifact(meta("b"), rows), artifact(meta("c"), others), GateConfig())


def test_family_wise_blocks_need_more_and_passes_do_not() -> None:
    # nested slices (the first 250, 200, 150 cases): strongly overlapping gates
    base, cand = binary_pair(
        300, seed=5, p_base=0.7, flip=0.1, tag_fn=lambda i: [f"t{k}" for k in range(3) if i < 250 - 50 * k]
    )
    b, c = artifact(meta("b"), base), artifact(meta("c"), cand)
    plain = compare_runs(b, c, GateConfig(family_wise=False))
    family = compare_runs(b, c, GateConfig())
    s = family.settings
    # the family: the distinct gating gates with enough pairs (membership never depends on how
    # many pairs changed, so a growing drop cannot change it): hit and the failure rate on 5
    # slices each, kind=qa holding every case (the same column as all, counted once): 4 + 4
    members = {(g.metric, g.slice) for g in family.gates if g.gating and g.decision != "skipped"}
    assert len(members) == 10
    assert s.family_size == 8
    assert s.family_method == "max-statistic"
    # overlapping slices: far below Bonferroni's z(0.025/8) = 2.73, above one gate's 1.96
    assert s.family_critical is not None and 1.96 < s.family_critical < 2.73
    assert s.block_confidence == pytest.approx(1 - NormalDist().cdf(-s.family_critical))
    p, f = gate_of(plain, HIT), gate_of(family, HIT)
    # the pass side is per gate either way; the block bound widens only with the family
    assert (p.lo, p.hi) == (f.lo, f.hi) and p.method == f.method == "tango"
    assert f.block_hi is not None and f.hi is not None
    assert p.block_hi == p.hi and f.block_hi > f.hi
    assert plain.settings.family_method == "none" and plain.settings.family_critical == pytest.approx(
        1.959964
    )


def test_cluster_by_resamples_documents() -> None:
    b_rows, c_rows = [], []
    rng = random.Random(2)
    for doc in range(30):
        shift = rng.choice([-1.0, 0.0, 0.0, 1.0])
        for q in range(6):
            b_rows.append(row(f"d{doc}q{q}", {"answer.token_f1": 0.5}, metadata={"document_id": f"doc{doc}"}))
            c_rows.append(
                row(
                    f"d{doc}q{q}",
                    {"answer.token_f1": 0.5 + 0.4 * shift},
                    metadata={"document_id": f"doc{doc}"},
                )
            )
    b, c = artifact(meta("b"), b_rows), artifact(meta("c"), c_rows)
    naive = compare_runs(b, c, GateConfig(cluster_by=None))
    grouped = compare_runs(b, c, GateConfig(cluster_by="metadata.document_id"))
    default = compare_runs(b, c, GateConfig())  # cluster_by: auto finds metadata.document_id
    n, g = gate_of(naive, "answer.token_f1"), gate_of(grouped, "answer.token_f1")
    assert g.clusters == 30 and g.unit == "cluster" and g.method == "cluster-t"
    assert n.clusters is None and n.unit == "case" and n.method == "t"
    assert g.hi is not None and g.lo is not None and n.hi is not None and n.lo is not None
    assert (g.hi - g.lo) > 1.8 * (n.hi - n.lo)
    assert grouped.settings.cluster_source == "config" and naive.settings.cluster_by is None
    assert default.settings.cluster_by == "metadata.document_id"
    assert default.settings.cluster_source == "default"
    assert gate_of(default, "answer.token_f1") == g


def test_top_drops_and_categorical_metrics() -> None:
    b_rows, c_rows = [], []
    for i in range(30):
        b = row(f"q{i:02d}", {HIT: 1.0, "answer.token_f1": 0.9})
        c = row(f"q{i:02d}", {HIT: 0.0 if i in (3, 7) else 1.0, "answer.token_f1": 0.4 if i == 7 else 0.9})
        for r in (b, c):
            r.metrics["diagnostics.failure_category"] = MetricResult.category("ok")
        b_rows.append(b)
        c_rows.append(c)
    result = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), c_rows), GateConfig())
    assert [d.case_id for d in result.top_drops] == ["q07", "q03"]
    assert list(result.top_drops[0].drops) == [HIT, "answer.token_f1"]
    assert result.top_drops[0].drops["answer.token_f1"] == pytest.approx(0.5)
    assert not any(g.metric == "diagnostics.failure_category" for g in result.gates)


def test_json_document_fields_are_documented() -> None:
    from pathlib import Path

    from gate.decision.comparison import CaseDrop, DatasetChange, GateResult, RunCounts, RunIdentity, Settings

    doc = (Path(__file__).parents[2] / "docs" / "gate.md").read_text()
    for model in (Comparison, GateResult, RunIdentity, RunCounts, DatasetChange, Settings, CaseDrop):
        for field in model.model_fields:
            assert re.search(rf"`{field}(`|\[\]`|\.)", doc), (
                f"{model.__name__}.{field} missing from docs/gate.md"
            )


def _echo_and_alias_runs() -> tuple[RunArtifact, RunArtifact]:
    """40 qa cases: the candidate changes only the answers' letter case (echo.exact_match drops from
    1.0 to 0.0, answer.exact_match stays 1.0) and loses support on 10 claims (groundedness and its
    alias judge.context_precision, the same number, drop together)."""
    base, cand = [], []
    for i in range(40):
        grounded = 1.0 if i >= 10 else 0.0
        values = {"answer.exact_match": 1.0, "echo.exact_match": 1.0, "generation.groundedness": 1.0}
        base.append(row(f"q{i:02d}", {**values, "judge.context_precision": 1.0}))
        changed = {**values, "echo.exact_match": 0.0, "generation.groundedness": grounded}
        cand.append(row(f"q{i:02d}", {**changed, "judge.context_precision": grounded}))
    return artifact(meta("b"), base), artifact(meta("c"), cand)


def test_echo_exact_match_is_a_diagnostic_and_an_alias_does_not_gate_twice() -> None:
    b, c = _echo_and_alias_runs()
    result = compare_runs(b, c, GateConfig(family_wise=True))
    echo = gate_of(result, "echo.exact_match")
    assert (echo.decision, echo.gating, echo.note) == (
        "block",
        False,
        "diagnostic: shown, does not gate by default",
    )
    alias = gate_of(result, "judge.context_precision")
    assert not alias.gating and alias.delta == gate_of(result, "generation.groundedness").delta == -0.25
    assert gate_of(result, "generation.groundedness").gating
    gating = sorted({g.metric for g in result.gates if g.gating})
    assert gating == ["adapter.failure_rate", "answer.exact_match", "generation.groundedness"]
    # the block family: the distinct gating columns, each once -- groundedness, and the unchanged
    # answer.exact_match and failure rate (both all zeros: one column; all = kind=qa)
    assert result.settings.family_size == 2
    assert result.settings.interval_confidence == 0.95  # passes stay per gate


def test_an_alias_gated_on_request_still_counts_once_in_the_family() -> None:
    b, c = _echo_and_alias_runs()
    names = ["answer.exact_match", "echo.exact_match", "generation.groundedness", "judge.context_precision"]
    result = compare_runs(b, c, GateConfig(family_wise=True, include=names))
    assert all(gate_of(result, name).gating for name in names)
    # five gating metrics on two slices, of which groundedness and its alias are one number:
    # the block family holds each distinct column once: groundedness = its alias, the others
    assert sum(1 for g in result.gates if g.gating) == 10
    assert result.settings.family_size == 3


def test_a_baseline_whose_every_case_failed_compares_nothing() -> None:
    # Used to be "pass": the failure-rate gates improved, every metric gate was skipped.
    b_rows = [row(f"q{i}", {}, status="adapter_error", tags=["topic:a"]) for i in range(20)]
    c_rows = [row(f"q{i}", {HIT: 1.0}, tags=["topic:a"]) for i in range(20)]
    result = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), c_rows), GateConfig())
    assert gate_of(result, "adapter.failure_rate").decision == "pass"
    assert gate_of(result, HIT).decision == "skipped"
    assert result.overall == "none"
    assert result.overall_reason == (
        "nothing could be compared: no gating metric was scored on at least min_pairs 10 cases "
        "in both runs (at most 0); 20 of 20 baseline cases failed"
    )
    from gate.commands.compare import summary_line
    from gate.report.escape import md_escape
    from gate.report.markdown import render_markdown

    why = f"{result.overall_reason}; no gate was decided, so this is not a pass."
    assert summary_line(result).splitlines()[0] == f"ragproof compare: none: {why}"
    text = render_markdown(result)
    assert "## ragproof: ⏹️ Nothing compared" in text
    assert f"**Why:** {md_escape(why)}" in text
    from gate.report.html import render_compare_html

    page = render_compare_html(result, artifact(meta("b"), b_rows), artifact(meta("c"), c_rows))
    assert "⏹️ Nothing compared" in page and "nothing could be compared: no gating metric" in page


def test_a_failure_rate_block_stands_when_nothing_else_compares() -> None:
    b_rows = [row(f"q{i}", {HIT: 1.0}) for i in range(20)]
    c_rows = [row(f"q{i}", {}, status="timeout") for i in range(20)]
    result = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), c_rows), GateConfig())
    assert result.overall == "block" and result.overall_reason is None


def test_no_gating_metric_at_all_compares_nothing() -> None:
    rows = [row(f"q{i}", {"diagnostics.lexical_faithfulness": 0.5}) for i in range(20)]
    result = compare_runs(artifact(meta("b"), rows), artifact(meta("c"), rows), GateConfig())
    assert result.overall == "none"
    assert result.overall_reason == "nothing could be compared: no gating metric was scored in either run"


def test_gating_metrics_scored_on_no_case_are_named() -> None:
    never = "answer.token_f1"
    b_rows = [row(f"q{i}", {HIT: 1.0, never: None}) for i in range(20)]
    config = GateConfig.model_validate(
        {"metrics": {"judge.faithfulness": {"min": 0.5}, "retrieval.mrr": {"gate": False}}}
    )
    result = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), b_rows), config)
    assert result.overall == "pass" and result.overall_reason is None
    assert result.unscored == [never, "judge.faithfulness"]
    assert result.warnings == []


def test_composites_of_runs_without_weights_are_skipped_by_design_not_unscored() -> None:
    rows = [row(f"q{i}", {HIT: 1.0, "composite.trust": None}) for i in range(20)]
    plain = {"run": {"metrics": "all"}}  # the recorded configuration: no composite section

    def unscored(config: dict[str, Any] | None) -> list[str]:
        base, cand = (artifact(meta(name, config=config), rows) for name in ("b", "c"))
        return compare_runs(base, cand, GateConfig()).unscored

    assert unscored(plain) == []
    assert unscored({**plain, "composite": {"weights": {HIT: 1.0}}}) == ["composite.trust"]
    assert unscored(None) == ["composite.trust"]  # an older run: unknown, so said


def test_the_arithmetic_composite_is_shown_but_does_not_gate_by_default() -> None:
    rows = [row(f"q{i}", {"composite.trust": 0.5, "composite.trust_arithmetic": 0.7}) for i in range(20)]
    base, cand = (artifact(meta(name), rows) for name in ("b", "c"))
    gating = {
        g.metric: g.gating
        for g in compare_runs(base, cand, GateConfig()).gates
        if g.metric.startswith("composite.")
    }
    assert gating == {"composite.trust": True, "composite.trust_arithmetic": False}
    named = GateConfig(include=["composite.trust", "composite.trust_arithmetic"])
    (gate,) = [
        g
        for g in compare_runs(base, cand, named).gates
        if g.metric == "composite.trust_arithmetic" and g.slice == "all"
    ]
    assert gate.gating


def test_a_family_that_confirms_nothing_shows_each_gate_the_threshold_it_needed_alone() -> None:
    from gate.decision.compare import _Family

    family = _Family(confidence=0.95, seen=set())
    family.test(b"all", 0.03, True)  # weight 0.5 * 4 / 1 = 2
    for key, p_value in ((b"a", 0.02), (b"b", 0.5), (b"c", 0.5)):  # weights 0.5 * 4 / 3 each
        family.test(key, p_value, False)
    # q = 0.01: the smallest p / w is 0.015 > q / G = 0.0025, nothing is confirmed; each gate
    # is shown w * q / G (was 0: "p = 0.0077 > 0")
    needed_alone = family.review_thresholds(0.01)
    assert needed_alone[b"all"] == pytest.approx(0.005)
    assert needed_alone[b"a"] == pytest.approx(0.0025 * 2 / 3)
    # q = 0.1: p / w sorted 0.015, 0.03, 0.75, 0.75 against 0.025, 0.05, ...: k = 2, cutoff 0.05
    confirmed = family.review_thresholds(0.1)
    assert confirmed[b"all"] == pytest.approx(0.1)
    assert confirmed[b"a"] == pytest.approx(0.05 * 2 / 3)
