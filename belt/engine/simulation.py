"""The simulation driver: one turn loop, one way to hold, cancel, finish and resume, both dialects.

A simulation is a scripted chat with one agent. Each scenario turn is one run (a platform run, or
a Nexus execution). The driver owns the simulation's record, the chat's transcript and context
ledger, the turn loop and the end of each run; a dialect (``belt.engine.platform``,
``belt.engine.nexus``) decides what each step of a run does. A run's progress is persisted as one
state shape, ``execution`` on the run record, whose ``next`` names the step to take next, so a run
held at a gate, on an attention hold, or interrupted by a killed process goes on from there.

Every change to a run goes through a cancel-safe transition: once ``belt sim stop`` cancels a run,
nothing the simulation does afterwards (a hook that answers late, a tool that finishes) can bring
it back, and the loop stops at its next step.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, ParamSpec, Protocol, TypeVar

from pydantic import ValidationError

from belt import tracing
from belt.engine.ledger import CHAT_SCOPE, Ledger
from belt.engine.scenario import ToolCallSpec, estimate_tokens, resolution_for, utf8_size
from belt.errors import Conflict, InvalidInput, NotFound
from belt.records import leases
from belt.records.chats import CHAT, create_chat
from belt.records.ids import new_id, now_iso
from belt.records.interrupts import last_settled, pending_for_run, resolve_interrupt, sweep
from belt.records.messages import Message, NewMessage, Recorder, run_event
from belt.records.runs import (
    RUN,
    SIM_RUNS,
    TERMINAL_STATES,
    Cancelled,
    Run,
    RunRecord,
    cancel_run,
    merge_run,
    parked,
    release_lease,
    run_dto,
    tag_gated,
    take_lease,
    take_over_ended,
    untag_emulated,
    untag_gated,
)
from belt.records.sims import (
    Sim,
    change_sim,
    create_sim,
    merge_sim,
    read_scenario,
    read_sim,
    scenario_path,
    write_agent,
)
from belt.store import check_id, clock
from belt.store.clock import (
    VirtualClock,
    format_duration,
    parse_duration,
    parse_timestamp,
    timestamp,
)
from belt.wire.enums import AgentRunState, ChatStatus, MessageStatus, ToolInvocationStatus
from belt.wire.validate import model_problems

if TYPE_CHECKING:
    from pydantic import BaseModel

    from belt.engine.dispatch import Route
    from belt.executor.worker import Worker
    from belt.store import Store

GATE_POLL = 0.1
"""Seconds between two looks at a waiting run's gates (each look reads only that run's)."""
LEASE_RENEWAL = 10.0
"""Seconds between two renewals of the lease of a run this process waits on."""
SCRIPTED_MODEL = "scripted"
"""The model a simulation's spans name (``chat scripted``): the scenario scripts its answers."""

Notify = Callable[[dict[str, Any]], None]
ScenarioModel = TypeVar("ScenarioModel", bound="BaseModel")
Params = ParamSpec("Params")
Result = TypeVar("Result")


def driving(
    method: Callable[Concatenate[Simulation, Params], Result],
) -> Callable[Concatenate[Simulation, Params], Result]:
    """Drive runs on the simulation's clock; Ctrl-C gives up the run's lease (``let_go``), and
    the dialect is closed however driving ends."""

    @functools.wraps(method)
    def drive(self: Simulation, /, *args: Params.args, **kwargs: Params.kwargs) -> Result:
        with clock.using(self.clock):
            try:
                return method(self, *args, **kwargs)
            except KeyboardInterrupt:
                self.let_go()
                raise
            finally:
                self.dialect.close()

    return drive


def needs_clock(scenario: Any) -> bool:
    """True when a scenario moves time (a turn's ``after``, a ``[[turns.wait]]``): it runs on a
    virtual clock, from the wall time it starts at unless it says ``clock``."""
    return any(turn.after is not None or turn.wait for turn in scenario.turns)


def clock_start(scenario: Any, given: datetime | None) -> VirtualClock | None:
    """The virtual clock a new simulation of ``scenario`` runs on (``given`` is ``--clock``),
    or None for wall time."""
    start = given or scenario.clock
    if start is None and needs_clock(scenario):
        start = clock.utcnow()
    return VirtualClock(start) if start is not None else None


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
    """What a caller lends a simulation: handlers reached in-process and a live reporter.

    ``routes`` (``--route``) send webhooks elsewhere; ``handlers`` are the ``py:`` handlers
    imported (and so checked) before the simulation was created.
    """

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
    tags: dict[str, Any] = field(default_factory=dict)
    recovering: bool = False

    @property
    def run_id(self) -> str | None:
        """The run's id, or None for an execution that is not run-backed."""
        return self.run.id if self.run is not None else None


class Dialect(Protocol):
    """What the driver asks of a dialect; one instance serves one simulation."""

    name: ClassVar[str]
    held_state: ClassVar[str]
    held_status: ClassVar[SimStatus]
    stop_hint: ClassVar[str]
    waits_for_gates: ClassVar[bool]

    def __init__(self, sim: Simulation) -> None:
        """Serve the simulation ``sim``."""

    def begin(self, index: int) -> Execution:
        """Start scenario turn ``index``: record its input and create its run."""

    def step(self, execution: Execution) -> End | None:
        """Take the step ``execution.state["next"]``; an End when the run stops."""

    def resumable(self, run: RunRecord, interrupted: bool) -> Execution:
        """The execution of a held (or ``interrupted``) run, to go on; Conflict when it cannot
        go on yet."""

    def resume_fields(self) -> dict[str, Any]:
        """Run fields cleared when a held run goes on."""

    def ended(self, execution: Execution, end: End) -> None:
        """Bookkeeping of the dialect when a run stops (ends, holds or is cancelled)."""

    def close(self) -> None:
        """Release what the dialect holds (HTTP clients)."""

    @classmethod
    def check_options(cls, *, executors: bool, fail_closed: bool, routes: bool = False) -> None:
        """Refuse, as a usage error, what the caller lends that this dialect cannot use."""

    @classmethod
    def create(
        cls, store: Store, loaded: Any, *, fail_closed: bool, routes: Sequence[Route] = ()
    ) -> dict[str, Any]:
        """Record a new simulation of a loaded scenario of this dialect; return its record."""

    @classmethod
    def run_fields(cls) -> tuple[str, ...]:
        """The fields a run of this dialect adds to its AgentRunDTO in reports."""

    @classmethod
    def run_tags(cls, run: dict[str, Any]) -> dict[str, Any]:
        """The ``sim`` tags of a message that belongs to ``run``."""

    @classmethod
    def cancel_pending(
        cls, store: Store, sim: dict[str, Any], run: dict[str, Any], how: str
    ) -> tuple[str, dict[str, Any]]:
        """Cancel a stopped run's pending work; returns its transcript text and fields to keep."""

    @classmethod
    def mark_ended(cls, store: Store, sim: dict[str, Any], run_id: str | None, end: End) -> None:
        """Record on the simulation how one of its runs stopped."""

    @classmethod
    def report_extras(cls, store: Store, sim: dict[str, Any], runs: list[Run]) -> dict[str, Any]:
        """What a report of this dialect adds (``simulation`` keys are merged in)."""


def invocations(calls: list[ToolCallSpec], message_id: str | None) -> list[dict[str, Any]]:
    """Pending ToolInvocationDTOs for the tool calls of one assistant message (``type`` is
    ``client`` for a tool the application runs, ``app`` for the others)."""
    return [
        {
            "id": new_id("ti"),
            "chat_message_id": message_id,
            "tool_invocation_id": new_id("call"),
            "type": "client" if call.client else "app",
            "function": {"name": call.name, "arguments": call.arguments},
            "status": ToolInvocationStatus.PENDING.value,
            "result": None,
        }
        for call in calls
    ]


def record_simulation(
    store: Store,
    *,
    dialect: str,
    loaded: Any,
    agent: dict[str, Any],
    scenario: dict[str, Any],
    disable_hooks: bool = False,
    **fields: Any,
) -> dict[str, Any]:
    """Write a new simulation of a loaded scenario: its agent, its fresh chat, its scenario."""
    stamp = now_iso()
    spec = loaded.scenario.agent
    agent_id = spec.id or new_id("ag")
    write_agent(
        store,
        {
            "id": agent_id,
            "name": spec.name,
            "context_window": spec.context_window,
            "compact_at": spec.compact_at,
            **agent,
            "updated_at": stamp,
        },
    )
    sim_id = new_id("sim")
    chat = create_chat(
        store,
        agent_id=agent_id,
        chat_id=loaded.scenario.chat.id,
        disable_hooks=disable_hooks,
        sim_id=sim_id,
        dialect=dialect,
    )
    # The scenario is written once, apart from the record that changes on every turn.
    sim = create_sim(
        store,
        {
            "id": sim_id,
            "dialect": dialect,
            "source": str(Path(loaded.source).resolve()),
            "hooks_file": str(Path(loaded.hooks_file).resolve()) if loaded.hooks_file else None,
            "name": spec.name,
            "agent_id": agent_id,
            "chat_id": chat["id"],
            "next_turn": 0,
            "status": SimStatus.RUNNING.value,
            "created_at": stamp,
            # What reading the scenario warned of (a path read from the current directory).
            **({"warnings": list(loaded.warnings)} if getattr(loaded, "warnings", None) else {}),
            **fields,
        },
        scenario,
    )
    return dict(sim)


def refuse_pending(store: Store, run_id: str, waits: str) -> None:
    """Conflict (exit 4) while the run has pending interrupts; ``waits`` says for what, with
    ``{n}`` for how many."""
    pending = pending_for_run(store=store, run_id=run_id)
    if pending:
        ids = ", ".join(i["id"] for i in pending)
        raise Conflict(
            f"run {run_id} still {waits.format(n=len(pending))}: {ids}",
            hint=f"resolve them first: `belt interrupt resolve {pending[0]['id']} allow` (or "
            f"deny), or `belt sim resume {run_id} --wait` goes on once they are settled",
        )


def sim_of_run(store: Store, run_id: str) -> dict[str, Any]:
    """The simulation a run belongs to; an unknown run exits 3."""
    run = store.get(RUN, check_id(run_id, what="run id"))
    if run is None or "sim_id" not in run:
        raise NotFound(f"no simulated run {run_id}", hint="list runs with `belt sim list`")
    return dict(read_sim(store, str(run["sim_id"])))


def stranded_at(store: Store, sim: Mapping[str, Any]) -> str | None:
    """The last run of a simulation whose process died between two runs, else None.

    Such a simulation is still ``running``, every run of it has ended, and the process that
    drove its last run is gone: the next turn was never begun (or the simulation never marked
    finished). ``belt sim resume`` of that run goes on with the turns left.
    """
    last = last_run_ended(store, sim)
    if last is None or leases.holder_alive(last.get("lease")):
        return None
    return str(last["id"])


def last_run_ended(store: Store, sim: Mapping[str, Any]) -> dict[str, Any] | None:
    """The last run of a ``running`` simulation when it has ended: its process is between two
    runs, or gone (``stranded_at``)."""
    if sim.get("status") != SimStatus.RUNNING or sim.get("emulated"):
        return None
    last = latest_run(store, sim)
    if last is None or last.get("state") not in TERMINAL_STATES:
        return None
    return last


def latest_run(store: Store, sim: Mapping[str, Any]) -> dict[str, Any] | None:
    """The last run of a simulation, None before its first."""
    for run_id in reversed(store.members(SIM_RUNS, str(sim["id"]))):
        last = store.get(RUN, run_id)  # None: listed by a process killed before writing it
        if last is not None:
            return last
    return None


class Simulation:
    """Drives one simulation's runs, writing everything to the store as it happens."""

    def __init__(
        self,
        store: Store,
        sim: dict[str, Any],
        dialect: type[Dialect],
        options: Options | None = None,
    ) -> None:
        self.store = store
        self.sim = sim
        self.options = options or Options()
        self.scenario_doc: dict[str, Any] = dict(read_scenario(store, str(sim["id"])))
        # Read what the loop will append to before acting, so a damaged index is reported
        # before a turn runs, not after.
        store.members(SIM_RUNS, str(sim["id"]))
        self.recorder = Recorder(store, str(sim["chat_id"]))
        self.ledger = Ledger(self.recorder.messages)
        self.agent_id = str(sim["agent_id"])
        self.current: str | None = None
        self.clock = self.own_clock()
        self.waited: dict[int, int] = {}
        """Per turn, how many of its ``[[turns.wait]]`` this process has used."""
        self.dialect: Dialect = dialect(self)
        self.turn_span: Any = None
        """The span of the model turn being taken (``trace_turn``), when tracing is on."""

    def own_clock(self) -> VirtualClock | None:
        """The simulation's virtual clock (its time kept on its record as it moves), or None:
        it runs on whatever clock is in force (wall time, or ``belt serve --clock``'s)."""
        stamp = self.sim.get("clock")
        if not isinstance(stamp, str):
            return None
        return VirtualClock(
            parse_timestamp(stamp), on_move=lambda moment: self.update_sim(clock=timestamp(moment))
        )

    # -- the turn loop -------------------------------------------------------------------------

    @driving
    def run(self) -> list[str]:
        """Run the scenario's remaining turns; returns the ids of the runs executed."""
        return self.run_turns()

    def let_go(self) -> None:
        """Ctrl-C: give up the lease on the run this process was continuing, so that a later
        ``belt sim resume`` can go on with it (from its gates, or its last durable point)."""
        if self.current is not None:
            release_lease(self.store, self.current)

    @driving
    def resume(self, run_id: str) -> list[str]:
        """Continue a held run once what held it is settled, then the remaining turns.

        The run's lease is taken first, so of many processes resuming one run exactly one goes
        on; a run whose process was killed goes on from its last durable point.
        """
        last = last_run_ended(self.store, self.sim)
        if last is not None and last["id"] == run_id:
            # The turn loop goes on after the run, if the process driving it is gone.
            take_over_ended(self.store, run_id)
            self.current = run_id
            return self.run_turns()
        run, interrupted = take_lease(self.store, run_id)
        self.current = run_id
        self.turn_begun(run)
        held = run.state == self.dialect.held_state or parked(run.data)
        if self.waits() and held and not interrupted:
            try:
                self.wait_for_gates(run)  # --wait: attach to the gates it holds at now
            except Cancelled:
                raise Conflict(f"run {run_id} was stopped") from None
        execution = self.dialect.resumable(run, interrupted)
        execution.recovering = interrupted
        self.go_on(execution)
        return self.drive_on(execution)

    def run_turns(self) -> list[str]:
        """The turn loop: each remaining scenario turn is one run."""
        executed: list[str] = []
        while int(self.sim["next_turn"]) < self.turn_count():
            execution = self.start_turn()
            if execution.run is not None:
                executed.append(execution.run.id)
            if self.stopped(self.drive_waiting(execution)):
                return executed
        self.settle_status(SimStatus.FINISHED)
        return executed

    def start_turn(self) -> Execution:
        """Begin the next scenario turn: its input is recorded and its run created, not driven.

        ``run_turns`` drives it at once; ``belt serve`` answers the request that appended the
        turn first, then drives the rest of the simulation (``run``) in the background.
        """
        index = int(self.sim["next_turn"])
        after = self.turn_doc(index).get("after")
        with clock.using(self.clock):
            if isinstance(after, str) and self.clock is not None:
                self.clock.advance(parse_duration(after, f"turns[{index}].after"))
            execution = self.dialect.begin(index)
            self.current = execution.run_id
            # Counted once its run exists: a process killed in between leaves a run that `resume`
            # takes over (and counts, ``turn_begun``), never a turn begun without one.
            self.update_sim(next_turn=index + 1, status=SimStatus.RUNNING.value)
        return execution

    def turn_begun(self, run: RunRecord) -> None:
        """Count the turn of a run being resumed as begun, if its process died before it could
        (between ``begin`` and the count, in ``start_turn``)."""
        index = run.data.get("turn_index")
        if isinstance(index, int) and int(self.sim["next_turn"]) <= index:
            self.update_sim(next_turn=index + 1)

    @driving
    def drive_started(self, execution: Execution) -> list[str]:
        """Drive a run ``start_turn`` began, then the turns left; returns the runs executed."""
        return self.drive_on(execution)

    def drive_on(self, execution: Execution) -> list[str]:
        """Drive a run, then the turns left unless it stopped; returns the runs executed."""
        if self.stopped(self.drive_waiting(execution)):
            return [str(execution.run_id)]
        return [str(execution.run_id), *self.run_turns()]

    def go_on(self, execution: Execution) -> None:
        """A held run goes on: it is working again and occupies its chat.

        It stays on the tag of runs held at gates: a process killed while it continues the run
        (or the simulation's later runs) leaves it where ``belt serve --resume`` finds it; the
        tag goes once nothing is left to continue (``belt.engine.api.resume_gated``).
        """
        self.catch_up(execution)
        try:
            with self.chat_step(execution):
                self.transition(
                    execution, state=AgentRunState.WORKING.value, **self.dialect.resume_fields()
                )
                self.claim_chat(execution)
        except Cancelled:
            raise Conflict(f"run {execution.run_id} was stopped") from None
        self.update_sim(status=SimStatus.RUNNING.value)

    def catch_up(self, execution: Execution) -> None:
        """Move the virtual clock on to the time the run's gates were settled, when that is
        later than the clock: a sweep ``--at T`` (or a server on its own clock) settles a gate
        at T, and what the run does next is dated no earlier than its settlement."""
        if self.clock is None or execution.run is None:
            return
        settled = last_settled(store=self.store, run_id=execution.run.id)
        before = self.clock.now()
        if settled is not None and settled > before:
            self.clock_row(execution, before, self.clock.move_to(settled))

    def waits(self) -> bool:
        """True when this process stays at a run's gates until they are settled (``--wait``)."""
        return self.options.wait and self.dialect.waits_for_gates

    def drive_waiting(self, execution: Execution) -> End:
        """Drive a run; carry on each time its gates are all settled: by the resolutions the
        scenario scripts for them, or, with ``--wait``, by anyone."""
        end = self.drive(execution)
        while end == End.HELD and execution.run is not None:
            settled = self.dialect.waits_for_gates and (
                self.settle_scripted(execution) or self.wait_out(execution)
            )
            if not settled and not self.waits():
                return end
            if not settled:
                try:
                    self.wait_for_gates(execution.run)
                except Cancelled:
                    return End.CANCELED
            elif not self.waits():
                try:
                    take_lease(self.store, execution.run.id)  # hold() gave it up
                except Conflict:
                    return end  # another process took the run on meanwhile
            execution = self.dialect.resumable(execution.run, False)
            self.go_on(execution)
            end = self.drive(execution)
        return end

    def settle_scripted(self, execution: Execution) -> bool:
        """Resolve the gates a run waits at with the resolutions its scenario turn scripts
        (``[[turns.resolve]]``); True when none is left pending (False when none is scripted).

        They are resolved as ``belt interrupt resolve`` would: one that someone else settled
        meanwhile is left as it is.
        """
        specs = self.turn_doc(execution.turn_index).get("resolve") or []
        if not specs or execution.run is None:
            return False
        pending = pending_for_run(store=self.store, run_id=execution.run.id)
        for interrupt in pending:
            spec = resolution_for(specs, interrupt)
            if spec is None:
                continue
            try:
                resolve_interrupt(
                    store=self.store,
                    interrupt_id=interrupt["id"],
                    decision=spec["decision"],
                    data=spec.get("data"),
                    by={"how": "scenario", "sim": str(self.sim["id"])},
                )
            except Conflict:
                continue  # settled meanwhile, by someone else or by the sweep
            self.add_event(
                execution,
                f"gate {interrupt['id']} resolved {spec['decision']} by the scenario",
                type="scripted_resolution",
                interrupt_id=interrupt["id"],
                resolution=spec["decision"],
            )
        return not pending_for_run(store=self.store, run_id=execution.run.id)

    def turn_doc(self, index: int) -> dict[str, Any]:
        """Scenario turn ``index`` as stored ({} for one the scenario does not have)."""
        turns = self.scenario_doc.get("turns") or []
        found = turns[index] if 0 <= index < len(turns) else {}
        return found if isinstance(found, dict) else {}

    def wait_out(self, execution: Execution) -> bool:
        """Let time pass while a run holds, as its scenario turn says (``[[turns.wait]]``):
        each wait not yet used moves the virtual clock on, then the sweep settles the run's
        overdue gates and approvals with their default resolution, as ``belt serve``'s does.
        True when none of the run's interrupts is left pending."""
        waits = self.turn_doc(execution.turn_index).get("wait") or []
        if execution.run is None or self.clock is None:
            return False
        run_id = execution.run.id
        while (used := self.waited.get(execution.turn_index, 0)) < len(waits):
            spec = waits[used]
            self.waited[execution.turn_index] = used + 1
            pending = pending_for_run(store=self.store, run_id=run_id)
            if not pending:
                return True
            before = self.clock.now()
            if spec.get("until") == "expiry":
                due = min(parse_timestamp(str(i["expires_at"])) for i in pending)
                moment = self.clock.move_to(max(due, before))
            else:
                moment = self.clock.advance(timedelta(seconds=int(spec["seconds"])))
            self.clock_row(execution, before, moment)
            for settled in sweep(store=self.store, now=moment, run_id=run_id):
                self.expiry_row(execution, settled)
            if not pending_for_run(store=self.store, run_id=run_id):
                return True
        return False

    def clock_row(self, execution: Execution, before: datetime, moment: datetime) -> None:
        """The transcript's row for time passing on the virtual clock."""
        self.add_event(
            execution,
            f"clock +{format_duration(moment - before)} → {timestamp(moment)}",
            **{"type": "clock", "from": timestamp(before), "to": timestamp(moment)},
        )

    def expiry_row(self, execution: Execution, interrupt: dict[str, Any]) -> None:
        """The transcript's row for a gate or approval the sweep settled at its deadline."""
        kind = "approval" if interrupt.get("reason") == "tool_approval" else "gate"
        self.add_event(
            execution,
            f"{kind} {interrupt['id']} expired → {interrupt['resolution']}",
            type="expired",
            interrupt_id=interrupt["id"],
            **{k: interrupt[k] for k in ("resolution", "expires_at", "resolved_at")},
        )

    def wait_for_gates(self, run: RunRecord) -> None:
        """Hold on to the run until every one of its gates is settled.

        Settled by anyone: ``belt interrupt resolve`` in another terminal, ``belt serve``'s API,
        or expiry, which this process sweeps itself as each gate falls due. The lease is renewed
        as it waits; Ctrl-C gives it up (``let_go``) and leaves the run held, for a later resume.
        """
        told: set[str] = set()  # the gates last reported: reported again when they change
        renewed = time.monotonic()
        while True:
            pending = pending_for_run(store=self.store, run_id=run.id)
            if not pending:
                if told and self.options.notify is not None:
                    self.options.notify({"kind": "settled", "run_id": run.id})
                return
            run.check_cancelled()
            if any(parse_timestamp(str(i["expires_at"])) <= clock.now() for i in pending):
                # On a virtual clock, only this run's: others' deadlines may be wall time.
                sweep(store=self.store, run_id=run.id if clock.current() else None)
                continue
            if {str(i["id"]) for i in pending} != told and self.options.notify is not None:
                self.options.notify({"kind": "gates", "run_id": run.id, "pending": pending})
                told = {str(i["id"]) for i in pending}
            if time.monotonic() - renewed > LEASE_RENEWAL:
                run.transition()
                renewed = time.monotonic()
            time.sleep(GATE_POLL)

    def scenario_as(self, model: type[ScenarioModel]) -> ScenarioModel:
        """The stored scenario, checked as ``model``; a record that is not one is damaged."""
        try:
            return model.model_validate(self.scenario_doc)
        except ValidationError as exc:
            path = scenario_path(self.store, str(self.sim["id"]))
            raise InvalidInput(
                f"{path}: damaged store file: it is not the scenario belt stored: "
                f"{model_problems(exc, model=model)[0]}",
                hint="belt leaves a damaged file as it is; restore it, or stop the run",
            ) from None

    def turn_count(self) -> int:
        """How many turns the scenario scripts."""
        return len(self.scenario_doc.get("turns") or [])

    def drive(self, execution: Execution) -> End:
        """Take steps until the run ends, holds or is cancelled.

        After each step the run's state is saved: the step to take next is the run's last
        durable point, from which a run whose process is killed goes on.
        """
        with self.traced(execution) as span:
            try:
                while True:
                    if execution.run is not None:
                        execution.run.check_cancelled()
                    end = self.dialect.step(execution)
                    execution.recovering = False
                    if end is not None:
                        break
                    self.save(execution)
            except Cancelled:
                end = End.CANCELED
            self.dialect.ended(execution, end)
            tracing.set_attributes(span, {"belt.run.end": end.value})
        return end

    @contextlib.contextmanager
    def traced(self, execution: Execution) -> Iterator[Any]:
        """The span of a run as this process drives it (docs/tracing.md); a run resumed (here
        or by another process) goes on in the trace it began in: its execution state keeps it."""
        if not tracing.on():
            yield None
            return
        kept = execution.state.get("trace")
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": str(self.sim.get("name") or "agent"),
            "gen_ai.agent.id": self.agent_id,
            "belt.run.id": execution.run_id,
            "belt.run.resumed": bool(kept) or None,
            "belt.sim.id": str(self.sim["id"]),
            "belt.dialect": self.dialect.name,
        }
        name = f"invoke_agent {attributes['gen_ai.agent.name']}"
        with (
            tracing.parented(**kept) if isinstance(kept, dict) else nullcontext(),
            tracing.span(name, attributes) as span,
        ):
            if not kept:
                execution.state["trace"] = tracing.current()
            try:
                yield span
            finally:
                self.end_turn()

    def trace_turn(self, index: int) -> None:
        """A model turn begins: its span (``belt.turn``) is current until the next one begins
        or the run stops being driven here."""
        if tracing.on():
            self.end_turn()
            self.turn_span = tracing.begin("belt.turn", {"belt.turn.index": index})

    def end_turn(self) -> None:
        """End the span of the model turn being taken, if any."""
        handle, self.turn_span = self.turn_span, None
        tracing.end(handle)

    def model_span(self, tokens: int | None) -> AbstractContextManager[Any]:
        """The span of one model call (GenAI ``chat``)."""
        if not tracing.on():
            return nullcontext()
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": SCRIPTED_MODEL,
            "gen_ai.usage.output_tokens": tokens,
        }
        return tracing.span(f"chat {SCRIPTED_MODEL}", attributes, kind="client")

    def tool_span(self, name: str, invocation: Mapping[str, Any]) -> AbstractContextManager[Any]:
        """The span of one tool call (GenAI ``execute_tool``): its hooks and its run."""
        if not tracing.on():
            return nullcontext()
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": str(invocation.get("tool_invocation_id") or invocation["id"]),
        }
        return tracing.span(f"execute_tool {name}", attributes)

    def stopped(self, end: End) -> bool:
        """Record a held or cancelled run on the simulation; True when the loop must stop."""
        if end == End.HELD:
            self.settle_status(self.held_status())
            return True
        if end == End.CANCELED:
            self.settle_status(SimStatus.CANCELED)
            return True
        return False

    def held_status(self) -> SimStatus:
        """Where a simulation whose run holds is: held when the run waits for input (a gate,
        an approval), else where its dialect holds runs (a Nexus attention hold)."""
        if self.current is not None:
            run = RunRecord.read(self.store, self.current)
            if run.state == AgentRunState.INPUT_REQUIRED:
                return SimStatus.HELD
        return self.dialect.held_status

    def update_sim(self, **changes: Any) -> None:
        """Persist changes to the simulation record."""
        self.sim = dict(merge_sim(self.store, self.sim["id"], changes))

    def settle_status(self, status: SimStatus) -> None:
        """Record where the loop stopped, unless a later turn was begun meanwhile (``belt
        serve`` appends turns to a simulation while the driver of the last one finishes)."""
        begun = self.sim["next_turn"]

        def apply(current: Sim) -> Sim:
            if current.get("next_turn") == begun:
                current["status"] = status.value
            return current

        self.sim = dict(change_sim(self.store, self.sim["id"], apply))

    # -- the run record ------------------------------------------------------------------------

    def create_run(
        self, index: int, state: dict[str, Any], *, standalone: bool = False, **fields: Any
    ) -> RunRecord:
        """A new working run of this simulation (of no chat when ``standalone``) in ``state``."""
        if self.sim.get("emulated"):
            fields["emulated"] = True
        return RunRecord.create(
            self.store,
            sim_id=str(self.sim["id"]),
            agent_id=self.agent_id,
            chat_id=None if standalone else self.recorder.chat_id,
            turn_index=index,
            execution=state,
            **fields,
        )

    def transition(self, execution: Execution, /, **changes: Any) -> None:
        """Change the run, unless it was stopped meanwhile (then Cancelled)."""
        if execution.run is not None:
            execution.run.transition(**changes)

    def save(self, execution: Execution) -> None:
        """Persist where the execution is, so a resumed or retried run goes on from there."""
        self.transition(execution, execution=execution.state)

    def hold(
        self,
        execution: Execution,
        chat_status: ChatStatus,
        *,
        state: str | None = None,
        **fields: Any,
    ) -> End:
        """The run waits for something outside (a gate, a retried hook, a client tool): it holds,
        in the dialect's held state unless ``state`` says otherwise (a run that waits for a
        client tool's result stays ``working``, as on the platform).

        It gives up its lease, unless this process waits at its gates (``--wait``). A run held at
        gates is tagged first, so a process killed in between leaves a run that is found.
        """
        held = state or self.dialect.held_state
        reason = fields.get("interrupt_reason") or ("attention" if "attention" in fields else None)
        attributes = {"belt.hold.state": held, "belt.hold.reason": reason}
        with tracing.span("belt.hold", attributes):
            if not self.waits():
                fields["lease"] = None
            if self.dialect.waits_for_gates and execution.run_id is not None:
                tag_gated(self.store, execution.run_id)
            with self.chat_step(execution):
                self.transition(execution, state=held, execution=execution.state, **fields)
                if execution.occupies_chat:
                    self.recorder.update_chat(status=chat_status.value)
        return End.HELD

    def complete(self, execution: Execution) -> End:
        """The run ends successfully."""
        with self.chat_step(execution):
            self.transition(
                execution, state=AgentRunState.COMPLETED.value, execution=execution.state
            )
            self.release_chat(execution)
        return End.COMPLETED

    def fail(self, execution: Execution, error: str) -> End:
        """The run fails: the chat records why (a run that wrote no answer gives the row its
        reply's id, so a client waiting for that message sees the run end)."""
        self.add_message(
            execution,
            role="event",
            message_id=self.unused_reply(execution.state),
            content=[
                run_event(
                    execution.run_id,
                    kind="run_failed",
                    state=AgentRunState.FAILED.value,
                    reason=error,
                    text=f"run failed: {error}",
                )
            ],
        )
        with self.chat_step(execution):
            self.transition(
                execution,
                state=AgentRunState.FAILED.value,
                error=error,
                execution=execution.state,
                lease=None,
            )
            self.release_chat(execution)
        return End.FAILED

    def unused_reply(self, state: dict[str, Any]) -> str | None:
        """The id a run set aside for its reply, while no message of the chat has it."""
        reply = state.get("reply")
        return reply if isinstance(reply, str) and reply not in self.recorder.by_id else None

    def claim_chat(self, execution: Execution) -> None:
        """The chat is busy with this run."""
        if execution.occupies_chat:
            self.recorder.update_chat(status=ChatStatus.BUSY.value, active_run_id=execution.run_id)

    def release_chat(self, execution: Execution) -> None:
        """The chat is idle again once the run that occupied it ends; an emulated run leaves the
        tag of runs its servers continue in the same step."""
        if execution.occupies_chat:
            self.recorder.release_chat(execution.run_id)
        if self.sim.get("emulated") and execution.run_id is not None:
            untag_emulated(self.store, execution.run_id)

    def chat_step(self, execution: Execution) -> AbstractContextManager[object]:
        """One step of the chat a run occupies: the run's state and the chat's status change
        together under the chat's lock, which every reader of the two takes
        (``belt.records.views.chat_state``), so no client sees a busy chat whose run has ended,
        or a held run in a chat still busy."""
        if not execution.occupies_chat:
            return nullcontext()
        return self.store.lock(CHAT, self.recorder.chat_id)

    # -- messages and the context --------------------------------------------------------------

    def add_message(self, execution: Execution, **options: Any) -> Message:
        """Record a message of ``execution`` (``new_message`` takes the ``options``)."""
        return self.add_messages([self.new_message(execution, **options)])[0]

    def add_event(self, execution: Execution, text: str, **event: Any) -> Message:
        """Record an event row of ``execution``: its ``text`` and its ``event`` fields."""
        return self.add_message(
            execution, role="event", content=[{"type": "event", "text": text, "event": event}]
        )

    def new_message(
        self,
        execution: Execution,
        *,
        role: str,
        content: list[dict[str, Any]],
        text: str | None = None,
        tokens: int | None = None,
        message_id: str | None = None,
        fields: dict[str, Any] | None = None,
        status: str = MessageStatus.READY,
        row: NewMessage | None = None,
        **sim: Any,
    ) -> NewMessage:
        """A message of ``execution`` to record (``add_messages``); ``text`` sizes it in tokens
        and bytes; ``row`` is the transcript row an injection's file holds."""
        if text is not None:
            sim["tokens"] = estimate_tokens(text) if tokens is None else tokens
            sim["bytes"] = utf8_size(text)
        return NewMessage(
            role=role,
            run_id=execution.run_id,
            content=content,
            status=status,
            sim={**execution.tags, **sim},
            message_id=message_id,
            fields=fields or {},
            row=row,
        )

    def add_messages(self, new: Sequence[NewMessage]) -> list[Message]:
        """Record messages in order, in one append to the chat (``Recorder.add_messages``)."""
        messages = self.recorder.add_messages(new)
        for message in messages:
            self.ledger.add(message)
        return messages

    def text_message(
        self, execution: Execution, role: str, text: str, **options: Any
    ) -> NewMessage:
        """A message of ``execution`` whose content is one text part, to record."""
        return self.new_message(
            execution, role=role, content=[{"type": "text", "text": text}], text=text, **options
        )

    def add_text(self, execution: Execution, role: str, text: str, **options: Any) -> Message:
        """Record a message of ``execution`` whose content is one text part."""
        return self.add_messages([self.text_message(execution, role, text, **options)])[0]

    def leave_context(self, message: Message, **flags: Any) -> None:
        """Take a message out of the context (and mark why); save it."""
        self.ledger.leave(message, **flags)
        self.recorder.save_message(message)

    def over_limit(self, execution: Execution) -> dict[str, Any] | None:
        """When the context is above its compaction threshold and a compaction would retire
        something: the trigger and overshoot (``compaction_trigger``, ``overshoot_*``)."""
        agent = self.scenario_doc.get("agent") or {}
        compact_at = float(agent.get("compact_at", 0.8))
        context = self.ledger.context(execution.scope)
        token_limit = int(int(agent.get("context_window", 128_000)) * compact_at)
        byte_window = agent.get("context_bytes")
        byte_limit = int(int(byte_window) * compact_at) if byte_window else None
        over_tokens = context.tokens > token_limit
        over_bytes = byte_limit is not None and context.bytes > byte_limit
        if not (over_tokens or over_bytes):
            return None
        if not self.ledger.has_retirable(execution.scope, execution.input_message_id):
            return None
        extra: dict[str, Any] = {
            "compaction_trigger": "token_limit" if over_tokens else "byte_limit",
            "overshoot_bytes": max(0, context.bytes - byte_limit) if byte_limit else 0,
        }
        if over_tokens:
            extra["overshoot_tokens"] = context.tokens - token_limit
        return extra

    def compact(self, execution: Execution) -> None:
        """Retire the context but the run's input, and put a compaction marker in its place."""
        retire = self.ledger.retirable(execution.scope, execution.input_message_id)
        if not retire:
            return
        tokens = size = 0
        for message in retire:
            tokens += int(message["sim"].get("tokens", 0))
            size += int(message["sim"].get("bytes", 0))
            self.leave_context(message, retired=True)
        summary = f"Summary of {len(retire)} earlier messages ({tokens} tokens, {size} bytes)."
        self.add_text(
            execution,
            "compaction",
            summary,
            fields={"compaction_meta": {"compacted_up_to_order": max(m["order"] for m in retire)}},
            retired_tokens=tokens,
            retired_bytes=size,
        )

    # -- recovery ------------------------------------------------------------------------------

    def recovered(self, execution: Execution, role: str, **match: Any) -> Message | None:
        """On a run taken over from a killed process: the message the interrupted step had
        already written (so it is not written twice), else None."""
        if not execution.recovering:
            return None
        for message in reversed(self.recorder.messages):
            if (
                message.get("agent_run_id") == execution.run_id
                and message["role"] == role
                and all((message.get("sim") or {}).get(k) == v for k, v in match.items())
            ):
                found: Message = message
                return found
        return None

    def reconcile_tools(self, execution: Execution, message: Message) -> None:
        """On a run taken over from a killed process: settle the invocations whose result was
        already written (a tool message) as that result says, so no tool runs twice."""
        if not execution.recovering:
            return
        results = {
            m.get("tool_call_id"): m
            for m in self.recorder.messages
            if m["role"] == "tool" and m.get("agent_run_id") == execution.run_id
        }
        for invocation in message.get("tool_invocations") or []:
            found = results.get(invocation["tool_invocation_id"])
            if found is None or invocation["status"] in SETTLED_TOOL_STATES:
                continue
            ready = found.get("status") == MessageStatus.READY
            invocation["status"] = (
                ToolInvocationStatus.COMPLETED.value if ready else ToolInvocationStatus.FAILED.value
            )
            invocation["result"] = " ".join(c.get("text") or "" for c in found.get("content") or [])

    # -- tools ---------------------------------------------------------------------------------

    def add_answer(
        self,
        execution: Execution,
        *,
        say: str | None,
        tokens: int | None,
        calls: list[ToolCallSpec],
        message_id: str | None = None,
        **sim: Any,
    ) -> Message:
        """The model's output for one request: its text and its pending tool invocations."""
        context = self.ledger.context(execution.scope)
        text = say or ""
        own = estimate_tokens(text) if tokens is None else tokens
        message_id = message_id or new_id("msg")
        return self.add_message(
            execution,
            role="assistant",
            message_id=message_id,
            content=[{"type": "text", "text": text}] if text else [],
            text=text,
            tokens=own,
            fields={"tool_invocations": invocations(calls, message_id)},
            context_tokens=context.tokens + own,
            context_bytes=context.bytes + utf8_size(text),
            **sim,
        )

    def finish_tool(
        self, execution: Execution, invocation: dict[str, Any], status: str, result: str
    ) -> None:
        """Complete a tool invocation: its result is a tool message.

        The assistant message that holds the invocation is saved once its tool calls are all
        settled (``save_message``), not after each one, so a model turn's cost does not grow with
        the square of its tool calls; until then the tool messages are the durable record.
        """
        invocation["status"] = status
        invocation["result"] = result
        self.add_text(
            execution,
            "tool",
            result,
            fields={"tool_call_id": invocation["tool_invocation_id"]},
            status=MessageStatus.READY
            if status == ToolInvocationStatus.COMPLETED
            else MessageStatus.FAILED,
        )


def stop_run(
    store: Store, sim: dict[str, Any], dialect: type[Dialect], run_id: str, *, force: bool
) -> dict[str, Any]:
    """Cancel a run: its pending gates or hook tasks are cancelled and it will not resume."""
    how = "force-stopped" if force else "stopped"
    # Stamped on the simulation's clock, if it has one (a held run's, as last recorded).
    stamp = sim.get("clock")
    on_clock = VirtualClock(parse_timestamp(stamp)) if isinstance(stamp, str) else None
    # The run's end and the chat's idle state are one step for the chat's readers (its lock).
    with clock.using(on_clock), store.lock(CHAT, str(sim["chat_id"])):
        # The run is cancelled before its pending work, so a simulation waiting on that work stops
        # without ever applying a late result.
        run = cancel_run(store, run_id, force=force, how=how, hint=dialect.stop_hint)
        text, kept = dialect.cancel_pending(store, sim, run, how)
        run = merge_run(store, run_id, kept)
        recorder = Recorder(store, str(sim["chat_id"]))
        for message in recorder.messages:
            if message.get("agent_run_id") != run_id:
                continue
            calls = message.get("tool_invocations") or []
            open_calls = [call for call in calls if call["status"] in OPEN_TOOL_STATES]
            for invocation in open_calls:
                invocation["status"] = ToolInvocationStatus.CANCELLED.value
            if open_calls:
                recorder.save_message(message)
        reply = (run.get("execution") or {}).get("reply")
        recorder.add_message(
            role="event",
            run_id=run_id,
            message_id=reply if isinstance(reply, str) and reply not in recorder.by_id else None,
            content=[
                run_event(
                    run_id,
                    kind="run_ended",
                    state=AgentRunState.CANCELED.value,
                    reason=f"{how} by user",
                    text=text,
                )
            ],
            sim=dialect.run_tags(run),
        )
        if recorder.chat.get("active_run_id") == run_id:
            recorder.update_chat(status=ChatStatus.IDLE.value, active_run_id=None)
        untag_emulated(store, run_id)
    untag_gated(store, run_id)
    merge_sim(store, str(sim["id"]), {"status": SimStatus.CANCELED.value})
    dialect.mark_ended(store, sim, run_id, End.CANCELED)
    return run_dto(run, dialect.run_fields())


SETTLED_TOOL_STATES = frozenset({"completed", "failed", "cancelled"})
"""Tool invocation states (``ToolInvocationStatus``) a tool call ends in."""
OPEN_TOOL_STATES = frozenset({"pending", "in_progress", "awaiting_approval", "awaiting_input"})
"""Tool invocation states a stopped run's tool calls are cancelled from."""
