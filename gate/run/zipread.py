"""Reading a run artifact's files out of a zip archive that may come from a pull request.

Entries are checked before anything is read: count, absolute names, ``..``, links, total
declared size. A member is read as a stream capped at ``cap + 1`` decompressed bytes, since
the declared sizes may lie.
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import PurePosixPath

from gate.core.errors import DataError
from gate.model.artifact import RUN_FILE

MAX_ZIP_ENTRIES = 64
MAX_ZIP_TOTAL_BYTES = 1_200_000_000


def zip_members(archive: zipfile.ZipFile, source: str) -> dict[str, zipfile.ZipInfo]:
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


def read_zip_member(
    archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], name: str, source: str, cap: int
) -> bytes:
    info = members.get(name)
    if info is None:
        raise DataError(f"{source}: not a run artifact ({name} missing)")
    # The declared size may lie: read at most cap + 1 bytes of the decompressed stream.
    try:
        with archive.open(info) as handle:
            data = handle.read(cap + 1)
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
        raise DataError(f"{source}: cannot read {name}: {exc}") from None
    if len(data) > cap:
        raise DataError(f"{source}: {name} larger than the {cap} byte limit")
    return data
