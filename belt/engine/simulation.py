"""The simulation driver: one turn loop, one way to hold, cancel, finish and resume, both dialects.

Each scenario turn is one run; ``Simulation`` owns the parts (turn loop, holds, run steps,
transcript, spans) and a dialect decides each step. A run's progress is on its record, so a held
or interrupted run goes on from there, and once ``belt sim stop`` cancels it nothing brings it back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pydantic import ValidationError

from belt.engine.chatlog import Transcript
from belt.engine.execution import End as End
from belt.engine.execution import Execution as Execution
from belt.engine.execution import Options as Options
from belt.engine.execution import SimStatus as SimStatus
from belt.engine.holds import GATE_POLL as GATE_POLL
from belt.engine.holds import Holds
from belt.engine.runspans import RunSpans
from belt.engine.runsteps import RunSteps
from belt.engine.scenario import StoredTurn
from belt.engine.simrecord import record_simulation as record_simulation
from belt.engine.simrecord import refuse_pending as refuse_pending
from belt.engine.turnloop import TurnLoop
from belt.errors import InvalidInput
from belt.records.messages import Recorder
from belt.records.runs import SIM_RUNS, Run, RunRecord, release_lease
from belt.records.sims import SCENARIO, Sim, merge_sim, read_scenario, read_sim
from belt.store import clock
from belt.store.clock import VirtualClock, parse_timestamp, timestamp
from belt.wire.validate import model_problems

if TYPE_CHECKING:
    from pydantic import BaseModel

    from belt.dialects.simreport import ReportExtras
    from belt.engine.dispatch import Route
    from belt.store import Store

ScenarioModel = TypeVar("ScenarioModel", bound="BaseModel")


def clock_start(scenario: Any, given: datetime | None) -> VirtualClock | None:
    """The virtual clock a new simulation runs on (``given``: ``--clock``); None: wall time."""
    start = given or scenario.clock
    # A scenario that moves time (``after``, ``[[turns.wait]]``) starts its clock at wall time.
    if start is None and any(turn.after is not None or turn.wait for turn in scenario.turns):
        start = clock.utcnow()
    return VirtualClock(start) if start is not None else None


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
        """The execution of a held (or ``interrupted``) run, to go on (Conflict: not yet)."""

    def resume_fields(self) -> dict[str, None]:
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
    ) -> Sim:
        """Record a new simulation of a loaded scenario of this dialect; return its record."""

    @classmethod
    def run_fields(cls) -> tuple[str, ...]:
        """The fields a run of this dialect adds to its AgentRunDTO in reports."""

    @classmethod
    def run_tags(cls, run: Run) -> dict[str, object]:
        """The ``sim`` tags of a message that belongs to ``run``."""

    @classmethod
    def cancel_pending(
        cls, store: Store, sim: Sim, run: Run, how: str
    ) -> tuple[str, dict[str, object]]:
        """Cancel a stopped run's pending work; returns its transcript text and fields to keep."""

    @classmethod
    def mark_ended(cls, store: Store, sim: Sim, run_id: str | None, end: End) -> None:
        """Record on the simulation how one of its runs stopped."""

    @classmethod
    def report_extras(cls, store: Store, sim: Sim, runs: list[Run]) -> ReportExtras:
        """What a report of this dialect adds (``simulation`` keys are merged in)."""


class Simulation:
    """Drives one simulation's runs, writing everything to the store as it happens."""

    def __init__(
        self,
        store: Store,
        sim: Mapping[str, object],
        dialect: type[Dialect],
        options: Options | None = None,
    ) -> None:
        self.store = store
        self.sim: Sim = read_sim(store, str(sim["id"]))  # as this process last wrote it
        self.options = options or Options()
        self.scenario_doc = read_scenario(store, self.sim["id"])
        # Read what the loop will append to before acting, so a damaged index is reported
        # before a turn runs, not after.
        store.members(SIM_RUNS, self.sim["id"])
        self.agent_id = str(self.sim["agent_id"])
        self.current: str | None = None  # the run this process drives (or last drove)
        self.clock = self.own_clock()
        self.transcript = Transcript(
            Recorder(store, self.sim["chat_id"]), self.scenario_doc.get("agent") or {}
        )
        self.recorder, self.ledger = self.transcript.recorder, self.transcript.ledger
        self.spans = RunSpans(self.sim, dialect.name)
        self.steps = RunSteps(self)
        self.holds = Holds(self)
        self.loop = TurnLoop(self)
        self.dialect: Dialect = dialect(self)

    def own_clock(self) -> VirtualClock | None:
        """The simulation's virtual clock, kept on its record; None: the clock in force."""
        if not isinstance(stamp := self.sim.get("clock"), str):
            return None
        return VirtualClock(
            parse_timestamp(stamp), on_move=lambda moment: self.update_sim(clock=timestamp(moment))
        )

    @contextlib.contextmanager
    def driving(self) -> Iterator[None]:
        """Drive runs on the simulation's clock; Ctrl-C gives up the run's lease for a resume."""
        with clock.using(self.clock):
            try:
                yield
            except KeyboardInterrupt:
                if self.current is not None:
                    release_lease(self.store, self.current)
                raise
            finally:
                self.dialect.close()

    def run(self) -> list[str]:
        """Run the scenario's remaining turns; returns the ids of the runs executed."""
        with self.driving():
            return self.loop.run_turns()

    def resume(self, run_id: str) -> list[str]:
        """Continue a held run, then the remaining turns (``TurnLoop.resume``)."""
        with self.driving():
            return self.loop.resume(run_id)

    def drive_started(self, execution: Execution) -> list[str]:
        """Drive a run ``start_turn`` began, then the turns left; returns the runs executed."""
        with self.driving():
            return self.loop.drive_on(execution)

    def update_sim(self, **changes: Any) -> None:
        """Persist changes to the simulation record."""
        self.sim = merge_sim(self.store, self.sim["id"], changes)

    def turn_doc(self, index: int) -> StoredTurn:
        """Scenario turn ``index`` as stored ({} for one the scenario does not have)."""
        turns = self.scenario_doc["turns"]
        found: StoredTurn = turns[index] if 0 <= index < len(turns) else {}
        return found if isinstance(found, dict) else {}

    def scenario_as(self, model: type[ScenarioModel]) -> ScenarioModel:
        """The stored scenario, checked as ``model``; a record that is not one is damaged."""
        try:
            return model.model_validate(self.scenario_doc)
        except ValidationError as exc:
            path = self.store.path(SCENARIO, str(self.sim["id"]))
            raise InvalidInput(
                f"{path}: damaged store file: it is not the scenario belt stored: "
                f"{model_problems(exc, model=model)[0]}",
                hint="belt leaves a damaged file as it is; restore it, or stop the run",
            ) from None

    def turn_count(self) -> int:
        """How many turns the scenario scripts."""
        return len(self.scenario_doc["turns"])
