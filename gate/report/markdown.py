"""The Markdown report: the pull-request comment, the check-run summary and the job summary.

Layout: the headline decision; baseline identity (commit, run, age) and dataset version; the
gates that need attention (block, then review); every other gate folded in ``<details>``; the
cases that dropped most; warnings where the set is too small for the margin (MDE); error,
skip and cost counts. Every user-supplied string goes through
:func:`gate.report.escape.md_escape` in the templates (``| md``).

The body never exceeds :data:`MAX_CHARS` (GitHub refuses comments over 65,536 characters):
when the full report is longer, tables are cut row-wise, least important first (passing
gates, then dropped cases, then MDE notes, then the attention table), each cut ending in a
line that says how many rows are left out and where the full results are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import field_validator

from gate.core.strict import StrictModel
from gate.decision.comparison import Comparison, GateResult
from gate.model.artifact import RunArtifact
from gate.report.escape import md_escape
from gate.report.templating import axis_extent, environment, fmt_interval, fmt_num, fmt_signed

MAX_CHARS = 60_000
BAR_WIDTH = 21

DECISION_LABEL = {"block": "❌ block", "review": "⚠️ review", "pass": "✅ pass", "skipped": "⏭️ skipped"}
HEADLINE = {"block": "❌ Blocked", "review": "⚠️ Needs review", "pass": "✅ Passed"}

_MARKER = re.compile(r"<!--(?:(?!--)[^<>\r\n]){1,200}-->")
_URL = re.compile(r"https?://[^\s<>()\[\]\"'`|]+")


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

    @field_validator("marker")
    @classmethod
    def _marker_is_comment(cls, v: str | None) -> str | None:
        if v is not None and not _MARKER.fullmatch(v):
            raise ValueError(
                "marker must be an HTML comment like <!-- ragproof:gate --> (letters, digits, :./=-)"
            )
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
    drops: int | None = None
    mde: int | None = None


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


def _gate_row(g: GateResult, scale: float) -> dict[str, object]:
    reason = g.reason if g.gating or not g.note else f"{g.reason} (not gating: {g.note})"
    if not g.gating and not g.note:
        reason = f"{g.reason} (slice dimension not in gate_slices)"
    return {
        "label": DECISION_LABEL[g.decision] if g.gating else f"({g.decision})",
        "metric": g.metric,
        "arrow": "" if g.higher_is_better else " ↓",
        "slice": g.slice,
        "n": g.n,
        "baseline": fmt_num(g.baseline_mean),
        "candidate": fmt_num(g.candidate_mean),
        "delta": fmt_signed(g.delta),
        "interval": fmt_interval(g.lo, g.hi),
        "margin": fmt_num(g.margin),
        "bar": interval_bar(g.lo, g.hi, g.delta, g.margin, scale),
        "reason": reason,
    }


def _pointer(context: ReportContext) -> str:
    if context.artifact_url:
        return f"[the run artifact]({context.artifact_url})"
    return "decision.json and the run artifact"


def _take(items: list, limit: int | None) -> tuple[list, int]:
    if limit is None or limit >= len(items):
        return items, 0
    return items[:limit], len(items) - limit


def _render_comparison(comparison: Comparison, context: ReportContext, limits: _Limits) -> str:
    gates = comparison.gates
    scale = axis_extent((g for g in gates if g.decision != "skipped"), 1.1)
    attention = [g for g in gates if g.gating and g.decision == "block"]
    attention += [g for g in gates if g.gating and g.decision == "review"]
    rest = [g for g in gates if g.gating and g.decision == "pass"]
    rest += [g for g in gates if g.gating and g.decision == "skipped"]
    rest += [g for g in gates if not g.gating]
    mde = [g for g in gates if g.gating and g.mde_exceeds_margin]
    shown_attention, more_attention = _take(attention, limits.attention)
    shown_rest, more_rest = _take(rest, limits.passing)
    shown_drops, more_drops = _take(comparison.top_drops, limits.drops)
    shown_mde, more_mde = _take(mde, limits.mde)
    base = comparison.baseline
    gating = comparison.gating()
    tally = {d: sum(1 for g in gating if g.decision == d) for d in ("block", "review", "pass", "skipped")}
    settings = comparison.settings
    return (
        environment(False)
        .get_template("comment.md.j2")
        .render(
            c=comparison,
            ctx=context,
            headline=HEADLINE[comparison.overall],
            tally=tally,
            not_gating=sum(1 for g in gates if not g.gating),
            level_pct=_pct(settings.interval_confidence),
            confidence_pct=_pct(settings.confidence),
            baseline_commit=(context.baseline_commit or base.commit or "unknown")[:12],
            baseline_run=context.baseline_run_id or base.run_id,
            baseline_age=context.baseline_age or _age(base.created_at, context.now),
            baseline_date=base.created_at[:10],
            candidate_commit=(comparison.candidate.commit or "unknown")[:12],
            attention=[_gate_row(g, scale) for g in shown_attention],
            more_attention=more_attention,
            rest=[_gate_row(g, scale) for g in shown_rest],
            more_rest=more_rest,
            rest_total=len(rest),
            drops=[
                {
                    "case_id": d.case_id,
                    "drops": ", ".join(f"{m} {fmt_signed(-v)}" for m, v in list(d.drops.items())[:6]),
                }
                for d in shown_drops
            ],
            more_drops=more_drops,
            mde=[
                {
                    "metric": g.metric,
                    "slice": g.slice,
                    "n": g.n,
                    "margin": f"{g.margin:g}",
                    "mde": fmt_num(g.mde),
                }
                for g in shown_mde
            ],
            more_mde=more_mde,
            added=comparison.dataset.added[:10],
            removed=comparison.dataset.removed[:10],
            pointer=_pointer(context),
        )
    )


def _pct(level: float) -> str:
    text = f"{level * 100:.4f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _fit(render, cap: int) -> str:
    """Render with ever smaller row limits until the body fits ``cap`` characters."""
    text = render(_Limits())
    if len(text) <= cap:
        return text
    attempts = []
    for rest in (200, 50, 10, 0):
        attempts.append(_Limits(passing=rest))
    for attention in (400, 200, 100, 50, 20, 10, 0):
        attempts.append(_Limits(attention=attention, passing=0, drops=5, mde=10))
    for limits in attempts:
        text = render(limits)
        if len(text) <= cap:
            return text
    return render(_Limits(attention=0, passing=0, drops=0, mde=0))[:cap]


def render_markdown(comparison: Comparison, *, context: ReportContext | None = None) -> str:
    """The comparison as Markdown (at most :data:`MAX_CHARS` characters)."""
    ctx = context or ReportContext()
    return _fit(lambda limits: _render_comparison(comparison, ctx, limits), MAX_CHARS)


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

    def rows_for(metrics: dict, limit: int | None) -> list[dict[str, object]]:
        out = []
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


def render_not_comparable(reason: str, *, context: ReportContext | None = None) -> str:
    """The report when the baseline and the candidate cannot be compared: the reason, no gates."""
    ctx = context or ReportContext()
    return environment(False).get_template("not_comparable.md.j2").render(ctx=ctx, reason=reason)
