"""The simulation's record in the store: chat, messages, runs and the event log.

Every change is written as it happens, so a killed simulation loses nothing it recorded.
"""

from __future__ import annotations

import secrets
from typing import Any

from belt.errors import Conflict
from belt.store import Store
from belt.store.clock import timestamp, utcnow

MESSAGES = "chat-messages"
ORDER_LOCK = "chat-order"


def now_iso() -> str:
    """The current UTC time in RFC 3339 with milliseconds."""
    return timestamp(utcnow())


def new_id(prefix: str) -> str:
    """A fresh id such as ``ar_3f9c…`` that is safe as a file name."""
    return f"{prefix}_{secrets.token_hex(8)}"


def record_agent_and_chat(
    store: Store,
    *,
    agent_id: str | None,
    agent: dict[str, Any],
    chat_id: str | None,
    chat: dict[str, Any],
) -> tuple[str, str, str]:
    """Write a simulation's agent and create its fresh chat; returns agent, chat and sim ids."""
    stamp = now_iso()
    agent_id = agent_id or new_id("ag")
    store.write("agent", agent_id, {"id": agent_id, **agent, "updated_at": stamp})
    chat_id = chat_id or new_id("ch")
    if store.exists("chat", chat_id):
        raise Conflict(
            f"chat {chat_id} already exists in the store",
            hint="remove [chat] id from the scenario to get a fresh chat, or choose another id",
        )
    sim_id = new_id("sim")
    store.create(
        "chat",
        chat_id,
        {
            "id": chat_id,
            "sim_id": sim_id,
            "status": "idle",
            "agent_id": agent_id,
            "parent_id": None,
            "run_count": 0,
            "created_at": stamp,
            "updated_at": stamp,
            **chat,
        },
    )
    return agent_id, chat_id, sim_id


def run_event(
    run_id: str | None, *, kind: str, state: str, reason: str, text: str
) -> dict[str, Any]:
    """The content block of a ``run_failed`` or ``run_ended`` row of the transcript."""
    return {
        "type": "event",
        "text": text,
        "event": {"type": kind, "run": {"run_id": run_id, "state": state, "reason": reason}},
    }


class Recorder:
    """Holds one chat's messages in memory and writes every change through to the store."""

    def __init__(self, store: Store, chat_id: str) -> None:
        self.store = store
        self.chat: dict[str, Any] = store.read("chat", chat_id)
        self.messages: list[dict[str, Any]] = []
        self._index_size = -1
        self.reload_messages()

    def reload_messages(self) -> None:
        """Read the chat's messages from the store again."""
        chat_id = self.chat_id
        self._index_size = self.store.index_size(MESSAGES, chat_id)
        ids = self.store.members(MESSAGES, chat_id)
        self.messages = sorted(
            (self.store.read("message", mid) for mid in ids), key=lambda m: int(m["order"])
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
        self.chat = self.store.merge("chat", self.chat_id, {**changes, "updated_at": now_iso()})

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
        """Append a message to the chat and persist it, after any another process added.

        Appends take the chat's order lock, and a writer that finds the message index grown
        since it last looked (``belt sim stop`` writing from another process) reads it again,
        so two writers never give out the same ``order``.
        """
        with self.store.lock(ORDER_LOCK, self.chat_id):
            if self.store.index_size(MESSAGES, self.chat_id) != self._index_size:
                self.reload_messages()
            return self._append_message(
                role=role,
                run_id=run_id,
                content=content,
                status=status,
                sim=sim,
                message_id=message_id,
                **fields,
            )

    def _append_message(
        self,
        *,
        role: str,
        run_id: str | None,
        content: list[dict[str, Any]],
        status: str,
        sim: dict[str, Any] | None,
        message_id: str | None,
        **fields: Any,
    ) -> dict[str, Any]:
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
        self.store.link(MESSAGES, self.chat_id, message["id"])
        self._index_size = self.store.index_size(MESSAGES, self.chat_id)
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
        self.data = self.store.merge("run", self.id, {**changes, "updated_at": now_iso()})

    def log(self, record: dict[str, Any]) -> None:
        """Append an agent event (such as ``hook.executed``) to the run's event log.

        One line per handler run, written before the run goes on (so a killed simulation keeps
        it) but not fsynced: the log grows with every hook, and the cost of a hook matters.
        """
        record = {"run_id": self.id, "at": now_iso(), **record}
        self.store.append("events", self.id, record, sync=False)
