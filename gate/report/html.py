"""Self-contained HTML reports: no scripts, no remote assets, SVG drawn on the server.

:func:`render_compare_html` (``ragproof compare --html``) draws a forest plot of every gate's
Δ with its interval, the gate's margin and zero, then per-metric score distributions of both
runs. :func:`render_run_html` (``ragproof report --html``) shows one run's summary and its
distributions. Text is escaped by jinja2's HTML autoescaping.
"""

from __future__ import annotations

from collections.abc import Iterable

from gate.decision.comparison import Comparison, GateResult
from gate.model.artifact import RunArtifact
from gate.report.templating import axis_extent, environment, fmt_interval, fmt_num, fmt_signed

PLOT_WIDTH = 420  # px of the Δ axis
ROW_HEIGHT = 18
BINS = 10
HIST_WIDTH = 240
HIST_HEIGHT = 60

COLOURS = {"pass": "#2e7d32", "review": "#b26a00", "block": "#c62828", "skipped": "#777777"}


def forest_plot(gates: list[GateResult]) -> dict[str, object]:
    """Geometry of the forest plot: one row per gate with an interval."""
    shown = [g for g in gates if g.lo is not None and g.hi is not None and g.delta is not None]
    scale = axis_extent(shown, 1.15)

    def x(value: float) -> float:
        return round((value + scale) / (2 * scale) * PLOT_WIDTH, 2)

    rows = []
    for i, g in enumerate(shown):
        rows.append(
            {
                "y": i * ROW_HEIGHT + ROW_HEIGHT / 2,
                "label": f"{g.metric} · {g.slice}",
                "x_lo": x(g.lo),
                "x_hi": x(g.hi),
                "x_delta": x(g.delta),
                "x_margin": x(-g.margin),
                "colour": COLOURS[g.decision] if g.gating else "#999999",
                "decision": g.decision if g.gating else f"{g.decision} (not gating)",
                "text": f"{fmt_signed(g.delta)} {fmt_interval(g.lo, g.hi)}",
            }
        )
    ticks = [
        {"x": x(t), "label": fmt_signed(t, 2)}
        for t in (-scale / 1.15, -scale / 2.3, 0.0, scale / 2.3, scale / 1.15)
    ]
    return {
        "rows": rows,
        "width": PLOT_WIDTH,
        "height": max(1, len(rows)) * ROW_HEIGHT,
        "x_zero": x(0.0),
        "ticks": ticks,
    }


def _histogram(values: list[float], lo: float, hi: float) -> list[int]:
    counts = [0] * BINS
    width = (hi - lo) or 1.0
    for v in values:
        counts[min(BINS - 1, max(0, int((v - lo) / width * BINS)))] += 1
    return counts


def distributions(runs: dict[str, RunArtifact], metrics: Iterable[str]) -> list[dict[str, object]]:
    """Per-metric histograms of scored values for each run, on a shared range and height."""
    out = []
    for name in metrics:
        values = {
            role: [
                r.metrics[name].value
                for r in art.rows
                if name in r.metrics
                and r.metrics[name].status == "scored"
                and r.metrics[name].value is not None
            ]
            for role, art in runs.items()
        }
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


def render_compare_html(comparison: Comparison, baseline: RunArtifact, candidate: RunArtifact) -> str:
    """The comparison as one self-contained HTML page."""
    return (
        environment(True)
        .get_template("compare.html.j2")
        .render(
            c=comparison,
            plot=forest_plot(comparison.gates),
            dists=distributions(
                {"baseline": baseline, "candidate": candidate}, _metric_order([baseline, candidate])
            ),
            fmt_num=fmt_num,
            fmt_signed=fmt_signed,
            fmt_interval=fmt_interval,
            colours=COLOURS,
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
            dists=distributions({"run": artifact}, _metric_order([artifact])),
            fmt_num=fmt_num,
        )
    )
