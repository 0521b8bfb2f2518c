"""Child simulations: the chats hooks start beside a simulation (task chats, review branches),
each linked to its parent and run in the background; the parent waits for all of them before
it ends and records their failures in the order they started."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from belt.engine.simulation import Options, SimStatus, Simulation
from belt.errors import BeltError
from belt.records.ids import new_id, now_iso
from belt.records.runs import SIM_RUNS, Run, listed_runs, read_run
from belt.records.sims import SIM_CHILDREN, Sim, create_child_sim, read_sim
from belt.wire.enums import AgentRunState

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from belt.dialects.simreport import Child, ReportRun
    from belt.engine.scenario import StoredTurn
    from belt.engine.simulation import Dialect
    from belt.store import Store

WORKERS = 4

After = Callable[[list[Run]], str | None]
"""What to do once a child's runs ended: an error to record, or None."""


@dataclass(frozen=True)
class ChildOrigin:
    """Where a child was started: the parent's run, and the hook and handler that started it."""

    parent_run_id: str | None
    hook_event: str
    handler: str
    handler_type: str


def unfinished(runs: list[Run], *, what: str) -> str | None:
    """Why a child's runs did not all complete (``what`` names the child), or None."""
    for run in runs:
        if run["state"] != AgentRunState.COMPLETED:
            return f"{what} run {run['id']} ended {run['state']}: {run.get('error')}"
    return None


class Children:
    """Runs the child simulations of one simulation in the background."""

    def __init__(
        self, simulation: Simulation, dialect: type[Dialect], *, workers: int = WORKERS
    ) -> None:
        self.simulation = simulation
        self.dialect = dialect
        self.workers = workers
        self._lock = threading.Lock()
        self._started: list[Future[tuple[ChildOrigin, str] | None]] = []
        self._pool: ThreadPoolExecutor | None = None

    def record(
        self,
        *,
        kind: str,
        chat_id: str,
        name: str,
        agent_id: str,
        turn: StoredTurn,
        link: Mapping[str, object],
        **fields: object,
    ) -> Sim:
        """The child simulation of one chat: one turn, no hooks, linked to its parent."""
        parent = self.simulation.sim
        scenario = {"dialect": "platform", "agent": {"name": name}, "chat": {}, "turns": [turn]}
        sim: dict[str, Any] = {"id": new_id("sim"), "dialect": "platform", "kind": kind}
        sim |= {"source": parent.get("source"), "hooks_file": None, "name": name}
        sim |= {"agent_id": agent_id, "chat_id": chat_id, "next_turn": 0}
        sim |= {"status": SimStatus.RUNNING.value, "created_at": now_iso(), "hooks": []}
        sim["fail_closed"] = False
        sim["parent"] = {"sim_id": parent["id"], "chat_id": parent["chat_id"], **link}
        return create_child_sim(self.simulation.store, sim | fields, scenario)

    def start(
        self,
        sim: Sim,
        *,
        describe: ChildOrigin,
        after: After,
        before: Callable[[], None] | None = None,
    ) -> None:
        """Run the child ``sim`` in the background (``before`` it; ``after``: judge its runs)."""
        # A child runs on its parent's clock (a virtual clock is a context variable).
        context = contextvars.copy_context()
        with self._lock:
            if self._pool is None:
                # Start-up: the pool (and the logging it loads) once a child starts.
                from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - a platform run loads no thread pool

                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="belt-child")
            run = self._pool.submit(context.run, self._run, sim, describe, after, before)
            self._started.append(run)

    def _run(
        self, sim: Sim, describe: ChildOrigin, after: After, before: Callable[[], None] | None
    ) -> tuple[ChildOrigin, str] | None:
        store = self.simulation.store
        try:
            if before is not None:
                before()
            child = Simulation(store, sim, self.dialect, Options())
            error = after([read_run(store, run_id) for run_id in child.run()])
        except BeltError as exc:
            error = f"could not go on: {exc.message}"
        except Exception as exc:  # a worker thread must not lose its failure
            error = f"crashed: {type(exc).__name__}: {exc}"
        return None if error is None else (describe, error)

    def close(self) -> list[tuple[ChildOrigin, str]]:
        """Wait for every child started; the failed ones and errors, in the order they started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            started, self._started = self._started, []
        return [failure for run in started if (failure := run.result()) is not None]


def children_of(store: Store, sim: Mapping[str, object], kind: str) -> list[Child]:
    """The children of ``kind`` a simulation started, each with its runs (for reports)."""
    found: list[Child] = []
    for sim_id in store.members(SIM_CHILDREN, str(sim["id"])):
        child = read_sim(store, sim_id)
        if child.get("kind") != kind:
            continue
        keys = ("id", "state", "error", "created_at")
        runs = [{key: run.get(key) for key in keys} for run in listed_runs(store, SIM_RUNS, sim_id)]
        view: Child = {
            "sim_id": sim_id,
            "chat_id": child["chat_id"],
            "agent": child["name"],
            "parent": child["parent"],
            "status": child["status"],
            "runs": cast("list[ReportRun]", runs),
        }
        if "review" in child:
            view["review"] = child["review"]
        found.append(view)
    return found
