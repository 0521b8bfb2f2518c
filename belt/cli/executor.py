"""``belt executor``: serve Nexus hook tasks from the executor inbox with local tools."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from belt.executor import Worker

app = typer.Typer(help="Serve Nexus hook tasks from the executor inbox.", no_args_is_help=True)

STYLES = {
    "acknowledged": "green",
    "continue": "magenta",
    "failed": "bold red",
    "cancelled": "yellow",
}


def clock(stamp: Any) -> str:
    """A stored timestamp as local HH:MM:SS."""
    try:
        return datetime.fromisoformat(str(stamp)).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return "--:--:--"


def task_line(record: dict[str, Any]) -> tuple[str, str]:
    """One live line: a task served (event, key, outcome, duration), skipped, or waited on."""
    from belt.executor import short

    kind = record.get("kind")
    head = f"{clock(record.get('at'))}  {record['event']}  {record['task_key']}"
    if kind == "waiting":
        return (
            f"waiting up to {record['timeout_ms']} ms for an executor to serve {record['event']} "
            f"task {record['task_key']} (belt executor run --tool {record['tool']}=TARGET)",
            "yellow",
        )
    if kind == "skip":
        return (f"{head}  skipped: {record['detail']}", "dim")
    outcome = str(record["outcome"])
    text = outcome
    if outcome == "continue" and record.get("feedback"):
        text += f' "{short(str(record["feedback"]), 60)}"'
    elif record.get("code"):
        text += f" {record['code']}: {record['detail']}"
    if int(record.get("attempt") or 1) > 1:
        text += f" (attempt {record['attempt']})"
    duration = f"{record.get('duration_ms') or 0} ms"
    return (f"{head}  {text}  {duration}", STYLES.get(outcome, ""))


def live_reporter(json_: bool, *, stderr: bool = False) -> Any:
    """A callback printing each record as a live line (or a JSON line with ``json_``)."""
    from belt import output

    def report(record: dict[str, Any]) -> None:
        if json_ and not stderr:
            output.print_json_line(record)
            return
        text, style = task_line(record)
        output.styled(text, style, stderr=stderr)

    return report


@app.command()
def run(
    tool: Annotated[
        list[str],
        typer.Option(
            "--tool",
            help="NAME=TARGET, TARGET being cmd:COMMAND, py:MODULE:FUNC or an http(s):// URL.",
            show_default=False,
        ),
    ],
    once: Annotated[
        bool, typer.Option("--once", help="Serve the tasks waiting now, then exit.")
    ] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON object per task.")] = False,
) -> None:
    """Claim hook tasks for the named tools, run them, and complete the tasks.

    cmd: gets the task input as JSON on stdin and prints the result JSON on stdout (a non-zero
    exit is a tool failure); py: is called with the input and returns the result; a URL gets
    the input POSTed and answers with the result. Each task is one line. Ctrl-C stops.
    """
    from belt import output
    from belt.executor import run_worker

    def started(worker: Worker) -> None:
        served = ", ".join(f"{t.name} ({t.label})" for t in worker.targets.values())
        tail = "serving the waiting tasks once" if once else "Ctrl-C stops"
        output.styled(f"belt executor {worker.name} serving {served}; {tail}", "bold", stderr=True)

    try:
        count = run_worker(tools=tool, once=once, report=live_reporter(json_), on_start=started)
    except KeyboardInterrupt:
        return
    if once:
        output.echo(f"served {count} task(s)", stderr=True)
