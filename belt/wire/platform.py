"""Wire models of the inference.sh dialect, spelled exactly as the SDKs spell them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from belt.wire.enums import HookDecision as HookDecision  # re-exported, as the next three
from belt.wire.enums import HookEvent, InterruptResourceType, InterruptStatus
from belt.wire.enums import HookHandlerType as HookHandlerType
from belt.wire.enums import InterruptReason as InterruptReason
from belt.wire.enums import InterruptResolution as InterruptResolution


class Strict(BaseModel):
    """A wire model that refuses unknown keys, built on first use (start-up pays for no other)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class _Open(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, defer_build=True)


WEBHOOK_TIMEOUT_DEFAULT = 30
WEBHOOK_TIMEOUT_MAX = 300
GATE_TIMEOUT_DEFAULT = 300
GATE_TIMEOUT_MAX = 86400


def timeout_bounds(handler_type: HookHandlerType | str) -> tuple[int, int]:
    """Return (default, maximum) timeout in seconds for a handler type."""
    if handler_type == HookHandlerType.GATE:
        return GATE_TIMEOUT_DEFAULT, GATE_TIMEOUT_MAX
    return WEBHOOK_TIMEOUT_DEFAULT, WEBHOOK_TIMEOUT_MAX


class LifecycleHookConfig(Strict):
    """One entry of an agent version's ``hooks`` array (validated by ``belt.wire.validate``)."""

    event: HookEvent
    type: HookHandlerType
    handler: str | None = None
    async_: bool = Field(default=False, alias="async")
    timeout: int | None = None
    default_resolution: InterruptResolution | None = None

    @property
    def runs_async(self) -> bool:
        """True when the hook runs without blocking (a gate's ``async`` is ignored: the spec)."""
        return self.async_ and self.type != HookHandlerType.GATE

    def effective_timeout(self) -> int:
        """The timeout in seconds, with the handler type's default filled in."""
        return self.timeout if self.timeout is not None else timeout_bounds(self.type)[0]

    def effective_default_resolution(self) -> InterruptResolution:
        """A gate's resolution on expiry (``allow`` unless declared)."""
        return self.default_resolution or InterruptResolution.ALLOW

    def to_wire(self) -> dict[str, object]:
        """The declaration as it is written on the wire, without unset keys."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)


class LifecycleHookPayload(_Open):
    """The envelope every hook handler receives."""

    event: HookEvent
    timestamp: str
    agent_id: str
    chat_id: str
    run_id: str
    turn_count: int = Field(ge=0)
    data: dict[str, Any] | None = None


class ContextInjection(Strict):
    """Ephemeral context a handler asks to put in front of the model."""

    content: str
    role: str | None = None
    ttl_turns: int | None = Field(default=None, ge=0)
    dedup_key: str | None = None
    items: list[str] | None = None


class LifecycleHookResponse(Strict):
    """What a webhook may return; every field optional, empty 2xx = allow."""

    decision: HookDecision | None = None
    reason: str | None = None
    inject: ContextInjection | None = None
    system: str | None = None
    override: Any = None

    def effective_decision(self) -> HookDecision:
        """The decision, ``allow`` when none was given."""
        return self.decision or HookDecision.ALLOW

    @property
    def injected(self) -> bool:
        """True when the response carries ``inject`` or ``system`` content."""
        return self.inject is not None or bool(self.system)

    @property
    def injection_size(self) -> int:
        """The UTF-8 bytes of its ``inject`` content and ``system`` (a hook span's count)."""
        return len(((self.inject.content if self.inject else "") + (self.system or "")).encode())


class InterruptDTO(_Open):
    """An interrupt as the platform API returns it."""

    id: str
    short_id: str | None = None
    created_at: str
    updated_at: str
    run_id: str | None = None
    chat_id: str | None = None
    reason: InterruptReason | str
    source: str | None = None
    resource_id: str | None = None
    resource_type: InterruptResourceType | str | None = None
    status: InterruptStatus | str
    resolution: InterruptResolution | str | None = None
    resolved_at: str | None = None
    resolved_data: Any = None
    expires_at: str | None = None
    meta: Any = None
