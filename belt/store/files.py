"""Durable file primitives: atomic replace and create, appending whole lines, and reading.

Every store file is opened through ``open_regular`` (a regular file only: no link followed, no
FIFO waited on) and read within ``OBJECT_MAX`` (``LINE_MAX`` a line), so none can hang a reader.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import BinaryIO

from belt.errors import BeltError
from belt.paths import kind_of

TEMP_SUFFIX = ".tmp"
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}

MiB = 1024 * 1024
OBJECT_MAX = 64 * MiB  # the most bytes of one object file (or private file) belt reads
LINE_MAX = 64 * MiB  # the most bytes of one line of a log or an index belt reads
HEADER_MAX = 4096  # the most bytes of a line file's header line

SAFE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # for every open of a store file


class UnsafeFile(Exception):
    """What is at a store file's name is not a regular file belt reads, or too large (``why``)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def size_text(count: int) -> str:
    """A byte count as the limits are written ("64 MiB", "4 KiB")."""
    return f"{count // MiB} MiB" if count >= MiB else f"{count // 1024} KiB"


_NOT_REGULAR = {  # what ``open_regular``'s refusals mean
    errno.ELOOP: "it is a symbolic link (belt does not follow links in its store)",
    errno.EISDIR: "it is a directory, not a regular file",
    errno.ENXIO: "it is a FIFO or a socket, not a regular file",
}


def _check_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise UnsafeFile(f"it is {kind_of(mode)}, not a regular file")


def open_regular(path: Path, *, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the regular file at ``path``; UnsafeFile, before any read, for others."""
    try:
        fd = os.open(path, flags | SAFE_FLAGS)
    except OSError as exc:
        if exc.errno in _NOT_REGULAR:
            raise UnsafeFile(_NOT_REGULAR[exc.errno]) from None
        raise
    try:
        _check_regular(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular_or_missing(path: Path) -> None:
    """UnsafeFile when something other than a regular file (or nothing) is at ``path``."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFile(_NOT_REGULAR[errno.ELOOP])
    _check_regular(info.st_mode)


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
        with suppress(FileExistsError):  # made meanwhile by another writer
            path.mkdir(mode=0o700)


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new name in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


TEMP_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_TRIES = 100  # names of its own a write tries for its temporary file, then tempfile's
_temp_numbers = itertools.count()


def _new_temp_file(path: Path) -> tuple[int, str]:
    """A new hidden 0600 file beside ``path``, named by process, thread and count.

    Beside its target, so the rename never crosses a file system; named, not drawn at random
    as ``mkstemp`` does, which was most of what a write cost."""
    prefix = f"{path.parent}{os.sep}.{path.name}.{os.getpid()}-{threading.get_ident()}-"
    for _ in range(TEMP_TRIES):
        name = f"{prefix}{next(_temp_numbers)}{TEMP_SUFFIX}"
        try:
            return os.open(name, TEMP_FLAGS, 0o600), name
        except FileExistsError:
            continue
        except FileNotFoundError:
            make_dirs(path.parent)
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


class _writing:  # noqa: N801 (used as a function: ``with _writing(path):``)
    """Within it, a write that fails for want of room is a BeltError naming ``path``."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
            raise BeltError(
                f"{self.path}: cannot write ({exc.strerror or exc}); that file is unchanged",
                hint="free some space (or fix the file system), then retry",
            ) from None


def atomic_write(
    path: Path, data: bytes, *, fsync: bool = True, exclusive: bool = False, keep_open: bool = False
) -> int | None:
    """Write ``data`` to a temporary file, fsync it, and move it to ``path`` in one step.

    With ``exclusive`` the move is a hard link (FileExistsError when ``path`` exists); with
    ``keep_open`` the descriptor written through is returned, open on the new file.
    """
    with _writing(path):
        fd, tmp = _new_temp_file(path)
        try:
            _write_all(fd, data)
            if fsync:
                os.fsync(fd)
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
            if fsync:
                fsync_dir(path.parent)
        except BaseException:
            os.close(fd)
            Path(tmp).unlink(missing_ok=True)  # gone already once moved to ``path``
            raise
    if keep_open:
        return fd
    os.close(fd)
    return None


def read_bytes(path: Path, *, limit: int | None = None) -> bytes:
    """The regular file ``path``, at most ``limit`` bytes (OBJECT_MAX); else UnsafeFile."""
    limit = OBJECT_MAX if limit is None else limit
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnsafeFile(f"it is {size} bytes, above the {size_text(limit)} a store file holds")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 * MiB, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise UnsafeFile(f"it grew above the {size_text(limit)} a store file holds")
            chunks.append(chunk)
    finally:
        os.close(fd)


def read_line(handle: BinaryIO, *, limit: int | None = None) -> bytes:
    """The next line of ``handle`` with its newline (b"" at the end); UnsafeFile past ``limit``."""
    limit = LINE_MAX if limit is None else limit
    line = handle.readline(limit + 1)
    if len(line) > limit and not line.endswith(b"\n"):
        raise line_too_long(limit)
    return line


def line_too_long(limit: int | None = None) -> UnsafeFile:
    """The refusal of a line longer than ``limit`` (LINE_MAX)."""
    limit = LINE_MAX if limit is None else limit
    return UnsafeFile(f"a line is longer than the {size_text(limit)} a store line may be")


def iter_lines(handle: BinaryIO, start: int) -> Iterator[tuple[int, bytes]]:
    """Each complete line from byte ``start`` on, with its offset, without its newline."""
    handle.seek(start)
    offset = start
    while True:
        line = read_line(handle)
        if not line.endswith(b"\n"):
            return
        yield offset, line[:-1]
        offset += len(line)


def append_line(path: Path, line: bytes, *, header: bytes, fsync: bool = True) -> None:
    """Append ``line`` to ``path`` (lock held), cutting a torn tail; a new one gets ``header``."""
    try:
        fd = open_regular(path, flags=os.O_RDWR | os.O_APPEND)
    except FileNotFoundError:
        try:
            atomic_write(path, header + line, fsync=fsync, exclusive=True)
        except HardLinksUnsupported:
            atomic_write(path, header + line, fsync=fsync)  # no writer creates without the lock
        return
    try:
        with _writing(path):
            _cut_torn_tail(fd)
        append_to(fd, path, line, fsync=fsync)
    finally:
        os.close(fd)


def append_to(fd: int, path: Path, line: bytes, *, fsync: bool = True) -> os.stat_result:
    """Append ``line`` through ``fd`` to ``path``, whose last line is complete; its status after."""
    with _writing(path):  # a partly written line is torn: the next append cuts it off
        _write_all(fd, line)
        if fsync:
            os.fsync(fd)
        return os.fstat(fd)


def _cut_torn_tail(fd: int) -> None:
    end = os.fstat(fd).st_size
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return
    while end > 0:
        start = max(0, end - 4096)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            os.ftruncate(fd, start + newline + 1)
            return
        end = start
    # No complete line at all: the file is damaged, not torn, and is left as it is.
    raise DamagedLines("no complete line")
