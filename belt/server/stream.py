"""``GET /chats/{id}/stream``: a chat's events as NDJSON, as the official SDKs read them.

``chat_messages`` (with ``delta`` events before an assistant message of the current run),
``chats`` (without its messages) and heartbeats: first the chat as it is, then what changes.
All is read from the store, so any ``--workers`` process serves it; a write in this process
wakes it (``belt.records.changes``), another's shows in a stamp looked at every ``FALLBACK`` s.
It ends once the chat, seen busy, is idle again (or a run begun since has ended).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, cast

from starlette.concurrency import run_in_threadpool

from belt.errors import BeltError
from belt.records.changes import watching
from belt.records.chats import CHAT
from belt.records.messages import MESSAGE, MESSAGES, Message, expanded, settle_injections
from belt.records.views import chat_dto, chat_state, public_message

if TYPE_CHECKING:
    from belt.store import Store

FALLBACK = 1.0
"""Seconds between two looks at the chat's stamp when no write in this process woke the stream."""
WHOLE_LOOK = 30.0
"""Seconds after which a fallback look reads the chat even though its stamp did not move."""
HEARTBEAT = 15.0
"""Seconds of silence after which a heartbeat line is sent (the SDKs give up after 60)."""
DELTA_CHARS = 4  # characters of text per token delta


def line(document: dict[str, Any]) -> bytes:
    """One NDJSON line."""
    return (json.dumps(document, ensure_ascii=False) + "\n").encode("utf-8")


def deltas(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The token deltas of an assistant message: its text, then its tool calls (by index)."""
    text = "".join(
        str(block.get("text") or "")
        for block in message.get("content") or []
        if isinstance(block, dict) and block.get("type") == "text"
    )
    parts: list[dict[str, Any]] = [
        {"response": text[i : i + DELTA_CHARS]} for i in range(0, len(text), DELTA_CHARS)
    ]
    calls = [
        {
            "index": index,
            "id": invocation.get("tool_invocation_id"),
            "type": "function",
            "function": {
                "name": (invocation.get("function") or {}).get("name", ""),
                "arguments": json.dumps(
                    (invocation.get("function") or {}).get("arguments") or {}, ensure_ascii=False
                ),
            },
        }
        for index, invocation in enumerate(message.get("tool_invocations") or [])
    ]
    if calls:
        parts.append({"tool_calls": calls})
    return [
        {"event": "delta", "data": {"delta": part, "seq": seq, "resource_id": message["id"]}}
        for seq, part in enumerate(parts, start=1)
    ]


class ChatWatch:
    """What one stream has sent of a chat, and what changed in the store since."""

    def __init__(self, store: Store, chat_id: str) -> None:
        self.store = store
        self.chat_id = chat_id
        self.sent: dict[str, str] = {}
        self.index_size = -1
        self.chat_key: tuple[Any, ...] | None = None
        self.open_from = 0  # where in the message index messages may still change
        self.replay_run: str | None = None
        self.saw_busy = False
        self.runs_at_connect: int | None = None
        self.first = True

    def stamp(self) -> tuple[int, ...] | None:
        """A cheap sign that another process wrote the chat (None: no file to look at)."""
        try:
            info = os.stat(self.store.path(CHAT, self.chat_id))
            size = self.store.index_size(MESSAGES, self.chat_id)
        except (OSError, BeltError):
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size, size)

    def look(self) -> tuple[list[dict[str, Any]], bool]:
        """The events to send now, and whether the stream is over."""
        # The chat and its run first: its messages, read after, hold every one written before.
        state = chat_state(self.store, self.chat_id)
        chat, run = state
        size = self.store.index_size(MESSAGES, self.chat_id)
        active = chat.get("active_run_id")
        key = (chat.get("updated_at"), chat.get("status"), active)
        if not self.first and size == self.index_size and key == self.chat_key:
            return [], False
        ids = self.store.members(MESSAGES, self.chat_id)
        runs = int(chat.get("run_count") or 0)
        if self.first:
            self.replay_run = active or self.last_run(ids)
            self.runs_at_connect = runs
        events: list[dict[str, Any]] = []
        first_open = len(ids)
        window: list[tuple[int, Message]] = []
        for position in range(self.open_from, len(ids)):
            if (stored := self.store.get(MESSAGE, ids[position])) is None:
                continue  # linked by a writer that has not written it yet
            window += ((position, m) for m in expanded(self.store, cast(Message, stored)))
        settle_injections([m for _, m in window], int(chat.get("turn_count", 0)))
        for position, message in window:
            run_id = message.get("agent_run_id")
            if active is not None and run_id == active:
                first_open = min(first_open, position)
            public = public_message(message)
            fingerprint = hashlib.sha256(
                json.dumps(public, sort_keys=True, ensure_ascii=False).encode("utf-8")
            ).hexdigest()
            if self.sent.get(message["id"]) == fingerprint:
                continue
            new = message["id"] not in self.sent
            if (
                new
                and message["role"] == "assistant"
                and (not self.first or run_id == self.replay_run)
            ):
                events += deltas(public)
            events.append({"event": "chat_messages", "data": public})
            self.sent[message["id"]] = fingerprint
        self.open_from = first_open if active is not None else len(ids)
        self.index_size, self.chat_key = size, key
        runs_now = [run] if run is not None else []
        dto = chat_dto(
            self.store, self.chat_id, runs=runs_now, public=True, with_messages=False, state=state
        )
        events.append({"event": "chats", "data": dto})
        self.first = False
        # A run that began and ended between two looks shows in the run count.
        if active is not None or runs != self.runs_at_connect:
            self.saw_busy = True
        return events, active is None and self.saw_busy

    def last_run(self, ids: list[str]) -> str | None:
        """The run of the chat's last message that has one."""
        for message_id in reversed(ids):
            message = self.store.get(MESSAGE, message_id)
            if message is not None and message.get("agent_run_id"):
                return str(message["agent_run_id"])
        return None


async def chat_events(
    store: Store, chat_id: str, stopping: Callable[[], bool] = lambda: False
) -> AsyncIterator[bytes]:
    """The NDJSON lines of a chat's stream, until its run ends or the server stops."""
    with watching(chat_id) as wake:
        watch = ChatWatch(store, chat_id)
        loop = asyncio.get_running_loop()
        last_sent = last_look = last_check = loop.time()
        stamp: tuple[int, ...] | None = None
        look = True
        while not stopping():
            if look:
                stamp = watch.stamp()  # before the look: a write after it changes the stamp
                try:
                    events, over = await run_in_threadpool(watch.look)
                except BeltError as exc:
                    yield line({"event": "error", "data": {"message": exc.message}})
                    return
                last_look = last_check = loop.time()
                for event in events:
                    yield line(event)
                if events:
                    last_sent = loop.time()
                if over:
                    return
            if loop.time() - last_sent >= HEARTBEAT:
                yield line({"type": "heartbeat"})
                last_sent = loop.time()
            # Woken by a write here, or at the fallback rate: a whole look if the stamp moved.
            due = min(last_check + FALLBACK, last_sent + HEARTBEAT) - loop.time()
            look = await wake.wait_async(max(0.0, due))
            if not look and loop.time() - last_check >= FALLBACK:
                last_check = loop.time()
                look = (
                    stamp is None or watch.stamp() != stamp or last_check - last_look >= WHOLE_LOOK
                )
