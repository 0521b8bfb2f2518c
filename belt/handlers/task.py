"""Task handlers: the hook payload becomes the input text of a new chat of another agent."""

from __future__ import annotations

import json
from collections.abc import Mapping

from belt.records.chats import create_chat
from belt.records.messages import Recorder
from belt.store import Store
from belt.wire.enums import ChatStatus


def start_task(store: Store, *, agent_ref: str, payload: Mapping[str, object]) -> str:
    """Create a chat of ``agent_ref`` whose first user message is the payload; return its id."""
    chat = create_chat(
        store,
        agent_id=agent_ref,
        status=ChatStatus.BUSY,
        origin={"hook_event": payload.get("event"), "run_id": payload.get("run_id")},
    )
    Recorder(store, chat["id"]).add_message(
        role="user",
        run_id=None,
        content=[{"type": "text", "text": json.dumps(payload, ensure_ascii=False)}],
    )
    return str(chat["id"])
