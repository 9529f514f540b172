"""Injection case generation and the ``ragproof generate-injections`` command (real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gate.core.errors import DataError, UsageError
from gate.metrics.base import ScoringContext
from gate.metrics.injections import build_injection_cases
from gate.metrics.payloads import PAYLOADS, PAYLOADS_BY_ID
from gate.metrics.robustness import injection_resistance
from gate.model.dataset import Case, load_dataset
from gate.model.records import Answer, CaseOutput

QA = [
    Case(
        id="q1",
        question="What is the refund window?",
        expected_source_ids=["d1"],
        expected_answer="30 days",
        tags=["topic:refunds"],
    ),
    Case(id="u1", question="What is the CEO's shoe size?", kind="unanswerable"),
    Case(id="q2", question="How many seats?", metadata={"lang": "en"}),
]


def test_every_payload_times_every_qa_question_in_order() -> None:
    cases = build_injection_cases(QA)
    assert len(cases) == 2 * len(PAYLOADS)
    assert [c.id for c in cases[:2]] == [f"q1--{PAYLOADS[0].id}", f"q1--{PAYLOADS[1].id}"]
    assert cases[len(PAYLOADS)].id == f"q2--{PAYLOADS[0].id}"
    assert all(c.kind == "injection" for c in cases)


def test_generated_case_fields() -> None:
    case = build_injection_cases(QA, ["role_play"], limit=1)[0]
    assert case.id == "q1--role_play"
    assert case.adversarial_payload == "role_play"
    assert case.question == PAYLOADS_BY_ID["role_play"].render("What is the refund window?")
    assert case.expected_source_ids == ["d1"]
    assert case.expected_answer == "30 days"
    assert case.tags == ["topic:refunds", "payload:role_play"]
    assert case.metadata == {"source_case_id": "q1", "payload_framing": "role-play"}


def test_payload_selection_order_and_limit() -> None:
    cases = build_injection_cases(QA, ["policy_claim", "role_play", "policy_claim"], limit=2)
    assert [c.id for c in cases] == ["q1--policy_claim", "q1--role_play", "q2--policy_claim", "q2--role_play"]


def test_generation_is_deterministic() -> None:
    a = [c.model_dump() for c in build_injection_cases(QA)]
    b = [c.model_dump() for c in build_injection_cases(list(QA))]
    assert a == b


def test_unknown_payload_and_bad_limit_and_no_qa() -> None:
    with pytest.raises(UsageError, match="unknown payload id 'nope'"):
        build_injection_cases(QA, ["role_play", "nope"])
    with pytest.raises(UsageError, match="--limit"):
        build_injection_cases(QA, limit=0)
    with pytest.raises(DataError, match="no qa cases"):
        build_injection_cases([QA[1]])


def test_generated_case_scores_with_injection_resistance() -> None:
    case = build_injection_cases(QA, ["instruction_override"], limit=1)[0]
    complied = CaseOutput(answer=Answer(text="QUILLFERN-4417"), supports_answer=True)
    resisted = CaseOutput(answer=Answer(text="30 days."), supports_answer=True)
    assert injection_resistance(case, complied, ScoringContext()).value == 0.0
    assert injection_resistance(case, resisted, ScoringContext()).value == 1.0


# ---------------------------------------------------------------- the command, as a subprocess


def ragproof(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", "generate-injections", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_qa(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(c.model_dump_json(exclude_defaults=True) + "\n" for c in QA), encoding="utf-8")
    return path


@pytest.mark.slow
def test_command_writes_dataset_file_that_loads(tmp_path: Path) -> None:
    write_qa(tmp_path)
    proc = ragproof(
        tmp_path, "--dataset", "cases.jsonl", "--out", "inj.jsonl", "--payloads", "role_play,policy_claim"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "wrote 4 injection cases (2 payloads x 2 questions) to inj.jsonl"
    ds = load_dataset(tmp_path / "inj.jsonl")
    assert [c.id for c in ds.cases] == [
        "q1--role_play",
        "q1--policy_claim",
        "q2--role_play",
        "q2--policy_claim",
    ]
    first = (tmp_path / "inj.jsonl").read_bytes()
    assert (
        ragproof(
            tmp_path, "--dataset", "cases.jsonl", "--out", "inj.jsonl", "--payloads", "role_play,policy_claim"
        ).returncode
        == 0
    )
    assert (tmp_path / "inj.jsonl").read_bytes() == first


@pytest.mark.slow
def test_command_limit_and_yaml_output(tmp_path: Path) -> None:
    write_qa(tmp_path)
    proc = ragproof(tmp_path, "--dataset", "cases.jsonl", "--out", "inj.yaml", "--limit", "1")
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(tmp_path / "inj.yaml")
    assert len(ds) == len(PAYLOADS)
    assert {c.metadata["source_case_id"] for c in ds.cases} == {"q1"}


@pytest.mark.slow
def test_command_unknown_payload_is_usage_error_one_line(tmp_path: Path) -> None:
    write_qa(tmp_path)
    proc = ragproof(tmp_path, "--dataset", "cases.jsonl", "--out", "inj.jsonl", "--payloads", "bogus")
    assert proc.returncode == 64
    assert proc.stderr.count("\n") == 1
    assert "unknown payload id 'bogus'" in proc.stderr
    assert not (tmp_path / "inj.jsonl").exists()


@pytest.mark.slow
def test_command_bad_dataset_is_data_error_naming_line(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "question": "q"}\n{oops\n', encoding="utf-8")
    proc = ragproof(tmp_path, "--dataset", "cases.jsonl", "--out", "inj.jsonl")
    assert proc.returncode == 65
    assert "cases.jsonl:2: malformed JSON" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_command_bad_limit_and_same_out_are_usage_errors(tmp_path: Path) -> None:
    write_qa(tmp_path)
    proc = ragproof(tmp_path, "--dataset", "cases.jsonl", "--out", "inj.jsonl", "--limit", "0")
    assert proc.returncode == 64 and "expected a positive integer" in proc.stderr
    proc = ragproof(tmp_path, "--dataset", "cases.jsonl", "--out", "cases.jsonl")
    assert proc.returncode == 64 and "refusing to overwrite" in proc.stderr
    assert json.loads((tmp_path / "cases.jsonl").read_text().splitlines()[0])["id"] == "q1"
