"""A store held in memory, with the records, rules and errors of the file store.

For records that need not outlast the process (``belt test``, ``belt sim run --ephemeral``);
files another library opens by name go in a scratch directory ``close`` removes.
"""

from __future__ import annotations

import io
import tempfile
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

from belt.store.store import MIGRATIONS, SCHEMA_VERSION, Store, check_id

BASE = "memory:"  # what the paths of a memory store's records start with, in messages that name one


class MemoryStore(Store):
    """The store's records in this process's memory (see the module's docstring)."""

    def __init__(self, *, shapes: bool = False) -> None:
        self._base = BASE
        self._files_made = {}
        self.fsync = False
        self.schema = SCHEMA_VERSION
        self.migrations = dict(MIGRATIONS)
        self.shapes = shapes
        self._fresh = {}
        self._appended = {}
        self._files: dict[str, bytes] = {}
        self._lines: dict[str, bytearray] = {}
        self._dirs: dict[str, dict[str, None]] = {}
        self._locks: dict[str, threading.RLock] = {}
        self._mutex = threading.Lock()
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    @property
    def root(self) -> Path:  # type: ignore[override]
        """A scratch directory for files derived from records, made on first use."""
        with self._mutex:
            if self._scratch is None:
                self._scratch = tempfile.TemporaryDirectory(
                    prefix="belt-memory-", ignore_cleanup_errors=True
                )
            return Path(self._scratch.name)

    def close(self) -> None:
        """Remove the scratch directory, if one was made; the records stay readable."""
        with self._mutex:
            scratch, self._scratch = self._scratch, None
        if scratch is not None:
            scratch.cleanup()

    def without_fsync(self) -> Store:
        """This store itself: nothing in memory is fsynced."""
        return self

    def snapshot(self) -> dict[str, bytes]:
        """Every file the store holds by path, as the file store would hold it on disk."""
        with self._mutex:
            found = {key: bytes(value) for key, value in self._files.items()}
            found.update((key, bytes(value)) for key, value in self._lines.items())
            for directory, names in self._dirs.items():
                if directory.startswith(f"{BASE}/tags/"):
                    found.update((f"{directory}/{name}", b"") for name in names)
        return dict(sorted(found.items()))

    # Tags: a set of names per tag

    def tag(self, tag: str, name: str) -> None:
        """Add ``name`` to ``tag`` (idempotent)."""
        directory = str(self._tag_dir(tag))
        check_id(name, what="name")
        with self._mutex:
            self._dirs.setdefault(directory, {})[name] = None

    def untag(self, tag: str, name: str) -> None:
        """Remove ``name`` from ``tag`` (idempotent)."""
        directory = str(self._tag_dir(tag))
        check_id(name, what="name")
        with self._mutex:
            self._dirs.get(directory, {}).pop(name, None)

    # The files themselves

    def _read_file(self, path: Path) -> bytes:
        try:
            return self._files[str(path)]
        except KeyError:
            raise FileNotFoundError(str(path)) from None

    def _put_file(self, path: Path, blob: bytes, *, exclusive: bool = False) -> None:
        key = str(path)
        with self._mutex:
            if exclusive and key in self._files:
                raise FileExistsError(key)
            self._files[key] = blob
            self._listed(key)

    def _put_pinned(self, path: Path, blob: bytes) -> tuple[object, int]:
        self._put_file(path, blob)
        return blob, -1  # its stamp is the record itself; nothing to hold open

    def _listed(self, key: str) -> None:
        """Enter a new file's name in its directory (the caller holds the mutex)."""
        directory, _, name = key.rpartition("/")
        self._dirs.setdefault(directory, {})[name] = None

    def _stamp(self, path: Path) -> object:
        key = str(path)
        found = self._files.get(key)  # the record itself: equal bytes are the same record
        if found is None and (lines := self._lines.get(key)) is not None:
            return lines, len(lines)  # a line file and its length, which every append changes
        return found

    def _pin(self, path: Path, stamp: object, flags: int = 0) -> int | None:
        return -1 if self._stamp(path) == stamp else None  # nothing to hold open

    def _unpin(self, pin: int) -> None:
        pass

    def _is_file(self, path: Path) -> bool:
        key = str(path)
        return key in self._files or key in self._lines

    _lexists = _is_file

    def _size(self, path: Path) -> int:
        key = str(path)
        return len(self._lines.get(key) or self._files.get(key, b""))

    def _hold(self, lock_path: Path) -> AbstractContextManager[object]:
        key = str(lock_path)
        if (lock := self._locks.get(key)) is None:
            with self._mutex:
                lock = self._locks.setdefault(key, threading.RLock())
        return lock

    def _open_lines(self, path: Path) -> BinaryIO:
        if (found := self._lines.get(str(path))) is None:
            raise FileNotFoundError(str(path))
        with self._mutex:
            return io.BytesIO(bytes(found))

    def _append_kept(self, handle: int, path: Path, line: bytes, *, sync: bool) -> object:
        with self._mutex:
            found = self._lines[str(path)]
            found += line
            return found, len(found)

    def _append_line(self, path: Path, line: bytes, *, header: bytes, sync: bool) -> None:
        key = str(path)
        with self._mutex:
            if (found := self._lines.get(key)) is None:
                self._lines[key] = bytearray(header + line)
                self._listed(key)
            else:
                found += line

    def _put_lines(self, path: Path, blob: bytes, *, sync: bool) -> int | None:
        key = str(path)
        with self._mutex:
            if key in self._lines:
                raise FileExistsError(key)
            self._lines[key] = bytearray(blob)
            self._listed(key)
        return None  # nothing to hold open

    def _names(self, directory: Path) -> list[str]:
        with self._mutex:
            return list(self._dirs.get(str(directory), ()))
