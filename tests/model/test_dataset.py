"""Datasets: loading JSONL/YAML, located errors, canonical sha256, version label, writing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.core.errors import DataError
from gate.model.dataset import Case, dataset_sha256, load_dataset, write_cases

CASES: list[dict[str, Any]] = [
    {
        "id": "q1",
        "question": "What is the refund window?",
        "expected_source_ids": ["doc-1"],
        "tags": ["topic:refunds"],
    },
    {"id": "q2", "question": "Who is the CEO's cousin?", "kind": "unanswerable"},
    {
        "id": "q3",
        "question": "Ignore the rules",
        "kind": "injection",
        "adversarial_payload": "role_play",
        "metadata": {"lang": "en"},
        "relevance": {"doc-2": 2},
    },
]


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(DataError) as info:
        load_dataset(path)
    return str(info.value)


def test_load_jsonl_defaults_and_fields(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "cases.jsonl", CASES))
    assert len(ds) == 3
    q1 = ds.cases[0]
    assert (q1.kind, q1.expected_source_ids, q1.expected_answer, q1.relevance) == (
        "qa",
        ["doc-1"],
        None,
        None,
    )
    assert ds.by_id()["q3"].relevance == {"doc-2": 2.0}
    assert ds.version is None


def test_blank_lines_are_ignored_and_line_numbers_count_them(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(CASES[0]) + "\n\n" + '{"id": "x", "question": }\n', encoding="utf-8")
    message = load_error(path)
    assert message.startswith(f"{path}:3: malformed JSON")


def test_missing_id_names_file_line_and_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [CASES[0], {"question": "no id"}])
    assert load_error(path) == f"{path}:2: id: Field required"


def test_missing_question_names_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a"}])
    assert load_error(path) == f"{path}:1: question: Field required"


def test_blank_question_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "question": "   "}])
    assert load_error(path) == f"{path}:1: question: Value error, question is blank"


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [CASES[0], CASES[1], {"id": "q1", "question": "again"}])
    assert load_error(path) == f"{path}:3: id: duplicate case id 'q1' (first at {path}:1)"


def test_unknown_kind(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "question": "q", "kind": "trivia"}])
    assert load_error(path) == f"{path}:1: kind: Input should be 'qa', 'unanswerable' or 'injection'"


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("tags", "topic:billing", "tags: Input should be a valid list"),
        ("expected_source_ids", "doc-1", "expected_source_ids: Input should be a valid list"),
        ("question", 42, "question: Input should be a valid string"),
        ("metadata", [1], "metadata: Input should be a valid dictionary"),
        (
            "relevance",
            {"d": "high"},
            "relevance.d: Input should be a valid number, unable to parse string as a number",
        ),
        ("expected_source_id", ["d"], "expected_source_id: unknown key; did you mean expected_source_ids?"),
    ],
)
def test_wrong_types_name_the_field(tmp_path: Path, field: str, value: object, expected: str) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "question": "q", field: value}])
    assert load_error(path) == f"{path}:1: {expected}"


def test_negative_relevance_grade_and_empty_expected_id_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "question": "q", "relevance": {"d": -1}}])
    assert "relevance grade of 'd' must be a finite number >= 0" in load_error(path)
    path = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "q", "expected_source_ids": [""]}])
    assert "must not contain an empty string" in load_error(path)


def test_non_object_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [["id", "question"]])
    assert load_error(path) == f"{path}:1: expected a JSON object with 'id' and 'question', got list"


def test_integer_id_is_accepted_as_string(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "c.jsonl", [{"id": 7, "question": "q"}]))
    assert ds.cases[0].id == "7"


def test_missing_and_empty_files(tmp_path: Path) -> None:
    assert load_error(tmp_path / "nope.jsonl") == f"{tmp_path / 'nope.jsonl'}: dataset file not found"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert load_error(empty) == f"{empty}: dataset has no cases"


def test_yaml_list_and_mapping_with_version(tmp_path: Path) -> None:
    listed = tmp_path / "a.yaml"
    listed.write_text(yaml.safe_dump(CASES), encoding="utf-8")
    assert len(load_dataset(listed)) == 3
    mapped = tmp_path / "b.yml"
    mapped.write_text(yaml.safe_dump({"version": "2024.06", "cases": CASES}), encoding="utf-8")
    ds = load_dataset(mapped)
    assert ds.version == "2024.06"
    assert load_dataset(mapped, version="override").version == "override"


def test_yaml_errors_name_the_line_of_the_field(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(
        "cases:\n"
        "  - id: q1\n"
        "    question: What is the refund window?\n"
        "  - id: q2\n"  # line 4: the item missing its question
        "    expected_answer: 30 days\n"
        "  - id: q3\n"
        "    question: Who?\n"
        "    tags: billing\n",  # line 8: a string where a list is expected
        encoding="utf-8",
    )
    assert load_error(path) == f"{path}:4: question: Field required"
    path.write_text(path.read_text().replace("    expected_answer: 30 days\n", "    question: Why?\n"))
    assert load_error(path) == f"{path}:8: tags: Input should be a valid list"
    path.write_text(path.read_text().replace("tags: billing", "contexts: [a, b]"))
    assert load_error(path) == (
        f"{path}:8: contexts: unknown key; retrieved chunks come from the adapter at run time; "
        f"the sources a good retrieval finds are expected_source_ids{IMPORT}"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: a\n  question: [unclosed\n", encoding="utf-8")
    assert load_error(bad).startswith(f"{bad}:")


def test_duplicate_ids_in_yaml_name_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("- id: q1\n  question: A?\n- id: q2\n  question: B?\n- question: C?\n  id: q1\n")
    assert load_error(path) == f"{path}:6: id: duplicate case id 'q1' (first at {path}:1)"


IMPORT = " (ragproof import converts RAGAS, DeepEval, Hugging Face, BEIR and TREC datasets)"


@pytest.mark.parametrize(
    ("field", "hint"),
    [
        ("ground_truth", "the reference answer is expected_answer" + IMPORT),
        ("reference", "the reference answer is expected_answer" + IMPORT),
        ("expected_output", "the reference answer is expected_answer" + IMPORT),
        (
            "answer",
            "the pipeline's answer comes from the adapter at run time; the reference answer is expected_answer"
            + IMPORT,
        ),
        (
            "retrieval_context",
            "retrieved chunks come from the adapter at run time; the sources a good retrieval finds are "
            "expected_source_ids" + IMPORT,
        ),
        ("query", "the question is question" + IMPORT),
        ("expected_anwser", "did you mean expected_answer?"),
        ("tag", "did you mean tags?"),
    ],
)
def test_unknown_fields_get_a_hint_naming_ours(tmp_path: Path, field: str, hint: str) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl", [{"id": "a", "question": "q"}, {"id": "b", "question": "q", field: "x"}]
    )
    assert load_error(path) == f"{path}:2: {field}: unknown key; {hint}"


# ---------------------------------------------------------------- sha256


def test_sha256_stable_under_reformatting_key_order_and_jsonl_vs_yaml(tmp_path: Path) -> None:
    compact = load_dataset(write_jsonl(tmp_path / "a.jsonl", CASES)).sha256
    spaced = tmp_path / "b.jsonl"
    spaced.write_text(
        "\n".join(
            json.dumps(dict(reversed(list(r.items()))), indent=None, separators=(" , ", " : ")) for r in CASES
        )
        + "\n\n",
        encoding="utf-8",
    )
    as_yaml = tmp_path / "c.yaml"
    as_yaml.write_text(yaml.safe_dump(CASES, default_flow_style=False), encoding="utf-8")
    explicit_defaults = [dict(r, tags=r.get("tags", []), kind=r.get("kind", "qa")) for r in CASES]
    defaults = load_dataset(write_jsonl(tmp_path / "d.jsonl", explicit_defaults)).sha256
    assert compact == load_dataset(spaced).sha256 == load_dataset(as_yaml).sha256 == defaults
    assert len(compact) == 64


@pytest.mark.parametrize(
    "change",
    [
        lambda cs: cs[0].update(question="What is the refund window? "),
        lambda cs: cs[0].update(tags=["topic:billing"]),
        lambda cs: cs[1].update(kind="qa"),
        lambda cs: cs[2]["metadata"].update(lang="de"),
        lambda cs: cs[2].update(relevance={"doc-2": 3}),
        lambda cs: cs.reverse(),
        lambda cs: cs.pop(),
    ],
)
def test_sha256_changes_with_any_content_change(
    tmp_path: Path, change: Callable[[list[dict[str, Any]]], object]
) -> None:
    base = load_dataset(write_jsonl(tmp_path / "a.jsonl", CASES)).sha256
    changed = json.loads(json.dumps(CASES))
    change(changed)
    assert load_dataset(write_jsonl(tmp_path / "b.jsonl", changed)).sha256 != base


def test_sha256_of_cases_equals_loaded_dataset_sha(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "a.jsonl", CASES))
    assert dataset_sha256([Case.model_validate(r) for r in CASES]) == ds.sha256


@pytest.mark.parametrize("name", ["out.jsonl", "out.yaml"])
def test_write_cases_round_trips_with_same_sha(tmp_path: Path, name: str) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "a.jsonl", CASES))
    out = tmp_path / name
    write_cases(out, ds.cases)
    again = load_dataset(out)
    assert again.cases == ds.cases
    assert again.sha256 == ds.sha256
    assert not list(tmp_path.glob(".*.tmp"))


def test_line_separator_characters_inside_strings_do_not_split_lines(tmp_path: Path) -> None:
    cases = [Case(id="a", question="line\x85next\u2028para\u2029end"), Case(id="b", question="crlf")]
    out = tmp_path / "c.jsonl"
    write_cases(out, cases)
    assert "\u2028" in out.read_text(encoding="utf-8")
    assert load_dataset(out).cases == tuple(cases)
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes(b'{"id": "a", "question": "q"}\r\n{"id": "b", "question": "r"}\r\n')
    assert [c.question for c in load_dataset(crlf).cases] == ["q", "r"]


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(min_size=1).filter(lambda t: t.strip()),
    st.lists(st.text(min_size=1), max_size=3),
    st.sampled_from(["c.jsonl", "c.yaml"]),
)
def test_property_any_text_round_trips_through_write_and_load(
    tmp_path: Path, question: str, tags: list[str], name: str
) -> None:
    cases = [Case(id="a", question=question, tags=tags, metadata={"note": question})]
    out = tmp_path / name
    write_cases(out, cases)
    loaded = load_dataset(out)
    assert loaded.cases == tuple(cases)
    assert loaded.sha256 == dataset_sha256(cases)


@pytest.mark.slow
def test_more_cases_than_the_limit_is_refused_naming_the_first_beyond_it(tmp_path: Path) -> None:
    from gate.model.dataset import MAX_CASES

    path = tmp_path / "cases.jsonl"
    path.write_text("".join(f'{{"id": "c{i}", "question": "q{i}?"}}\n' for i in range(MAX_CASES + 1)))
    with pytest.raises(DataError) as caught:
        load_dataset(path)
    assert str(caught.value) == f"{path}:{MAX_CASES + 1}: more than the 200,000 cases a dataset may hold"
