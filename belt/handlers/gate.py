"""Gate handlers: open an interrupt that holds the run until someone resolves it."""

from __future__ import annotations

from collections.abc import Mapping

from belt.records.interrupts import create_interrupt
from belt.store import Store
from belt.wire.dto import InterruptJSON
from belt.wire.platform import LifecycleHookConfig


def open_gate(
    store: Store,
    *,
    hook: LifecycleHookConfig,
    payload: Mapping[str, object],
    resource_id: str | None,
) -> InterruptJSON:
    """Create the ``hook_gate`` interrupt for ``payload``; ``meta`` holds the whole payload."""
    return create_interrupt(
        store=store,
        run_id=str(payload["run_id"]),
        chat_id=str(payload["chat_id"]),
        event=str(payload["event"]),
        timeout=hook.effective_timeout(),
        default_resolution=hook.effective_default_resolution().value,
        meta=payload,
        resource_id=resource_id,
    )
