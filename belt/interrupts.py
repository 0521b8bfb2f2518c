"""Interrupts: the gates a hook opens on a run, and how they are resolved or expire.

An interrupt is stored as its InterruptDTO fields plus what only the store needs
(``default_resolution``, ``timeout``). Three store structures keep every operation's cost
independent of the size of the store:

- ``run-interrupts`` index: a run's interrupt ids, so listing a run reads only its interrupts;
- ``pending-interrupts`` tag: one empty marker ``<expires_at in ms>-<id>`` per pending gate, so
  the sweep reads only the overdue ones;
- the object itself, updated under its own lock, so a resolve touches one file and exactly one of
  many racing resolvers wins.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from belt.errors import Conflict, InvalidInput, NotFound
from belt.store import Store, check_id, open_store
from belt.store.clock import epoch_ms, parse_timestamp, timestamp, utcnow

INTERRUPT = "interrupt"
RUN_INTERRUPTS = "run-interrupts"
PENDING = "pending-interrupts"

DTO_FIELDS = (
    "id",
    "short_id",
    "created_at",
    "updated_at",
    "run_id",
    "chat_id",
    "reason",
    "source",
    "resource_id",
    "resource_type",
    "status",
    "resolution",
    "resolved_at",
    "resolved_data",
    "expires_at",
    "meta",
)
"""The InterruptDTO fields, in wire order (a test holds this equal to ``belt.wire``)."""

RESOLUTIONS = ("allow", "deny")
_ALPHABET = string.ascii_lowercase + string.digits


def new_id(prefix: str) -> str:
    """A fresh random id such as ``int_k2m9x0q4h7c1v8b5n3t6``."""
    return f"{prefix}_" + "".join(secrets.choice(_ALPHABET) for _ in range(20))


def to_dto(record: dict[str, Any]) -> dict[str, Any]:
    """The InterruptDTO of a stored interrupt record (store-only fields left out)."""
    return {field: record.get(field) for field in DTO_FIELDS}


def _store(store: Store | None) -> Store:
    return store if store is not None else open_store()


def _pending_marker(record: dict[str, Any]) -> str | None:
    expires_at = record.get("expires_at")
    if not expires_at:
        return None
    return f"{epoch_ms(parse_timestamp(expires_at)):015d}-{record['id']}"


def _no_interrupt(interrupt_id: str) -> NotFound:
    return NotFound(
        f"no interrupt {interrupt_id}",
        hint="list a run's interrupts with `belt interrupt list RUN_ID --all`",
    )


def _not_pending(record: dict[str, Any]) -> Conflict:
    status = record.get("status")
    text = f"interrupt {record.get('id')} is no longer pending: it is {status}"
    if record.get("resolution"):
        text += f" ({record['resolution']})"
    if record.get("resolved_at"):
        text += f" since {record['resolved_at']}"
    return Conflict(text)


def create_interrupt(
    *,
    store: Store | None = None,
    run_id: str,
    chat_id: str,
    event: str,
    timeout: int | None = None,
    default_resolution: str | None = None,
    meta: Any = None,
    resource_id: str | None = None,
    reason: str = "hook_gate",
    now: datetime | None = None,
) -> dict[str, Any]:
    """Open an interrupt on a run (a hook gate by default) and return its InterruptDTO.

    ``timeout`` defaults to the gate default (300 s); ``default_resolution`` to ``allow`` for a
    hook gate and to none (so ``deny`` on expiry) for other reasons. ``meta`` defaults to a hook
    payload naming the event, run and chat.
    """
    from belt.wire.catalogue import EVENTS, GATEABLE_EVENTS
    from belt.wire.platform import HookHandlerType, InterruptReason, timeout_bounds

    check_id(run_id, what="run id")
    check_id(chat_id, what="chat id")
    if reason not in {r.value for r in InterruptReason}:
        choices = ", ".join(r.value for r in InterruptReason)
        raise InvalidInput(f"unknown interrupt reason {reason!r} (one of {choices})")
    if event not in EVENTS:
        raise InvalidInput(f"unknown event {event!r} (see `belt hooks events`)")
    if reason == InterruptReason.HOOK_GATE and event not in GATEABLE_EVENTS:
        raise InvalidInput(
            f"a gate cannot attach to {event} (gates attach to {', '.join(GATEABLE_EVENTS)})"
        )
    default_timeout, max_timeout = timeout_bounds(HookHandlerType.GATE)
    if timeout is None:
        timeout = default_timeout
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= max_timeout:
        raise InvalidInput(f"timeout {timeout!r} must be a whole number 1 through {max_timeout}")
    if default_resolution is None and reason == InterruptReason.HOOK_GATE:
        default_resolution = "allow"
    if default_resolution is not None and default_resolution not in RESOLUTIONS:
        raise InvalidInput(f"default resolution {default_resolution!r} must be allow or deny")

    created = now or utcnow()
    stamp = timestamp(created)
    interrupt_id = new_id("int")
    if meta is None:
        meta = {"event": event, "timestamp": stamp, "run_id": run_id, "chat_id": chat_id}
    record: dict[str, Any] = {
        "id": interrupt_id,
        "short_id": interrupt_id.removeprefix("int_")[:8],
        "created_at": stamp,
        "updated_at": stamp,
        "run_id": run_id,
        "chat_id": chat_id,
        "reason": reason,
        "source": f"hook:{event}",
        "resource_id": resource_id,
        "resource_type": "tool_invocation" if event == "agent.tool_call" else "hook_event",
        "status": "pending",
        "resolution": None,
        "resolved_at": None,
        "resolved_data": None,
        "expires_at": timestamp(created + timedelta(seconds=timeout)),
        "meta": meta,
        "default_resolution": default_resolution,
        "timeout": timeout,
    }
    store = _store(store)
    # Markers first, object last: a creator killed half-way leaves at most a marker or a link
    # without an object, which the readers skip and the sweep clears; never a hidden gate.
    marker = _pending_marker(record)
    if marker:
        store.tag(PENDING, marker)
    store.link(RUN_INTERRUPTS, run_id, interrupt_id)
    store.create(INTERRUPT, interrupt_id, record)
    return to_dto(record)


def read_record(*, store: Store | None = None, interrupt_id: str) -> dict[str, Any]:
    """The stored record of one interrupt: its DTO fields plus ``default_resolution``."""
    store = _store(store)
    check_id(interrupt_id, what="interrupt id")
    try:
        return store.read(INTERRUPT, interrupt_id)
    except NotFound:
        raise _no_interrupt(interrupt_id) from None


def get_interrupt(*, store: Store | None = None, interrupt_id: str) -> dict[str, Any]:
    """One interrupt's InterruptDTO; NotFound (exit 3) if there is none."""
    return to_dto(read_record(store=store, interrupt_id=interrupt_id))


def list_interrupts(
    *, store: Store | None = None, run_id: str, include_settled: bool = False
) -> list[dict[str, Any]]:
    """A run's interrupts, oldest first: the pending ones, or all with ``include_settled``."""
    store = _store(store)
    check_id(run_id, what="run id")
    records = []
    for interrupt_id in store.members(RUN_INTERRUPTS, run_id):
        record = store.get(INTERRUPT, interrupt_id)
        if record is None:
            continue  # linked by a creator that did not finish
        if include_settled or record.get("status") == "pending":
            records.append(record)
    records.sort(key=lambda record: str(record.get("created_at")))
    return [to_dto(record) for record in records]


def pending_for_run(*, store: Store | None = None, run_id: str) -> list[dict[str, Any]]:
    """A run's pending interrupts; the run may resume when this is empty."""
    return list_interrupts(store=store, run_id=run_id)


def _settle(
    store: Store, interrupt_id: str, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    record = store.update(INTERRUPT, interrupt_id, change)
    marker = _pending_marker(record)
    if marker:
        store.untag(PENDING, marker)
    return record


def resolve_interrupt(
    *,
    store: Store | None = None,
    interrupt_id: str,
    decision: str,
    data: Any = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Resolve a pending interrupt with allow or deny; NotFound (3), or Conflict (4) if settled."""
    if decision not in RESOLUTIONS:
        raise InvalidInput(f"decision {decision!r} must be allow or deny")
    store = _store(store)
    check_id(interrupt_id, what="interrupt id")
    stamp = timestamp(now or utcnow())

    def resolve(record: dict[str, Any]) -> dict[str, Any]:
        if record.get("status") != "pending":
            raise _not_pending(record)
        record.update(
            status="resolved",
            resolution=decision,
            resolved_at=stamp,
            resolved_data=data,
            updated_at=stamp,
        )
        return record

    try:
        return to_dto(_settle(store, interrupt_id, resolve))
    except NotFound:
        raise _no_interrupt(interrupt_id) from None


def cancel_interrupt(
    *, store: Store | None = None, interrupt_id: str, now: datetime | None = None
) -> dict[str, Any]:
    """Cancel a pending interrupt of a stopped run; NotFound (3), or Conflict (4) if settled."""
    store = _store(store)
    check_id(interrupt_id, what="interrupt id")
    stamp = timestamp(now or utcnow())

    def cancel(record: dict[str, Any]) -> dict[str, Any]:
        if record.get("status") != "pending":
            raise _not_pending(record)
        record.update(status="cancelled", resolved_at=stamp, updated_at=stamp)
        return record

    try:
        return to_dto(_settle(store, interrupt_id, cancel))
    except NotFound:
        raise _no_interrupt(interrupt_id) from None


class _Skip(Exception):
    """The marked interrupt needs no expiry (settled already, or not due)."""


def sweep(*, store: Store | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
    """Settle every overdue pending interrupt with its default resolution; return them.

    Each becomes ``expired`` with its stored ``default_resolution`` (``deny`` when it has none).
    A damaged interrupt file does not stop the others; it is reported afterwards as
    InvalidInput (exit 5) naming each path.
    """
    store = _store(store)
    moment = now or utcnow()
    due_ms, stamp = epoch_ms(moment), timestamp(moment)
    settled: list[dict[str, Any]] = []
    damaged: list[str] = []

    def expire(record: dict[str, Any]) -> dict[str, Any]:
        if record.get("status") != "pending":
            raise _Skip
        expires_at = record.get("expires_at")
        if not expires_at or parse_timestamp(expires_at) > moment:
            raise _Skip
        record.update(
            status="expired",
            resolution=record.get("default_resolution") or "deny",
            resolved_at=stamp,
            updated_at=stamp,
        )
        return record

    for marker in store.tagged(PENDING):
        expiry, _, interrupt_id = marker.partition("-")
        if not expiry.isdigit() or not interrupt_id:
            continue
        if int(expiry) > due_ms:
            break  # markers sort by expiry, so the rest are not due either
        try:
            settled.append(to_dto(_settle(store, interrupt_id, expire)))
        except _Skip:
            record = store.get(INTERRUPT, interrupt_id)
            if record is not None and record.get("status") != "pending":
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
