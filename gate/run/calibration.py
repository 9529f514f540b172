"""Judge calibration: agreement of the configured judge with human-scored fixtures, per prompt.

Fixtures (``gate/judge/fixtures/<prompt>.jsonl``, at least :data:`MIN_FIXTURES` per prompt)
hold a case (question, answer, context, citations, expected answer) and the human annotation
in the prompt's own reply shape (``human``). Both sides are scored by the same code: the
metric behind the prompt runs once with the human annotation as its verdict and once with the
judge, so a fixture's human score is exactly what the metric would report for a perfect judge.

Scores map to three bands: s < 0.25 -> 0, 0.25 <= s <= 0.75 -> 0.5, s > 0.75 -> 1. Per prompt:

- exact agreement: fraction of fixtures whose judge band equals the human band;
- within-band agreement: fraction at most one band apart (|judge - human| <= 0.5);
- Cohen's kappa of the two band labellings (``gate.stats.cohen_kappa``; NaN when undefined);
- miss rate on the failure class: of the fixtures humans put in band 0 (unsupported,
  unentailed, irrelevant, missing; for the refusal prompt: a fabricated answer to an
  unanswerable question), the fraction the judge put in band 1 (supported ...; abstained).

A fixture the judge could not score (judge_error, not_applicable) agrees on nothing and is
counted in ``unscored``. Calibration fails when any prompt's exact or within-band agreement
is below its threshold.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from gate.core.errors import DataError, JudgeError, pydantic_message
from gate.core.strict import StrictModel
from gate.judge import FIXTURES_DIR
from gate.judge.replies import REPLY_MODELS
from gate.judge.session import Verdict
from gate.metrics.base import ScoringContext
from gate.model.dataset import Case
from gate.model.records import Answer, CaseOutput, Chunk, MetricResult

MIN_FIXTURES = 10

# prompt -> the metric whose score is calibrated (refusal: the abstention verdict itself)
PROMPT_METRICS: dict[str, str | None] = {
    "claims": "generation.groundedness",
    "faithfulness": "judge.faithfulness",
    "citation_support": "generation.citation_support",
    "answer_relevance": "generation.answer_relevance",
    "completeness": "generation.completeness",
    "context_recall": "judge.context_recall",
    "context_relevance": "judge.context_relevance",
    "refusal": None,
}


class Fixture(StrictModel):
    id: str = Field(min_length=1)
    kind: Literal["qa", "unanswerable", "injection"] = "qa"
    question: str = Field(min_length=1)
    answer: str | None = None
    expected_answer: str | None = None
    context: list[Chunk] = Field(default_factory=list)
    citations: list[str] | None = None
    human: dict[str, Any]
    note: str = ""

    def case(self) -> Case:
        return Case(id=self.id, question=self.question, kind=self.kind, expected_answer=self.expected_answer)

    def output(self) -> CaseOutput:
        answer = Answer(text=self.answer, citations=self.citations) if self.answer is not None else None
        return CaseOutput(
            retrieved=list(self.context),
            answer=answer,
            supports_retrieve=True,
            supports_answer=answer is not None,
        )


def load_fixtures(directory: Path = FIXTURES_DIR) -> dict[str, list[Fixture]]:
    """prompt -> fixtures, from ``<prompt>.jsonl`` files; DataError naming the file and line."""
    found: dict[str, list[Fixture]] = {}
    if not directory.is_dir():
        raise DataError(f"{directory}: fixtures directory not found")
    for path in sorted(directory.glob("*.jsonl")):
        prompt = path.stem
        if prompt not in PROMPT_METRICS:
            raise DataError(f"{path}: unknown prompt {prompt!r}; expected one of {', '.join(PROMPT_METRICS)}")
        items: list[Fixture] = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                fixture = Fixture.model_validate(json.loads(line))
                REPLY_MODELS[prompt].model_validate(fixture.human)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: malformed JSON ({exc.msg} at column {exc.colno})") from None
            except ValidationError as exc:
                raise DataError(f"{where}: {pydantic_message(exc)}") from None
            items.append(fixture)
        if len(items) < MIN_FIXTURES:
            raise DataError(
                f"{path}: {len(items)} fixtures; calibration needs at least {MIN_FIXTURES} per prompt"
            )
        found[prompt] = items
    if not found:
        raise DataError(f"{directory}: no <prompt>.jsonl fixture files")
    return found


class HumanJudge:
    """Answers every judge task with a fixture's human annotation (the reference side)."""

    def __init__(self, prompt: str, annotation: dict[str, Any]) -> None:
        self.prompt = prompt
        self.annotation = annotation

    def ask(self, task: str, inputs: dict[str, Any]) -> Verdict:
        return Verdict(REPLY_MODELS[self.prompt].model_validate(self.annotation), {"human": True})

    def refusal_verdict(self, case: Case, output: CaseOutput) -> tuple[bool, dict[str, Any]]:
        return bool(self.annotation["declined"]), {"human": True}


def score_fixture(prompt: str, fixture: Fixture, judge: Any) -> MetricResult:
    """The calibrated score of ``fixture`` under ``judge`` (a JudgeSession or a HumanJudge)."""
    case, output = fixture.case(), fixture.output()
    metric_name = PROMPT_METRICS[prompt]
    if metric_name is None:
        try:
            declined, record = judge.refusal_verdict(case, output)
        except JudgeError as exc:
            return MetricResult.judge_error(str(exc), judge=exc.judge or None)
        return MetricResult.scored(1.0 if declined else 0.0, judge=record)
    from gate.metrics import registry

    return registry()[metric_name].score(case, output, ScoringContext(judge=judge))


def band(score: float) -> float:
    """0, 0.5 or 1: s < 0.25 -> 0; s > 0.75 -> 1; otherwise 0.5."""
    if score < 0.25:
        return 0.0
    if score > 0.75:
        return 1.0
    return 0.5


@dataclass
class PromptAgreement:
    prompt: str
    items: int
    exact: float
    within_band: float
    kappa: float
    failure_items: int
    misses: int
    unscored: int
    disagreements: list[str] = field(default_factory=list)  # fixture ids

    @property
    def miss_rate(self) -> float | None:
        return self.misses / self.failure_items if self.failure_items else None


def agreement(
    prompt: str, human_bands: list[float], judge_bands: list[float | None], ids: list[str]
) -> PromptAgreement:
    """Agreement statistics of one prompt from paired band lists (None: the judge gave no score)."""
    from gate.stats import cohen_kappa

    n = len(human_bands)
    exact = sum(1 for h, j in zip(human_bands, judge_bands, strict=True) if j == h)
    within = sum(
        1 for h, j in zip(human_bands, judge_bands, strict=True) if j is not None and abs(j - h) <= 0.5
    )
    labelled = [(h, j) for h, j in zip(human_bands, judge_bands, strict=True) if j is not None]
    kappa = cohen_kappa([h for h, _ in labelled], [j for _, j in labelled]) if labelled else float("nan")
    failures = [j for h, j in zip(human_bands, judge_bands, strict=True) if h == 0.0]
    return PromptAgreement(
        prompt=prompt,
        items=n,
        exact=exact / n,
        within_band=within / n,
        kappa=kappa,
        failure_items=len(failures),
        misses=sum(1 for j in failures if j == 1.0),
        unscored=sum(1 for j in judge_bands if j is None),
        disagreements=[i for i, h, j in zip(ids, human_bands, judge_bands, strict=True) if j != h],
    )


def calibrate(judge: Any, fixtures: dict[str, list[Fixture]]) -> list[PromptAgreement]:
    """Score every fixture with the human annotation and with ``judge``; agreement per prompt."""
    results = []
    for prompt, items in fixtures.items():
        human_bands: list[float] = []
        judge_bands: list[float | None] = []
        for fixture in items:
            human = score_fixture(prompt, fixture, HumanJudge(prompt, fixture.human))
            if human.status != "scored" or human.value is None:
                raise DataError(
                    f"fixture {prompt}/{fixture.id}: the human annotation gives no score ({human.status}: {human.reason})"
                )
            judged = score_fixture(prompt, fixture, judge)
            human_bands.append(band(human.value))
            judge_bands.append(
                band(judged.value) if judged.status == "scored" and judged.value is not None else None
            )
        results.append(agreement(prompt, human_bands, judge_bands, [f.id for f in items]))
    return results


def passes(results: list[PromptAgreement], min_exact: float, min_within_band: float) -> bool:
    return all(r.exact >= min_exact and r.within_band >= min_within_band for r in results)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def render_table(results: list[PromptAgreement], min_exact: float, min_within_band: float) -> str:
    """The per-prompt agreement table (Markdown), one row per prompt, a verdict per row."""
    lines = [
        "| prompt | fixtures | exact | within band | kappa | failure class | missed | miss rate | unscored | result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        kappa = "n/a" if math.isnan(r.kappa) else f"{r.kappa:.2f}"
        ok = r.exact >= min_exact and r.within_band >= min_within_band
        lines.append(
            f"| {r.prompt} | {r.items} | {_pct(r.exact)} | {_pct(r.within_band)} | {kappa} | {r.failure_items} "
            f"| {r.misses} | {_pct(r.miss_rate)} | {r.unscored} | {'pass' if ok else 'FAIL'} |"
        )
    return "\n".join(lines)
