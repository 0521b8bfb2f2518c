"""Where ``belt check`` writes (``--junit-xml FILE``, ``--save DIR``), tried before it runs, so a
path it cannot write is refused at once (exit 5): ``os.access`` says yes to root everywhere."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from belt.errors import InvalidInput


def cannot_write(option: str, path: Path | str, exc: OSError) -> InvalidInput:
    """The error (exit 5) for an ``option`` whose ``path`` could not be written."""
    return InvalidInput(f"{option} {path}: cannot write it: {exc.strerror or exc}")


def require_writable_file(path: Path, *, option: str) -> None:
    """Refuse ``path`` unless a file can be written there (opened to append, or made, removed)."""
    try:
        if path.is_dir():
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
        if os.path.lexists(path) and not path.exists():
            return  # a link to nowhere: writing makes its target, which trying would leave behind
        flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # a FIFO: no wait
        made = not path.exists()
        os.close(os.open(path, flags | (os.O_CREAT | os.O_EXCL if made else os.O_APPEND), 0o644))
        if made:
            path.unlink(missing_ok=True)
    except OSError as exc:  # a name too long, for one
        raise cannot_write(option, path, exc) from None


def require_writable_directory(path: Path, *, option: str) -> None:
    """Refuse ``path`` unless files can be written in it (what is tried is removed again)."""
    try:
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if existing == path:
            tempfile.TemporaryFile(prefix=".belt-check-", dir=path).close()
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".belt-check-", dir=existing))
    except OSError as exc:
        raise cannot_write(option, path, exc) from None
