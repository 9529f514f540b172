"""``ragproof demo [--out DIR]``: the bundled example pipeline, run twice, compared and gated.

The baseline is ``examples/demo/ragproof.yaml``, the candidate ``examples/demo/candidate.yaml``
(a change that helps overall and hurts one topic). Both run offline with no judge; the
outputs are ``baseline/`` and ``candidate/`` run artifacts plus ``comment.md``,
``decision.json`` and ``report.html``. It exits 0 whatever the decision: it is a demo.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from types import MappingProxyType

import gate
from gate.commands.compare import summary_line, write_text
from gate.core.environment import Environment
from gate.core.errors import EXIT_OK, UsageError

HELP = "run the bundled example (baseline and a changed candidate), compare and gate, offline"

DEMO_FILES = ("ragproof.yaml", "candidate.yaml")


def demo_dir() -> Path:
    """The bundled demo folder: ``examples/demo`` beside the package, else ``gate/_demo``."""
    package = Path(gate.__file__).resolve().parent
    for candidate in (package.parent / "examples" / "demo", package / "_demo"):
        if all((candidate / name).is_file() for name in DEMO_FILES):
            return candidate
    raise UsageError(
        f"the bundled demo is missing: looked for {package.parent / 'examples' / 'demo'} and {package / '_demo'} "
        "(reinstall ragproof or run from a source checkout)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", metavar="DIR", default="ragproof-demo", help="output directory (default ragproof-demo)"
    )


def _offline(env: Environment) -> Environment:
    # The demo never calls a judge, whatever RAGPROOF_* the shell exports.
    kept = {k: v for k, v in env.variables.items() if not k.startswith("RAGPROOF_")}
    return dataclasses.replace(env, variables=MappingProxyType(kept))


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.commands._common import resolve
    from gate.decision.compare import compare_runs
    from gate.decision.pairing import pair_runs
    from gate.model.config import load_config
    from gate.report.cases import PairedCases
    from gate.report.html import render_compare_html
    from gate.report.markdown import render_markdown
    from gate.run.artifact_io import read_artifact
    from gate.run.runner import execute_run

    folder = demo_dir()
    out = resolve(env, args.out)
    env = _offline(env)
    artifacts = {}
    for role, name in (("baseline", "ragproof.yaml"), ("candidate", "candidate.yaml")):
        config = load_config(folder / name, env.variables)
        # Keep the store with the outputs: the demo folder may be read-only (installed package).
        config.run.store = str(out / ".ragproof" / "store.sqlite")
        outcome = execute_run(config, env, out / role, no_cache=True, progress=False)
        artifacts[role] = read_artifact(outcome.artifact_dir)
    baseline, candidate = artifacts["baseline"], artifacts["candidate"]
    pairing = pair_runs(baseline, candidate)  # once, for the decision and the three reports
    gate_config = load_config(folder / "ragproof.yaml", env.variables).gate
    comparison = compare_runs(baseline, candidate, gate_config, pairing=pairing)
    paths = {
        "comment": out / "comment.md",
        "decision": out / "decision.json",
        "report": out / "report.html",
    }
    paired = PairedCases(comparison, baseline, candidate, pairing=pairing)
    write_text(paths["comment"], render_markdown(comparison, paired=paired), "Markdown report")
    write_text(paths["decision"], comparison.model_dump_json(indent=2) + "\n", "decision JSON")
    write_text(
        paths["report"], render_compare_html(comparison, baseline, candidate, paired=paired), "HTML report"
    )
    print(summary_line(comparison, paired))
    for label, path in paths.items():
        print(f"  {label:9} {path}")
    return EXIT_OK
