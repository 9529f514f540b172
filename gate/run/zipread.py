"""Reading a run artifact's files out of a zip archive that may come from a pull request.

The archive is hostile data, read within bounded memory and time:

- the end-of-central-directory record is read first: its entry count (at most
  :data:`MAX_ZIP_ENTRIES`) and the central directory's size (at most
  :data:`MAX_CENTRAL_DIRECTORY_BYTES`) are checked before the directory itself is read, so a
  zip of a million entries is refused without reading them;
- every entry is checked before any member is read: count again (the record may lie),
  absolute names, ``..``, links, duplicate names (which one would win is up to the reader);
- members are read as streams, and every cap counts the bytes actually decompressed, never
  the sizes the headers declare;
- corrupt data (a bad deflate stream, a CRC mismatch, a truncated archive) is a
  :class:`~gate.core.errors.DataError` naming the archive and the member.
"""

from __future__ import annotations

import contextlib
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from gate.core.errors import DataError
from gate.model.artifact import RUN_FILE

MAX_ZIP_ENTRIES = 64
# 64 entries with names of a few hundred bytes need a few tens of KB; this leaves room for
# long names and extra fields while bounding what the zip reader loads before any check.
MAX_CENTRAL_DIRECTORY_BYTES = 1 << 20
# What reading a member can raise on corrupt or truncated data.
ZIP_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError)


def _check_directory_record(handle: BinaryIO, source: str) -> None:
    """Refuse an archive whose end-of-central-directory record announces too much.

    Reads only the record (the last 22 bytes, or the last 64 KB when there is an archive
    comment, plus the ZIP64 record), exactly as :class:`zipfile.ZipFile` does next, so both
    see the same record.
    """
    record = zipfile._EndRecData(handle)  # type: ignore[attr-defined]  # the one ZipFile reads
    if record is None:
        raise zipfile.BadZipFile("end of central directory record not found")
    entries, size = record[zipfile._ECD_ENTRIES_TOTAL], record[zipfile._ECD_SIZE]  # type: ignore[attr-defined]  # private, as above
    if entries > MAX_ZIP_ENTRIES:
        raise DataError(f"{source}: {entries} zip entries exceed the limit of {MAX_ZIP_ENTRIES}")
    if size > MAX_CENTRAL_DIRECTORY_BYTES:
        raise DataError(
            f"{source}: zip central directory of {size} bytes exceeds the limit of "
            f"{MAX_CENTRAL_DIRECTORY_BYTES}"
        )


@contextlib.contextmanager
def open_zip(path: Path, source: str) -> Iterator[zipfile.ZipFile]:
    """The archive at ``path``, opened after its directory record was checked.

    Raises DataError for an archive announcing too many entries or too large a directory,
    and for anything that is not a readable zip. (Errors of the caller's block pass through.)
    """
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, after the caller's block
    except OSError as exc:
        raise DataError(f"{source}: cannot read: {exc}") from None
    with handle:
        try:
            _check_directory_record(handle, source)
            handle.seek(0)
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, struct.error, EOFError, ValueError):
            raise DataError(f"{source}: neither a run artifact directory nor a zip file") from None
        except OSError as exc:
            raise DataError(f"{source}: cannot read: {exc}") from None
        with archive:
            yield archive


def zip_members(archive: zipfile.ZipFile, source: str) -> dict[str, zipfile.ZipInfo]:
    """The artifact's files by name, at the root or in one top-level folder; unsafe entries refused."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise DataError(f"{source}: {len(infos)} zip entries exceed the limit of {MAX_ZIP_ENTRIES}")
    seen: set[str] = set()
    for info in infos:
        name = info.filename
        normalized = name.replace("\\", "/")
        parts = PurePosixPath(normalized).parts
        if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in parts:
            raise DataError(f"{source}: unsafe zip entry {name!r} (absolute path or '..')")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise DataError(f"{source}: zip entry {name!r} is a symbolic link")
        if normalized in seen:
            raise DataError(f"{source}: duplicate zip entry {name!r}")
        seen.add(normalized)
    files = {i.filename: i for i in infos if not i.is_dir()}
    for prefix in [""] + sorted({n.split("/")[0] + "/" for n in files if "/" in n}):
        if prefix + RUN_FILE in files:
            return {n[len(prefix) :]: i for n, i in files.items() if n.startswith(prefix)}
    raise DataError(f"{source}: not a run artifact ({RUN_FILE} missing)")


@contextlib.contextmanager
def zip_member_stream(
    archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], name: str, source: str
) -> Iterator[IO[bytes]]:
    """The decompressed stream of member ``name``; corrupt data while open or reading is a DataError."""
    info = members.get(name)
    if info is None:
        raise DataError(f"{source}: not a run artifact ({name} missing)")
    try:
        with archive.open(info) as handle:
            yield handle
    except ZIP_READ_ERRORS as exc:
        raise DataError(f"{source}: cannot read {name}: {exc}") from None


def read_zip_member(
    archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], name: str, source: str, cap: int
) -> bytes:
    """Member ``name`` whole, refused beyond ``cap`` decompressed bytes (whatever is declared)."""
    with zip_member_stream(archive, members, name, source) as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise DataError(f"{source}: {name} larger than the {cap} byte limit")
    return data
