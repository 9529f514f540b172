"""Datasets of other tools converted into ragproof cases, with a report of what was mapped and dropped.

Formats (``--format``; ``auto`` picks by the input's shape):

* ``ragas`` / ``deepeval``: records (JSONL, a JSON list or a JSON object holding one list, or
  CSV) of an evaluation tool. The question is the first of ``question``, ``user_input``,
  ``input``, ``query``; the expected answer the first of ``ground_truth``, ``reference``,
  ``expected_output``, ``ground_truths`` (a list: its first item; more than one is reported as
  lost). Source ids: ragas' ``reference_context_ids`` (the ids of the reference chunks) and
  DeepEval's ``source_file`` (the document a golden was generated from) become
  ``expected_source_ids`` (the first present; with ``contexts_as_sources`` the contexts do,
  and these stay in ``metadata``). Reference contexts (``reference_contexts``, DeepEval's ``context``)
  are texts, not source ids: they are kept in ``metadata.reference_contexts`` (or, with
  ``contexts_as_sources``, become ``expected_source_ids`` for ``run.source_match: substring``).
  What the evaluated pipeline produced (``answer``, ``response``, ``actual_output``,
  ``contexts``, ``retrieved_contexts``, ``retrieved_context_ids``, ``retrieval_context``) is
  dropped: it is not ground truth.
* CSV cells of list fields: a JSON list, a Python list repr (a ragas testset's
  ``to_pandas().to_csv()``; read with :func:`ast.literal_eval`, which evaluates literals only),
  or texts joined by a delimiter (DeepEval's ``save_as(file_type="csv")`` joins with ``|``; its
  loader's default is ``;``). The delimiter is ``FieldMap.delimiter`` when given, else ``|``
  when a list field's cell holds one, else none (the cell is one text). A cell that looks like
  a list but is neither JSON nor a Python literal is reported as lost and kept verbatim in
  ``metadata.<field>_unparsed``.
* ``hf``: a Hugging Face ``datasets`` JSONL export (``Dataset.to_json``): the same, except
  that ``answer`` / ``answers`` (a string, a list, or SQuAD's ``{"text": [...]}``) are the
  expected answer, and ``context`` (the passage) goes to ``metadata.context``.
* ``beir``: a BEIR directory, ``queries.jsonl`` (``_id``, ``text``) and ``qrels/SPLIT.tsv``
  (``query-id``, ``corpus-id``, ``score``). Documents with a grade > 0 become
  ``expected_source_ids`` (highest grade first) and, when any grade differs from 1,
  ``relevance`` (graded nDCG); grade 0 judgments are dropped (unlisted ids grade 0 already);
  queries without a relevant document are skipped.
* ``trec``: queries as TSV (``qid<TAB>text``) or BEIR-style JSONL, and TREC qrels
  (``qid iteration docid grade``, whitespace-separated), mapped as for BEIR.

``id`` comes from ``id``, ``case_id``, ``_id``, ``qid``, ``question_id``, else ``case-NNNN``
(the record's 1-based position). Our own fields (``kind``, ``tags``, ``expected_source_ids``,
``relevance``, ``adversarial_payload``, ``metadata``) pass through; any other field is kept in
``metadata`` under its name. Field flags (``FieldMap``) name the fields of anything else.
Every case is validated as the dataset loader does; a bad record is a DataError naming the
file, the line (or record) and the field.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gate.boundary.files import read_text_file
from gate.core.errors import DataError, UsageError, clipped, json_problem, validated
from gate.model.dataset import Case

Format = Literal["auto", "ragas", "deepeval", "hf", "beir", "trec"]
FORMATS: tuple[str, ...] = ("auto", "ragas", "deepeval", "hf", "beir", "trec")

ID_FIELDS = ("id", "case_id", "_id", "qid", "question_id")
QUESTION_FIELDS = ("question", "user_input", "input", "query")
ANSWER_FIELDS = ("ground_truth", "reference", "expected_output", "ground_truths")
HF_ANSWER_FIELDS = ("answer", "answers")
REFERENCE_CONTEXT_FIELDS = ("reference_contexts", "context")
# Ground-truth source ids: ragas' reference chunk ids, DeepEval's source document.
SOURCE_ID_FIELDS = ("reference_context_ids", "source_file")
OUTPUT_FIELDS = (
    "answer",
    "response",
    "actual_output",
    "contexts",
    "retrieved_contexts",
    "retrieved_context_ids",
) + ("retrieval_context",)
# Fields holding a list, which a CSV cell carries as JSON, a Python repr or delimiter-joined text.
LIST_FIELDS = frozenset(REFERENCE_CONTEXT_FIELDS + SOURCE_ID_FIELDS + OUTPUT_FIELDS[3:] + ("ground_truths",))
EXAMPLE_CHARS = 60  # an example value in the report is cut to this many characters
OWN_FIELDS = ("kind", "tags", "expected_source_ids", "relevance", "adversarial_payload", "metadata")
# Fields that mark a record as an evaluation tool's rather than a plain dataset export.
TOOL_MARKERS = frozenset(
    ("user_input", "ground_truth", "ground_truths", "reference", "expected_output", "actual_output")
    + ("contexts", "retrieved_contexts", "retrieval_context", "reference_contexts", "response")
    + ("reference_context_ids", "retrieved_context_ids")
)
LIST_KEYS = ("data", "samples", "test_cases", "goldens", "examples", "rows", "records")
DROPPED_OUTPUT = "the evaluated pipeline's output, not ground truth"


@dataclass
class FieldMap:
    """Field names given on the command line (``--id``, ``--question``, ``--answer``, ``--sources``)."""

    id: str | None = None
    question: str | None = None
    answer: str | None = None
    sources: str | None = None
    contexts_as_sources: bool = False
    delimiter: str | None = None  # CSV list cells: the delimiter joining their texts (None: detect)


def example(value: Any) -> str:
    """``value`` for a report line: the repr of its text cut to ``EXAMPLE_CHARS`` characters."""
    return repr(
        clipped(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), EXAMPLE_CHARS)
    )


@dataclass
class ImportReport:
    """What was mapped (target <- source field: count), kept in metadata, dropped, lost and skipped.

    ``lost`` is what could not be carried over as it was (a list cell that did not parse,
    reference answers beyond the first): a count, the reason and one example each.
    """

    format: str
    mapped: Counter[str] = field(default_factory=Counter)
    kept: Counter[str] = field(default_factory=Counter)
    dropped: dict[str, tuple[int, str]] = field(default_factory=dict)
    lost: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    delimiter: str | None = None  # the one that split CSV list cells, when one did
    sources_from: set[str] = field(default_factory=set)  # the fields that gave expected_source_ids
    unused_contexts: int = 0  # cases with reference contexts but no expected_source_ids

    def drop(self, name: str, reason: str, n: int = 1) -> None:
        count, _ = self.dropped.get(name, (0, reason))
        self.dropped[name] = (count + n, reason)

    def lose(self, name: str, reason: str, value: Any) -> None:
        count, _, first = self.lost.get(name, (0, reason, example(value)))
        self.lost[name] = (count + 1, reason, first)

    def next_step(self) -> str | None:
        """How ``run.source_match`` must be set for the expected_source_ids to match, or None."""
        if self.sources_from & {"reference_contexts", "context"}:
            return "next: set run.source_match: substring (expected_source_ids are reference texts)"
        if "source_file" in self.sources_from:
            return (
                "next: set run.source_match: document and run.document_id_key to the chunk metadata key "
                "holding the file path (expected_source_ids are DeepEval source files)"
            )
        if "reference_context_ids" in self.sources_from:
            return (
                "next: set run.source_match: chunk (expected_source_ids are ragas reference chunk ids; "
                "document with run.document_id_key when they name documents)"
            )
        if self.unused_contexts:
            return (
                f"note: {self.unused_contexts} case(s) have reference contexts but no expected_source_ids, "
                "so retrieval is not measured on them; --contexts-as-sources makes the contexts expected "
                "sources (run.source_match: substring)"
            )
        return None

    def lines(self, cases: int, source: str, out: str) -> list[str]:
        out_lines = [f"imported {cases} case(s) from {source} (format {self.format}) into {out}"]
        out_lines += [f"  mapped   {m}: {n}" for m, n in sorted(self.mapped.items())]
        if self.delimiter:
            out_lines.append(f"  split    CSV list cells on {self.delimiter!r}")
        out_lines += [f"  kept     {k} -> metadata.{k}: {n}" for k, n in sorted(self.kept.items())]
        out_lines += [f"  dropped  {d}: {n} ({why})" for d, (n, why) in sorted(self.dropped.items())]
        out_lines += [
            f"  lost     {d}: {n} ({why}), e.g. {e}" for d, (n, why, e) in sorted(self.lost.items())
        ]
        out_lines += [f"  skipped  {s}" for s in self.skipped]
        step = self.next_step()
        return [*out_lines, step] if step else out_lines


# --------------------------------------------------------------------------- reading records


def _looks_like_list(value: str) -> bool:
    stripped = value.strip()
    return stripped.startswith("[") and stripped.endswith("]")


def _parse_list_cell(value: str) -> Any:
    """A CSV cell: a JSON list, else a Python list literal (``['a', 'b']``), else the string itself.

    ``ast.literal_eval`` evaluates literals only (no names, calls or operators), so a hostile
    cell cannot run code; one it cannot read (or nested too deep) stays a string.
    """
    if not _looks_like_list(value):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    return parsed if isinstance(parsed, list) else value


def read_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(where, record)`` pairs from a JSONL, JSON or CSV file; ``where`` is ``file:line`` or ``file record N``."""
    text = read_text_file(path, "dataset", DataError)
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames:
            raise DataError(f"{path}: CSV file has no header row")
        return [
            (f"{path}:{i + 2}", {k: _parse_list_cell(v) for k, v in row.items() if k is not None and v != ""})
            for i, row in enumerate(reader)
        ]
    stripped = text.lstrip()
    if path.suffix.lower() == ".json" or stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: {json_problem(exc)}") from None
        if isinstance(data, dict):
            lists = [k for k in LIST_KEYS if isinstance(data.get(k), list)] or [
                k for k, v in data.items() if isinstance(v, list)
            ]
            if len(lists) != 1:
                raise DataError(
                    f"{path}: expected a list of records, or an object holding one list (e.g. 'data')"
                )
            data = data[lists[0]]
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a list of records")
        records = [(f"{path} record {i + 1}", r) for i, r in enumerate(data)]
    else:
        records = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((f"{path}:{lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: {json_problem(exc)}") from None
    for where, record in records:
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected an object, got {type(record).__name__}")
    return records


# --------------------------------------------------------------------------- records -> cases


def _first(record: dict[str, Any], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if record.get(n) not in (None, "", [])), None)


def _answer_text(value: Any, where: str, name: str) -> str:
    if isinstance(value, dict) and isinstance(value.get("text"), list):  # SQuAD: {"text": [...], ...}
        value = value["text"]
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: {name}: expected a non-empty string (or a list of them)")
    return value


def _strings(value: Any, where: str, name: str) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if name in SOURCE_ID_FIELDS:  # ids may be numbers
        values = [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in values]
    if not all(isinstance(v, str) for v in values):
        raise DataError(f"{where}: {name}: expected a string or a list of strings")
    return [v for v in values if v.strip()]


def _list_cell(record: dict[str, Any], name: str, delimiter: str | None, report: ImportReport) -> None:
    """A CSV list field's string cell in place: split on ``delimiter``; an unparsed list is lost."""
    value = record.get(name)
    if not isinstance(value, str):
        return
    if _looks_like_list(value):
        # not mapped as if it were read: kept verbatim in metadata, and reported
        record[f"{name}_unparsed"] = record.pop(name)
        report.lose(name, f"neither a JSON nor a Python list; kept as metadata.{name}_unparsed", value)
    elif delimiter and delimiter in value:
        record[name] = [part.strip() for part in value.split(delimiter)]


def _field(record: dict[str, Any], given: str | None, names: tuple[str, ...], where: str) -> str | None:
    if given is None:
        return _first(record, names)
    if given not in record:
        keys = ", ".join(sorted(record)) or "none"
        raise DataError(f"{where}: no field {given!r} (fields: {keys})")
    return given


def record_case(
    record: dict[str, Any], where: str, position: int, style: str, fields: FieldMap, report: ImportReport
) -> Case:
    """One record as a validated case (``style``: ``tool`` or ``hf``); counts go to ``report``."""
    used: set[str] = set()
    case: dict[str, Any] = {}
    metadata: dict[str, Any] = {}

    id_field = _field(record, fields.id, ID_FIELDS, where)
    if id_field is not None:
        case["id"], used = record[id_field], used | {id_field}
        report.mapped[f"id <- {id_field}"] += 1
    else:
        case["id"] = f"case-{position:04d}"
    question = _field(record, fields.question, QUESTION_FIELDS, where)
    if question is None:
        keys = ", ".join(sorted(record)) or "none"
        raise DataError(
            f"{where}: no question (looked for {', '.join(QUESTION_FIELDS)}; fields: {keys}); name it with --question"
        )
    case["question"], used = record[question], used | {question}
    report.mapped[f"question <- {question}"] += 1

    answer_names = ANSWER_FIELDS + (HF_ANSWER_FIELDS if style == "hf" else ())
    answer = _field(record, fields.answer, answer_names, where)
    if answer is not None:
        case["expected_answer"] = _answer_text(record[answer], where, answer)
        used.add(answer)
        report.mapped[f"expected_answer <- {answer}"] += 1
        value = record[answer]
        others = value.get("text") if isinstance(value, dict) else value
        if isinstance(others, list) and len({str(v) for v in others}) > 1:
            extra = next(v for v in others if str(v) != str(others[0]))
            report.lose(f"{answer}[1:]", "reference answers beyond the first; expected_answer has one", extra)

    sources = (
        [_field(record, fields.sources, (), where)]
        if fields.sources is not None
        else [
            n
            for n in SOURCE_ID_FIELDS
            if style == "tool" and not fields.contexts_as_sources and record.get(n) not in (None, "", [])
        ][:1]
    )
    for source in sources:
        assert source is not None
        case["expected_source_ids"] = _strings(record[source], where, source)
        used.add(source)
        report.mapped[f"expected_source_ids <- {source}"] += 1
        report.sources_from.add(source)

    context_names = ("reference_contexts",) if style == "hf" else REFERENCE_CONTEXT_FIELDS
    for name in context_names:
        if name in record and name not in used and record[name] not in (None, "", []):
            contexts = _strings(record[name], where, name)
            used.add(name)
            if fields.contexts_as_sources and "expected_source_ids" not in case:
                case["expected_source_ids"] = contexts
                report.mapped[f"expected_source_ids <- {name}"] += 1
                report.sources_from.add(name)
            else:
                metadata["reference_contexts"] = contexts
                report.mapped[f"metadata.reference_contexts <- {name}"] += 1
                if "expected_source_ids" not in case and "expected_source_ids" not in record:
                    report.unused_contexts += 1

    for name, value in record.items():
        if name in used:
            continue
        if name in OWN_FIELDS:
            if name == "metadata" and isinstance(value, dict):
                metadata = {**value, **metadata}
            else:
                case[name] = value
            report.mapped[f"{name} <- {name}"] += 1
        elif style == "tool" and name in OUTPUT_FIELDS or style == "tool" and name in HF_ANSWER_FIELDS:
            report.drop(name, DROPPED_OUTPUT)
        else:
            metadata[name] = value
            report.kept[name] += 1
    if metadata:
        case["metadata"] = metadata
    return validated(Case, case, where, DataError)


def _style(fmt: str, records: list[tuple[str, dict[str, Any]]]) -> str:
    if fmt in ("ragas", "deepeval"):
        return "tool"
    if fmt == "hf":
        return "hf"
    return "tool" if any(TOOL_MARKERS & set(r) for _, r in records) else "hf"


def _delimiter(records: list[tuple[str, dict[str, Any]]], given: str | None) -> str | None:
    """``given``, else ``|`` when a list field's cell holds one (DeepEval's CSV), else None."""
    if given is not None:
        return given
    cells = (v for _, r in records for n, v in r.items() if n in LIST_FIELDS and isinstance(v, str))
    return "|" if any("|" in v and not _looks_like_list(v) for v in cells) else None


def import_records(path: Path, fmt: str, fields: FieldMap) -> tuple[list[Case], ImportReport]:
    records = read_records(path)
    style = _style(fmt, records)
    name = fmt if fmt != "auto" else ("ragas/deepeval" if style == "tool" else "hf")
    report = ImportReport(name)
    if path.suffix.lower() == ".csv":
        report.delimiter = _delimiter(records, fields.delimiter)
        list_fields = LIST_FIELDS | ({fields.sources} if fields.sources else set())
        for _, record in records:
            for list_field in sorted(list_fields & set(record)):
                _list_cell(record, list_field, report.delimiter, report)
    cases = [record_case(r, where, i + 1, style, fields, report) for i, (where, r) in enumerate(records)]
    return cases, report


# --------------------------------------------------------------------------- BEIR / TREC


def _queries(path: Path) -> dict[str, tuple[str, str]]:
    """query id -> (text, where) from BEIR JSONL (``_id``, ``text``) or TSV (``qid<TAB>text``)."""
    text = read_text_file(path, "queries", DataError)
    queries: dict[str, tuple[str, str]] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        if line.lstrip().startswith("{"):
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: {json_problem(exc)}") from None
            qid, body = raw.get("_id", raw.get("id")), raw.get("text", raw.get("query"))
            if qid is None or not isinstance(body, str):
                raise DataError(f'{where}: expected {{"_id": ..., "text": ...}}')
        else:
            qid, sep, body = line.partition("\t")
            if not sep:
                raise DataError(f"{where}: expected 'query id<TAB>query text'")
        queries[str(qid).strip()] = (body.strip(), where)
    return queries


def _qrels(path: Path, trec: bool) -> dict[str, dict[str, float]]:
    """query id -> {doc id: grade} from BEIR TSV (header allowed) or TREC (``qid iter docid grade``)."""
    text = read_text_file(path, "qrels", DataError)
    grades: dict[str, dict[str, float]] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split() if trec else line.split("\t")
        if not line.strip():
            continue
        expected = 4 if trec else 3
        if len(parts) != expected:
            shape = "qid iteration docid grade" if trec else "query-id<TAB>corpus-id<TAB>score"
            raise DataError(f"{path}:{lineno}: expected {expected} columns ({shape}), got {len(parts)}")
        qid, doc, grade = (parts[0], parts[2], parts[3]) if trec else (parts[0], parts[1], parts[2])
        try:
            value = float(grade)
        except ValueError:
            if lineno == 1 and not trec:
                continue  # the header row
            raise DataError(f"{path}:{lineno}: grade: expected a number, got {grade!r}") from None
        grades.setdefault(qid.strip(), {})[doc.strip()] = value
    return grades


def _beir_qrels(directory: Path, split: str | None) -> Path:
    folder = directory / "qrels"
    files = sorted(folder.glob("*.tsv")) if folder.is_dir() else []
    if split is not None:
        chosen = folder / f"{split}.tsv"
        if not chosen.is_file():
            names = ", ".join(f.stem for f in files) or "none"
            raise UsageError(f"--split {split}: no {chosen} (splits: {names})")
        return chosen
    if (folder / "test.tsv").is_file():
        return folder / "test.tsv"
    if len(files) == 1:
        return files[0]
    raise UsageError(f"{directory}: expected qrels/test.tsv or one qrels/*.tsv; choose with --split")


def import_judged(queries_path: Path, qrels_path: Path, fmt: str) -> tuple[list[Case], ImportReport]:
    """BEIR / TREC: one case per judged query with a relevant document."""
    queries = _queries(queries_path)
    grades = _qrels(qrels_path, trec=fmt == "trec")
    report = ImportReport(fmt)
    cases: list[Case] = []
    unknown = sorted(set(grades) - set(queries))
    if unknown:
        report.skipped.append(
            f"{len(unknown)} judged query id(s) not in {queries_path.name}, e.g. {unknown[0]!r}"
        )
    unjudged = 0
    for qid, (text, where) in queries.items():
        judged = grades.get(qid)
        if judged is None:
            unjudged += 1
            continue
        relevant = {doc: g for doc, g in judged.items() if g > 0}
        zero = len(judged) - len(relevant)
        if zero:
            report.drop("grade <= 0 judgments", "unlisted ids have grade 0 already", zero)
        if not relevant:
            report.skipped.append(f"query {qid!r}: no document with a grade > 0")
            continue
        ranked = sorted(relevant, key=lambda d: (-relevant[d], d))
        case: dict[str, Any] = {"id": qid, "question": text, "expected_source_ids": ranked}
        report.mapped["id <- query id"] += 1
        report.mapped["question <- query text"] += 1
        report.mapped["expected_source_ids <- qrels grade > 0"] += 1
        if any(g != 1 for g in relevant.values()):
            case["relevance"] = {d: relevant[d] for d in ranked}
            report.mapped["relevance <- qrels grades"] += 1
        cases.append(validated(Case, case, where, DataError))
    if unjudged:
        report.skipped.append(f"{unjudged} query(ies) without judgments in {qrels_path.name}")
    return cases, report


def detect_format(source: Path) -> str:
    """``beir`` for a directory with queries.jsonl, else ``auto`` (records)."""
    if source.is_dir():
        if (source / "queries.jsonl").is_file():
            return "beir"
        raise UsageError(f"{source}: a directory, but not a BEIR one (no queries.jsonl)")
    return "auto"


def import_dataset(
    source: Path, fmt: str, fields: FieldMap, *, qrels: Path | None = None, split: str | None = None
) -> tuple[list[Case], ImportReport]:
    """The cases of ``source`` in ``fmt`` and the report; DataError/UsageError with one line."""
    if not source.exists():
        raise UsageError(f"{source}: not found")
    if fmt == "auto":
        fmt = detect_format(source)
    if fmt == "beir":
        if not source.is_dir():
            raise UsageError(f"{source}: --format beir expects the dataset directory (queries.jsonl, qrels/)")
        cases, report = import_judged(source / "queries.jsonl", qrels or _beir_qrels(source, split), "beir")
    elif fmt == "trec":
        if qrels is None:
            raise UsageError("--format trec needs --qrels FILE (qid iteration docid grade)")
        cases, report = import_judged(source, qrels, "trec")
    else:
        cases, report = import_records(source, fmt, fields)
    seen: dict[str, int] = {}
    for i, case in enumerate(cases):
        if case.id in seen:
            raise DataError(
                f"{source}: duplicate case id {case.id!r} (records {seen[case.id] + 1} and {i + 1})"
            )
        seen[case.id] = i
    if not cases:
        raise DataError(f"{source}: no case could be imported")
    return cases, report


def case_line(case: Case) -> str:
    """One JSONL line: the case's set fields, in the model's field order."""
    return json.dumps(case.model_dump(exclude_defaults=True), ensure_ascii=False) + "\n"
