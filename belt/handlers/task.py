"""Task handlers: the hook payload becomes the input text of a new chat of another agent."""

from __future__ import annotations

import json
from typing import Any

from belt.engine.record import new_id, now_iso
from belt.store import Store


def start_task(store: Store, *, agent_ref: str, payload: dict[str, Any]) -> str:
    """Create a chat of ``agent_ref`` whose first user message is the payload; return its id."""
    chat_id = new_id("ch")
    stamp = now_iso()
    store.create(
        "chat",
        chat_id,
        {
            "id": chat_id,
            "status": "busy",
            "agent_id": agent_ref,
            "agent_data": {"disable_hooks": False},
            "parent_id": None,
            "created_at": stamp,
            "updated_at": stamp,
            "origin": {"hook_event": payload.get("event"), "run_id": payload.get("run_id")},
        },
    )
    message_id = new_id("msg")
    store.write(
        "message",
        message_id,
        {
            "id": message_id,
            "chat_id": chat_id,
            "agent_run_id": None,
            "order": 0,
            "status": "ready",
            "role": "user",
            "content": [{"type": "text", "text": json.dumps(payload, ensure_ascii=False)}],
            "created_at": stamp,
        },
    )
    store.link("chat-messages", chat_id, message_id)
    return chat_id
