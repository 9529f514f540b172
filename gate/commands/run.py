"""``ragproof run``: run the dataset through the pipeline, score every case, write a run artifact."""

from __future__ import annotations

import argparse
import sys

from gate.commands._common import add_config_argument, count, error_lines, load_config_from_args, resolve
from gate.core.environment import Environment
from gate.core.errors import EXIT_FAILURE_RATE

HELP = "run the dataset through the pipeline, score every case and write a run artifact"
DEFAULT_OUT = ".ragproof/run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument(
        "--out", metavar="DIR", help=f"artifact directory (default: {DEFAULT_OUT}, or RUN_DIR with --resume)"
    )
    parser.add_argument(
        "--shard", metavar="I/N", help="run only shard I of N (a stable hash partition of case ids)"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the judge cache")
    parser.add_argument(
        "--resume", metavar="RUN_DIR", help="continue an interrupted run: run only its missing cases"
    )
    parser.add_argument(
        "--estimate",
        action="store_true",
        help="print the expected judge calls, tokens and cost, and call nothing",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress output on stderr")


def _estimate(args: argparse.Namespace, env: Environment) -> int:
    # gate.run.estimate.run_estimate prints the expected judge calls, tokens and cost.
    from gate.run.estimate import run_estimate
    from gate.run.shards import parse_shard

    config = load_config_from_args(args, env)
    return int(run_estimate(config, env, shard=parse_shard(args.shard) if args.shard else None))


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.run.runner import execute_run
    from gate.run.shards import parse_shard

    if args.estimate:
        return _estimate(args, env)
    shard = parse_shard(args.shard) if args.shard else None
    config = load_config_from_args(args, env)
    resume = resolve(env, args.resume) if args.resume else None
    # A run killed before writing its artifact has no directory yet: the store knows it by path.
    out_dir = resolve(env, args.out) if args.out else (resume or resolve(env, DEFAULT_OUT))
    outcome = execute_run(
        config,
        env,
        out_dir,
        shard=shard,
        no_cache=args.no_cache,
        resume=resume,
        progress=not args.no_progress,
    )
    meta = outcome.meta
    failed = f", {outcome.failures} failed" if outcome.failures else ""
    print(
        f"{outcome.status}: {count(outcome.cases, 'case')}{failed} in {meta.wall_time_s:.1f} s; "
        f"run {meta.run_id} -> {outcome.artifact_dir}"
    )
    for warning in meta.warnings:
        print(f"ragproof: warning: {warning}", file=sys.stderr)
    if outcome.status != "complete":
        print(f"ragproof: run {outcome.status}; resume with --resume {outcome.artifact_dir}", file=sys.stderr)
    if outcome.exit_code == EXIT_FAILURE_RATE:
        print(
            failure_rate_message(outcome.failures, outcome.cases, config.run.max_failure_rate),
            file=sys.stderr,
        )
        for line in error_lines(outcome.errors):
            print(f"  {line}", file=sys.stderr)
    return outcome.exit_code


def failure_rate_message(failures: int, cases: int, limit: float) -> str:
    """The error line of a run whose failure rate exceeds ``run.max_failure_rate`` (exit 4)."""
    return (
        f"ragproof: error: {failures} of {cases} cases failed: adapter-failure rate {failures / cases:.4f} "
        f"exceeds run.max_failure_rate {limit:g}; the most common errors:"
    )
