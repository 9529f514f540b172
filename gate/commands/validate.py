"""``ragproof validate``: check the config, the dataset and the adapter before a real run.

Without ``--smoke`` no pipeline method is called: the config and dataset are validated (metric
names against the registry), the adapter is checked statically (a URL's shape, a program on
PATH, a replay file against the dataset) and a ``python`` target is imported -- its module and
constructor run -- to check that ``retrieve(question, k)`` / ``answer(question)`` exist and can
be called with those arguments. A ``langchain`` / ``llamaindex`` / ``haystack`` target is
imported the same way and its pipeline built: an object of the wrong kind, or a Haystack graph
whose inputs or outputs are ambiguous, is refused here. Then, per gating metric, the drop the
dataset can detect on ``all`` and its smallest gating slice, and the cases the margin needs
(:mod:`gate.decision.sizing`).

``--smoke N`` then runs the first N cases end to end, as ``run`` would (adapter, metrics, judge
and its cache), into a temporary directory that is removed afterwards: a short table per case,
every error, the metrics skipped on every case and the run's end-of-run warnings (e.g. fewer
than ``run.k`` chunks). Exit 0 when every smoke case succeeded, 1 when any failed (however
many: the run's exit 4 for ``run.max_failure_rate`` is not validate's), 2 when the judge
budget stopped it; 64/65 as for ``run``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from gate.commands._common import add_config_argument, count, load_config_from_args, positive_int
from gate.core.environment import Environment
from gate.core.errors import EXIT_FAILED, EXIT_OK, UsageError

if TYPE_CHECKING:
    from gate.model.artifact import Row
    from gate.model.config import Config
    from gate.model.dataset import Dataset

HELP = "check ragproof.yaml, the dataset and the adapter (--smoke N: run N cases end to end)"
ANSWER_CHARS = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument(
        "--smoke",
        metavar="N",
        type=positive_int,
        help="also run the first N cases end to end (nothing is kept) and show what came back",
    )


def _warn(message: str) -> None:
    print(f"ragproof: warning: {message}", file=sys.stderr)


def _check_python_target(config: Config, env: Environment) -> str:
    """Import the target and check its methods; UsageError for a pipeline no call could succeed on."""
    from gate.adapters.python import check_pipeline_methods, load_pipeline

    target = config.adapter.target
    assert target is not None
    pipeline = load_pipeline(target, [config.base_dir, env.cwd])
    problems, notes = check_pipeline_methods(pipeline)
    if problems:
        raise UsageError(f"adapter.target: {target!r} ({type(pipeline).__name__}): {'; '.join(problems)}")
    for note in notes:
        _warn(f"adapter.target: {target!r} ({type(pipeline).__name__}) has {note}")
    return _exposed(pipeline)


def _exposed(pipeline: object) -> str:
    exposed = [name for name in ("retrieve", "answer") if callable(getattr(pipeline, name, None))]
    return f" ({' and '.join(exposed)})"


def _check_framework_target(config: Config, env: Environment) -> str:
    """Import a framework adapter's target and build its pipeline: a wrong object, or a Haystack
    graph whose inputs and outputs are ambiguous, is a UsageError here rather than in every case."""
    from gate.adapters.frameworks import framework_pipeline
    from gate.adapters.python import load_framework_object

    adapter = config.adapter
    assert adapter.target is not None
    target = load_framework_object(adapter.target, [config.base_dir, env.cwd])
    return _exposed(framework_pipeline(adapter.type, target, adapter, config.run.k))


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.adapters import FRAMEWORK_PACKAGES, check_adapter
    from gate.model.dataset import load_dataset
    from gate.run.scoring import select_metrics

    config = load_config_from_args(args, env)
    dataset = load_dataset(config.resolve(config.dataset), config.dataset_version)
    metric_names = select_metrics(config.run.metrics)
    for warning in check_adapter(config, env, [case.id for case in dataset.cases]):
        _warn(warning)
    if config.adapter.type == "python":
        methods = _check_python_target(config, env)
    elif config.adapter.type in FRAMEWORK_PACKAGES:
        methods = _check_framework_target(config, env)
    else:
        methods = ""
    print(
        f"ok: {args.config}: {count(len(dataset), 'case')} (dataset sha256 {dataset.sha256[:12]}), "
        f"adapter {config.adapter.type}{methods}, {len(metric_names)} metrics"
    )
    from gate.decision.sizing import sizing_lines

    for line in sizing_lines(dataset.cases, config, metric_names):
        print(line)
    if args.smoke is None:
        return EXIT_OK
    return _smoke(config, env, dataset, args.smoke)


def _smoke(config: Config, env: Environment, dataset: Dataset, n: int) -> int:
    """Run the first ``n`` cases end to end in a temporary directory and print what came back."""
    from gate.model.dataset import dataset_sha256
    from gate.run.artifact_io import read_artifact
    from gate.run.runner import execute_run, store_path

    cases = dataset.cases[:n]
    with tempfile.TemporaryDirectory(prefix="ragproof-smoke-") as tmp:
        folder = Path(tmp)
        subset = dataclasses.replace(dataset, cases=cases, sha256=dataset_sha256(cases))
        # The run's own store is temporary; the judge cache stays the configured one, so the
        # verdicts paid for here serve the real run.
        judge = config.judge.model_copy(
            update={"cache_path": config.judge.cache_path or str(store_path(config, env))}
        )
        smoke_config = config.model_copy(
            update={
                "run": config.run.model_copy(update={"store": str(folder / "store.sqlite")}),
                "judge": judge,
            }
        )
        outcome = execute_run(smoke_config, env, folder / "run", progress=False, dataset=subset)
        rows = read_artifact(outcome.artifact_dir).rows
    print(f"smoke: {count(len(cases), 'case')} end to end, k {config.run.k}: {outcome.status}")
    for line in _table(rows):
        print(f"  {line}")
    failed = [row for row in rows if row.status != "ok"]
    for row in failed:
        print(f"  error: {row.case_id}: {row.status}: {row.error or '(no message)'}")
    for line in _skipped_everywhere(rows):
        print(f"  {line}")
    for warning in outcome.meta.warnings:
        _warn(warning)
    if failed:
        # 1 however many failed: the run's own exit 4 (run.max_failure_rate) is not validate's code
        return EXIT_FAILED
    return outcome.exit_code


def _short(text: str | None) -> str:
    if text is None:
        return "-"
    flat = " ".join(text.split())
    return flat if len(flat) <= ANSWER_CHARS else flat[: ANSWER_CHARS - 1] + "…"


def _table(rows: list[Row]) -> list[str]:
    """One line per case: id, status, latency, chunks retrieved, the answer's start."""
    header = ("case", "status", "ms", "chunks", "answer")
    body = [
        (
            row.case_id,
            row.status,
            f"{row.latency_ms:.0f}" if row.latency_ms is not None else "-",
            str(len(row.retrieved)) if row.retrieved is not None else "-",
            _short(row.answer.text if row.answer is not None else None),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(4)]
    out = []
    for line in [header, *body]:
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [line[2].rjust(widths[2]), line[3].rjust(widths[3]), line[4]]
        out.append("  ".join(cells).rstrip())
    return out


def _skipped_everywhere(rows: list[Row]) -> list[str]:
    """Metrics that no successful smoke case scored, grouped by their (first) reason.

    A metric for case kinds absent from the smoke cases (injection resistance on qa cases) is
    left out: a few cases need not cover every kind.
    """
    from gate.metrics import registry

    ok = [row for row in rows if row.status == "ok"]
    if not ok:
        return []
    specs = registry()
    kinds = {row.kind for row in ok}
    by_reason: dict[str, list[str]] = defaultdict(list)
    for name in ok[0].metrics:
        spec = specs.get(name)
        if spec is not None and not kinds & spec.applies_to:
            continue
        results = [row.metrics.get(name) for row in ok]
        if any(r is not None and r.status == "scored" for r in results):
            continue
        reasons = [r.reason for r in results if r is not None and r.reason]
        by_reason[reasons[0] if reasons else "not scored"].append(name)
    return [
        f"not scored on any smoke case ({reason}): {', '.join(names)}" for reason, names in by_reason.items()
    ]
