"""``ragproof report``: a run's scores as a terminal table per slice and metric, JSON, or HTML."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from gate.commands._common import count, error_lines, printable, resolve
from gate.core.environment import Environment
from gate.core.errors import UsageError

if TYPE_CHECKING:
    from gate.model.artifact import RunArtifact

HELP = "show a run's scores: a table per slice and metric (--json, --html FILE)"

COLUMNS = ("metric", "mean", "p50", "p95", "scored", "skipped", "n/a", "errored")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_path", metavar="RUN", nargs="?", help="run artifact directory or .zip")
    parser.add_argument(
        "--list-metrics", action="store_true", help="list the metric names run.metrics accepts"
    )
    parser.add_argument(
        "--json", action="store_true", help="print run.json and summary.json as one JSON object"
    )
    parser.add_argument("--html", metavar="FILE", help="write an HTML report with plots to FILE")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def format_table(header: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
    """Left-aligned first column, right-aligned numbers, two spaces between columns."""
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in body)]


def render_text(artifact: RunArtifact) -> str:
    """The terminal report of a loaded run artifact."""
    from gate.model.artifact import error_groups

    meta, summary = artifact.meta, artifact.summary
    shard = f", shard {meta.shard.index}/{meta.shard.count}" if meta.shard else ""
    out = [
        f"run {printable(meta.run_id)} ({meta.status}{shard}), created {printable(meta.created_at)}",
        f"dataset {printable(meta.dataset.path)} sha256 {meta.dataset.sha256[:12]}: {count(summary.cases, 'case')}, "
        f"{summary.failures} failed"
        + (
            f" (adapter failure rate {summary.adapter_failure_rate:.4f})"
            if summary.adapter_failure_rate is not None
            else ""
        ),
        f"k={meta.k}, source_match={meta.source_match}, judge {printable(meta.judge.model or 'none')}"
        + (f", cost ${meta.cost.usd:.4f} ({meta.cost.judge_calls} calls)" if meta.judge.model else ""),
    ]
    out += [f"warning: {printable(w)}" for w in meta.warnings]
    errors = error_groups(artifact.rows)
    if errors:
        out += [
            "",
            "errors (cases × status: message):",
            *(f"  {line}" for line in error_lines(errors, limit=10)),
        ]
    for slice_key, metrics in summary.slices.items():
        body: list[tuple[str, ...]] = []
        distributions: list[str] = []
        for name, m in metrics.items():
            counts = (str(m.scored), str(m.skipped), str(m.not_applicable), str(m.errored))
            body.append((printable(name), _number(m.mean), _number(m.p50), _number(m.p95), *counts))
            if m.distribution is not None:  # categorical: counts per label, never a mean
                labels = ", ".join(f"{printable(k)}={n}" for k, n in sorted(m.distribution.items()))
                distributions.append(f"  {printable(name)}: {labels or 'none'}")
        out += ["", f"[{printable(slice_key)}]", *format_table(COLUMNS, body), *distributions]
    return "\n".join(out) + "\n"


def list_metrics() -> str:
    """One line per registered metric: name, kind, direction, description."""
    from gate.metrics import registry

    specs = registry().values()
    width = max(len(spec.name) for spec in specs)
    lines = []
    for spec in specs:
        direction = "categorical" if spec.categorical else ("higher" if spec.higher_is_better else "lower")
        lines.append(
            f"{spec.name.ljust(width)}  {spec.kind:<13}  {direction:<11}  {spec.description}".rstrip()
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.model.artifact import error_groups
    from gate.run.artifact_io import read_artifact

    if args.list_metrics:
        print(list_metrics(), end="")
        return 0
    if args.run_path is None:
        raise UsageError("report: give a RUN (artifact directory or .zip), or --list-metrics")
    artifact = read_artifact(resolve(env, args.run_path))
    if args.html:
        from gate.report.html import render_run_html

        target = resolve(env, args.html)
        try:
            target.write_text(render_run_html(artifact), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--html {args.html}: cannot write: {exc.strerror or exc}") from None
        print(f"wrote {target}")
        return 0
    if args.json:
        document = {
            "run": artifact.meta.model_dump(mode="json"),
            "summary": artifact.summary.model_dump(mode="json"),
            # failed rows grouped by "status: message", most frequent first
            "errors": [{"message": m, "count": n} for m, n in error_groups(artifact.rows)],
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
        return 0
    print(render_text(artifact), end="")
    return 0
