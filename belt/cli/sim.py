"""``belt sim``: run scripted agents whose hooks fire as on the platform."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from belt.cli.options import Executors

app = typer.Typer(
    help="Run scripted agents whose hooks fire as on the platform.", no_args_is_help=True
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the whole record as JSON.")]
RunId = Annotated[str, typer.Argument(help="Run id (ar_...).")]


def render(report: dict[str, Any], executed: list[str], json_: bool) -> None:
    """Print a simulation; exit 1 when a run just executed failed or is on an attention hold."""
    from belt import output
    from belt.render import transcript_lines

    if json_:
        output.print_json(report)
    else:
        output.lines(transcript_lines(report))
    from belt.wire.enums import ATTENTION_HOLD, AgentRunState

    states = {run["id"]: run["state"] for run in report["runs"]}
    if any(states.get(run_id) in (AgentRunState.FAILED, ATTENTION_HOLD) for run_id in executed):
        raise typer.Exit(1)


def live() -> Any:
    """Live lines on stderr: hook tasks served in-process, and tasks waited on."""
    from belt.cli.executor import live_reporter

    return live_reporter(False, stderr=True)


@app.command()
def run(
    scenario: Annotated[Path, typer.Argument(help="Scenario file (TOML or JSON).")],
    hooks: Annotated[
        Path | None, typer.Option(help="Hooks file that replaces the scenario's hooks.")
    ] = None,
    fail_closed: Annotated[
        bool,
        typer.Option("--fail-closed", help="Count failed webhooks as deny on gate-able events."),
    ] = False,
    executor: Executors = None,
    json_: JsonFlag = False,
) -> None:
    """Run a scenario: every hook fires at its boundary and every decision is applied.

    A run stopped at a gate exits 0 and prints the commands to resolve and resume it;
    a failed run, or a Nexus run on an attention hold, exits 1. A Nexus scenario waits for
    each hook task up to the hook's timeout_ms: serve them with --executor, or with
    `belt executor run` in another terminal.
    """
    from belt.engine.api import run_scenario

    report, executed = run_scenario(
        scenario=scenario,
        hooks_file=hooks,
        fail_closed=fail_closed,
        executors=executor or [],
        report=live(),
    )
    render(report, executed, json_)


@app.command()
def resume(run_id: RunId, executor: Executors = None, json_: JsonFlag = False) -> None:
    """Continue a run held at gates, or retry the failed hook task of an attention hold."""
    from belt.engine.api import resume_run

    report, executed = resume_run(run_id=run_id, executors=executor or [], report=live())
    render(report, executed, json_)


@app.command()
def show(run_id: RunId, json_: JsonFlag = False) -> None:
    """Show the transcript of a run's simulation, with its hook rows."""
    from belt import output
    from belt.engine.api import show_run
    from belt.render import transcript_lines

    report = show_run(run_id=run_id)
    if json_:
        output.print_json(report)
    else:
        output.lines(transcript_lines(report))


@app.command("list")
def list_(json_: JsonFlag = False) -> None:
    """List simulated runs."""
    from belt import output
    from belt.engine.api import list_runs

    rows = list_runs()
    if json_:
        output.print_json(rows)
        return
    if not rows:
        output.echo("no simulated runs yet; start one with `belt sim run SCENARIO`", stderr=True)
        return
    output.table(
        ["run", "state", "chat", "agent", "turn", "scenario", "started"],
        [
            [
                r["id"],
                r["state"],
                r["chat_id"],
                r["name"],
                r["turn_index"],
                r["scenario"],
                r["created_at"],
            ]
            for r in rows
        ],
    )


@app.command()
def stop(
    run_id: RunId,
    force: Annotated[
        bool,
        typer.Option("--force", help="Cancel even a working run; a Nexus run bypasses stop."),
    ] = False,
) -> None:
    """Cancel a run: its pending gates or hook tasks are cancelled and it will not resume."""
    from belt import output
    from belt.engine.api import stop_run

    run = stop_run(run_id=run_id, force=force)
    output.success(f"run {run['id']} {run['state']}")
