"""The string enumerations of both dialects, spelled as on the wire (spec/WIRE.md).

Kept apart from the pydantic models so that code on a command's fast path (reading and resolving
interrupts) can name states without importing pydantic.
"""

from __future__ import annotations

from enum import StrEnum

ATTENTION_HOLD = "attention_hold"
"""The state of a Nexus execution whose hook task failed: it waits, it never ends silently."""


class Dialect(StrEnum):
    """Which hook system a declaration is written for."""

    PLATFORM = "platform"
    NEXUS = "nexus"  # the name, as scenarios and records spell it


class HookEvent(StrEnum):
    """Lifecycle events an agent version's hooks can listen for."""

    START = "agent.start"
    TURN_START = "agent.turn_start"
    TOOL_CALL = "agent.tool_call"
    TOOL_RESULT = "agent.tool_result"
    TURN_COMPLETE = "agent.turn_complete"
    ERROR = "agent.error"
    COMPLETE = "agent.complete"
    IDLE = "agent.idle"
    PRE_COMPACT = "agent.pre_compact"
    POST_COMPACT = "agent.post_compact"


class HookHandlerType(StrEnum):
    """How a hook's handler is invoked."""

    WEBHOOK = "webhook"
    TASK = "task"
    GATE = "gate"
    BUILTIN = "builtin"


class HookDecision(StrEnum):
    """What a handler may decide."""

    ALLOW = "allow"
    DENY = "deny"
    STOP = "stop"
    SUSPEND = "suspend"


class InterruptStatus(StrEnum):
    """Life-cycle state of an interrupt."""

    PENDING = "pending"
    RESOLVED = "resolved"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class InterruptResolution(StrEnum):
    """How an interrupt was (or will by default be) settled."""

    ALLOW = "allow"
    DENY = "deny"


class InterruptReason(StrEnum):
    """Why a run was interrupted."""

    WAIT = "wait"
    TOOL_APPROVAL = "tool_approval"
    CLIENT_TOOL = "client_tool"
    WIDGET = "widget"
    AUTH = "auth"
    CONFIRMATION = "confirmation"
    HOOK_GATE = "hook_gate"


class InterruptResourceType(StrEnum):
    """What an interrupt guards."""

    TURN = "turn"
    TOOL_INVOCATION = "tool_invocation"
    HOOK_EVENT = "hook_event"


class AgentRunState(StrEnum):
    """State of one agent run."""

    SUBMITTED = "submitted"
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    AUTH_REQUIRED = "auth_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    REJECTED = "rejected"


class ChatStatus(StrEnum):
    """State of a chat."""

    BUSY = "busy"
    IDLE = "idle"
    AWAITING_INPUT = "awaiting_input"
    WAITING = "waiting"
    COMPLETED = "completed"


class ToolInvocationStatus(StrEnum):
    """State of one tool invocation."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    AWAITING_INPUT = "awaiting_input"
    AWAITING_APPROVAL = "awaiting_approval"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class MessageStatus(StrEnum):
    """State of one chat message."""

    PENDING = "pending"
    QUEUED = "queued"
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"
