"""The context ledger: what the next model request sees, kept incrementally for both dialects.

Every message belongs to one *scope*: the conversation (``"chat"``), or a Nexus standalone
execution. The ledger adds a message's size when it is recorded and takes it away when it leaves,
so asking for the context never rescans the chat.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from belt.records.messages import Message

CONTEXT_ROLES = frozenset({"user", "assistant", "tool", "compaction", "injection", "feedback"})
CHAT_SCOPE = "chat"


def scope_of(message: Message) -> str:
    """The scope a message counts in: its standalone execution, or the conversation."""
    sim = message.get("sim") or {}
    return f"standalone:{sim.get('execution')}" if sim.get("standalone") else CHAT_SCOPE


def in_context(message: Message) -> bool:
    """True while a message is part of what its scope's next model request sees."""
    sim = message.get("sim") or {}
    if message["role"] not in CONTEXT_ROLES or sim.get("retired") or "replaced_by" in sim:
        return False
    return message["role"] != "injection" or bool(sim.get("active"))


@dataclass
class Context:
    """The context of one scope: its size and its messages, in the order they were added."""

    tokens: int = 0
    bytes: int = 0
    messages: dict[str, Message] = field(default_factory=dict)
    injections: dict[str, Message] = field(default_factory=dict)


class Ledger:
    """Keeps each scope's context up to date as messages are added and leave."""

    def __init__(self, messages: list[Message] | None = None) -> None:
        self.scopes: defaultdict[str, Context] = defaultdict(Context)
        for message in messages or []:
            self.add(message)

    def context(self, scope: str = CHAT_SCOPE) -> Context:
        """The context of ``scope`` (empty when nothing was recorded there)."""
        return self.scopes[scope]

    def add(self, message: Message) -> None:
        """Count a newly recorded message."""
        if not in_context(message):
            return
        context = self.context(scope_of(message))
        sim = message["sim"]
        context.tokens += int(sim.get("tokens", 0))
        context.bytes += int(sim.get("bytes", 0))
        context.messages[message["id"]] = message
        if message["role"] == "injection":
            context.injections[message["id"]] = message

    def leave(self, message: Message, **flags: Any) -> None:
        """Take a message out of the context (retired, replaced, or an injection that ended)."""
        context = self.context(scope_of(message))
        if context.messages.pop(message["id"], None) is not None:
            context.tokens -= int(message["sim"].get("tokens", 0))
            context.bytes -= int(message["sim"].get("bytes", 0))
            context.injections.pop(message["id"], None)
        message["sim"].update(flags)

    def retirable(self, scope: str, keep: str | None) -> list[Message]:
        """What a compaction retires: the context but its injections and the message ``keep``."""
        return [
            m
            for m in self.context(scope).messages.values()
            if m["role"] != "injection" and m["id"] != keep
        ]

    def has_retirable(self, scope: str, keep: str | None) -> bool:
        """True when a compaction would retire something (without listing it)."""
        context = self.context(scope)
        kept = 1 if keep in context.messages and keep not in context.injections else 0
        return len(context.messages) - len(context.injections) - kept > 0
