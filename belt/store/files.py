"""Durable file primitives: atomic replace, atomic create, and appending whole lines."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from belt.errors import BeltError

TEMP_SUFFIX = ".tmp"
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


class HardLinksUnsupported(OSError):
    """The file system cannot create hard links, so an atomic create needs a lock instead."""


class DamagedLines(Exception):
    """A line file has no complete line at all, so it cannot be appended to."""


def make_dirs(directory: Path) -> None:
    """Create ``directory`` and any missing parents, each 0700 (the store is private)."""
    missing = []
    while not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new name in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_file(path: Path) -> tuple[int, str]:
    # The temporary file lives beside its target so the rename never crosses a file system;
    # its name starts with a dot and ends in .tmp, so listings skip it.
    try:
        return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    except FileNotFoundError:
        make_dirs(path.parent)
        return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def write_failure(path: Path, exc: OSError) -> BeltError | None:
    """The error to report for a write that failed for want of room (full disk, quota, size
    limit, read-only or failing device); None for any other failure."""
    if exc.errno not in _NO_ROOM:
        return None
    return BeltError(
        f"{path}: cannot write ({exc.strerror or exc}); that file is unchanged",
        hint="free some space (or fix the file system), then retry",
    )


def atomic_write(path: Path, data: bytes, *, fsync: bool = True, exclusive: bool = False) -> None:
    """Write ``data`` to a temporary file, fsync it, and move it to ``path`` in one step.

    With ``exclusive`` the move is a hard link that fails with ``FileExistsError`` when ``path``
    already exists, so two creators of one name cannot both succeed. A full disk (or quota, size
    limit, read-only file system) is a BeltError naming ``path``, and ``path`` is unchanged.
    """
    try:
        _atomic_write(path, data, fsync=fsync, exclusive=exclusive)
    except OSError as exc:
        failure = write_failure(path, exc)
        if failure is None:
            raise
        raise failure from None


def _atomic_write(path: Path, data: bytes, *, fsync: bool, exclusive: bool) -> None:
    fd, tmp = _temp_file(path)
    try:
        try:
            _write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            try:
                os.link(tmp, path)
            except OSError as exc:
                if exc.errno in _NO_HARD_LINKS:
                    raise HardLinksUnsupported(exc.errno, exc.strerror, str(path)) from exc
                raise
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


def read_bytes(path: Path) -> bytes:
    """The whole content of ``path`` (``FileNotFoundError`` when it does not exist)."""
    with open(path, "rb") as handle:
        return handle.read()


def append_line(path: Path, line: bytes, *, header: bytes, fsync: bool = True) -> None:
    """Append one newline-terminated ``line`` to ``path``; the caller holds the file's lock.

    A new file is created atomically holding ``header`` and the line. A torn last line left by a
    writer killed mid-append was never acknowledged; it is cut off before the new line is added.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except FileNotFoundError:
        atomic_write(path, header + line, fsync=fsync)
        return
    try:
        _cut_torn_tail(fd)
        _write_all(fd, line)
        if fsync:
            os.fsync(fd)
    except OSError as exc:
        failure = write_failure(path, exc)
        if failure is None:
            raise
        # A partly written line is torn; the next append cuts it off.
        raise failure from None
    finally:
        os.close(fd)


def _cut_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    end = size
    while end > 0:
        start = max(0, end - 4096)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            os.ftruncate(fd, start + newline + 1)
            return
        end = start
    # No complete line at all: the file is damaged, not torn, and is left as it is.
    raise DamagedLines("no complete line")


def split_lines(raw: bytes) -> list[bytes]:
    """The complete lines of ``raw``; a last line without its newline (a torn append) is dropped."""
    lines = raw.split(b"\n")
    # After the final newline split() yields b""; anything else there is a torn line.
    return lines[:-1]
