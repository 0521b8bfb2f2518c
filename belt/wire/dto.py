"""The platform API's objects as belt reads and writes them in JSON (spec/WIRE.md), typed.

``belt.wire.platform`` checks them with pydantic at the wire's edge; these are the same shapes
for the code that only passes them on or shows them, without importing pydantic.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class InterruptJSON(TypedDict):
    """An InterruptDTO (``belt.wire.platform.InterruptDTO``), its fields in wire order."""

    id: str
    short_id: NotRequired[str | None]
    created_at: NotRequired[str | None]
    updated_at: NotRequired[str | None]
    run_id: NotRequired[str | None]
    chat_id: NotRequired[str | None]
    reason: NotRequired[str | None]
    source: NotRequired[str | None]
    resource_id: NotRequired[str | None]
    resource_type: NotRequired[str | None]
    status: str
    resolution: NotRequired[str | None]
    resolved_at: NotRequired[str | None]
    resolved_data: NotRequired[Any]
    expires_at: NotRequired[str | None]
    meta: NotRequired[Any]


class WatchEvent(TypedDict):
    """One event of a watch: an interrupt's (``pending``, ``opened``, settled) or a ``warning``."""

    event: str
    interrupt: NotRequired[InterruptJSON]
    on_expiry: NotRequired[str | None]
    message: NotRequired[str]
