"""The gate family as a whole: false blocks under no change, and passes on a powered set.

1. **Demo family null.** The bundled demo's two runs (``ragproof demo``) with, in every
   replicate, each case's baseline and candidate rows swapped with probability 1/2: the
   candidate is then drawn from the same distribution as the baseline, case by case, and every
   gate of the demo's structure (metrics x slices, the same pairs) is decided by
   ``compare_runs`` with the demo's gate settings. Counts P(any gating gate blocks), P(overall
   pass) and the blocks per gate.
2. **Powered set.** 2,000 cases with the demo's kinds and tags (cases drawn from the demo's),
   one 0/1 metric at 70% with 5% of the pairs flipped each way (true change zero): counts
   P(overall pass). Slices too small for the margin are underpowered and, by default, inform.

Usage::

    python bench/family.py [--replicates 1000] [--powered-replicates 200] [--resamples 10000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate.decision.compare import compare_runs
from gate.model.artifact import Row, RunArtifact
from gate.model.config import GateConfig, load_config
from gate.model.records import MetricResult

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo"
POWERED_METRIC = "answer.exact_match"


def demo_runs(out: Path) -> tuple[RunArtifact, RunArtifact, GateConfig]:
    """Run the bundled demo into ``out`` and read back its two runs and gate settings."""
    import subprocess

    from gate.run.artifact_io import read_artifact

    subprocess.run(
        [sys.executable, "-m", "gate", "demo", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    config = load_config(DEMO / "ragproof.yaml").gate
    return read_artifact(out / "baseline"), read_artifact(out / "candidate"), config


def swapped(
    baseline: RunArtifact, candidate: RunArtifact, rng: random.Random
) -> tuple[RunArtifact, RunArtifact]:
    """The two runs with each case's rows exchanged with probability 1/2."""
    by_id = {r.case_id: r for r in candidate.rows}
    new_base: list[Row] = []
    new_cand: list[Row] = []
    for row in baseline.rows:
        other = by_id[row.case_id]
        if rng.random() < 0.5:
            row, other = other, row
        new_base.append(row)
        new_cand.append(other)
    return (
        baseline.model_copy(update={"rows": new_base}),
        candidate.model_copy(update={"rows": new_cand}),
    )


def family_null(
    baseline: RunArtifact, candidate: RunArtifact, config: GateConfig, replicates: int, seed: int = 0
) -> dict[str, object]:
    rng = random.Random(seed)
    any_block = passes = 0
    per_gate: Counter[str] = Counter()
    family_sizes: list[int] = []
    for _ in range(replicates):
        b, c = swapped(baseline, candidate, rng)
        result = compare_runs(b, c, config)
        blocked = [g for g in result.gating() if g.decision == "block"]
        any_block += bool(blocked)
        passes += result.overall == "pass"
        per_gate.update(f"{g.metric} [{g.slice}]" for g in blocked)
        family_sizes.append(result.settings.family_size)
    return {
        "replicates": replicates,
        "p_any_block": any_block / replicates,
        "p_overall_pass": passes / replicates,
        "family_size": (min(family_sizes), max(family_sizes)),
        "blocks_per_gate": per_gate.most_common(8),
    }


def powered_runs(
    template: RunArtifact, cases: int, rng: np.random.Generator
) -> tuple[RunArtifact, RunArtifact]:
    """``cases`` rows with the demo's kinds and tags and one 0/1 metric scoring about 70%, 5% of
    the pairs flipped, as many up as down in expectation (true change zero)."""
    picks = rng.integers(0, len(template.rows), size=cases)
    u = rng.random(cases)
    change = np.where(u < 0.025, 1, np.where(u < 0.05, -1, 0))
    base_values = np.where(change == 1, 0, np.where(change == -1, 1, rng.random(cases) < 0.7)).astype(int)
    cand_values = base_values + change
    rows: dict[str, list[Row]] = {"baseline": [], "candidate": []}
    for i, k in enumerate(picks):
        source = template.rows[int(k)]
        for run, values in (("baseline", base_values), ("candidate", cand_values)):
            rows[run].append(
                Row(
                    case_id=f"p{i:05d}",
                    kind=source.kind,
                    tags=list(source.tags),
                    status="ok",
                    metrics={POWERED_METRIC: MetricResult.scored(float(values[i]))},
                )
            )
    meta = template.meta.model_copy(update={"metrics": [POWERED_METRIC]})
    return (
        template.model_copy(update={"rows": rows["baseline"], "meta": meta}),
        template.model_copy(update={"rows": rows["candidate"], "meta": meta}),
    )


def powered_pass(
    template: RunArtifact, config: GateConfig, replicates: int, cases: int = 2000, seed: int = 0
) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    passes = 0
    decisions: Counter[str] = Counter()
    for _ in range(replicates):
        b, c = powered_runs(template, cases, rng)
        result = compare_runs(b, c, config)
        passes += result.overall == "pass"
        decisions.update(g.decision for g in result.gating() if not g.underpowered)
    return {
        "replicates": replicates,
        "cases": cases,
        "p_overall_pass": passes / replicates,
        "powered_gate_decisions": dict(decisions),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--powered-replicates", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gate-family-") as tmp:
        baseline, candidate, config = demo_runs(Path(tmp) / "demo")
    config = config.model_copy(update={"resamples": args.resamples})
    real = compare_runs(baseline, candidate, config)
    print(
        f"demo as shipped: overall {real.overall}; family {real.settings.family_size} distinct gates, "
        f"{real.settings.family_method} critical value {real.settings.family_critical:.3f}"
    )
    for family_wise in (True, False):
        start = time.perf_counter()
        cfg = config.model_copy(update={"family_wise": family_wise})
        out = family_null(baseline, candidate, cfg, args.replicates)
        print(
            f"demo family null, family_wise={family_wise}: {out} ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    start = time.perf_counter()
    out = powered_pass(baseline, config, args.powered_replicates)
    print(f"powered set: {out} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
