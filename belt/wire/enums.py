"""The string enumerations of both dialects, spelled as on the wire (spec/WIRE.md).

Kept apart from the pydantic models so that code on a command's fast path (reading and resolving
interrupts) can name states without importing pydantic. StrEnum's functional form gives each
member its name in lower case as its value (the wire's spelling), the events aside.
"""

from __future__ import annotations

from enum import StrEnum

ATTENTION_HOLD = "attention_hold"  # a Nexus execution whose hook task failed waits, never ends

Dialect = StrEnum("Dialect", "PLATFORM NEXUS")  # which hook system a declaration is written for


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


# The four execution boundaries a Nexus hook can run at.
NexusEvent = StrEnum("NexusEvent", "TURN_START PRE_COMPACT POST_COMPACT STOP")
HookHandlerType = StrEnum("HookHandlerType", "WEBHOOK TASK GATE BUILTIN")
HookDecision = StrEnum("HookDecision", "ALLOW DENY STOP SUSPEND")
InterruptStatus = StrEnum("InterruptStatus", "PENDING RESOLVED EXPIRED CANCELLED")
InterruptResolution = StrEnum("InterruptResolution", "ALLOW DENY")
InterruptReason = StrEnum(
    "InterruptReason", "WAIT TOOL_APPROVAL CLIENT_TOOL WIDGET AUTH CONFIRMATION HOOK_GATE"
)
InterruptResourceType = StrEnum("InterruptResourceType", "TURN TOOL_INVOCATION HOOK_EVENT")
AgentRunState = StrEnum(
    "AgentRunState",
    "SUBMITTED WORKING INPUT_REQUIRED AUTH_REQUIRED COMPLETED FAILED CANCELED REJECTED",
)
ChatStatus = StrEnum("ChatStatus", "BUSY IDLE AWAITING_INPUT WAITING COMPLETED")
ToolInvocationStatus = StrEnum(
    "ToolInvocationStatus",
    "PENDING IN_PROGRESS AWAITING_INPUT AWAITING_APPROVAL WAITING COMPLETED FAILED CANCELLED",
)
MessageStatus = StrEnum("MessageStatus", "PENDING QUEUED READY FAILED CANCELLED")
