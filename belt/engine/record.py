"""The simulation's record in the store: chat, messages, runs and the event log.

Every change is written as it happens, so a killed simulation loses nothing it recorded.
"""

from __future__ import annotations

import secrets
from typing import Any

from belt.store import Store
from belt.store.clock import timestamp, utcnow


def now_iso() -> str:
    """The current UTC time in RFC 3339 with milliseconds."""
    return timestamp(utcnow())


def new_id(prefix: str) -> str:
    """A fresh id such as ``ar_3f9c…`` that is safe as a file name."""
    return f"{prefix}_{secrets.token_hex(8)}"


class Recorder:
    """Holds one chat's messages in memory and writes every change through to the store."""

    def __init__(self, store: Store, chat_id: str) -> None:
        self.store = store
        self.chat: dict[str, Any] = store.read("chat", chat_id)
        ids = store.members("chat-messages", chat_id)
        self.messages: list[dict[str, Any]] = sorted(
            (store.read("message", mid) for mid in ids), key=lambda m: int(m["order"])
        )

    @property
    def chat_id(self) -> str:
        """The chat's id."""
        return str(self.chat["id"])

    def refresh_chat(self) -> dict[str, Any]:
        """Re-read the chat (its settings may have changed from another process)."""
        self.chat = self.store.read("chat", self.chat_id)
        return self.chat

    def update_chat(self, **changes: Any) -> None:
        """Change chat fields under the chat's lock, keeping changes made elsewhere."""

        def apply(chat: dict[str, Any]) -> dict[str, Any]:
            chat.update(changes)
            chat["updated_at"] = now_iso()
            return chat

        self.chat = self.store.update("chat", self.chat_id, apply)

    def hooks_disabled(self) -> bool:
        """True when the chat's settings switch its hooks off."""
        agent_data = self.chat.get("agent_data") or {}
        return bool(agent_data.get("disable_hooks"))

    def add_message(
        self,
        *,
        role: str,
        run_id: str | None,
        content: list[dict[str, Any]],
        status: str = "ready",
        sim: dict[str, Any] | None = None,
        message_id: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Append a message to the chat and persist it."""
        order = len(self.messages)
        message: dict[str, Any] = {
            "id": message_id or new_id("msg"),
            "chat_id": self.chat_id,
            "agent_run_id": run_id,
            "order": order,
            "status": status,
            "role": role,
            "content": content,
            "created_at": now_iso(),
            **fields,
            "sim": sim or {},
        }
        self.store.write("message", message["id"], message)
        self.store.link("chat-messages", self.chat_id, message["id"])
        self.messages.append(message)
        return message

    def save_message(self, message: dict[str, Any]) -> None:
        """Persist a changed message."""
        message["updated_at"] = now_iso()
        self.store.write("message", message["id"], message)


class RunRecord:
    """One run's record in the store, written through on every change."""

    def __init__(self, store: Store, data: dict[str, Any]) -> None:
        self.store = store
        self.data = data

    @classmethod
    def create(
        cls, store: Store, *, sim_id: str, agent_id: str, chat_id: str, turn_index: int
    ) -> RunRecord:
        """Create a new working run."""
        stamp = now_iso()
        data: dict[str, Any] = {
            "id": new_id("ar"),
            "agent_id": agent_id,
            "chat_id": chat_id,
            "state": "working",
            "error": None,
            "interrupt_reason": None,
            "interrupt_tool_id": None,
            "interrupt_meta": None,
            "created_at": stamp,
            "updated_at": stamp,
            "sim_id": sim_id,
            "turn_index": turn_index,
            "cursor": None,
        }
        store.create("run", data["id"], data)
        store.link("sim-runs", sim_id, data["id"])
        return cls(store, data)

    @property
    def id(self) -> str:
        """The run's id."""
        return str(self.data["id"])

    def update(self, **changes: Any) -> None:
        """Change run fields and persist them."""
        changes["updated_at"] = now_iso()

        def apply(run: dict[str, Any]) -> dict[str, Any]:
            run.update(changes)
            return run

        self.data = self.store.update("run", self.id, apply)

    def log(self, record: dict[str, Any]) -> None:
        """Append an agent event (such as ``hook.executed``) to the run's event log.

        One line per handler run, written before the run goes on (so a killed simulation keeps
        it) but not fsynced: the log grows with every hook, and the cost of a hook matters.
        """
        record = {"run_id": self.id, "at": now_iso(), **record}
        self.store.append("events", self.id, record, sync=False)
