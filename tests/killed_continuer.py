"""Take one pass of ``belt serve --resume`` over the runs held at gates and die with SIGKILL at a
chosen point of continuing one (``python -m tests.killed_continuer POINT``).

POINT is where the continuer dies:

- ``leased``: once it holds the run's lease, before the run is working again;
- ``working``: once the run is working again and occupies its chat, before its simulation is
  marked running;
- ``driving``: once all that is written, before the run's first step;
- ``step-N``: once the N-th step of the continuation is saved (N from 1; the steps of the
  simulation's later runs count too);
- ``ended``: once the continued run has completed, before the next turn is begun;
- ``begun``: once the next turn's run is created, before the turn is counted;
- ``finished``: once the last run has completed, before the simulation is marked finished.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from belt.engine.entrypoints import resume_settled
from belt.engine.holds import Holds
from belt.engine.runsteps import RunSteps
from belt.engine.simulation import End, Execution, SimStatus, Simulation
from belt.engine.turnloop import TurnLoop
from belt.store import open_store


def die(*_: Any, **__: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(point: str) -> None:
    update_sim = Simulation.update_sim
    if point == "leased":
        Holds.go_on = die  # type: ignore[method-assign]
    elif point in ("working", "begun"):
        field = "status" if point == "working" else "next_turn"

        def update_or_die(self: Simulation, **changes: Any) -> None:
            if field in changes:
                die()
            update_sim(self, **changes)

        Simulation.update_sim = update_or_die  # type: ignore[method-assign]
    elif point == "driving":
        TurnLoop.drive = die  # type: ignore[method-assign,assignment]
    elif point.startswith("step-"):
        left = int(point.removeprefix("step-"))
        save = RunSteps.save

        def save_or_die(self: RunSteps, execution: Execution) -> None:
            nonlocal left
            save(self, execution)
            left -= 1
            if left == 0:
                die()

        RunSteps.save = save_or_die  # type: ignore[method-assign]
    elif point == "ended":
        complete = RunSteps.complete

        def complete_and_die(self: RunSteps, execution: Execution) -> End:
            complete(self, execution)
            die()
            return End.COMPLETED

        RunSteps.complete = complete_and_die  # type: ignore[method-assign]
    elif point == "finished":
        settle = TurnLoop.settle_status

        def settle_or_die(self: TurnLoop, status: SimStatus) -> None:
            if status == SimStatus.FINISHED:
                die()
            settle(self, status)

        TurnLoop.settle_status = settle_or_die  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown point {point!r}")
    resume_settled(open_store(), emulated=False)
    raise SystemExit(f"the continuer never reached {point!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
