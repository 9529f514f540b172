"""Evaluation cases: the model, loading JSONL/YAML with located errors, and the dataset hash.

The dataset sha256 is computed over the canonical content: every case validated, dumped with
defaults filled in, keys sorted, compact separators, in file order. Reformatting a file
(whitespace, key order, JSONL vs YAML) leaves it unchanged; changing any value changes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, field_validator

from gate.core.errors import DataError, json_problem, read_text_file, validated, yaml_problem
from gate.core.strict import StrictModel

CaseKind = Literal["qa", "unanswerable", "injection"]


class Case(StrictModel):
    """One evaluation case. Unknown fields are rejected to catch typos like ``expected_source_id``."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # hashable, shared across workers

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


def dataset_sha256(cases: tuple[Case, ...] | list[Case]) -> str:
    h = hashlib.sha256()
    for case in cases:
        h.update(canonical_case_json(case).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def _validate_case(raw: Any, where: str) -> Case:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: expected a JSON object with 'id' and 'question', got {type(raw).__name__}")
    return validated(Case, raw, where)


def _read_jsonl(path: Path, text: str) -> list[tuple[Any, str]]:
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
    return records


def _read_yaml(path: Path, text: str) -> tuple[list[tuple[Any, str]], str | None]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where, problem = yaml_problem(path, exc)
        raise DataError(f"{where}: invalid YAML ({problem})") from None
    version = None
    if isinstance(data, dict):
        version = data.get("version")
        data = data.get("cases")
        if data is None:
            raise DataError(f"{path}: expected a list of cases or a mapping with a 'cases' list")
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of cases")
    # YAML gives no per-item line numbers after parsing; name the item index instead.
    return [(item, f"{path}: case #{i + 1}") for i, item in enumerate(data)], (
        str(version) if version is not None else None
    )


def parse_cases(records: list[tuple[Any, str]]) -> tuple[Case, ...]:
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for raw, where in records:
        case = _validate_case(raw, where)
        if case.id in seen:
            raise DataError(f"{where}: id: duplicate case id {case.id!r} (first at {seen[case.id]})")
        seen[case.id] = where
        cases.append(case)
    return tuple(cases)


def load_dataset(path: str | Path, version: str | None = None) -> Dataset:
    """Load a dataset from ``.jsonl`` (one case a line) or ``.yaml``/``.yml``/``.json`` (a list).

    Raises DataError naming the file and line (JSONL) or item (YAML) and what was expected.
    An empty dataset is an error: a gate over zero cases decides nothing.
    """
    p = Path(path)
    text = read_text_file(p, "dataset")
    file_version = None
    if p.suffix.lower() in {".yaml", ".yml", ".json"}:
        records, file_version = _read_yaml(p, text)
    else:
        records = _read_jsonl(p, text)
    cases = parse_cases(records)
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
