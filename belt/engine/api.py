"""The simulator's entry points, one per ``belt sim`` command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


def run_scenario(
    *,
    scenario: Path,
    hooks_file: Path | None = None,
    fail_closed: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Run a scenario file; returns the simulation's report and the ids of the runs executed."""
    from belt.engine.loop import start
    from belt.engine.report import build_report
    from belt.engine.scenario import load_scenario
    from belt.store import open_store

    loaded = load_scenario(scenario, hooks_file=hooks_file)
    store = open_store()
    sim, executed = start(store, loaded, fail_closed=fail_closed, transport=transport)
    return build_report(store, sim), executed


def resume_run(
    *, run_id: str, transport: httpx.BaseTransport | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Resume a run held at gates; returns the report and the ids of the runs executed."""
    from belt.engine.loop import resume
    from belt.engine.report import build_report
    from belt.store import open_store

    store = open_store()
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
