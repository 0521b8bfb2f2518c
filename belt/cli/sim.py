"""``belt sim``: run scripted agents whose hooks fire as on the platform; ``run`` and ``resume``
report live on stderr (tasks and gates waited on; at a gate, the transcript and a countdown)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from belt.cli.options import (
    Executors,
    OtlpOption,
    Routes,
    TraceFileOption,
    argument,
    moment_option,
    option,
    start_tracing,
)
from belt.display import output, render
from belt.display.text import printable
from belt.errors import ExitCode
from belt.wire.enums import ATTENTION_HOLD, AgentRunState

if TYPE_CHECKING:
    from belt.dialects.simreport import HookSummary, SimReport

    Simulation = Callable[..., tuple[SimReport, list[str]]]  # run_scenario, resume_run

app = typer.Typer(
    help="Run scripted agents whose hooks fire as on the platform.", no_args_is_help=True
)

JsonFlag = Annotated[bool, option("Print the whole record as JSON.", "--json")]
RunId = Annotated[
    str,
    argument(
        "The run: its id, short id or a unique prefix (a simulation's: its latest run).",
        metavar="RUN_ID",
    ),
]
NamedRun = Annotated[
    str | None,
    argument(
        "The run: its id, short id or a unique prefix (a simulation's: its latest run; or --last).",
        metavar="RUN_ID",
    ),
]
LastFlag = Annotated[bool, option("The simulated run started last (instead of RUN_ID).", "--last")]
WaitFlag = Annotated[
    bool,
    option(
        "Stay at a gate or a Nexus hook task's approval until it is settled (resolved "
        "anywhere, or expired), then go on.",
        "--wait",
    ),
]


StrictFlag = Annotated[
    bool,
    option(
        "Exit 1 when any hook call failed (even one counted as allow, as the platform does) "
        "or an answer was partly ignored (an unknown key, a decision its event cannot take).",
        "--strict",
    ),
]


class SimLive:
    """The live reporter of one simulation; it keeps the run it last reported for Ctrl-C's hint."""

    def __init__(self, *, transcript: bool, verbose: bool = False) -> None:
        self.transcript = transcript
        self.verbose = verbose
        self.printed: list[tuple[str, str]] = []
        self.run_id: str | None = None
        self._countdown = output.LiveLine(str)

    def __call__(self, record: dict[str, Any]) -> None:
        self.close()
        if record.get("run_id"):
            self.run_id = str(record["run_id"])
        if record.get("kind") == "gates" and self.transcript:
            from belt.engine.entrypoints import show_run  # start-up: the engine

            report = show_run(run_id=str(record["run_id"]))
            # The gates are told of below, with the commands for a run that waits (not resume).
            shown: SimReport = {**report, "chat": {**report["chat"], "pending_interrupts": []}}
            lines = render.transcript_lines(shown, verbose=self.verbose)
            output.lines(render.transcript_rest(self.printed, lines))
            self.printed = lines
        if record.get("kind") == "approval" and output.is_terminal(sys.stderr):
            # One line kept current: what it waits for, how to give it, the time left.
            self._keep_current(lambda now: render.approval_waiting_text(record, now))
            return
        output.styled(*render.task_line(record), stderr=True)
        if record.get("kind") == "gates":
            pending = record["pending"]
            self._keep_current(lambda now: render.countdown_text(pending, now))

    def _keep_current(self, text: Callable[[datetime], str]) -> None:
        """A line on stderr kept current (the time left) until the next record or ``close``."""
        self._countdown = output.LiveLine(lambda: text(datetime.now(UTC)))
        self._countdown.start()

    def close(self) -> None:
        """Stop and clear the countdown, if one is shown."""
        self._countdown.stop()  # a LiveLine stopped twice, or never started, does nothing


def simulate(ctx: typer.Context, start: Simulation, **given: Any) -> None:
    """Run ``start`` (a scenario, or a run resumed) reporting live, then print the rest and the
    hook-call summary; exit 1 on a failed run or attention hold (or --strict's failures)."""
    from belt.engine.hooksummary import strict_failures, summary_text  # start-up: the engine

    # Options every command that simulates has, read here rather than passed along.
    json_, strict = ctx.params["json_"], ctx.params["strict"]
    start_tracing(ctx.params["otlp"], ctx.params["trace"])
    live = SimLive(transcript=not json_, verbose=verbose(ctx))
    try:
        report, executed = start(report=live, **given)
    except KeyboardInterrupt:
        live.close()
        run = live.run_id
        hint = f"`belt sim show {run}` shows it, `belt sim resume {run} --wait` waits again"
        if run is None:
            hint = "`belt sim list` shows it, `belt sim resume --last` continues it"
        output.warning(
            "stopped waiting; the run stays where it was (at its gates, or at its last durable "
            f"point): {hint}"
        )
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    finally:
        live.close()
    summary: HookSummary | None = report.get("hook_summary")
    if not output.json_printed(json_, report):
        lines = render.transcript_lines(report, verbose=live.verbose)
        said = summary_text(summary) if summary and summary["calls"] else []
        shown = [("", ""), *((printable(text), "yellow" if bad else "dim") for text, bad in said)]
        output.lines(render.transcript_rest(live.printed, lines) + (shown if said else []))
    states = {run["id"]: run["state"] for run in report["runs"]}
    if any(states.get(run_id) in (AgentRunState.FAILED, ATTENTION_HOLD) for run_id in executed):
        raise typer.Exit(1)
    if strict and summary and (why := strict_failures(summary)) is not None:
        output.error(why)
        raise typer.Exit(1)


VerboseHere = Annotated[
    bool,
    option("Also show the hook calls that changed nothing (as belt -v does).", "--verbose", "-v"),
]


def verbose(ctx: typer.Context) -> bool:
    """True under ``belt -v`` or the command's own ``-v``."""
    return bool(ctx.params.get("verbose_") or ctx.find_root().params.get("verbose"))


@app.command()
def run(
    ctx: typer.Context,
    scenario: Annotated[Path, argument("Scenario file (TOML or JSON).")],
    hooks: Annotated[Path | None, option("Hooks file that replaces the scenario's hooks.")] = None,
    fail_closed: Annotated[
        bool, option("Count failed webhooks as deny on gate-able events.", "--fail-closed")
    ] = False,
    executor: Executors = None,
    route: Routes = None,
    wait: WaitFlag = False,
    strict: StrictFlag = False,
    offline: Annotated[
        bool,
        option(
            "Refuse, before anything runs, a webhook or executor that is not a loopback "
            "address, a py: handler or routed (--route), as `belt test` does.",
            "--offline",
        ),
    ] = False,
    clock: Annotated[
        str | None,
        option(
            "Run on a virtual clock that starts here (it overrides the scenario's clock): "
            "records, payload timestamps and deadlines use it; it moves only with the "
            "scenario's turns.wait and after.",
            metavar="RFC3339",
        ),
    ] = None,
    ephemeral: Annotated[
        bool,
        option(
            "Keep the simulation's records in memory only: nothing is written to the "
            "state directory, so nothing is left to show or resume (not with --wait).",
            "--ephemeral",
        ),
    ] = False,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
    json_: JsonFlag = False,
    verbose_: VerboseHere = False,
) -> None:
    """Run a scenario: every hook fires at its boundary and every decision is applied.

    A run stopped at a gate exits 0 and prints the commands to resolve and resume it; with
    --wait it stays at the gate, keeps the run, and goes on as soon as every gate is settled
    (by `belt interrupt resolve`, by `belt serve`'s API, or by expiry, which it sweeps itself);
    Ctrl-C stops waiting and leaves the run resumable (exit 130). A failed run, or a Nexus run
    on an attention hold, exits 1. A Nexus scenario waits for each hook task up to the hook's
    timeout_ms: serve them with --executor, or with `belt executor run` in another terminal.
    With approval_mode = "ask", a hook task's approval holds the run as a gate does (exit 0,
    with the commands to approve and resume), unless --wait waits for it.
    Gates the scenario resolves itself (its turns.resolve tables) are settled at once; --route
    is kept with the run, so `belt sim resume` honours it.

    The output ends with a summary of the hook calls: how many were made, how many failed and
    how each failure was counted (allow, or deny with --fail-closed), by handler, with the
    first error and its likely fix (`hook_summary` in --json), then the answer warnings: what
    a handler answered that was not done (an unknown key such as "verdict", a decision its
    event cannot take). Neither changes anything else: with --strict either makes the command
    exit 1, saying why.

    Examples:

        belt sim run examples/guarded-agent.toml
        belt sim run examples/guarded-agent.toml --wait
    """
    from belt.engine.entrypoints import run_scenario  # start-up: the engine

    simulate(
        ctx,
        run_scenario,
        scenario=scenario,
        hooks_file=hooks,
        fail_closed=fail_closed,
        executors=executor or [],
        wait=wait,
        routes=route or [],
        offline=offline,
        clock=moment_option(clock, "--clock"),
        ephemeral=ephemeral,
    )


@app.command()
def resume(
    ctx: typer.Context,
    run_id: NamedRun = None,
    last: LastFlag = False,
    executor: Executors = None,
    wait: WaitFlag = False,
    strict: StrictFlag = False,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
    json_: JsonFlag = False,
    verbose_: VerboseHere = False,
) -> None:
    """Continue a run held at gates, retry the failed hook task of an attention hold, or go on
    with a run whose process was killed (from its last durable point).

    Exactly one process continues a run: a second `resume` of the same run exits 4. With
    --wait it attaches to the gates the run waits at (and any it reaches next) and goes on as
    soon as they are settled, as `belt sim run --wait` does. It ends with the summary of the
    simulation's hook calls, as `belt sim run` does, and --strict exits 1 when one failed
    or an answer was partly ignored.

    Examples:

        belt sim resume ar_k2m9x0q4h7c1v8b5n3t6
        belt sim resume --last --wait
    """
    from belt.engine.entrypoints import resume_run  # start-up: the engine

    simulate(ctx, resume_run, run_id=run_id, last=last, executors=executor or [], wait=wait)


@app.command()
def show(
    ctx: typer.Context,
    run_id: NamedRun = None,
    last: LastFlag = False,
    json_: JsonFlag = False,
    verbose_: VerboseHere = False,
) -> None:
    """Show the transcript of a run's simulation, with its hook rows.

    Examples:

        belt sim show ar_k2m9x0q4h7c1v8b5n3t6
        belt sim show --last --json
    """
    from belt.engine.entrypoints import show_run  # start-up: the engine

    report = show_run(run_id=run_id, last=last)
    if not output.json_printed(json_, report):
        output.lines(render.transcript_lines(report, verbose=verbose(ctx)))


@app.command("list")
def list_(
    all_: Annotated[
        bool, option("Include the runs of task chats (and review branches).", "--all")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """List simulated runs (the chats' own; --all adds the chats hooks started).

    Examples:

        belt sim list
        belt sim list --all --json
    """
    from belt.engine.entrypoints import list_runs  # start-up: the engine

    rows = list_runs(include_tasks=all_)
    output.listing(
        json_,
        rows,
        ["run", "state", "kind", "chat", "agent", "turn", "scenario", "started"],
        [
            [r["id"], listed_state(r), r["kind"], r["chat_id"], r["name"], r["turn_index"]]
            + [r["scenario"], r["created_at"]]
            for r in rows
        ],
        empty="no simulated runs yet; start one with `belt sim run` and a scenario file",
        ids=(0, 3),
    )


def listed_state(row: Mapping[str, object]) -> str:
    """A run's state in the list, and whether its process (or its simulation's) is gone."""
    gone = next((key for key in ("interrupted", "simulation_interrupted") if row.get(key)), None)
    return f"{row['state']} ({gone.replace('_', ' ')})" if gone else str(row["state"])


@app.command()
def stop(
    run_id: RunId,
    force: Annotated[
        bool, option("Cancel even a working run; a Nexus run bypasses stop.", "--force")
    ] = False,
) -> None:
    """Cancel a run: its pending gates or hook tasks are cancelled and it will not resume.

    Examples:

        belt sim stop ar_k2m9x0q4h7c1v8b5n3t6
        belt sim stop ar_k2m9x0q4h7c1v8b5n3t6 --force
    """
    from belt.engine.entrypoints import stop_run  # start-up: the engine

    run = stop_run(run_id=run_id, force=force)
    output.success(f"run {run['id']} {run['state']}")
