"""The run record as the driver changes it, together with the status of the chat it occupies;
every change is cancel-safe (``Cancelled`` once ``belt sim stop`` stopped the run)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from belt.engine.execution import End, Execution
from belt.outgoing import tracing
from belt.records.chats import CHAT
from belt.records.messages import run_event
from belt.records.runs import EMULATED_RUNS, GATED_RUNS, RunRecord, mark_run
from belt.wire.enums import AgentRunState, ChatStatus

if TYPE_CHECKING:
    from belt.engine.simulation import Simulation


class RunSteps:
    """The changes to a simulation's runs, and to the chat each occupies."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def create_run(
        self, index: int, state: dict[str, Any], *, standalone: bool = False, **fields: Any
    ) -> RunRecord:
        """A new working run of this simulation (of no chat when ``standalone``) in ``state``."""
        if self.sim.sim.get("emulated"):
            fields["emulated"] = True
        return RunRecord.create(
            self.sim.store,
            sim_id=str(self.sim.sim["id"]),
            agent_id=self.sim.agent_id,
            chat_id=None if standalone else self.sim.recorder.chat_id,
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
        """The run waits for something outside in ``state`` (default: the dialect's held state),
        tagged as held first; it gives up its lease unless this process waits (``--wait``)."""
        held = state or self.sim.dialect.held_state
        reason = fields.get("interrupt_reason") or ("attention" if "attention" in fields else None)
        with tracing.span("belt.hold", {"belt.hold.state": held, "belt.hold.reason": reason}):
            if not self.sim.holds.waits():
                fields["lease"] = None
            if self.sim.dialect.waits_for_gates and execution.run_id is not None:
                mark_run(self.sim.store, GATED_RUNS, execution.run_id)
            with self.chat_step(execution):
                self.transition(execution, state=held, execution=execution.state, **fields)
                if execution.occupies_chat:
                    self.sim.recorder.update_chat(status=chat_status.value)
        return End.HELD

    def complete(self, execution: Execution) -> End:
        """The run ends successfully."""
        return self.end(execution, End.COMPLETED, state=AgentRunState.COMPLETED.value)

    def fail(self, execution: Execution, error: str) -> End:
        """The run fails: the chat records why (in the reply's row, if it wrote no answer)."""
        self.sim.transcript.add_message(
            execution,
            role="event",
            message_id=self.sim.transcript.unused_reply(execution.state),
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
        return self.end(
            execution, End.FAILED, state=AgentRunState.FAILED.value, error=error, lease=None
        )

    def end(self, execution: Execution, end: End, **changes: Any) -> End:
        """The run ends (``changes`` say how), and the chat it occupied is idle again."""
        with self.chat_step(execution):
            self.transition(execution, execution=execution.state, **changes)
            self.release_chat(execution)
        return end

    def claim_chat(self, execution: Execution) -> None:
        """The chat is busy with this run."""
        if execution.occupies_chat:
            self.sim.recorder.update_chat(
                status=ChatStatus.BUSY.value, active_run_id=execution.run_id
            )

    def release_chat(self, execution: Execution) -> None:
        """The chat is idle again once its run ends (an emulated run leaves its tag too)."""
        if execution.occupies_chat:
            self.sim.recorder.release_chat(execution.run_id)
        if self.sim.sim.get("emulated") and execution.run_id is not None:
            mark_run(self.sim.store, EMULATED_RUNS, execution.run_id, on=False)

    def chat_step(self, execution: Execution) -> AbstractContextManager[object]:
        """One step of a run's chat: run state and chat status change together under its lock."""
        if not execution.occupies_chat:
            return nullcontext()
        return self.sim.store.lock(CHAT, self.sim.recorder.chat_id)
