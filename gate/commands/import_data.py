"""``ragproof import``: convert another tool's dataset into ragproof cases (JSONL), with a report."""

from __future__ import annotations

import argparse
import sys

from gate.commands._common import count, resolve
from gate.core.environment import Environment
from gate.core.errors import UsageError

HELP = "convert a ragas/DeepEval, Hugging Face, BEIR or TREC dataset into ragproof cases"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gate.model.importing import FORMATS

    parser.add_argument(
        "source", metavar="SOURCE", help="the dataset file (JSONL, JSON, CSV) or BEIR directory"
    )
    parser.add_argument(
        "--out", metavar="FILE", default="cases.jsonl", help="cases file to write (default: cases.jsonl)"
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="auto", help="input format (default: by its shape)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    parser.add_argument(
        "--qrels", metavar="FILE", help="trec: the qrels file; beir: instead of qrels/SPLIT.tsv"
    )
    parser.add_argument(
        "--split", metavar="NAME", help="beir: the qrels split (default: test, or the only one)"
    )
    parser.add_argument("--id", metavar="FIELD", help="the field holding the case id")
    parser.add_argument("--question", metavar="FIELD", help="the field holding the question")
    parser.add_argument("--answer", metavar="FIELD", help="the field holding the expected answer")
    parser.add_argument("--sources", metavar="FIELD", help="the field holding the expected source ids")
    parser.add_argument(
        "--contexts-as-sources",
        action="store_true",
        help="reference contexts become expected_source_ids (for run.source_match: substring)",
    )
    parser.add_argument(
        "--context-delimiter",
        metavar="TEXT",
        help="CSV: the text joining the items of a list cell (default: '|' when a cell has one, "
        "as DeepEval writes; DeepEval's loader uses ';')",
    )


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.model.dataset import load_dataset
    from gate.model.importing import FieldMap, case_line, import_dataset

    out = resolve(env, args.out)
    if out.exists() and not args.force:
        raise UsageError(f"--out {args.out}: exists; pass --force to overwrite it")
    if args.context_delimiter is not None and not args.context_delimiter:
        raise UsageError("--context-delimiter: expected a non-empty text")
    fields = FieldMap(
        args.id, args.question, args.answer, args.sources, args.contexts_as_sources, args.context_delimiter
    )
    cases, report = import_dataset(
        resolve(env, args.source),
        args.format,
        fields,
        qrels=resolve(env, args.qrels) if args.qrels else None,
        split=args.split,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(case_line(case) for case in cases), encoding="utf-8")
    load_dataset(out)  # what `validate` reads: the written file must load as it is
    print("\n".join(report.lines(len(cases), args.source, args.out)))
    print(f"wrote {count(len(cases), 'case')} to {args.out}")
    if report.lost:
        lost = sum(n for n, _, _ in report.lost.values())
        print(
            f"ragproof: warning: {count(lost, 'value')} could not be carried over as they were "
            "(the 'lost' lines above)",
            file=sys.stderr,
        )
    return 0
