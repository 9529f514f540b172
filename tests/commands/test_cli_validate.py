"""``ragproof validate``: config, dataset and metric names checked early; the adapter target
imported and its methods checked; ``--smoke N`` runs N cases end to end (real subprocesses)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from run_helpers import make_cases, ragproof, write_config, write_dataset

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("GITHUB_", "RAGPROOF_"))}
    return {**env, **extra}


def _edit_config(path: Path, **sections: dict[str, Any]) -> None:
    data = yaml.safe_load(path.read_text())
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_misspelt_gate_metric_stops_validate_and_run_with_its_line(tmp_path: Path, command: str) -> None:
    write_dataset(tmp_path, make_cases(3))
    config = write_config(tmp_path, gate={"metrics": {"answer.f1": {"margin": 0.05}}})
    line_no = config.read_text().splitlines().index("    answer.f1:") + 1
    proc = ragproof(command, "-c", "ragproof.yaml", cwd=tmp_path, env=_env())
    assert proc.returncode == 64, proc.stderr
    assert proc.stderr == (
        f"ragproof: error: {config}:{line_no}: gate.metrics.answer.f1: unknown metric 'answer.f1'; "
        "did you mean answer.token_f1?\n"
    )
    assert not (tmp_path / ".ragproof" / "run").exists()


def test_compare_checks_the_gate_metrics_of_its_config(tmp_path: Path) -> None:
    (tmp_path / "gate.yaml").write_text(
        "dataset: cases.jsonl\nadapter: {type: replay, path: r.jsonl}\n"
        "gate:\n  metrics:\n    robustness.injection_resistence: {min: 0.95}\n"
    )
    proc = ragproof("compare", "a", "b", "-c", "gate.yaml", cwd=tmp_path, env=_env())
    assert proc.returncode == 64
    assert proc.stderr == (
        f"ragproof: error: {tmp_path / 'gate.yaml'}:5: gate.metrics.robustness.injection_resistence: "
        "unknown metric 'robustness.injection_resistence'; did you mean robustness.injection_resistance?\n"
    )


PIPELINES_FOR_CHECKS = """
class AnswerOnly:
    def answer(self, question):
        return "42"


class WrongRetrieve:
    def retrieve(self, query):  # no k
        return []

    def answer(self, question):
        return "42"


class NotCallable:
    retrieve = ["not", "a", "method"]

    def answer(self, question):
        return "42"


class NoMethods:
    def invoke(self, question):
        return "42"


def make():
    return WrongRetrieve()
"""


def _target_project(tmp_path: Path, target: str) -> Path:
    write_dataset(tmp_path, make_cases(2))
    (tmp_path / "checked.py").write_text(PIPELINES_FOR_CHECKS)
    return write_config(tmp_path, {"type": "python", "target": target})


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "checked:WrongRetrieve",
            "adapter.target: 'checked:WrongRetrieve' (WrongRetrieve): retrieve(query) cannot be called "
            "as retrieve(question, k)",
        ),
        (
            "checked:make",
            "adapter.target: 'checked:make' (WrongRetrieve): retrieve(query) cannot be called as "
            "retrieve(question, k)",
        ),
        (
            "checked:NotCallable",
            "adapter.target: 'checked:NotCallable' (NotCallable): retrieve is a list, not a method",
        ),
        (
            "checked:NoMethods",
            "adapter.target: 'checked:NoMethods' (NoMethods) has neither a retrieve(question, k) nor an "
            "answer(question) method",
        ),
        ("checked:Missing", "adapter.target: 'checked' has no attribute 'Missing'"),
    ],
)
def test_validate_imports_the_target_and_checks_its_methods(
    tmp_path: Path, target: str, message: str
) -> None:
    _target_project(tmp_path, target)
    proc = ragproof("validate", "-c", "ragproof.yaml", cwd=tmp_path, env=_env())
    assert (proc.returncode, proc.stderr, proc.stdout) == (64, f"ragproof: error: {message}\n", "")


def test_validate_names_a_missing_method_and_what_it_skips(tmp_path: Path) -> None:
    _target_project(tmp_path, "checked:AnswerOnly")
    proc = ragproof("validate", "-c", "ragproof.yaml", cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "ragproof: warning: adapter.target: 'checked:AnswerOnly' (AnswerOnly) has no retrieve(question, k) "
        "method: retrieval metrics will be skipped\n"
    )
    assert proc.stdout.startswith("ok: ragproof.yaml: 2 cases (dataset sha256 ")
    assert ", adapter python (answer), " in proc.stdout


def test_validate_sizes_each_gating_metric_on_the_cases_it_can_score(tmp_path: Path) -> None:
    cases = make_cases(100)  # 20 cases a topic; the pricing ones are unanswerable
    for case in cases[:50]:
        if case["tags"] == ["topic:shipping"]:
            del case["expected_source_ids"]  # 10 shipping cases left with expected ids
    write_dataset(tmp_path, cases)
    names = ["retrieval.ndcg_at_k", "retrieval.hit_rate_at_k", "answer.exact_match", "robustness.abstention"]
    write_config(tmp_path, run={"metrics": names})
    proc = ragproof("validate", "-c", "ragproof.yaml", cwd=tmp_path, env=_env())
    assert (proc.returncode, proc.stderr) == (0, "")
    # (z_0.975 + z_0.80) * sqrt(c / n) at c = 5% / 10%: n 70 -> 0.07 / 0.11, 10 -> 0.20 / 0.28,
    # 80 -> 0.07 / 0.10, 20 -> 0.14 / 0.20
    assert proc.stdout.splitlines()[1:] == [
        "sizing, if 5% / 10% of the cases change between runs with no net effect: margin 0.02 needs "
        "1,067 / 2,005 cases (189 if none change); the drop each gating metric detects 80% of the time "
        "(exact for 0/1 metrics; for the others, with values in [0, 1], 'at most': they need at most as "
        "many cases)",
        "  retrieval.ndcg_at_k: all (70 cases) at most 0.07 / 0.11; smallest gating slice "
        "tags=topic:shipping (10 cases) at most 0.20 / 0.28",
        "  retrieval.hit_rate_at_k: all (70 cases) 0.07 / 0.11; smallest gating slice tags=topic:shipping "
        "(10 cases) 0.20 / 0.28",
        "  answer.exact_match: all (80 cases) 0.07 / 0.10; smallest gating slice tags=topic:refunds "
        "(20 cases) 0.14 / 0.20",
        "  robustness.abstention: all (20 cases) 0.14 / 0.20; its smallest gating slice, kind=unanswerable, "
        "has the same cases",
    ]


def test_smoke_runs_n_cases_end_to_end_and_keeps_nothing(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(6))
    write_config(tmp_path)
    calls = tmp_path / "calls.log"
    proc = ragproof(
        "validate", "-c", "ragproof.yaml", "--smoke", "3", cwd=tmp_path, env=_env(TINY_CALL_LOG=str(calls))
    )
    assert proc.returncode == 0, proc.stderr
    ok, *lines = proc.stdout.splitlines()
    assert (
        ok.endswith(", adapter python (retrieve and answer), 26 metrics")
        or "adapter python (retrieve and answer)" in ok
    )
    # then the sizing (gate.decision.sizing, below), then the smoke run
    assert lines[0].startswith("sizing, if 5% / 10% of the cases change between runs")
    lines = lines[[i for i, line in enumerate(lines) if line.startswith("smoke: ")][0] - 1 :]
    assert lines[1] == "smoke: 3 cases end to end, k 3: complete"
    header, *table = lines[2:6]
    assert header.split() == ["case", "status", "ms", "chunks", "answer"]
    cells = [line.split(None, 4) for line in table]
    assert [(c[0], c[1], c[3], c[4]) for c in cells] == [
        ("case-000", "ok", "3", "Refunds are accepted within 30 days."),
        ("case-001", "ok", "3", "Orders ship within 2 business days."),
        ("case-002", "ok", "3", "The warranty lasts 12 months."),
    ]
    assert all(c[2].isdigit() for c in cells)
    assert lines[6:] == [
        "  not scored on any smoke case (no judge configured (set RAGPROOF_JUDGE_MODEL)): "
        "generation.groundedness, generation.citation_support, generation.answer_relevance, "
        "generation.completeness, judge.context_recall, judge.context_precision, judge.context_relevance, "
        "judge.faithfulness",
        "  not scored on any smoke case (composite.weights not configured): composite.trust, "
        "composite.trust_arithmetic",
    ]
    # only the first three cases reached the pipeline, once for each call
    assert sorted(line.split("\t")[1].split(":")[0] for line in calls.read_text().splitlines()) == [
        q for q in ("Q0", "Q1", "Q2") for _ in range(2)
    ]
    assert not (tmp_path / ".ragproof").exists()  # no artifact, no store


def test_smoke_shows_errors_warns_about_short_retrieval_and_exits_1(tmp_path: Path) -> None:
    cases = make_cases(4)
    cases[1]["question"] += " [fail]"
    for case in cases:
        case.pop("expected_answer", None)
    write_dataset(tmp_path, cases)
    write_config(tmp_path, run={"k": 20})
    proc = ragproof("validate", "-c", "ragproof.yaml", "--smoke", "4", cwd=tmp_path, env=_env())
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "smoke: 4 cases end to end, k 20: complete" in out
    assert "  error: case-001: adapter_error: retrieve raised RuntimeError: index offline\n" in out
    assert (
        "  not scored on any smoke case (case has no expected_answer): echo.exact_match, "
        "answer.exact_match, answer.token_f1, answer.numeric_match, diagnostics.lexical_context_precision, "
        "diagnostics.lexical_context_recall, diagnostics.failure_category, generation.completeness, "
        "judge.context_recall\n"
    ) in out
    # kinds the smoke cases do not have (the sizing before the smoke run names every gating metric)
    smoke = out[out.index("smoke: ") :]
    assert "injection" not in smoke and "unanswerable" not in smoke
    assert (
        "ragproof: warning: retrieve returned fewer than k=20 chunks on 3 of 3 case(s) (median 4): "
        "@k metrics count the missing ranks as misses; lower run.k or raise the retriever's own k\n"
    ) in proc.stderr


def test_smoke_exits_1_even_when_most_smoke_cases_fail(tmp_path: Path) -> None:
    # Formerly 4: the run's own exit for run.max_failure_rate leaked out of validate.
    cases = make_cases(4)
    for case in cases[:3]:
        case["question"] += " [fail]"
    write_dataset(tmp_path, cases)
    write_config(tmp_path)
    proc = ragproof("validate", "-c", "ragproof.yaml", "--smoke", "4", cwd=tmp_path, env=_env())
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.count("  error: case-00") == 3


def test_smoke_needs_a_positive_count(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(2))
    write_config(tmp_path)
    proc = ragproof("validate", "-c", "ragproof.yaml", "--smoke", "0", cwd=tmp_path, env=_env())
    assert proc.returncode == 64
    assert (
        proc.stderr
        == "ragproof: error: ragproof validate: argument --smoke: expected a positive integer, got '0'\n"
    )
