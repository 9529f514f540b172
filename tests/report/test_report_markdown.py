"""gate.report.markdown and gate.report.escape: golden output, hostile strings, the size cap."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from gate_runs import HOSTILE, artifact, fixed_runs, meta, row
from pydantic import ValidationError

from gate.decision.compare import compare_runs
from gate.decision.comparison import Comparison, GateResult
from gate.model.config import GateConfig
from gate.report.escape import md_escape
from gate.report.markdown import (
    MAX_CHARS,
    ReportContext,
    interval_bar,
    render_markdown,
    render_no_baseline,
    render_run_summary,
)

GOLDEN = Path(__file__).parents[1] / "golden" / "comment.md"
NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


CONTEXT = ReportContext(
    now=NOW,
    marker="<!-- ragproof:gate -->",
    run_url="https://github.com/acme/rag/actions/runs/42",
    artifact_url="https://github.com/acme/rag/actions/runs/42/artifacts/7",
)


def test_golden_comment_is_byte_identical(update_golden: bool) -> None:
    base, cand = fixed_runs()
    text = render_markdown(
        compare_runs(base, cand, GateConfig()), context=CONTEXT, baseline=base, candidate=cand
    )
    base2, cand2 = fixed_runs()
    again = render_markdown(
        compare_runs(base2, cand2, GateConfig()), context=CONTEXT, baseline=base2, candidate=cand2
    )
    assert text == again
    if update_golden:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.read_text(encoding="utf-8") == text


def test_report_contents() -> None:
    base, cand = fixed_runs()
    comparison = compare_runs(base, cand, GateConfig())
    text = render_markdown(comparison, context=CONTEXT, baseline=base, candidate=cand)
    assert text.startswith(
        "<!-- ragproof:gate -->\n## ragproof: ❌ Blocked\n\n**Why:** answer.token\\_f1 on "
    )
    assert "commit bbbbbbbbbbbb, run 20261128T120000Z\\-base" not in text  # ids are not over-escaped
    assert "commit bbbbbbbbbbbb, run 20261128T120000Z-base" in text
    assert "2 days old" in text
    assert "version v3" in text
    # decision first: the attention table before any <details>, "What now" after them
    first_details = text.index("<details>")
    assert text.index("| Gate | Baseline → candidate |") < first_details
    assert text.index("**What now?**") > text.rindex("</details>")
    # the counts add up to the --json gates
    assert "24 gates: **3 block** · **0 review** · 12 inform only · 3 pass · 6 skipped <sub>" in text
    assert len(comparison.gates) == 24
    # all and kind=qa pair the same cases for answer.token_f1: one row naming both
    assert (
        "| **answer.<wbr>token\\_f1**<br>all = kind=qa | 0.471&nbsp;→&nbsp;0.435<br><sub>215&nbsp;pairs</sub> |"
        in text
    )
    assert "<details><summary>6 skipped gates (too few pairs to decide)</summary>" in text
    assert (
        "- 3 gates: 8 pairs, fewer than min_pairs 10 — tags=topic:billing, tags=topic:security, tags=topic:sync"
        in text
    )
    # the power table: MDE at the family level, pairs needed, the method
    assert "| robustness.overrefusal ↓ | 24 | 0.315 | 0.02 | 3,292 | tango |" in text
    assert "- **case-007** Δ −1.000<br>" in text and "candidate (1.000): *timeout* connection refused" in text
    assert "| candidate | 240 | 1 |" in text  # cases and failures
    assert "[the run artifact](https://github.com/acme/rag/actions/runs/42/artifacts/7)" in text
    assert "a maintainer adds the label `ragproof:accept`" in text
    assert "`gate.margin` (now 0.02)" in text
    assert "`ragproof compare BASELINE CANDIDATE -c ragproof.yaml --html report.html`" in text
    # without the runs: no cases, no grouping (equal figures alone do not prove equal cases)
    bare = render_markdown(comparison, context=CONTEXT)
    assert "Cases that moved most" not in bare and "all = kind=qa" not in bare


def test_identical_metrics_are_shown_once_and_every_count_agrees() -> None:
    # 0/1 answers: token F1 equals exact match on every case, so both gates have the same numbers
    rows_b, rows_c = [], []
    for i in range(40):
        b = 1.0 if i % 2 else 0.0
        c = 0.0 if i < 16 else b
        rows_b.append(row(f"c{i:02d}", {"answer.exact_match": b, "answer.token_f1": b}, tags=["topic:x"]))
        rows_c.append(row(f"c{i:02d}", {"answer.exact_match": c, "answer.token_f1": c}, tags=["topic:x"]))
    base, cand = artifact(meta("b"), rows_b), artifact(meta("c"), rows_c)
    comparison = compare_runs(base, cand, GateConfig())
    text = render_markdown(comparison, baseline=base, candidate=cand)
    blocks = [g for g in comparison.gates if g.decision == "block"]
    assert {(g.metric, g.slice) for g in blocks} == {
        (m, s) for m in ("answer.exact_match", "answer.token_f1") for s in ("all", "kind=qa", "tags=topic:x")
    }
    # six gates, one row: both metrics, the three slices
    assert text.count("❌&nbsp;real drop") == 1
    assert "**answer.<wbr>exact\\_match = answer.<wbr>token\\_f1**<br>all = kind=qa = tags=topic:x |" in text
    # the failure rate's 40 unchanged pairs cannot rule out a 0.02 rise: a review, not a pass,
    # that does not decide: it informs only
    assert "9 gates: **6 block** · **0 review** · 3 inform only · 0 pass · 0 skipped <sub>" in text
    # without the runs nothing is grouped: six rows
    assert render_markdown(comparison).count("❌&nbsp;real drop") == 6


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def _cells(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_hostile_case_id_renders_inert() -> None:
    b_rows = [row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0}, tags=[HOSTILE]) for i in range(30)]
    c_rows = [row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0}, tags=[HOSTILE]) for i in range(30)]
    b_rows.append(row(HOSTILE, {"retrieval.hit_rate_at_k": 1.0}))
    c_rows.append(row(HOSTILE, {"retrieval.hit_rate_at_k": 0.0}))
    comparison = compare_runs(artifact(meta("b"), b_rows), artifact(meta("c"), c_rows), GateConfig())
    text = render_markdown(comparison)
    assert "@org" not in text and "&#64;" not in text and "<img" not in text
    assert "@\u200borg/team &lt;img src=x&gt; \\| ---" in text
    # every table row has as many cell separators as its header
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            header = _cells(lines[i - 1])
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert _cells(lines[j]) == header, lines[j]
                j += 1
    assert any(HOSTILE not in line and "@\u200borg" in line for line in _table_rows(text))


def test_family_wise_mode_is_stated() -> None:
    base, cand = fixed_runs()
    plain = render_markdown(compare_runs(base, cand, GateConfig(family_wise=False)))
    assert "family-wise blocks" not in plain
    why = next(line for line in plain.splitlines() if line.startswith("**Why:**"))
    assert "so does its family-wise bound" not in why and "gate by gate" in why
    comparison = compare_runs(base, cand, GateConfig())
    family = comparison.settings.family_size
    assert family > 1
    text = render_markdown(comparison)
    assert f"(margin 0.02, 95%, family-wise blocks over {family}, " in text


def test_context_strings_are_escaped_too() -> None:
    base, cand = fixed_runs()
    hostile = ReportContext(
        title="@org/ci <b>",
        baseline_age="@team <i>3 days</i>",
        baseline_commit="@c0ffee",
        baseline_run_id="<img>|",
    )
    text = render_markdown(compare_runs(base, cand, GateConfig()), context=hostile)
    assert not re.search(r"@\w", text) and "<b>" not in text and "<i>" not in text and "<img" not in text
    assert "@\u200bteam &lt;i&gt;3 days&lt;/i&gt; old" in text
    assert "run &lt;img&gt;\\|" in text


@pytest.mark.parametrize(
    "text,expected",
    [
        ("plain id-1.2", "plain id-1.2"),
        ("@here", "@\u200bhere"),
        ("<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
        ("a|b", "a\\|b"),
        ("line\nbreak\r\nx", "line break x"),
        (
            "`code` *em* _u_ [l](u) ![i](s) ~~s~~",
            "\\`code\\` \\*em\\* \\_u\\_ \\[l\\]\\(u\\) \\!\\[i\\]\\(s\\) \\~\\~s\\~\\~",
        ),
        ("# heading", "\\# heading"),
        ("- item", "\\- item"),
        ("12. item", "12\\. item"),
        ("a & b", "a &amp; b"),
        ("back\\slash", "back\\\\slash"),
    ],
)
def test_md_escape(text: str, expected: str) -> None:
    assert md_escape(text) == expected


def test_md_escape_truncates() -> None:
    assert md_escape("x" * 500) == "x" * 299 + "…"
    assert md_escape("abc", max_len=2) == "a…"


def _gate(i: int) -> GateResult:
    return GateResult(
        metric=f"custom.metric_{i % 50}",
        slice=f"tags=topic:t{i}",
        gating=True,
        higher_is_better=True,
        n=120,
        baseline_mean=0.7,
        candidate_mean=0.68,
        delta=-0.02,
        lo=-0.06,
        hi=0.01,
        margin=0.02,
        decision="review" if i % 3 else "block",
        reason="inconclusive",
        mde=0.05,
        mde_exceeds_margin=True,
    )


@pytest.mark.slow
def test_5000_gates_stay_under_the_cap() -> None:
    base, cand = fixed_runs()
    small = compare_runs(base, cand, GateConfig())
    big = Comparison.model_validate(
        {**small.model_dump(), "gates": [_gate(i).model_dump() for i in range(5000)]}
    )
    text = render_markdown(big, context=CONTEXT)
    assert len(text) <= MAX_CHARS
    assert "more rows not shown: the full list is in [the run artifact](" in text
    assert text.rstrip().endswith("</sub>")  # truncation keeps the document whole
    assert "<details>" not in text or "</details>" in text


def test_interval_bar() -> None:
    bar = interval_bar(-0.077, -0.010, -0.043, 0.02, 0.1)
    assert bar == "`·━━◆━━┆······`"  # -margin (inside the interval) is drawn as interval
    assert interval_bar(0.01, 0.05, 0.03, 0.02, 0.1) == "`·····╎┆━◆━···`"
    assert "◆" in bar and "━" in bar and "┆" in bar
    assert interval_bar(None, None, None, 0.02, 0.1) == ""


def test_no_baseline_report() -> None:
    base, _ = fixed_runs()
    text = render_no_baseline(base, context=CONTEXT)
    assert "No baseline" in text and "no gate was decided" in text
    assert "| retrieval.hit\\_rate\\_at\\_k |" in text
    assert "<details><summary>Per slice</summary>" in text
    assert "| retrieval.hit\\_rate\\_at\\_k | 0.759 | 1.000 | 1.000 | 216 | 24 | 0 |" in text
    assert len(text) <= MAX_CHARS


def test_run_summary_reads_as_a_baseline_and_escapes_its_wording() -> None:
    base, _ = fixed_runs()
    default = render_run_summary(base, context=CONTEXT)
    assert default.startswith("<!-- ragproof:gate -->\n## ragproof: 📌 Baseline run\n\n")
    assert "No baseline" not in default and "no gate is decided" in default
    assert "| retrieval.hit\\_rate\\_at\\_k | 0.759 |" in default
    # The same tables as the no-baseline report: only the heading and the lead differ.
    no_baseline = render_no_baseline(base, context=CONTEXT)
    assert (
        default.split("Run 20261128T120000Z-base", 1)[1]
        == no_baseline.split("Run 20261128T120000Z-base", 1)[1]
    )
    text = render_run_summary(base, heading="Baseline of @org/team", intro="Stored as <b>x</b> | y\n# z")
    assert "## ragproof: Baseline of @\u200borg/team\n" in text
    assert "\nStored as &lt;b&gt;x&lt;/b&gt; \\| y # z\n" in text


def test_a_baseline_run_summary_carries_the_runs_warnings() -> None:
    base, _ = fixed_runs()
    assert "⚠️" not in render_run_summary(base, context=CONTEXT)
    base.meta.warnings = ["3 of 10 cases failed (30%, above 10%; most often 'timeout: no_result', 3x)"]
    text = render_run_summary(base, context=CONTEXT)
    assert "\n> ⚠️ 3 of 10 cases failed \\(30%, above 10%; most often 'timeout: no\\_result', 3x\\)\n" in text


def test_context_rejects_unsafe_values() -> None:
    with pytest.raises(ValidationError):
        ReportContext(marker="<img src=x>")
    with pytest.raises(ValidationError):
        ReportContext(marker="<!-- a --> <img src=x> <!-- b -->")
    assert ReportContext(marker="<!-- ragproof:RAG gate (PR) -->").marker
    with pytest.raises(ValidationError):
        ReportContext(run_url="javascript:alert(1)")
    with pytest.raises(ValidationError):
        ReportContext(artifact_url="https://x/a) [evil](https://y")


def test_notes_are_escaped_separate_quotes_and_nothing_for_no_notes() -> None:
    from gate.report.markdown import render_notes

    assert render_notes([]) == ""
    text = render_notes(["@org/team <img src=x> | ---", "second"])
    assert text == "\n> @\u200borg/team &lt;img src=x&gt; \\| ---\n\n> second\n"


def test_not_comparable_report_carries_the_marker_and_the_escaped_reason() -> None:
    from gate.report.markdown import ReportContext, render_not_comparable

    ctx = ReportContext(marker="<!-- ragproof:gate -->", title="gate")
    text = render_not_comparable("judge differs: <b>@x</b>", context=ctx)
    assert text.splitlines()[:2] == ["<!-- ragproof:gate -->", "## gate: runs not comparable"]
    assert "<b>" not in text and "@x" not in text


def test_gating_metrics_scored_in_neither_run_are_named_in_every_report() -> None:
    """A pass that compared them not is said next to the decision (comment, terminal, HTML)."""
    import html

    from gate.report.html import render_compare_html
    from gate.report.markdown import report_warnings
    from gate.report.terminal import render_terminal

    never = "answer.token_f1"
    rows = [row(f"q{i}", {"retrieval.hit_rate_at_k": 1.0, never: None}) for i in range(20)]
    base, cand = artifact(meta("b"), rows), artifact(meta("c"), rows)
    config = GateConfig.model_validate({"metrics": {"judge.faithfulness": {"min": 0.5}}})
    result = compare_runs(base, cand, config)
    assert result.overall == "pass" and result.unscored == [never, "judge.faithfulness"]
    line = (
        "not compared: answer.token_f1, judge.faithfulness: gating metrics scored in neither run "
        "(not run, or undefined on every case): they decide nothing here"
    )
    assert report_warnings(result) == [line]
    markdown = render_markdown(result, baseline=base, candidate=cand)
    assert f"> ⚠️ {md_escape(line)}" in markdown
    # every case unchanged: nothing verified at the margin, and the headline says so
    assert (
        markdown.index("🔍 No regression detected")
        < markdown.index(md_escape(line))
        < markdown.index("What now?")
    )
    assert f"  warning: {line}" in render_terminal(result).splitlines()
    assert f'<p class="decision-review">⚠ {html.escape(line, quote=False)}</p>' in render_compare_html(
        result, base, cand
    )
    one = compare_runs(base, cand, GateConfig())
    assert report_warnings(one) == [
        "not compared: answer.token_f1: a gating metric scored in neither run "
        "(not run, or undefined on every case): it decides nothing here"
    ]
