"""A chat's messages: ordered, written through to the store as they change.

Messages are ChatMessageDTOs plus a ``sim`` object of what only the simulator needs (sizes,
injection lifetimes, which execution wrote them). The chat's ``chat-messages`` index lists them in
the order they were added; ``order`` is their position.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """A stored message (kind ``message``): a ChatMessageDTO and what only the simulator needs
    (``sim``)."""

    id: str
    chat_id: str
    order: int
    role: str
    content: list[Any]
    sim: NotRequired[dict[str, Any]]
    tool_invocations: NotRequired[list[Any]]
    agent_run_id: NotRequired[str | None]
    status: NotRequired[str]
    created_at: NotRequired[Any]
    updated_at: NotRequired[Any]
    tool_call_id: NotRequired[Any]


record_shape(MESSAGE, Message)


@dataclass(frozen=True)
class NewMessage:
    """A message to append (``Recorder.add_messages``): what ``Recorder.add_message`` takes."""

    role: str
    run_id: str | None
    content: list[dict[str, Any]]
    status: str = MessageStatus.READY
    sim: dict[str, Any] = field(default_factory=dict)
    message_id: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def run_event(
    run_id: str | None, *, kind: str, state: str, reason: str, text: str
) -> dict[str, Any]:
    """The content block of a ``run_failed`` or ``run_ended`` row of the transcript."""
    return {
        "type": "event",
        "text": text,
        "event": {"type": kind, "run": {"run_id": run_id, "state": state, "reason": reason}},
    }


def chat_messages(store: Store, chat_id: str) -> list[Message]:
    """A chat's messages in order."""
    return sorted(
        (cast(Message, store.read(MESSAGE, mid)) for mid in store.members(MESSAGES, chat_id)),
        key=lambda m: m["order"],
    )


class Recorder:
    """Holds one chat and its messages in memory and writes every change through to the store."""

    def __init__(self, store: Store, chat_id: str) -> None:
        self.store = store
        self.chat: Chat = read_chat(store, chat_id)
        self.messages: list[Message] = []
        self.by_id: dict[str, Message] = {}
        self._index_size = -1
        self._seen: object = None
        """What stands for the chat's file as ``refresh_chat`` last read it."""
        self.reload_messages()

    def reload_messages(self) -> None:
        """Read the chat's messages from the store again."""
        self._index_size = self.store.index_size(MESSAGES, self.chat_id)
        self.messages = chat_messages(self.store, self.chat_id)
        self.by_id = {m["id"]: m for m in self.messages}

    @property
    def chat_id(self) -> str:
        """The chat's id."""
        return self.chat["id"]

    def refresh_chat(self) -> Chat:
        """Re-read the chat (its settings may have changed from another process): nothing is
        read or decoded while its file is the one this last read (a stat), since every change
        this recorder makes replaces that file."""
        chat, self._seen = self.store.read_if_replaced(
            CHAT, check_id(self.chat_id, what="chat id"), self._seen
        )
        if chat is not None:
            self.chat = cast(Chat, chat)
        return self.chat

    def update_chat(self, **changes: Any) -> None:
        """Change chat fields under the chat's lock, keeping changes made elsewhere."""
        self.chat = update_chat(self.store, self.chat_id, **changes)
        self._wrote_chat()

    def release_chat(self, run_id: str | None) -> None:
        """The chat is idle again once ``run_id`` ends (unless another run occupies it)."""
        self.chat = release_chat(self.store, self.chat_id, run_id)
        self._wrote_chat()

    def _wrote_chat(self) -> None:
        # What this recorder holds is the file it just wrote: the next refresh is a stat until
        # another process replaces the file (the stamp kept is the one of the write, so a
        # change made between the write and this line is still read).
        self._seen = self.store.seen(CHAT, self.chat_id)

    def add_message(
        self,
        *,
        role: str,
        run_id: str | None,
        content: list[dict[str, Any]],
        status: str = MessageStatus.READY,
        sim: dict[str, Any] | None = None,
        message_id: str | None = None,
        **fields: Any,
    ) -> Message:
        """Append a message to the chat and persist it, after any another process added.

        Appends take the chat's order lock, and a writer that finds the message index grown
        since it last looked (``belt sim stop`` writing from another process) reads it again,
        so two writers never give out the same ``order``. A ``message_id`` given is one the
        chat does not list yet (its file, if any, is one a killed process did not list).
        """
        return self.add_messages(
            [
                NewMessage(
                    role=role,
                    run_id=run_id,
                    content=content,
                    status=status,
                    sim=sim or {},
                    message_id=message_id,
                    fields=fields,
                )
            ]
        )[0]

    def add_messages(self, new: Sequence[NewMessage]) -> list[Message]:
        """Append messages to the chat in order, as ``add_message`` appends each, under one
        hold of the order lock and listed in one append to the message index.

        Each message's file is written before any is listed, so a process killed in between
        leaves files the chat does not list (never a listed message without its file), and
        one killed while listing them leaves the first part of them listed, in order.
        """
        if not new:
            return []
        added: list[Message] = []
        with self.store.lock(ORDER_LOCK, self.chat_id):
            if self.store.index_size(MESSAGES, self.chat_id) != self._index_size:
                self.reload_messages()
            stamp = now_iso()
            for one in new:
                data: dict[str, Any] = {
                    "id": one.message_id or new_id("msg"),
                    "chat_id": self.chat_id,
                    "agent_run_id": one.run_id,
                    "order": len(self.messages) + len(added),
                    "status": one.status,
                    "role": one.role,
                    "content": one.content,
                    "created_at": stamp,
                    **one.fields,
                    "sim": one.sim,
                }
                message = cast(Message, data)
                try:
                    self.store.create(MESSAGE, message["id"], data)
                except Conflict:
                    if one.message_id is None or one.message_id in self.by_id:
                        raise
                    # A message whose id was set aside (a run's input or reply) may have been
                    # written by a process killed before it listed it: written again, listed now.
                    self.store.write(MESSAGE, one.message_id, data)
                added.append(message)
            if len(added) == 1:
                self.store.link(MESSAGES, self.chat_id, added[0]["id"])
            else:
                self.store.link_all(MESSAGES, self.chat_id, [message["id"] for message in added])
            self._index_size = self.store.index_size(MESSAGES, self.chat_id)
            for message in added:
                self.messages.append(message)
                self.by_id[message["id"]] = message
        touched(self.chat_id)
        return added

    def message(self, message_id: str) -> Message:
        """A message of this chat that a run's record names; InvalidInput (exit 5) when the
        chat's message index does not list it (the index was deleted or cut short)."""
        found = self.by_id.get(message_id)
        if found is None:
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
        self.store.write(MESSAGE, message["id"], dict(message))
        touched(self.chat_id)
