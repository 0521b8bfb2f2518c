"""The embedded store: JSON files under the state directory, shared safely by many processes.

Objects, indexes, append-only logs, tags and a private part (docs/store.md); an operation touches
only the files of the objects it names, so its cost does not grow with the store.
"""

from __future__ import annotations

import fcntl
import functools
import json
import math
import os
import re
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeVar, cast

from pydantic_core import to_json

from belt.errors import Conflict, InvalidInput, NotFound
from belt.store import files
from belt.store.files import (
    HEADER_MAX,
    SAFE_FLAGS,
    DamagedLines,
    HardLinksUnsupported,
    UnsafeFile,
    append_line,
    append_to,
    atomic_write,
    fsync_dir,
    iter_lines,
    line_too_long,
    make_dirs,
    open_regular,
    read_bytes,
    read_line,
)
from belt.store.locking import file_lock
from belt.store.shapes import shape_problem

SCHEMA_VERSION = 1  # the version of every file this belt writes; older files are migrated when read

Record = dict[str, object]  # a JSON object, checked against its kind's shape when read
R = TypeVar("R", bound=Mapping[str, object])

Migration = Callable[[Record], Record]

# Steps by (kind, version) to the next version; a kind, "index:<name>" or "log:<name>". None yet.
MIGRATIONS: dict[tuple[str, int], Migration] = {}

PATHS_KEPT = 4096  # the most paths a store keeps made
FRESH_KEPT = 64  # the most records ``read_fresh`` (or appends) keep

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
ID_RULE = "1 to 128 letters, digits, '_' or '-'"


def check_id(value: str, *, what: str = "id") -> str:
    """Return ``value`` if it is safe as a file name; otherwise raise InvalidInput (exit 5)."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidInput(f"invalid {what} {value!r}: an id is {ID_RULE}")
    return value


class LogLines(NamedTuple):
    """Complete ``(offset, line)`` pairs of a log, where the next read starts, if it restarted."""

    lines: list[tuple[int, bytes]]
    end: int
    restarted: bool
    version: int


@dataclass(frozen=True, slots=True)
class LogReader:
    """One open log: the raw line at an offset, a piece at a time (see ``Store.log_reader``)."""

    path: Path
    handle: BinaryIO
    version: int  # the schema version its header names

    def starts_line(self, offset: int) -> bool:
        """True when a line other than the header starts at byte ``offset``, now read from."""
        if offset <= 0:
            return False
        self.handle.seek(offset - 1)
        return self.handle.read(1) == b"\n"

    def pieces(self, offset: int, size: int = 1024 * 1024) -> Iterator[bytes]:
        """The line at byte ``offset`` in pieces of at most ``size`` bytes (none: no line there)."""
        with _Reading(self.path):
            if not self.starts_line(offset):
                return
            taken = 0
            while True:
                piece = self.handle.read(size)
                if not piece:
                    return  # the end of a torn last line
                newline = piece.find(b"\n")
                if newline >= 0:
                    yield piece[:newline]
                    return
                taken += len(piece)
                if taken > files.LINE_MAX:
                    raise damaged(self.path, line_too_long().why)
                yield piece


def damaged(path: Path, why: str) -> InvalidInput:
    """The error (exit 5) of a store file belt cannot read: its path and what is wrong."""
    return InvalidInput(
        f"{path}: damaged store file: {why}",
        hint="belt leaves a damaged file as it is; move it aside or restore it, then retry",
    )


class _Reading:
    """Within it, an unsafe or unreadable file is damage; a missing one stays FileNotFoundError."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, UnsafeFile):
            raise damaged(self.path, exc.why) from None
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
            raise damaged(self.path, f"it cannot be read ({exc.strerror})") from None


class _NotJSON(ValueError):
    """A number belt never writes (NaN, Infinity, one that overflows to infinity)."""


def _refuse_constant(name: str) -> Any:
    raise _NotJSON(f"{name}, which is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotJSON(f"the number {text[:40]}, which is not finite")
    return value


def _loads(text: str | bytes) -> Any:
    """JSON as belt writes it: NaN, Infinity and overflowing numbers are refused."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)


def _parse_json(path: Path, raw: bytes, where: str = "it ") -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise damaged(path, f"{where}is not UTF-8 text") from None
    if not text.strip():
        raise damaged(path, f"{where}is empty")
    try:
        return _loads(text)
    except _NotJSON as exc:
        raise damaged(path, f"{where}holds {exc}") from None
    except json.JSONDecodeError as exc:
        detail = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise damaged(path, f"{where}is not valid JSON ({detail})") from None
    except RecursionError:
        raise damaged(path, f"{where}is nested too deeply to be a belt record") from None
    except ValueError as exc:  # an integer too long to read, for one
        raise damaged(path, f"{where}cannot be read as JSON ({exc})") from None


# pydantic-core's ``to_json`` writes the standard library's compact JSON, several times faster.


def _lines(records: Sequence[Mapping[str, object]]) -> bytes:
    return b"\n".join([to_json(record) for record in records]) + b"\n"


@functools.cache
def _header_line(family: str, schema: int) -> bytes:
    """The first line of a line file of ``family`` at ``schema``, encoded once."""
    return to_json({"belt": family, "schema": schema}) + b"\n"


def _stamp_of(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _close_all(kept: dict[Path, Any]) -> None:
    """Empty ``kept``, closing the descriptor last in each of its tuples."""
    for path in list(kept):
        found = kept.pop(path, None)
        if found is not None and found[-1] is not None and found[-1] >= 0:
            os.close(found[-1])


class Store:
    """JSON files under ``root``, written atomically under per-object inter-process locks."""

    def __init__(
        self,
        root: Path,
        *,
        fsync: bool = True,
        schema: int = SCHEMA_VERSION,
        migrations: Mapping[tuple[str, int], Migration] | None = None,
        shapes: bool = False,
    ) -> None:
        self.root = Path(root)
        self._base = str(self.root)
        self._files_made: dict[tuple[str, str, str], Path] = {}
        self.fsync = fsync
        self.schema = schema
        self.migrations = dict(MIGRATIONS if migrations is None else migrations)
        self.shapes = shapes  # check each object read against its kind's shape (belt.store.shapes)
        self._fresh: dict[Path, tuple[object, bytes, int]] = {}
        weakref.finalize(self, _close_all, self._fresh)
        # Per line file appended to: its stamp after the append, and a descriptor kept open.
        self._appended: dict[Path, tuple[object, int | None]] = {}
        weakref.finalize(self, _close_all, self._appended)

    def without_fsync(self) -> Store:
        """The same store writing without fsync (still atomic), for high-rate writers."""
        return Store(
            self.root,
            fsync=False,
            schema=self.schema,
            migrations=self.migrations,
            shapes=self.shapes,
        )

    # Paths

    def _file(self, area: str, name: str, id: str, suffix: str, what: str) -> Path:
        """The file ``area/name/id+suffix`` below the root, its names checked once and kept."""
        key = (area, name, id)
        try:
            found = self._files_made.get(key)
        except TypeError:  # not a name at all: check_id says so
            found = None
        if found is None:
            check_id(name, what=what)
            check_id(id)
            if len(self._files_made) >= PATHS_KEPT:
                self._files_made.clear()
            found = self._files_made[key] = Path(os.path.join(self._base, area, name, id + suffix))
        return found

    def path(self, kind: str, id: str) -> Path:
        """The file that holds one object (checked ids only)."""
        return self._file("objects", kind, id, ".json", "kind")

    def index_path(self, index: str, owner: str) -> Path:
        """The file that holds ``owner``'s members in ``index`` (for messages that name it)."""
        return self._file("index", index, owner, ".jsonl", "index")

    def _log_path(self, log: str, id: str) -> Path:
        return self._file("logs", log, id, ".jsonl", "log")

    def _tag_dir(self, tag: str) -> Path:
        return Path(os.path.join(self._base, "tags", check_id(tag, what="tag")))

    def _lock_path(self, area: str, name: str, id: str) -> Path:
        return self._file(f"locks/{area}", name, id, ".lock", "id")

    # Objects

    def lock(self, kind: str, id: str) -> AbstractContextManager[object]:
        """An exclusive lock on one object, across threads and processes; re-entrant."""
        return self._hold(self._lock_path("objects", kind, id))

    def read(self, kind: str, id: str) -> Record:
        """One object's data; NotFound (exit 3) if missing, InvalidInput (exit 5) if damaged."""
        return self._read_object(self.path(kind, id), kind, id, "")

    def _read_object(self, path: Path, kind: str, id: str, part: str) -> Record:
        try:
            with _Reading(path):
                raw = self._read_file(path)
        except FileNotFoundError:
            raise NotFound(f"no {part}{kind} {id}") from None
        return self._decode_object(path, kind, id, raw)

    def read_fresh(self, kind: str, id: str) -> Record:
        """``read``, read again only when a stat shows the file replaced since this store saw it."""
        return self._read_fresh(self.path(kind, id), kind, id)[0]

    def read_if_replaced(self, kind: str, id: str, seen: object) -> tuple[Record | None, object]:
        """``read_fresh``, or None while the file is still the one ``seen`` stands for."""
        path = self.path(kind, id)
        if seen is not None:
            kept = self._fresh.get(path)
            if kept is not None and kept[1] is seen and kept[0] == self._stamp(path):
                return None, seen
        return self._read_fresh(path, kind, id)

    def seen(self, kind: str, id: str) -> object:
        """What stands for the object's file as this store last read or wrote it (or None)."""
        kept = self._fresh.get(self.path(kind, id))
        return None if kept is None else kept[1]

    def _read_fresh(self, path: Path, kind: str, id: str) -> tuple[Record, object]:
        """``read_fresh`` of the object at ``path``, and the blob it keeps (None if none)."""
        kept = self._fresh.get(path)
        if kept is not None and kept[0] == self._stamp(path):
            document = json.loads(kept[1])  # checked when it was kept: the plain reader is enough
            return self._migrate(path, kind, int(document["schema"]), document["data"]), kept[1]
        # Pinned before it is read: what is read is that file, or a later one (read again next).
        stamp = self._stamp(path)
        pin = None if stamp is None else self._pin(path, stamp)
        try:
            data = self.read(kind, id)
        except BaseException:
            if pin is not None:
                self._unpin(pin)
            raise
        blob = self._encode_object(kind, id, data)
        self._keep(path, stamp, blob, pin)
        return data, blob if pin is not None else None

    def _keep(self, path: Path, stamp: object, blob: bytes, pin: int | None) -> None:
        """Keep ``blob`` for ``read_fresh`` while ``path`` has ``stamp`` (``pin`` holds it open)."""
        old = self._fresh.pop(path, None)
        if old is not None:
            self._unpin(old[2])
        if pin is None:
            return
        if len(self._fresh) >= FRESH_KEPT:
            _close_all(self._fresh)
        self._fresh[path] = (stamp, blob, pin)

    def get(self, kind: str, id: str) -> Record | None:
        """One object's data, or None if it does not exist."""
        with suppress(NotFound):
            return self.read(kind, id)
        return None

    def exists(self, kind: str, id: str) -> bool:
        """True if the object has a file (whether or not it is readable)."""
        return self._is_file(self.path(kind, id))

    def create(self, kind: str, id: str, data: Mapping[str, object]) -> None:
        """Store a new object; Conflict (exit 4) if one with this id exists."""
        path = self.path(kind, id)
        blob = self._encode_object(kind, id, data)
        try:
            self._put_file(path, blob, exclusive=True)
        except FileExistsError:
            raise Conflict(f"{kind} {id} already exists") from None
        except HardLinksUnsupported:
            with self.lock(kind, id):
                if path.exists():
                    raise Conflict(f"{kind} {id} already exists") from None
                self._put_file(path, blob)

    def write(self, kind: str, id: str, data: Mapping[str, object]) -> None:
        """Create or replace an object atomically; a damaged or newer file is never replaced."""
        path = self.path(kind, id)
        blob = self._encode_object(kind, id, data)
        with self.lock(kind, id):
            with suppress(NotFound):
                self.read(kind, id)
            self._replace(path, blob)

    def update(self, kind: str, id: str, fn: Callable[[R], R]) -> R:
        """Under the lock: read, apply ``fn`` (nothing written if it raises), write, return it."""
        path = self.path(kind, id)
        if not self._lexists(path):
            raise NotFound(f"no {kind} {id}")  # without leaving a lock file for a missing id
        with self.lock(kind, id):
            # Read afresh (no one else holds it); a stat, when this store keeps the record.
            current = self.read_fresh(kind, id) if path in self._fresh else self.read(kind, id)
            new = fn(cast(R, current))
            self._replace(path, self._encode_object(kind, id, new))  # TypeError unless a dict
            return new

    def _replace(self, path: Path, blob: bytes) -> None:
        """Replace ``path`` with ``blob`` (lock held), kept for ``read_fresh`` if it keeps it."""
        if path not in self._fresh:
            self._put_file(path, blob)
            return
        stamp, pin = self._put_pinned(path, blob)
        self._keep(path, stamp, blob, pin)

    def merge(self, kind: str, id: str, changes: Mapping[str, object]) -> Record:
        """Under the object's lock: set the fields in ``changes``, keep the rest; return it."""
        return self.update(kind, id, lambda current: {**current, **changes})

    def list_ids(self, kind: str) -> list[str]:
        """Every id of a kind, sorted (reads the directory, not the files)."""
        directory = Path(os.path.join(self._base, "objects", check_id(kind, what="kind")))
        return sorted(
            name[: -len(".json")] for name in self._names(directory) if name.endswith(".json")
        )

    # Indexes: ordered sets of member ids per owner

    def link(self, index: str, owner: str, member: str) -> None:
        """Add ``member`` to ``owner``'s members in ``index`` (idempotent: one line appended)."""
        self.link_all(index, owner, [member])

    def link_all(self, index: str, owner: str, members: Sequence[str]) -> None:
        """``link`` of each of ``members`` in order, in one write under one hold of the lock."""
        for member in members:
            check_id(member)
        if not members:
            return
        path = self.index_path(index, owner)
        with self._hold(self._lock_path("index", index, owner)):
            self._append_record(path, "index", *({"add": member} for member in members))

    def unlink(self, index: str, owner: str, member: str) -> None:
        """Remove ``member`` from ``owner``'s members in ``index`` (idempotent)."""
        check_id(member)
        path = self.index_path(index, owner)
        with self._hold(self._lock_path("index", index, owner)):
            if member not in self.members(index, owner):
                return
            self._append_record(path, "index", {"remove": member})

    def index_size(self, index: str, owner: str) -> int:
        """The size in bytes of ``owner``'s index, which grows with every link."""
        return self._size(self.index_path(index, owner))

    def members(self, index: str, owner: str) -> list[str]:
        """The ids linked to ``owner`` in ``index``, in the order they were linked."""
        path = self.index_path(index, owner)
        members: dict[str, None] = {}
        for number, record in self._read_records(path, "index", index):
            if isinstance(added := record.get("add"), str):
                members[added] = None
            elif isinstance(removed := record.get("remove"), str):
                members.pop(removed, None)
            else:
                raise damaged(path, f"line {number} is neither an add nor a remove")
        return list(members)

    # Logs: append-only records

    def append(
        self, log: str, id: str, record: Mapping[str, object], *, sync: bool | None = None
    ) -> None:
        """Append one record to a log, fsynced unless ``sync=False``."""
        self.append_group(log, id, [record], sync=sync)

    def append_group(
        self,
        log: str,
        id: str,
        records: Sequence[Mapping[str, object]],
        *,
        sync: bool | None = None,
    ) -> None:
        """``append`` of each of ``records`` in order, in one write under one lock.

        A new log is created without the lock, by a hard link that never replaces another
        writer's."""
        if not all(isinstance(record, dict) for record in records):
            raise TypeError("a log record must be a dict")
        if not records:
            return
        path = self._log_path(log, id)
        if path not in self._appended and self._create_lines(path, "log", records, sync=sync):
            return
        with self._hold(self._lock_path("logs", log, id)):
            self._append_record(path, "log", *records, sync=sync)

    def read_log(self, log: str, id: str) -> list[Record]:
        """Every record of a log in order ([] if it does not exist); a torn last line is skipped."""
        return [record for _, record in self._read_records(self._log_path(log, id), "log", log)]

    def log_size(self, log: str, id: str) -> int:
        """The size in bytes of a log (0 if it does not exist), which grows with every append."""
        return self._size(self._log_path(log, id))

    def log_lines(
        self, log: str, id: str, offset: int = 0, *, max_bytes: int | None = None
    ) -> LogLines:
        """Complete lines of a log from ``offset``, up to ``max_bytes`` (restarted: it shrank)."""
        path = self._log_path(log, id)
        opened = self._opened(path)
        if opened is None:
            return LogLines([], 0, offset > 0, self.schema)
        found: list[tuple[int, bytes]] = []
        with opened as handle, _Reading(path):
            restarted = offset > handle.seek(0, os.SEEK_END)
            handle.seek(0)
            if restarted:
                offset = 0
            header = read_line(handle, limit=HEADER_MAX)
            if not header.endswith(b"\n"):
                # No complete line yet: a new log whose first append is still being made.
                return LogLines([], 0, restarted, self.schema)
            version = self._check_header(path, header[:-1], "log")
            first = end = max(offset, len(header))
            for start, line in iter_lines(handle, end):
                found.append((start, line))
                end = start + len(line) + 1
                if max_bytes is not None and end - first >= max_bytes:
                    break
        return LogLines(found, end, restarted, version)

    def decode_log_line(self, log: str, id: str, line: bytes, offset: int, version: int) -> Record:
        """One raw log line (schema ``version``) as its record; InvalidInput if damaged."""
        try:
            record = _loads(line)
        except (ValueError, RecursionError):
            # Read again the careful way, for the message that names what is wrong.
            record = _parse_json(self._log_path(log, id), line, f"the line at byte {offset} ")
        if not isinstance(record, dict):
            raise damaged(
                self._log_path(log, id), f"the line at byte {offset} is not a JSON object"
            )
        if version == self.schema:
            return record  # the path is built only when a record needs it
        return self._migrate(self._log_path(log, id), f"log:{log}", version, record)

    def read_log_line(self, log: str, id: str, offset: int) -> Record:
        """The record of the log line at byte ``offset`` (``log_lines``'); NotFound if none."""
        missing = NotFound(f"no record of {log} {id} starts at byte {offset}")
        if offset <= 0:
            raise missing
        with self.log_reader(log, id) as reader, _Reading(reader.path):
            if not reader.starts_line(offset):
                raise missing
            line = read_line(reader.handle)
        if not line.endswith(b"\n"):
            raise missing
        return self.decode_log_line(log, id, line[:-1], offset, reader.version)

    @contextmanager
    def log_reader(self, log: str, id: str) -> Iterator[LogReader]:
        """The log opened once, its header checked, to read lines at offsets; NotFound if none."""
        path = self._log_path(log, id)
        opened = self._opened(path)
        if opened is None:
            raise NotFound(f"no log {log} {id}")
        with opened as handle:
            with _Reading(path):
                version = self._check_header(path, read_line(handle, limit=HEADER_MAX), "log")
            yield LogReader(path, handle, version)

    # The private part: what is never printed, journalled or reported (URLs with credentials)

    def private_path(self, kind: str, id: str) -> Path:
        """The file that holds one private record (for a message that names it)."""
        return self._file("private", kind, id, ".json", "kind")

    def write_private(self, kind: str, id: str, data: Mapping[str, object]) -> None:
        """Store ``data`` in the private part (0600, atomic); it replaces what was there."""
        self._put_file(self.private_path(kind, id), self._encode_object(kind, id, data))

    def read_private(self, kind: str, id: str) -> Record:
        """Data from the private part; NotFound if missing, InvalidInput if damaged."""
        return self._read_object(self.private_path(kind, id), kind, id, "private ")

    # Tags: sets of names kept as empty marker files, so adding and removing cost one file

    def tag(self, tag: str, name: str) -> None:
        """Add ``name`` to ``tag`` (idempotent)."""
        directory = self._tag_dir(tag)
        path = directory / check_id(name, what="name")
        # Opened without following a link, so nothing outside the store is created through one.
        flags = os.O_WRONLY | os.O_CREAT | SAFE_FLAGS
        try:
            try:
                fd = os.open(path, flags, 0o600)
            except FileNotFoundError:
                make_dirs(directory)
                fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise damaged(path, f"it cannot be made ({exc.strerror})") from None
        os.close(fd)
        if self.fsync:
            fsync_dir(directory)

    def untag(self, tag: str, name: str) -> None:
        """Remove ``name`` from ``tag`` (idempotent)."""
        directory = self._tag_dir(tag)
        (directory / check_id(name, what="name")).unlink(missing_ok=True)
        if self.fsync and directory.is_dir():
            fsync_dir(directory)

    def tagged(self, tag: str) -> list[str]:
        """The names in ``tag``, sorted."""
        return sorted(self._names(self._tag_dir(tag)))

    # Encoding, decoding, schema versions

    def _encode_object(self, kind: str, id: str, data: Mapping[str, object]) -> bytes:
        if not isinstance(data, dict):
            raise TypeError(f"{kind} {id}: data must be a dict")
        envelope = {"belt": "object", "schema": self.schema, "kind": kind, "id": id, "data": data}
        return to_json(envelope) + b"\n"

    def _decode_object(self, path: Path, kind: str, id: str, raw: bytes) -> Record:
        document = _parse_json(path, raw)
        if not isinstance(document, dict) or document.get("belt") != "object":
            raise damaged(path, "it is not a belt store object")
        version = self._version(path, document)
        if document.get("kind") != kind or document.get("id") != id:
            found = f"{document.get('kind')} {document.get('id')}"
            raise damaged(path, f"it holds {found}, not {kind} {id}")
        data = document.get("data")
        if not isinstance(data, dict):
            raise damaged(path, "its data is not a JSON object")
        data = self._migrate(path, kind, version, data)
        problem = shape_problem(kind, data) if self.shapes else None
        if problem is not None:
            raise damaged(path, f"it is not a {kind} record: {problem}")
        return data

    def _version(self, path: Path, document: Record) -> int:
        version = document.get("schema")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise damaged(path, f"its schema version {version!r} is not a positive whole number")
        if version > self.schema:
            raise InvalidInput(
                f"{path}: written by a newer belt (store schema {version}; "
                f"this belt reads up to {self.schema})",
                hint="upgrade belt to use this store; the file was left as it is",
            )
        return version

    def _migrate(self, path: Path, kind: str, version: int, data: Record) -> Record:
        while version < self.schema:
            step = self.migrations.get((kind, version))
            if step is None:
                raise damaged(path, f"no migration of {kind} from schema {version}")
            data = step(data)
            version += 1
        return data

    def _create_lines(
        self, path: Path, family: str, records: Sequence[Mapping[str, object]], *, sync: bool | None
    ) -> bool:
        """Create the line file ``path`` exclusively (False if one is there), keeping its fd."""
        if self._lexists(path):
            return False
        blob = _header_line(family, self.schema) + _lines(records)
        try:
            handle = self._put_lines(path, blob, sync=self.fsync if sync is None else sync)
        except (FileExistsError, HardLinksUnsupported):
            return False
        except UnsafeFile as exc:
            raise damaged(path, exc.why) from None
        if handle is not None:
            self._keep_appended(path, _stamp_of(os.fstat(handle)), handle)
        return True

    def _append_record(
        self, path: Path, family: str, *records: Mapping[str, object], sync: bool | None = None
    ) -> None:
        line = _lines(records)
        sync = self.fsync if sync is None else sync
        stamp, handle = self._appended.pop(path, (None, None))
        if handle is not None:
            try:
                same = stamp == self._stamp(path)
            except OSError:
                same = False  # the path below says what is wrong
            if same:
                # As this store's last append left it: no header to read, no torn tail to cut.
                try:
                    stamp = self._append_kept(handle, path, line, sync=sync)
                except BaseException:
                    self._unpin(handle)
                    raise
                self._appended[path] = (stamp, handle)
                return
            self._unpin(handle)  # the file changed since this store's last append
        # Never add to a file this belt cannot read (damaged, or from a newer belt).
        header = _header_line(family, self.schema)
        for attempt in (1, 2):
            with suppress(FileNotFoundError):
                with _Reading(path):
                    first = self._first_line(path)
                if first != header:
                    self._check_header(path, first, family)
            try:
                self._append_line(path, line, header=header, sync=sync)
                break
            except FileExistsError:
                # Created meanwhile by ``_create_lines``, which takes no lock: try once more.
                if attempt == 2:
                    raise
            except DamagedLines:
                raise damaged(path, "it has no complete line") from None
            except UnsafeFile as exc:
                raise damaged(path, exc.why) from None
        stamp = self._stamp(path)  # the caller holds the file's lock: no one appended since
        if stamp is not None:
            self._keep_appended(path, stamp, self._pin(path, stamp, os.O_RDWR | os.O_APPEND))

    def _keep_appended(self, path: Path, stamp: object, handle: int | None) -> None:
        if len(self._appended) >= FRESH_KEPT:
            _close_all(self._appended)
        self._appended[path] = (stamp, handle)

    def _check_header(self, path: Path, raw: bytes, family: str) -> int:
        header = _parse_json(path, raw, "line 1 ")
        if not isinstance(header, dict) or header.get("belt") != family:
            raise damaged(path, f"line 1 is not the header of a belt {family} file")
        return self._version(path, header)

    def _read_records(self, path: Path, family: str, name: str) -> Iterator[tuple[int, Record]]:
        """Each record of a line file, read a line at a time (none when the file is missing)."""
        opened = self._opened(path)
        if opened is None:
            return
        with opened as handle, _Reading(path):
            first = read_line(handle, limit=HEADER_MAX)
            if not first.endswith(b"\n"):
                raise damaged(path, "it has no complete line" if first else "it is empty")
            version = self._check_header(path, first[:-1], family)
            lines = iter_lines(handle, len(first))
            for number, (_, line) in enumerate(lines, start=2):
                record = _parse_json(path, line, f"line {number} ")
                if not isinstance(record, dict):
                    raise damaged(path, f"line {number} is not a JSON object")
                yield number, self._migrate(path, f"{family}:{name}", version, record)

    def _opened(self, path: Path) -> BinaryIO | None:
        """The line file at ``path`` open for reading; None when there is none."""
        with suppress(FileNotFoundError), _Reading(path):
            return self._open_lines(path)
        return None

    # The one place this class touches the file system (belt.store.memory keeps it in memory)

    def _read_file(self, path: Path) -> bytes:
        return read_bytes(path)

    def _put_file(self, path: Path, blob: bytes, *, exclusive: bool = False) -> None:
        atomic_write(path, blob, fsync=self.fsync, exclusive=exclusive)

    def _put_pinned(self, path: Path, blob: bytes) -> tuple[object, int]:
        """Replace ``path`` with ``blob``: the new file's stamp and a descriptor open on it."""
        fd = cast(int, atomic_write(path, blob, fsync=self.fsync, keep_open=True))
        return _stamp_of(os.fstat(fd)), fd

    def _is_file(self, path: Path) -> bool:
        return path.is_file()

    def _lexists(self, path: Path) -> bool:
        return os.path.lexists(path)

    def _size(self, path: Path) -> int:
        with suppress(FileNotFoundError):
            return path.stat().st_size
        return 0

    def _hold(self, lock_path: Path) -> AbstractContextManager[object]:
        return file_lock(lock_path)

    def _pin(self, path: Path, stamp: object, flags: int = os.O_RDONLY) -> int | None:
        """A descriptor held open with ``flags`` on ``path`` if it has ``stamp``, else None."""
        try:
            fd = open_regular(path, flags=flags)
        except (OSError, UnsafeFile):
            return None
        if _stamp_of(os.fstat(fd)) != stamp:
            os.close(fd)
            return None
        return fd

    def _unpin(self, pin: int) -> None:
        os.close(pin)

    def _stamp(self, path: Path) -> object:
        """What changes whenever the file at ``path`` is replaced (None when there is none)."""
        with suppress(FileNotFoundError):
            return _stamp_of(os.lstat(path))
        return None

    def _open_lines(self, path: Path) -> BinaryIO:
        return os.fdopen(open_regular(path), "rb")

    def _first_line(self, path: Path) -> bytes:
        with self._open_lines(path) as handle:
            return read_line(handle, limit=HEADER_MAX)

    def _append_kept(self, handle: int, path: Path, line: bytes, *, sync: bool) -> object:
        """Append ``line`` through ``handle`` to ``path``; the file's stamp after it."""
        return _stamp_of(append_to(handle, path, line, fsync=sync))

    def _append_line(self, path: Path, line: bytes, *, header: bytes, sync: bool) -> None:
        append_line(path, line, header=header, fsync=sync)

    def _put_lines(self, path: Path, blob: bytes, *, sync: bool) -> int | None:
        """A new line file made exclusively (FileExistsError); a descriptor open on it, or None."""
        handle = atomic_write(path, blob, fsync=sync, exclusive=True, keep_open=True)
        if handle is not None:
            fcntl.fcntl(handle, fcntl.F_SETFL, fcntl.fcntl(handle, fcntl.F_GETFL) | os.O_APPEND)
        return handle

    def _names(self, directory: Path) -> list[str]:
        with suppress(FileNotFoundError), os.scandir(directory) as entries:
            return [entry.name for entry in entries if not entry.name.startswith(".")]
        return []
