"""Interrupts: the gates a hook opens on a run, and how they are resolved or expire.

The ``run-interrupts`` and ``resource-interrupts`` indexes and the ``pending-interrupts`` tag (one
marker ``<expires_at in ms>-<id>`` per pending gate) keep every operation's cost independent of
the store's size; a gate is settled under its own lock, so one of many racing resolvers wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import ExitStack, suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, Unpack, cast

from belt.display.text import describe, printable, short
from belt.errors import BeltError, Conflict, InvalidInput, NotFound
from belt.outgoing import tracing
from belt.records.chats import find_chat_id
from belt.records.ids import new_id
from belt.records.names import find_id, short_id
from belt.records.runs import RUN, find_run_id
from belt.store import Store, check_id, clock, open_store
from belt.store.clock import epoch_ms, parse_timestamp, timestamp, utcnow
from belt.store.shapes import record_shape
from belt.wire.dto import InterruptJSON, WatchEvent
from belt.wire.enums import AgentRunState, InterruptStatus

if TYPE_CHECKING:
    from belt.records.messages import Message

INTERRUPT = "interrupt"
RUN_INTERRUPTS = "run-interrupts"
RESOURCE_INTERRUPTS = "resource-interrupts"
PENDING = "pending-interrupts"

DTO_FIELDS = tuple(InterruptJSON.__annotations__)

RESOLUTIONS = ("allow", "deny")

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

DOORS = {"cli": "the CLI", "review": "review", "inspector": "the inspector", "api": "the API"}
"""The doors a person settles a gate through, by the name a line gives them."""


class Settlement(TypedDict):
    """How a gate was settled (``resolved_by``, never on the wire; ``token``: whether one was)."""

    how: str
    user: NotRequired[str]
    door: NotRequired[str]
    token: NotRequired[bool]
    file: NotRequired[str]
    rule: NotRequired[str]
    digest: NotRequired[str]
    default: NotRequired[str]
    batch: NotRequired[str]
    sim: NotRequired[str]
    route: NotRequired[str]
    recorded_as: NotRequired[str]


def os_user() -> str:
    """The OS user running belt, "unknown" when the system cannot say."""
    import getpass  # noqa: PLC0415 - start-up: when a person settles only

    try:
        return getpass.getuser() or "unknown"
    except (OSError, KeyError, ImportError):
        return "unknown"


RULE_FORM = ("how", "file", "rule", "digest")
RULE_LENGTHS = {"file": 4096, "rule": 1024}


def rule_settlement(body: Mapping[str, Any], *, token: bool) -> Settlement:
    """The rule ``by`` of a resolve request's body names, checked strictly (else InvalidInput)."""
    form = body.get("by")
    unknown = [f"{k}: unknown field" for k in body if k not in ("decision", "data", "by")]
    if not unknown and isinstance(form, dict):
        unknown = [f"by.{k}: unknown field" for k in form if k not in RULE_FORM]
        unknown += [f"by.{k}: missing" for k in RULE_FORM if k not in form]
    if unknown:
        raise InvalidInput(short(printable(unknown[0])))
    if not isinstance(form, dict):
        shape = '{"how": "rule", "file", "rule", "digest"}'
        raise InvalidInput(f"by: expected {shape}, got {describe(form)}")
    if form["how"] != "rule":
        raise InvalidInput(f'by.how: expected "rule", got {printable(short(form["how"], 40))}')
    for key, most in RULE_LENGTHS.items():
        value = form[key]
        if not isinstance(value, str) or not value.strip() or not value.isprintable():
            raise InvalidInput(f"by.{key}: expected a printable string, got {describe(value)}")
        if len(value) > most:
            raise InvalidInput(f"by.{key}: {len(value)} characters, more than {most}")
    if not isinstance(form["digest"], str) or not DIGEST.fullmatch(form["digest"]):
        raise InvalidInput("by.digest: expected sha256: and 64 lowercase hex digits")
    return {**cast(Settlement, form), "door": "api", "token": token}


def person(door: str, token: bool = False) -> Settlement:
    """A settlement by the OS user through ``door`` (one of DOORS); ``token`` only for ``api``."""
    if door not in DOORS:
        raise ValueError(f"unknown door {door!r}")
    settlement: Settlement = {"how": "person", "user": os_user(), "door": door}
    if door == "api":
        settlement["token"] = token
    return settlement


class Interrupt(TypedDict):
    """A stored interrupt (kind ``interrupt``): its InterruptDTO fields and what the store keeps."""

    id: str
    status: str
    run_id: str
    expires_at: NotRequired[str | None]
    resolution: NotRequired[str | None]
    default_resolution: NotRequired[str | None]
    short_id: NotRequired[str]
    created_at: NotRequired[str]
    updated_at: NotRequired[str]
    chat_id: NotRequired[str]
    reason: NotRequired[str]
    source: NotRequired[str]
    resource_id: NotRequired[str | None]
    resource_type: NotRequired[str]
    resolved_at: NotRequired[str | None]
    resolved_data: NotRequired[Any]
    meta: NotRequired[Any]
    """The hook payload the gate holds."""
    timeout: NotRequired[int]
    resolved_by: NotRequired[Settlement | str | None]
    """How it was settled; a string or nothing in records older than ``trail``."""
    virtual_clock: NotRequired[bool]
    """Opened on a virtual clock: a sweep on wall time leaves it to that clock."""
    trace: NotRequired[dict[str, object]]
    """Where its ``belt.gate`` span goes when it is settled (docs/tracing.md)."""


record_shape(INTERRUPT, Interrupt)


def on_expiry(record: Interrupt) -> str:
    """How a stored interrupt is settled when it expires: its default resolution, else deny."""
    return record.get("default_resolution") or "deny"


def to_dto(record: Interrupt) -> InterruptJSON:
    """The InterruptDTO of a stored interrupt record (store-only fields left out)."""
    return cast(InterruptJSON, {field: record.get(field) for field in DTO_FIELDS})


def _get(store: Store, interrupt_id: str) -> Interrupt | None:
    return cast("Interrupt | None", store.get(INTERRUPT, interrupt_id))


def _pending_marker(record: Interrupt) -> str | None:
    if not (expires_at := record.get("expires_at")):
        return None
    return f"{epoch_ms(parse_timestamp(expires_at)):015d}-{record['id']}"


def _no_interrupt(interrupt_id: str) -> NotFound:
    return NotFound(
        f"no interrupt {interrupt_id}",
        hint="list the pending interrupts with `belt interrupt list` (settled ones too: --all)",
    )


def _short(digest: object) -> str:
    text = str(digest)
    return text[: len("sha256:") + 12] if text.startswith("sha256:") else text[:12]


def trail(record: Interrupt) -> Settlement | None:
    """How a stored interrupt was settled, as data; None while it is pending."""
    status, by = record.get("status"), record.get("resolved_by")
    if status == InterruptStatus.PENDING:
        return None
    if status == InterruptStatus.CANCELLED:
        return {"how": "stopped"}
    if isinstance(by, dict):
        return by
    if status == InterruptStatus.EXPIRED:
        return {"how": "expiry", "default": on_expiry(record)}
    return {"how": "unknown", "recorded_as": str(by)} if by else {"how": "unknown"}


def settled_by(record: Interrupt) -> str | None:
    """How a stored interrupt was settled (``trail``), in one line; None while it is pending."""
    if (by := trail(record)) is None:
        return None
    how, door = by.get("how"), DOORS.get(str(by.get("door")), str(by.get("door")))
    if by.get("door") == "api":
        door += " (with a token)" if by.get("token") else " (without a token)"
    via = f" via {door}" if "door" in by else ""
    lines = {
        "person": f"{by.get('user')} via {door}",
        "rule": f"rule {by.get('rule')} of {by.get('file')} ({_short(by.get('digest'))}){via}",
        "expiry": f"expiry (default {by.get('default')})",
        "batch": f"batch {by.get('batch')} by {by.get('user')} via {door}",
        "stopped": "its run being stopped",
        "scenario": f"the scenario of simulation {by.get('sim')}",
        "route": f"the agent API ({by.get('route')})",
    }
    if how in lines:
        return lines[how]
    recorded = by.get("recorded_as") or (how if how != "unknown" else None)
    return f"unknown (recorded as: {recorded})" if recorded else "unknown"


def _not_pending(record: Interrupt) -> Conflict:
    status = record.get("status")
    text = f"interrupt {record.get('id')} is no longer pending: it is {status}"
    if record.get("resolution"):
        text += f" ({record['resolution']})"
    if (by := settled_by(record)) and status == InterruptStatus.RESOLVED:
        text += f" by {by}"
    if record.get("resolved_at"):
        text += f" since {record['resolved_at']}"
    return Conflict(text)


def create_interrupt(
    *, store: Store | None = None, run_id: str, chat_id: str, event: str, **terms: Unpack[Terms]
) -> InterruptJSON:
    """Open an interrupt on a run (a hook gate by default) and return its InterruptDTO."""
    check_id(run_id, what="run id")
    check_id(chat_id, what="chat id")
    timeout, default_resolution = _checked_terms(event, terms)
    created, interrupt_id = terms.get("now") or clock.now(), new_id("int")
    stamp = timestamp(created)
    if (meta := terms.get("meta")) is None:
        meta = {"event": event, "timestamp": stamp, "run_id": run_id, "chat_id": chat_id}
    record: Interrupt = {
        "id": interrupt_id,
        "short_id": short_id(interrupt_id),
        "created_at": stamp,
        "updated_at": stamp,
        "run_id": run_id,
        "chat_id": chat_id,
        "reason": terms.get("reason", "hook_gate"),
        "source": terms.get("source") or f"hook:{event}",
        "resource_id": terms.get("resource_id"),
        "resource_type": terms.get("resource_type")
        or ("tool_invocation" if event == "agent.tool_call" else "hook_event"),
        "status": InterruptStatus.PENDING.value,
        "resolution": None,
        "resolved_at": None,
        "resolved_data": None,
        "expires_at": timestamp(created + timedelta(seconds=timeout)),
        "meta": meta,
        "default_resolution": default_resolution,
        "timeout": timeout,
    }
    if clock.current() is not None:
        record["virtual_clock"] = True
    if (trace := tracing.carried()) is not None:
        record["trace"] = trace
    _store_new(open_store(store), record)
    return to_dto(record)


ACTIVE_RUN_STATES = (AgentRunState.WORKING, AgentRunState.INPUT_REQUIRED)


class GateTerms(TypedDict, total=False):
    """What a gate opened by hand may set besides its run, chat and event."""

    timeout: int | None
    default_resolution: str | None
    meta: Any


class Terms(GateTerms, total=False):
    """What any interrupt may set besides its run, chat and event (a hook gate's by default)."""

    resource_id: str | None
    reason: str
    source: str | None
    resource_type: str | None
    now: datetime | None


def open_gate(
    *, store: Store | None = None, run_id: str, chat_id: str, event: str, **terms: Unpack[GateTerms]
) -> InterruptJSON:
    """Open a hook gate by hand (``belt interrupt create``) on an active run (exit 3, 4)."""
    store = open_store(store)
    _checked_terms(event, cast(Terms, terms))
    run_id = find_run_id(store, run_id)
    chat_id = find_chat_id(store, chat_id)
    with store.lock(RUN, run_id):
        run = store.read(RUN, run_id)
        if (state := run["state"]) not in ACTIVE_RUN_STATES:
            raise Conflict(
                f"run {run_id} is {state}: a gate opens only on a run that is working or "
                "awaiting a decision (input_required)",
                hint="gates fire inside a running conversation; `belt sim list` shows the runs",
            )
        if run.get("chat_id") != chat_id:
            raise Conflict(
                f"run {run_id} does not belong to chat {chat_id}"
                + (f" (its chat is {run['chat_id']})" if run.get("chat_id") else ""),
                hint="give the run's own chat, as `belt sim show RUN_ID` names it",
            )
        return create_interrupt(store=store, run_id=run_id, chat_id=chat_id, event=event, **terms)


def _checked_terms(event: str, terms: Terms) -> tuple[int, str | None]:
    from belt.reading.didyoumean import did_you_mean  # noqa: PLC0415 - start-up: pydantic, for a new gate only
    from belt.wire.catalogue import EVENTS, GATEABLE_EVENTS  # noqa: PLC0415 - start-up: pydantic, for a new gate only
    from belt.wire.platform import HookHandlerType, InterruptReason, timeout_bounds  # noqa: PLC0415 - start-up: pydantic, for a new gate only

    reason, source = terms.get("reason", "hook_gate"), terms.get("source")
    timeout, default_resolution = terms.get("timeout"), terms.get("default_resolution")
    reasons = [r.value for r in InterruptReason]
    if reason not in reasons:
        raise InvalidInput(
            f"unknown interrupt reason {reason!r} (one of {', '.join(reasons)})"
            f"{did_you_mean(reason, reasons)}"
        )
    if (source is None or reason == InterruptReason.HOOK_GATE) and event not in EVENTS:
        near = did_you_mean(event, EVENTS)
        raise InvalidInput(f"unknown event {event!r} (see `belt hooks events`){near}")
    if reason == InterruptReason.HOOK_GATE and event not in GATEABLE_EVENTS:
        gateable = ", ".join(GATEABLE_EVENTS)
        raise InvalidInput(f"a gate cannot attach to {event} (gates attach to {gateable})")
    default_timeout, max_timeout = timeout_bounds(HookHandlerType.GATE)
    timeout = default_timeout if timeout is None else timeout
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= max_timeout:
        raise InvalidInput(f"timeout {timeout!r} must be a whole number 1 through {max_timeout}")
    if default_resolution is None and reason == InterruptReason.HOOK_GATE:
        default_resolution = "allow"
    if default_resolution is not None and default_resolution not in RESOLUTIONS:
        raise InvalidInput(f"default resolution {default_resolution!r} must be allow or deny")
    return timeout, default_resolution


def _store_new(store: Store, record: Interrupt) -> None:
    """Write a new interrupt, markers first: a creator killed half-way never hides a gate."""
    interrupt_id = record["id"]
    if marker := _pending_marker(record):
        store.tag(PENDING, marker)
    store.link(RUN_INTERRUPTS, record["run_id"], interrupt_id)
    if (resource_id := record["resource_id"]) is not None:
        store.link(RESOURCE_INTERRUPTS, check_id(resource_id, what="resource id"), interrupt_id)
    store.create(INTERRUPT, interrupt_id, dict(record))


def read_record(*, store: Store | None = None, interrupt_id: str) -> Interrupt:
    """The stored record of one interrupt; NotFound (exit 3) if there is none."""
    if (found := _get(open_store(store), check_id(interrupt_id, what="interrupt id"))) is None:
        raise _no_interrupt(interrupt_id)
    return found


def get_interrupt(*, store: Store | None = None, interrupt_id: str) -> InterruptJSON:
    """One interrupt's InterruptDTO; NotFound (exit 3) if there is none."""
    return to_dto(read_record(store=store, interrupt_id=interrupt_id))


def list_interrupts(
    *, store: Store | None = None, run_id: str, include_settled: bool = False
) -> list[InterruptJSON]:
    """A run's interrupts, oldest first: the pending ones, or all with ``include_settled``."""
    records = inbox(store=store, run_id=run_id, include_settled=include_settled)
    return [to_dto(record) for record in records]


def _records(store: Store, ids: list[str], include_settled: bool) -> list[Interrupt]:
    """The stored interrupts of ``ids``, pending ones or all, oldest first (an id whose creator
    did not finish, a link or marker without its object, is left out)."""
    found = [
        record
        for interrupt_id in ids
        if (record := _get(store, interrupt_id)) is not None
        and (include_settled or record.get("status") == InterruptStatus.PENDING)
    ]
    return sorted(found, key=lambda record: str(record.get("created_at")))


def for_resource(*, store: Store | None = None, resource_id: str) -> list[InterruptJSON]:
    """Every interrupt that holds one resource (a tool invocation), oldest first."""
    store = open_store(store)
    ids = store.members(RESOURCE_INTERRUPTS, check_id(resource_id, what="tool invocation id"))
    return [to_dto(record) for record in _records(store, ids, True)]


def last_settled(*, store: Store | None = None, run_id: str) -> datetime | None:
    """When the latest of a run's settled interrupts was settled, None while none is."""
    latest = settlements(store=store, run_id=run_id)[:1]
    return parse_timestamp(str(latest[0]["resolved_at"])) if latest else None


def _settle(store: Store, interrupt_id: str, change: Callable[[Interrupt], Interrupt]) -> Interrupt:
    record = store.update(INTERRUPT, interrupt_id, change)
    if marker := _pending_marker(record):
        store.untag(PENDING, marker)
    if tracing.on() and "trace" in record:
        how = settlement["how"] if (settlement := trail(record)) else None
        gate = {"belt.gate.id": record["id"], "belt.gate.reason": record.get("reason")}
        settled = {"belt.gate.status": record["status"], "belt.gate.settled_by": how}
        resolution = {"belt.gate.resolution": record.get("resolution")}
        tracing.end_carried("belt.gate", record["trace"], {**gate, **settled, **resolution})
    return record


def _clock_of(store: Store, record: Interrupt) -> str:
    """The virtual clock's time of an interrupt's simulation, never before it opened."""
    opened = str(record.get("created_at"))
    with suppress(BeltError):
        run = store.get("run", str(record["run_id"])) or {}
        sim = store.get("sim", str(run["sim_id"])) if run.get("sim_id") else None
        moment = parse_timestamp(str(sim["clock"])) if sim and sim.get("clock") else None
        if moment is not None and moment > parse_timestamp(opened):
            return timestamp(moment)
    return opened


def resolve_interrupt(
    *,
    store: Store | None = None,
    interrupt_id: str,
    decision: str,
    data: Any = None,
    now: datetime | None = None,
    by: Settlement | None = None,
) -> InterruptJSON:
    """Resolve a pending interrupt, ``by`` kept as ``resolved_by``; exit 3, or 4 if settled."""
    return _settle_pending(open_store(store), interrupt_id, now, _resolved(decision, data, by))


def _resolved(decision: str, data: Any, by: Settlement | None) -> dict[str, object]:
    if decision not in RESOLUTIONS:
        raise InvalidInput(f"decision {decision!r} must be allow or deny")
    settled = {
        "status": InterruptStatus.RESOLVED.value,
        "resolution": decision,
        "resolved_data": data,
    }
    return settled if by is None else {**settled, "resolved_by": dict(by)}


def cancel_interrupt(
    *, store: Store | None = None, interrupt_id: str, now: datetime | None = None
) -> InterruptJSON:
    """Cancel a pending interrupt of a stopped run; NotFound (3), or Conflict (4) if settled."""
    settled = {"status": InterruptStatus.CANCELLED.value}
    return _settle_pending(open_store(store), interrupt_id, now, settled)


def _settle_pending(
    store: Store, interrupt_id: str, now: datetime | None, settled: Mapping[str, object]
) -> InterruptJSON:
    check_id(interrupt_id, what="interrupt id")
    on_wall_time = now is None and clock.current() is None
    at = timestamp(now or clock.now())

    def settle(record: Interrupt) -> Interrupt:
        if record.get("status") != InterruptStatus.PENDING:
            raise _not_pending(record)
        stamp = _clock_of(store, record) if on_wall_time and record.get("virtual_clock") else at
        record.update(cast(Interrupt, {**settled, "resolved_at": stamp, "updated_at": stamp}))
        return record

    try:
        return to_dto(_settle(store, interrupt_id, settle))
    except NotFound:
        raise _no_interrupt(interrupt_id) from None


# -- batches: many gates settled together, bound to a digest of what was shown ----------------

BATCH_FIELDS = tuple("id run_id chat_id reason source resource_id resource_type meta".split())
"""The fields of a gate a batch's digest covers: which gate, and the call it holds."""


BATCH_PATH = "/_belt/interrupts/batch"
"""The route of ``belt serve`` that settles a batch (docs/serve.md); other APIs lack it."""


def batch_digest(items: Collection[Mapping[str, Any]]) -> str:
    """``sha256:`` of the canonical JSON of the gates' BATCH_FIELDS: what a person was shown."""
    shown = [{f: item.get(f) for f in BATCH_FIELDS} for item in items]
    shown.sort(key=lambda item: str(item.get("id")))
    blob = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def short_digest(digest: str) -> str:
    """A digest as shown: its first 12 hex digits (``--digest`` takes these or the whole)."""
    return digest.removeprefix("sha256:")[:12]


def batch_id(digest: str) -> str:
    """A batch's id, from its digest as shown: the same gates shown again are the same batch."""
    return "bat_" + short_digest(digest)


class BatchResult(TypedDict):
    """What :func:`resolve_batch` did: the gates' DTOs, and whether it was a repeat."""

    batch: str
    digest: str
    repeated: bool
    resolved: list[InterruptJSON]


def resolve_batch(
    *,
    store: Store | None = None,
    interrupt_ids: Collection[str],
    digest: str,
    decision: str,
    data: Any = None,
    by: Settlement,
    now: datetime | None = None,
) -> BatchResult:
    """Settle the gates together, all or none, if their digest is ``digest`` (else exit 4); all
    settled by this batch already is a repeat, which changes nothing."""
    store = open_store(store)
    batch = batch_id(digest)
    settlement: Settlement = {"how": "batch", "batch": batch, "digest": digest}
    settlement |= {"user": by.get("user", "unknown"), "door": by.get("door", "cli")}
    if "token" in by:
        settlement["token"] = by["token"]
    settled = _resolved(decision, data, settlement)
    if not (ids := sorted({check_id(i, what="interrupt id") for i in interrupt_ids})):
        raise InvalidInput("a batch needs at least one interrupt id")
    with ExitStack() as held:
        records = []
        for interrupt_id in ids:
            if _get(store, interrupt_id) is None:
                raise _no_interrupt(interrupt_id)
            held.enter_context(store.lock(INTERRUPT, interrupt_id))
            records.append(read_record(store=store, interrupt_id=interrupt_id))
        if (found := batch_digest(records)) != digest:
            raise Conflict(
                f"the {len(ids)} gate(s) are not the ones shown: their digest is "
                f"{short_digest(found)}, not {short_digest(digest)}; none settled",
                hint="list them again and confirm what is shown now",
            )
        pending = [r for r in records if not in_batch(r, batch)]  # none: a repeat
        for record in pending:
            if record.get("status") != InterruptStatus.PENDING:
                raise Conflict(f"{_not_pending(record).message}; none of the {len(ids)} settled")
        done = {r["id"]: _settle_pending(store, r["id"], now, settled) for r in pending}
        resolved = [done.get(r["id"]) or to_dto(r) for r in records]
    return {"batch": batch, "digest": digest, "repeated": not pending, "resolved": resolved}


def in_batch(record: Interrupt, batch: str) -> bool:
    """Whether the batch ``batch`` settled the interrupt."""
    by = record.get("resolved_by")
    return isinstance(by, dict) and by.get("how") == "batch" and by.get("batch") == batch


# -- the log: settlements, newest first ---------------------------------------------------------


def settlements(
    *, store: Store | None = None, since: datetime | None = None, run_id: str | None = None
) -> list[Interrupt]:
    """The settled interrupts (of ``run_id``, at or after ``since``, if given), latest first."""
    records = [
        record
        for record in inbox(store=store, run_id=run_id, include_settled=True)
        if record.get("status") != InterruptStatus.PENDING
        and (at := record.get("resolved_at"))
        and (since is None or parse_timestamp(at) >= since)
    ]
    records.sort(key=lambda r: (parse_timestamp(str(r["resolved_at"])), r["id"]), reverse=True)
    return records


class _Skip(Exception):
    """The marked interrupt needs no expiry (settled already, or not due)."""


def sweep(
    *, store: Store | None = None, now: datetime | None = None, run_id: str | None = None
) -> list[InterruptJSON]:
    """Expire every overdue pending interrupt (of ``run_id``) as of ``now``; return them. Damaged
    files are InvalidInput (exit 5) afterwards."""
    store = open_store(store)
    on_wall_time = now is None and clock.current() is None
    moment = now or clock.now()
    due_ms, stamp = epoch_ms(moment), timestamp(moment)
    wall_stamp = timestamp(min(moment, utcnow()))
    settled: list[InterruptJSON] = []
    damaged: list[str] = []

    def expire(record: Interrupt) -> Interrupt:
        if (
            record.get("status") != InterruptStatus.PENDING
            or (run_id is not None and record.get("run_id") != run_id)
            or (on_wall_time and record.get("virtual_clock"))
            or not (expires_at := record.get("expires_at"))
            or parse_timestamp(expires_at) > moment
        ):
            raise _Skip
        at = stamp if record.get("virtual_clock") else wall_stamp
        default = on_expiry(record)
        record |= {"status": InterruptStatus.EXPIRED.value, "resolution": default}
        record |= {"resolved_at": at, "updated_at": at}
        record["resolved_by"] = {"how": "expiry", "default": default}
        return record

    for marker in store.tagged(PENDING):
        if (interrupt_id := _marked_id(marker)) is None:
            continue
        if int(marker.partition("-")[0]) > due_ms:
            break  # markers sort by expiry, so the rest are not due either
        try:
            settled.append(to_dto(_settle(store, interrupt_id, expire)))
        except _Skip:
            record = _get(store, interrupt_id)
            if record is not None and record.get("status") != InterruptStatus.PENDING:
                store.untag(PENDING, marker)
        except NotFound:
            store.untag(PENDING, marker)  # a creator died before writing the object
        except InvalidInput as exc:
            damaged.append(exc.message)
    if damaged:
        raise InvalidInput(
            f"settled {len(settled)} overdue interrupt(s); {len(damaged)} could not be read",
            problems=damaged,
            hint="belt leaves a damaged file as it is; move it aside or restore it, then retry",
        )
    return settled


# -- the inbox: every run's gates, and interrupts named by a short id or a prefix --------------


def _marked_id(marker: str) -> str | None:
    expiry, _, interrupt_id = marker.partition("-")
    return interrupt_id if expiry.isdigit() and interrupt_id else None


def _pending_ids(store: Store) -> list[str]:
    return [i for i in map(_marked_id, store.tagged(PENDING)) if i is not None]


def find_interrupt_id(*, store: Store | None = None, ref: str, pending_first: bool = False) -> str:
    """The id of the interrupt ``ref`` names (``find_id``), a pending one first if asked."""
    store = open_store(store)
    first = (lambda: _pending_ids(store)) if pending_first else None
    return find_id(store, INTERRUPT, ref, what="interrupt", first=first, missing=_no_interrupt)


def inbox(
    *,
    store: Store | None = None,
    run_id: str | None = None,
    chat_id: str | None = None,
    reason: str | None = None,
    include_settled: bool = False,
) -> list[Interrupt]:
    """Stored interrupts, pending or all: one run's oldest first, else every run's newest first."""
    store = open_store(store)
    if chat_id is not None:
        check_id(chat_id, what="chat id")
    if run_id is not None:
        ids = store.members(RUN_INTERRUPTS, check_id(run_id, what="run id"))
        records = _records(store, ids, include_settled)
    else:
        ids = store.list_ids(INTERRUPT) if include_settled else _pending_ids(store)
        records = _records(store, ids, include_settled)
        records.sort(key=lambda r: (str(r.get("created_at")), str(r.get("id"))), reverse=True)
    return [
        record
        for record in records
        if (chat_id is None or record.get("chat_id") == chat_id)
        and (reason is None or record.get("reason") == reason)
    ]


def transcript_before(
    *, store: Store | None = None, record: Mapping[str, Any], limit: int = 6
) -> list[Message]:
    """The last ``limit`` messages of an interrupt's chat written before it opened, in order."""
    from belt.records.messages import MESSAGE, MESSAGES, Message, expanded  # noqa: PLC0415 - start-up: not for belt interrupt list

    store = open_store(store)
    chat_id, opened = record.get("chat_id"), str(record.get("created_at") or "")
    if not isinstance(chat_id, str):
        return []
    check_id(chat_id, what="chat id")
    before: list[Message] = []
    for message_id in reversed(store.members(MESSAGES, chat_id)):
        stored = store.get(MESSAGE, message_id)
        if stored is None or str(stored.get("created_at") or "") > opened:
            continue
        before += (m.copy() for m in reversed(expanded(store, cast(Message, stored))))
        if len(before) >= limit:
            break
    return before[:limit][::-1]


# -- watching: what opened and what settled since the last look --------------------------------

RACY_SECONDS = 2.0
"""How long after a change a directory's coarse mtime cannot show the next one."""


class _Directory:
    """Tells, from one stat, whether a directory may have changed since its names were read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: tuple[int, int, int] | None = None
        self.read_at = 0.0

    def look(self) -> tuple[bool, bool]:
        """(whether its stat changed, whether its names must be read again); marks them read."""
        try:
            stat = os.stat(self.path)
            now: tuple[int, int, int] | None = (stat.st_mtime_ns, stat.st_ino, stat.st_size)
        except FileNotFoundError:
            now = None
        changed = now != self.seen
        racy = now is not None and self.read_at - now[0] / 1e9 < RACY_SECONDS
        if changed or racy:
            self.seen, self.read_at = now, time.time()
        return changed, changed or racy

    def names(self, since: float | None = None) -> list[str]:
        """The names in the directory; with ``since`` (epoch seconds), those changed since."""
        try:
            with os.scandir(self.path) as entries:
                return [
                    e.name
                    for e in entries
                    if not e.name.startswith(".") and (since is None or e.stat().st_mtime >= since)
                ]
        except FileNotFoundError:
            return []


def happened_at(event: WatchEvent) -> str:
    """When a watch event happened, to print a look's events in order (warnings first)."""
    if (item := event.get("interrupt")) is None:
        return ""
    if event["event"] in ("pending", "opened"):
        return str(item.get("created_at") or "")
    return str(item.get("resolved_at") or item.get("updated_at") or "")


class Watch:
    """Follows a store's interrupts: each :meth:`poll` returns what opened and what settled,
    at two ``stat`` calls a look while nothing happens."""

    def __init__(self, *, store: Store | None = None, run_ids: Collection[str] = ()) -> None:
        self.store = open_store(store)
        self.run_ids = frozenset(check_id(run_id, what="run id") for run_id in run_ids)
        # The directories of the pending tag and of the run-interrupts index (docs/store.md).
        self._tag = _Directory(self.store.root / "tags" / PENDING)
        self._index = _Directory(self.store.root / "index" / RUN_INTERRUPTS)
        self.known: dict[str, str] = {}  # interrupt id → the status last seen
        self.markers: set[str] = set()
        self.waiting: set[str] = set()  # marked or linked, not yet written by their creator
        self.runs: dict[str, int] = {}  # run id → the size of its index when last read
        self.owners: set[str] = set()
        self.started = ""
        self.last_look = 0.0

    def start(self) -> list[WatchEvent]:
        """Begin following; the gates pending now, oldest first, as ``pending`` events."""
        self.started = timestamp(utcnow() - timedelta(seconds=RACY_SECONDS))
        self.last_look = time.time()
        self._tag.look()
        self._index.look()
        self.owners = set(self._index.names())
        self.markers = set(self.store.tagged(PENDING))
        events: list[WatchEvent] = []
        for interrupt_id in sorted(filter(None, map(_marked_id, self.markers))):
            self._visit(interrupt_id, events, first="pending")
        events.sort(key=lambda e: str(e.get("interrupt", {}).get("created_at")))
        return events

    def poll(self) -> list[WatchEvent]:
        """What opened and what settled since the last look."""
        events: list[WatchEvent] = []
        look = time.time()
        for interrupt_id in sorted(self.waiting):
            self._visit(interrupt_id, events)
        moved, read = self._tag.look()
        explained = False
        if read:
            names = set(self.store.tagged(PENDING))
            came, went = names - self.markers, self.markers - names
            self.markers = names
            explained = bool(came or went)
            for marker in sorted(came) + sorted(went):
                if (marked := _marked_id(marker)) is not None:
                    self._visit(marked, events)
        if self._index.look()[1]:
            owners = {n.removesuffix(".jsonl") for n in self._index.names() if n.endswith(".jsonl")}
            for run_id in sorted(owners - self.owners):
                self._follow(run_id, events)
            self.owners = owners
        if moved:
            grown = [r for r, size in self.runs.items() if self._size(r) != size]
            if not explained:
                # Something opened and settled between two looks, perhaps on a run not followed
                # yet: the indexes written since the last look say which.
                since = self.last_look - RACY_SECONDS
                recent = (n.removesuffix(".jsonl") for n in self._index.names(since))
                grown += [r for r in recent if r not in self.runs]
            for run_id in grown:
                self._follow(run_id, events)
        self.last_look = look
        events.sort(key=happened_at)
        return events

    def _size(self, run_id: str) -> int:
        return self.store.index_size(RUN_INTERRUPTS, run_id)

    def _follow(self, run_id: str, events: list[WatchEvent]) -> None:
        try:
            self.runs[run_id] = self._size(run_id)
            members = self.store.members(RUN_INTERRUPTS, run_id)
        except InvalidInput as exc:
            events.append({"event": "warning", "message": exc.message})
            return
        for interrupt_id in members:
            if interrupt_id not in self.known:
                self._visit(interrupt_id, events)

    def _visit(self, interrupt_id: str, events: list[WatchEvent], first: str = "opened") -> None:
        try:
            record = _get(self.store, interrupt_id)
        except InvalidInput as exc:
            self.known[interrupt_id] = "unreadable"
            self.waiting.discard(interrupt_id)
            events.append({"event": "warning", "message": exc.message})
            return
        if record is None:
            # Its creator marks and links it before writing it: look again while it is marked.
            marked = any(_marked_id(m) == interrupt_id for m in self.markers)
            (self.waiting.add if marked else self.waiting.discard)(interrupt_id)
            return
        self.waiting.discard(interrupt_id)
        if isinstance(run_id := record.get("run_id"), str) and run_id not in self.runs:
            self.runs[run_id] = self._size(run_id)
        status, before = record["status"], self.known.get(interrupt_id)
        self.known[interrupt_id] = status
        if (self.run_ids and run_id not in self.run_ids) or status == before:
            return
        if status == InterruptStatus.PENDING:
            kind = first if before is None else None
        elif before is None and str(record.get("updated_at") or "") < self.started:
            kind = None  # settled before the watch began: history, not news
        else:
            kind = status
        if kind is not None:
            events.append(
                {"event": kind, "interrupt": to_dto(record), "on_expiry": on_expiry(record)}
            )
