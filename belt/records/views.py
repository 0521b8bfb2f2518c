"""Records as the platform API shows them: the ChatDTO with its messages, runs and gates.

``belt sim show --json`` and ``belt serve``'s ``GET /chats/{id}`` build a chat from here, so both
say the same thing; the public form (the API's) leaves out what only belt keeps (the ``sim`` part
of a message, belt's fields on a run).
"""

from __future__ import annotations

from typing import Any

from belt.records.chats import read_chat
from belt.records.interrupts import list_interrupts
from belt.records.messages import chat_messages
from belt.records.runs import CHAT_RUNS, listed_runs, run_dto
from belt.store import Store
from belt.wire.enums import InterruptStatus


def public_message(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message as the ChatMessageDTO of the API (without belt's ``sim`` part)."""
    return {key: value for key, value in message.items() if key != "sim"}


def chat_dto(
    store: Store,
    chat_id: str,
    *,
    runs: list[dict[str, Any]] | None = None,
    run_fields: tuple[str, ...] = (),
    public: bool = False,
    with_messages: bool = True,
) -> dict[str, Any]:
    """A chat as a ChatDTO: status, active run, messages and pending interrupts.

    ``runs`` are the runs whose gates count (by default the chat's own runs, from the
    ``chat-runs`` index); ``public`` gives the API's shapes; without ``with_messages`` the
    ``chat_messages`` are left out (as the platform's chat events leave them).
    """
    chat = read_chat(store, chat_id)
    if runs is None:
        runs = listed_runs(store, CHAT_RUNS, chat_id)
    pending = [
        interrupt
        for run in runs
        for interrupt in list_interrupts(store=store, run_id=run["id"])
        if interrupt["status"] == InterruptStatus.PENDING
    ]
    active = next((run for run in runs if run["id"] == chat.get("active_run_id")), None)
    fields = () if public else run_fields
    dto: dict[str, Any] = {
        "id": chat["id"],
        "status": chat.get("status"),
        "agent_id": chat.get("agent_id"),
        "agent_data": chat.get("agent_data") or {},
        "parent_id": chat.get("parent_id"),
        "context": chat.get("context") or {},
        "output": chat.get("output"),
        "active_run": run_dto(active, fields) if active else None,
        "pending_interrupts": pending,
        "created_at": chat.get("created_at"),
        "updated_at": chat.get("updated_at"),
    }
    if with_messages:
        messages = chat_messages(store, chat_id)
        dto["chat_messages"] = [public_message(m) for m in messages] if public else messages
    return dto
