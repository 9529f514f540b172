"""Evaluation cases: the model, loading JSONL/YAML with located errors, and the dataset hash.

The dataset sha256 is computed over the canonical content: every case validated, dumped with
defaults filled in, keys sorted, compact separators, in file order. Reformatting a file
(whitespace, key order, JSONL vs YAML) leaves it unchanged; changing any value changes it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import ConfigDict, Field, field_validator

from gate.boundary.files import read_text_file
from gate.core.errors import DataError, json_problem, location, validated, yaml_problem
from gate.core.strict import StrictModel
from gate.core.yamllines import YamlLines

CaseKind = Literal["qa", "unanswerable", "injection"]

# Other evaluation tools' field names (RAGAS, DeepEval, TruLens, Phoenix, hand-made sets) and
# what ragproof calls the same thing; an unknown field with one of these names gets the hint.
_REFERENCE = "the reference answer is expected_answer"
_RUNTIME_ANSWER = (
    "the pipeline's answer comes from the adapter at run time; the reference answer is expected_answer"
)
_RUNTIME_CONTEXT = (
    "retrieved chunks come from the adapter at run time; the sources a good retrieval finds "
    "are expected_source_ids"
)
_QUESTION = "the question is question"
_SOURCES = "the ids of the chunks or documents that answer the question are expected_source_ids"
# Appended to the hints for whole datasets of other tools, which need converting, not renaming.
_IMPORT = " (ragproof import converts RAGAS, DeepEval, Hugging Face, BEIR and TREC datasets)"
_FOREIGN_GROUPS: dict[str, tuple[str, ...]] = {
    _REFERENCE: (
        "ground_truth",
        "ground_truths",
        "reference",
        "reference_answer",
        "expected_output",
        "gold_answer",
        "golden_answer",
        "target",
        "label",
    ),
    _RUNTIME_ANSWER: ("answer", "response", "actual_output", "output", "prediction"),
    _RUNTIME_CONTEXT: ("contexts", "context", "retrieval_context", "retrieved_contexts", "documents"),
    _QUESTION: ("query", "input", "user_input", "prompt"),
    _SOURCES: (
        "reference_contexts",
        "relevant_ids",
        "relevant_docs",
        "doc_ids",
        "expected_ids",
        "reference_ids",
    ),
}
FOREIGN_CASE_FIELDS: dict[str, str] = {
    **{name: hint + _IMPORT for hint, names in _FOREIGN_GROUPS.items() for name in names},
    "type": "the case type is kind (qa, unanswerable or injection)",
    "labels": "labels are tags (a list of strings, name:value or plain)",
}


# The most cases a dataset (and so a run artifact) may hold: far above what a gate runs on a pull
# request, and a bound on the memory of reading an artifact (~1 KB a row as parsed), which a
# pull request may have written.
MAX_CASES = 200_000


class Case(StrictModel):
    """One evaluation case. Unknown fields are rejected to catch typos like ``expected_source_id``."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # hashable, shared across workers
    FOREIGN_KEYS: ClassVar[dict[str, str]] = FOREIGN_CASE_FIELDS

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    kind: CaseKind = "qa"
    expected_source_ids: list[str] = Field(default_factory=list)
    expected_answer: str | None = None
    adversarial_payload: str | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # graded relevance: source id -> grade (> 0 relevant); enables graded nDCG
    relevance: dict[str, float] | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_is_string(cls, v: Any) -> Any:
        # Integers are common in hand-written files; accept them as their decimal string.
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return v

    @field_validator("question")
    @classmethod
    def _question_has_text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is blank")
        return v

    @field_validator("expected_source_ids")
    @classmethod
    def _ids_not_empty(cls, v: list[str]) -> list[str]:
        # an empty string would match every chunk text in substring mode
        if any(not item for item in v):
            raise ValueError("expected_source_ids must not contain an empty string")
        return v

    @field_validator("relevance")
    @classmethod
    def _grades_finite(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for key, grade in (v or {}).items():
            if not math.isfinite(grade) or grade < 0:
                raise ValueError(f"relevance grade of {key!r} must be a finite number >= 0, got {grade}")
        return v


@dataclass(frozen=True)
class Dataset:
    path: str
    cases: tuple[Case, ...]
    sha256: str
    version: str | None = None

    def __len__(self) -> int:
        return len(self.cases)

    def by_id(self) -> dict[str, Case]:
        return {c.id: c for c in self.cases}


def canonical_case_json(case: Case) -> str:
    return json.dumps(case.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def dataset_lines(cases: tuple[Case, ...] | list[Case]) -> str:
    """The ``dataset.jsonl`` text: each case with its defaults, keys sorted (as hashed)."""
    return "".join(canonical_case_json(case) + "\n" for case in cases)


def dataset_sha256(cases: tuple[Case, ...] | list[Case]) -> str:
    """sha256 of :func:`dataset_lines` (run.json's ``dataset.sha256``)."""
    return hashlib.sha256(dataset_lines(cases).encode("utf-8")).hexdigest()


LineOf = Callable[[tuple[str | int, ...]], int | None]


def _validate_case(raw: Any, where: str, line_of: LineOf | None = None) -> Case:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: expected a JSON object with 'id' and 'question', got {type(raw).__name__}")
    return validated(Case, raw, where, line_of=line_of)


def jsonl_records(path: Path | str, text: str) -> list[tuple[Any, str]]:
    """JSONL text as (parsed line, ``path:LINE``) pairs; DataError naming the line when malformed."""
    records = []
    # Split on "\n" only: str.splitlines() would also split inside a JSON string holding a raw
    # U+0085 or U+2028, which json.dumps(ensure_ascii=False) writes unescaped.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append((json.loads(line), f"{path}:{lineno}"))
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}: {json_problem(exc)}") from None
        except RecursionError:  # the parser's own depth limit (Python's recursion limit)
            raise DataError(f"{path}:{lineno}: JSON nested too deeply") from None
    return records


def _read_yaml(path: Path, text: str) -> tuple[list[tuple[Any, str]], list[LineOf | None], str | None]:
    """(records, a line locator per record, the file's version).

    An item's errors name the line of the failing field (composed node marks); ``case #N``
    when the node cannot be found.
    """
    try:
        data, lines = YamlLines.load(text)
    except yaml.YAMLError as exc:
        where, problem = yaml_problem(path, exc)
        raise DataError(f"{where}: invalid YAML ({problem})") from None
    items_node = lines.root
    version = None
    if isinstance(data, dict):
        version = data.get("version")
        data = data.get("cases")
        if data is None:
            raise DataError(f"{path}: expected a list of cases or a mapping with a 'cases' list")
        found = YamlLines.child(items_node, "cases") if items_node is not None else None
        items_node = found[1] if found else None
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of cases")
    records: list[tuple[Any, str]] = []
    locators: list[LineOf | None] = []
    for i, item in enumerate(data):
        found = YamlLines.child(items_node, i) if items_node is not None else None
        if found is None:
            records.append((item, f"{path}: case #{i + 1}"))
            locators.append(None)
            continue
        records.append((item, str(path)))
        locators.append(functools.partial(lines.line_of, node=found[1]))
    return records, locators, (str(version) if version is not None else None)


def parse_cases(
    records: list[tuple[Any, str]], locators: Sequence[LineOf | None] | None = None
) -> tuple[Case, ...]:
    """Validated cases; ``locators[i]`` (optional) names the source line of record i's fields.

    More than :data:`MAX_CASES` records is a DataError naming the first one beyond it.
    """
    if len(records) > MAX_CASES:
        raise DataError(f"{records[MAX_CASES][1]}: more than the {MAX_CASES:,} cases a dataset may hold")
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for i, (raw, where) in enumerate(records):
        line_of = locators[i] if locators is not None else None
        case = _validate_case(raw, where, line_of)
        if line_of is not None:
            where = location(where, line_of(("id",)))
        if case.id in seen:
            raise DataError(f"{where}: id: duplicate case id {case.id!r} (first at {seen[case.id]})")
        seen[case.id] = where
        cases.append(case)
    return tuple(cases)


def load_dataset(path: str | Path, version: str | None = None) -> Dataset:
    """Load a dataset from ``.jsonl`` (one case a line) or ``.yaml``/``.yml``/``.json`` (a list).

    Raises DataError naming the file and line (of the case in JSONL, of the field in YAML) and
    what was expected.
    An empty dataset is an error: a gate over zero cases decides nothing.
    """
    p = Path(path)
    text = read_text_file(p, "dataset")
    file_version = None
    locators: list[LineOf | None] | None = None
    if p.suffix.lower() in {".yaml", ".yml", ".json"}:
        records, locators, file_version = _read_yaml(p, text)
    else:
        records = jsonl_records(p, text)
    cases = parse_cases(records, locators)
    if not cases:
        raise DataError(f"{p}: dataset has no cases")
    return Dataset(path=str(path), cases=cases, sha256=dataset_sha256(cases), version=version or file_version)


def write_cases(path: Path, cases: list[Case] | tuple[Case, ...]) -> None:
    """Write cases as a dataset file: JSONL, or YAML (``cases:`` list) for ``.yaml``/``.yml``.

    Fields left at their defaults are omitted. The file is replaced atomically, so a reader
    never sees half a dataset; loading it back gives the same cases and the same sha256.
    """
    records = [case.model_dump(mode="json", exclude_defaults=True) for case in cases]
    if path.suffix.lower() in {".yaml", ".yml"}:
        # allow_unicode=True lets PyYAML emit U+0085 / U+2028 raw inside single-quoted
        # scalars, which its own loader then folds to spaces: escaped output round-trips.
        text = yaml.safe_dump({"cases": records}, sort_keys=False, allow_unicode=False)
    else:
        text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(f"{path}: cannot write dataset: {exc}") from None
