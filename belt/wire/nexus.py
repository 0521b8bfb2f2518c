"""Wire models of the Nexus/rho dialect: ``lifecycle_hooks``, hook task input and decision."""

from __future__ import annotations

from pydantic import Field

from belt.wire.enums import NexusEvent as NexusEvent  # re-exported
from belt.wire.platform import Strict

TIMEOUT_MS_MAX = 300_000
MAX_CONTINUATIONS_MAX = 20
FEEDBACK_MAX_BYTES = 16 * 1024


class NexusHook(Strict):
    """One declared boundary: the executor tool to run and its deadline."""

    tool: str
    timeout_ms: int = Field(ge=1, le=TIMEOUT_MS_MAX)
    max_continuations: int | None = Field(default=None, ge=0, le=MAX_CONTINUATIONS_MAX)


class LifecycleHooks(Strict):
    """The ``lifecycle_hooks`` object of a Nexus configuration declaration."""

    turn_start: NexusHook | None = None
    pre_compact: NexusHook | None = None
    post_compact: NexusHook | None = None
    stop: NexusHook | None = None

    def declared(self) -> dict[NexusEvent, NexusHook]:
        """The declared boundaries, in spec order."""
        return {
            event: hook for event in NexusEvent if (hook := getattr(self, event.value)) is not None
        }

    def to_wire(self) -> dict[str, object]:
        """The object as written on the wire, without undeclared events."""
        return self.model_dump(mode="json", exclude_none=True)


class HookTaskInput(Strict):
    """What an executor hook tool receives as its task input."""

    event: NexusEvent
    task_key: str
    run_public_id: str
    conversation_public_id: str | None
    output_preview: str | None = None
    output_size_bytes: int | None = None
    compaction_trigger: str | None = None
    overshoot_bytes: int | None = None
    overshoot_tokens: int | None = None

    def to_wire(self) -> dict[str, object]:
        """The input as sent, keeping ``conversation_public_id`` even when null."""
        kept = self.model_dump(mode="json", exclude_none=True)
        return {**kept, "conversation_public_id": self.conversation_public_id}


class HookDecisionResult(Strict):
    """A validated ``structured_content`` decision of a hook task."""

    continue_: bool = Field(alias="continue")
    feedback: str | None = None
