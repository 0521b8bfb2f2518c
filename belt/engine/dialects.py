"""The dialects the simulation driver knows, by the name a simulation record carries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from belt.engine.nexus import NexusLoop
from belt.engine.platform import PlatformLoop

if TYPE_CHECKING:
    from belt.engine.simulation import Dialect

DIALECTS: dict[str, Any] = {PlatformLoop.name: PlatformLoop, NexusLoop.name: NexusLoop}


def dialect_class(sim: dict[str, Any]) -> type[Dialect]:
    """The dialect a simulation record was made in (records without one are platform)."""
    found: type[Dialect] = DIALECTS[str(sim.get("dialect") or PlatformLoop.name)]
    return found
