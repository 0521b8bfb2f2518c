"""The simulator's entry points, one per ``belt sim`` command."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from belt import dialects
from belt.errors import BeltError, Conflict, NotFound, UsageError
from belt.records import leases
from belt.records.interrupts import list_interrupts
from belt.records.names import find_id
from belt.records.runs import (
    GATED_RUNS,
    HELD_STATES,
    TERMINAL_STATES,
    find_run_id,
    get_run,
    interrupted,
    mark_run,
    parked,
    read_run,
    waiting,
)
from belt.records.sims import SIM, Sim, get_sim, merge_sim, read_sim
from belt.records.sims import read_scenario as read_stored
from belt.store import MemoryStore, open_store
from belt.store.clock import timestamp, using
from belt.usercode.loader import collector_paused

with collector_paused():  # the engine's modules, imported with the collector paused
    from belt.engine.dispatch import load_handlers, parse_routes
    from belt.engine.offline import network_problems
    from belt.engine.readback import build_report
    from belt.engine.readback import list_runs as list_all
    from belt.engine.scenario import LoadedScenario, check_storable, read_scenario
    from belt.engine.simrecord import latest_run, sim_of_run, stranded_at
    from belt.engine.simrecord import stop_run as stop
    from belt.engine.simulation import Options, Simulation, clock_start

if TYPE_CHECKING:
    from belt.dialects.simreport import SimReport
    from belt.engine.readback import RunRow
    from belt.records.reports import Reporter
    from belt.records.runs import RunView
    from belt.store import Store


class Continued(TypedDict):
    """What continuing a held run did: the state it reached, or why it could not go on."""

    run_id: str
    state: NotRequired[str]
    sim_id: NotRequired[str]
    error: NotRequired[str]


def simulation_options(
    store: Store,
    dialect: Any,
    *,
    executors: list[str],
    fail_closed: bool,
    report: Reporter | None,
    wait: bool = False,
    routes: list[str] | None = None,
) -> Options:
    """What the caller lends the simulation, checked against its dialect."""
    dialect.check_options(executors=bool(executors), fail_closed=fail_closed, routes=bool(routes))
    worker = None
    if executors:  # the in-process executor of ``--executor NAME=TARGET``
        from belt.executor.targets import parse_tools  # noqa: PLC0415 - start-up: for --executor only
        from belt.executor.worker import Worker  # noqa: PLC0415 - start-up: for --executor only

        worker = Worker(store, parse_tools(executors), report)
    return Options(worker=worker, notify=report, wait=wait, routes=parse_routes(routes or []))


def with_scenario_executors(declared: dict[str, str], executors: list[str]) -> list[str]:
    """``--executor`` specs after the scenario's ``[executors]`` they do not name."""
    given = {spec.partition("=")[0].strip() for spec in executors}
    return [*(f"{name}={spec}" for name, spec in declared.items() if name not in given), *executors]


def start_simulation(
    store: Store,
    loaded: Any,
    options: Options,
    *,
    fail_closed: bool = False,
    clock: datetime | None = None,
) -> tuple[Sim, list[str]]:
    """Create and run a simulation of a loaded scenario; returns its record and runs executed."""
    check_storable(loaded.scenario, loaded.source, "; belt cannot store it")
    if isinstance(loaded, LoadedScenario):  # its hooks' py: handlers, loaded before a run
        options.handlers = {
            **load_handlers(
                loaded.hooks, options.routes, source=loaded.source, located=loaded.located
            ),
            **options.handlers,
        }
    store = store.without_fsync()
    dialect = dialects.get(loaded.dialect).loop()
    options.loaded = loaded
    virtual = clock_start(loaded.scenario, clock)
    with using(virtual):
        sim = dialect.create(store, loaded, fail_closed=fail_closed, routes=options.routes)
    if virtual is not None:
        fields: dict[str, object] = {"clock": timestamp(virtual.now())}
        if clock is None and loaded.scenario.clock is None:
            fields["clock_from_wall"] = True  # it moves time, but did not say from when
        merge_sim(store, str(sim["id"]), fields)
    simulation = Simulation(store, sim, dialect, options)
    executed = simulation.run()
    return simulation.sim, executed


def resume_simulation(store: Store, run_id: str, options: Options) -> tuple[Sim, list[str]]:
    """Continue a held run and the rest of its simulation; returns the record and runs."""
    store = store.without_fsync()
    sim = sim_of_run(store, run_id)
    simulation = Simulation(store, sim, dialects.loop_of(sim), options)
    executed = simulation.resume(run_id)
    return simulation.sim, executed


def run_scenario(
    *,
    scenario: Path,
    hooks_file: Path | None = None,
    fail_closed: bool = False,
    executors: list[str] | None = None,
    report: Reporter | None = None,
    wait: bool = False,
    routes: list[str] | None = None,
    offline: bool = False,
    clock: datetime | None = None,
    ephemeral: bool = False,
) -> tuple[SimReport, list[str]]:
    """Run a scenario file; returns the simulation's report and the ids of the runs executed
    (``ephemeral``: on a store in memory; ``offline``: refuse deliveries off this machine)."""
    if ephemeral and wait:
        raise UsageError(
            "--ephemeral and --wait: a run in memory cannot be resolved from elsewhere",
            hint="drop --wait, or settle its gates with turns.resolve tables in the scenario",
        )
    if executors:
        from belt.executor.targets import parse_tools  # noqa: PLC0415 - start-up: for --executor only

        parse_tools(executors)
    parse_routes(routes or [])
    loaded = read_scenario(scenario, hooks_file=hooks_file, stored_hooks=True)
    if report is not None:
        if (hooks_from := getattr(loaded, "hooks_from", None)) is not None:
            report({"kind": "hooks_from", **hooks_from})
        for warning in getattr(loaded, "warnings", []):  # a path read from the current directory
            report({"kind": "warning", "text": warning})
    declared = with_scenario_executors(getattr(loaded.scenario, "executors", {}), executors or [])
    if offline and (problems := network_problems(loaded, parse_routes(routes or []), declared)):
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(
            f"{scenario}: {problems[0]}{more}",
            hint="--offline delivers only to loopback addresses, py: handlers and routed URLs",
        )
    store = MemoryStore(shapes=True) if ephemeral else open_store()
    options = simulation_options(
        store,
        dialects.get(loaded.dialect).loop(),
        executors=declared,
        fail_closed=fail_closed,
        report=report,
        wait=wait,
        routes=routes,
    )
    sim, executed = start_simulation(store, loaded, options, fail_closed=fail_closed, clock=clock)
    built = build_report(store, sim)
    if ephemeral:
        built["simulation"]["ephemeral"] = True  # nothing of it outlives this process
    return built, executed


def named_run(store: Store, run_id: str | None, *, last: bool = False) -> str:
    """The id of the run ``run_id`` names (or the latest of the simulation it names), or with
    ``last`` the simulated run started last; NotFound when there is none."""
    if last == (run_id is not None):
        raise UsageError("give a run id or --last (not both)")
    if run_id is not None:
        try:
            return find_run_id(store, run_id)
        except NotFound as missing:
            try:
                sim_id = find_id(store, SIM, run_id, what="simulation")
            except NotFound:
                raise missing from None
            if (latest := latest_run(store, dict(read_sim(store, sim_id)))) is None:
                raise NotFound(f"simulation {sim_id} has no run yet") from None
            return str(latest["id"])
    if not (rows := list_all(store)):
        raise NotFound(
            "no simulated runs yet", hint="start one with `belt sim run` and a scenario file"
        )
    return str(rows[-1]["id"])


def resume_run(
    *,
    run_id: str | None = None,
    last: bool = False,
    executors: list[str] | None = None,
    report: Reporter | None = None,
    wait: bool = False,
) -> tuple[SimReport, list[str]]:
    """Resume the run ``named_run`` finds (held at gates or for attention); the report and runs."""
    store = open_store()
    run_id = named_run(store, run_id, last=last)
    sim = sim_of_run(store, run_id)
    declared = read_stored(store, sim["id"]).get("executors") or {}
    options = simulation_options(
        store,
        dialects.loop_of(sim),
        executors=with_scenario_executors(declared, executors or []),
        fail_closed=False,
        report=report,
        wait=wait,
    )
    sim, executed = resume_simulation(store, run_id, options)
    return build_report(store, sim), executed


def show_run(*, run_id: str | None = None, last: bool = False) -> SimReport:
    """The report of the simulation of the run ``named_run`` finds."""
    store = open_store()
    return build_report(store, sim_of_run(store, named_run(store, run_id, last=last)))


def list_runs(*, include_tasks: bool = False) -> list[RunRow]:
    """Every simulated run (with ``include_tasks``, the runs of task chats too)."""
    return list_all(open_store(), include_tasks=include_tasks)


def stop_run(*, run_id: str, force: bool = False) -> RunView:
    """Cancel a simulated run."""
    store = open_store()
    run_id = named_run(store, run_id)
    sim = sim_of_run(store, run_id)
    return stop(store, sim, dialects.loop_of(sim), run_id, force=force)


def resume_settled(store: Store, *, emulated: bool | None = None) -> list[Continued]:
    """Continue every run tagged as held that is ready (``belt serve --resume``'s pass)."""
    tried = (resume_gated(store, run_id, emulated=emulated) for run_id in store.tagged(GATED_RUNS))
    return [record for record in tried if record is not None]


def resume_gated(store: Store, run_id: str, *, emulated: bool | None = None) -> Continued | None:
    """Continue the simulation of a run tagged as held at gates, from where its continuation is;
    the tag goes only once nothing of the continuation is left (a killed continuer leaves it)."""
    if (run := get_run(store, run_id)) is None:
        mark_run(store, GATED_RUNS, run_id, on=False)
        return None
    if emulated is not None and bool(run.get("emulated")) != emulated:
        if run["state"] in TERMINAL_STATES:
            mark_run(store, GATED_RUNS, run_id, on=False)
        return None
    if run["state"] in HELD_STATES and not waiting(run):
        # An attention hold: `belt sim resume` goes on with it.
        mark_run(store, GATED_RUNS, run_id, on=False)
        return None
    if run["state"] not in TERMINAL_STATES:
        return resume_if_settled(store, run_id, recover=True)
    sim = get_sim(store, str(run["sim_id"]))
    latest = None if sim is None else latest_run(store, sim)
    if sim is None or sim.get("status") != "running" or latest is None:
        mark_run(store, GATED_RUNS, run_id, on=False)
        return None
    if latest["state"] in TERMINAL_STATES:
        # Its process died between two runs, or before it marked the simulation finished.
        if stranded_at(store, sim) != latest["id"]:
            return None  # its process is alive, between two runs
        return _continue(store, str(latest["id"]))
    if latest["state"] in HELD_STATES or parked(latest):
        # The later run holds: the continuation is over.
        mark_run(store, GATED_RUNS, run_id, on=False)
        return None
    return resume_if_settled(store, str(latest["id"]), recover=True)


def resume_if_settled(
    store: Store, run_id: str, *, emulated: bool | None = None, recover: bool = False
) -> Continued | None:
    """Continue one run held at its settled interrupts that no live process holds (None: not
    ready); ``emulated`` filters by ``belt serve``'s chats, ``recover`` takes orphaned runs."""
    run = get_run(store, run_id)
    lost = recover and run is not None and interrupted(run)
    if run is None or not (waiting(run) or lost):
        return None
    if emulated is not None and bool(run.get("emulated")) != emulated:
        return None
    if not lost and list_interrupts(store=store, run_id=run_id):
        return None
    if leases.holder_alive(run.get("lease")) and not leases.is_mine(run.get("lease")):
        return None
    return _continue(store, run_id)


def _continue(store: Store, run_id: str) -> Continued | None:
    """``resume_simulation`` of a run as a record (None: another process took it, or not ready)."""
    try:
        sim, _ = resume_simulation(store, run_id, Options())
    except Conflict:
        return None
    except BeltError as exc:
        return {"run_id": run_id, "error": exc.message}
    state = read_run(store, run_id)["state"]
    return {"run_id": run_id, "state": state, "sim_id": sim["id"]}
