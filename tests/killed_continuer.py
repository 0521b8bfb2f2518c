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

from belt.engine.api import resume_settled
from belt.engine.simulation import End, Execution, SimStatus, Simulation
from belt.store import open_store


def die(*_: Any, **__: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(point: str) -> None:
    update_sim = Simulation.update_sim
    if point == "leased":
        Simulation.go_on = die  # type: ignore[method-assign]
    elif point in ("working", "begun"):
        field = "status" if point == "working" else "next_turn"

        def update_or_die(self: Simulation, **changes: Any) -> None:
            if field in changes:
                die()
            update_sim(self, **changes)

        Simulation.update_sim = update_or_die  # type: ignore[method-assign]
    elif point == "driving":
        Simulation.drive = die  # type: ignore[method-assign,assignment]
    elif point.startswith("step-"):
        left = int(point.removeprefix("step-"))
        save = Simulation.save

        def save_or_die(self: Simulation, execution: Execution) -> None:
            nonlocal left
            save(self, execution)
            left -= 1
            if left == 0:
                die()

        Simulation.save = save_or_die  # type: ignore[method-assign]
    elif point == "ended":
        complete = Simulation.complete

        def complete_and_die(self: Simulation, execution: Execution) -> End:
            complete(self, execution)
            die()
            return End.COMPLETED

        Simulation.complete = complete_and_die  # type: ignore[method-assign]
    elif point == "finished":
        settle = Simulation.settle_status

        def settle_or_die(self: Simulation, status: SimStatus) -> None:
            if status == SimStatus.FINISHED:
                die()
            settle(self, status)

        Simulation.settle_status = settle_or_die  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown point {point!r}")
    resume_settled(open_store(), emulated=False)
    raise SystemExit(f"the continuer never reached {point!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
