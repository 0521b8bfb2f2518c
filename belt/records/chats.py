"""Chats in the store: the one place a chat is created, read, and switched off
(``agent_data.disable_hooks``, the platform's ``POST /chats/{id}/settings``).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, cast

from belt.errors import Conflict, NotFound
from belt.records.changes import touched
from belt.records.ids import new_id, now_iso
from belt.records.names import find_id
from belt.store import Store, check_id, open_store
from belt.store.shapes import record_shape
from belt.wire.enums import ChatStatus

CHAT = "chat"


class AgentData(TypedDict):
    """A chat's settings (``POST /chats/{id}/settings``, and the tools approved always)."""

    disable_hooks: NotRequired[bool]
    allow_all_tools: NotRequired[bool]
    always_allow: NotRequired[list[str]]


class ChatGraph(TypedDict):
    """Where a review branch sits: the chat it reviews, its ancestor, the entries it saved."""

    parent: str
    ancestor: str | None
    outputs: list[str]


class Chat(TypedDict):
    """A stored chat (kind ``chat``): the ChatDTO's fields and what belt continues it from."""

    id: str
    status: NotRequired[str | None]
    agent_data: NotRequired[AgentData | None]
    graph: NotRequired[ChatGraph]
    turn_count: NotRequired[int]
    run_count: NotRequired[int]
    active_run_id: NotRequired[str | None]
    sim_id: NotRequired[str]
    agent_id: NotRequired[str | None]
    parent_id: NotRequired[str | None]
    dialect: NotRequired[str]
    created_at: NotRequired[str]
    updated_at: NotRequired[str]
    context: NotRequired[Any]
    output: NotRequired[Any]
    review_count: NotRequired[int]
    last_review_order: NotRequired[int]


record_shape(CHAT, Chat)


def create_chat(
    store: Store,
    *,
    agent_id: str,
    chat_id: str | None = None,
    parent_id: str | None = None,
    status: ChatStatus = ChatStatus.IDLE,
    disable_hooks: bool = False,
    **fields: Any,
) -> Chat:
    """Create a new chat of ``agent_id`` and return it; Conflict (exit 4) if the id is taken."""
    chat_id = check_id(chat_id or new_id("ch"), what="chat id")
    if store.exists(CHAT, chat_id):
        raise Conflict(
            f"chat {chat_id} already exists in the store",
            hint="remove [chat] id from the scenario to get a fresh chat, or choose another id",
        )
    stamp = now_iso()
    chat = {
        "id": chat_id,
        "status": status.value,
        "agent_id": agent_id,
        "agent_data": {"disable_hooks": disable_hooks, "allow_all_tools": False},
        "parent_id": parent_id,
        "turn_count": 0,
        "run_count": 0,
        "created_at": stamp,
        "updated_at": stamp,
        **fields,
    }
    store.create(CHAT, chat_id, chat)
    touched(chat_id)
    return cast(Chat, chat)


def read_chat(store: Store, chat_id: str, *, fresh: bool = False) -> Chat:
    """One chat (exit 3 if missing, 5 if damaged); ``fresh``: read only a replaced file."""
    read = store.read_fresh if fresh else store.read
    return cast(Chat, read(CHAT, check_id(chat_id, what="chat id")))


def update_chat(store: Store, chat_id: str, **changes: Any) -> Chat:
    """Change chat fields under the chat's lock, keeping changes made elsewhere; return it."""
    chat = cast(Chat, store.merge(CHAT, chat_id, {**changes, "updated_at": now_iso()}))
    touched(chat_id)
    return chat


def release_chat(store: Store, chat_id: str, run_id: str | None) -> Chat:
    """The chat is idle again once ``run_id`` ends, unless another run occupies it already."""
    stamp = now_iso()

    def apply(chat: Chat) -> Chat:
        if chat.get("active_run_id") in (run_id, None):
            chat.update(
                {"status": ChatStatus.IDLE.value, "active_run_id": None, "updated_at": stamp}
            )
        return chat

    chat = store.update(CHAT, chat_id, apply)
    touched(chat_id)
    return chat


def set_outputs(store: Store, chat_id: str, outputs: list[str]) -> None:
    """Set the outputs of a chat's graph (the registry entries a review branch saved)."""

    def apply(chat: Chat) -> Chat:
        chat["graph"] = {**chat["graph"], "outputs": outputs}
        return chat

    store.update(CHAT, chat_id, apply)


def _no_chat(chat_id: str) -> NotFound:
    return NotFound(
        f"no chat {chat_id}", hint="list the simulated runs and their chats with `belt sim list`"
    )


def find_chat_id(store: Store, ref: str) -> str:
    """The id of the chat ``ref`` names (``find_id``)."""
    return find_id(store, CHAT, ref, what="chat", missing=_no_chat)


def disabled(chat: Chat | None) -> bool:
    """True when a chat's settings switch its agent's hooks off (``disable_hooks`` is true)."""
    agent_data = chat.get("agent_data") if chat is not None else None
    return isinstance(agent_data, dict) and agent_data.get("disable_hooks") is True


def set_chat_settings(*, store: Store | None = None, chat_id: str, disable_hooks: bool) -> Chat:
    """Store ``agent_data.disable_hooks`` on a chat; NotFound (exit 3) if there is none."""
    store = open_store(store)
    check_id(chat_id, what="chat id")
    stamp = now_iso()
    with store.lock(CHAT, chat_id):
        if (chat := cast("Chat | None", store.get(CHAT, chat_id))) is None:
            raise _no_chat(chat_id)
        agent_data = chat.get("agent_data")
        kept = agent_data if isinstance(agent_data, dict) else {}
        chat["agent_data"] = {**kept, "disable_hooks": disable_hooks}
        chat["updated_at"] = stamp
        store.write(CHAT, chat_id, chat)
    touched(chat_id)
    return chat
