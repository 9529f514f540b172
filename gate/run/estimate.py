"""``ragproof run --estimate``: expected judge calls, tokens and cost, computed without calling anything.

The pipeline's outputs are unknown before a run, so each case is assumed to produce what
costs most: an answer (the expected answer's length, else :data:`ASSUMED_ANSWER_CHARS`), a
context of ``run.k`` chunks of :data:`ASSUMED_CHUNK_CHARS` characters, and
:data:`ASSUMED_CITATIONS` citations. A case's judge tasks are those of the selected judge
metrics whose case-level preconditions hold (kind, expected_answer); metrics that share a
prompt count once, as in a run; the components of a selected composite count as selected. Input tokens are the real templates rendered with inputs of
those sizes, at 4 characters per token; output tokens are the tasks' expected reply sizes.
Cache hits and repair retries are not counted, so an unchanged re-run costs less (zero when
every verdict is cached) and a judge that needs repairs costs more.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gate.core.environment import Environment
from gate.judge.client import estimate_tokens
from gate.judge.cost import EXPECTED_OUTPUT_TOKENS, call_cost
from gate.judge.templates import SYSTEM_TEMPLATE, PromptSet
from gate.metrics.base import MetricSpec
from gate.model.config import Config
from gate.model.dataset import Case, Dataset

ASSUMED_ANSWER_CHARS = 600
ASSUMED_CHUNK_CHARS = 800
ASSUMED_CITATIONS = 2

# metric -> the judge task (prompt) it asks; case-level needs are checked from the registry
METRIC_TASKS: dict[str, str] = {
    "generation.groundedness": "claims",
    "judge.context_precision": "claims",
    "judge.faithfulness": "faithfulness",
    "generation.citation_support": "citation_support",
    "generation.answer_relevance": "answer_relevance",
    "generation.completeness": "completeness",
    "judge.context_recall": "context_recall",
    "judge.context_relevance": "context_relevance",
    "robustness.abstention": "refusal",
    "robustness.overrefusal": "refusal",
}


@dataclass(frozen=True)
class Estimate:
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float
    calls_by_task: dict[str, int] = field(default_factory=dict)


def _tasks_for(case: Case, judged: list[tuple[str, MetricSpec]]) -> set[str]:
    """The judge tasks of ``judged`` ((task, spec) of each selected judge metric) this case asks."""
    tasks: set[str] = set()
    for task, spec in judged:
        if case.kind not in spec.applies_to:
            continue
        if "expected_answer" in spec.needs and case.expected_answer is None:
            continue
        if "expected_source_ids" in spec.needs and not case.expected_source_ids:
            continue
        tasks.add(task)
    return tasks


def _prompt_tokens(prompts: PromptSet, task: str, case: Case, k: int) -> int:
    answer_chars = len(case.expected_answer) if case.expected_answer else ASSUMED_ANSWER_CHARS
    context = [{"id": f"chunk-{i}", "text": "x" * ASSUMED_CHUNK_CHARS} for i in range(k)]
    user = prompts.render(
        task,
        question=case.question,
        answer="x" * answer_chars,
        expected_answer=case.expected_answer or "",
        context=context,
        cited=context[: min(k, ASSUMED_CITATIONS)],
    )
    return estimate_tokens(prompts.render(SYSTEM_TEMPLATE) + user)


def estimate_run(
    config: Config, dataset: Dataset | list[Case], metric_names: list[str] | None = None
) -> Estimate:
    """The judge calls, tokens and USD a run of ``dataset`` under ``config`` is expected to cost.

    ``metric_names`` defaults to ``run.metrics``. No judge model configured: all zero.
    """
    if not config.judge.model:
        return Estimate(0, 0, 0, 0.0)
    if metric_names is None:
        from gate.run.scoring import select_metrics

        metric_names = select_metrics(config.run.metrics)
    if config.composite is not None and any(n.startswith("composite.") for n in metric_names):
        # a composite computes the components it was not handed, judge ones included
        metric_names = [*metric_names, *config.composite.weights]
    from gate.metrics import registry

    specs = registry()
    judged = [
        (METRIC_TASKS[n], specs[n]) for n in dict.fromkeys(metric_names) if n in METRIC_TASKS and n in specs
    ]
    cases = dataset.cases if isinstance(dataset, Dataset) else dataset
    prompts = PromptSet()
    calls: Counter[str] = Counter()
    tokens_in = tokens_out = 0
    for case in cases:
        for task in sorted(_tasks_for(case, judged)):
            calls[task] += 1
            tokens_in += _prompt_tokens(prompts, task, case, config.run.k)
            tokens_out += EXPECTED_OUTPUT_TOKENS[task]
    usd = call_cost(config.judge, tokens_in, tokens_out)
    return Estimate(sum(calls.values()), tokens_in, tokens_out, usd, dict(sorted(calls.items())))


def run_estimate(config: Config, env: Environment, shard: tuple[int, int] | None = None) -> int:
    """Print the estimate of ``ragproof run --estimate`` (this shard's cases); returns exit code 0."""
    from gate.model.dataset import load_dataset
    from gate.run.shards import in_shard

    dataset = load_dataset(config.resolve(config.dataset), config.dataset_version)
    cases = [c for c in dataset.cases if in_shard(c.id, shard)]
    estimate = estimate_run(config, cases)
    judge = config.judge
    if not judge.model:
        print(f"no judge configured (RAGPROOF_JUDGE_MODEL): 0 judge calls for {len(cases)} cases, $0.0000")
        return 0
    priced = judge.input_cost_per_mtok is not None or judge.output_cost_per_mtok is not None
    print(
        f"judge {judge.model}: {estimate.calls} calls for {len(cases)} cases, "
        f"{estimate.input_tokens} input tokens, {estimate.output_tokens} output tokens, "
        f"${estimate.usd:.4f}" + ("" if priced else " (no prices set: RAGPROOF_JUDGE_INPUT_COST_PER_MTOK)")
    )
    for task, count in estimate.calls_by_task.items():
        print(f"  {task}: {count} calls")
    print(
        f"  assumes every case answers with {config.run.k} context chunks of ~{ASSUMED_CHUNK_CHARS} characters; "
        "cached verdicts and repair retries are not counted"
    )
    if judge.max_cost_usd is not None and estimate.usd > judge.max_cost_usd:
        print(
            f"  exceeds the budget of ${judge.max_cost_usd:.4f} (RAGPROOF_MAX_COST_USD): the run would stop early"
        )
    return 0
