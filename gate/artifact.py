"""Run artifacts: ``run.json``, ``rows.jsonl`` and ``summary.json`` (design.md "Files").

This module holds the artifact's pydantic models (the contract every later stage reads) and
reading/writing. Artifacts may come from a pull request or a download: reading validates
strictly, caps sizes and refuses an unknown newer schema.

Slice keys are ``dimension=value``: ``all``, ``kind=qa``, ``tags=topic:billing``,
``metadata.FIELD=value``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import secrets
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.errors import DataError, UsageError, json_problem, pydantic_message
from gate.metrics.base import MetricResult
from gate.records import Answer, Chunk

SCHEMA_VERSION = 1

RUN_FILE = "run.json"
ROWS_FILE = "rows.jsonl"
SUMMARY_FILE = "summary.json"
# Caps for reading an artifact, which may come from an untrusted pull request.
MAX_FILE_BYTES: dict[str, int] = {RUN_FILE: 4_000_000, ROWS_FILE: 1_000_000_000, SUMMARY_FILE: 100_000_000}
MAX_ZIP_ENTRIES = 64
MAX_ZIP_TOTAL_BYTES = 1_200_000_000
# Written beside the three files when present (the command adapter's stderr); capped.
MAX_EXTRA_FILE_BYTES = 5_000_000

RunStatus = Literal["complete", "aborted:budget", "partial"]
RowStatus = Literal["ok", "adapter_error", "timeout"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolInfo(_Model):
    name: str = "ragproof"
    version: str


class GitInfo(_Model):
    commit: str | None = None
    ref: str | None = None


class DatasetInfo(_Model):
    path: str
    sha256: str
    version: str | None = None
    case_count: int


class JudgeInfo(_Model):
    provider: str | None = None
    model: str | None = None
    temperature: float = 0.0
    # prompt template name -> sha256 of its source
    prompts: dict[str, str] = Field(default_factory=dict)


class ShardInfo(_Model):
    index: int  # 1-based
    count: int


class CostInfo(_Model):
    usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    judge_calls: int = 0
    cache_hits: int = 0
    estimated: bool = False  # True when any usage was estimated at 4 characters per token


class RunMeta(_Model):
    """``run.json``."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    created_at: str  # ISO 8601, UTC
    tool: ToolInfo
    git: GitInfo = Field(default_factory=GitInfo)
    dataset: DatasetInfo
    config_hash: str
    k: int
    source_match: str
    ndcg_gain: str = "linear"
    metrics: list[str] = Field(default_factory=list)
    # slice dimensions of summary.json (gate.slices), so a merge can rebuild the summary
    slices: list[str] = Field(default_factory=lambda: ["kind", "tags"])
    judge: JudgeInfo = Field(default_factory=JudgeInfo)
    shard: ShardInfo | None = None
    status: RunStatus = "complete"
    cost: CostInfo = Field(default_factory=CostInfo)
    wall_time_s: float = 0.0
    adapter: dict[str, Any] = Field(default_factory=dict)  # type and non-secret settings


class Row(_Model):
    """One line of ``rows.jsonl``: one case as run and scored."""

    case_id: str
    # 0-based position of the case in the dataset: rows are written in this order
    position: int | None = None
    kind: str
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: RowStatus
    error: str | None = None
    latency_ms: float | None = None
    retrieved: list[Chunk] | None = None
    answer: Answer | None = None
    metrics: dict[str, MetricResult] = Field(default_factory=dict)


class MetricSummary(_Model):
    """Aggregate of one metric over one slice (``summary.json``)."""

    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    scored: int = 0
    skipped: int = 0
    not_applicable: int = 0
    errored: int = 0  # judge errors + case failures (adapter_error, timeout)
    higher_is_better: bool = True
    # categorical metrics only: label -> count
    distribution: dict[str, int] | None = None


class Summary(_Model):
    """``summary.json``: slice key -> metric name -> summary."""

    schema_version: int = SCHEMA_VERSION
    cases: int
    failures: int  # rows with status other than ok
    adapter_failure_rate: float | None = None
    slices: dict[str, dict[str, MetricSummary]] = Field(default_factory=dict)


class RunArtifact(BaseModel):
    """A loaded artifact: the three files, validated."""

    meta: RunMeta
    rows: list[Row]
    summary: Summary
    source: str = ""  # where it was read from (for messages)


# -- writing ------------------------------------------------------------------------------


def new_run_id() -> str:
    """A sortable unique id: UTC time plus random hex, e.g. ``20261201T070102Z-3fa9c2d1``."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(4)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _json_document(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _copy_capped(source: Path, target: Path, cap: int) -> None:
    with open(source, "rb") as src, open(target, "wb") as dst:
        data = src.read(cap + 1)
        if len(data) > cap:
            data = data[:cap] + b"\n[ragproof] truncated at %d bytes\n" % cap
        dst.write(data)


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
) -> Path:
    """Write ``run.json``, ``rows.jsonl``, ``summary.json`` (and ``extra_files``) to ``out_dir``.

    Atomic: the files are written and fsynced in a temporary sibling directory which is then
    renamed into place, so readers see the old artifact or the new one, never a mix. A
    previous artifact at ``out_dir`` is replaced; any other non-empty directory is refused.
    """
    out_dir = Path(out_dir)
    check_out_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        os.chmod(staging, 0o755)
        _write_synced(staging / RUN_FILE, _json_document(meta))
        _write_synced(staging / ROWS_FILE, "".join(row.model_dump_json() + "\n" for row in rows))
        _write_synced(staging / SUMMARY_FILE, _json_document(summary))
        for name, source in (extra_files or {}).items():
            if source.is_file():
                _copy_capped(source, staging / name, MAX_EXTRA_FILE_BYTES)
        if out_dir.exists():
            retired = out_dir.parent / f".{out_dir.name}.old-{secrets.token_hex(4)}"
            os.rename(out_dir, retired)
            os.rename(staging, out_dir)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.rename(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


# -- reading ------------------------------------------------------------------------------

_D = TypeVar("_D", RunMeta, Summary)


def _validation_error(exc: ValidationError, text: str, where: str) -> DataError:
    """The one-line error for ``text`` failing validation (parsed again for JSON syntax details)."""
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        try:
            json.loads(text)
        except json.JSONDecodeError as decode_error:
            return DataError(f"{where}: {json_problem(decode_error)}")
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
        with contextlib.suppress(ValueError):  # malformed JSON: reported below
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


def parse_rows(text: str, where: str) -> list[Row]:
    """``rows.jsonl`` text validated strictly, one :class:`Row` per non-blank line.

    DataError names ``where:LINE`` for a malformed line, a field that fails validation or a
    duplicate ``case_id``.
    """
    validate = Row.__pydantic_validator__.validate_json
    rows: list[Row] = []
    first_line: dict[str, int] = {}
    with _collector_paused():
        # split("\n"), not splitlines(): JSON strings may hold U+0085 or U+2028 unescaped.
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line or line.isspace():
                continue
            try:
                row: Row = validate(line, strict=True)
            except ValidationError as exc:
                raise _validation_error(exc, line, f"{where}:{lineno}") from None
            seen = first_line.setdefault(row.case_id, lineno)
            if seen != lineno:
                raise DataError(
                    f"{where}:{lineno}: case_id: duplicate {row.case_id!r} (first at line {seen})"
                )
            rows.append(row)
    return rows


def parse_artifact(read: Callable[[str], bytes], source: str) -> RunArtifact:
    """Validate the three files returned by ``read(name)`` (already size-capped)."""
    where = {name: f"{source}/{name}" for name in (RUN_FILE, ROWS_FILE, SUMMARY_FILE)}
    meta = _validated_document(RunMeta, _decode(read(RUN_FILE), where[RUN_FILE]), where[RUN_FILE])
    summary = _validated_document(
        Summary, _decode(read(SUMMARY_FILE), where[SUMMARY_FILE]), where[SUMMARY_FILE]
    )
    rows = parse_rows(_decode(read(ROWS_FILE), where[ROWS_FILE]), where[ROWS_FILE])
    # The parts are validated already: construct without a second pass over every row.
    return RunArtifact.model_construct(meta=meta, rows=rows, summary=summary, source=source)


def _read_dir_file(directory: Path, name: str) -> bytes:
    path = directory / name
    if path.is_symlink() or not path.is_file():
        raise DataError(f"{directory}: not a run artifact ({name} missing)")
    cap = MAX_FILE_BYTES[name]
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise DataError(f"{path}: larger than the {cap} byte limit")
    return data


def _zip_members(archive: zipfile.ZipFile, source: str) -> dict[str, zipfile.ZipInfo]:
    """The artifact's files by name, at the root or in one top-level folder; unsafe entries refused."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise DataError(f"{source}: {len(infos)} zip entries exceed the limit of {MAX_ZIP_ENTRIES}")
    total = 0
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in parts:
            raise DataError(f"{source}: unsafe zip entry {name!r} (absolute path or '..')")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise DataError(f"{source}: zip entry {name!r} is a symbolic link")
        total += info.file_size
        if total > MAX_ZIP_TOTAL_BYTES:
            raise DataError(f"{source}: uncompressed size exceeds the {MAX_ZIP_TOTAL_BYTES} byte limit")
    files = {i.filename: i for i in infos if not i.is_dir()}
    for prefix in [""] + sorted({n.split("/")[0] + "/" for n in files if "/" in n}):
        if prefix + RUN_FILE in files:
            return {n[len(prefix) :]: i for n, i in files.items() if n.startswith(prefix)}
    raise DataError(f"{source}: not a run artifact ({RUN_FILE} missing)")


def _read_zip_member(
    archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], name: str, source: str
) -> bytes:
    info = members.get(name)
    if info is None:
        raise DataError(f"{source}: not a run artifact ({name} missing)")
    cap = MAX_FILE_BYTES[name]
    # The declared size may lie: read at most cap + 1 bytes of the decompressed stream.
    try:
        with archive.open(info) as handle:
            data = handle.read(cap + 1)
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
        raise DataError(f"{source}: cannot read {name}: {exc}") from None
    if len(data) > cap:
        raise DataError(f"{source}: {name} larger than the {cap} byte limit")
    return data


def read_artifact(path: Path | str) -> RunArtifact:
    """Load and validate a run artifact from a directory or a ``.zip`` of one.

    Raises DataError (exit 65) naming the file and line for anything malformed, oversized,
    unsafe (zip entries with absolute paths, ``..`` or links) or written by a newer schema.
    """
    p = Path(path)
    source = str(path)
    if p.is_dir():
        return parse_artifact(lambda name: _read_dir_file(p, name), source)
    if not p.exists():
        raise DataError(f"{source}: run artifact not found")
    try:
        with zipfile.ZipFile(p) as archive:
            members = _zip_members(archive, source)
            return parse_artifact(lambda name: _read_zip_member(archive, members, name, source), source)
    except zipfile.BadZipFile:
        raise DataError(f"{source}: neither a run artifact directory nor a zip file") from None
    except OSError as exc:
        raise DataError(f"{source}: cannot read: {exc}") from None


# -- merging shards -----------------------------------------------------------------------

# RunMeta fields every shard of one run must agree on.
_MUST_AGREE: tuple[str, ...] = (
    "dataset",
    "config_hash",
    "judge",
    "k",
    "source_match",
    "ndcg_gain",
    "metrics",
    "slices",
)


def _merged_status(parts: list[RunArtifact], all_shards: bool) -> RunStatus:
    statuses = {p.meta.status for p in parts}
    if "aborted:budget" in statuses:
        return "aborted:budget"
    if "partial" in statuses or not all_shards:
        return "partial"
    return "complete"


def check_mergeable(parts: list[RunArtifact]) -> None:
    """DataError unless ``parts`` are distinct shards of one run (same dataset, config, judge)."""
    if not parts:
        raise UsageError("merge: no parts given")
    first = parts[0]
    seen: dict[int, str] = {}
    for part in parts:
        if part.meta.shard is None:
            raise DataError(f"{part.source}: not a shard (run.json has no shard); only shards are merged")
        if part.meta.shard.count != first.meta.shard.count:  # type: ignore[union-attr]
            raise DataError(
                f"{part.source}: shard count {part.meta.shard.count} differs from {first.source}'s "
                f"{first.meta.shard.count}"  # type: ignore[union-attr]
            )
        if part.meta.shard.index in seen:
            raise DataError(
                f"{part.source}: shard {part.meta.shard.index} also given as {seen[part.meta.shard.index]}"
            )
        seen[part.meta.shard.index] = part.source
        for name in _MUST_AGREE:
            mine, theirs = getattr(part.meta, name), getattr(first.meta, name)
            if mine != theirs:
                what = {"config_hash": "config hash", "judge": "judge"}.get(name, name)
                raise DataError(
                    f"{part.source}: {what} differs from {first.source}'s; parts of one run must agree"
                )


def merge_artifacts(parts: list[RunArtifact]) -> tuple[RunMeta, list[Row]]:
    """One run's meta and rows (in dataset order) from its shards; the summary is recomputed by the caller.

    Missing shards make the merged status ``partial``; a budget abort in any part makes it
    ``aborted:budget``. Costs add up; the wall time is the longest part's.
    """
    check_mergeable(parts)
    first = parts[0]
    rows: list[Row] = []
    owner: dict[str, str] = {}
    for part in parts:
        for row in part.rows:
            if row.case_id in owner:
                raise DataError(f"{part.source}: case {row.case_id!r} also in {owner[row.case_id]}")
            owner[row.case_id] = part.source
            rows.append(row)
    rows.sort(key=lambda r: (r.position is None, r.position if r.position is not None else 0, r.case_id))
    count = first.meta.shard.count  # type: ignore[union-attr]
    cost = CostInfo(
        usd=sum(p.meta.cost.usd for p in parts),
        input_tokens=sum(p.meta.cost.input_tokens for p in parts),
        output_tokens=sum(p.meta.cost.output_tokens for p in parts),
        judge_calls=sum(p.meta.cost.judge_calls for p in parts),
        cache_hits=sum(p.meta.cost.cache_hits for p in parts),
        estimated=any(p.meta.cost.estimated for p in parts),
    )
    meta = first.meta.model_copy(
        update={
            "run_id": new_run_id(),
            "created_at": utc_now(),
            "shard": None,
            "status": _merged_status(parts, len(parts) == count),
            "cost": cost,
            "wall_time_s": max(p.meta.wall_time_s for p in parts),
        }
    )
    return meta, rows
