"""A chat's messages: ChatMessageDTOs plus a ``sim`` object only the simulator needs, listed in
order by the chat's ``chat-messages`` index. An injection is written once, with the transcript row
of the hook run that made it (``sim.row``); its lifetime is read from the chat's ``turn_count``
and the messages after it (``settle_injections``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, cast

from belt.errors import Conflict, InvalidInput
from belt.records.changes import touched
from belt.records.chats import CHAT, Chat, read_chat, release_chat, update_chat
from belt.records.ids import new_id, now_iso
from belt.store import Store, check_id
from belt.store.shapes import record_shape
from belt.wire.enums import MessageStatus

MESSAGE = "message"
MESSAGES = "chat-messages"
ORDER_LOCK = "chat-order"


class Message(TypedDict):
    """A stored message (kind ``message``): a ChatMessageDTO and the simulator's ``sim``."""

    id: str
    chat_id: str
    order: int
    role: str
    content: list[Any]
    sim: NotRequired[dict[str, Any]]
    tool_invocations: NotRequired[list[Any]]
    agent_run_id: NotRequired[str | None]
    status: NotRequired[str]
    created_at: NotRequired[str]
    updated_at: NotRequired[str | None]
    tool_call_id: NotRequired[str | None]


record_shape(MESSAGE, Message)


@dataclass(frozen=True)
class NewMessage:
    """A message to append (``Recorder.add_messages``)."""

    role: str
    run_id: str | None
    content: list[dict[str, object]]
    status: str = MessageStatus.READY
    sim: dict[str, Any] = field(default_factory=dict)
    message_id: str | None = None
    fields: Mapping[str, object] = field(default_factory=dict)
    row: NewMessage | None = None
    """The transcript row of the hook run that made this injection, kept in its file."""


ROW = "row"  # the key of ``sim`` under which an injection's file holds its transcript row


def expanded(store: Store, record: Message) -> list[Message]:
    """A stored message as the chat lists it: an injection that holds its row is that row, then
    itself; InvalidInput (exit 5) when the row is not the one belt wrote."""
    if not isinstance(sim := record.get("sim"), dict) or ROW not in sim:
        return [record]
    row, shape = sim[ROW], {"id": str, "content": list, "sim": dict}
    if not isinstance(row, dict) or not all(isinstance(row.get(k), t) for k, t in shape.items()):
        path = store.path(MESSAGE, record["id"])
        raise InvalidInput(
            f"{path}: damaged store file: sim.row is not a transcript row (id, content, sim)",
            hint="belt leaves a damaged file as it is; restore it, or stop the run",
        )
    event: Message = {
        "id": row["id"],
        "chat_id": record["chat_id"],
        "agent_run_id": record.get("agent_run_id"),
        "order": record["order"] - 1,
        "status": MessageStatus.READY.value,
        "role": "event",
        "content": row["content"],
        "created_at": cast(str, record.get("created_at")),  # as the injection has it
        "sim": row["sim"],
    }
    return [event, cast(Message, {**record, "sim": {k: v for k, v in sim.items() if k != ROW}})]


def folded(message: Message, row: Message | None) -> Message:
    """What the file of ``message`` holds: with ``row``, the transcript row kept in it."""
    if row is None:
        return message
    kept = {"id": row["id"], "content": row["content"], "sim": row.get("sim") or {}}
    return {**message, "sim": {**message.get("sim", {}), ROW: kept}}


def expires_turn(message: Message) -> int | None:
    """The chat's ``turn_count`` at which an injection's ttl ends (None: it has none)."""
    info = (message.get("sim") or {}).get("injection") or {}
    ttl = int(info.get("ttl_turns") or 0)
    return int(info.get("turn") or 0) + ttl if ttl else None


def active_at(message: Message, turn: int) -> bool:
    """True when an injection not ended otherwise is still in the context at ``turn``."""
    return (expires := expires_turn(message)) is None or turn < expires


def settle_injections(messages: Sequence[Message], turn_count: int) -> None:
    """Give each injection of a chat's ``messages`` its ``active``, ``remaining`` and ``ended``
    at ``turn_count``."""
    reached: dict[str, str | None] = {}
    latest: dict[str, Message] = {}
    live: list[Message] = []
    for message in messages:
        sim = message.get("sim") or {}
        if message["role"] == "assistant":
            for injection_id in sim.get("injections") or []:
                reached[str(injection_id)] = message.get("created_at")
            continue
        info = sim.get("injection")
        if message["role"] != "injection" or not sim.get("active") or not isinstance(info, dict):
            continue  # not an injection of this chat's, or one whose end was written
        if key := info.get("dedup_key"):
            older = latest.get(key)
            turn = int(info.get("turn") or 0)
            if older is not None and older["sim"].get("active") and active_at(older, turn):
                expires = expires_turn(older)
                older["sim"].update(
                    active=False,
                    remaining=None if expires is None else expires - turn,
                    ended="replaced",
                )
                older["updated_at"] = message.get("created_at")
            latest[key] = message
        live.append(message)
    for message in live:
        sim = message["sim"]
        expires = expires_turn(message)
        if not sim["active"] or expires is None:
            continue
        if (counted := reached.get(message["id"])) is not None:
            message["updated_at"] = counted
        if turn_count >= expires:
            sim.update(active=False, remaining=0, ended="ttl")
        else:
            sim["remaining"] = expires - turn_count


def run_event(
    run_id: str | None, *, kind: str, state: str, reason: str, text: str
) -> dict[str, object]:
    """The content block of a ``run_failed`` or ``run_ended`` row of the transcript."""
    return {
        "type": "event",
        "text": text,
        "event": {"type": kind, "run": {"run_id": run_id, "state": state, "reason": reason}},
    }


def chat_messages(
    store: Store, chat_id: str, turn_count: int, rows: dict[str, Message] | None = None
) -> list[Message]:
    """A chat's messages in order, its injections as they stand at ``turn_count``; ``rows``
    gets the transcript row each injection's file holds (by its id)."""
    messages: list[Message] = []
    for message_id in store.members(MESSAGES, chat_id):
        parts = expanded(store, cast(Message, store.read(MESSAGE, message_id)))
        if len(parts) == 2 and rows is not None:
            rows[parts[1]["id"]] = parts[0]
        messages += parts
    messages.sort(key=lambda m: m["order"])
    settle_injections(messages, turn_count)
    return messages


class Recorder:
    """Holds one chat and its messages in memory and writes every change through to the store."""

    def __init__(self, store: Store, chat_id: str) -> None:
        self.store = store
        self.chat: Chat = read_chat(store, chat_id)
        self.messages: list[Message] = []
        self.by_id: dict[str, Message] = {}
        self.rows: dict[str, Message] = {}
        self._index_size = -1
        self._seen: object = None  # the chat's file as ``refresh_chat`` last read it
        self.reload_messages()

    def reload_messages(self) -> None:
        """Read the chat's messages from the store again."""
        self._index_size = self.store.index_size(MESSAGES, self.chat_id)
        rows: dict[str, Message] = {}
        turns = int(self.chat.get("turn_count", 0))
        self.messages = chat_messages(self.store, self.chat_id, turns, rows)  # fills ``rows``
        self.rows = rows
        self.by_id = {m["id"]: m for m in self.messages}

    @property
    def chat_id(self) -> str:
        """The chat's id."""
        return self.chat["id"]

    def refresh_chat(self) -> Chat:
        """Re-read the chat if another process replaced its file (else only a stat)."""
        chat, self._seen = self.store.read_if_replaced(
            CHAT, check_id(self.chat_id, what="chat id"), self._seen
        )
        if chat is not None:
            self.chat = cast(Chat, chat)
        return self.chat

    def update_chat(self, **changes: Any) -> None:
        """Change chat fields under the chat's lock, keeping changes made elsewhere."""
        self.chat = update_chat(self.store, self.chat_id, **changes)
        self._seen = self.store.seen(CHAT, self.chat_id)  # the write's: a later change is read

    def release_chat(self, run_id: str | None) -> None:
        """The chat is idle again once ``run_id`` ends (``release_chat``)."""
        self.chat = release_chat(self.store, self.chat_id, run_id)
        self._seen = self.store.seen(CHAT, self.chat_id)

    def add_message(
        self,
        *,
        role: str,
        run_id: str | None,
        content: list[dict[str, object]],
        status: str = MessageStatus.READY,
        sim: dict[str, Any] | None = None,
        message_id: str | None = None,
        **fields: Any,
    ) -> Message:
        """Append a message to the chat and persist it (``add_messages``)."""
        new = NewMessage(role, run_id, content, status, sim or {}, message_id, fields)
        return self.add_messages([new])[0]

    def add_messages(self, new: Sequence[NewMessage]) -> list[Message]:
        """Append messages after any another process added, under the chat's order lock (so two
        writers never give out one ``order``); files are written before they are listed, so none
        listed lacks its file."""
        if not new:
            return []
        added: list[Message] = []
        listed: list[str] = []
        with self.store.lock(ORDER_LOCK, self.chat_id):
            if self.store.index_size(MESSAGES, self.chat_id) != self._index_size:
                self.reload_messages()
            stamp = now_iso()
            for one in new:
                row = None if one.row is None else self._new(one.row, stamp, len(added))
                if row is not None:
                    added.append(row)
                message = self._new(one, stamp, len(added))
                data = folded(message, row)
                try:
                    self.store.create(MESSAGE, message["id"], data)
                except Conflict:
                    if one.message_id is None or one.message_id in self.by_id:
                        raise
                    # A message whose id was set aside (a run's input or reply) may have been
                    # written by a process killed before it listed it: written again, listed now.
                    self.store.write(MESSAGE, one.message_id, data)
                if row is not None:
                    self.rows[message["id"]] = row
                added.append(message)
                listed.append(message["id"])
            self.store.link_all(MESSAGES, self.chat_id, listed)
            self._index_size = self.store.index_size(MESSAGES, self.chat_id)
            self.messages += added
            self.by_id.update((message["id"], message) for message in added)
        touched(self.chat_id)
        return added

    def _new(self, one: NewMessage, stamp: str, before: int) -> Message:
        data = {
            "id": one.message_id or new_id("msg"),
            "chat_id": self.chat_id,
            "agent_run_id": one.run_id,
            "order": len(self.messages) + before,
            "status": one.status,
            "role": one.role,
            "content": one.content,
            "created_at": stamp,
            **one.fields,
            "sim": one.sim,
        }
        return cast(Message, data)

    def message(self, message_id: str) -> Message:
        """A message of this chat a run names; InvalidInput (exit 5) if the index lacks it."""
        if (found := self.by_id.get(message_id)) is None:
            path = self.store.index_path(MESSAGES, self.chat_id)
            raise InvalidInput(
                f"{path}: damaged store file: it does not list message {message_id}, which "
                "the run's record names",
                hint="belt leaves a damaged file as it is; restore it, or stop the run",
            )
        return found

    def save_message(self, message: Message) -> None:
        """Persist a changed message."""
        message["updated_at"] = now_iso()
        self.store.write(MESSAGE, message["id"], folded(message, self.rows.get(message["id"])))
        touched(self.chat_id)
