"""Writing and reading run artifacts (directories or ``.zip`` files of them).

Writing is atomic (a staged sibling directory renamed into place). Reading validates every
file strictly against :mod:`gate.model.artifact`, caps sizes and refuses an unknown newer
schema: artifacts may come from a pull request or a download.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from gate.boundary.files import copy_capped, open_directory, write_new_file
from gate.core.errors import DataError, UsageError, json_problem, pydantic_message
from gate.model.artifact import (
    DATASET_FILE,
    MAX_DATASET_BYTES,
    ROWS_FILE,
    RUN_FILE,
    SCHEMA_VERSION,
    SUMMARY_FILE,
    Row,
    RunArtifact,
    RunMeta,
    Summary,
)
from gate.model.dataset import MAX_CASES, Case, dataset_lines, dataset_sha256, jsonl_records, parse_cases
from gate.model.records import MetricResult
from gate.run.zipread import open_zip, read_zip_member, zip_member_stream, zip_members

# Caps for reading an artifact, which may come from an untrusted pull request. Every cap
# counts bytes as read (decompressed), never a size the archive declares.
MAX_FILE_BYTES: dict[str, int] = {RUN_FILE: 4_000_000, ROWS_FILE: 1_000_000_000, SUMMARY_FILE: 100_000_000}
# One line of rows.jsonl (a row with k chunks and an answer); longer is refused before it is
# held whole.
MAX_ROW_LINE_BYTES = 32_000_000
# Blank lines of rows.jsonl are skipped, up to this many: a file of nothing but newlines
# would otherwise cost a loop turn per byte.
MAX_BLANK_LINES = 10_000
# rows.jsonl is read in pieces of this size.
READ_CHUNK_BYTES = 1 << 20
# Relative slack of a metric's range for float rounding.
RANGE_SLACK = 1e-9
# Bounds for a metric the registry does not know: any finite value.
_FINITE = (-math.inf, math.inf)
# Written beside the three files when present (the command adapter's stderr); capped.
MAX_EXTRA_FILE_BYTES = 5_000_000


# -- writing ------------------------------------------------------------------------------


def new_run_id() -> str:
    """A sortable unique id: UTC time plus random hex, e.g. ``20261201T070102Z-3fa9c2d1``."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(4)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _json_document(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def check_out_dir(out_dir: Path) -> None:
    """UsageError unless ``out_dir`` is absent, empty or a previous artifact (safe to replace)."""
    # Replacing a directory is only safe when it is a previous artifact (or empty): a typo
    # such as `--out .` must never delete a checkout.
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if out_dir.is_symlink() or not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a directory")
    if any(out_dir.iterdir()) and not (out_dir / RUN_FILE).is_file():
        raise UsageError(
            f"--out {out_dir}: directory exists and is not a run artifact; refusing to replace it"
        )


def write_artifact(
    out_dir: Path,
    meta: RunMeta,
    rows: list[Row],
    summary: Summary,
    *,
    extra_files: dict[str, Path] | None = None,
    cases: tuple[Case, ...] | list[Case] | None = None,
) -> Path:
    """Write ``run.json``, ``rows.jsonl``, ``summary.json`` (and ``extra_files``) to ``out_dir``.

    ``cases`` (the run's dataset) go to ``dataset.jsonl`` as canonical case JSON, one a line.

    Atomic: the files are written and fsynced in a temporary sibling directory which is then
    renamed into place, so readers see the old artifact or the new one, never a mix. A
    previous artifact at ``out_dir`` is replaced; any other non-empty directory is refused.

    Every step goes through descriptors (:mod:`gate.boundary.files`): the parent is opened
    component by component without following links (in the action: refused when a link or a
    directory the pipeline user may write), files are created with ``O_EXCL | O_NOFOLLOW``,
    renames and the removal of the replaced artifact are relative to the parent's descriptor,
    and an extra file is copied from a regular file opened with ``O_NOFOLLOW``.
    """
    out_dir = Path(out_dir)
    check_out_dir(out_dir)
    parent = open_directory(out_dir.parent)
    staging = f".{out_dir.name}.tmp-{secrets.token_hex(4)}"
    try:
        os.mkdir(staging, 0o755, dir_fd=parent)
        directory = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        try:
            os.fchmod(directory, 0o755)  # whatever the umask
            files = {
                RUN_FILE: _json_document(meta),
                ROWS_FILE: "".join(row.model_dump_json() + "\n" for row in rows),
                SUMMARY_FILE: _json_document(summary),
            }
            if cases is not None:
                files[DATASET_FILE] = dataset_lines(cases)
            for name, text in files.items():
                write_new_file(directory, name, text.encode("utf-8"), sync=True)
            for name, source in (extra_files or {}).items():
                copy_capped(source, directory, name, MAX_EXTRA_FILE_BYTES)
        finally:
            os.close(directory)
        try:
            existing = stat.S_ISDIR(os.lstat(out_dir.name, dir_fd=parent).st_mode)
        except FileNotFoundError:
            existing = False
        if existing:
            retired = f".{out_dir.name}.old-{secrets.token_hex(4)}"
            os.rename(out_dir.name, retired, src_dir_fd=parent, dst_dir_fd=parent)
            os.rename(staging, out_dir.name, src_dir_fd=parent, dst_dir_fd=parent)
            shutil.rmtree(retired, ignore_errors=True, dir_fd=parent)
        else:
            os.rename(staging, out_dir.name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True, dir_fd=parent)
        raise
    finally:
        os.close(parent)
    return out_dir


# -- reading ------------------------------------------------------------------------------

_D = TypeVar("_D", RunMeta, Summary)


def _validation_error(exc: ValidationError, text: str | bytes, where: str) -> DataError:
    """The one-line error for ``text`` failing validation (parsed again for JSON syntax details).

    Nesting beyond the JSON parser's depth limit is named as such: parsing it again with the
    standard library would recurse until Python's own limit.
    """
    invalid = [e for e in exc.errors() if e.get("type") == "json_invalid"]
    if invalid:
        if "recursion limit" in str(invalid[0].get("msg", "")):
            return DataError(f"{where}: JSON nested too deeply")
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                return DataError(f"{where}: not UTF-8 text")
        try:
            json.loads(text)
        except json.JSONDecodeError as decode_error:
            return DataError(f"{where}: {json_problem(decode_error)}")
        except RecursionError:
            return DataError(f"{where}: JSON nested too deeply")
        return DataError(f"{where}: malformed JSON")
    return DataError(f"{where}: {pydantic_message(exc)}")


def _newer_schema(version: object, where: str) -> DataError | None:
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return DataError(
            f"{where}: schema_version {version} is newer than this ragproof reads ({SCHEMA_VERSION}); "
            "upgrade ragproof to read this artifact"
        )
    return None


def _validated_document(model: type[_D], text: str, where: str) -> _D:
    """``text`` validated strictly as ``model``; a newer ``schema_version`` is refused by name.

    The JSON is parsed once on the way in. Only when validation fails is it parsed again, to
    tell a document from a newer ragproof (whose new keys would read as unknown) from a
    malformed one.
    """
    try:
        document = model.model_validate_json(text, strict=True)
    except ValidationError as exc:
        newer = None
        with contextlib.suppress(ValueError, RecursionError):  # malformed JSON: reported below
            raw = json.loads(text)
            newer = _newer_schema(raw.get("schema_version") if isinstance(raw, dict) else None, where)
        raise (newer or _validation_error(exc, text, where)) from None
    newer = _newer_schema(document.schema_version, where)
    if newer is not None:
        raise newer
    return document


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{where}: not UTF-8 text") from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off; its objects then count as old.

    Validating rows allocates a few dozen containers each and keeps all of them: the collector
    would sweep the growing heap over and over (about half the reading time at 10,000 rows)
    and find nothing, since validated models hold no reference cycles. Once re-enabled it
    would still sweep them all as young objects at the next allocation; ``freeze`` followed
    by ``unfreeze`` moves them to the oldest generation without a sweep (skipped when the
    process has frozen objects of its own, which ``unfreeze`` would release).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


def _lines(stream: IO[bytes], where: str, cap: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) for each non-blank line of ``stream``, read in bounded pieces.

    Memory stays within one piece plus one line whatever the stream holds: a line longer than
    :data:`MAX_ROW_LINE_BYTES` is refused before it is joined, more than :data:`MAX_BLANK_LINES`
    blank lines are refused, and so is a stream longer than ``cap`` bytes. Lines end at
    ``\n`` only (JSON strings may hold U+0085 or U+2028 unescaped).
    """
    pending: list[bytes] = []  # the pieces of a line that has not ended yet
    pending_len = 0
    total = 0
    lineno = 0
    blank = 0

    def too_long(number: int) -> DataError:
        return DataError(f"{where}:{number}: line longer than the {MAX_ROW_LINE_BYTES} byte limit")

    while chunk := stream.read(READ_CHUNK_BYTES):
        total += len(chunk)
        if total > cap:
            raise DataError(f"{where}: larger than the {cap} byte limit")
        pieces = chunk.split(b"\n")
        if len(pieces) == 1:  # no line ends in this piece
            pending.append(chunk)
            pending_len += len(chunk)
            if pending_len > MAX_ROW_LINE_BYTES:
                raise too_long(lineno + 1)
            continue
        if pending:
            if pending_len + len(pieces[0]) > MAX_ROW_LINE_BYTES:
                raise too_long(lineno + 1)
            pending.append(pieces[0])
            pieces[0] = b"".join(pending)
            pending = []
        tail = pieces.pop()
        for lineno, line in enumerate(pieces, lineno + 1):  # noqa: B020 - continues the count
            if not line or line.isspace():
                blank += 1
                if blank > MAX_BLANK_LINES:
                    raise DataError(f"{where}:{lineno}: more than {MAX_BLANK_LINES} blank lines")
                continue
            if len(line) > MAX_ROW_LINE_BYTES:
                raise too_long(lineno)
            yield lineno, line
        pending_len = len(tail)
        if tail:
            pending.append(tail)
        if pending_len > MAX_ROW_LINE_BYTES:
            raise too_long(lineno + 1)
    if pending:
        line = b"".join(pending)
        if not line.isspace():
            yield lineno + 1, line


def _metric_bounds() -> dict[str, tuple[float, float]]:
    from gate.metrics import registry

    return {name: spec.value_range for name, spec in registry().items()}


def load_reader() -> None:
    """Import everything :func:`read_artifact` imports on first use (the metric registry).

    After this, reading an artifact imports no module: another thread may import others
    meanwhile without the two ever waiting on each other's imports (:mod:`gate.core.preload`).
    """
    _metric_bounds()


def _out_of_range(value: float | None, bounds: tuple[float, float]) -> bool:
    """Whether ``value`` is NaN, infinite, or outside ``bounds`` by more than float rounding.

    A weighted mean of values in [0, 1] can come out an ulp above 1, hence the relative
    slack :data:`RANGE_SLACK`.
    """
    if value is None:
        return False
    if not math.isfinite(value):
        return True
    low, high = bounds
    return not low - RANGE_SLACK * max(1.0, abs(low)) <= value <= high + RANGE_SLACK * max(1.0, abs(high))


def _range_text(bounds: tuple[float, float]) -> str:
    return "finite" if bounds == _FINITE else f"within [{bounds[0]:g}, {bounds[1]:g}]"


def parse_rows(stream: IO[bytes], where: str, max_rows: int) -> list[Row]:
    """``rows.jsonl`` read from ``stream`` line by line, one :class:`Row` per non-blank line.

    DataError names ``where:LINE`` for a malformed line, a field that fails validation, a
    duplicate ``case_id``, a row beyond ``max_rows`` (run.json's case count: one row a case at
    most, which bounds the memory of a hostile file of many small rows) or a metric value that
    is not finite or outside the metric's range (the registry's ``value_range``; a metric it
    does not know must be finite); also for the limits of :func:`_lines`.
    """
    validate = Row.__pydantic_validator__.validate_json
    cap = MAX_FILE_BYTES[ROWS_FILE]
    bounds = _metric_bounds()
    narrow = {name for name, (low, high) in bounds.items() if low > 0.0 or high < 1.0}
    rows: list[Row] = []
    shared: dict[tuple[Any, ...], MetricResult] = {}
    first_line: dict[str, int] = {}
    with _collector_paused():
        for lineno, line in _lines(stream, where, cap):
            if len(rows) == max_rows:
                raise DataError(f"{where}:{lineno}: more rows than run.json's dataset.case_count {max_rows}")
            try:
                row: Row = validate(line, strict=True)
            except ValidationError as exc:
                raise _validation_error(exc, line, f"{where}:{lineno}") from None
            seen = first_line.setdefault(row.case_id, lineno)
            if seen != lineno:
                raise DataError(
                    f"{where}:{lineno}: case_id: duplicate {row.case_id!r} (first at line {seen})"
                )
            if narrow:
                _check_row_metrics(row, bounds, f"{where}:{lineno}")
            else:
                # Fast path: a value in [0, 1] fits every metric (no registered range is narrower).
                for result in row.metrics.values():
                    value = result.value
                    if value is not None and not 0.0 <= value <= 1.0:
                        _check_row_metrics(row, bounds, f"{where}:{lineno}")
                        break
            _share_results(row, shared)
            rows.append(row)
    return rows


def _share_results(row: Row, shared: dict[tuple[Any, ...], MetricResult]) -> None:
    """Replace each of ``row``'s metric results by an equal one already read, if any.

    Results repeat across rows (0/1 scores, skips with one reason): one frozen instance per
    distinct result halves the memory of 10,000 rows of 8 metrics (about 1 KB a result).
    Equal means the same value, status, reason and label, and the same fields set (a
    hand-written line may leave some out); a zero or missing value is keyed by its ``repr``,
    which tells -0.0 from 0.0. Results carrying judge details are kept as read.
    """
    metrics = row.metrics
    setdefault = shared.setdefault
    for name, result in metrics.items():
        if result.judge is None:
            value = result.value
            first = setdefault((value or repr(value), result.status, result.reason, result.label), result)
            # (the fields-set attribute itself: pydantic's model_fields_set property costs a call)
            if first is not result and first.__pydantic_fields_set__ == result.__pydantic_fields_set__:
                metrics[name] = first


def parse_dataset(text: str, sha256: str, where: str) -> tuple[Case, ...]:
    """``dataset.jsonl`` validated case by case; its sha256 must be run.json's ``dataset.sha256``.

    The sha256 is that of the canonical case lines (:func:`gate.model.dataset.dataset_lines`),
    which is what the run writes. When the file's own bytes hash to it, they are those lines
    (or a text no canonical dataset can hash to, which then reads as a different dataset):
    the cases are validated straight from each line, without rebuilding the canonical text.
    Anything that path refuses is read again the long way, which names the line and field.
    """
    with _collector_paused():
        if hashlib.sha256(text.encode("utf-8")).hexdigest() == sha256:
            cases = _CANONICAL_READ.get(sha256) or _canonical_cases(text)
            if cases is not None:
                _CANONICAL_READ.clear()  # the last one only: a compare reads one dataset twice
                _CANONICAL_READ[sha256] = cases
                return cases
        cases = parse_cases(jsonl_records(where, text))
    if dataset_sha256(cases) != sha256:
        raise DataError(f"{where}: sha256 of the cases does not match run.json's dataset.sha256")
    return cases


# sha256 -> the cases of the canonical dataset text with that hash, as last validated: the
# baseline and the candidate of a compare carry the same dataset copy, byte for byte, and a
# text with the same sha256 is the same text, so the second copy is not validated again.
# Cases are frozen models, safe to share between the two artifacts.
_CANONICAL_READ: dict[str, tuple[Case, ...]] = {}


def _canonical_cases(text: str) -> tuple[Case, ...] | None:
    """The cases of a canonical dataset text, or None when any line fails (or ids repeat, or
    there are too many): the caller then reports the problem with its line."""
    validate = Case.__pydantic_validator__.validate_json
    try:
        cases = tuple(validate(line) for line in text.split("\n") if line and not line.isspace())
    except (ValidationError, ValueError):
        return None
    if len(cases) > MAX_CASES or len({case.id for case in cases}) != len(cases):
        return None
    return cases


def _check_row_metrics(row: Row, bounds: dict[str, tuple[float, float]], where: str) -> None:
    """Every metric value of ``row`` finite and within its metric's range, else DataError."""
    for name, result in row.metrics.items():
        limits = bounds.get(name, _FINITE)
        if _out_of_range(result.value, limits):
            raise DataError(f"{where}: metrics.{name}.value: {result.value!r} is not {_range_text(limits)}")


def _check_summary(summary: Summary, where: str) -> None:
    """Every mean and percentile of ``summary.json`` finite and within its metric's range."""
    bounds = _metric_bounds()
    for key, metrics in summary.slices.items():
        for name, aggregate in metrics.items():
            limits = bounds.get(name, _FINITE)
            for field in ("mean", "p50", "p95"):
                value = getattr(aggregate, field)
                if _out_of_range(value, limits):
                    raise DataError(
                        f"{where}: slices.{key}.{name}.{field}: {value!r} is not {_range_text(limits)}"
                    )
    rate = summary.adapter_failure_rate
    if _out_of_range(rate, (0.0, 1.0)):
        raise DataError(f"{where}: adapter_failure_rate: {rate!r} is not within [0, 1]")


def parse_artifact(
    read: Callable[[str], bytes],
    open_rows: Callable[[], AbstractContextManager[IO[bytes]]],
    source: str,
    read_optional: Callable[[str], bytes | None],
    *,
    cases: bool = True,
) -> RunArtifact:
    """Validate ``run.json`` and ``summary.json`` from ``read(name)`` (already size-capped) and
    ``rows.jsonl`` streamed from ``open_rows()``.

    ``read_optional(name)`` (None: absent) gives ``dataset.jsonl`` when the run carries it.
    ``cases=False``: the dataset copy is not kept (``cases`` None); when its bytes hash to
    run.json's ``dataset.sha256`` it is not validated case by case either (see :func:`read_artifact`).
    """
    where = {name: f"{source}/{name}" for name in (RUN_FILE, ROWS_FILE, SUMMARY_FILE, DATASET_FILE)}
    meta = _validated_document(RunMeta, _decode(read(RUN_FILE), where[RUN_FILE]), where[RUN_FILE])
    summary = _validated_document(
        Summary, _decode(read(SUMMARY_FILE), where[SUMMARY_FILE]), where[SUMMARY_FILE]
    )
    _check_summary(summary, where[SUMMARY_FILE])
    with open_rows() as stream:
        rows = parse_rows(stream, where[ROWS_FILE], max_rows=meta.dataset.case_count)
    kept = None
    dataset = read_optional(DATASET_FILE)
    if dataset is not None and (cases or hashlib.sha256(dataset).hexdigest() != meta.dataset.sha256):
        where_cases = where[DATASET_FILE]
        kept = parse_dataset(_decode(dataset, where_cases), meta.dataset.sha256, where_cases)
    # The parts are validated already: construct without a second pass over every row.
    return RunArtifact.model_construct(
        meta=meta, rows=rows, summary=summary, source=source, cases=kept if cases else None
    )


def _dir_file(directory: Path, name: str, optional: bool = False) -> Path | None:
    path = directory / name
    if optional and not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        raise DataError(f"{directory}: not a run artifact ({name} missing)")
    return path


def _read_dir_file(directory: Path, name: str, optional: bool = False) -> bytes | None:
    path = _dir_file(directory, name, optional)
    if path is None:
        return None
    cap = MAX_FILE_BYTES.get(name, MAX_DATASET_BYTES)
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise DataError(f"{path}: larger than the {cap} byte limit")
    return data


@dataclass(frozen=True)
class _ArtifactFiles:
    """How to read an artifact's files, wherever they are (see :func:`parse_artifact`)."""

    read: Callable[[str], bytes]
    open_rows: Callable[[], AbstractContextManager[IO[bytes]]]
    read_optional: Callable[[str], bytes | None]


@contextlib.contextmanager
def _artifact_files(path: Path, source: str) -> Iterator[_ArtifactFiles]:
    """The files of a directory artifact, or of a ``.zip`` of one (open while in use)."""
    if path.is_dir():
        yield _ArtifactFiles(
            lambda name: _read_dir_file(path, name) or b"",
            lambda: open(_dir_file(path, ROWS_FILE) or path / ROWS_FILE, "rb"),  # noqa: SIM115 - parse_artifact closes it
            lambda name: _read_dir_file(path, name, optional=True),
        )
        return
    if not path.exists():
        raise DataError(f"{source}: run artifact not found")
    with open_zip(path, source) as archive:
        members = zip_members(archive, source)
        yield _ArtifactFiles(
            lambda name: read_zip_member(archive, members, name, source, MAX_FILE_BYTES[name]),
            lambda: zip_member_stream(archive, members, ROWS_FILE, source),
            lambda name: (
                read_zip_member(archive, members, name, source, MAX_DATASET_BYTES)
                if name in members
                else None
            ),
        )


def case_count(path: Path | str) -> int | None:
    """``dataset.case_count`` of the artifact's ``run.json`` (directory or ``.zip``), read on
    its own, before the rest; None when it cannot be read (:func:`read_artifact` says why)."""
    source = str(path)
    where = f"{source}/{RUN_FILE}"
    try:
        with _artifact_files(Path(path), source) as files:
            meta = _validated_document(RunMeta, _decode(files.read(RUN_FILE), where), where)
    except (DataError, OSError, RecursionError):
        return None
    return meta.dataset.case_count


def read_artifact(path: Path | str, *, cases: bool = True) -> RunArtifact:
    """Load and validate a run artifact from a directory or a ``.zip`` of one.

    Raises DataError (exit 65) naming the file and line for anything malformed, oversized,
    unsafe (zip entries with absolute paths, ``..``, links or duplicate names; too many
    entries), corrupt (bad compressed data), nested too deeply, out of range (metric values)
    or written by a newer schema; see :mod:`gate.run.zipread` for the archive's checks.

    ``cases=False`` is for a reader that never uses the run's dataset copy (``compare``): the
    copy is then checked only by its sha256 when its bytes carry run.json's (what ragproof
    writes), which skips validating every case (0.06 s at 10,000 cases), and ``cases`` is None.
    A copy in any other layout is still validated in full, as with ``cases=True``.
    """
    source = str(path)
    try:
        with _artifact_files(Path(path), source) as files:
            return parse_artifact(files.read, files.open_rows, source, files.read_optional, cases=cases)
    except OSError as exc:
        raise DataError(f"{source}: cannot read: {exc}") from None
    except RecursionError:
        raise DataError(f"{source}: JSON nested too deeply") from None
