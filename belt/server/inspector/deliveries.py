"""The inspector's deliveries: every hook request ``belt serve`` journalled and every
``hook.executed`` record of a simulated run, newest first.

:class:`Deliveries` holds summaries of the newest (a bounded window), read incrementally from the
logs; a delivery's id (``serve.<offset>``, ``<run id>.<offset>``) still opens an evicted one."""

from __future__ import annotations

import bisect
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from pydantic import ValidationError

from belt.deliveries.effects import effect_text
from belt.errors import InvalidInput, NotFound
from belt.records.journal import JOURNAL, SERVE
from belt.records.names import named_or_given
from belt.records.runs import EVENTS_LOG, find_run_id
from belt.store import check_id
from belt.wire.platform import LifecycleHookPayload
from belt.wire.validate import model_problems

if TYPE_CHECKING:
    from belt.store import Store

SOURCES = ("serve", "sim")
DECISIONS = ("allow", "deny", "stop", "suspend", "error")
FILTERS = ("event", "decision", "source", "chat", "run", "q")
CHOICES = {"source": SOURCES, "decision": DECISIONS}
LIMIT_MAX = 500
QUERY_MAX = 200
PROBLEMS_KEPT = 20  # damaged lines are reported (the newest this many), never silently skipped
MiB = 1024 * 1024
WINDOW_COUNT = 50_000  # the most deliveries whose summaries are held in memory: the newest
WINDOW_BYTES = 64 * MiB
"""The most bytes the held summaries may take (estimated: their texts and ENTRY_BYTES each)."""
ENTRY_BYTES = 2000
"""What one held summary costs beyond its texts (measured: its dict, entry, key and id)."""
SUMMARY_CHARS = 1000
"""A summary's texts are cut to this many characters (the detail has them whole)."""
RESPONSE_BYTES = 1 * MiB
"""The most bytes of rows one list answer holds (estimated: their texts and ROW_BYTES each)."""
ROW_BYTES = 400  # what one row costs in an answer beyond its texts
SEARCH_BYTES = 64 * MiB
"""The most bytes of recorded lines one text search reads before it answers with ``next``."""
READ_BYTES = 4 * MiB  # how much of a log is read at a time when the list catches up with it
PIECE_BYTES = 1 * MiB  # a recorded line is searched a piece of this size at a time


def text(value: Any) -> str | None:
    """A value from the store as a string, or None when it is not one (records are hostile)."""
    return value if isinstance(value, str) else None


def mapping(value: Any) -> dict[str, object]:
    """A value from the store as an object, or an empty one when it is not one."""
    return value if isinstance(value, dict) else {}


def number(value: Any) -> float | None:
    """A duration or status from the store, or None when it is not a number."""
    return None if isinstance(value, bool) or not isinstance(value, int | float) else value


def payload_problems(payload: Any) -> list[str]:
    """Why a payload is not a LifecycleHookPayload (empty when it is one)."""
    if not isinstance(payload, dict):
        return ["the payload is not a JSON object"]
    try:
        LifecycleHookPayload.model_validate(payload)
    except ValidationError as exc:
        return model_problems(exc)
    return []


Row = TypedDict(
    "Row",
    {
        "id": str,
        "source": Literal["serve", "sim"],
        "at": str,
        "event": str | None,
        "tool": str | None,
        "handler": str,
        "handler_type": str | None,
        "decision": str | None,
        "reason": str | None,
        "injected": bool,
        "status": float | None,
        "error": str | None,
        "duration_ms": float | None,
        "chat_id": str | None,
        "run_id": str | None,
        "signature": Literal["verified", "failed"] | None,
        "valid": bool | None,
        # A simulated run's hook only:
        "async": NotRequired[bool],
        "interrupt_id": NotRequired[str | None],
        "task_chat_id": NotRequired[str | None],
    },
)
"""A delivery as the list shows it (``detail`` gives it whole, as ``delivery``)."""


def served_summary(offset: int, record: dict[str, object]) -> Row:
    """The list's row for one record of ``belt serve``'s journal."""
    payload = mapping(record.get("request"))
    data = mapping(payload.get("data"))
    status = number(record.get("status"))
    error = text(record.get("error"))
    event = text(record.get("event")) or text(payload.get("event"))
    failed = status == 401 and (error or "").startswith("signature check failed")
    refused = status == 422 and "request" in record
    return {
        "id": f"{SERVE}.{offset}",
        "source": "serve",
        "at": text(record.get("at")) or "",
        "event": event,
        "tool": text(record.get("tool")) or text(data.get("tool")),
        "handler": text(record.get("route")) or "/hooks",
        "handler_type": "webhook",
        "decision": text(record.get("decision")) if status == 200 else None,
        "reason": text(record.get("reason")),
        "injected": record.get("injected") is True,
        "status": status,
        "error": error,
        "duration_ms": number(record.get("duration_ms")),
        "chat_id": text(payload.get("chat_id")),
        "run_id": text(payload.get("run_id")),
        "signature": "verified" if record.get("webhook_id") else "failed" if failed else None,
        "valid": True if text(record.get("event")) else False if refused else None,
    }


def executed_summary(run_id: str, offset: int, record: dict[str, object]) -> Row:
    """The list's row for one ``hook.executed`` record of a simulated run."""
    payload = record.get("payload")
    body = mapping(payload)
    data = mapping(body.get("data"))
    handler = text(record.get("handler")) or text(record.get("handler_type")) or "?"
    routed = text(record.get("routed_to"))
    return {
        "id": f"{run_id}.{offset}",
        "source": "sim",
        "at": text(record.get("at")) or "",
        "event": text(record.get("hook_event")) or text(body.get("event")),
        "tool": text(data.get("tool")),
        "handler": f"{handler} → {routed}" if routed else handler,
        "handler_type": text(record.get("handler_type")),
        "decision": text(record.get("decision")) or "allow",
        "reason": text(record.get("reason")),
        "injected": record.get("injected") is True,
        "status": None,
        "error": text(record.get("error")),
        "duration_ms": number(record.get("duration_ms")),
        "chat_id": text(body.get("chat_id")),
        "run_id": run_id,
        "signature": None,
        "valid": not payload_problems(payload),
        "async": record.get("async") is True,
        "interrupt_id": text(record.get("interrupt_id")),
        "task_chat_id": text(record.get("task_chat_id")),
    }


FIELDS = {"chat": "chat_id", "run": "run_id"}
"""The field of a row a filter compares, where it is not the filter's name."""


def matches(summary: Row, filters: dict[str, str]) -> bool:
    """True when a row passes every filter but the text one (event, decision, source, chat, run)."""
    for key, wanted in filters.items():
        if key == "decision" and wanted == "error":
            if not summary["error"] and summary["status"] in (None, 200):
                return False
        elif key != "q" and cast(Mapping[str, object], summary)[FIELDS.get(key, key)] != wanted:
            return False
    return True


def check_filters(raw: dict[str, str]) -> dict[str, str]:
    """The filters of a query, checked: InvalidInput naming the one that is wrong."""
    filters: dict[str, str] = {}
    for key, value in raw.items():
        if key not in FILTERS or value == "":
            continue
        if len(value) > QUERY_MAX:
            raise InvalidInput(f"{key}: at most {QUERY_MAX} characters")
        allowed = CHOICES.get(key, (value,))
        if value not in allowed:
            raise InvalidInput(f"{key}: {value!r} is not one of {', '.join(allowed)}")
        filters[key] = value
    return filters


@dataclass
class Entry:
    """One delivery: where its record is, and its row."""

    key: tuple[str, str, int]  # (time, owner: SERVE or a run id, offset in its log): the order
    summary: Row
    group: str | None = None  # what attempts of one delivery share (a webhook id; a boundary)
    size: int = 0  # the bytes its summary takes, estimated

    @property
    def row_bytes(self) -> int:
        """The bytes its row takes in an answer, estimated."""
        return self.size - ENTRY_BYTES + ROW_BYTES

    @property
    def log(self) -> tuple[str, str]:
        """The log (family, id) that holds its record."""
        return log_of(self.key[1])


BY_KEY = attrgetter("key")


def log_of(owner: str) -> tuple[str, str]:
    """The log (family, id) of a delivery's owner: ``belt serve``'s journal, or a run's events."""
    return (JOURNAL, SERVE) if owner == SERVE else (EVENTS_LOG, owner)


def held(owner: str, offset: int, record: dict[str, object]) -> Entry | None:
    """A record of ``owner``'s log as its entry is held, texts cut (None: it is no delivery)."""
    if owner == SERVE:
        summary, group = served_summary(offset, record), text(record.get("webhook_id"))
    elif record.get("type") == "hook.executed":
        summary = executed_summary(owner, offset, record)
        turn = mapping(record.get("payload")).get("turn_count")
        parts = (owner, record.get("hook_index"), summary["event"], turn)
        group = "|".join(map(str, (*parts, record.get("resource_id"))))
    else:
        return None
    row = cast(dict[str, object], summary)
    for key, value in row.items():
        if isinstance(value, str) and len(value) > SUMMARY_CHARS:
            row[key] = value[: SUMMARY_CHARS - 1] + "…"
    size = ENTRY_BYTES + sum(sys.getsizeof(v) for v in row.values() if isinstance(v, str))
    return Entry((summary["at"], owner, offset), summary, group, size)


def parse_id(delivery_id: str) -> tuple[str, int]:
    """(owner, offset) of a delivery id; NotFound when it is not one."""
    owner, dot, offset = delivery_id.rpartition(".")
    with contextlib.suppress(InvalidInput):
        if dot and offset.isdigit() and len(offset) <= 18:
            return check_id(owner), int(offset)
    raise NotFound(f"no delivery {delivery_id}")


class Deliveries:
    """Summaries of a store's newest deliveries (a bounded window), kept up to date."""

    def __init__(
        self, store: Store, *, window: int = WINDOW_COUNT, window_bytes: int = WINDOW_BYTES
    ) -> None:
        self.store = store
        self.window = window
        self.window_bytes = window_bytes
        self.entries: list[Entry] = []
        self.by_id: dict[str, Entry] = {}
        self.held_bytes = 0
        self.evicted = 0  # read, then let go to keep the window
        self.read_to: dict[tuple[str, str], int] = {}
        self.problems: list[str] = []
        self.signals = Signals(
            [store.root / "logs" / EVENTS_LOG]
            + [store.root / "objects" / kind for kind in ("run", "message", "sim")]
        )
        self.lock = threading.Lock()

    def refresh(self) -> None:
        """Read what was appended to the journal and to the runs' event logs since last time."""
        with self.lock:
            self._catch_up(SERVE)
            for run_id in self._grown_event_logs():
                self._catch_up(run_id)

    def _catch_up(self, owner: str) -> None:
        """Read ``owner``'s log from where the last read stopped to its end (lock held)."""
        log = log_of(owner)
        while True:
            start = self.read_to.get(log, 0)
            try:
                chunk = self.store.log_lines(*log, start, max_bytes=READ_BYTES)
            except InvalidInput as exc:
                self._problem(exc.message)
                return
            if chunk.restarted:  # the log was removed or replaced: read it again
                self.held_bytes -= sum(e.size for e in self.entries if e.key[1] == owner)
                self.entries = [e for e in self.entries if e.key[1] != owner]
                self.by_id = {e.summary["id"]: e for e in self.entries}
            added: list[Entry] = []
            for offset, line in chunk.lines:
                try:
                    record = self.store.decode_log_line(*log, line, offset, chunk.version)
                except InvalidInput as exc:
                    self._problem(exc.message)
                    continue
                if (made := held(owner, offset, record)) is not None:
                    added.append(made)
                    self.by_id[made.summary["id"]] = made
                    self.held_bytes += made.size
            self.read_to[log] = chunk.end
            if added:
                self.entries.extend(added)
                self.entries.sort(key=BY_KEY)
                self._keep_window()
            if chunk.end == start:
                return

    def _keep_window(self) -> None:
        """Let go of the oldest summaries past the window's count or bytes (lock held)."""
        excess = 0
        while len(self.entries) - excess > self.window or (
            self.held_bytes > self.window_bytes and excess < len(self.entries) - 1
        ):
            entry = self.entries[excess]
            self.held_bytes -= entry.size
            self.by_id.pop(entry.summary["id"], None)
            excess += 1
        if excess:
            del self.entries[:excess]
            self.evicted += excess

    def _problem(self, message: str) -> None:
        if message not in self.problems:
            self.problems = [*self.problems, message][-PROBLEMS_KEPT:]

    def _grown_event_logs(self) -> list[str]:
        """The runs whose event log grew since it was last read."""
        if not self.signals.changed():
            return []
        logs = self.store.root / "logs" / EVENTS_LOG
        with contextlib.suppress(FileNotFoundError), os.scandir(logs) as found:
            sizes = {
                item.name.removesuffix(".jsonl"): item.stat().st_size
                for item in found
                if item.name.endswith(".jsonl") and not item.name.startswith(".")
            }
            return sorted(
                run for run, size in sizes.items() if size != self.read_to.get((EVENTS_LOG, run), 0)
            )
        return []

    def query(
        self, filters: dict[str, str], *, limit: int = 100, before: str | None = None
    ) -> dict[str, object]:
        """The newest deliveries that pass ``filters`` before the delivery ``before`` (a page);
        ``complete``: whether a text search looked at every line."""
        self.refresh()
        limit = max(1, min(limit, LIMIT_MAX))
        anchor = self._entry(before).key if before is not None else None
        with self.lock:
            entries = list(self.entries)  # the scan below reads files without the lock
            problems = list(self.problems)
            evicted = self.evicted
        end = len(entries) if anchor is None else bisect.bisect_left(entries, anchor, key=BY_KEY)
        found, scanned, position = self._search(entries, end, filters, limit)
        searched = "q" in filters
        if searched:
            matched = len(found)
        else:  # without filters every row matches: the count needs no pass
            matched = sum(matches(e.summary, filters) for e in entries) if filters else len(entries)
        return {
            "total": len(entries) + evicted,
            "held": len(entries),
            "evicted": evicted,
            "problems": problems,
            "complete": not searched or (position <= 0 and scanned),
            "matched": matched,
            "items": [entries[p].summary for p in found],
            "next": entries[position].summary["id"] if position > 0 else None,
        }

    def _search(
        self,
        entries: list[Entry],
        end: int,
        filters: dict[str, str],
        limit: int,
        *,
        answer: bool = True,
    ) -> tuple[list[int], bool, int]:
        """The positions of the newest rows before ``end`` that pass ``filters`` (``q`` in their
        line), within the limits; whether every row was looked at; where a next page starts."""
        wanted = filters.get("q", "").casefold()
        found: list[int] = []
        size = read = 0
        with ExitStack() as stack:
            readers: dict[tuple[str, str], Any] = {}
            for position in range(end - 1, -1, -1):
                entry = entries[position]
                if not matches(entry.summary, filters):
                    continue
                full = answer and size + entry.row_bytes > RESPONSE_BYTES
                if len(found) == limit or (full and found):
                    return found, False, found[-1]
                if read >= SEARCH_BYTES:
                    return found, False, position + 1
                if wanted:
                    log = entry.log
                    if log not in readers:
                        try:
                            readers[log] = stack.enter_context(self.store.log_reader(*log))
                        except (InvalidInput, NotFound):
                            readers[log] = None
                    if readers[log] is None:
                        continue
                    hit, taken = _holds(readers[log].pieces(entry.key[2], PIECE_BYTES), wanted)
                    read += taken
                    if not hit:
                        continue
                found.append(position)
                size += entry.row_bytes
        return found, True, 0

    def _entry(self, delivery_id: str) -> Entry:
        """A delivery's entry, read from its log when no longer held; NotFound when none."""
        # No lock: one dict get is atomic, and the lock guards the scans and the writes.
        return self.by_id.get(delivery_id) or self._from_log(delivery_id)[0]

    def record(self, delivery_id: str) -> tuple[Entry, dict[str, object]]:
        """A delivery's entry and whole record (its run may be named by a short id); NotFound."""
        delivery_id = self._full_id(delivery_id)
        parse_id(delivery_id)  # NotFound, before any read, for what is not a delivery's id
        self.refresh()
        entry = self.by_id.get(delivery_id)
        return self._from_log(delivery_id) if entry is None else (entry, self.read(entry))

    def _full_id(self, delivery_id: str) -> str:
        """``delivery_id`` with its run named by the whole id."""
        owner, dot, offset = delivery_id.rpartition(".")
        if not dot or owner == SERVE:
            return delivery_id
        try:
            return f"{named_or_given(find_run_id, self.store, owner)}.{offset}"
        except InvalidInput:
            return delivery_id  # not an id at all: parse_id says there is no such delivery

    def _from_log(self, delivery_id: str) -> tuple[Entry, dict[str, object]]:
        """The entry and record of a delivery read from its log (one not held)."""
        owner, offset = parse_id(delivery_id)
        with contextlib.suppress(NotFound):
            record = self.store.read_log_line(*log_of(owner), offset)
            if (entry := held(owner, offset, record)) is not None:
                return entry, record
        raise NotFound(f"no delivery {delivery_id}")

    def read(self, entry: Entry) -> dict[str, object]:
        """The whole record of a delivery already listed."""
        return self.store.read_log_line(*entry.log, entry.key[2])

    def attempts(self, entry: Entry) -> list[str]:
        """The ids of every attempt of the same delivery held, oldest first."""
        if entry.group is None:
            return [entry.summary["id"]]
        with self.lock:
            found = [e.summary["id"] for e in self.entries if e.group == entry.group]
        return found if entry.summary["id"] in found else [entry.summary["id"], *found]

    def detail(self, delivery_id: str) -> dict[str, object]:
        """Everything recorded of one delivery: bodies, headers, timing, attempts, checks."""
        entry, record = self.record(delivery_id)
        summary = entry.summary
        served = summary["source"] == "serve"
        if served:
            payload, response, answer_note = record.get("request"), record.get("response"), None
            override = mapping(response).get("override")
        else:
            payload, override = record.get("payload"), record.get("override")
            response = {
                "decision": summary["decision"],
                **({"reason": summary["reason"]} if summary["reason"] else {}),
                "injected": summary["injected"],
                **({"override": override} if override is not None else {}),
            }
            answer_note = (
                "a simulated delivery records the decision, reason, whether it injected and "
                "any override, not the whole answer"
            )
        warnings = record.get("warnings")
        headers = record.get("headers") if served else None
        problems = payload_problems(payload) if payload is not None else ["nothing was recorded"]
        effect = None
        if summary["event"] and summary["status"] in (None, 200) and not summary["error"]:
            with contextlib.suppress(ValueError):  # a decision that is not one has no effect
                effect = effect_text(summary["event"], summary["decision"], summary["reason"])
        return {
            "delivery": summary,
            "request": payload,
            "response": response,
            "response_note": answer_note,
            "headers": headers if isinstance(headers, dict) else None,
            "timing": {"at": summary["at"], "duration_ms": summary["duration_ms"]},
            "attempts": self.attempts(entry),
            "signature": _signature(record, summary) if served else None,
            "validation": {"valid": not problems, "problems": problems},
            "effect": effect,
            "routed_to": text(record.get("routed_to")),
            "rule": number(record.get("rule")),
            "hook_index": number(record.get("hook_index")),
            # Recorded, not acted on (WIRE.md): the platform does not say what it means.
            "override": override,
            "warnings": [w for w in warnings if isinstance(w, str)]
            if isinstance(warnings, list)
            else [],
        }

    def summaries(self, ids: list[str]) -> list[Entry]:
        """The entries of these ids, in the order given; NotFound for one that is not a delivery."""
        self.refresh()
        return [self._entry(delivery_id) for delivery_id in ids]

    def select(self, filters: dict[str, str], *, limit: int) -> list[Entry]:
        """Every held delivery that passes ``filters``, oldest first; InvalidInput past ``limit``
        or SEARCH_BYTES."""
        self.refresh()
        with self.lock:
            entries = list(self.entries)
        found, complete, _ = self._search(entries, len(entries), filters, limit + 1, answer=False)
        if not complete and len(found) <= limit:
            raise InvalidInput(
                f"the text search read {SEARCH_BYTES // MiB} MiB of recorded deliveries "
                "without finishing",
                hint="narrow the filter (an event, a chat, a run, a longer text)",
            )
        if len(found) > limit:
            counted = sum(matches(e.summary, filters) for e in entries)
            count = f"more than {limit}" if "q" in filters else str(counted)
            raise InvalidInput(
                f"{count} deliveries match; at most {limit} are replayed at once",
                hint="narrow the filter (an event, a chat, a run, a text)",
            )
        return [entries[position] for position in reversed(found)]


def _holds(pieces: Iterator[bytes], wanted: str) -> tuple[bool, int]:
    """Whether a line's pieces (each with the end of the last) hold ``wanted``; the bytes read."""
    overlap = len(wanted.encode("utf-8")) * 3 + 4
    tail = b""
    read = 0
    for piece in pieces:
        read += len(piece)
        window = tail + piece
        if wanted in window.decode("utf-8", "replace").casefold():
            return True, read
        tail = window[-overlap:]
    return False, read


def _signature(record: dict[str, object], summary: Row) -> dict[str, object]:
    """What the signature check of a served request found."""
    webhook_id = text(record.get("webhook_id")) or None
    failed = summary["signature"] == "failed"
    unchecked = "not checked: the server had no --secret"
    return {
        "checked": webhook_id is not None or failed,
        "verified": webhook_id is not None,
        "webhook_id": webhook_id,
        "detail": None if webhook_id else summary["error"] if failed else unchecked,
    }


RACY_SECONDS = 2.0
"""For this long after a change an mtime (a coarse clock) is not trusted to say "nothing new"."""
FULL_LOOK_SECONDS = 10.0
"""A look this old is redone (an async hook's record can come with nothing else written)."""


@dataclass(eq=False)
class Signals:
    """Tells, from one ``stat`` per path, whether any of some files or directories changed."""

    paths: list[Path]
    seen: list[tuple[int, int, int] | None] = field(default_factory=list)
    looked: float = 0.0
    confirm_at: float = 0.0

    def stats(self) -> list[tuple[int, int, int] | None]:
        """The (mtime, size, inode) of each path, None for one that does not exist."""
        found: list[tuple[int, int, int] | None] = []
        for path in self.paths:
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                found.append(None)
            else:
                found.append((stat.st_mtime_ns, stat.st_size, stat.st_ino))
        return found

    def changed(self) -> bool:
        """True when a path changed, may have (RACY_SECONDS), or the last look is old."""
        now = time.time()
        stats = self.stats()
        fresh = any(s is not None and now - s[0] / 1e9 < RACY_SECONDS for s in stats)
        moved = stats != self.seen or fresh or now - self.looked > FULL_LOOK_SECONDS
        if moved:
            self.seen, self.looked = stats, now
        return moved

    def moved(self) -> bool:
        """True when a path changed since the last look, and once more RACY_SECONDS after."""
        stats = self.stats()
        if stats != self.seen:
            self.seen = stats
            times = [s[0] / 1e9 for s in stats if s is not None]
            self.confirm_at = max(times) + RACY_SECONDS if times else 0.0
            return True
        if self.confirm_at and time.time() >= self.confirm_at:
            self.confirm_at = 0.0
            return True
        return False
