"""``belt executor``: serve Nexus hook tasks from the executor inbox with local tools."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from belt.cli.options import option
from belt.display import output
from belt.display.render import task_line

if TYPE_CHECKING:
    from belt.executor.worker import Worker

app = typer.Typer(help="Serve Nexus hook tasks from the executor inbox.", no_args_is_help=True)


@app.command()
def run(
    tool: Annotated[
        list[str],
        option("NAME=TARGET, TARGET being cmd:COMMAND, py:MODULE:FUNC or an http(s):// URL."),
    ],
    once: Annotated[bool, option("Serve the tasks waiting now, then exit.", "--once")] = False,
    json_: Annotated[bool, option("Print one JSON object per task.", "--json")] = False,
) -> None:
    """Claim hook tasks for the named tools, run them, and complete the tasks.

    cmd: gets the task input as JSON on stdin and prints the result JSON on stdout (a non-zero
    exit is a tool failure); py: is called with the input and returns the result; a URL gets
    the input POSTed and answers with the result. Each task is one line. Ctrl-C stops.

    Examples:

        belt executor run --tool verify=cmd:examples/nexus-verify.sh
        belt executor run --tool verify=cmd:examples/nexus-verify.sh --once --json
    """
    from belt.executor.worker import run_worker  # start-up: the executor

    def started(worker: Worker) -> None:
        served = ", ".join(f"{t.name} ({t.label})" for t in worker.targets.values())
        tail = "serving the waiting tasks once" if once else "Ctrl-C stops"
        output.styled(f"belt executor {worker.name} serving {served}; {tail}", "bold", stderr=True)

    report = output.print_json_line if json_ else lambda record: output.styled(*task_line(record))

    count = run_worker(tools=tool, once=once, report=report, on_start=started)
    if once:
        output.echo(f"served {count} task(s)", stderr=True)
