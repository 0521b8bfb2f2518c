"""Chats in the store: the per-chat settings that switch an agent's hooks off."""

from __future__ import annotations

from typing import Any

from belt.store import Store, check_id, open_store
from belt.store.clock import timestamp, utcnow

CHAT = "chat"


def set_chat_settings(
    *, store: Store | None = None, chat_id: str, disable_hooks: bool
) -> dict[str, Any]:
    """Store ``agent_data.disable_hooks`` on a chat (created if missing); return the chat."""
    store = store if store is not None else open_store()
    check_id(chat_id, what="chat id")
    stamp = timestamp(utcnow())
    with store.lock(CHAT, chat_id):
        chat = store.get(CHAT, chat_id) or {"id": chat_id, "created_at": stamp}
        agent_data = chat.get("agent_data")
        chat["agent_data"] = {
            **(agent_data if isinstance(agent_data, dict) else {}),
            "disable_hooks": disable_hooks,
        }
        chat["updated_at"] = stamp
        store.write(CHAT, chat_id, chat)
    return chat


def hooks_disabled(*, store: Store | None = None, chat_id: str) -> bool:
    """True when the chat's settings switch its agent's hooks off."""
    store = store if store is not None else open_store()
    chat = store.get(CHAT, check_id(chat_id, what="chat id"))
    agent_data = (chat or {}).get("agent_data")
    return isinstance(agent_data, dict) and agent_data.get("disable_hooks") is True
