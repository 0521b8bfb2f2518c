"""``belt check``: hold a hook handler to the platform's contract with generated payloads."""

from __future__ import annotations

import time
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from belt.cli.options import (
    OtlpOption,
    Routes,
    TraceFileOption,
    argument,
    finite,
    option,
    start_tracing,
)
from belt.display import output
from belt.display.text import printable
from belt.errors import InvalidInput

if TYPE_CHECKING:
    from belt.check.report import CheckReport, CheckResult

STYLES = {"pass": "green", "fail": "red", "warn": "yellow", "skip": "dim"}


def check(
    target: Annotated[
        str | None,
        argument(
            "A webhook URL, py:MODULE:FUNC, or a hooks file (each webhook hook is checked).",
            metavar="TARGET",
        ),
    ] = None,
    event: Annotated[
        list[str] | None, option("Check only this event (repeatable).", metavar="E")
    ] = None,
    executor: Annotated[
        list[str] | None,
        option(
            "Check a Nexus executor tool (cmd:COMMAND, py:MODULE:FUNC or a URL, as "
            "belt executor run --tool takes it); a Nexus hooks file names its tools. Repeatable.",
            metavar="NAME=TARGET",
        ),
    ] = None,
    props: Annotated[
        Path | None,
        option(
            "A TOML check file: each property table names the decision every matching "
            "payload must get (docs/check.md).",
            metavar="FILE",
        ),
    ] = None,
    secret: Annotated[
        str | None,
        option("whsec_... secret: sign every case, and check the Standard Webhooks cases."),
    ] = None,
    route: Routes = None,
    timeout: Annotated[
        float | None,
        option(
            "Seconds a handler has to answer (default: the hook's timeout, else 30).",
            metavar="S",
            callback=finite,
        ),
    ] = None,
    allow_network: Annotated[
        bool,
        option("Let belt check send to a target that is not on this machine.", "--allow-network"),
    ] = False,
    examples: Annotated[int, option("Generated payloads per event.", metavar="N")] = 100,
    seed: Annotated[
        int | None, option("Seed of the generation (default: a new one, printed).", metavar="S")
    ] = None,
    max_time: Annotated[
        float | None,
        option("Stop sending new cases after S seconds.", metavar="S", callback=finite),
    ] = None,
    save: Annotated[
        Path | None, option("Write each failure as a belt test scenario in DIR.", metavar="DIR")
    ] = None,
    beyond_spec: Annotated[
        bool,
        option(
            "Also send values the platform never sends (an empty or any-text tool name, "
            "an agent.tool_result status other than completed); off: only what the spec allows.",
            "--beyond-spec",
        ),
    ] = False,
    json_: Annotated[bool, option("Print the report as JSON.", "--json")] = False,
    junit_xml: Annotated[
        Path | None, option("Also write a JUnit XML report to FILE.", metavar="FILE")
    ] = None,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Check a hook handler against everything the platform may send it.

    Generates payloads for every event the target is declared for, as the platform sends them
    (each event's spec sample among them; fields the spec fixes, such as agent.tool_result's
    status completed, with that value; values beyond the spec only with --beyond-spec), paths
    attacked first (.. segments, /tmpevil beside /tmp/*, doubled and trailing slashes, .
    segments, case changes, non-ASCII look-alikes), and checks, by name: answers (2xx within the
    timeout, latency p50/p95/p99/max), body (empty or a valid response; unknown keys warn),
    decision (means something for the event, else a warning saying what the platform does
    instead), deterministic (the same payload, the same decision), redelivery (the same delivery
    again is harmless) and, with --secret, signature (the Standard Webhooks cases: valid and
    several-signature requests accepted; unsigned, tampered, wrong-secret, stale, future and
    header-less ones refused with 4xx, and the near misses: the signature one byte off at its
    end, its first half, it under another webhook-id or timestamp, it as a v1a, entry).
    --executor NAME=TARGET checks a Nexus executor tool (answers, result: the decision's shape
    and limits). Every failure is shrunk to its smallest payload and printed as a command that
    reproduces it. Sends only to the targets given, one case at a time; a URL not on this
    machine needs --allow-network. Exits 0 when every check passed (warnings allowed), 1 when
    one failed, 5 on invalid input (a --junit-xml FILE or --save DIR that cannot be written is
    refused before any case is sent; one that fails later, a full disk, after the report is
    printed), 6 when the target cannot be reached at all.

    Examples:

        belt check py:examples/handler.py:decide --examples 50
        belt check http://127.0.0.1:8000/hook --event agent.tool_call --props props.toml
    """
    from belt.check.report import junit_xml as write_junit  # start-up: belt --help
    from belt.check.run import run_check  # start-up: hypothesis
    from belt.check.writable import require_writable_file  # start-up: belt --help

    if junit_xml is not None:
        require_writable_file(junit_xml, option="--junit-xml")  # before any case is sent
    start_tracing(otlp, trace)
    done = {"event": "", "cases": 0}
    began = time.monotonic()

    def progress_text() -> str:
        event = f" {done['event']}" if done["event"] else ""
        elapsed = int(time.monotonic() - began)
        return f"checking{event}: {done['cases']} cases done, {elapsed} s"

    # One line on a terminal's stderr while the cases run, cleared before the report.
    progress = output.LiveLine(progress_text, interval=0.25)
    progress.start()
    try:
        report = run_check(
            target,
            events=list(event or []),
            executors=list(executor or []),
            routes=list(route or []),
            props=props,
            secret=secret,
            timeout=timeout,
            allow_network=allow_network,
            examples=examples,
            seed=seed,
            max_time=max_time,
            save=save,
            beyond_spec=beyond_spec,
            progress=lambda event, cases: done.update(event=event, cases=cases),
        )
    finally:
        progress.stop()
    if not output.json_printed(json_, report.to_json()):
        render(report)
    # Written once the report is printed: a disk that fills meanwhile loses the file, not it.
    if junit_xml is not None:
        write_junit(report, junit_xml)
    if report.unwritten:
        raise InvalidInput(report.unwritten[0])
    raise typer.Exit(int(report.exit_code))


def render(report: CheckReport) -> None:
    """The report: a line per check, grouped by subject, failures with their reproducer."""
    rows: list[tuple[str, str]] = []
    for subject, results in groupby(report.results, key=lambda result: result.subject):
        rows += [("", ""), (printable(subject), "bold")]
        rows += [row for result in results for row in _lines(result)]
    rows += [(f"note: {printable(note)}", "dim") for note in report.notes]
    counts = report.counts()
    summary = (
        f"{len(report.results)} checks: {counts['pass']} passed, {counts['fail']} failed, "
        f"{counts['warn']} warned, {counts['skip']} skipped; {report.cases} cases in "
        f"{report.seconds:.1f} s (seed {report.seed}; --seed {report.seed} repeats it)"
    )
    rows += [("", ""), (summary, STYLES["fail" if counts["fail"] else "pass"])]
    if report.stopped:
        rows.append((report.stopped, "yellow"))
    output.lines(rows)


def _lines(result: CheckResult) -> list[tuple[str, str]]:
    status = result.status
    head = f"  {status:<4}  {result.check:<13} {printable(result.title)}"
    if status == "skip":
        head += f" (skipped: {printable(result.skipped or '')})"
    else:
        warned = f", {result.warned} warned" if result.warned else ""
        head += f" ({result.cases} case{'' if result.cases == 1 else 's'}{warned})"
    if (latency := result.latency()) is not None:
        head += " latency p50 {p50} ms p95 {p95} ms p99 {p99} ms max {max} ms".format(**latency)
    rows = [(head, STYLES[status])]
    for warning, count in result.warnings.items():
        times = f" ({count}×)" if count > 1 else ""
        rows.append((f"        warning: {printable(warning)}{times}", "yellow"))
    if (failure := result.failure) is not None:
        rows.append((f"        {printable(failure.detail)}{failure.note}", "red"))
        rows.append((f"        reproduce: {printable(failure.reproducer)}", ""))
        if result.saved:
            rows.append((f"        saved as {printable(result.saved)}", "dim"))
        elif result.not_saved:
            rows.append((f"        not saved: {printable(result.not_saved)}", "dim"))
    return rows
