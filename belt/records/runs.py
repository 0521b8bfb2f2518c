"""Runs in the store: one user message's work (a platform run, or a Nexus execution).

A run record is an AgentRunDTO's fields plus its simulation and ``execution``, the persisted state
it resumes from. Every change goes through :meth:`RunRecord.transition`, which refuses to
overwrite a cancelled run, so a forced stop made while a hook runs always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any, NotRequired, TypedDict, cast

from belt.errors import Conflict, NotFound
from belt.records import leases
from belt.records.changes import touched
from belt.records.ids import new_id, now_iso
from belt.records.leases import Lease
from belt.records.names import find_id
from belt.store import Store, check_id
from belt.store.clock import timestamp, utcnow
from belt.store.shapes import record_shape
from belt.wire.enums import ATTENTION_HOLD, AgentRunState, InterruptReason

RUN = "run"
SIM_RUNS = "sim-runs"
CHAT_RUNS = "chat-runs"
EVENTS_LOG = "events"
GATED_RUNS = "gated-runs"
"""Tag of the runs held at gates (``belt serve --resume``): tagged before a run holds, untagged
once nothing of it is left to continue: a continuer killed at any moment leaves it to the next."""
EMULATED_RUNS = "emulated-runs"
"""Tag of the emulated runs (``belt serve``'s agent routes) that have not ended."""

TERMINAL_STATES = frozenset(
    {AgentRunState.COMPLETED, AgentRunState.FAILED, AgentRunState.CANCELED, AgentRunState.REJECTED}
)
"""States a run never leaves."""

HELD_STATES = frozenset({AgentRunState.INPUT_REQUIRED, ATTENTION_HOLD})
"""States of a run waiting for something outside the simulation (a gate, a retried hook)."""


def parked(run: Run) -> bool:
    """True for a ``working`` run that waits for a client tool's result: held, not interrupted."""
    return (
        run.get("state") == AgentRunState.WORKING
        and run.get("interrupt_reason") == InterruptReason.CLIENT_TOOL
    )


def waiting(run: Run) -> bool:
    """True for a run held at its interrupts: gates, approvals, or a client tool's result."""
    return run.get("state") == AgentRunState.INPUT_REQUIRED or parked(run)


class Run(TypedDict):
    """A stored run (kind ``run``): the AgentRunDTO's fields and what belt continues it from."""

    id: str
    state: str
    agent_id: NotRequired[str | None]
    sim_id: NotRequired[str]
    chat_id: NotRequired[str | None]
    turn_index: NotRequired[int]
    execution: NotRequired[dict[str, Any] | None]
    """The engine's state the run resumes from (``next``: the step to take)."""
    lease: NotRequired[Lease | None]
    error: NotRequired[str | None]
    hooks: NotRequired[dict[str, object] | None]
    """The hooks a Nexus execution captured (``belt.dialects.nexus``)."""
    attention: NotRequired[dict[str, object] | None]
    """Why a run is on an attention hold (a hook that failed), while it is."""
    interrupt_reason: NotRequired[str | None]
    interrupt_tool_id: NotRequired[str | None]
    interrupt_meta: NotRequired[Any]
    kind: NotRequired[str]
    conversation_id: NotRequired[str | None]
    approval_mode: NotRequired[str | None]
    profile: NotRequired[dict[str, object] | None]
    """Where a Nexus run's hooks came from (the profile it captured, or the run it reuses)."""
    regenerates: NotRequired[str | None]
    created_at: NotRequired[str]
    updated_at: NotRequired[str]


record_shape(RUN, Run)

RunEvent = TypedDict(
    "RunEvent",
    {
        "run_id": str,
        "at": str,
        "type": str,
        "hook_event": NotRequired[str],
        "decision": NotRequired[str],
        "reason": NotRequired[str | None],
        "duration_ms": NotRequired[float],
        "latency_ms": NotRequired[float],
        "hook_index": NotRequired[int],
        "handler_type": NotRequired[str],
        "handler": NotRequired[str],
        "async": NotRequired[bool],
        "error": NotRequired[str | None],
        "injected": NotRequired[bool],
        "warnings": NotRequired[list[str]],
        "override": NotRequired[object],
        "injection": NotRequired[object],
        "interrupt_id": NotRequired[str | None],
        "task_chat_id": NotRequired[str | None],
        "resource_id": NotRequired[str],
        "routed_to": NotRequired[str],
        "payload": NotRequired[object],
    },
)
"""One line of a run's event log (kind ``events``): a ``hook.executed`` agent event."""


class RunView(TypedDict, total=False):
    """A stored run as the API shows it (``run_dto``)."""

    id: str
    agent_id: object
    chat_id: str | None
    state: str
    error: str | None
    interrupt_reason: object
    interrupt_tool_id: object
    interrupt_meta: object
    created_at: object
    updated_at: object
    interrupted: bool


DTO_FIELDS = tuple(name for name in RunView.__annotations__ if name != "interrupted")


class Cancelled(Exception):
    """The run was stopped from outside (``belt sim stop``) while it executed."""


class RunRecord:
    """One run's record in the store, written through on every change."""

    def __init__(self, store: Store, data: Run) -> None:
        self.store = store
        self.data = data
        self._checked: object = None  # the run's file as last found not cancelled

    @classmethod
    def create(
        cls,
        store: Store,
        *,
        sim_id: str,
        agent_id: str,
        chat_id: str | None,
        turn_index: int,
        execution: dict[str, Any],
        **fields: Any,
    ) -> RunRecord:
        """Create a new working run of a simulation."""
        stamp = now_iso()
        data: Run = {
            "id": new_id("ar"),
            "agent_id": agent_id,
            "chat_id": chat_id,
            "state": AgentRunState.WORKING.value,
            "error": None,
            "interrupt_reason": None,
            "interrupt_tool_id": None,
            "interrupt_meta": None,
            "created_at": stamp,
            "updated_at": stamp,
            "sim_id": sim_id,
            "turn_index": turn_index,
            "execution": execution,
            "lease": leases.mine(),
            **fields,  # type: ignore[typeddict-item]  # a dialect's own fields of Run
        }
        # Listed first, written last: a process killed in between leaves a listed run with no
        # file, which readers skip (``listed_runs``), never a run its simulation does not list.
        store.link(SIM_RUNS, sim_id, data["id"])
        if chat_id is not None:
            store.link(CHAT_RUNS, chat_id, data["id"])
        store.create(RUN, data["id"], data)
        touched(chat_id)
        return cls(store, data)

    @property
    def id(self) -> str:
        """The run's id."""
        return self.data["id"]

    @property
    def state(self) -> str:
        """The run's state as last read or written."""
        return self.data["state"]

    @property
    def execution(self) -> dict[str, Any]:
        """The persisted state the run resumes from (empty for a run that has none)."""
        return self.data.get("execution") or {}

    def transition(self, **changes: Any) -> None:
        """Change the run under its lock, renewing this process's lease; Cancelled if it was."""
        changes["updated_at"] = now_iso()

        def apply(run: Run) -> Run:
            if run["state"] == AgentRunState.CANCELED:
                raise Cancelled
            lease = run.get("lease")
            if "lease" not in changes and lease is not None and leases.is_mine(lease):
                # Wall time, whatever the clock: the renewal says the process still lives.
                run["lease"] = {**lease, "renewed": timestamp(utcnow())}
            run.update(cast(Run, changes))
            return run

        self.data = self.store.update(RUN, self.id, apply)
        # Not cancelled (``apply`` saw to that): the next check decodes only a replaced file.
        self._checked = self.store.seen(RUN, self.id)
        touched(self.data.get("chat_id"))

    def check_cancelled(self) -> None:
        """Raise Cancelled when another process stopped the run (a stat while nothing changed)."""
        current, checked = self.store.read_if_replaced(RUN, self.id, self._checked)
        if current is None:
            return  # the file found not cancelled last time
        if current["state"] == AgentRunState.CANCELED:
            self.data = cast(Run, current)
            raise Cancelled
        self._checked = checked

    def log(self, *records: Mapping[str, object]) -> None:
        """Append agent events to the run's event log in one write (not fsynced)."""
        at = now_iso()
        lines = [{"run_id": self.id, "at": at, **record} for record in records]
        self.store.append_group(EVENTS_LOG, self.id, lines, sync=False)


def take_lease(store: Store, run_id: str) -> tuple[RunRecord, bool]:
    """Become the one process that continues a run (Conflict, exit 4, while another lives); the
    run and whether its last holder left it ``working``. An ended run gets no lease."""
    interrupted = False

    def apply(run: Run) -> Run:
        nonlocal interrupted
        if run["state"] in TERMINAL_STATES:
            raise _Ended(run)
        mine = leases.is_mine(run.get("lease"))
        interrupted = run["state"] == AgentRunState.WORKING and not mine and not parked(run)
        stop = f"`belt sim stop {run_id}`"
        hint = f"only one process continues a run; wait for it, or stop the run with {stop}"
        return _claimed(run, f"run {run_id}", hint)

    try:
        data = store.update(RUN, check_id(run_id, what="run id"), apply)
    except _Ended as ended:
        return RunRecord(store, ended.run), False
    return RunRecord(store, data), interrupted


def take_over_ended(store: Store, run_id: str) -> RunRecord:
    """Take the lease of an ended run, which stands for its simulation's turn loop (exit 4)."""

    def apply(run: Run) -> Run:
        if run["state"] not in TERMINAL_STATES:
            raise Conflict(f"run {run_id} is {run['state']}, not ended")
        hint = "only one process continues a simulation; wait for it"
        return _claimed(run, f"the simulation of run {run_id}", hint)

    return RunRecord(store, store.update(RUN, check_id(run_id, what="run id"), apply))


def _claimed(run: Run, what: str, hint: str) -> Run:
    """``run`` with this process's lease; Conflict (exit 4) while another live process holds it."""
    lease = run.get("lease")
    if lease is not None and not leases.is_mine(lease) and leases.holder_alive(lease):
        raise Conflict(f"{what} is being continued by {leases.describe(lease)}", hint=hint)
    run["lease"] = leases.mine()
    return run


class _Ended(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(run["id"])
        self.run = run


def release_lease(store: Store, run_id: str) -> None:
    """Give up this process's lease on a run."""

    def apply(run: Run) -> Run:
        if not leases.is_mine(run.get("lease")):
            raise _Ended(run)
        run["lease"] = None
        return run

    with suppress(_Ended):
        store.update(RUN, run_id, apply)


def mark_run(store: Store, tag: str, run_id: str, on: bool = True) -> None:
    """List a run under ``GATED_RUNS`` or ``EMULATED_RUNS``, or take it off (``on`` false)."""
    (store.tag if on else store.untag)(tag, run_id)


def merge_run(store: Store, run_id: str, changes: Mapping[str, object]) -> Run:
    """Under the run's lock: set the fields in ``changes`` and ``updated_at``, keep the rest."""
    return cast(Run, store.merge(RUN, run_id, {**changes, "updated_at": now_iso()}))


def interrupted(run: Run) -> bool:
    """True for a run left ``working`` by a process that is gone (killed or crashed)."""
    if run.get("state") != AgentRunState.WORKING or parked(run):
        return False
    lease = run.get("lease")
    return not leases.is_mine(lease) and not leases.holder_alive(lease)


def cancel_run(store: Store, run_id: str, *, force: bool, how: str, hint: str) -> Run:
    """Mark a run cancelled; Conflict if it ended, or if a live process works on it unforced."""

    def apply(run: Run) -> Run:
        if (state := run["state"]) in TERMINAL_STATES:
            raise Conflict(f"run {run_id} is already {state}")
        if state == AgentRunState.WORKING and not (force or interrupted(run) or parked(run)):
            raise Conflict(f"run {run_id} is working", hint=hint)
        return {
            **run,
            "state": AgentRunState.CANCELED.value,
            "error": f"{how} by user",
            "lease": None,
            "updated_at": now_iso(),
        }

    cancelled = store.update(RUN, check_id(run_id, what="run id"), apply)
    touched(cancelled.get("chat_id"))
    return cancelled


def find_run_id(store: Store, ref: str) -> str:
    """The id of the run ``ref`` names (``find_id``)."""
    hint = "list runs with `belt sim list`"
    return find_id(
        store, RUN, ref, what="run", missing=lambda r: NotFound(f"no run {r}", hint=hint)
    )


def read_run(store: Store, run_id: str) -> Run:
    """One stored run; NotFound (exit 3) if there is none, InvalidInput (exit 5) if damaged."""
    return cast(Run, store.read(RUN, check_id(run_id, what="run id")))


def get_run(store: Store, run_id: str) -> Run | None:
    """One stored run, or None when there is none."""
    return cast("Run | None", store.get(RUN, check_id(run_id, what="run id")))


def listed_runs(store: Store, index: str, owner: str) -> list[Run]:
    """The runs ``index`` lists for ``owner``, as they started (one not written yet skipped)."""
    runs = (get_run(store, run_id) for run_id in store.members(index, owner))
    return [run for run in runs if run is not None]


def run_events(store: Store, run_id: str) -> list[RunEvent]:
    """A run's event log (``hook.executed`` records and the like), in order."""
    return cast(list[RunEvent], store.read_log(EVENTS_LOG, run_id))


def run_dto(run: Run, extra_fields: tuple[str, ...] = ()) -> RunView:
    """An AgentRunDTO of a stored run with a dialect's ``extra_fields``."""
    dto = {key: run.get(key) for key in (*DTO_FIELDS, *extra_fields)}
    if interrupted(run):
        dto["interrupted"] = True
    return cast(RunView, dto)
