"""The event and builtin catalogues of the inference.sh dialect, as data.

Validation, ``belt hooks events|builtins``, ``GET /agents/hook-events``, ``belt trigger`` and the
simulator all read these tables; nothing else spells out what an event is.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EventInfo:
    """One lifecycle event: what it is, when it fires, its gating and its ``data`` fields."""

    event: str
    description: str
    fires: str
    can_gate: bool = False
    effect: str = "observe only"
    data_fields: dict[str, str] = field(default_factory=dict)
    emitted: bool = True
    sample_data: dict[str, object] = field(default_factory=dict)

    def definition(self) -> dict[str, object]:
        """This event as a HookEventDefinition (``GET /agents/hook-events``)."""
        return {"event": self.event, "description": self.description, "can_gate": self.can_gate}


@dataclass(frozen=True)
class BuiltinInfo:
    """One builtin handler and the events it may be attached to."""

    name: str
    description: str
    events: tuple[str, ...]

    def definition(self) -> dict[str, object]:
        """This builtin as a BuiltinHookDefinition."""
        return {"name": self.name, "description": self.description, "events": list(self.events)}


EVENTS: dict[str, EventInfo] = {
    info.event: info
    for info in (
        EventInfo(
            "agent.start",
            "The agent starts working on a chat",
            "First turn of a chat (turn count 0)",
            True,
            "blocks the turn on deny or stop",
        ),
        EventInfo(
            "agent.turn_start",
            "A model turn is about to begin",
            "Before each LLM turn",
            True,
            "blocks the turn on deny or stop",
        ),
        EventInfo(
            "agent.tool_call",
            "A tool is about to execute",
            "Before a tool executes",
            True,
            "blocks that tool on deny",
            data_fields={"tool": "string", "arguments": "object"},
            sample_data={"tool": "delete_file", "arguments": {"path": "/tmp/old.txt"}},
        ),
        EventInfo(
            "agent.tool_result",
            "An async app tool completed",
            "After an async app tool completes",
            data_fields={"tool": "string", "status": "string", "result": "string"},
            sample_data={"tool": "render_video", "status": "completed", "result": "video.mp4"},
        ),
        EventInfo(
            "agent.turn_complete",
            "The assistant message of a turn is complete",
            "After the assistant message, before tool dispatch",
        ),
        EventInfo(
            "agent.pre_compact",
            "Context auto-compaction is about to run",
            "Before context auto-compaction, once it is decided",
            effect="skips this compaction on deny or stop",
        ),
        EventInfo(
            "agent.post_compact", "Context auto-compaction ran", "After context auto-compaction"
        ),
        EventInfo(
            "agent.error",
            "The agent run failed",
            "When the agent run fails",
            data_fields={"error": "string"},
            sample_data={"error": "model overloaded"},
        ),
        EventInfo("agent.complete", "The active run finished", "When the active run finishes"),
        EventInfo(
            "agent.idle",
            "The agent is idle (defined in the API, not emitted yet)",
            "Never: defined but not emitted",
            effect="never fires",
            emitted=False,
        ),
    )
}

GATEABLE_EVENTS: tuple[str, ...] = tuple(e for e, info in EVENTS.items() if info.can_gate)

BUILTINS: dict[str, BuiltinInfo] = {
    info.name: info
    for info in (
        BuiltinInfo(
            "belt:suggest",
            "Searches the owner's skills, knowledge and apps for the turn's prompt and injects "
            "up to 3 matches for one turn",
            ("agent.turn_start",),
        ),
        BuiltinInfo(
            "belt:extract",
            "Reviews the conversation for reusable knowledge and saves it to the owner's registry",
            ("agent.complete", "agent.pre_compact"),
        ),
    )
}
