"""The dialects the simulation driver knows, by the name a simulation record carries.

The Nexus engine is imported the first time a run in that dialect is asked for, so a run or
a suite of platform scenarios (``belt test``, ``belt sim run``) does not pay for loading it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from belt.engine.platform import PlatformLoop
from belt.wire.enums import Dialect as DialectName

if TYPE_CHECKING:
    from belt.engine.simulation import Dialect


class _Dialects(Mapping[str, Any]):
    """Each dialect's loop class by name; the Nexus one is imported when first asked for."""

    def __getitem__(self, name: str) -> Any:
        if name == PlatformLoop.name:
            return PlatformLoop
        if name == DialectName.NEXUS:  # NexusLoop.name, known without importing it
            # Start-up: platform runs never load the Nexus engine (tests/test_startup.py).
            from belt.engine.nexus import NexusLoop

            return NexusLoop
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter((PlatformLoop.name, DialectName.NEXUS.value))

    def __len__(self) -> int:
        return 2


DIALECTS: Mapping[str, Any] = _Dialects()


def dialect_class(sim: dict[str, Any]) -> type[Dialect]:
    """The dialect a simulation record was made in (records without one are platform)."""
    found: type[Dialect] = DIALECTS[str(sim.get("dialect") or PlatformLoop.name)]
    return found
