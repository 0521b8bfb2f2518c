"""``belt replay``: recorded hook payloads delivered again to a handler, answers compared."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from belt.cli.options import OtlpOption, TraceFileOption, argument, option, start_tracing
from belt.display import output
from belt.display.render import replay_row, replay_tail
from belt.display.text import printable


def replay(
    source: Annotated[
        str,
        argument(
            "journal (belt serve's), a simulated run id, or a JSON lines file of payloads.",
            metavar="journal|RUN_ID|FILE",
        ),
    ],
    to: Annotated[str | None, option("Deliver to this webhook URL.", metavar="URL")] = None,
    policy: Annotated[Path | None, option("Decide with this policy file (docs/policy.md).")] = None,
    handler: Annotated[
        str | None,
        option(
            "Decide with this Python callable (the py: is optional), given each payload as "
            "a dict, or as a LifecycleHookPayload when its first parameter is annotated so.",
            metavar="py:MODULE:FUNC",
        ),
    ] = None,
    check: Annotated[
        bool, option("Exit 1 when any decision or injection changed.", "--check")
    ] = False,
    since: Annotated[
        str | None, option("Only payloads since T: a timestamp, or 30m, 2h, 1d ago.", metavar="T")
    ] = None,
    event: Annotated[str | None, option("Only payloads of this event.", metavar="E")] = None,
    chat: Annotated[str | None, option("Only payloads of this chat.", metavar="ID")] = None,
    secret: Annotated[
        str | None, option("whsec_... secret: sign the requests --to sends again.")
    ] = None,
    json_: Annotated[bool, option("Print the replay as one JSON object.", "--json")] = False,
    save_tests: Annotated[
        Path | None,
        option(
            "Also write each replayed delivery to DIR (new or empty) as a belt test "
            "scenario whose hook is the handler replayed to, expecting the answer --expect "
            "names.",
            metavar="DIR",
        ),
    ] = None,
    expect: Annotated[
        str,
        option(
            "With --save-tests: expect the answer recorded then, or the one given now.",
            metavar="recorded|replayed",
        ),
    ] = "recorded",
    per: Annotated[
        str,
        option(
            "With --save-tests: a scenario per delivery, or per chat (its runs as turns, "
            "written once the replay ends).",
            metavar="delivery|chat",
        ),
    ] = "delivery",
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Deliver recorded hook payloads again to a handler and compare its answers.

    Prints, for each payload, its event and tool, the decision recorded then and the one given
    now, and whether the decision or the injection changed; then a summary. Nothing is written
    to the store but the replay's own journal. With --save-tests DIR, each delivery is also
    written to DIR as a scenario that belt test runs (so recorded traffic becomes a regression
    suite), expecting the recorded answer, or with --expect replayed the one given now; with
    --per chat, each chat's deliveries are one scenario.

    Examples:

        belt replay journal --policy examples/policy.toml --check
        belt replay journal --handler hooks.py:decide --save-tests tests/recorded
    """
    from belt.deliveries.keep import open_saving_replay  # start-up: pydantic

    start_tracing(otlp, trace)
    # Rows are printed as each payload is replayed, and forgotten: a replay of a long journal
    # holds one part of it at a time.
    with open_saving_replay(
        save_tests=save_tests,
        expect=expect,
        per=per,
        source=source,
        to=to,
        policy=policy,
        handler=handler,
        since=since,
        event=event,
        chat=chat,
        secret=secret,
    ) as run:
        if json_:
            output.print_json_stream(run.head(), "rows", run.rows(), run.tail)
        else:
            cells = ([printable(cell) for cell in replay_row(row)] for row in run.rows())
            printed = output.table_stream(
                ["#", "event", "tool", "recorded", "now", "changed"], cells
            )
            if not printed:
                output.echo("no recorded payload matches", stderr=True)
            for problem in run.skipped.problems:
                output.warning(f"not replayed: {problem}")
            if run.skipped.count > len(run.skipped.problems):
                output.warning(f"not replayed: {run.skipped.count} lines in all")
            tail = replay_tail({**run.head(), **run.tail()})
            output.lines([(printable(text), style) for text, style in tail])
    if (failure := run.failure()) is not None:  # a --to URL that failed: exit by the table
        raise failure
    if check and run.summary["changed"]:
        raise typer.Exit(1)
