"""Inter-process locks: ``fcntl.flock`` on one lock file per guarded thing.

A lock is re-entrant within one thread (so ``update`` may run inside ``lock`` of the same
object) and exclusive against every other thread and process. The kernel drops a lock when its
holder dies, so a killed process never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from belt.store.files import make_dirs

_local = threading.local()


def _held() -> dict[str, int]:
    held: dict[str, int] | None = getattr(_local, "held", None)
    if held is None:
        held = {}
        _local.held = held
    return held


def _open_lock_file(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        make_dirs(path.parent)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


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
