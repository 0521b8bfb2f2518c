"""One backend for what a command asks of a platform: the local store, or a platform's API.

Every interrupt, chat-settings and profile command makes one call on a :class:`Backend`;
``--api URL`` chooses the remote one (``belt.remote.Platform``, which speaks to the real platform
or to ``belt serve``), otherwise the store in the state directory answers. Both give the same
shapes (InterruptDTO, the chat, the declaration) and raise the same errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from belt.errors import NotFound

if TYPE_CHECKING:
    import httpx

    from belt.store import Store


class Backend(Protocol):
    """What a command may ask of a platform."""

    def list_interrupts(
        self, *, run_id: str, include_settled: bool = False
    ) -> list[dict[str, Any]]:
        """A run's interrupts, oldest first: the pending ones, or all."""

    def show_interrupt(
        self, *, interrupt_id: str, run_id: str | None
    ) -> tuple[dict[str, Any], str | None]:
        """One InterruptDTO, and how it settles on expiry when the backend knows."""

    def resolve_interrupt(
        self, *, interrupt_id: str, decision: str, data: Any = None
    ) -> dict[str, Any]:
        """Resolve a pending interrupt; returns its InterruptDTO."""

    def set_chat_settings(self, *, chat_id: str, disable_hooks: bool) -> dict[str, Any]:
        """Switch a chat's hooks off or on; returns the chat."""

    def get_profile(self) -> dict[str, Any]:
        """The whole Nexus configuration declaration."""

    def put_profile(self, declaration: dict[str, Any]) -> dict[str, Any]:
        """Replace the whole Nexus configuration declaration; returns it as stored."""


class LocalBackend:
    """The store in the state directory, as a platform."""

    def __init__(self, store: Store | None = None) -> None:
        from belt.store import open_store

        self.store = store if store is not None else open_store()

    def list_interrupts(
        self, *, run_id: str, include_settled: bool = False
    ) -> list[dict[str, Any]]:
        """A run's interrupts from the store."""
        from belt.records.interrupts import list_interrupts

        return list_interrupts(store=self.store, run_id=run_id, include_settled=include_settled)

    def show_interrupt(
        self, *, interrupt_id: str, run_id: str | None
    ) -> tuple[dict[str, Any], str | None]:
        """One interrupt from the store, with its resolution on expiry."""
        from belt.records.interrupts import on_expiry, read_record, to_dto

        record = read_record(store=self.store, interrupt_id=interrupt_id)
        if run_id and record.get("run_id") != run_id:
            raise NotFound(f"interrupt {interrupt_id} is not on run {run_id}")
        return to_dto(record), on_expiry(record)

    def resolve_interrupt(
        self, *, interrupt_id: str, decision: str, data: Any = None
    ) -> dict[str, Any]:
        """Resolve an interrupt in the store (exactly one of many racing resolvers wins)."""
        from belt.records.interrupts import resolve_interrupt

        return resolve_interrupt(
            store=self.store, interrupt_id=interrupt_id, decision=decision, data=data
        )

    def set_chat_settings(self, *, chat_id: str, disable_hooks: bool) -> dict[str, Any]:
        """Store the chat's ``disable_hooks``."""
        from belt.records.chats import set_chat_settings

        return set_chat_settings(store=self.store, chat_id=chat_id, disable_hooks=disable_hooks)

    def get_profile(self) -> dict[str, Any]:
        """The stored declaration (``{}`` until one is written)."""
        from belt.records.profile import read_profile

        return dict(read_profile(self.store)["configuration"])

    def put_profile(self, declaration: dict[str, Any]) -> dict[str, Any]:
        """Check and store the whole declaration."""
        from belt.records.profile import write_profile

        return dict(write_profile(self.store, declaration)["configuration"])


@contextmanager
def open_backend(
    api: str | None,
    *,
    api_key: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Iterator[Backend]:
    """The backend ``--api`` chose: the platform at ``api``, else the local store."""
    if not api:
        yield LocalBackend()
        return
    from belt.remote import Platform

    with Platform(api, api_key=api_key, transport=transport) as platform:
        yield platform
