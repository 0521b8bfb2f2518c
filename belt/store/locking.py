"""Inter-process locks: ``fcntl.flock`` on one lock file per guarded thing.

A lock is re-entrant within one thread (so ``update`` may run inside ``lock`` of the same
object) and exclusive against every other thread and process. The kernel drops a lock when its
holder dies, so a killed process never leaves a stale lock behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from belt.errors import InvalidInput
from belt.store.files import SAFE_FLAGS, make_dirs

_local = threading.local()


def _held() -> dict[str, int]:
    held: dict[str, int] | None = getattr(_local, "held", None)
    if held is None:
        held = {}
        _local.held = held
    return held


def _open_lock_file(path: Path) -> int:
    # Without following a link at its name: a lock file linked elsewhere would create (or
    # lock) a file outside the store.
    flags = os.O_RDWR | os.O_CREAT | SAFE_FLAGS
    try:
        try:
            return os.open(path, flags, 0o600)
        except FileNotFoundError:
            make_dirs(path.parent)
            return os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise InvalidInput(
            f"{path}: damaged store file: it is a symbolic link (belt does not follow links "
            "in its store)",
            hint="belt leaves a damaged file as it is; move it aside or restore it, then retry",
        ) from None


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block."""
    held = _held()
    key = str(path)
    if key in held:
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    fd = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held[key] = 1
        try:
            yield
        finally:
            del held[key]
    finally:
        # Closing the descriptor releases the flock.
        os.close(fd)
