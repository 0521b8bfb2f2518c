"""How reports and live records read on a terminal: (text, style) lines for ``belt.display.output``.

Built from the JSON-ready objects the core returns, so ``--json`` and the terminal view show the
same thing. Nothing here prints: ``belt.display.output`` does, and escapes what came from outside.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from belt import dialects
from belt.display.text import short

if TYPE_CHECKING:
    from belt.deliveries.replay import ReplayReport, RowJSON
    from belt.dialects.simreport import Delivery, ReportRun, SimReport
    from belt.records.messages import Message
    from belt.wire.dto import InterruptJSON, WatchEvent

Lines = list[tuple[str, str]]


def transcript_lines(report: SimReport, *, verbose: bool = False) -> Lines:
    """The simulation as (line, style) pairs; ``verbose`` adds hook calls that changed nothing."""
    return dialects.of(report["simulation"]).transcript_lines(report, verbose=verbose)


Render = Callable[[Mapping[str, object]], Lines]


def conversation(
    messages: list[Message], show: Render, quiet: list[Delivery]
) -> list[tuple[Message, Lines]]:
    """Each message with its lines, a hook row (or ``quiet`` delivery) under its tool call."""
    owner = {str(i["id"]): m["id"] for m in messages for i in m.get("tool_invocations") or []}
    about = {m["id"]: str((m.get("sim") or {}).get("invocation_id") or "") for m in messages}
    # A row shown under its tool call stands, for what came after it, for the call's message.
    moved = {
        m["id"]: owner[about[m["id"]]]
        for m in messages
        if m["role"] == "event" and about[m["id"]] in owner
    }
    under: dict[str, Lines] = {}
    after: dict[str, Lines] = {}
    for record in quiet:
        call = str(record.get("invocation_id") or "")
        if call in owner:
            under.setdefault(call, []).append(quiet_line(record))
        else:
            follows = str(record.get("after_message") or "")
            after.setdefault(moved.get(follows, follows), []).append(quiet_line(record))
    for message in (m for m in messages if m["id"] in moved):
        under.setdefault(about[message["id"]], []).extend(show(message))
    out: list[tuple[Message, Lines]] = []
    for message in (m for m in messages if m["id"] not in moved):
        lines = show(message)
        tools = [i for i, (text, _) in enumerate(lines) if text.startswith("  tool     ")]
        calls = message.get("tool_invocations") or []
        if calls and len(tools) == len(calls):  # each call's hook rows right under its line
            lines = lines[: tools[0]] + [
                line
                for i, invocation in zip(tools, calls, strict=True)
                for line in [lines[i], *under.get(str(invocation["id"]), [])]
            ]
        out.append((message, lines + after.get(message["id"], [])))
    return out


def handler_text(hook: Mapping[str, object], routed_to: object = None) -> str:
    """A hook's handler as a row names it (``A → B`` when a ``--route`` sent it elsewhere)."""
    if routed_to:
        return f"{hook['handler']} → {routed_to}"
    kind = "" if hook["handler"] == hook["handler_type"] else f" ({hook['handler_type']})"
    return f"{hook['handler']}{kind}"


def quiet_line(record: Mapping[str, object]) -> tuple[str, str]:
    """A hook call that left no row (``-v``): what it answered, which changed nothing."""
    hook = {"handler": record.get("handler"), "handler_type": record.get("handler_type")}
    mode, note = (" (async)", "not acted on") if record.get("async") else ("", "nothing changed")
    text = (
        f"    hook   {record.get('hook_event')}: {handler_text(hook, record.get('routed_to'))}"
        f"{mode} → {record.get('decision') or 'allow'}, {note} {record.get('duration_ms', 0)}ms"
    )
    return (text, "dim")


TOOL_STYLES = {"completed": "", "failed": "red", "awaiting_approval": "yellow"}


def message_lines(row: Mapping[str, object]) -> Lines:
    """How one message (a ``Message``) reads in the transcript."""
    message = cast("Message", row)
    role = message["role"]
    text = " ".join(c.get("text") or "" for c in message.get("content") or [] if c)
    sim = message.get("sim") or {}
    if role == "user":
        return [(f"user       {text}", "bold cyan")]
    if role == "system":
        return [(f"system     {short(text)}", "dim")]
    if role == "assistant":
        out = [(f"assistant  {text}", "green")] if text else []
        request = sim.get("request")
        if isinstance(request, dict):
            tools = len(request.get("tools") or [])
            schema = "a JSON-schema answer" if request.get("answer_schema") else "free text"
            out.append((f"  asked    as the agent, {tools} tool(s) offered, {schema}", "dim"))
        for invocation in message.get("tool_invocations") or []:
            function = invocation["function"]
            call = f"{function['name']}({short(function.get('arguments') or {}, 60)})"
            result, status = invocation.get("result"), invocation["status"]
            tail = f" → {short(result, 60)}" if result else ""
            out.append((f"  tool     {call}  [{status}]{tail}", TOOL_STYLES.get(status, "dim")))
        return out
    if role == "injection":
        info = sim.get("injection") or {}
        life = "until replaced" if not info.get("ttl_turns") else f"ttl {info['ttl_turns']} turn(s)"
        key = f", key {info['dedup_key']}" if info.get("dedup_key") else ""
        state = "" if sim.get("active") else f", ended: {sim.get('ended', 'no')}"
        return [(f"  inject   {short(text)}  ({life}{key}{state})", "magenta")]
    if role == "compaction":
        return [(f"  compact  {text}", "dim")]
    if role == "event":
        out = []
        for content in message.get("content") or []:
            event = content.get("event") or {}
            if event.get("type") == "hook":
                hook = event["hook"]
                parts = [
                    f"    hook   {hook['event']}: {handler_text(hook, sim.get('routed_to'))}",
                    hook.get("decision") and f"→ {hook['decision']}",
                    hook.get("reason") and f"({hook['reason']})",
                    hook.get("injected") and "+ injected",
                    hook.get("error") and f"! error: {hook['error']}",
                    f"{hook.get('duration_ms', 0)}ms",
                ]
                out.append((" ".join(part for part in parts if part), "dim"))
            else:
                style = "red" if event.get("type") == "run_failed" else "yellow"
                out.append((f"  {content.get('text', '')}", style))
        return out
    return []


def run_state(run: ReportRun) -> str:
    """A run's state as the transcript heading shows it."""
    if run.get("interrupted"):
        return f"{run['state']}, interrupted (its process is gone)"
    return str(run["state"])


def interrupted_lines(report: SimReport) -> Lines:
    """Runs whose process was killed: how to go on from their last durable point."""
    lines: Lines = []
    for run in report["runs"]:
        if run.get("interrupted"):
            head = f"⚠ run {run['id']} was interrupted: the process running it is gone"
            said = ["continue it from its last durable point, or end it:"]
            said += [f"  belt sim {command} {run['id']}" for command in ("resume", "stop")]
            lines += [("", ""), (head, "bold red"), *((text, "") for text in said)]
    simulation = report["simulation"]
    if simulation.get("interrupted"):
        left = simulation["turns_left"]
        gone = f"the process running it is gone with {left} turn{'' if left == 1 else 's'} left"
        lines += [
            ("", ""),
            (f"⚠ the simulation was interrupted between runs: {gone}", "bold red"),
            ("go on with the turns left:", ""),
            (f"  belt sim resume {simulation['resume_run']}", ""),
        ]
    return lines


def settle_lines(
    report: SimReport, run_id: object, commands: list[str], what: str, doing: str
) -> Lines:
    """How to settle what a run waits at (each ``what``, by ``commands``) and go on."""
    if report["simulation"].get("ephemeral"):
        again = f"run the scenario again without --ephemeral to {doing} and go on"
        return [(f"it ran in memory (--ephemeral) and is gone with this process: {again}", "dim")]
    wait = f"(or `belt sim resume {run_id} --wait`: it goes on as soon as every {what} is settled)"
    return [
        (f"resolve each {what}, then resume:", ""),
        *((f"  {command}", "") for command in commands),
        (f"  belt sim resume {run_id}", ""),
        (wait, "dim"),
    ]


def retried(attempt: object) -> bool:
    """Whether a hook task ``attempt`` (its number) is a retry."""
    return isinstance(attempt, int) and attempt > 1


# -- live lines ------------------------------------------------------------------------------


TASK_STYLES = {"acknowledged": "green", "continue": "magenta", "failed": "bold red"}
TASK_STYLES["cancelled"] = "yellow"


def clock(stamp: object) -> str:
    """A stored timestamp as local HH:MM:SS."""
    try:
        return datetime.fromisoformat(str(stamp)).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return "--:--:--"


def task_line(record: Mapping[str, object]) -> tuple[str, str]:
    """One live line of a simulation or an executor: a task, the gates waited at, a warning."""
    kind = record.get("kind")
    if kind == "warning":
        return (f"warning: {record['text']}", "yellow")
    if kind == "approval":
        return (approval_waiting_text(record, None), "yellow")
    if kind == "gates":
        pending = cast("list[InterruptJSON]", record["pending"])
        return (gates_waiting_text(record["run_id"], pending), "yellow")
    if kind == "settled":
        return (f"every gate of run {record['run_id']} is settled; going on", "dim")
    if kind == "hooks_from":
        where = f'plugins["{record["extension"]}"].configuration in {record["file"]}'
        declared = "(stored by `rho extensions configure`; the scenario declares none)"
        return (f"lifecycle hooks: {where} {declared}", "dim")
    head = f"{clock(record.get('at'))}  {record['event']}  {record['task_key']}"
    if kind == "waiting":
        wait = f"waiting up to {record['timeout_ms']} ms for an executor to serve {record['event']}"
        run = f"(belt executor run --tool {record['tool']}=TARGET)"
        return (f"{wait} task {record['task_key']} {run}", "yellow")
    if kind == "skip":
        return (f"{head}  skipped: {record['detail']}", "dim")
    text = outcome = str(record["outcome"])
    if outcome == "continue" and record.get("feedback"):
        text += f' "{short(str(record["feedback"]), 60)}"'
    elif record.get("code"):
        text += f" {record['code']}: {record['detail']}"
    if retried(record.get("attempt")):
        text += f" (attempt {record['attempt']})"
    return (f"{head}  {text}  {record.get('duration_ms') or 0} ms", TASK_STYLES.get(outcome, ""))


# -- interrupts ------------------------------------------------------------------------------


def expires_in(item: InterruptJSON, now: datetime) -> str:
    """How long a pending interrupt has left, as ``4m 12s``; ``overdue`` or ``-`` otherwise."""
    if item.get("status") != "pending" or not item.get("expires_at"):
        return "-"
    try:
        deadline = datetime.fromisoformat(str(item["expires_at"]))
    except ValueError:
        return "?"
    left = int((deadline.replace(tzinfo=deadline.tzinfo or UTC) - now).total_seconds())
    return span_text(left) if left > 0 else "overdue"


def span_text(seconds: float) -> str:
    """A span of time as ``3h 12m``, ``4m 5s`` or ``12s``."""
    hours, rest = divmod(round(seconds), 3600)
    minutes, rest = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {rest}s" if minutes else f"{rest}s"


def deadline(item: InterruptJSON, now: datetime, on_expiry: str | None) -> str:
    """When a pending gate expires and what happens then."""
    left, then = expires_in(item, now), on_expiry or "?"
    if left == "overdue":
        return f"overdue: the next sweep settles it as {then}"
    return f"expires in {left}, then {then}"


def gate_event(item: InterruptJSON) -> str:
    """What an interrupt stopped: a hook gate's event (``agent.tool_call``), else its reason."""
    source = item.get("source")
    if isinstance(source, str) and source.startswith("hook:"):
        return short(source.removeprefix("hook:"), 40)
    return short(str(item.get("reason")), 40)


def gate_holds(item: InterruptJSON, limit: int = 50) -> str:
    """What a gate holds: the tool call and its arguments, the turn, or the resource."""
    meta = item.get("meta")
    data = meta.get("data") if isinstance(meta, dict) else None
    if isinstance(data, dict) and isinstance(data.get("tool"), str):
        return f"{short(data['tool'], 30)}({short(data.get('arguments') or {}, limit)})"
    if isinstance(meta, dict) and type(meta.get("turn_count")) is int:
        return f"turn {meta['turn_count']}"
    kind = short(item.get("resource_type") or "-", 30)
    return f"{kind}:{short(item['resource_id'], 30)}" if item.get("resource_id") else kind


def interrupt_status(item: InterruptJSON) -> str:
    """``pending``, or how it was settled: ``resolved (allow)``, ``expired (deny)``."""
    status = str(item.get("status"))
    return f"{status} ({item['resolution']})" if item.get("resolution") else status


def interrupt_table(
    listed: list[tuple[InterruptJSON, str | None]],
    now: datetime,
    *,
    short_ids: bool,
    runs: bool = True,
    chats: bool = True,
    statuses: bool = False,
) -> tuple[list[str], list[list[str]]]:
    """The columns and rows of ``belt interrupt list``."""
    every = ["id", "event", "holds", "run", "chat", "status", "expires in", "then"]
    hidden = {"run": not runs, "chat": not chats, "status": not statuses}
    keep = [i for i, column in enumerate(every) if not hidden.get(column)]
    rows = [
        [
            str(item.get("short_id") if short_ids else item.get("id")),
            gate_event(item),
            gate_holds(item),
            str(item.get("run_id")),
            str(item.get("chat_id")),
            interrupt_status(item),
            expires_in(item, now),
            (on_expiry or "?") if item.get("status") == "pending" else "-",
        ]
        for item, on_expiry in listed
    ]
    return [every[i] for i in keep], [[row[i] for i in keep] for row in rows]


WATCH_STYLES = {"pending": "yellow", "opened": "bold yellow", "resolved": "green"}
WATCH_STYLES |= {"expired": "magenta", "cancelled": "dim"}


def watch_line(event: WatchEvent, now: datetime, *, short_ids: bool) -> tuple[str, str]:
    """One line of ``belt interrupt watch``: when, what happened, which gate, what it holds."""
    item, kind = event["interrupt"], str(event["event"])
    name = str(item.get("short_id") if short_ids else item.get("id"))
    what, where = f"{gate_event(item)} {gate_holds(item)}", f"run {item.get('run_id')}"
    if kind in ("pending", "opened"):
        opened = f"{clock(item.get('created_at'))}  {kind:<9} {name}  {what}  {where}"
        return (f"{opened}  {deadline(item, now, event.get('on_expiry'))}", WATCH_STYLES[kind])
    outcome = item.get("resolution") or "-"
    style = "red" if kind == "resolved" and outcome == "deny" else WATCH_STYLES.get(kind, "")
    when = clock(item.get("resolved_at") or item.get("updated_at"))
    return (f"{when}  {kind:<9} {name}  {outcome}  {what}  {where}", style)


def review_lines(
    item: InterruptJSON,
    on_expiry: str | None,
    before: list[Message],
    now: datetime,
    *,
    position: str,
    payload_lines: int = 30,
) -> Lines:
    """One gate as ``belt interrupt review`` shows it, its payload cut after ``payload_lines``."""
    lines: Lines = [
        ("", ""),
        (f"── {position} · {item.get('short_id')} ({item.get('id')})", "bold"),
        (f"  {gate_event(item)}  {gate_holds(item, 200)}", "bold yellow"),
    ]
    meta = item.get("meta")
    data = meta.get("data") if isinstance(meta, dict) else None
    if isinstance(data, dict) and "arguments" in data:
        arguments = json.dumps(data["arguments"], indent=2, ensure_ascii=False).splitlines()
        lines.append(("  arguments", "bold"))
        lines += [(f"    {line}", "") for line in arguments[:payload_lines]]
    opened = f"opened {clock(item.get('created_at'))} · {deadline(item, now, on_expiry)}"
    lines.append((f"  run {item.get('run_id')} · chat {item.get('chat_id')} · {opened}", "dim"))
    if before:
        lines.append(("  before it", "bold"))
        for message in before:
            lines += [(f"    {text}", style) for text, style in message_lines(message)]
    payload = json.dumps(meta, indent=2, ensure_ascii=False).splitlines()
    lines += [("  payload", "bold"), *((f"    {line}", "dim") for line in payload[:payload_lines])]
    if (more := len(payload) - payload_lines) > 0:
        show = f"belt interrupt show {item.get('short_id')} --json"
        lines.append((f"    … {more} more lines ({show})", "dim"))
    return lines


# -- belt test ------------------------------------------------------------------------------------


def excerpt_lines(dialect: str, messages: Sequence[Mapping[str, object]]) -> Lines:
    """Some messages of a transcript, as the whole transcript shows them."""
    show = dialects.get(dialect or dialects.PLATFORM).message_lines
    return [
        line for _, part in conversation(cast("list[Message]", messages), show, []) for line in part
    ]


def merged_excerpt_lines(dialect: str, excerpts: Sequence[Sequence[Mapping[str, object]]]) -> Lines:
    """Several excerpts of one transcript as one, in order, ``…`` where messages are left out."""
    messages = {
        m["id"]: m for excerpt in excerpts[::-1] for m in cast("list[Message]", excerpt[::-1])
    }
    lines: Lines = []
    part: list[Message] = []
    for message in sorted(messages.values(), key=lambda m: m["order"]):
        if part and message["order"] > part[-1]["order"] + 1:
            lines += [*excerpt_lines(dialect, part), ("…", "dim")]
            part = []
        part.append(message)
    return lines + excerpt_lines(dialect, part)


STATUS_STYLES = {"pass": "green", "fail": "bold red", "error": "bold red"}


def test_result_line(result: Mapping[str, Any]) -> tuple[str, str]:
    """A scenario's line in ``belt test`` (``ScenarioResult.to_json``): status, name and time."""
    status = result["status"]
    line = f"{status.upper():<5}  {result['scenario']}  ({result['seconds']:.2f} s)"
    if status == "fail":
        failed = len(result["failures"])
        hooks = len(result.get("hook_failures") or [])
        unfired = len(result.get("unfired_hooks") or [])
        compared = result["snapshot"]["status"] if "snapshot" in result else None
        snapshot = compared in ("changed", "missing")
        parts = [
            (failed or not (hooks or unfired or snapshot))
            and f"{failed} of {result['expectations']} expectation(s) failed",
            hooks and f"{hooks} hook call(s) failed unnamed",
            unfired and f"{unfired} hook(s) never fired",
            snapshot and ("no snapshot" if compared == "missing" else "snapshot differs"),
        ]
        line += "  " + ", ".join(str(part) for part in parts if part)
    elif status == "error":
        line += "  invalid scenario" if result.get("invalid") else "  error"
    elif (hooks_run := result.get("hooks")) and hooks_run["calls"]:
        from belt.engine.hooksummary import summary_text  # start-up: the engine

        line += f"  {summary_text(hooks_run)[0][0]}"
    return line, STATUS_STYLES.get(status, "")


def test_failure_lines(result: Mapping[str, Any], dialect: str) -> Lines:
    """What went wrong in one scenario (``to_json``): failures and one excerpt, or its error."""
    lines: Lines = [("", ""), (f"── {result['scenario']}", "bold")]
    if result["status"] == "error":
        lines.append((f"error: {result['error']}", "red"))
        lines.extend((f"  {problem}", "red") for problem in result.get("problems") or [])
        return lines
    for failure in result["failures"]:
        where = failure["expect"]
        label = failure["expectation"].get("name")
        lines.append((f"{where} {failure['text']}" + (f"  ({label})" if label else ""), "red"))
        found = str(failure["found"]).splitlines()
        lines.append((f"  found: {found[0] if found else ''}", ""))
        lines.extend((f"  {line}", "") for line in found[1:])
    if result["failures"]:
        lines.append(("  transcript:", "dim"))
        excerpt = merged_excerpt_lines(dialect, [f["excerpt"] for f in result["failures"]])
        lines.extend((f"  {text}", style) for text, style in excerpt)
    if hook_failures := result.get("hook_failures"):
        from belt.engine.hooksummary import HOOK_FAILURE_HINT  # start-up: the engine

        lines += [
            (f"{len(hook_failures)} hook call(s) failed, and no expectation names them:", "red"),
            *((f"  {failure['text']}", "") for failure in hook_failures),
            (f"  {HOOK_FAILURE_HINT}", "dim"),
        ]
    if unfired := result.get("unfired_hooks"):
        lines.append((f"{len(unfired)} declared hook(s) never fired (--fail-under-hooks):", "red"))
        lines.extend((f"  {unfired_text(entry)}", "") for entry in unfired)
    if result.get("snapshot"):
        update = snapshot_update_command(str(result["scenario"]))
        lines.extend(snapshot_lines(result["snapshot"], update=update))
    return lines


def snapshot_update_command(scenario: str) -> str:
    """The command that writes one scenario's snapshot."""
    return f"belt test {shlex.quote(scenario)} --snapshot-update"


def snapshot_lines(comparison: Mapping[str, Any], *, update: str) -> Lines:
    """How a record differs from its snapshot; ``update`` is the command that writes it."""
    if comparison["status"] == "missing":
        return [
            (f"no snapshot at {comparison['path']}", "red"),
            (f"  run `{update}` to write it, then review and commit it", "dim"),
        ]
    if comparison["status"] != "changed":
        return []
    lines: Lines = [(f"the record differs from its snapshot {comparison['path']}:", "red")]
    lines.extend((f"  {change}", "") for change in comparison["changes"])
    for line in comparison["diff"]:
        header = line.startswith(("---", "+++", "@@"))
        style = "dim" if header else {"-": "red", "+": "green"}.get(line[:1], "")
        lines.append((f"  {line}", style))
    lines.append((f"  if the change is intended, run `{update}`", "dim"))
    return lines


def unfired_text(entry: Mapping[str, object]) -> str:
    """A hook that never fired, as ``--fail-under-hooks`` names it."""
    return f"hook {entry['where']} ({entry['event']}, {entry['handler']}) never fired"


COVERAGE_COLUMNS = tuple(
    "SCENARIO HOOK EVENT HANDLER FIRED PRODUCED TOOLS LATENCY TOKENS/TURN".split()
)


def coverage_rows(given: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """``belt test --coverage``: one row per declared hook, its outcomes, tools and latency."""
    return [
        [
            str(entry["scenario"]),
            str(entry["where"]),
            str(entry["event"]),
            str(entry["handler"]) + (" (async)" if entry.get("async") else ""),
            str(entry["fired"]),
            ", ".join(f"{key} {count}" for key, count in entry["outcomes"].items() if count) or "-",
            ", ".join(f"{tool} {count}" for tool, count in sorted(entry["tools"].items())) or "-",
            f"max {latency['max']:.1f} ms, p95 {latency['p95']:.1f} ms" if latency else "-",
            "-" if entry.get("injected_tokens") is None else str(entry["injected_tokens"]),
        ]
        for entry in given
        for latency in [entry.get("latency_ms")]
    ]


def coverage_tail(entries: Sequence[Mapping[str, Any]]) -> Lines:
    """The lines after the coverage table: the hooks that never fired, or that all did."""
    unfired = [entry for entry in entries if not entry["fired"]]
    if not unfired:
        return [(f"every one of {len(entries)} declared hook(s) fired", "green")]
    return [
        (f"{len(unfired)} of {len(entries)} declared hook(s) never fired:", "red"),
        *((f"  {entry['scenario']}: {unfired_text(entry)}", "") for entry in unfired),
    ]


def test_summary_line(
    results: Sequence[Mapping[str, Any]], seconds: float, stopped: bool
) -> tuple[str, str]:
    """The last line of ``belt test``: how many passed, failed and errored, and how long."""
    counts = {status: sum(1 for r in results if r["status"] == status) for status in STATUS_STYLES}
    # An invalid file is an error of its own kind: each file is counted once.
    invalid = sum(1 for r in results if r["status"] == "error" and r.get("invalid"))
    parts = [
        f"{counts['pass']} passed",
        counts["fail"] and f"{counts['fail']} failed",
        counts["error"] > invalid and f"{counts['error'] - invalid} error(s)",
        invalid and f"{invalid} invalid",
    ]
    text = f"{len(results)} scenario(s): {', '.join(str(p) for p in parts if p)} in {seconds:.2f} s"
    if stopped:
        text += " (stopped at the first failure: -x)"
    return text, "green" if counts["pass"] == len(results) else "bold red"


# -- belt replay ----------------------------------------------------------------------------------


def replay_row(row: RowJSON) -> list[str]:
    """One row of a replay's table: event, tool, the decision then and now, what changed."""
    error = row["replayed"]["error"]
    changed = f"error: {short(error, 60)}" if error else ", ".join(row["changed"]) or "-"
    cells = [str(row["number"]), str(row["event"] or "?"), str(row["tool"] or "")]
    for side in (row["recorded"], row["replayed"]):
        cells.append(str(side["decision"] or "-") + (" +inject" if side.get("injection") else ""))
    return [*cells, changed]


def replay_tail(report: ReplayReport) -> Lines:
    """A replay's last lines: its summary, first error and fix, and what --save-tests wrote."""
    summary, saved = report["summary"], report.get("saved_tests")
    text = (
        f"{summary['replayed']} payload(s) from {report['source']} replayed to "
        f"{report['target']}: {summary['changed']} changed ({summary['decisions_changed']} "
        f"decision(s), {summary['injections_changed']} injection(s)), {summary['errors']} error(s)"
    )
    lines: Lines = [(text, "bold red" if summary["changed"] else "green")]
    error = report["first_error"] and f"first error: {report['first_error']}"
    lines += [(f"  {line}", "yellow") for line in (error, report["fix"]) if line]
    if saved is None:
        return lines
    written = f"{saved['written']} test scenario(s) written to {saved['directory']}"
    run = f"expecting the {saved['expect']} answers: run them with `belt test {saved['directory']}`"
    lines.append((f"{written}, {run}", "green" if saved["written"] else "yellow"))
    if saved["not_written"]:
        lines.append((f"  {saved['not_written']} delivery(ies) not written:", "yellow"))
        lines.extend((f"    {problem}", "yellow") for problem in saved["problems"])
    return lines


# -- waiting at gates (``belt sim run --wait``) ---------------------------------------------------


def gates_waiting_text(run_id: object, pending: list[InterruptJSON]) -> str:
    """What a simulation prints as it starts to wait at a run's gates, and how to settle them."""
    commands = ", ".join(
        f"`belt interrupt resolve {i.get('short_id') or i['id']} allow`" for i in pending[:3]
    )
    more = f" and {len(pending) - 3} more" if len(pending) > 3 else ""
    return (
        f"waiting at {len(pending)} gate(s) of run {run_id}: settle them with {commands}{more} "
        "(or deny) in another terminal, or let them expire; Ctrl-C stops waiting and "
        f"`belt sim resume {run_id} --wait` waits again"
    )


def span_left(expires_at: object, now: datetime) -> str:
    """The time from ``now`` to ``expires_at``, as a countdown shows it (``4:59``)."""
    left = max(0, int((datetime.fromisoformat(str(expires_at)) - now).total_seconds()))
    hours, rest = divmod(left, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def approval_waiting_text(record: Mapping[str, object], now: datetime | None) -> str:
    """How to approve the hook task a ``--wait`` simulation waits for; with ``now``, time left."""
    expires = record.get("expires_at")
    if now is not None and expires is not None:
        # One terminal line, cut at its width: the time left and the command come first.
        name = record.get("interrupt_short_id") or record["interrupt_id"]
        return (
            f"{span_left(expires, now)} left to approve {record['event']} → {record['tool']}: "
            f"belt interrupt resolve {name} allow|deny"
        )
    when = f"; it expires at {clock(expires)}" if expires is not None else ""
    return (
        f"waiting for approval of hook task {record['task_key']} ({record['event']} → "
        f"{record['tool']}): `belt interrupt resolve {record['interrupt_id']} allow` (or deny) "
        f"in another terminal{when}; unapproved at expiry, the task fails"
    )


def countdown_text(pending: list[InterruptJSON], now: datetime) -> str:
    """The earliest expiry of the gates waited at, counting down (``4:59``)."""
    first = min(pending, key=lambda interrupt: datetime.fromisoformat(str(interrupt["expires_at"])))
    span = span_left(first["expires_at"], now)
    name = first.get("short_id") or first["id"]
    others = f" (first of {len(pending)})" if len(pending) > 1 else ""
    return f"  gate {name}{others} expires in {span}, at {clock(first['expires_at'])}"


def _heading(line: tuple[str, str]) -> str | None:
    text = line[0]
    return text.split(" · ")[0] if text.startswith("── ") else None


def transcript_rest(printed: Lines, lines: Lines) -> Lines:
    """What of ``lines`` is not on screen after ``printed`` (a heading matches any run state)."""
    same = 0
    for before, now in zip(printed, lines, strict=False):
        if before != now and (_heading(before) is None or _heading(before) != _heading(now)):
            break
        same += 1
    rest = lines[same:]
    heading = next((i for i in range(same - 1, -1, -1) if _heading(lines[i])), None)
    if rest and heading is not None and lines[heading] != printed[heading]:
        rest = [lines[heading], *rest]
    return rest
