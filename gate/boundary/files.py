"""Files across the trust boundary: what ragproof reads from a pull request, and where it writes.

**Reading** what a pull request controls (``ragproof.yaml``, the dataset it names) happens
before the trusted policy is known, so it is bounded: :func:`read_text_file` opens without
blocking, refuses anything but a regular file (a device such as ``/dev/zero``, a FIFO, a
socket, a directory) and anything under ``/proc``, ``/sys`` or ``/dev``, and reads at most
``cap`` bytes (one byte more tells a larger file, which is refused by name, never held whole).

**Writing** (``ragproof action`` runs as root, the pipeline as another user): every directory
ragproof writes into is opened one component at a time from ``/`` with ``O_NOFOLLOW``, relative
to the previous component's descriptor, and every file is created with ``O_EXCL | O_NOFOLLOW``
relative to its directory's descriptor. While a sandbox is active (the action) a symbolic link
in any component is refused, and so is a directory the pipeline user may write
(:meth:`gate.boundary.sandbox.Sandbox.may_write`; a sticky directory such as ``/tmp`` is passed
when the next component is not the pipeline user's, since it can then neither rename nor
remove it). Once the descriptor is held, what the path names can no longer be swapped: every
later operation goes through the descriptor. Outside the action (``ragproof run`` on a laptop)
the path is resolved first, as the user meant it, then opened the same way.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from gate.boundary.sandbox import Sandbox, active
from gate.core.errors import DataError, RagproofError, UsageError

# The largest file of a pull request read as text (a dataset; a config is far smaller).
MAX_TEXT_FILE_BYTES = 200_000_000
# Pseudo file systems whose "files" are the kernel's: never data of a pull request.
_KERNEL_TREES = ("/proc", "/sys", "/dev")
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "special file"


def read_bytes_capped(path: Path, what: str, cap: int, error: type[RagproofError] = DataError) -> bytes:
    """At most ``cap`` bytes of the regular file ``path``; ``error`` (one line) otherwise.

    Refused: a missing file, anything but a regular file (checked on the opened descriptor,
    so a swap after the check changes nothing), a path under ``/proc``, ``/sys`` or ``/dev``,
    and a file longer than ``cap`` bytes (counted as read, never the size ``stat`` reports).
    """
    real = os.path.realpath(path)
    if any(real == tree or real.startswith(tree + "/") for tree in _KERNEL_TREES):
        raise error(f"{path}: {what} file is {real}, a file of the kernel, not a regular file")
    sandbox = active()
    if (
        sandbox is not None
        and sandbox.workspace is not None
        and not Path(real).is_relative_to(sandbox.workspace)
    ):
        # Root reads it and an error line may quote it: a pull request names files of its checkout only.
        raise error(f"{path}: {what} file is {real}, outside the checkout {sandbox.workspace}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{path}: {what} file not found") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{path}: {what} file is a {_kind(mode)}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > cap:
        raise error(f"{path}: {what} file is larger than {cap:,} bytes")
    return b"".join(chunks)


def read_text_file(
    path: Path, what: str, error: type[RagproofError] = DataError, cap: int = MAX_TEXT_FILE_BYTES
) -> str:
    """The UTF-8 text of ``path``, read by :func:`read_bytes_capped`; ``error`` when not UTF-8."""
    data = read_bytes_capped(path, what, cap, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot read {what}: not UTF-8 text (byte {exc.start})") from None


# -- writing ---------------------------------------------------------------------------------


def _refusal(walked: Path, why: str, sandbox: Sandbox) -> UsageError:
    return UsageError(
        f"{walked}: {why}; ragproof writes there as root while the pipeline runs as uid "
        f"{sandbox.uid if sandbox.uid is not None else '(the same user)'}: refusing to write through a "
        "path the pipeline could change (use a real directory of the workspace, e.g. out: .ragproof/run)"
    )


def _open_walk(path: Path, create: bool) -> int:
    """A descriptor of ``path`` opened from ``/`` one component at a time (missing components
    created when ``create``; else the deepest existing one), checked as the module says."""
    sandbox = active()
    path = Path(os.path.abspath(path)) if sandbox is not None else Path(path).resolve()
    fd = os.open("/", _DIRECTORY_FLAGS)
    walked = Path("/")
    try:
        previous = os.fstat(fd)
        for part in path.parts[1:]:
            # A directory the pipeline user may write could have any entry swapped, except a
            # sticky one (/tmp), where it can add entries but not rename or remove another
            # user's: passed through, unless the entry is its own.
            writable = sandbox is not None and sandbox.may_write(previous)
            if writable and not previous.st_mode & stat.S_ISVTX:
                raise _refusal(walked, "the pipeline user may write this directory", sandbox)  # type: ignore[arg-type]  # writable implies a sandbox
            try:
                following = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    break
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                following = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                if sandbox is not None and _is_link(part, fd):
                    raise _refusal(walked / part, "a symbolic link", sandbox) from None
                raise UsageError(f"{walked / part}: cannot open the directory: {exc.strerror}") from None
            os.close(fd)
            fd = following
            previous = os.fstat(fd)
            if writable and sandbox is not None and sandbox.owns(previous):
                raise _refusal(walked, "the pipeline user may write this directory", sandbox)
            walked = walked / part
        if sandbox is not None and sandbox.may_write(previous):
            raise _refusal(walked, "the pipeline user may write this directory", sandbox)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(name: str, directory_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=directory_fd).st_mode)
    except OSError:
        return False


def refuse_unsafe_directory(path: Path) -> None:
    """UsageError when the existing part of ``path`` holds a symbolic link or a directory the
    pipeline user may write (while a sandbox is active); what does not exist yet is not checked
    here: it is created through descriptors when written."""
    os.close(_open_walk(path, create=False))


def open_directory(path: Path) -> int:
    """A descriptor of directory ``path`` (created as needed), opened as the module says."""
    return _open_walk(path, create=True)


def write_new_file(directory_fd: int, name: str, data: bytes, *, sync: bool = False) -> None:
    """Create ``name`` in the directory (``O_EXCL | O_NOFOLLOW``: never an existing entry)."""
    fd = os.open(name, _NEW_FILE_FLAGS, 0o644, dir_fd=directory_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def open_log(path: Path) -> BinaryIO:
    """``path`` opened for appending (created as needed), never through a symbolic link."""
    directory = open_directory(path.parent)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path.name, flags, 0o644, dir_fd=directory)
    finally:
        os.close(directory)
    return os.fdopen(fd, "ab")


def copy_capped(source: Path, directory_fd: int, name: str, cap: int) -> None:
    """Copy at most ``cap`` bytes of the regular file ``source`` (opened with ``O_NOFOLLOW``) to a
    new file ``name`` in the directory; a longer file is cut with a note. Nothing when ``source``
    is missing, a symbolic link or not a regular file."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        data = b""
        while len(data) <= cap and (chunk := os.read(fd, min(1 << 20, cap + 1 - len(data)))):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > cap:
        data = data[:cap] + b"\n[ragproof] truncated at %d bytes\n" % cap
    write_new_file(directory_fd, name, data)


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole: a new file beside it, renamed over it, through the directory's descriptor."""
    directory = open_directory(path.parent)
    try:
        temporary = f".{path.name}.tmp-{secrets.token_hex(4)}"
        write_new_file(directory, temporary, data)
        try:
            os.rename(temporary, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=directory)
            raise
    finally:
        os.close(directory)
