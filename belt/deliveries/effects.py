"""What the platform does with a hook's decision, and what a hook run leaves on the record.

Shared by the simulator and ``belt trigger``, so both say the same thing.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping
from contextlib import suppress
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from belt.wire.platform import HookDecision, HookHandlerType
from belt.wire.validate import IN_PROCESS_PREFIX, POLICY_PREFIX

TURN_GATES = ("agent.start", "agent.turn_start")
DEFAULT_TOOL_DENY_REASON = "blocked by hook"


class Outcome(StrEnum):
    """The effect of one decision on the event it was given for."""

    CONTINUE = "continue"
    BLOCK_TURN = "block_turn"
    SKIP_TOOL = "skip_tool"
    SKIP_COMPACTION = "skip_compaction"
    SUSPEND = "suspend"
    IGNORED = "ignored"


def outcome(event: str, decision: HookDecision | str | None) -> Outcome:
    """How the platform applies ``decision`` on ``event``."""
    chosen = HookDecision(decision) if decision else HookDecision.ALLOW
    if chosen == HookDecision.ALLOW:
        return Outcome.CONTINUE
    halts = chosen in (HookDecision.DENY, HookDecision.STOP)
    if event in TURN_GATES and halts:
        return Outcome.BLOCK_TURN
    if event == "agent.tool_call" and chosen == HookDecision.DENY:
        return Outcome.SKIP_TOOL
    return Outcome.SKIP_COMPACTION if event == "agent.pre_compact" and halts else Outcome.IGNORED


def takes_effect(decision: HookDecision | str | None) -> bool:
    """True for the decisions that end an event's hook chain (deny, stop, suspend)."""
    return decision in (HookDecision.DENY, HookDecision.STOP, HookDecision.SUSPEND)


def effect_text(event: str, decision: HookDecision | str | None, reason: str | None) -> str:
    """One sentence saying what the platform would do with this decision on this event."""
    chosen = HookDecision(decision) if decision else HookDecision.ALLOW
    result = outcome(event, chosen)
    if result == Outcome.CONTINUE:
        if event in TURN_GATES or event in ("agent.tool_call", "agent.pre_compact"):
            return f"{event}: allow → the agent continues"
        return f"{event}: observe only, the agent continues"
    if result == Outcome.BLOCK_TURN:
        failure = f"turn blocked: {reason or ''}".rstrip()
        return f"{event}: {chosen} → the turn is blocked and the run fails: {failure}"
    if result == Outcome.SKIP_TOOL:
        why = reason or DEFAULT_TOOL_DENY_REASON
        return f"{event}: deny → the tool is not called and completes as failed: {why}"
    if result == Outcome.SKIP_COMPACTION:
        return f"{event}: {chosen} → this compaction is skipped"
    if event == "agent.tool_call" and chosen == HookDecision.STOP:
        return f"{event}: stop does not block a tool, the decision is ignored (use deny)"
    if chosen == HookDecision.SUSPEND:
        return f"{event}: suspend is for gate hooks only, the decision is ignored"
    return f"{event}: observe only, the decision is ignored"


def handler_label(handler_type: HookHandlerType | str, handler: str | None) -> str:
    """How a handler is named on the record: a webhook by its host only, others as written."""
    if handler_type == HookHandlerType.GATE:
        return "gate"
    if handler_type == HookHandlerType.WEBHOOK and handler:
        return handler if is_in_process(handler) else url_host(handler)
    return handler or str(handler_type)


def is_in_process(handler: str) -> bool:
    """True for a ``py:`` or ``policy:`` handler, which belt calls instead of POSTing to."""
    return handler.startswith((IN_PROCESS_PREFIX, POLICY_PREFIX))


@functools.lru_cache(maxsize=256)
def url_host(url: str, *, every_port: bool = False) -> str:
    """The host (and port when not the default, or ``every_port``) of a URL; ``?`` if unreadable."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = parts.port
    except ValueError:
        return "?"
    if ":" in host:
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    return f"{host}:{port}" if port and (every_port or port != default_port) else host


@functools.lru_cache(maxsize=256)
def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and the loopback addresses, as written in a URL."""
    name = host.strip("[]").lower()
    with suppress(ValueError):
        return ipaddress.ip_address(name).is_loopback
    return name == "localhost"


def leaves_row(*, decision: HookDecision | str | None, injected: bool, error: str | None) -> bool:
    """True when a hook run leaves a transcript row: it injected, did not allow, or failed."""
    return bool(injected or error or (decision and decision != HookDecision.ALLOW))


def chat_hook_event(
    *,
    event: str,
    handler_type: HookHandlerType | str,
    handler: str | None,
    decision: HookDecision | str | None = None,
    reason: str | None = None,
    injected: bool = False,
    error: str | None = None,
    duration_ms: int = 0,
) -> dict[str, object]:
    """The ``event.hook`` object (ChatHookEvent) of a transcript row."""
    row: dict[str, object] = {
        "event": event,
        "handler_type": str(handler_type),
        "handler": handler_label(handler_type, handler),
        "injected": injected,
        "duration_ms": duration_ms,
    }
    given = {"decision": decision, "reason": reason, "error": error}
    row.update((key, str(value)) for key, value in given.items() if value)
    return row


def transcript_content(hook: Mapping[str, object]) -> dict[str, Any]:
    """The content block of a hook's transcript row (role ``event``)."""
    return {
        "type": "event",
        "text": f"hook {hook['event']}: {hook['handler']}",
        "event": {"type": "hook", "hook": hook},
    }
