"""Self-contained HTML reports: no remote assets, SVG drawn on the server, a strict CSP.

:func:`render_compare_html` (``ragproof compare --html``) opens like the comment (decision, why,
counts, the gates that need attention, in finding order), then one panel per metric (its
slices as rows on the metric's own axis, panels needing attention first; skipped and
non-gating gates folded away and labelled for what they are), a case explorer (every paired
case: question, expected answer, both answers side by side, retrieved ids with the expected
ones marked, every metric in both runs; filterable by slice and by change with a small inline
script), per-metric score distributions and the counts. :func:`render_run_html`
(``ragproof report --html``) shows one run's summary and its distributions.

Text is escaped by jinja2's HTML autoescaping. Each page carries a Content-Security-Policy
(``default-src 'none'``; the one stylesheet and the one script allowed by their sha256), so
it can load nothing and run nothing else, whatever a case's text holds.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from functools import cache
from importlib.resources import files

from gate.decision.comparison import Comparison, GateResult
from gate.decision.decide import VerdictCause
from gate.model.artifact import RunArtifact, error_groups
from gate.report.cases import ExplorerCase, MetricValues, PairedCases, explorer_cases
from gate.report.markdown import (
    SEVERITY,
    SEVERITY_RANK,
    attention,
    folded_counts,
    report_warnings,
    slice_rows,
    worse_not_shown,
)
from gate.report.templating import axis_extent, environment, fmt_interval, fmt_num, fmt_signed
from gate.report.wording import (
    DECISION_ICON,
    INFORM_ICON,
    gate_counts,
    gate_phrase,
    headline,
    pct,
    tally,
    why_line,
    worse_line,
)

PLOT_WIDTH = 420  # px of the Δ axis
ROW_HEIGHT = 18
BINS = 10
HIST_WIDTH = 240
HIST_HEIGHT = 60

COLOURS = {"pass": "#2e7d32", "review": "#b26a00", "block": "#c62828", "skipped": "#777777"}
PANEL_PLOT = 360  # px of a metric panel's axis
LABEL_CHAR = 6.6  # px per character of an 11 px label (for the label column's width)
MAX_CASES = 2000  # cases in the explorer (most dropped first); the rest are in rows.jsonl


@cache
def _asset(name: str) -> str:
    return (files("gate.report") / "templates" / name).read_text(encoding="utf-8")


def _sha(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def page_policy(script: str | None) -> str:
    """The Content-Security-Policy of a report page: nothing loads; our style (and script) only."""
    parts = ["default-src 'none'", f"style-src '{_sha(_asset('report.css'))}'"]
    parts.append(f"script-src '{_sha(script)}'" if script else "script-src 'none'")
    parts += ["base-uri 'none'", "form-action 'none'"]
    return "; ".join(parts)


def _histogram(values: list[float], lo: float, hi: float) -> list[int]:
    counts = [0] * BINS
    width = (hi - lo) or 1.0
    for v in values:
        counts[min(BINS - 1, max(0, int((v - lo) / width * BINS)))] += 1
    return counts


def _scored_values(art: RunArtifact, name: str) -> list[float]:
    """The run's scored values of metric ``name``, in row order."""
    return [
        value
        for r in art.rows
        if name in r.metrics
        and r.metrics[name].status == "scored"
        and (value := r.metrics[name].value) is not None
    ]


def distributions(runs: dict[str, RunArtifact], metrics: Iterable[str]) -> list[dict[str, object]]:
    """Per-metric histograms of scored values for each run, on a shared range and height."""
    out = []
    for name in metrics:
        values = {role: _scored_values(art, name) for role, art in runs.items()}
        every = [v for vs in values.values() for v in vs]
        if not every:
            continue
        lo, hi = min(0.0, min(every)), max(1.0, max(every))
        hists = {role: _histogram(vs, lo, hi) for role, vs in values.items()}
        top = max(max(h) for h in hists.values()) or 1
        bar_w = HIST_WIDTH / BINS
        series = []
        for role, counts in hists.items():
            bars = [
                {
                    "x": round(i * bar_w, 2),
                    "h": round(c / top * HIST_HEIGHT, 2),
                    "y": round(HIST_HEIGHT - c / top * HIST_HEIGHT, 2),
                    "count": c,
                    "range": f"{lo + (hi - lo) * i / BINS:.2f}–{lo + (hi - lo) * (i + 1) / BINS:.2f}",
                }
                for i, c in enumerate(counts)
            ]
            mean = sum(values[role]) / len(values[role]) if values[role] else None
            series.append({"role": role, "bars": bars, "n": len(values[role]), "mean": fmt_num(mean)})
        out.append(
            {
                "metric": name,
                "series": series,
                "bar_w": round(bar_w - 1, 2),
                "lo": f"{lo:g}",
                "hi": f"{hi:g}",
                "width": HIST_WIDTH,
                "height": HIST_HEIGHT,
            }
        )
    return out


def _metric_order(arts: Iterable[RunArtifact]) -> list[str]:
    seen: dict[str, None] = {}
    for art in arts:
        for r in art.rows:
            for name, result in r.metrics.items():
                if result.label is None:
                    seen.setdefault(name, None)
    return list(seen)


def _panel_rows(gates: list[GateResult]) -> dict[str, object]:
    """One metric's decided gating gates on the metric's own axis (attention first, ``all`` first
    within a decision); the label column is as wide as the longest label."""
    shown = sorted(
        (g for g in gates if g.gating and g.decision != "skipped" and g.lo is not None and g.hi is not None),
        key=lambda g: (
            SEVERITY_RANK[g.decision],
            g.slice != "all",
            g.delta if g.delta is not None else 0.0,
            g.slice,
        ),
    )
    scale = axis_extent(shown, 1.15)

    def x(value: float) -> float:
        return round((value + scale) / (2 * scale) * PANEL_PLOT, 2)

    label_w = round(min(360, max([len(g.slice) for g in shown] + [8]) * LABEL_CHAR + 12))
    rows = [
        {
            "y": i * ROW_HEIGHT + ROW_HEIGHT / 2,
            "label": g.slice,
            "n": g.n,
            "x_lo": x(g.lo or 0.0),
            "x_hi": x(g.hi or 0.0),
            "x_delta": x(g.delta if g.delta is not None else 0.0),
            "x_margin": x(-g.margin),
            "colour": COLOURS[g.decision],
            "decision": g.decision,
            "text": f"{fmt_signed(g.delta)} {fmt_interval(g.lo, g.hi)} · {gate_phrase(g)}",
        }
        for i, g in enumerate(shown)
    ]
    ticks = [{"x": x(t), "label": fmt_signed(t, 2)} for t in (-scale / 1.15, 0.0, scale / 1.15)]
    return {
        "rows": rows,
        "label_w": label_w,
        "width": PANEL_PLOT,
        "height": max(1, len(rows)) * ROW_HEIGHT,
        "x_zero": x(0.0),
        "ticks": ticks,
    }


def _panel(name: str, gates: list[GateResult]) -> dict[str, object]:
    """One metric's panel: its worst decided gating gate sets the mark, ``key`` its place."""
    gating = [g for g in gates if g.gating and g.decision != "skipped"]
    worst, lowest = _panel_rank(gating)
    return {
        "metric": name,
        "arrow": "" if gates[0].higher_is_better else " ↓",
        "worst": SEVERITY[worst],
        "icon": _panel_icon(SEVERITY[worst], gating),
        "counts": gate_counts(gates),
        "plot": _panel_rows(gates) if gating else None,
        "skipped": [g for g in gates if g.gating and g.decision == "skipped"],
        "not_gating": [g for g in gates if not g.gating],
        "note": next((g.note for g in gates if not g.gating and g.note), None),
        "key": (worst, lowest, name),
    }


def _panel_rank(gating: list[GateResult]) -> tuple[int, float]:
    """The worst decision's severity rank among the decided gating gates (``skipped`` when
    none) and their lowest Δ (0 when none has one)."""
    worst = min((SEVERITY_RANK[g.decision] for g in gating), default=SEVERITY_RANK["skipped"])
    lowest = min((g.delta for g in gating if g.delta is not None), default=0.0)
    return worst, lowest


def _panel_icon(worst: str, gating: list[GateResult]) -> str:
    """The worst decision's icon; a panel whose only reviews inform is marked as informing, not
    as a review."""
    if worst == "review" and not any(g.decision == "review" and g.counts for g in gating):
        return INFORM_ICON
    return DECISION_ICON[worst]


def metric_panels(comparison: Comparison) -> list[dict[str, object]]:
    """One panel per metric, those with a blocking gate first, then review, then the rest (by
    their lowest Δ); skipped and non-gating gates listed apart, labelled for what they are."""
    by_metric: dict[str, list[GateResult]] = {}
    for g in comparison.gates:
        by_metric.setdefault(g.metric, []).append(g)
    panels = [_panel(name, gates) for name, gates in by_metric.items()]
    panels.sort(key=lambda p: p["key"])  # type: ignore[arg-type,return-value]  # "key" holds the sortable tuple
    return panels


def _explorer_metric(m: MetricValues) -> dict[str, object]:
    """One metric of an explorer case: both values, Δ and its colour class."""
    return {
        "name": m.name,
        "arrow": "" if m.higher_is_better else " ↓",
        "b": fmt_num(m.baseline),
        "c": fmt_num(m.candidate),
        "d": fmt_signed(m.d) if m.d is not None else "",
        "cls": "" if m.d is None or m.d == 0 else "change-worse" if m.d < 0 else "change-better",
        # changed, or scored in one run only: shown; the rest fold away
        "moved": m.baseline != m.candidate,
    }


def _explorer(comparison: Comparison, paired: PairedCases) -> dict[str, object]:
    cases: list[ExplorerCase] = explorer_cases(comparison, paired)
    slice_ids = {key: f"s{i}" for i, key in enumerate(paired.members)}
    shown = cases[:MAX_CASES]
    return {
        "slices": [{"id": sid, "key": key, "n": len(paired.members[key])} for key, sid in slice_ids.items()],
        "cases": [
            {
                "c": c,
                "slice_ids": " ".join(slice_ids[k] for k in c.slices),
                "metrics": [
                    _explorer_metric(m)
                    for m in c.metrics
                    if m.baseline is not None or m.candidate is not None
                ],
            }
            for c in shown
        ],
        "total": len(cases),
        "more": len(cases) - len(shown),
        "changes": {k: sum(1 for c in cases if c.change == k) for k in ("worse", "better", "same")},
    }


def _headline_class(comparison: Comparison) -> str:
    """The headline's colour: green only for a verified pass (or an acceptance), amber for a
    pass with gates worse on their own evidence, grey when no regression was detected but
    nothing was verified."""
    verdict = comparison.verdict
    if verdict.decision != "pass":
        return verdict.decision
    return {
        VerdictCause.WORSE_UNCONFIRMED: "review",
        VerdictCause.NO_REGRESSION_DETECTED: "skipped",
    }.get(verdict.cause, "pass")


def render_compare_html(
    comparison: Comparison,
    baseline: RunArtifact,
    candidate: RunArtifact,
    *,
    paired: PairedCases | None = None,
) -> str:
    """The comparison as one self-contained HTML page (``paired``: the runs' PairedCases, if built)."""
    paired = paired or PairedCases(comparison, baseline, candidate)
    first, rest = attention(comparison, paired)
    folded_gates, folded_underpowered = folded_counts(comparison, rest)
    script = _asset("explorer.js")
    level = pct(comparison.settings.interval_confidence)
    return (
        environment(True)
        .get_template("compare.html.j2")
        .render(
            c=comparison,
            why=why_line(comparison, level),
            worse=[worse_line(ref, level) for ref in worse_not_shown(comparison, first)],
            warnings=report_warnings(comparison),
            tally=tally(comparison),
            attention=first,
            more_attention=folded_gates,
            more_underpowered=folded_underpowered,
            headline=headline(comparison.verdict),
            decision=_headline_class(comparison),
            slices=slice_rows(comparison, paired),
            icons=DECISION_ICON,
            gate_phrase=gate_phrase,
            panels=metric_panels(comparison),
            explorer=_explorer(comparison, paired),
            dists=distributions(
                {"baseline": baseline, "candidate": candidate}, _metric_order([baseline, candidate])
            ),
            fmt_num=fmt_num,
            fmt_signed=fmt_signed,
            fmt_interval=fmt_interval,
            colours=COLOURS,
            css=_asset("report.css"),
            script=script,
            csp=page_policy(script),
            level_pct=level,
        )
    )


def render_run_html(artifact: RunArtifact) -> str:
    """One run's scores (summary per slice) and score distributions as a self-contained page."""
    return (
        environment(True)
        .get_template("run.html.j2")
        .render(
            run=artifact.meta,
            summary=artifact.summary,
            errors=error_groups(artifact.rows),
            dists=distributions({"run": artifact}, _metric_order([artifact])),
            fmt_num=fmt_num,
            css=_asset("report.css"),
            csp=page_policy(None),
        )
    )
