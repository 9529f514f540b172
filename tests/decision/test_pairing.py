"""One pairing for the decision and the reports: missing outputs are losses, chunks are marked
expected as the metrics match them, the report's cases move as the comparison's pairs do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gate_runs import meta, write_run

from gate.decision.compare import compare_runs
from gate.decision.pairing import pair_runs
from gate.metrics.base import ScoringContext
from gate.model.artifact import Row, RunArtifact
from gate.model.config import GateConfig, ScoringSettings
from gate.model.dataset import Case, CaseKind
from gate.model.records import Answer, CaseOutput, Chunk
from gate.report.cases import PairedCases, explorer_cases
from gate.report.markdown import render_markdown
from gate.run.artifact_io import read_artifact
from gate.run.scoring import score_case

ANSWER_METRICS = ("answer.exact_match", "answer.token_f1")


def _row(case: Case, output: CaseOutput | None, metrics: tuple[str, ...], ctx: ScoringContext) -> Row:
    """A row as the runner writes it: the case's fields, the output, the registry's scores."""
    return Row.of(case, output, score_case(case, output, ctx, metrics) if output else {})


def _qa(n: int, kind: CaseKind = "qa") -> list[Case]:
    return [
        Case(id=f"q{i:02d}", question=f"What is item {i}?", expected_answer=f"item {i}", kind=kind)
        for i in range(n)
    ]


def _answers(cases: list[Case], missing: set[int], tmp: Path, role: str) -> RunArtifact:
    ctx = ScoringContext()
    rows = [
        _row(
            case,
            CaseOutput(
                answer=None if i in missing else Answer(text=case.expected_answer or ""), supports_answer=True
            ),
            ANSWER_METRICS,
            ctx,
        )
        for i, case in enumerate(cases)
    ]
    return read_artifact(write_run(tmp / role, meta(role), rows))


def test_25_of_70_right_answers_missing_is_not_a_pass(tmp_path: Path) -> None:
    # Before: exact_match paired the 45 answered cases, Δ 0.000, and the run passed.
    cases = _qa(70)
    base = _answers(cases, set(), tmp_path, "base")
    cand = _answers(cases, set(range(25)), tmp_path, "cand")
    comparison = compare_runs(base, cand, GateConfig())
    assert comparison.overall == "block"
    exact = next(g for g in comparison.gates if g.metric == "answer.exact_match" and g.slice == "all")
    assert (exact.n, exact.baseline_mean, exact.candidate_mean) == (70, 1.0, 45 / 70)
    assert exact.delta == -25 / 70 and exact.decision == "block"
    assert [w for w in comparison.warnings if "no output" in w] == [
        "25 candidate cases produced no output a metric needs (no answer, empty answer, no retrieved "
        "list or context) where the other run scored it: counted at the metric's worst value, as losses "
        "(answer.exact_match 25, answer.token_f1 25)"
    ]
    # The run's own summary still skips the undefined cases with their reason, never 0.
    own = cand.summary.slices["all"]["answer.exact_match"]
    assert (own.mean, own.scored, own.skipped) == (1.0, 45, 25)


def test_a_missing_baseline_output_is_a_gain_and_unanswerable_cases_keep_their_rules(tmp_path: Path) -> None:
    qa, unanswerable = _qa(30), _qa(30, kind="unanswerable")
    unanswerable = [c.model_copy(update={"id": "u" + c.id}) for c in unanswerable]
    cases = qa + unanswerable
    base = _answers(cases, {0, 1, 2, 30, 31}, tmp_path, "base")
    cand = _answers(cases, {32, 33}, tmp_path, "cand")
    pairing = pair_runs(base, cand)
    column = pairing.column("answer.exact_match")
    assert column is not None
    assert column.missing_baseline.nonzero()[0].tolist() == [0, 1, 2]
    assert not column.missing_candidate.any()
    # qa: 30 pairs, three gains of 1; unanswerable: neither missing side pairs (56 - 4 = 26 both scored)
    assert int(column.paired.sum()) == 30 + 26
    assert column.diff[:3].tolist() == [1.0, 1.0, 1.0]


def _retrieval_rows(
    tmp: Path, run_meta_kw: dict[str, Any], chunks: list[Chunk], expected: list[str]
) -> RunArtifact:
    case = Case(id="c1", question="Where is the refund policy?", expected_source_ids=expected)
    ctx = ScoringContext(
        settings=ScoringSettings(
            k=5,
            source_match=run_meta_kw["source_match"],
            document_id_key=run_meta_kw.get("document_id_key", "document_id"),
        )
    )
    output = CaseOutput(retrieved=chunks, supports_retrieve=True)
    row = _row(case, output, ("retrieval.hit_rate_at_k",), ctx)
    return read_artifact(write_run(tmp, meta("r", **run_meta_kw), [row]))


def _marks(run: RunArtifact) -> tuple[float | None, list[bool]]:
    comparison = compare_runs(run, run, GateConfig(min_pairs=1))
    move = PairedCases(comparison, run, run).case(0, "retrieval.hit_rate_at_k", 0.0)
    return move.candidate.value, [r.expected for r in move.candidate.retrieved]


def test_document_matching_by_another_key_marks_the_chunks_the_metric_counts(tmp_path: Path) -> None:
    # Before: marked by metadata["document_id"] whatever document_id_key said: [False, False, False].
    chunks = [
        Chunk(id="x#1", text="a", metadata={"source": "refunds.md", "document_id": "other"}),
        Chunk(id="x#2", text="b", metadata={"source": "billing.md"}),
        Chunk(id="refunds.md", text="c", metadata={"source": "faq.md"}),
    ]
    run = _retrieval_rows(
        tmp_path / "doc", {"source_match": "document", "document_id_key": "source"}, chunks, ["refunds.md"]
    )
    assert _marks(run) == (1.0, [True, False, False])


def test_substring_matching_marks_the_chunks_whose_text_holds_an_expected_string(tmp_path: Path) -> None:
    # Before: substring cases marked nothing (no chunk id or document_id equals a phrase).
    chunks = [
        Chunk(id="k1", text="Shipping takes 3 days."),
        Chunk(id="k2", text="REFUNDS are issued within 14 days."),
        Chunk(id="k3", text="refunds are issued within 14 days, again."),
    ]
    run = _retrieval_rows(tmp_path / "sub", {"source_match": "substring"}, chunks, ["refunds are issued"])
    assert _marks(run) == (1.0, [False, True, True])


def test_the_comment_shows_the_lost_cases_the_comparison_counted(tmp_path: Path) -> None:
    cases = _qa(70)
    base = _answers(cases, set(), tmp_path, "base")
    cand = _answers(cases, set(range(25)), tmp_path, "cand")
    pairing = pair_runs(base, cand)
    comparison = compare_runs(base, cand, GateConfig(), pairing=pairing)
    paired = PairedCases(comparison, base, cand, pairing=pairing)
    exact = next(g for g in comparison.gates if g.metric == "answer.exact_match" and g.slice == "all")
    moves = paired.moved(exact, dropped=3, improved=1)
    assert [
        (m.case_id, m.d, m.baseline.value, m.candidate.value, m.candidate.answer) for m in moves.dropped
    ] == [
        ("q00", -1.0, 1.0, None, None),
        ("q01", -1.0, 1.0, None, None),
        ("q02", -1.0, 1.0, None, None),
    ]
    assert moves.improved == []
    explorer = {c.case_id: c for c in explorer_cases(comparison, paired)}
    assert explorer["q00"].change == "worse" and explorer["q30"].change == "same"
    values = {m.name: (m.baseline, m.candidate, m.d) for m in explorer["q00"].metrics}
    assert values["answer.exact_match"] == (1.0, None, -1.0)
    text = render_markdown(comparison, paired=paired)
    # the case says what the pairs counted for the missing answer
    assert "  candidate (–, counted 0.000): *no answer*\n" in text


def test_an_interval_never_leaves_the_differences_feasible_range() -> None:
    # Before: a t interval on seven lost first hits and three halved ones reached −1.05, below
    # the −1 an MRR difference can be (an MRR interval of [−1.013, +0.837] was printed).
    from gate_runs import artifact, row

    from gate.decision.pairing import feasible

    cands = [0.0] * 7 + [0.5, 0.5, 1.0]
    base_rows = [row(f"q{i}", {"retrieval.mrr": 1.0}) for i in range(10)]
    cand_rows = [row(f"q{i}", {"retrieval.mrr": v}) for i, v in enumerate(cands)]
    comparison = compare_runs(artifact(meta("b"), base_rows), artifact(meta("c"), cand_rows), GateConfig())
    mrr = next(g for g in comparison.gates if g.metric == "retrieval.mrr" and g.slice == "all")
    assert (mrr.method, mrr.delta, mrr.lo, mrr.decision) == ("t", -0.8, -1.0, "block")
    assert mrr.hi is not None and -1.0 < mrr.hi < 0
    assert feasible(-1.013, 0.837, (0.0, 1.0)) == (-1.0, 0.837)
    assert feasible(-2.5, -1.5, (0.0, 1.0)) == (-1.0, -1.0)
    assert feasible(-0.2, 1.2, (0.0, 1.0), level=True) == (0.0, 1.0)
    assert feasible(-3.0, 3.0, None) == (-3.0, 3.0)
