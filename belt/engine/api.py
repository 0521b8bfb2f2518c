"""The simulator's entry points, one per ``belt sim`` command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from belt.errors import UsageError

if TYPE_CHECKING:
    import httpx

    from belt.executor import Worker
    from belt.store import Store

Reporter = Callable[[dict[str, Any]], None]


def _worker(store: Store, executors: list[str], report: Reporter | None) -> Worker | None:
    """The in-process executor of ``--executor NAME=TARGET``, if any."""
    if not executors:
        return None
    from belt.executor import Worker, parse_tools

    return Worker(store, parse_tools(executors), report)


def run_scenario(
    *,
    scenario: Path,
    hooks_file: Path | None = None,
    fail_closed: bool = False,
    executors: list[str] | None = None,
    transport: httpx.BaseTransport | None = None,
    report: Reporter | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Run a scenario file; returns the simulation's report and the ids of the runs executed.

    ``report`` receives live records: each hook task an in-process executor served, and each
    task the simulation starts waiting on for an executor in another process.
    """
    from belt.engine.report import build_report
    from belt.engine.scenario import LoadedNexusScenario, read_scenario
    from belt.store import open_store

    if executors:
        from belt.executor import parse_tools

        parse_tools(executors)
    loaded = read_scenario(scenario, hooks_file=hooks_file)
    store = open_store()
    if isinstance(loaded, LoadedNexusScenario):
        from belt.engine.nexus import start as start_nexus

        if fail_closed:
            raise UsageError(
                "--fail-closed is for platform scenarios; a failed Nexus hook always puts the "
                "execution on an attention hold"
            )
        worker = _worker(store, executors or [], report)
        sim, executed = start_nexus(store, loaded, worker=worker, notify=report)
        return build_report(store, sim), executed
    if executors:
        raise UsageError(
            "--executor serves Nexus hook tasks; this scenario is in the platform dialect",
            hint='a Nexus scenario starts with dialect = "nexus"',
        )
    from belt.engine.loop import start

    sim, executed = start(store, loaded, fail_closed=fail_closed, transport=transport)
    return build_report(store, sim), executed


def resume_run(
    *,
    run_id: str,
    executors: list[str] | None = None,
    transport: httpx.BaseTransport | None = None,
    report: Reporter | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Resume a run held at gates or on an attention hold; returns the report and runs executed."""
    from belt.engine.report import build_report, sim_of_run
    from belt.store import open_store

    store = open_store()
    sim = sim_of_run(store, run_id)
    if sim.get("dialect") == "nexus":
        from belt.engine.nexus import resume as resume_nexus

        worker = _worker(store, executors or [], report)
        sim, executed = resume_nexus(store, run_id, worker=worker, notify=report)
        return build_report(store, sim), executed
    if executors:
        raise UsageError("--executor serves Nexus hook tasks; this run is in the platform dialect")
    from belt.engine.loop import resume

    sim, executed = resume(store, run_id, transport=transport)
    return build_report(store, sim), executed


def show_run(*, run_id: str) -> dict[str, Any]:
    """The report of the simulation a run belongs to."""
    from belt.engine.report import build_report, sim_of_run
    from belt.store import open_store

    store = open_store()
    return build_report(store, sim_of_run(store, run_id))


def list_runs() -> list[dict[str, Any]]:
    """Every simulated run."""
    from belt.engine.report import list_runs as list_all
    from belt.store import open_store

    return list_all(open_store())


def stop_run(*, run_id: str, force: bool = False) -> dict[str, Any]:
    """Cancel a simulated run."""
    from belt.engine.report import stop_run as stop
    from belt.store import open_store

    return stop(open_store(), run_id, force=force)
