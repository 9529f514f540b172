"""``ragproof merge``: join the shard artifacts of one run into one artifact."""

from __future__ import annotations

import argparse
import sys

from gate.commands._common import count, resolve
from gate.core.environment import Environment

HELP = "merge the shard artifacts of one run into one artifact"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "parts", nargs="+", metavar="PART_DIR", help="shard artifacts (directories or .zip files)"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="directory of the merged artifact")


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.metrics.aggregate import summarize
    from gate.run.artifact_io import read_artifact, write_artifact
    from gate.run.shards import merge_artifacts

    parts = []
    for part in args.parts:
        artifact = read_artifact(resolve(env, part))
        artifact.source = part  # messages name the parts as they were given
        parts.append(artifact)
    meta, rows = merge_artifacts(parts)
    summary = summarize(rows, list(meta.metrics), list(meta.slices))
    # Parts of one run share the dataset (merge_artifacts checks its sha256): carry it on.
    cases = next((part.cases for part in parts if part.cases is not None), None)
    out_dir = write_artifact(resolve(env, args.out), meta, rows, summary, cases=cases)
    print(f"{meta.status}: merged {count(len(parts), 'part')}, {count(len(rows), 'case')} -> {out_dir}")
    if meta.status != "complete":
        print(f"ragproof: merged run is {meta.status}", file=sys.stderr)
    return 0
