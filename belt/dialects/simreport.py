"""A simulation's report (``belt.engine.readback.build_report``, ``belt sim show --json``): its
``simulation``, ``chat`` and ``runs``, and what its dialect's ``report_extras`` adds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, Required, TypeAlias, TypedDict

from belt.records.runs import RunView

if TYPE_CHECKING:
    from belt.records.executions import ExecutionEntry
    from belt.records.hooktasks import HookTask
    from belt.records.messages import Message
    from belt.records.runs import RunEvent
    from belt.records.sims import SimParent
    from belt.wire.dto import InterruptJSON


Delivery: TypeAlias = "RunEvent"
"""A ``hook.executed`` record as a report holds it (``hook_executions``)."""


Head: TypeAlias = dict[str, Any]
"""A report's ``simulation``: the simulation record's public fields (``belt.records.sims.Sim``:
id, dialect, source, name, status, fail_closed, and kind, clock, warnings, parent, registry,
profile when set), with ``interrupted``, ``turns_left`` and ``resume_run`` for one whose process
died between runs, and ``ephemeral`` for one kept in memory."""


class ReportRun(RunView, total=False):
    """A run as a report lists it (``run_dto``, with the fields its dialect adds)."""

    kind: str
    attention: dict[str, Any] | None
    """Why a Nexus run is on an attention hold: the hook task that failed."""
    hooks: dict[str, dict[str, Any]] | None
    """The hooks a Nexus execution froze onto its run, by event."""
    profile: dict[str, Any] | None
    execution: dict[str, object] | None


class Child(TypedDict):
    """A task chat or review branch a simulation started, with its runs."""

    sim_id: str
    chat_id: str
    agent: object
    parent: SimParent
    status: str
    review: NotRequired[dict[str, Any]]
    """What a review by ``belt:extract`` did (``outcomes``, ``note``, ``ancestor``)."""
    runs: list[ReportRun]


class ReportChat(TypedDict):
    """A report's chat: its id, its messages and the gates pending on it."""

    id: str
    chat_messages: list[Message]
    pending_interrupts: list[InterruptJSON]


class HandlerTally(TypedDict):
    """One handler's calls in a summary, with its first error and the likely fix of it."""

    handler: str
    handler_type: str
    calls: int
    failed: int
    counted_allow: int
    counted_deny: int
    first_error: str | None
    fix: str | None


class HookSummary(TypedDict):
    """The closing summary of hook calls (``hook_summary``, ``belt.engine.hooksummary``)."""

    calls: int
    failed: int
    counted_allow: int
    counted_deny: int
    handlers: list[HandlerTally]
    failures: list[dict[str, object]]
    """The failed calls listed one by one (``error``, ``counted_as``, ``async``)."""
    warned: int
    warnings: list[dict[str, object]]
    """The calls whose answer was partly ignored (``warning``)."""


class DialectParts(TypedDict, total=False):
    """What a built-in dialect's report holds beyond runs and messages."""

    tasks: list[Child]
    reviews: list[Child]
    fired: dict[str, dict[str, int]]
    """How often each run reached each event's boundary, by run id."""
    executions: list[ExecutionEntry]
    hook_tasks: list[HookTask]


class ReportExtras(DialectParts, total=False):
    """What a dialect adds to its report (``report_extras``; ``simulation`` keys merged)."""

    simulation: Head


class SimReport(DialectParts, total=False):
    """A simulation's whole report, names as on the wire."""

    simulation: Required[Head]
    chat: Required[ReportChat]
    runs: Required[list[ReportRun]]
    interrupts: list[InterruptJSON]
    hook_executions: list[Delivery]
    hook_summary: HookSummary
