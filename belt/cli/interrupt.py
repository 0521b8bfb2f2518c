"""``belt interrupt``: list, show, resolve, sweep and open the interrupts that gate hooks create."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from contextlib import suppress
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any

import typer

from belt.backends.backend import Backend, LocalBackend, matching_gates, open_backend, resolve_each
from belt.cli import BeltGroup, lazy_command
from belt.cli.options import (
    ApiKeyOption,
    ApiOption,
    JsonFlag,
    OtlpOption,
    TraceFileOption,
    argument,
    finite,
    moment_option,
    option,
    start_tracing,
)
from belt.display import output
from belt.errors import BeltError, Conflict, UsageError
from belt.outgoing import tracing
from belt.wire.dto import InterruptJSON
from belt.wire.enums import InterruptReason, InterruptResolution, InterruptStatus

# Each command is built only when a command line names it (see ``lazy_command``): building all
# of them would make `belt interrupt list`, the command people type most, pay for every one.
app = typer.Typer(
    cls=BeltGroup,
    name="interrupt",
    help="List, review, watch, resolve and open interrupts (the gates hooks put on runs).",
    no_args_is_help=True,
)


def pending_ids(incomplete: str) -> list[tuple[str, str]]:
    """Shell completion: the local store's pending interrupts, and what each holds."""
    from belt.display.render import gate_event, gate_holds  # start-up: not for resolve

    try:
        listed = LocalBackend().find_interrupts()
    except BeltError:
        return []
    offered = []
    for item, _ in listed:
        name = str(item.get("id"))
        if not name.startswith(incomplete) and str(item.get("short_id")).startswith(incomplete):
            name = str(item.get("short_id"))
        offered.append((name, " ".join(f"{gate_event(item)} {gate_holds(item, 40)}".split())))
    return offered


IntervalOption = Annotated[
    float, option("Seconds between looks.", metavar="S", min=0.05, callback=finite)
]
JsonLinesFlag = Annotated[bool, option("Print one JSON object per line.", "--json")]
InterruptRef = Annotated[
    str,
    argument(
        "The interrupt: its id, short id or a unique prefix (whole ids with --api).",
        metavar="ID",
        autocompletion=pending_ids,
    ),
]


def list_(
    run_id: Annotated[
        str | None,
        argument(
            "Only this run's interrupts, in the order they opened (needed with --api).",
            metavar="RUN_ID",
        ),
    ] = None,
    all_: Annotated[bool, option("Include settled interrupts.", "--all")] = False,
    chat: Annotated[str | None, option("Only this chat's.", metavar="CHAT_ID")] = None,
    run: Annotated[str | None, option("Only this run's (as RUN_ID).", metavar="RUN_ID")] = None,
    reason: Annotated[InterruptReason | None, option("Only interrupts of this reason.")] = None,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """List the pending interrupts of every run, newest first (all of them with --all).

    Each row says what the gate holds (the event, the tool and its arguments), its run and
    chat, how long it has left and what happens then. Every command that takes an interrupt
    id takes the short id shown here.

    Examples:

        belt interrupt list
        belt interrupt list --all --json
    """

    if run_id and run and run_id != run:
        raise UsageError(f"RUN_ID {run_id} and --run {run} name different runs")
    one_run = run_id or run
    with open_backend(api, api_key=api_key) as backend:
        listed = backend.find_interrupts(
            run_id=one_run, chat_id=chat, reason=reason, include_settled=all_
        )
    from belt.display.render import interrupt_table  # start-up: not for resolve

    columns, rows = interrupt_table(
        listed,
        datetime.now(UTC),
        short_ids=False,
        runs=not one_run,
        chats=not one_run and not chat,
        statuses=all_,
    )
    # Ids whole when piped; a terminal shows the short ids that name them (locally).
    ids = [i for i, column in enumerate(columns) if column in ("id", "run", "chat")]
    empty = f"no {'' if all_ else 'pending '}interrupts" + (f" on run {one_run}" if one_run else "")
    output.listing(
        json_, [i for i, _ in listed], columns, rows, empty=empty, ids=ids, short=not api
    )


def show(
    interrupt_id: InterruptRef,
    run: Annotated[
        str | None,
        option(
            "The interrupt's run; needed with --api, whose API lists interrupts per run.",
            metavar="RUN_ID",
        ),
    ] = None,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Show one interrupt: its state, deadline, resolution, how it was settled and the hook
    payload it holds.

    How a settled one was settled (--json adds settled_by, the line, and trail, the record: a
    person and the door they used, a rule, an expiry, a batch) is belt's own record, kept in
    the local store; with --api it is not shown (no platform sends it).

    Examples:

        belt interrupt show k2m9x0q4
    """
    from belt.display import render  # start-up: not for resolve
    from belt.records import interrupts  # start-up: not for resolve

    with open_backend(api, api_key=api_key) as backend:
        item, on_expiry = backend.show_interrupt(interrupt_id=interrupt_id, run_id=run)
    record = None if api else interrupts.read_record(interrupt_id=item["id"])
    trail = None if record is None else interrupts.trail(record)
    settled_by = None if record is None else interrupts.settled_by(record)
    shown = item if trail is None else {**item, "settled_by": settled_by, "trail": trail}
    if output.json_printed(json_, shown):
        return
    pending = item.get("status") == InterruptStatus.PENDING  # key_values leaves out None
    output.key_values(
        [
            ("id", item.get("id")),
            ("short id", item.get("short_id")),
            ("status", render.interrupt_status(item)),
            ("reason", item.get("reason")),
            ("source", item.get("source")),
            ("resource", _resource(item)),
            ("holds", render.gate_holds(item, 200)),
            ("run", item.get("run_id")),
            ("chat", item.get("chat_id")),
            ("created", item.get("created_at")),
            ("updated", item.get("updated_at")),
            ("expires", item.get("expires_at")),
            ("expires in", render.expires_in(item, datetime.now(UTC)) if pending else None),
            ("on expiry", on_expiry if pending else None),
            ("settled by", settled_by),
            ("resolved", item.get("resolved_at")),
            ("resolved data", item.get("resolved_data")),
            ("meta", item.get("meta")),
        ]
    )


def resolve(
    interrupt_id: Annotated[
        str,
        argument(
            "The interrupt: its id, short id or a unique prefix (whole ids with --api); "
            "with --all, give only the decision.",
            metavar="ID",
            autocompletion=pending_ids,
        ),
    ],
    decision: Annotated[
        InterruptResolution | None, argument("The decision.", metavar="allow|deny")
    ] = None,
    data: Annotated[
        str | None,
        option(
            "Stored as resolved_data: a JSON value, or @FILE to read one.", metavar="JSON|@FILE"
        ),
    ] = None,
    all_: Annotated[
        bool,
        option("Settle every pending gate the filters select (no ID: --all allow|deny).", "--all"),
    ] = False,
    run: Annotated[str | None, option("--all: only this run's.", metavar="RUN_ID")] = None,
    chat: Annotated[str | None, option("--all: only this chat's.", metavar="CHAT_ID")] = None,
    tool: Annotated[str | None, option("--all: only calls of this tool.", metavar="TOOL")] = None,
    event: Annotated[
        str | None, option("--all: only gates on this event.", metavar="EVENT")
    ] = None,
    yes: Annotated[bool, option("--all: do not ask to confirm the count.", "--yes", "-y")] = False,
    digest: Annotated[
        str | None,
        option(
            "--all: settle only if the selected gates have this digest (as shown, 12 hex "
            "digits or more).",
            metavar="DIGEST",
        ),
    ] = None,
    no_atomic: Annotated[
        bool,
        option(
            "--all with --api: against an API that resolves one gate at a time, settle "
            "them one by one (not all or none).",
            "--no-atomic",
        ),
    ] = False,
    json_: JsonFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Resolve a pending interrupt; exit 4 if it is no longer pending.

    With --all, settle every pending gate that --run, --chat, --tool and --event select (all
    of them, without filters). The gates are shown with a digest of their ids and payloads; a
    terminal asks to confirm, a script passes --yes, and --digest (the digest it was shown)
    so that no other set is settled. The batch is all or none: if one of them was settled or
    changed meanwhile, none is, and the command exits 4 naming it; the same batch again is a
    no-op that says so. `belt serve` (--api) does the same; an API that resolves one gate at a
    time cannot, and is used only with --no-atomic.

    Examples:

        belt interrupt resolve k2m9x0q4 allow
        belt interrupt resolve --all deny --tool delete_file --yes
    """

    from belt.reading.inputs import read_json_option  # start-up: belt interrupt list

    if all_ and decision is not None:  # `resolve --all allow|deny` takes no ID
        raise UsageError(
            f"--all settles the gates the filters select and takes no ID ({interrupt_id!r} given)",
            hint=f"belt interrupt resolve --all {decision.value}, with --run, --chat, --tool or "
            "--event to choose the gates",
        )
    if all_:
        if interrupt_id not in {r.value for r in InterruptResolution}:
            raise UsageError(f"--all needs allow or deny, not {interrupt_id!r}")
        chosen = interrupt_id
    elif decision is None:
        raise UsageError(
            f"give a decision: belt interrupt resolve {interrupt_id} allow (or deny)",
            hint="to settle many gates at once: belt interrupt resolve --all allow (or deny)",
        )
    else:
        chosen = decision.value
        given: dict[str, object] = {"--run": run, "--chat": chat, "--tool": tool, "--event": event}
        given |= {"--digest": digest or None, "--no-atomic": no_atomic or None}
        for name in (name for name, value in given.items() if value is not None):
            does = "is for" if name in ("--digest", "--no-atomic") else "selects gates for"
            raise UsageError(f"{name} {does} --all; with one ID it has no use")
    resolved_data = None if data is None else read_json_option(data, option="--data")
    start_tracing(otlp, trace)
    with open_backend(api, api_key=api_key) as backend:
        if all_:
            select = partial(matching_gates, run_id=run, chat_id=chat, tool=tool, event=event)
            resolve_all(backend, chosen, resolved_data, select, yes, json_, digest, not no_atomic)
            return
        with tracing.settlement("person", "api" if api else "cli"):
            item = backend.resolve_interrupt(
                interrupt_id=interrupt_id, decision=chosen, data=resolved_data
            )
    if output.json_printed(json_, item):
        return
    output.success(f"{item.get('id') or interrupt_id} resolved: {item.get('resolution') or chosen}")


def resolve_all(
    backend: Backend,
    decision: str,
    data: object,
    select: Callable[..., list[InterruptJSON]],
    yes: bool,
    json_: bool,
    digest: str | None,
    atomic: bool,
) -> None:
    """`resolve --all`: gates shown, confirmed, settled as a batch (one by one with --no-atomic)."""
    from belt.records import interrupts as records  # start-up: belt --help

    wanted = None if digest is None else digest.strip().lower().removeprefix("sha256:")
    if wanted is not None and not re.fullmatch("[0-9a-f]{12,}", wanted):
        raise UsageError(
            f"--digest {digest!r}: expected the digest shown (12 hex digits or more, "
            "sha256: optional)"
        )
    items = select(backend)
    found = records.batch_digest(items) if items else ""
    if wanted is not None and not found.startswith(f"sha256:{wanted}"):
        # The batch --digest names, settled before (in whole or in part), is settled again,
        # which changes nothing but the rest; any other set of gates exits 4.
        selected = select(backend, include_settled=True)
        status = ("resolved", decision)
        settled = [i for i in selected if (i.get("status"), i.get("resolution")) == status]
        if isinstance(backend, LocalBackend):  # an API does not say who settled a gate
            read = partial(records.read_record, store=backend.store)
            ours = records.batch_id(wanted)
            settled = [i for i in settled if records.in_batch(read(interrupt_id=i["id"]), ours)]
        batch = [item for item in selected if item.get("status") == "pending"] + settled
        if not settled or not records.batch_digest(batch).startswith(f"sha256:{wanted}"):
            now = records.short_digest(found) if found else "none (no pending gate matches)"
            raise Conflict(
                f"the gates selected now are not the ones shown: digest {now}, not "
                f"{wanted[:12]}; nothing settled",
                hint="run it again without --digest to see the gates selected now",
            )
        _settle(backend, batch, records.batch_digest(batch), decision, data, json_=json_)
        return
    if not items:
        if not output.json_printed(json_, {"resolved": [], "missed": []}):
            output.echo("no pending interrupts match", stderr=True)
        return
    if not json_:  # the gates it will settle, and their digest
        from belt.display.render import gate_event, gate_holds  # start-up: not for resolve

        for item in items:
            holds = f"{gate_event(item)} {gate_holds(item)}"
            output.echo(f"  {_name(item)}  {holds}  run {item.get('run_id')}", stderr=True)
        output.echo(f"{len(items)} gate(s), digest {records.short_digest(found)}", stderr=True)
    one_by_one = not backend.batch_atomic()
    if one_by_one and atomic:
        raise UsageError(
            "this API resolves one gate at a time, so belt cannot promise all or none of "
            f"the {len(items)} gate(s): nothing settled",
            hint="add --no-atomic to settle them one by one (some may be settled meanwhile "
            "by others and are then skipped)",
        )
    count = f"{len(items)} pending gate(s)"
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(
                f"resolve --all would settle {count} and asks first, but standard input is "
                "not a terminal",
                hint=f"add --yes --digest {records.short_digest(found)} to settle exactly these "
                "from a script",
            )
        if not typer.confirm(f"settle {count} as {decision}?", err=True):
            raise BeltError("nothing resolved: not confirmed")
    _settle(backend, items, found, decision, data, json_=json_, one_by_one=one_by_one)


def _settle(
    backend: Backend,
    items: list[InterruptJSON],
    digest: str,
    decision: str,
    data: object,
    *,
    json_: bool,
    one_by_one: bool = False,
) -> None:
    """Settle ``items`` as one batch (or one by one) and say, gate by gate, what it did."""
    done: Mapping[str, Any]
    door = "cli" if isinstance(backend, LocalBackend) else "api"  # the belt.settlement span's
    with tracing.settlement("person" if one_by_one else "batch", door):
        if one_by_one:
            resolved, missed = resolve_each(backend, items, decision=decision, data=data)
            done = {"digest": digest, "atomic": False, "resolved": resolved}
            total, how = len(items), ", one by one"
        else:
            ids = [item["id"] for item in items]
            done = backend.resolve_batch(ids=ids, digest=digest, decision=decision, data=data)
            missed, total, how = [], len(done["resolved"]), f" (batch {done['batch']})"
    if done.get("repeated") and not json_:
        output.echo(
            f"{total} gate(s) settled by this batch already{how}: nothing to do", stderr=True
        )
        return
    reasons = [{"id": item["id"], "reason": why} for item, why in missed]
    if output.json_printed(json_, {**done, "missed": reasons}):
        return
    for item, why in missed:
        output.warning(f"{_name(item)} skipped: {why}")
    for item in done["resolved"]:
        output.success(f"{_name(item)} resolved: {item.get('resolution')}")
    output.echo(f"resolved {len(done['resolved'])} of {total} as {decision}{how}", stderr=True)


ANSWERS = {key: word for word in ("allow", "deny", "skip", "quit") for key in (word, word[0])}


def review(
    resume: Annotated[
        bool,
        option(
            "Resume each simulated run once all its gates are settled, as `belt sim resume` does.",
            "--resume",
        ),
    ] = False,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Walk the pending interrupts one by one and allow, deny or skip each (needs a terminal).

    Each gate shows what it holds (event, tool, arguments), the transcript just before it and
    its hook payload; the one that expires first comes first. An answer is an ordinary resolve,
    with optional data for the resolution. From a script, use `belt interrupt resolve`.

    Examples:

        belt interrupt review --resume
    """
    from belt.display.render import review_lines  # start-up: not for resolve
    from belt.records import interrupts  # start-up: not for resolve

    if not sys.stdin.isatty():
        pending = LocalBackend().find_interrupts()  # the hint names the oldest
        raise UsageError(
            "belt interrupt review asks on a terminal, and standard input is not one",
            hint="to resolve from a script or a pipe: `belt interrupt resolve "
            f"{pending[-1][0]['short_id']} allow` (or deny, with --data JSON for data); "
            "`belt interrupt list` shows every pending gate"
            if pending
            else "no gate is pending now; `belt interrupt list --all` shows the settled ones",
        )
    start_tracing(otlp, trace)
    backend = LocalBackend()
    store = backend.store
    passed: set[str] = set()
    done = {"allow": 0, "deny": 0, "skip": 0}
    while True:
        # The gates already overdue are settled as the platform's sweep would, not asked about.
        if settled := interrupts.sweep(store=store):
            each = ", ".join(f"{_name(i)} {i['resolution']}" for i in settled)
            output.warning(
                f"settled {len(settled)} overdue gate(s) with their default resolution, as the "
                f"platform would have: {each}"
            )
        waiting = [(i, e) for i, e in backend.find_interrupts() if i["id"] not in passed]
        if not (left := len(waiting)):
            break
        item, on_expiry = min(waiting, key=lambda listed: str(listed[0].get("expires_at")))
        try:
            before = interrupts.transcript_before(store=store, record=item)
        except BeltError as exc:
            output.warning(f"no transcript: {exc.message}")
            before = []
        position = f"{sum(done.values()) + 1} of {len(waiting) + sum(done.values())}"
        output.lines(review_lines(item, on_expiry, before, datetime.now(UTC), position=position))
        answer = _ask_decision()
        if answer == "quit":
            break
        passed.add(item["id"])
        if answer == "skip":
            done["skip"] += 1
            continue
        data = _ask_data()
        try:
            with tracing.settlement("person", "review"):
                resolved = backend.resolve_interrupt(
                    interrupt_id=item["id"], decision=answer, data=data, door="review"
                )
        except BeltError as exc:  # settled meanwhile by someone else, or by the sweep
            output.warning(exc.message)
            continue
        done[answer] += 1
        output.success(f"{resolved.get('short_id')} resolved: {resolved.get('resolution')}")
        # The run goes on once every gate of it is settled.
        run_id = str(item.get("run_id"))
        if not resume or not store.exists("run", run_id):
            continue
        if interrupts.list_interrupts(store=store, run_id=run_id):
            continue
        from belt.engine.entrypoints import resume_run  # start-up: the engine

        try:
            report, executed = resume_run(run_id=run_id)
        except BeltError as exc:  # another process continues it, or it waits at no gate
            output.warning(f"run {run_id} not resumed: {exc.message}")
            continue
        states = {run["id"]: str(run["state"]) for run in report["runs"]}
        for resumed in executed:
            output.success(f"run {resumed} resumed: {states.get(resumed, '?')}")
    total = sum(done.values())
    still = f"; {left} still pending" if left else ""
    tally = f"{total}: {done['allow']} allowed, {done['deny']} denied, {done['skip']} skipped"
    said = f"reviewed {tally}{still}" if total else f"reviewed none{still}"
    output.echo(said if total or left else "no pending interrupts", stderr=True)


def _ask(prompt: str) -> str | None:
    """A line typed after ``prompt``, stripped; None at the end of input."""
    try:
        return input(prompt).strip()
    except EOFError:
        output.echo()
        return None
    except KeyboardInterrupt:
        output.echo(stderr=True)  # the line "interrupted" goes below the prompt
        raise


def _ask_decision() -> str:
    """allow, deny, skip or quit, asked until one of them is given (quit at end of input)."""
    while (text := _ask("allow, deny, skip or quit? [a/d/s/q] ")) is not None:
        if (answer := ANSWERS.get(text.lower())) is not None:
            return answer
        if text:
            output.warning(f"{text.lower()!r} is not an answer: type a, d, s or q")
    return "quit"


def _ask_data() -> object:
    """Optional data for the resolution, asked until it is valid JSON (none when left empty)."""
    from belt.reading.inputs import read_json_option  # start-up: belt interrupt list

    while text := _ask("data for the resolution (JSON or @FILE, Enter for none): "):
        try:
            return read_json_option(text, option="data")
        except BeltError as exc:
            output.warning(exc.message)
    return None


def watch(
    runs: Annotated[
        list[str] | None,
        option(
            "Only this run's interrupts (repeatable); needed with --api.", "--run", metavar="RUN_ID"
        ),
    ] = None,
    interval: IntervalOption = 1.0,
    json_: JsonLinesFlag = False,
    api: ApiOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Print each interrupt as it opens and as it is settled, until Ctrl-C.

    Settled means resolved (by a person or the API), expired (by a sweep) or cancelled. It
    starts with the gates already pending. Locally a look costs two file-system stats while
    nothing changes; with --api it polls the list of each --run.

    Examples:

        belt interrupt watch
        belt interrupt watch --json --api http://127.0.0.1:8787 --run ar_k2m9x0q4h7c1v8b5n3t6
    """
    from belt.display.render import watch_line  # start-up: not for resolve

    with open_backend(api, api_key=api_key) as backend:
        if runs or not api:  # with --api and no --run, the backend refuses first
            output.echo(_watching(runs or [], api, interval), stderr=True)
        for event in backend.watch_interrupts(run_ids=runs or [], interval=interval):
            if event["event"] == "warning":
                output.warning(str(event["message"]))
            elif json_:
                output.print_json_line(event)
            else:
                output.lines([watch_line(event, datetime.now(UTC), short_ids=not api)])


def _watching(runs: list[str], api: str | None, interval: float) -> str:
    """The line `watch` starts with: whose gates, where, how often (a platform by its host)."""
    from belt.deliveries.effects import url_host  # start-up: pydantic
    from belt.paths import state_dir  # start-up: belt --help

    whose = f"run {', '.join(runs)}" if runs else "every run"
    where = f"at {url_host(api)}, polled" if api else f"in {state_dir()}, looked at"
    return (
        f"watching the gates of {whose} {where} every {interval:g} s: those pending now, then "
        "each as it opens and settles; Ctrl-C stops"
    )


def sweep(
    at: Annotated[
        str | None,
        option(
            "Settle what would be overdue at this time instead of now (gates opened on a "
            "virtual clock too).",
            metavar="RFC3339",
        ),
    ] = None,
    json_: JsonFlag = False,
    otlp: OtlpOption = None,
    trace: TraceFileOption = None,
) -> None:
    """Settle every overdue pending interrupt with its default resolution (status expired).

    A sweep on wall time leaves the gates opened on a virtual clock (a scenario's clock,
    `belt sim run --clock`, `belt serve --clock`), whose deadlines are not wall time; --at
    settles every gate overdue at the time it names, and stamps them expired at that time.

    Examples:

        belt interrupt sweep
        belt interrupt sweep --at 2026-08-11T14:10:00Z --json
    """

    from belt.records.interrupts import sweep  # start-up: belt interrupt list

    moment = moment_option(at, "--at")
    start_tracing(otlp, trace)
    with tracing.settlement("expiry"):
        settled = sweep(now=moment)
    if output.json_printed(json_, {"settled": len(settled), "interrupts": settled}):
        return
    output.success(f"settled {len(settled)} overdue interrupt(s)")
    if settled:
        rows = [[i.get(key) for key in ("id", "run_id", "source", "resolution")] for i in settled]
        output.table(["id", "run", "source", "resolution"], rows, ids=(0, 1))


def create(
    run: Annotated[
        str, option("The run to gate: working or awaiting a decision.", metavar="RUN_ID")
    ],
    chat: Annotated[str, option("The run's chat.", metavar="CHAT_ID")],
    event: Annotated[str, option("A gate-able event, e.g. agent.tool_call.")],
    timeout: Annotated[
        int | None, option("Seconds until it expires (default 300).", metavar="S")
    ] = None,
    default_resolution: Annotated[
        InterruptResolution | None, option("Resolution on expiry (default allow).")
    ] = None,
    meta: Annotated[
        str | None,
        option("The hook payload to store as meta (a JSON object).", metavar="JSON|@FILE"),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Open a hook gate by hand, as a gate hook on EVENT would.

    The run must be in the store and running or awaiting a decision (working or input_required),
    and CHAT_ID its chat: a gate fires only inside a running conversation. Each is named by its
    id, short id or a unique prefix.

    Examples:

        belt interrupt create --run ar_k2m9x0q4 --chat ch_q4h7c1v8 --event agent.tool_call
    """

    from belt.reading.inputs import read_json_object_option  # start-up: belt interrupt list
    from belt.records.interrupts import open_gate  # start-up: belt interrupt list

    item = open_gate(
        run_id=run,
        chat_id=chat,
        event=event,
        timeout=timeout,
        default_resolution=default_resolution,
        meta=None if meta is None else read_json_object_option(meta, option="--meta"),
    )
    if output.json_printed(json_, item):
        return
    output.success(f"opened {item['id']} on run {item['run_id']}")
    on_expiry = default_resolution or "allow"
    shown = [("source", item["source"]), ("resource", _resource(item))]
    output.key_values([*shown, ("expires", item["expires_at"]), ("on expiry", on_expiry)])


def log(
    since: Annotated[
        str | None,
        option(
            "Only gates settled at or after T: an RFC 3339 time, or a span back from now "
            "(90m, 2h, 7d).",
            metavar="T",
        ),
    ] = None,
    run: Annotated[str | None, option("Only this run's.", metavar="RUN_ID")] = None,
    json_: JsonFlag = False,
) -> None:
    """List the settled gates, the latest first, with how each was settled.

    A person (the OS user, and the door: cli, review, inspector, or api with whether a token
    was used), a rule (its file, name and the file's digest), an expiry's default, a batch (its
    id and digest), a scenario or an agent API route. Gates settled before belt kept this read
    "unknown". The record is the local store's own (no platform sends it), so there is no
    --api; with --json each item is an InterruptDTO with settled_by (the line) and trail (the
    record).

    Examples:

        belt interrupt log --since 24h
        belt interrupt log --run ar_k2m9x0q4 --json
    """
    from belt.display import render  # start-up: not for resolve
    from belt.records import interrupts as gates  # start-up: not for resolve

    backend = LocalBackend()
    run_id = None if run is None else backend.run_named(run)
    settled: list[Any] = [
        {**gates.to_dto(r), "settled_by": gates.settled_by(r), "trail": gates.trail(r)}
        for r in gates.settlements(store=backend.store, since=_since(since), run_id=run_id)
    ]
    output.listing(
        json_,
        settled,
        ["settled", "id", "status", "event", "holds", "run", "settled by"],
        [
            [str(item.get("resolved_at")), str(item.get("id")), render.interrupt_status(item)]
            + [render.gate_event(item), render.gate_holds(item), str(item.get("run_id"))]
            + [str(item.get("settled_by"))]
            for item in settled
        ],
        empty="no settled gates" + (f" since {since}" if since else ""),
        ids=(1, 5),
    )


def _since(text: str | None) -> datetime | None:
    """--since: an RFC 3339 time, or a span back from now; a usage error naming it."""
    if text is None:
        return None
    from belt.store.clock import parse_duration  # start-up: belt --help

    with suppress(BeltError):  # not a span: a time, then
        return datetime.now(UTC) - parse_duration(text, "--since")
    try:
        return moment_option(text, "--since")
    except UsageError:
        raise UsageError(
            f"--since {text!r}: expected an RFC 3339 time (2026-08-11T14:10:00Z) or a span "
            "back from now (90m, 2h, 7d)"
        ) from None


def _name(item: InterruptJSON) -> str:
    return item.get("short_id") or item["id"]


def _resource(item: InterruptJSON) -> str:
    kind = item.get("resource_type") or "-"
    return f"{kind}:{item['resource_id']}" if item.get("resource_id") else kind


for _function in ("list_", "show", "resolve", "review", "watch", "sweep", "create", "log"):
    lazy_command("interrupt", _function.rstrip("_"), f"belt.cli.interrupt:{_function}")


lazy_command("interrupt", "auto", "belt.cli.approvals:auto")
lazy_command("interrupt", "what-if", "belt.cli.approvals:what_if")
