"""``belt interrupt auto`` and ``belt interrupt what-if``: approval rules, live and over history."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from belt.backends.backend import Backend, LocalBackend, matching_gates, open_backend
from belt.cli.interrupt import IntervalOption, JsonLinesFlag
from belt.cli.options import (
    ApiKeyOption,
    ApiOption,
    JsonFlag,
    OtlpOption,
    TraceFileOption,
    moment_option,
    option,
    start_tracing,
)
from belt.display import output
from belt.display.render import gate_event, gate_holds, span_text
from belt.outgoing import tracing

if TYPE_CHECKING:
    from belt.records.interrupts import Settlement
    from belt.rules.approvals import Outcome, Resolve
    from belt.wire.dto import InterruptJSON, WatchEvent

RulesOption = Annotated[
    Path,
    option(
        "The approval rules (TOML; see docs/interrupts.md, Approving at volume).",
        "--rules",
        metavar="FILE",
    ),
]
RunsOption = Annotated[
    list[str] | None,
    option("Only this run's gates (repeatable); needed with --api.", "--run", metavar="RUN_ID"),
]


def auto(
    rules: RulesOption,
    runs: RunsOption = None,
    once: Annotated[bool, option("Settle the gates pending now, then stop.", "--once")] = False,
    interval: IntervalOption = 0.2,
    json_: JsonLinesFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Settle gates by rules as they open, until Ctrl-C: the external resolver.

    Each pending gate is decided by the first rule that matches it: allow and deny settle it
    (its trail names the rule, the file and the file's digest; the rule's reason is its
    resolved data), ask and no match leave it to a person. One line per gate says what was
    done and why; a gate settled meanwhile by someone else is skipped with a line. A rules file
    with a problem is refused (exit 5) before anything is settled.

    Locally it follows every run's gates (or --run's) and a look costs two file-system stats
    while nothing changes; with --api it polls the list of each --run. belt serve records the
    rule in its trail (through the API, and whether the token was used); another API is sent
    the resolve alone and records it as it records any.

    Examples:

        belt interrupt auto --rules examples/approvals.toml
        belt interrupt auto --rules examples/approvals.toml --once --json
    """
    from belt.rules.approvals import load_rules, settle_as_they_open  # start-up: the rules engine

    loaded = load_rules(rules)
    if api and not runs:
        from belt.backends.remote import runs_needed  # start-up: httpx

        raise runs_needed("auto", hint="without --api, auto follows every run in the local store")
    start_tracing(otlp, trace)
    with open_backend(api, api_key=api_key) as backend:
        resolve = _resolver(backend, "api" if api else None)
        if once:
            events: Iterable[WatchEvent] = [
                {"event": "pending", "interrupt": item}
                for run in ([*runs] if runs else [None])
                for item in matching_gates(backend, run_id=run)
            ]
        else:
            whose = f"run {', '.join(runs)}" if runs else "every run"
            output.echo(
                f"settling the gates of {whose} by {rules} ({len(loaded.rules)} rule(s)) as "
                "they open; ask gates are left to a person; Ctrl-C stops",
                stderr=True,
            )
            events = backend.watch_interrupts(run_ids=runs or [], interval=interval)
        counts = {"settled": 0, "ask": 0, "skipped": 0}
        for outcome in settle_as_they_open(loaded, events, resolve):
            if isinstance(outcome, str):
                output.warning(outcome)
                continue
            skipped, settled = outcome.skipped is not None, outcome.settled is not None
            counts["skipped" if skipped else "settled" if settled else "ask"] += 1
            if json_:
                output.print_json_line(outcome.to_json())
            else:
                output.lines([_line(outcome, short_ids=not api)])
    output.echo(
        f"settled {counts['settled']}, left {counts['ask']} to a person, skipped "
        f"{counts['skipped']} settled meanwhile",
        stderr=True,
    )


def _resolver(backend: Backend, door: str | None) -> Resolve:
    """How auto resolves, each in a belt.settlement span: in the store, or through the API."""

    def settle(*, interrupt_id: str, decision: str, data: Any, by: Settlement) -> InterruptJSON:
        with tracing.settlement(by["how"], door):
            return backend.resolve_interrupt(
                interrupt_id=interrupt_id, decision=decision, data=data, by=by
            )

    return settle


def _line(outcome: Outcome, *, short_ids: bool) -> tuple[str, str]:
    """One line of auto: the gate, what it holds, and what the rules did and why."""
    item, verdict = outcome.item, outcome.verdict
    name = (item.get("short_id") if short_ids else None) or item.get("id")
    holds = f"{gate_event(item)} {gate_holds(item, 60)}"
    if outcome.skipped is not None:
        return f"{name}  skipped  {holds}  {outcome.skipped}", "yellow"
    if outcome.settled is None:
        return f"{name}  ask      {holds}  left to a person: {verdict.why}", ""
    style = "red" if verdict.decision == "deny" else "green"
    return f"{name}  {verdict.decision:<7}  {holds}  {verdict.why}", style


def what_if(
    rules: RulesOption,
    since: Annotated[
        str | None, option("Only gates settled at or after this time.", metavar="RFC3339")
    ] = None,
    runs: RunsOption = None,
    strict: Annotated[
        bool, option("Exit 1 when a rule would allow what a person denied.", "--strict")
    ] = False,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Run rules over the settled gates: what they would have decided, and where they disagree.

    Counts how many gates the rules would allow, deny and leave to a person; lists every gate
    they would settle otherwise than it was settled, those a rule would allow that a person
    denied first, each with the rule, the actual decision, who settled it and the reason they
    gave; and sums the person-time the rules would have saved (how long the gates a person
    settled, and the rules would settle, waited). Locally it reads every settled gate of the
    store (or of --run); with --api, the gates the API lists for each --run.

    Examples:

        belt interrupt what-if --rules examples/approvals.toml
        belt interrupt what-if --rules examples/approvals.toml --since 2026-08-01T00:00:00Z --strict
    """
    from belt.rules.approvals import load_rules, settled_history, what_if  # start-up: rules engine

    loaded = load_rules(rules)
    moment = moment_option(since, "--since")
    if api and not runs:
        from belt.backends.remote import runs_needed  # start-up: httpx

        raise runs_needed("what-if")
    with open_backend(api, api_key=api_key) as backend:
        if isinstance(backend, LocalBackend):
            records: list[Mapping[str, Any]] = [*settled_history(backend.store, runs or [])]
        else:
            records = [
                item
                for run in runs or []
                for item, _ in backend.find_interrupts(run_id=run, include_settled=True)
            ]
    report = what_if(loaded, records, since=moment)
    if not output.json_printed(json_, report.to_json()):
        would = report.counts
        output.echo(
            f"{report.file} ({report.digest[:19]}…) over {report.considered} settled gate(s): "
            f"would allow {would['allow']}, deny {would['deny']}, leave {would['ask']} to a person"
        )
        if report.disagreements:
            output.echo(
                f"{len(report.disagreements)} disagreement(s), {report.allowed_denied} where a "
                "rule would allow what a person denied:"
            )
            output.table(
                ["gate", "rule", "would", "was", "settled by", "their reason"],
                [
                    [d["interrupt"], d["rule"], d["would"], f"{d['actual']} ({d['status']})"]
                    + [d["settled_by"], d["their_reason"] or "-"]
                    for d in report.disagreements
                ],
                ids=(0,),
                short=not api,
            )
        else:
            output.echo("no disagreement with what was decided")
        output.echo(
            f"person-time saved: {span_text(report.saved_seconds)} over "
            f"{report.saved_gates} gate(s) a person settled"
        )
    if strict and report.allowed_denied:
        raise typer.Exit(1)
