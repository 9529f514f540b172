"""Safe extraction of a downloaded artifact zip (untrusted data).

Every entry is checked before anything is written, so a rejected archive writes nothing:
- no absolute names (``/x``, ``\\x``, ``C:x``), no backslashes, no ``..`` component, no NUL;
- no symbolic links or other special files (the Unix mode in ``external_attr``);
- no encrypted entries;
- at most ``max_files`` entries and ``max_total_bytes`` declared uncompressed bytes;
then each file is streamed out with a byte counter, so an entry whose data is larger than
its declared size (a forged header) is stopped at the cap as well.
"""

from __future__ import annotations

import re
import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

from gate.errors import DataError

MAX_FILES = 1_000
MAX_TOTAL_BYTES = 1 << 30  # 1 GiB uncompressed
_DRIVE = re.compile(r"^[A-Za-z]:")


def _check_name(source: str, name: str) -> None:
    problem = None
    if not name or "\x00" in name:
        problem = "an empty or NUL-containing name"
    elif name.startswith(("/", "\\")) or _DRIVE.match(name):
        problem = "an absolute path"
    elif "\\" in name:
        problem = "a backslash in the name"
    elif ".." in PurePosixPath(name).parts:
        problem = "a '..' component"
    if problem:
        raise DataError(
            f"{source}: entry {name!r} has {problem}; the archive was rejected and nothing was extracted"
        )


def extract_zip(
    archive: Path,
    destination: Path,
    *,
    source: str | None = None,
    max_files: int = MAX_FILES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> Path:
    """Extract ``archive`` into ``destination`` (created, must be empty) after checking every entry."""
    label = source or str(archive)
    if destination.exists() and any(destination.iterdir()):
        raise ValueError(f"{destination}: extraction needs a new or empty directory")
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            if len(infos) > max_files:
                raise DataError(f"{label}: {len(infos)} entries exceeds the limit of {max_files}")
            declared = 0
            for info in infos:
                _check_name(label, info.filename)
                mode = info.external_attr >> 16
                kind = stat.S_IFMT(mode)
                if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                    what = "a symbolic link" if kind == stat.S_IFLNK else "a special file"
                    raise DataError(f"{label}: entry {info.filename!r} is {what}; the archive was rejected")
                if info.flag_bits & 0x1:
                    raise DataError(
                        f"{label}: entry {info.filename!r} is encrypted; the archive was rejected"
                    )
                declared += info.file_size
            if declared > max_total_bytes:
                raise DataError(
                    f"{label}: {declared} uncompressed bytes exceeds the limit of {max_total_bytes}"
                )

            destination.mkdir(parents=True, exist_ok=True)
            root = destination.resolve()
            written = 0
            for info in infos:
                target = (root / info.filename).resolve()
                if not target.is_relative_to(root):  # belt and braces after the name checks
                    raise DataError(f"{label}: entry {info.filename!r} leaves the extraction directory")
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, target.open("wb") as dst:
                    while chunk := src.read(1 << 16):
                        written += len(chunk)
                        if written > max_total_bytes:
                            raise DataError(f"{label}: expands beyond {max_total_bytes} bytes; rejected")
                        dst.write(chunk)
    except (zipfile.BadZipFile, DataError, OSError, EOFError) as exc:
        # A rejected archive leaves nothing behind, not even the part extracted so far.
        if destination.exists():
            shutil.rmtree(destination, ignore_errors=True)
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{label}: not a valid zip archive ({exc})") from None
    return destination


def run_directory(extracted: Path, source: str) -> Path:
    """The directory holding ``run.json``: the root, or its only top-level directory."""
    if (extracted / "run.json").is_file():
        return extracted
    children = [p for p in extracted.iterdir()]
    if len(children) == 1 and children[0].is_dir() and (children[0] / "run.json").is_file():
        return children[0]
    raise DataError(f"{source}: the artifact holds no run.json (upload the run directory itself)")
