"""``ragproof generate-injections``: write injection cases built from a dataset's qa questions."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.commands._common import positive_int
from gate.core.environment import Environment
from gate.core.errors import UsageError

HELP = "build injection cases (payloads x qa questions) into a dataset file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", required=True, metavar="IN", help="dataset with qa cases (.jsonl or .yaml)"
    )
    parser.add_argument("--out", required=True, metavar="OUT", help="file to write (.jsonl, or .yaml/.yml)")
    parser.add_argument(
        "--payloads", metavar="ID,ID", help="payload ids to use (default: every built-in payload)"
    )
    parser.add_argument("--limit", type=positive_int, metavar="N", help="use only the first N qa questions")


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.metrics.injections import build_injection_cases
    from gate.model.dataset import load_dataset, write_cases

    source = env.cwd / args.dataset
    out = env.cwd / args.out
    if out.resolve() == source.resolve():
        raise UsageError(f"--out {args.out}: refusing to overwrite the input dataset")
    payload_ids = None
    if args.payloads is not None:
        payload_ids = [p.strip() for p in args.payloads.split(",") if p.strip()]
    dataset = load_dataset(source)
    cases = build_injection_cases(dataset.cases, payload_ids, args.limit)
    write_cases(Path(out), cases)
    questions = len({c.metadata["source_case_id"] for c in cases})
    print(
        f"wrote {len(cases)} injection cases ({len(cases) // questions} payloads x {questions} questions) to {args.out}"
    )
    return 0
