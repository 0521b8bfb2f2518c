"""Records as the platform API shows them: the ChatDTO with its messages, runs and gates, one
form for ``belt sim show --json`` and ``belt serve``'s ``GET /chats/{id}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

from belt.records.chats import CHAT, AgentData, Chat, read_chat
from belt.records.interrupts import list_interrupts
from belt.records.messages import chat_messages
from belt.records.runs import CHAT_RUNS, Run, RunView, get_run, listed_runs, run_dto
from belt.store import Store, check_id
from belt.wire.dto import InterruptJSON


class ChatView(TypedDict):
    """A chat as the API shows it (``chat_dto``)."""

    id: str
    status: str | None
    agent_id: object
    agent_data: AgentData
    parent_id: object
    context: object
    output: object
    active_run: RunView | None
    pending_interrupts: list[InterruptJSON]
    created_at: object
    updated_at: object
    chat_messages: NotRequired[Sequence[Mapping[str, object]]]


def public_message(message: Mapping[str, object]) -> dict[str, object]:
    """A stored message as the ChatMessageDTO of the API (without belt's ``sim`` part)."""
    return {key: value for key, value in message.items() if key != "sim"}


def chat_state(store: Store, chat_id: str) -> tuple[Chat, Run | None]:
    """A chat and the run that occupies it, read under the chat's lock its writers take."""
    with store.lock(CHAT, check_id(chat_id, what="chat id")):
        chat = read_chat(store, chat_id)
        active = chat.get("active_run_id")
        run = get_run(store, active) if isinstance(active, str) else None
    return chat, run


def chat_dto(
    store: Store,
    chat_id: str,
    *,
    runs: Sequence[Run] | None = None,
    run_fields: tuple[str, ...] = (),
    public: bool = False,
    with_messages: bool = True,
    state: tuple[Chat, Run | None] | None = None,
) -> ChatView:
    """A chat as a ChatDTO with the pending interrupts of ``runs`` (default: the chat's own)."""
    chat, active = state if state is not None else chat_state(store, chat_id)
    if runs is None:
        runs = listed_runs(store, CHAT_RUNS, chat_id)
    if active is not None and all(run["id"] != active["id"] for run in runs):
        active = None  # a run outside those asked about
    runs = [active if active and run["id"] == active["id"] else run for run in runs]
    pending = [gate for run in runs for gate in list_interrupts(store=store, run_id=run["id"])]
    dto: ChatView = {
        "id": chat["id"],
        "status": chat.get("status"),
        "agent_id": chat.get("agent_id"),
        "agent_data": chat.get("agent_data") or {},
        "parent_id": chat.get("parent_id"),
        "context": chat.get("context") or {},
        "output": chat.get("output"),
        "active_run": run_dto(active, () if public else run_fields) if active else None,
        "pending_interrupts": pending,
        "created_at": chat.get("created_at"),
        "updated_at": chat.get("updated_at"),
    }
    if with_messages:
        messages = chat_messages(store, chat_id, int(chat.get("turn_count", 0)))
        dto["chat_messages"] = [public_message(m) for m in messages] if public else messages
    return dto
