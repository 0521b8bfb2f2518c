"""Holds and resumes: a held run goes on once what holds it is settled, by its scenario's
resolutions, by time passing (``[[turns.wait]]``), or, with ``--wait``, by anyone."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from belt.engine.execution import Execution, SimStatus
from belt.engine.scenario import resolution_for
from belt.errors import Conflict
from belt.records.interrupts import last_settled, list_interrupts, resolve_interrupt, sweep
from belt.records.runs import Cancelled, RunRecord
from belt.store import clock
from belt.store.clock import format_duration, parse_timestamp, timestamp
from belt.wire.dto import InterruptJSON
from belt.wire.enums import AgentRunState

if TYPE_CHECKING:
    from belt.engine.simulation import Simulation

GATE_POLL = 0.1  # seconds between two looks at a waiting run's gates
LEASE_RENEWAL = 10.0  # seconds between two renewals of a waited-on run's lease


class Holds:
    """How a simulation's held runs go on."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.waited: dict[int, int] = {}  # per turn, the ``[[turns.wait]]`` used

    def go_on(self, execution: Execution) -> None:
        """A held run goes on: working again, it occupies its chat (it stays tagged as held)."""
        self.catch_up(execution)
        try:
            with self.sim.steps.chat_step(execution):
                self.sim.steps.transition(
                    execution, state=AgentRunState.WORKING.value, **self.sim.dialect.resume_fields()
                )
                self.sim.steps.claim_chat(execution)
        except Cancelled:
            raise Conflict(f"run {execution.run_id} was stopped") from None
        self.sim.update_sim(status=SimStatus.RUNNING.value)

    def catch_up(self, execution: Execution) -> None:
        """Move the virtual clock on to when the run's gates were settled, if later (a sweep
        ``--at T`` settles at T, and what the run does next is dated no earlier)."""
        if self.sim.clock is None or execution.run is None:
            return
        settled = last_settled(store=self.sim.store, run_id=execution.run.id)
        before = self.sim.clock.now()
        if settled is not None and settled > before:
            self.clock_row(execution, before, self.sim.clock.move_to(settled))

    def waits(self) -> bool:
        """True when this process stays at a run's gates until they are settled (``--wait``)."""
        return self.sim.options.wait and self.sim.dialect.waits_for_gates

    def settle_scripted(self, execution: Execution) -> bool:
        """Resolve a run's gates by its turn's ``[[turns.resolve]]``; True when none is pending."""
        specs = self.sim.turn_doc(execution.turn_index).get("resolve") or []
        if not specs or execution.run is None:
            return False
        pending = list_interrupts(store=self.sim.store, run_id=execution.run.id)
        for interrupt in pending:
            if (spec := resolution_for(specs, interrupt)) is None:
                continue
            try:
                resolve_interrupt(
                    store=self.sim.store,
                    interrupt_id=interrupt["id"],
                    decision=spec["decision"],
                    data=spec.get("data"),
                    by={"how": "scenario", "sim": str(self.sim.sim["id"])},
                )
            except Conflict:
                continue  # settled meanwhile, by someone else or by the sweep
            self.sim.transcript.add_event(
                execution,
                f"gate {interrupt['id']} resolved {spec['decision']} by the scenario",
                type="scripted_resolution",
                interrupt_id=interrupt["id"],
                resolution=spec["decision"],
            )
        return not list_interrupts(store=self.sim.store, run_id=execution.run.id)

    def wait_out(self, execution: Execution) -> bool:
        """Let time pass as the turn's ``[[turns.wait]]`` says, sweeping overdue gates; True when
        none is left pending."""
        waits = self.sim.turn_doc(execution.turn_index).get("wait") or []
        if execution.run is None or self.sim.clock is None:
            return False
        run_id = execution.run.id
        while (used := self.waited.get(execution.turn_index, 0)) < len(waits):
            spec = waits[used]
            self.waited[execution.turn_index] = used + 1
            if not (pending := list_interrupts(store=self.sim.store, run_id=run_id)):
                return True
            before = self.sim.clock.now()
            if spec.get("until") == "expiry":
                due = min(parse_timestamp(str(i["expires_at"])) for i in pending)
                moment = self.sim.clock.move_to(max(due, before))
            else:
                moment = self.sim.clock.advance(timedelta(seconds=spec.get("seconds") or 0))
            self.clock_row(execution, before, moment)
            for settled in sweep(store=self.sim.store, now=moment, run_id=run_id):
                self.expiry_row(execution, settled)
            if not list_interrupts(store=self.sim.store, run_id=run_id):
                return True
        return False

    def clock_row(self, execution: Execution, before: datetime, moment: datetime) -> None:
        """The transcript's row for time passing on the virtual clock."""
        self.sim.transcript.add_event(
            execution,
            f"clock +{format_duration(moment - before)} → {timestamp(moment)}",
            **{"type": "clock", "from": timestamp(before), "to": timestamp(moment)},
        )

    def expiry_row(self, execution: Execution, interrupt: InterruptJSON) -> None:
        """The transcript's row for a gate or approval the sweep settled at its deadline."""
        kind = "approval" if interrupt.get("reason") == "tool_approval" else "gate"
        self.sim.transcript.add_event(
            execution,
            f"{kind} {interrupt['id']} expired → {interrupt['resolution']}",
            type="expired",
            interrupt_id=interrupt["id"],
            **{k: interrupt[k] for k in ("resolution", "expires_at", "resolved_at")},
        )

    def wait_for_gates(self, run: RunRecord) -> None:
        """Hold on to the run until its gates are settled (due ones swept), renewing its lease."""
        told: set[str] = set()  # the gates last reported: reported again when they change
        renewed = time.monotonic()
        while True:
            if not (pending := list_interrupts(store=self.sim.store, run_id=run.id)):
                if told and self.sim.options.notify is not None:
                    self.sim.options.notify({"kind": "settled", "run_id": run.id})
                return
            run.check_cancelled()
            if any(parse_timestamp(str(i["expires_at"])) <= clock.now() for i in pending):
                # On a virtual clock, only this run's: others' deadlines may be wall time.
                sweep(store=self.sim.store, run_id=run.id if clock.current() else None)
                continue
            if {str(i["id"]) for i in pending} != told and self.sim.options.notify is not None:
                self.sim.options.notify({"kind": "gates", "run_id": run.id, "pending": pending})
                told = {str(i["id"]) for i in pending}
            if time.monotonic() - renewed > LEASE_RENEWAL:
                run.transition()
                renewed = time.monotonic()
            time.sleep(GATE_POLL)
