"""The terminal summary of ``ragproof compare`` and ``ragproof demo``: the comment's order, in text.

The decision and its one-line why; the gate counts (they add up to the ``--json`` gates); the
rows of the comment's attention table (same grouping: a metric's slices together, gates
computed from the same numbers once); how many more rows the reports hold; the warnings.
"""

from __future__ import annotations

from gate.decision.comparison import Comparison
from gate.model.artifact import RunArtifact
from gate.report.cases import PairedCases, paired_cases
from gate.report.escape import inert_text
from gate.report.markdown import attention, folded_counts, report_warnings, worse_not_shown
from gate.report.templating import fmt_interval, fmt_num, fmt_signed
from gate.report.wording import gate_phrase, pct, tally, why_line, worse_line


def render_terminal(
    comparison: Comparison,
    *,
    baseline: RunArtifact | None = None,
    candidate: RunArtifact | None = None,
    paired: PairedCases | None = None,
) -> str:
    """A few lines of plain text (user strings made inert like the comment's)."""
    if paired is None:
        paired = paired_cases(comparison, baseline, candidate)
    counts = tally(comparison)
    level = pct(comparison.settings.interval_confidence)
    lines = [
        f"ragproof compare: {comparison.verdict.decision}: {inert_text(why_line(comparison, level))}",
        f"  {len(comparison.gates)} gate{'s' if len(comparison.gates) != 1 else ''}: {counts['block']} block, {counts['review']} review, "
        + (f"{counts['inform']} inform only, " if counts["inform"] else "")
        + f"{counts['pass']} pass, {counts['skipped']} skipped, {counts['not_gating']} not gating",
    ]
    first, rest = attention(comparison, paired)
    worse = worse_not_shown(comparison, first)
    lines += [f"  worse on its own evidence: {inert_text(worse_line(ref, level))}" for ref in worse]
    for row in first:
        g = row.lead
        lines.append(
            f"  {g.decision:6} {inert_text(' = '.join(row.metrics))} [{inert_text(' = '.join(row.slices))}] "
            f"{fmt_num(g.baseline_mean)} → {fmt_num(g.candidate_mean)}, Δ {fmt_signed(g.delta)} "
            f"{fmt_interval(g.lo, g.hi)}, {g.n} pairs: {gate_phrase(g)}"
        )
    if rest:
        more, inform = folded_counts(comparison, rest)
        review = more - inform
        parts = [f"{review} more to review"] if review else []
        parts += [f"{inform} that inform{'s' if inform == 1 else ''} only"] if inform else []
        lines.append(f"  … {' and '.join(parts)} in the Markdown and JSON reports")
    lines += [f"  warning: {inert_text(w)}" for w in report_warnings(comparison)]
    return "\n".join(lines)
