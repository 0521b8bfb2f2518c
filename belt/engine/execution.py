"""What the driver's parts share: a run being driven (``Execution``), how driving it stopped
(``End``), where a simulation is (``SimStatus``) and what a caller lends it (``Options``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from belt.engine.ledger import CHAT_SCOPE
from belt.records.runs import RunRecord

if TYPE_CHECKING:
    from belt.engine.dispatch import Route
    from belt.executor.worker import Worker

Notify = Callable[[dict[str, object]], None]
"""Tells a live reporter what a run waiting at its gates waits for."""


class End(StrEnum):
    """How driving a run stopped."""

    COMPLETED = "completed"
    FAILED = "failed"
    HELD = "held"
    CANCELED = "canceled"


class SimStatus(StrEnum):
    """Where a simulation is: running, waiting on a held run, stopped, or done."""

    RUNNING = "running"
    HELD = "held"
    ATTENTION = "attention"
    CANCELED = "canceled"
    FINISHED = "finished"


@dataclass
class Options:
    """What a caller lends a simulation (``handlers``: imported before it was created)."""

    loaded: Any = None
    worker: Worker | None = None
    notify: Notify | None = None
    wait: bool = False
    routes: list[Route] = field(default_factory=list)
    handlers: dict[str, Callable[..., Any]] = field(default_factory=dict)


@dataclass
class Execution:
    """One turn's run as the driver sees it: its record (if run-backed) and where it is."""

    turn_index: int
    run: RunRecord | None
    state: dict[str, Any]
    scope: str = CHAT_SCOPE
    input_message_id: str | None = None
    occupies_chat: bool = True
    tags: dict[str, object] = field(default_factory=dict)
    recovering: bool = False

    @property
    def run_id(self) -> str | None:
        """The run's id, or None for an execution that is not run-backed."""
        return self.run.id if self.run is not None else None
