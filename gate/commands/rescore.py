"""``ragproof rescore RUN``: judge a stored run's answers again with the current judge.

Use it when the judge model or a prompt changed: re-score the baseline so that ``compare``
sees one judge on both sides instead of refusing (or mixing) them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gate.commands._common import add_config_argument, load_config_from_args, resolve
from gate.core.environment import Environment
from gate.core.errors import EXIT_BUDGET, EXIT_OK, UsageError

HELP = "re-score a stored run's answers with the current judge (after a judge model or prompt change)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_path", metavar="RUN", help="run artifact directory or .zip")
    add_config_argument(parser)
    parser.add_argument(
        "--out", metavar="DIR", help="output artifact directory (default: RUN-rescored beside RUN)"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the judge cache")


def default_out(run_path: Path) -> Path:
    stem = run_path.name[: -len(".zip")] if run_path.name.endswith(".zip") else run_path.name
    return run_path.parent / f"{stem}-rescored"


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.judge.session import build_judge
    from gate.metrics.aggregate import summarize
    from gate.metrics.base import ScoringContext
    from gate.model.dataset import load_dataset
    from gate.run.artifact_io import new_run_id, read_artifact, utc_now, write_artifact
    from gate.run.rescore import rescore_rows

    run_path = resolve(env, args.run_path)
    config = load_config_from_args(args, env)
    artifact = read_artifact(run_path)
    meta = artifact.meta
    for field, ours, theirs in (
        ("run.k", config.run.k, meta.k),
        ("run.source_match", config.run.source_match, meta.source_match),
        ("run.ndcg_gain", config.run.ndcg_gain, meta.ndcg_gain),
        ("run.document_id_key", config.run.document_id_key, meta.document_id_key),
    ):
        if ours != theirs:
            raise UsageError(
                f"{args.config}: {field} is {ours!r} but the run used {theirs!r}; rescore changes only the judge"
            )
    out_dir = resolve(env, args.out) if args.out else default_out(run_path)
    if out_dir.resolve() == run_path.resolve():
        raise UsageError(f"--out {args.out}: must differ from RUN; the original run is kept")
    dataset = load_dataset(config.resolve(config.dataset), config.dataset_version)
    store = Path(config.run.store)
    session = build_judge(
        config.judge, env, store if store.is_absolute() else env.cwd / store, not args.no_cache
    )
    if session is None:
        raise UsageError("rescore needs a judge: set judge.model in ragproof.yaml or RAGPROOF_JUDGE_MODEL")
    # config.run's recorded settings equal the run's (checked above): it is the run's scoring.
    ctx = ScoringContext(settings=config.run, judge=session, composite_weights=config.composite_weights())
    try:
        rescored = rescore_rows(artifact, dataset, ctx, config.judge.concurrency)
        info, cost = session.info(), session.cost()
    finally:
        session.close()
    status = "aborted:budget" if rescored.budget_exhausted else meta.status
    new_meta = meta.model_copy(
        update={
            "run_id": new_run_id(),
            "created_at": utc_now(),
            "config_hash": config.config_hash(),
            "judge": info,
            "cost": cost,
            "status": status,
        }
    )
    summary = summarize(rescored.rows, meta.metrics, meta.slices)
    written = write_artifact(out_dir, new_meta, rescored.rows, summary, cases=dataset.cases)
    print(
        f"{status}: re-scored {len(rescored.rescored_metrics)} judge metrics on {len(rescored.rows)} rows of run "
        f"{meta.run_id} with {info.model}; {cost.judge_calls} judge calls, {cost.cache_hits} cached, "
        f"${cost.usd:.4f} -> {written}"
    )
    if rescored.budget_exhausted:
        print(
            "ragproof: judge budget exhausted; rows not re-scored have those metrics skipped", file=sys.stderr
        )
        return EXIT_BUDGET
    return EXIT_OK
