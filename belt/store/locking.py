"""Inter-process locks: ``fcntl.flock`` on a lock file per guarded thing, re-entrant in a thread.

A lock is exclusive against every other thread and process (the kernel drops a dead holder's).
Lock files stay open (at most ``LOCKS_KEPT``); one deleted meanwhile is found by an ``fstat``
under the lock and opened again by its name, and a forked child opens its own.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path

from belt.errors import InvalidInput
from belt.store.files import SAFE_FLAGS, make_dirs

LOCKS_KEPT = 64  # the most lock files a process keeps open; then those not held are closed


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


class _LockFile:
    """One kept lock file, held ``depth`` times by the thread holding ``mutex``, flocked.

    Re-entrant within a thread, exclusive between threads; ``closed`` once no longer kept."""

    __slots__ = ("closed", "depth", "fd", "mutex", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = _open_lock_file(path)
        self.mutex = threading.RLock()
        self.depth = 0
        self.closed = False

    def take(self) -> bool:
        """Take the ``flock`` (``mutex`` held); False, closed and forgotten, if it was deleted."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        if os.fstat(self.fd).st_nlink:
            return True
        with _registry:
            if _kept.get(str(self.path)) is self:
                del _kept[str(self.path)]
        self.closed = True
        os.close(self.fd)  # which releases its flock
        return False


_kept: dict[str, _LockFile] = {}
_registry = threading.Lock()


def _lock_file(path: Path) -> _LockFile:
    """The kept lock file of ``path``, opened (and kept) when it is not."""
    key = str(path)
    if (found := _kept.get(key)) is not None:
        return found
    with _registry:
        found = _kept.get(key)
        if found is None:
            if len(_kept) >= LOCKS_KEPT:
                _close_unheld()
            found = _kept[key] = _LockFile(path)
        return found


def _close_unheld() -> None:
    """Close the kept lock files no thread holds (the caller holds ``_registry``)."""
    for key, kept in list(_kept.items()):
        if not kept.mutex.acquire(blocking=False):
            continue
        try:
            if kept.depth == 0:
                del _kept[key]
                kept.closed = True
                os.close(kept.fd)
        finally:
            kept.mutex.release()


def _forget_in_child() -> None:
    # The parent's descriptors share its flocks: the child closes them and opens its own. A
    # hold the forking thread was inside ends without touching the closed descriptor.
    global _registry
    _registry = threading.Lock()
    for kept in _kept.values():
        kept.closed = True
        os.close(kept.fd)
    _kept.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class file_lock:  # noqa: N801 (used as a function: ``with file_lock(path):``)
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block."""

    __slots__ = ("held", "path")

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        while True:  # again when the lock file taken was closed meanwhile, or deleted
            held = _lock_file(self.path)
            held.mutex.acquire()
            try:
                if not held.closed and (held.depth or held.take()):
                    held.depth += 1
                    self.held = held
                    return
            except BaseException:
                held.mutex.release()
                raise
            held.mutex.release()

    def __exit__(self, *exc: object) -> None:
        held = self.held
        held.depth -= 1
        try:
            if held.depth == 0 and not held.closed:
                fcntl.flock(held.fd, fcntl.LOCK_UN)
        finally:
            held.mutex.release()
