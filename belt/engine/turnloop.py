"""The turn loop: each scenario turn is one run, driven step by step (each saved) until it ends,
holds or is cancelled; a held run goes on (``belt.engine.holds``), then the turns left."""

from __future__ import annotations

from typing import TYPE_CHECKING

from belt.engine.execution import End, Execution, SimStatus
from belt.engine.simrecord import last_run_ended
from belt.errors import Conflict
from belt.outgoing import tracing
from belt.records.runs import Cancelled, RunRecord, parked, read_run, take_lease, take_over_ended
from belt.records.sims import Sim, change_sim
from belt.store import clock
from belt.store.clock import parse_duration
from belt.wire.enums import AgentRunState

if TYPE_CHECKING:
    from belt.engine.simulation import Simulation


class TurnLoop:
    """Drives a simulation's runs, one scenario turn after another."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def resume(self, run_id: str) -> list[str]:
        """Continue a held run (its lease taken first: one process goes on), then the turns left."""
        last = last_run_ended(self.sim.store, self.sim.sim)
        if last is not None and last["id"] == run_id:
            # The turn loop goes on after the run, if the process driving it is gone.
            take_over_ended(self.sim.store, run_id)
            self.sim.current = run_id
            return self.run_turns()
        run, interrupted = take_lease(self.sim.store, run_id)
        self.sim.current = run_id
        self.turn_begun(run)
        held = run.state == self.sim.dialect.held_state or parked(run.data)
        if self.sim.holds.waits() and held and not interrupted:
            try:
                self.sim.holds.wait_for_gates(run)  # --wait: attach to the gates it holds at now
            except Cancelled:
                raise Conflict(f"run {run_id} was stopped") from None
        execution = self.sim.dialect.resumable(run, interrupted)
        execution.recovering = interrupted
        self.sim.holds.go_on(execution)
        return self.drive_on(execution)

    def run_turns(self) -> list[str]:
        """The turn loop: each remaining scenario turn is one run."""
        executed: list[str] = []
        while int(self.sim.sim["next_turn"]) < self.sim.turn_count():
            if (execution := self.start_turn()).run is not None:
                executed.append(execution.run.id)
            if self.stopped(self.drive_waiting(execution)):
                return executed
        self.settle_status(SimStatus.FINISHED)
        return executed

    def start_turn(self) -> Execution:
        """Begin the next scenario turn: its input is recorded and its run created, not driven."""
        index = int(self.sim.sim["next_turn"])
        after = self.sim.turn_doc(index).get("after")
        with clock.using(self.sim.clock):
            if isinstance(after, str) and self.sim.clock is not None:
                self.sim.clock.advance(parse_duration(after, f"turns[{index}].after"))
            execution = self.sim.dialect.begin(index)
            self.sim.current = execution.run_id
            # Counted once its run exists: a process killed in between leaves a run that `resume`
            # takes over (and counts, ``turn_begun``), never a turn begun without one.
            self.sim.update_sim(next_turn=index + 1, status=SimStatus.RUNNING.value)
        return execution

    def turn_begun(self, run: RunRecord) -> None:
        """Count the turn of a resumed run as begun, if its process died before it could."""
        index = run.data.get("turn_index")
        if isinstance(index, int) and int(self.sim.sim["next_turn"]) <= index:
            self.sim.update_sim(next_turn=index + 1)

    def drive_on(self, execution: Execution) -> list[str]:
        """Drive a run, then the turns left unless it stopped; returns the runs executed."""
        if self.stopped(self.drive_waiting(execution)):
            return [str(execution.run_id)]
        return [str(execution.run_id), *self.run_turns()]

    def drive_waiting(self, execution: Execution) -> End:
        """Drive a run; carry on each time its gates are all settled (scripted, or ``--wait``)."""
        end = self.drive(execution)
        while end == End.HELD and execution.run is not None:
            settled = self.sim.dialect.waits_for_gates and (
                self.sim.holds.settle_scripted(execution) or self.sim.holds.wait_out(execution)
            )
            if not settled and not self.sim.holds.waits():
                return end
            if not settled:
                try:
                    self.sim.holds.wait_for_gates(execution.run)
                except Cancelled:
                    return End.CANCELED
            elif not self.sim.holds.waits():
                try:
                    take_lease(self.sim.store, execution.run.id)  # hold() gave it up
                except Conflict:
                    return end  # another process took the run on meanwhile
            execution = self.sim.dialect.resumable(execution.run, False)
            self.sim.holds.go_on(execution)
            end = self.drive(execution)
        return end

    def drive(self, execution: Execution) -> End:
        """Take steps until the run ends, holds or is cancelled, saving the run after each."""
        with self.sim.spans.traced(execution) as span:
            try:
                while True:
                    if execution.run is not None:
                        execution.run.check_cancelled()
                    end = self.sim.dialect.step(execution)
                    execution.recovering = False
                    if end is not None:
                        break
                    self.sim.steps.save(execution)
            except Cancelled:
                end = End.CANCELED
            self.sim.dialect.ended(execution, end)
            tracing.set_attributes(span, {"belt.run.end": end.value})
        return end

    def stopped(self, end: End) -> bool:
        """Record a held or cancelled run on the simulation; True when the loop must stop."""
        if end in (End.HELD, End.CANCELED):
            self.settle_status(self.held_status() if end == End.HELD else SimStatus.CANCELED)
        return end in (End.HELD, End.CANCELED)

    def held_status(self) -> SimStatus:
        """Held when the run waits for input (a gate, an approval), else the dialect's status."""
        if self.sim.current is not None:
            if read_run(self.sim.store, self.sim.current)["state"] == AgentRunState.INPUT_REQUIRED:
                return SimStatus.HELD
        return self.sim.dialect.held_status

    def settle_status(self, status: SimStatus) -> None:
        """Record where the loop stopped, unless a later turn was begun meanwhile (belt serve)."""
        begun = self.sim.sim["next_turn"]

        def apply(current: Sim) -> Sim:
            if current.get("next_turn") == begun:
                current["status"] = status.value
            return current

        self.sim.sim = change_sim(self.sim.store, self.sim.sim["id"], apply)
