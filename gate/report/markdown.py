"""The Markdown report: the pull-request comment, the check run and the job summary.

Decision first. Outside any ``<details>`` (what a reviewer sees without a click, kept to one
screen of a pull-request comment): the headline decision and one line saying why
(:func:`why_line`); the gate counts, which add up to the gates of the ``--json`` document
(:func:`tally`); a narrow table of only the gates that need attention (block, then review),
grouped so that a metric failing in several slices reads as one finding, with gates computed
from the same cases and values shown once naming all of them; warnings; a short "What now"
block (reproduce, accept, where the full report is). Folded in ``<details>``: the cases that
moved most for each finding (question, expected answer, both runs' answers and retrieved ids
with the expected ones marked, and the cases that improved), the passing gates, the skipped
gates (one line per reason), the gates that do not count, the power table (minimum detectable
effect per gated metric on ``all``) and the runs' counts.

Every user-supplied string goes through :func:`gate.report.escape.md_escape` in the
templates (``| md``). The body never exceeds :data:`MAX_CHARS` (GitHub refuses comments over
65,536 characters): when longer, tables are cut row-wise, least important first (passing gates,
then cases, then the power table and the overflow of the attention table), each cut saying how
many rows are left out and where the full results are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import field_validator

from gate.core.strict import StrictModel
from gate.decision.comparison import Comparison, GateRef, GateResult
from gate.decision.decide import VerdictCause
from gate.model.artifact import MetricSummary, RunArtifact
from gate.model.slices import ALL_SLICE
from gate.report.cases import CaseMove, PairedCases, Side, group_identical, paired_cases, slice_moves
from gate.report.escape import inert_text, md_escape
from gate.report.templating import axis_extent, environment, fmt_interval, fmt_num, fmt_signed
from gate.report.wording import (
    DECISION_ICON,
    INFORM_ICON,
    gate_phrase,
    headline,
    informs_only,
    pairs_to_decide,
    pct,
    tally,
    why_line,
    worse_line,
)

T = TypeVar("T")

MAX_CHARS = 60_000
BAR_WIDTH = 13

ACCEPT_LABEL = "ragproof:accept"

_MARKER = re.compile(r"<!--(?:(?!--)[^<>\r\n]){1,200}-->")
_URL = re.compile(r"https?://[^\s<>()\[\]\"'`|]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}")


def plain_name(value: str | None) -> bool:
    """Whether ``value`` can stand in a code span as it is: letters, digits and ``._:/-``."""
    return value is not None and _NAME.fullmatch(value) is not None


class ReportContext(StrictModel):
    """Links and identity the caller knows (the GitHub action fills these); all optional."""

    run_url: str | None = None  # the workflow run
    artifact_url: str | None = None  # where the full results (decision.json, rows) are
    baseline_url: str | None = None  # the baseline's workflow run
    baseline_commit: str | None = None  # overrides the commit recorded in the baseline run
    baseline_run_id: str | None = None  # overrides the run id recorded in the baseline run
    baseline_age: str | None = None  # e.g. "3 days"; else computed from ``now``
    now: datetime | None = None  # reference time for the baseline's age (None: show its date)
    marker: str | None = None  # hidden HTML comment identifying the comment, e.g. <!-- ragproof -->
    title: str = "ragproof"
    # "What now": the artifact both runs are uploaded as, the config file, the accept label
    artifact_name: str | None = None
    config_path: str = "ragproof.yaml"
    accept_label: str = ACCEPT_LABEL

    @field_validator("marker")
    @classmethod
    def _marker_is_comment(cls, v: str | None) -> str | None:
        if v is not None and not _MARKER.fullmatch(v):
            raise ValueError(
                "marker must be an HTML comment like <!-- ragproof:gate --> (letters, digits, :./=-)"
            )
        return v

    @field_validator("artifact_name", "config_path", "accept_label")
    @classmethod
    def _plain_name(cls, v: str | None) -> str | None:
        # Shown inside code spans, where no escaping applies: letters, digits and ._:/- only.
        if v is not None and not _NAME.fullmatch(v):
            raise ValueError("expected a name of letters, digits and ._:/- (at most 100 characters)")
        return v

    @field_validator("run_url", "artifact_url", "baseline_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not _URL.fullmatch(v):
            raise ValueError("expected an http(s) URL without spaces, quotes or brackets")
        return v


@dataclass(frozen=True)
class _Limits:
    attention: int | None = None
    passing: int | None = None
    drops: int | None = None  # findings whose cases are shown
    mde: int | None = None


# Rows of the attention table shown outside <details>: every blocking row up to this many,
# reviews after them up to ATTENTION_ROWS in all; the rest fold into a <details> below it.
BLOCK_ROWS = 12
ATTENTION_ROWS = 8
# Cases per finding: (dropped, improved) for a blocking and for a review finding.
CASES_PER_FINDING = {"block": (3, 2), "review": (2, 1)}
ANSWER_CHARS = 240
QUESTION_CHARS = 200
RETRIEVED_SHOWN = 5
# Gates worse on their own evidence named on the first screen; slices in its cases table.
WORSE_SHOWN = 5
SLICES_SHOWN = 10


def _age(created_at: str, now: datetime | None) -> str | None:
    if now is None:
        return None
    try:
        then = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    ref = now if now.tzinfo else now.replace(tzinfo=UTC)
    seconds = max(0.0, (ref - then).total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return "less than a minute"


def interval_bar(lo: float | None, hi: float | None, delta: float | None, margin: float, scale: float) -> str:
    """A text picture of the interval on [-scale, +scale]: ``╎`` -margin, ``┆`` zero, ``━`` interval, ``◆`` Δ."""
    if lo is None or hi is None or delta is None or scale <= 0:
        return ""
    cells = ["·"] * BAR_WIDTH

    def pos(x: float) -> int:
        return min(BAR_WIDTH - 1, max(0, round((x + scale) / (2 * scale) * (BAR_WIDTH - 1))))

    for i in range(pos(lo), pos(hi) + 1):
        cells[i] = "━"
    cells[pos(-margin)] = "╎" if cells[pos(-margin)] == "·" else cells[pos(-margin)]
    cells[pos(0.0)] = "┆" if cells[pos(0.0)] == "·" else cells[pos(0.0)]
    cells[pos(delta)] = "◆"
    return "`" + "".join(cells) + "`"


@dataclass
class _Row:
    """One line of a gate table: one gate, or several computed from the same numbers."""

    gates: list[GateResult]
    metrics: list[str]
    slices: list[str]  # slice keys with identical numbers (a product with metrics), or labels
    product: bool  # metrics x slices are exactly the gates

    @property
    def lead(self) -> GateResult:
        return self.gates[0]


def _rows(groups: list[list[GateResult]]) -> list[_Row]:
    rows = []
    for group in groups:
        metrics = list(dict.fromkeys(g.metric for g in group))
        slices = list(dict.fromkeys(g.slice for g in group))
        product = len(metrics) * len(slices) == len(group)
        if not product:
            slices = [f"{g.metric} · {g.slice}" for g in group]
        rows.append(_Row(group, metrics, slices, product))
    return rows


# Decisions from the most to the least severe (the order of tables and panels).
SEVERITY: tuple[str, ...] = ("block", "review", "pass", "skipped")
SEVERITY_RANK = {decision: rank for rank, decision in enumerate(SEVERITY)}


def _severity_key(row: _Row) -> tuple[int, float, str, str]:
    g = row.lead
    return (SEVERITY_RANK[g.decision], g.delta if g.delta is not None else 0.0, g.metric, g.slice)


def _findings(rows: list[_Row]) -> list[_Row]:
    """Rows ordered so a metric failing in several slices reads as one finding: metrics by their
    worst row (block before review, then the lowest Δ), each metric's rows together, within a
    metric by decision, ``all`` first, then the lowest Δ."""
    by_metric: dict[str, list[_Row]] = {}
    for row in sorted(rows, key=_severity_key):
        by_metric.setdefault(" = ".join(row.metrics), []).append(row)

    def within(row: _Row) -> tuple[int, int, float, str, str]:
        rank, delta, metric, key = _severity_key(row)
        return (rank, 0 if ALL_SLICE in row.slices else 1, delta, metric, key)

    return [row for group in by_metric.values() for row in sorted(group, key=within)]


def _table_rows(rows: list[_Row], scale: float, default_method: str | None = None) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    previous = None
    for row in rows:
        g = row.lead
        metric = " = ".join(row.metrics)
        arrow = "" if g.higher_is_better else " ↓"
        method = g.method
        if method == default_method:
            method = None  # the header names the configured method; a row says where it differs
        needed = pairs_to_decide(g)
        out.append(
            {
                "first": metric != previous,
                "metric": metric,
                "arrow": arrow,
                "slices": row.slices,
                "product": row.product,
                "n": g.n,
                "baseline": fmt_num(g.baseline_mean),
                "candidate": fmt_num(g.candidate_mean),
                "delta": fmt_signed(g.delta),
                "interval": fmt_interval(g.lo, g.hi),
                "method": method,
                "bar": interval_bar(g.lo, g.hi, g.delta, g.margin, scale),
                "icon": INFORM_ICON if informs_only(g) else DECISION_ICON[g.decision],
                "reason": gate_phrase(g),
                "margin": g.margin,
                "needed": needed,
                "gating": g.gating,
            }
        )
        previous = metric
    return out


def _side_view(side: Side) -> dict[str, object]:
    return {
        "value": fmt_num(side.value),
        "counted": fmt_num(side.counted) if side.counted is not None else None,
        "status": side.status,
        "error": side.error,
        "answer": side.answer,  # the template shows the error instead when the row failed
        "retrieved": [{"id": r.id, "expected": r.expected} for r in side.retrieved[:RETRIEVED_SHOWN]],
        "more_retrieved": max(0, len(side.retrieved) - RETRIEVED_SHOWN),
    }


def _case_view(case: CaseMove, shown: set[str]) -> dict[str, object]:
    repeat = case.case_id in shown
    shown.add(case.case_id)
    return {
        "id": case.case_id,
        "d": fmt_signed(case.d),
        "repeat": repeat,
        "question": case.question,
        "expected": case.expected_answer,
        "sources": list(case.expected_sources[:RETRIEVED_SHOWN]),
        "baseline": _side_view(case.baseline),
        "candidate": _side_view(case.candidate),
    }


def _finding_cases(
    rows: list[_Row], paired: PairedCases | None, limit: int | None
) -> list[dict[str, object]]:
    if paired is None:
        return []
    out: list[dict[str, object]] = []
    shown: set[str] = set()
    for row in rows[:limit] if limit is not None else rows:
        g = row.lead
        n_drop, n_up = CASES_PER_FINDING.get(g.decision, (0, 0))
        moves = paired.moved(g, dropped=n_drop, improved=n_up)
        if not moves.dropped and not moves.improved:
            continue
        out.append(
            {
                "metric": " = ".join(row.metrics),
                "slices": row.slices,
                "icon": DECISION_ICON[g.decision],
                "dropped": [_case_view(c, shown) for c in moves.dropped],
                "improved": [_case_view(c, shown) for c in moves.improved],
            }
        )
    return out


def _skip_lines(gates: list[GateResult], min_pairs: int) -> list[dict[str, object]]:
    """Skipped gates, one line per reason: no pair at all, or fewer than ``min_pairs``."""
    none = [g for g in gates if g.n == 0]
    few = [g for g in gates if g.n > 0]
    lines: list[dict[str, object]] = []
    if few:
        lo, hi = min(g.n for g in few), max(g.n for g in few)
        span = f"{lo}" if lo == hi else f"{lo}–{hi}"
        lines.append(
            {"count": len(few), "reason": f"{span} pairs, fewer than min_pairs {min_pairs}", "gates": few}
        )
    if none:
        lines.append({"count": len(none), "reason": "no case scored in both runs", "gates": none})
    for line in lines:
        slices = list(dict.fromkeys(g.slice for g in line.pop("gates")))  # type: ignore[attr-defined]  # the GateResult list put in above
        line["slices"] = slices[:8]
        line["more_slices"] = max(0, len(slices) - 8)
    return lines


def _not_gating_lines(gates: list[GateResult]) -> list[dict[str, object]]:
    """Gates shown but not counted, one line per reason (the policy note), with their metrics."""
    by_note: dict[str, list[GateResult]] = {}
    for g in gates:
        by_note.setdefault(g.note or "slice dimension not in gate_slices", []).append(g)
    return [
        {
            "note": note,
            "count": len(group),
            "metrics": list(dict.fromkeys(g.metric for g in group)),
            "flagged": sum(1 for g in group if g.decision in ("block", "review")),
        }
        for note, group in by_note.items()
    ]


def slice_rows(comparison: Comparison, paired: PairedCases | None) -> list[dict[str, object]]:
    """Per gating slice, worst first: cases, how many got worse and better, its lowest gate."""
    if paired is None:
        return []
    out: list[dict[str, object]] = []
    for s in slice_moves(comparison, paired):
        g = s.worst
        out.append(
            {
                "key": s.key,
                "n": s.n,
                "worse": s.worse,
                "better": s.better,
                "metric": g.metric if g else None,
                "delta": fmt_signed(g.delta) if g else "–",
                "interval": fmt_interval(g.lo, g.hi) if g else "–",
                "icon": (INFORM_ICON if informs_only(g) else DECISION_ICON[g.decision]) if g else "",
                "phrase": gate_phrase(g) if g else "",
            }
        )
    return out


def _power_rows(comparison: Comparison) -> list[dict[str, object]]:
    """Per gated metric on ``all``: pairs, minimum detectable effect, pairs needed (when known)."""
    out: list[dict[str, object]] = []
    for g in comparison.gates:
        if not g.gating or g.slice != ALL_SLICE:
            continue
        out.append(
            {
                "metric": g.metric,
                "arrow": "" if g.higher_is_better else " ↓",
                "n": g.n,
                "mde": fmt_num(g.mde),
                "margin": f"{g.margin:g}",
                "enough": g.mde is not None and not g.mde_exceeds_margin,
                "needed": g.pairs_needed,
                "method": g.method,
            }
        )
    return out


def _pointer(context: ReportContext) -> str:
    if context.artifact_url:
        return f"[the run artifact]({context.artifact_url})"
    return "decision.json and the run artifact"


def _take(items: list[T], limit: int | None) -> tuple[list[T], int]:
    if limit is None or limit >= len(items):
        return items, 0
    return items[:limit], len(items) - limit


MAX_UNSCORED_NAMED = 10


def report_warnings(comparison: Comparison) -> list[str]:
    """The comparison's warnings, then one naming the gating metrics scored in neither run
    (``unscored``: not run, or undefined on every case), which decide nothing."""
    lines = list(comparison.warnings)
    names = comparison.unscored
    if names:
        shown = ", ".join(names[:MAX_UNSCORED_NAMED]) + (", …" if len(names) > MAX_UNSCORED_NAMED else "")
        many = len(names) != 1
        lines.append(
            f"not compared: {shown}: {'gating metrics' if many else 'a gating metric'} scored in neither run "
            f"(not run, or undefined on every case): {'they decide' if many else 'it decides'} nothing here"
        )
    return lines


def attention(comparison: Comparison, paired: PairedCases | None) -> tuple[list[_Row], list[_Row]]:
    """The gating block and review gates as table rows, in finding order: (first screen, rest).

    The first screen holds every blocking row up to :data:`BLOCK_ROWS`, then the reviews that
    decide, up to :data:`ATTENTION_ROWS` rows in all. Reviews of underpowered gates that only
    inform never do: they need no one's attention to pass, so they fold below with the rest
    (a pass shows no table). Both lists keep the finding order.
    """
    rows = _findings(
        _rows(group_identical([g for g in comparison.gating() if g.decision in ("block", "review")], paired))
    )
    first = [r for r in rows if r.lead.decision == "block"][:BLOCK_ROWS]
    deciding = [r for r in rows if r.lead.decision == "review" and not informs_only(r.lead)]
    first += deciding[: max(0, ATTENTION_ROWS - len(first))]
    chosen = {id(r) for r in first}
    return [r for r in rows if id(r) in chosen], [r for r in rows if id(r) not in chosen]


def worse_not_shown(comparison: Comparison, first: list[_Row]) -> list[GateRef]:
    """The verdict's gates worse on their own evidence that neither the first table nor the why
    line (which names the only one, when it is the verdict's cause) shows."""
    verdict = comparison.verdict
    if verdict.cause == VerdictCause.WORSE_UNCONFIRMED and len(verdict.worse) == 1:
        return []
    shown = {(g.metric, g.slice) for row in first for g in row.gates}
    return [ref for ref in comparison.verdict.worse if (ref.metric, ref.slice) not in shown]


def folded_counts(comparison: Comparison, rest: list[_Row]) -> tuple[int, int]:
    """Gates in the rows :func:`attention` folds away, and how many of them only inform."""
    gates = [g for r in rest for g in r.gates]
    return len(gates), sum(informs_only(g) for g in gates)


def _identities(comparison: Comparison, context: ReportContext) -> dict[str, str | None]:
    """Which runs were compared: the context's baseline facts where it gives them (overrides),
    else those the runs record."""
    base = comparison.baseline
    return {
        "baseline_commit": (context.baseline_commit or base.commit or "unknown")[:12],
        "baseline_run": context.baseline_run_id or base.run_id,
        "baseline_age": context.baseline_age or _age(base.created_at, context.now),
        "baseline_date": base.created_at[:10],
        "candidate_commit": (comparison.candidate.commit or "unknown")[:12],
    }


def _comment_renderer(
    comparison: Comparison, context: ReportContext, paired: PairedCases | None
) -> Callable[[_Limits], str]:
    """The comment as a function of the row limits; what no limit changes is computed once."""
    gates = comparison.gates
    settings = comparison.settings
    level_pct = pct(settings.interval_confidence)
    scale = axis_extent((g for g in gates if g.decision != "skipped" and g.gating), 1.1)
    shown_first, overflow = attention(comparison, paired)
    folded_gates, folded_underpowered = folded_counts(comparison, overflow)
    passing = _findings(
        _rows(group_identical([g for g in gates if g.gating and g.decision == "pass"], paired))
    )
    # A row's "first" flag depends only on the row before it: a prefix of the rows renders as
    # the prefix of the rendered rows.
    overflow_rows = _table_rows(overflow, scale, settings.interval)
    passing_rows = _table_rows(passing, scale, settings.interval)
    power = _power_rows(comparison)
    counts = tally(comparison)
    worse = worse_not_shown(comparison, shown_first)
    fixed = {
        "c": comparison,
        "ctx": context,
        "headline": headline(comparison.verdict),
        "why": why_line(comparison, level_pct),
        "worse": [worse_line(ref, level_pct) for ref in worse[:WORSE_SHOWN]],
        "more_worse": max(0, len(worse) - WORSE_SHOWN),
        "slices": slice_rows(comparison, paired),
        "slices_shown": SLICES_SHOWN,
        "warnings": report_warnings(comparison),
        "tally": counts,
        "total": len(gates),
        "level_pct": level_pct,
        "confidence_pct": pct(settings.confidence),
        **_identities(comparison, context),
        "attention": _table_rows(shown_first, scale, settings.interval),
        "folded_gates": folded_gates,
        "folded_underpowered": folded_underpowered,
        "passing_gates": counts["pass"],
        "skipped": _skip_lines(
            [g for g in gates if g.gating and g.decision == "skipped"], settings.min_pairs
        ),
        "not_gating": _not_gating_lines([g for g in gates if not g.gating]),
        "added": comparison.dataset.added[:10],
        "removed": comparison.dataset.removed[:10],
        "pointer": _pointer(context),
    }
    template = environment(False).get_template("comment.md.j2")

    def render(limits: _Limits) -> str:
        shown_overflow, more_attention = _take(overflow, limits.attention)
        shown_passing, more_passing = _take(passing, limits.passing)
        shown_power, more_power = _take(power, limits.mde)
        return template.render(
            **fixed,
            overflow=overflow_rows[: len(shown_overflow)],
            more_attention=more_attention,
            passing=passing_rows[: len(shown_passing)],
            more_passing=more_passing,
            cases=_finding_cases(shown_first + shown_overflow, paired, limits.drops),
            power=shown_power,
            more_power=more_power,
        )

    return render


def _fit(render: Callable[[_Limits], str], cap: int) -> str:
    """Render with ever smaller row limits until the body fits ``cap`` characters."""
    text = render(_Limits())
    if len(text) <= cap:
        return text
    attempts = []
    for rest in (200, 50, 10, 0):
        attempts.append(_Limits(passing=rest))
    for drops in (6, 3, 1):
        attempts.append(_Limits(passing=0, drops=drops))
    for attention in (400, 200, 100, 50, 20, 10, 0):
        attempts.append(_Limits(attention=attention, passing=0, drops=1, mde=10))
    for limits in attempts:
        text = render(limits)
        if len(text) <= cap:
            return text
    return render(_Limits(attention=0, passing=0, drops=0, mde=0))[:cap]


def render_markdown(
    comparison: Comparison,
    *,
    context: ReportContext | None = None,
    baseline: RunArtifact | None = None,
    candidate: RunArtifact | None = None,
    paired: PairedCases | None = None,
) -> str:
    """The comparison as Markdown (at most :data:`MAX_CHARS` characters).

    With both runs (``baseline`` and ``candidate``), each finding shows the cases that moved
    most (question, expected answer, both answers, both retrieved lists) and gates computed
    from the same cases and values are shown once; without them, neither. ``paired`` (their
    :class:`PairedCases`, built once when several reports are rendered) stands for both.
    """
    if paired is None:
        paired = paired_cases(comparison, baseline, candidate)
    return _fit(_comment_renderer(comparison, context or ReportContext(), paired), MAX_CHARS)


def check_title(comparison: Comparison) -> str:
    """The check run's title: the decision and its one-line why (plain text, at most 1,000
    characters; GitHub shows it beside the check's name)."""
    level = pct(comparison.settings.interval_confidence)
    text = f"{headline(comparison.verdict)}: {inert_text(why_line(comparison, level))}"
    return text if len(text) <= 1000 else text[:999] + "…"


def render_gate_table(
    comparison: Comparison,
    *,
    baseline: RunArtifact | None = None,
    candidate: RunArtifact | None = None,
    paired: PairedCases | None = None,
) -> str:
    """Every gate of the comparison in one Markdown table (the check run's ``text``): gating
    gates by severity, then those shown for information; at most :data:`MAX_CHARS` characters."""
    if paired is None:
        paired = paired_cases(comparison, baseline, candidate)
    level_pct = pct(comparison.settings.interval_confidence)
    scale = axis_extent((g for g in comparison.gates if g.decision != "skipped" and g.gating), 1.1)
    rows = _findings(_rows(group_identical(comparison.gating(), paired)))
    rows += _findings(_rows(group_identical([g for g in comparison.gates if not g.gating], paired)))
    table = _table_rows(rows, scale)
    template = environment(False).get_template("gate_table.md.j2")

    def render(limits: _Limits) -> str:
        shown, more = _take(table, limits.passing)
        return template.render(c=comparison, rows=shown, more=more, level_pct=level_pct)

    return _fit(render, MAX_CHARS)


NO_BASELINE_HEADING = "ℹ️ No baseline"
NO_BASELINE_INTRO = (
    "No baseline run was found to compare against, so no gate was decided. These are the "
    "candidate's scores; once a run on the default branch is stored, pull requests are gated against it."
)
BASELINE_HEADING = "📌 Baseline run"
BASELINE_INTRO = (
    "This run records the baseline: no gate is decided on it. Once it is stored as the baseline "
    "artifact, pull requests are gated against these scores."
)


def render_no_baseline(candidate: RunArtifact, *, context: ReportContext | None = None) -> str:
    """The report for a pull request with no baseline to compare against: its scores, no decision."""
    return render_run_summary(
        candidate, context=context, heading=NO_BASELINE_HEADING, intro=NO_BASELINE_INTRO
    )


def render_run_summary(
    run: RunArtifact,
    *,
    context: ReportContext | None = None,
    heading: str = BASELINE_HEADING,
    intro: str = BASELINE_INTRO,
) -> str:
    """One run's absolute scores (overall, then per slice folded in ``<details>``), no decision.

    By default worded as a baseline summary (a push to the default branch); ``heading`` and
    ``intro`` are plain text (escaped like every user string), e.g. naming the branch and the
    artifact the baseline is stored as. At most :data:`MAX_CHARS` characters.
    """
    ctx = context or ReportContext()
    summary = run.summary
    overall = summary.slices.get("all", {})

    def rows_for(metrics: dict[str, MetricSummary], limit: int | None) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for name, s in metrics.items():
            if s.distribution is not None:
                # Labels come from the run's data; the numbers need no escaping.
                value = ", ".join(
                    f"{md_escape(k, max_len=60)} {v}" for k, v in sorted(s.distribution.items())
                )
            else:
                value = fmt_num(s.mean)
            out.append(
                {
                    "metric": name,
                    "arrow": "" if s.higher_is_better else " ↓",
                    "mean": value,
                    "p50": fmt_num(s.p50),
                    "p95": fmt_num(s.p95),
                    "scored": s.scored,
                    "skipped": s.skipped + s.not_applicable,
                    "errored": s.errored,
                }
            )
        return out[:limit] if limit is not None else out

    def render(limits: _Limits) -> str:
        slices = [(key, rows_for(m, None)) for key, m in sorted(summary.slices.items()) if key != "all"]
        shown, more = _take(slices, limits.passing)
        return (
            environment(False)
            .get_template("run_summary.md.j2")
            .render(
                run=run.meta,
                ctx=ctx,
                heading=heading,
                intro=intro,
                summary=summary,
                overall=rows_for(overall, limits.attention),
                slices=shown,
                more_slices=more,
                pointer=_pointer(ctx),
            )
        )

    return _fit(render, MAX_CHARS)


def render_notes(notes: list[str]) -> str:
    """Plain-text notes as a quoted block to append below a report ('' when there are none).

    Each note is escaped like every user string (it may quote API answers or file names).
    """
    return environment(False).get_template("notes.md.j2").render(notes=notes)


def render_not_comparable(
    reason: str, *, context: ReportContext | None = None, heading: str = "runs not comparable"
) -> str:
    """The report when no gate could be decided: ``heading`` (plain text of ours) and the reason.

    Also the report for a candidate artifact that was refused (``heading`` says so).
    """
    ctx = context or ReportContext()
    return (
        environment(False)
        .get_template("not_comparable.md.j2")
        .render(ctx=ctx, reason=reason, heading=heading)
    )
