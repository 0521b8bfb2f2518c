"""``belt test``: run scenarios with expectations as a test suite."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from belt.cli.options import OtlpOption, Routes, TraceFileOption, argument, option, start_tracing
from belt.display import output, render
from belt.display.render import excerpt_lines
from belt.display.text import printable
from belt.errors import ExitCode, InvalidInput


def test(
    paths: Annotated[
        list[Path] | None, argument("Scenario files and directories to search (default: tests/).")
    ] = None,
    keyword: Annotated[
        str | None,
        option(
            "Run only the scenarios whose path contains PATTERN (any case).",
            "-k",
            metavar="PATTERN",
        ),
    ] = None,
    exitfirst: Annotated[
        bool, option("Stop at the first failure or error.", "-x", "--exitfirst")
    ] = False,
    junit_xml: Annotated[
        Path | None, option("Also write a JUnit XML report to FILE.", metavar="FILE")
    ] = None,
    json_: Annotated[
        bool, option("Print one JSON object per scenario, one per line.", "--json")
    ] = False,
    route: Routes = None,
    allow_network: Annotated[
        bool,
        option(
            "Let webhooks and executors reach addresses that are not on this machine.",
            "--allow-network",
        ),
    ] = False,
    coverage: Annotated[
        bool,
        option(
            "Also show, per declared hook, how often it fired, what it produced and the "
            "tools it saw, and the hooks that never fired (in --json and the JUnit file too).",
            "--coverage",
        ),
    ] = False,
    fail_under_hooks: Annotated[
        bool, option("Fail a scenario that declares a hook that never fired.", "--fail-under-hooks")
    ] = False,
    snapshot: Annotated[
        bool,
        option(
            "Also compare each scenario's record with its stored snapshot "
            "(__snapshots__/FILE.json beside it) and fail it, with a diff, when they differ.",
            "--snapshot",
        ),
    ] = False,
    snapshot_update: Annotated[
        bool,
        option(
            "Write each scenario's snapshot (those that differ or are new).", "--snapshot-update"
        ),
    ] = False,
    jobs: Annotated[
        str,
        option(
            "Run the scenarios in N worker processes (auto: one per core); the report and "
            "the JUnit file keep the serial order.",
            "-j",
            "--jobs",
            metavar="N",
        ),
    ] = "1",
    shard: Annotated[
        str | None,
        option(
            "Run shard K of N: every N-th scenario in the suite's order (after -k), "
            "starting at the K-th, so N machines together run each once.",
            metavar="K/N",
        ),
    ] = None,
    keep: Annotated[
        Path | None,
        option(
            "Keep each scenario's records on disk, in a state directory of its own under "
            "DIR (BELT_HOME=DIR/NAME belt sim show --last), instead of in memory.",
            metavar="DIR",
        ),
    ] = None,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Run every scenario file that has expect tables, each in a fresh store, and check them.

    Prints one line per scenario (pass, fail or error, and its time), then for each failure
    the expectation, what happened instead and the transcript around it. Gates are settled by
    the scenarios' own turns.resolve tables, so no test waits. A hook call that fails fails its
    scenario unless an expectation names its error (or the scenario says hook_errors =
    "allow"). Tests run offline: a webhook or executor that is not a loopback address, a py:
    handler or routed (--route URL_PREFIX=TARGET) is its scenario's error before anything runs,
    unless --allow-network. --coverage answers "did my hook ever run?": each declared hook,
    how often it fired, its decisions and effects (allow, deny, stop, suspend, injected,
    failed; for Nexus acknowledged, continued, failed, held) and the tools it saw.
    --fail-under-hooks fails a scenario with a hook that never fired. --snapshot compares
    each record (transcript, hook payloads and decisions, interrupts; ids as <run:1>...,
    durations left out) with the snapshot stored beside the scenario; --snapshot-update
    writes them. Exits 5 when a file is not a
    valid scenario (the others still run) or no scenario with expectations is found, 1 when an
    expectation fails or a scenario errors, else 0.

    Each scenario runs in a store in memory (--keep DIR writes it to disk instead). -j N
    runs N worker processes at once, each with its own module state for py: handlers;
    --shard K/N runs a deterministic part of the suite (docs/testing.md).

    Examples:

        belt test examples/tests
        belt test examples/tests -k guarded --junit-xml report.xml
    """
    from belt.usercode.loader import collector_paused  # start-up: belt --help

    with collector_paused():  # Start-up: the engine and the suite, see belt.usercode.loader
        from belt.testing.suite import run_suite  # start-up: the test runner
    from belt.testing.workers import parse_jobs, parse_shard  # start-up: the test runner

    def show(lines: list[tuple[str, str]]) -> None:
        output.lines([(printable(text), style) for text, style in lines])

    shown: list[dict[str, object]] = []  # each result's JSON, kept for failures and summary

    workers = parse_jobs(jobs)
    start_tracing(otlp, trace)
    ran = {"done": 0, "total": 0}
    # With -j, one line on a terminal's stderr: the scenarios done of all (results come in the
    # serial order, so one that ended early may wait for those before it).
    progress = output.LiveLine(
        lambda: f"running scenarios: {ran['done']} of {ran['total']} done (-j {workers})",
        interval=0.25,
    )

    def reported(result: Any) -> None:
        with progress.printing():
            if json_:
                output.print_json_line(result.to_json(coverage=coverage))
            else:
                shown.append(result.to_json())
                show([render.test_result_line(shown[-1])])
            for warning in result.warnings:
                output.warning(printable(warning))

    if workers > 1:
        progress.start()
    try:
        suite = run_suite(
            paths=list(paths or []),
            pattern=keyword,
            exitfirst=exitfirst,
            routes=route or [],
            junit_xml=junit_xml,
            report=reported,
            render=lambda dialect, messages: [text for text, _ in excerpt_lines(dialect, messages)],
            allow_network=allow_network,
            fail_unfired=fail_under_hooks,
            coverage=coverage,
            snapshot="update" if snapshot_update else "check" if snapshot else None,
            jobs=workers,
            shard=None if shard is None else parse_shard(shard),
            keep=keep,
            records=False,  # the report shows a passing scenario's summary, not its record
            progress=lambda done, total: ran.update(done=done, total=total),
        )
    except KeyboardInterrupt:
        progress.stop()
        output.warning("interrupted; the scenarios that ended are reported above")
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    finally:
        progress.stop()
    if not json_:
        results = shown[: len(suite.results)]
        for result in results:
            if result["status"] != "pass":
                show(render.test_failure_lines(result, str(result.get("dialect") or "platform")))
        if coverage and results:
            entries = suite.coverage
            show([("", ""), ("hook coverage:", "bold")])
            if entries:
                output.table(render.COVERAGE_COLUMNS, render.coverage_rows(entries))
                show(render.coverage_tail(entries))
            else:
                show([("no scenario declares a hook", "")])
        if results:
            show([("", ""), render.test_summary_line(results, suite.seconds, suite.stopped)])
    if suite.empty_shard:
        output.warning(f"shard {shard} has no scenario (the suite has {suite.selected})")
    elif not suite.results:
        where = ", ".join(str(p) for p in paths) if paths else "tests/"
        raise InvalidInput(  # exit 5, as suite.exit_code says
            f"no scenario with expectations found in {where}",
            hint="a test scenario is a scenario file with [[expect]] tables (docs/testing.md)",
            where=where,
        )
    raise typer.Exit(int(suite.exit_code))
