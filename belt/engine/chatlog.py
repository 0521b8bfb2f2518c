"""The transcript of a simulation's chat as its runs write it: messages, the context ledger,
compaction, tool calls, and what a run taken over from a killed process had already written."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, NotRequired, TypedDict

from belt.engine.execution import Execution
from belt.engine.ledger import Ledger
from belt.engine.scenario import ToolCallSpec, estimate_tokens, utf8_size
from belt.records.ids import new_id
from belt.records.messages import Message, NewMessage, Recorder
from belt.wire.enums import MessageStatus, ToolInvocationStatus

SETTLED_TOOL_STATES = frozenset({"completed", "failed", "cancelled"})  # ToolInvocationStatus


class ToolInvocation(TypedDict):
    """A ToolInvocationDTO of an assistant message (``tool_invocations``)."""

    id: str
    chat_message_id: str | None
    tool_invocation_id: str
    type: str
    function: dict[str, object]
    status: str
    result: str | None


class Overshoot(TypedDict):
    """Why a context is compacted: its trigger and how far above its threshold it is."""

    compaction_trigger: str
    overshoot_bytes: int
    overshoot_tokens: NotRequired[int]


def invocations(calls: list[ToolCallSpec], message_id: str | None) -> list[ToolInvocation]:
    """Pending ToolInvocationDTOs for the tool calls of one assistant message."""
    return [
        {
            "id": new_id("ti"),
            "chat_message_id": message_id,
            "tool_invocation_id": new_id("call"),
            "type": "client" if call.client else "app",
            "function": {"name": call.name, "arguments": call.arguments},
            "status": ToolInvocationStatus.PENDING.value,
            "result": None,
        }
        for call in calls
    ]


class Transcript:
    """Writes a simulation's chat: each message is recorded and counted in the context."""

    def __init__(self, recorder: Recorder, agent: Mapping[str, Any]) -> None:
        self.recorder = recorder
        self.ledger = Ledger(recorder.messages)
        self.agent = agent  # the scenario's agent: its context window and where it compacts

    def add_message(self, execution: Execution, **options: Any) -> Message:
        """Record a message of ``execution`` (``new_message`` takes the ``options``)."""
        return self.add_messages([self.new_message(execution, **options)])[0]

    def add_event(self, execution: Execution, text: str, **event: Any) -> Message:
        """Record an event row of ``execution``: its ``text`` and its ``event`` fields."""
        return self.add_message(
            execution, role="event", content=[{"type": "event", "text": text, "event": event}]
        )

    def new_message(
        self,
        execution: Execution,
        *,
        role: str,
        content: list[dict[str, object]],
        text: str | None = None,
        tokens: int | None = None,
        message_id: str | None = None,
        fields: Mapping[str, object] | None = None,
        status: str = MessageStatus.READY,
        row: NewMessage | None = None,
        **sim: Any,
    ) -> NewMessage:
        """A message of ``execution`` to record; ``text`` sizes it in tokens and bytes."""
        if text is not None:
            sim["tokens"] = estimate_tokens(text) if tokens is None else tokens
            sim["bytes"] = utf8_size(text)
        return NewMessage(
            role=role,
            run_id=execution.run_id,
            content=content,
            status=status,
            sim={**execution.tags, **sim},
            message_id=message_id,
            fields=fields or {},
            row=row,
        )

    def add_messages(self, new: Sequence[NewMessage]) -> list[Message]:
        """Record messages in order, in one append to the chat (``Recorder.add_messages``)."""
        messages = self.recorder.add_messages(new)
        for message in messages:
            self.ledger.add(message)
        return messages

    def text_message(
        self, execution: Execution, role: str, text: str, **options: Any
    ) -> NewMessage:
        """A message of ``execution`` whose content is one text part, to record."""
        return self.new_message(
            execution, role=role, content=[{"type": "text", "text": text}], text=text, **options
        )

    def add_text(self, execution: Execution, role: str, text: str, **options: Any) -> Message:
        """Record a message of ``execution`` whose content is one text part."""
        return self.add_messages([self.text_message(execution, role, text, **options)])[0]

    def leave_context(self, message: Message, **flags: Any) -> None:
        """Take a message out of the context (and mark why); save it."""
        self.ledger.leave(message, **flags)
        self.recorder.save_message(message)

    def over_limit(self, execution: Execution) -> Overshoot | None:
        """The trigger and overshoot when the context is above its compaction threshold and a
        compaction would retire something."""
        compact_at = float(self.agent.get("compact_at", 0.8))
        context = self.ledger.context(execution.scope)
        token_limit = int(int(self.agent.get("context_window", 128_000)) * compact_at)
        byte_window = self.agent.get("context_bytes")
        byte_limit = int(int(byte_window) * compact_at) if byte_window else None
        over_tokens = context.tokens > token_limit
        over_bytes = byte_limit is not None and context.bytes > byte_limit
        if not (over_tokens or over_bytes) or not self.ledger.has_retirable(
            execution.scope, execution.input_message_id
        ):
            return None
        extra: Overshoot = {
            "compaction_trigger": "token_limit" if over_tokens else "byte_limit",
            "overshoot_bytes": max(0, context.bytes - byte_limit) if byte_limit else 0,
        }
        if over_tokens:
            extra["overshoot_tokens"] = context.tokens - token_limit
        return extra

    def compact(self, execution: Execution) -> None:
        """Retire the context but the run's input, and put a compaction marker in its place."""
        if not (retire := self.ledger.retirable(execution.scope, execution.input_message_id)):
            return
        tokens = sum(int(message["sim"].get("tokens", 0)) for message in retire)
        size = sum(int(message["sim"].get("bytes", 0)) for message in retire)
        for message in retire:
            self.leave_context(message, retired=True)
        summary = f"Summary of {len(retire)} earlier messages ({tokens} tokens, {size} bytes)."
        self.add_text(
            execution,
            "compaction",
            summary,
            fields={"compaction_meta": {"compacted_up_to_order": max(m["order"] for m in retire)}},
            retired_tokens=tokens,
            retired_bytes=size,
        )

    def recovered(self, execution: Execution, role: str, **match: Any) -> Message | None:
        """On a run taken over from a killed process: the message its step already wrote."""
        if not execution.recovering:
            return None
        return next(
            (
                message
                for message in reversed(self.recorder.messages)
                if message.get("agent_run_id") == execution.run_id
                and message["role"] == role
                and all((message.get("sim") or {}).get(k) == v for k, v in match.items())
            ),
            None,
        )

    def reconcile_tools(self, execution: Execution, message: Message) -> None:
        """On a run taken over: settle the invocations whose result is written, once."""
        if not execution.recovering:
            return
        results = {
            m.get("tool_call_id"): m
            for m in self.recorder.messages
            if m["role"] == "tool" and m.get("agent_run_id") == execution.run_id
        }
        for invocation in message.get("tool_invocations") or []:
            found = results.get(invocation["tool_invocation_id"])
            if found is None or invocation["status"] in SETTLED_TOOL_STATES:
                continue
            ready = found.get("status") == MessageStatus.READY
            invocation["status"] = (
                ToolInvocationStatus.COMPLETED.value if ready else ToolInvocationStatus.FAILED.value
            )
            invocation["result"] = " ".join(c.get("text") or "" for c in found.get("content") or [])

    def add_answer(
        self,
        execution: Execution,
        *,
        say: str | None,
        tokens: int | None,
        calls: list[ToolCallSpec],
        message_id: str | None = None,
        **sim: Any,
    ) -> Message:
        """The model's output for one request: its text and its pending tool invocations."""
        context = self.ledger.context(execution.scope)
        text = say or ""
        own = estimate_tokens(text) if tokens is None else tokens
        message_id = message_id or new_id("msg")
        return self.add_message(
            execution,
            role="assistant",
            message_id=message_id,
            content=[{"type": "text", "text": text}] if text else [],
            text=text,
            tokens=own,
            fields={"tool_invocations": invocations(calls, message_id)},
            context_tokens=context.tokens + own,
            context_bytes=context.bytes + utf8_size(text),
            **sim,
        )

    def finish_tool(
        self,
        execution: Execution,
        invocation: MutableMapping[str, object],
        status: str,
        result: str,
    ) -> None:
        """Complete a tool invocation: its result is a tool message (the assistant message holding
        it is saved once all its calls are settled, not after each: a turn's cost would grow with
        the square of its calls)."""
        invocation["status"] = status
        invocation["result"] = result
        ready = status == ToolInvocationStatus.COMPLETED
        fields = {"tool_call_id": invocation["tool_invocation_id"]}
        message_status = MessageStatus.READY if ready else MessageStatus.FAILED
        self.add_text(execution, "tool", result, fields=fields, status=message_status)

    def unused_reply(self, state: Mapping[str, object]) -> str | None:
        """The id a run set aside for its reply, while no message of the chat has it."""
        reply = state.get("reply")
        return reply if isinstance(reply, str) and reply not in self.recorder.by_id else None
