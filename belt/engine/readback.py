"""Reading a simulation back from the store: the whole record, names as on the wire (what
``belt sim show --json`` prints and the terminal view reads)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, cast

from belt.dialects import loop_of
from belt.engine.hooksummary import hook_summary
from belt.engine.simrecord import stranded_at
from belt.records.interrupts import list_interrupts
from belt.records.runs import RUN, SIM_RUNS, RunView, listed_runs, read_run, run_dto, run_events
from belt.records.sims import Sim, read_scenario, read_sim
from belt.records.views import chat_dto
from belt.store import Store

if TYPE_CHECKING:
    from belt.dialects.simreport import ReportChat, ReportRun, SimReport


HEAD = ("source", "name", "status")  # the simulation's fields every report has, even None


def build_report(store: Store, sim: Sim) -> SimReport:
    """The whole record of a simulation, names as on the wire."""
    dialect = loop_of(sim)
    fields = dialect.run_fields()
    runs = listed_runs(store, SIM_RUNS, sim["id"])
    chat = chat_dto(store, sim["chat_id"], runs=runs, run_fields=fields)
    interrupts = [
        interrupt
        for run in runs
        for interrupt in list_interrupts(store=store, run_id=run["id"], include_settled=True)
    ]
    executions = [
        record
        for run in runs
        for record in run_events(store, run["id"])
        if record.get("type") == "hook.executed"
    ]
    extras = dialect.report_extras(store, sim, runs)
    head = {"id": sim["id"], "dialect": dialect.name, **{k: sim.get(k) for k in HEAD}}
    head |= {"fail_closed": sim.get("fail_closed", False)}
    head |= {k: sim[k] for k in ("kind", "clock", "clock_from_wall", "warnings") if sim.get(k)}
    if (last := stranded_at(store, sim)) is not None:  # its process died between two runs
        left = len(read_scenario(store, sim["id"])["turns"]) - int(sim.get("next_turn") or 0)
        head |= {"interrupted": True, "turns_left": max(0, left), "resume_run": last}
    head |= extras.pop("simulation", {})
    report: SimReport = {
        "simulation": head,
        "chat": cast("ReportChat", chat),
        "runs": cast("list[ReportRun]", [run_dto(run, fields) for run in runs]),
        "interrupts": interrupts,
        "hook_executions": executions,
        "hook_summary": hook_summary(executions),
    }
    report.update(extras)
    return report


class RunRow(RunView, total=False):
    """A run as ``belt sim list`` shows it: its AgentRunDTO and its simulation's name."""

    sim_id: str
    scenario: object
    name: object
    turn_index: int | None
    kind: str
    simulation_interrupted: bool


def list_runs(store: Store, *, include_tasks: bool = False) -> list[RunRow]:
    """Every simulated run, oldest first, with its simulation (task runs with ``include_tasks``)."""

    @cache
    def simulation(sim_id: str) -> tuple[Sim, str | None]:
        """A simulation, read once, and its stranded run (``stranded_at``)."""
        sim = read_sim(store, sim_id)
        return sim, stranded_at(store, sim)

    rows: list[RunRow] = []
    for run_id in store.list_ids(RUN):
        run = read_run(store, run_id)
        if not (sim_id := run.get("sim_id")):
            continue
        sim, stranded = simulation(sim_id)
        if (kind := str(sim.get("kind") or "chat")) != "chat" and not include_tasks:
            continue
        rows.append(
            {
                **run_dto(run, loop_of(sim).run_fields()),
                "sim_id": sim_id,
                "scenario": sim.get("source"),
                "name": sim.get("name"),
                "turn_index": run.get("turn_index"),
                "kind": kind,
                **({"simulation_interrupted": True} if stranded == run_id else {}),
            }
        )
    return sorted(rows, key=lambda r: str(r.get("created_at") or ""))
