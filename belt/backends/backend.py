"""One backend for what a command asks of a platform: the local store, or (``--api URL``) a
platform's API (``belt.backends.remote.Platform``); both give the same shapes and errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

from belt.errors import Conflict, NotFound, UsageError
from belt.wire.dto import InterruptJSON, WatchEvent

if TYPE_CHECKING:
    from belt.backends.remote import Platform
    from belt.records.interrupts import BatchResult, Settlement
    from belt.store import Store

Listed = tuple[InterruptJSON, str | None]
"""An InterruptDTO, and how it settles on expiry when the backend knows (``allow``/``deny``)."""


class LocalBackend:
    """The store in the state directory, as a platform."""

    def __init__(self, store: Store | None = None) -> None:
        from belt.store import open_store  # noqa: PLC0415 - start-up: belt --help

        self.store = store if store is not None else open_store()

    def run_named(self, ref: str) -> str:
        """A run named by its id, short id or a unique prefix of a stored one (else as it is)."""
        from belt.records.names import named_or_given  # noqa: PLC0415 - start-up: belt --help
        from belt.records.runs import find_run_id  # noqa: PLC0415 - start-up: belt --help

        return named_or_given(find_run_id, self.store, ref)

    def find_interrupts(
        self,
        *,
        run_id: str | None = None,
        chat_id: str | None = None,
        reason: str | None = None,
        include_settled: bool = False,
    ) -> list[Listed]:
        """Interrupts from the store; a run or chat by id, short id or unique prefix."""
        from belt.records.chats import find_chat_id  # noqa: PLC0415 - start-up: belt --help
        from belt.records.interrupts import inbox, on_expiry, to_dto  # noqa: PLC0415 - start-up: belt --help
        from belt.records.names import named_or_given  # noqa: PLC0415 - start-up: belt --help

        run_id = None if run_id is None else self.run_named(run_id)
        chat_id = None if chat_id is None else named_or_given(find_chat_id, self.store, chat_id)
        records = inbox(
            store=self.store,
            run_id=run_id,
            chat_id=chat_id,
            reason=reason,
            include_settled=include_settled,
        )
        return [(to_dto(record), on_expiry(record)) for record in records]

    def show_interrupt(self, *, interrupt_id: str, run_id: str | None) -> Listed:
        """One interrupt (id, short id or unique prefix) and its resolution on expiry."""
        from belt.records.interrupts import find_interrupt_id, on_expiry, read_record, to_dto  # noqa: PLC0415 - start-up: belt --help

        full_id = find_interrupt_id(store=self.store, ref=interrupt_id)
        record = read_record(store=self.store, interrupt_id=full_id)
        if run_id and record.get("run_id") != (run_id := self.run_named(run_id)):
            raise NotFound(f"interrupt {full_id} is not on run {run_id}")
        return to_dto(record), on_expiry(record)

    def resolve_interrupt(
        self,
        *,
        interrupt_id: str,
        decision: str,
        data: Any = None,
        door: str = "cli",
        by: Settlement | None = None,
    ) -> InterruptJSON:
        """Resolve an interrupt ``by`` a rule, else as the OS user through ``door`` (a prefix:
        pending ones first)."""
        from belt.records.interrupts import find_interrupt_id, person, resolve_interrupt  # noqa: PLC0415 - start-up: belt --help

        full_id = find_interrupt_id(store=self.store, ref=interrupt_id, pending_first=True)
        by = by or person(door)
        return resolve_interrupt(
            store=self.store, interrupt_id=full_id, decision=decision, data=data, by=by
        )

    def batch_atomic(self) -> bool:
        """The store settles a batch under the locks of all its gates."""
        return True

    def resolve_batch(
        self, *, ids: Sequence[str], digest: str, decision: str, data: Any = None
    ) -> BatchResult:
        """Settle the gates all or none, as the OS user through the CLI."""
        from belt.records.interrupts import person, resolve_batch  # noqa: PLC0415 - start-up: belt --help

        return resolve_batch(
            store=self.store,
            interrupt_ids=ids,
            digest=digest,
            decision=decision,
            data=data,
            by=person("cli"),
        )

    def watch_interrupts(
        self,
        *,
        run_ids: Sequence[str] = (),
        interval: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[WatchEvent]:
        """Events as interrupts (of ``run_ids`` only, if given) open and settle."""
        from belt.records.interrupts import Watch  # noqa: PLC0415 - start-up: belt --help

        watch = Watch(store=self.store, run_ids=[self.run_named(run_id) for run_id in run_ids])
        yield from watch.start()
        while True:
            sleep(interval)
            yield from watch.poll()

    def set_chat_settings(self, *, chat_id: str, disable_hooks: bool) -> dict[str, object]:
        """Store the chat's ``disable_hooks`` (the chat by id, short id or unique prefix)."""
        from belt.records.chats import find_chat_id, set_chat_settings  # noqa: PLC0415 - start-up: belt --help

        full_id = find_chat_id(self.store, chat_id)
        chat = set_chat_settings(store=self.store, chat_id=full_id, disable_hooks=disable_hooks)
        return dict(chat)

    def get_profile(self) -> dict[str, object]:
        """The stored declaration (``{}`` until one is written)."""
        from belt.records.profile import read_profile  # noqa: PLC0415 - start-up: pydantic

        return dict(read_profile(self.store)["configuration"])

    def put_profile(self, declaration: dict[str, object]) -> dict[str, object]:
        """Check and store the whole declaration."""
        from belt.records.profile import write_profile  # noqa: PLC0415 - start-up: pydantic

        return dict(write_profile(self.store, declaration)["configuration"])


@contextmanager
def open_backend(api: str | None, *, api_key: str | None = None) -> Iterator[Backend]:
    """The backend ``--api`` chose: the platform at ``api``, else the local store."""
    if not api:
        yield LocalBackend()
        return
    from belt.backends.remote import Platform  # noqa: PLC0415 - start-up: httpx

    with Platform(api, api_key=api_key) as platform:
        yield platform


Backend: TypeAlias = "LocalBackend | Platform"  # one contract: tests/test_backend_contract.py


def matching_gates(
    backend: Backend,
    *,
    run_id: str | None = None,
    chat_id: str | None = None,
    tool: str | None = None,
    event: str | None = None,
    include_settled: bool = False,
) -> list[InterruptJSON]:
    """The interrupts the filters select, oldest first (pending only, unless include_settled)."""
    if event is not None:
        from belt.reading.didyoumean import did_you_mean  # noqa: PLC0415 - start-up: for an unknown event only
        from belt.wire.catalogue import GATEABLE_EVENTS  # noqa: PLC0415 - start-up: for an unknown event only

        if event not in GATEABLE_EVENTS:
            raise UsageError(
                f"--event {event!r}: not an event a gate holds (one of "
                f"{', '.join(GATEABLE_EVENTS)}){did_you_mean(event, GATEABLE_EVENTS)}",
                where="--event",
            )
    listed = backend.find_interrupts(
        run_id=run_id, chat_id=chat_id, include_settled=include_settled
    )
    items = [
        item
        for item, _ in listed
        if (event is None or item.get("source") == f"hook:{event}")
        and (tool is None or _holds_tool(item, tool))
    ]
    return sorted(items, key=lambda item: str(item.get("created_at")))


def _holds_tool(item: InterruptJSON, tool: str) -> bool:
    meta = item.get("meta")
    data = meta.get("data") if isinstance(meta, dict) else None
    return isinstance(data, dict) and data.get("tool") == tool


def resolve_each(
    backend: Backend, items: list[InterruptJSON], *, decision: str, data: Any = None
) -> tuple[list[InterruptJSON], list[tuple[InterruptJSON, str]]]:
    """Resolve each of ``items``: those resolved, and those settled meanwhile with why."""
    resolved: list[InterruptJSON] = []
    missed: list[tuple[InterruptJSON, str]] = []
    for item in items:
        try:
            resolved.append(
                backend.resolve_interrupt(interrupt_id=item["id"], decision=decision, data=data)
            )
        except (Conflict, NotFound) as exc:
            missed.append((item, exc.message))
    return resolved, missed
