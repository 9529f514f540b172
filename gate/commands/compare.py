"""``ragproof compare BASELINE CANDIDATE``: paired comparison and gate decisions.

Exit codes: 0 pass or below the ``--fail-on`` level; 1 the gate failed;
3 the runs are not comparable; 64 usage or configuration error; 65 bad artifact data.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.environment import Environment
from gate.core.errors import UsageError
from gate.core.preload import Preload
from gate.core.process_exit import keep_until_exit

if TYPE_CHECKING:
    from gate.decision.comparison import Comparison
    from gate.model.config import GateConfig
    from gate.report.cases import PairedCases
    from gate.stats.counts import DrawnAhead

HELP = "compare two run artifacts (dirs or .zip) and decide every gate"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", metavar="BASELINE", help="baseline run artifact (directory or .zip)")
    parser.add_argument("candidate", metavar="CANDIDATE", help="candidate run artifact (directory or .zip)")
    parser.add_argument("-c", "--config", metavar="FILE", help="ragproof.yaml whose gate section applies")
    parser.add_argument("--json", metavar="FILE", help="write the decision document (docs/gate.md)")
    parser.add_argument("--markdown", metavar="FILE", help="write the Markdown report")
    parser.add_argument("--html", metavar="FILE", help="write the self-contained HTML report")
    parser.add_argument(
        "--allow-mixed-judges",
        action="store_true",
        help="compare runs scored by different judge models or prompts (with a warning)",
    )
    parser.add_argument(
        "--fail-on",
        choices=("block", "review", "never"),
        default=None,
        help="lowest overall decision that exits 1 (default: gate.fail_on, block)",
    )


def write_text(path: Path, text: str, what: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the {what}: {exc.strerror or exc}") from None


# What the comparison imports (numpy, scipy, the decision and case modules), loaded in a thread
# while the artifacts are read.
DECISION_MODULES = (
    "gate.decision.compare",
    "gate.decision.pairing",
    "gate.report.cases",
    "gate.report.terminal",
)


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.commands._common import load_checked_config, resolve
    from gate.model.config import GateConfig
    from gate.run.artifact_io import load_reader, read_artifact

    gate_config = load_checked_config(resolve(env, args.config), env).gate if args.config else GateConfig()
    load_reader()  # everything reading imports, before the thread below imports the rest
    base_path, cand_path = resolve(env, args.baseline), resolve(env, args.candidate)
    # Before any thread starts (a forked child then holds no lock another thread had).
    ahead = _draw_ahead(base_path, cand_path, gate_config)
    try:
        preload = Preload(DECISION_MODULES)
        try:
            # The comparison never reads the runs' dataset copies: checked by hash, not kept.
            baseline = read_artifact(base_path, cases=False)
            candidate = read_artifact(cand_path, cases=False)
        finally:
            preload.wait()
        keep_until_exit(baseline, candidate)  # read once, kept to the end: freed by the exit itself
        from gate.decision.compare import compare_runs
        from gate.decision.pairing import pair_runs

        pairing = pair_runs(baseline, candidate)  # once, for the decision and every report below
        comparison = compare_runs(
            baseline,
            candidate,
            gate_config,
            allow_mixed_judges=args.allow_mixed_judges,
            pairing=pairing,
            ahead=ahead,
        )
    finally:
        if ahead is not None:
            ahead.close()
    from gate.decision.decide import exit_code_for

    if args.json:
        write_text(resolve(env, args.json), comparison.model_dump_json(indent=2) + "\n", "decision JSON")
    from gate.report.cases import PairedCases

    paired = PairedCases(comparison, baseline, candidate, pairing=pairing)
    # The renderers (and jinja2) load only when a report is asked for.
    if args.markdown:
        from gate.report.markdown import render_markdown

        write_text(
            resolve(env, args.markdown),
            render_markdown(comparison, paired=paired),
            "Markdown report",
        )
    if args.html:
        from gate.report.html import render_compare_html

        write_text(
            resolve(env, args.html),
            render_compare_html(comparison, baseline, candidate, paired=paired),
            "HTML report",
        )
    print(summary_line(comparison, paired))
    return exit_code_for(comparison.overall, args.fail_on or gate_config.fail_on)


def _draw_ahead(baseline: Path, candidate: Path, gate_config: GateConfig) -> DrawnAhead | None:
    """A child process drawing the bootstrap's resample counts while this one reads the
    artifacts (:mod:`gate.stats.counts`), for as many units as the smaller run has cases: the
    pairs of two runs of one dataset. If the pairs turn out otherwise (cases added or removed,
    clusters), the bootstrap draws its own counts and the child's go unused."""
    from gate.run.artifact_io import case_count
    from gate.stats.counts import draw_ahead

    base_cases, cand_cases = case_count(baseline), case_count(candidate)
    if base_cases is None or cand_cases is None:
        return None
    return draw_ahead(gate_config.seed, min(base_cases, cand_cases), gate_config.resamples)


def summary_line(comparison: Comparison, paired: PairedCases | None = None) -> str:
    """The decision, why, the counts and the gates that need attention, for the terminal."""
    from gate.report.terminal import render_terminal

    return render_terminal(comparison, paired=paired)
