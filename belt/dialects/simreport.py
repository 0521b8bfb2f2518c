"""A simulation's report (``belt.engine.readback.build_report``, ``belt sim show --json``): its
``simulation``, ``chat`` and ``runs``, and what its dialect's ``report_extras`` adds."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, Required, TypedDict

if TYPE_CHECKING:
    from belt.records.executions import ExecutionEntry
    from belt.records.hooktasks import HookTask
    from belt.records.messages import Message
    from belt.records.sims import SimParent, SimRegistry
    from belt.wire.dto import InterruptJSON


class Head(TypedDict, total=False):
    """A report's ``simulation``: the simulation record's public fields."""

    id: str
    dialect: str
    source: str | None
    name: str | None
    status: str
    fail_closed: bool
    kind: str
    clock: str
    clock_from_wall: bool
    warnings: list[str]
    parent: SimParent
    registry: SimRegistry
    ephemeral: bool
    interrupted: bool
    turns_left: int
    resume_run: str
    profile: object
    """A Nexus simulation's declaration, its revision and where its hooks came from."""
    profile_revision: int | None
    hooks_from: dict[str, str] | None


class Attention(TypedDict):
    """Why a Nexus run is on an attention hold: which hook task failed."""

    event: str
    task_key: str
    reason: str
    detail: str
    tool: str


class FrozenHook(TypedDict, total=False):
    """A hook a Nexus execution froze onto its run."""

    tool: Required[str]
    timeout_ms: Required[int]
    max_continuations: int


class Origin(TypedDict, total=False):
    """Where a Nexus run's profile came from."""

    reused_from: str
    source: str
    revision: int
    hooks_from: object


class ReportRun(TypedDict, total=False):
    """A run as a report lists it (``run_dto``, with the fields its dialect adds)."""

    id: Required[str]
    state: Required[str]
    chat_id: str | None
    error: str | None
    interrupt_reason: object
    interrupted: bool
    created_at: object
    kind: str
    attention: Attention | None
    hooks: dict[str, FrozenHook] | None
    profile: Origin | None
    execution: dict[str, object] | None


class Review(TypedDict, total=False):
    """What a review by ``belt:extract`` did."""

    outcomes: list[dict[str, str]]
    note: str
    ancestor: str


class Child(TypedDict):
    """A task chat or review branch a simulation started, with its runs."""

    sim_id: str
    chat_id: str
    agent: object
    parent: SimParent
    status: str
    review: NotRequired[Review]
    runs: list[ReportRun]


class ReportChat(TypedDict):
    """A report's chat: its id, its messages and the gates pending on it."""

    id: str
    chat_messages: list[Message]
    pending_interrupts: list[InterruptJSON]


class Delivery(TypedDict, total=False):
    """A ``hook.executed`` record (``belt.records.runs.RunEvent``) as a report holds it."""

    run_id: str
    hook_event: str
    hook_index: int
    handler: str
    handler_type: str
    decision: str
    reason: str | None
    error: str | None
    injected: bool
    injection: object
    routed_to: str
    resource_id: str
    duration_ms: float
    latency_ms: float
    invocation_id: str
    after_message: str
    payload: dict[str, object]


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
