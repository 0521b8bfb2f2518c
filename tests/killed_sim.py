"""Run a scenario's first turn, begin the next in part, and die with SIGKILL: a simulation whose
process was killed at a chosen point between two runs (``python -m tests.killed_sim FILE POINT``).

POINT is where the process dies once the first run has ended:

- ``between``: before the second turn is begun (no second run exists);
- ``listed``: after the second turn's run is listed on the simulation, before it is written;
- ``begun``: after the second turn's run is created and its input written, before the turn is
  counted on the simulation;
- ``input``: after the second turn's run is created, before its input message is written;
- ``unlisted``: after the second turn's answer is written, before the chat's index lists it;
- ``injected``: after the second turn's injection (with the row it holds) is listed, before the
  turn's answer is written.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from belt import dialects
from belt.engine.entrypoints import simulation_options
from belt.engine.scenario import read_scenario
from belt.engine.simulation import Execution, Simulation
from belt.records.messages import MESSAGE, MESSAGES
from belt.records.runs import RUN
from belt.store import Store, open_store


def die(*_: Any, **__: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(path: str, point: str) -> None:
    loaded = read_scenario(Path(path))
    store = open_store()
    dialect = dialects.get(loaded.dialect).loop()
    options = simulation_options(store, dialect, executors=[], fail_closed=False, report=None)
    sim = dialect.create(store, loaded, fail_closed=False, routes=options.routes)
    simulation = Simulation(store, sim, dialect, options)
    simulation.loop.drive_waiting(simulation.loop.start_turn())
    if point == "begun":
        simulation.update_sim = die  # type: ignore[method-assign]
    elif point == "input":
        original = dialect.record_input  # type: ignore[attr-defined]

        def record_input(self: Any, execution: Execution) -> None:
            if execution.turn_index == 1:
                die()
            original(self, execution)

        dialect.record_input = record_input  # type: ignore[attr-defined]
    elif point == "listed":
        create = Store.create

        def create_or_die(self: Store, kind: str, id: str, data: dict[str, Any]) -> None:
            if kind == RUN:
                die()
            create(self, kind, id, data)

        Store.create = create_or_die  # type: ignore[method-assign]
    elif point == "unlisted":
        link_all = Store.link_all

        def link_or_die(self: Store, index: str, owner: str, members: Sequence[str]) -> None:
            if index == MESSAGES and any(
                self.read(MESSAGE, member)["role"] == "assistant" for member in members
            ):
                die()
            link_all(self, index, owner, members)

        Store.link_all = link_or_die  # type: ignore[method-assign]
        simulation.loop.drive_waiting(simulation.loop.start_turn())
    elif point == "injected":
        link_all = Store.link_all

        def link_then_die(self: Store, index: str, owner: str, members: Sequence[str]) -> None:
            link_all(self, index, owner, members)
            if index == MESSAGES:
                for member in members:
                    message = self.read(MESSAGE, member)
                    if message["role"] == "injection" and message["sim"]["injection"]["turn"]:
                        die()

        Store.link_all = link_then_die  # type: ignore[method-assign]
        simulation.loop.drive_waiting(simulation.loop.start_turn())
    elif point != "between":
        raise SystemExit(f"unknown point {point!r}")
    if point in ("begun", "input", "listed"):
        simulation.loop.start_turn()
    die()


if __name__ == "__main__":
    main(*sys.argv[1:])
