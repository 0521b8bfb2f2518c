"""How a Nexus simulation reads on a terminal: each execution with the hooks frozen onto it, its
messages and hook task attempts, and what waits (a task for an executor, an approval, an
attention hold), as (text, style) lines for ``belt.display.output``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from belt.display.render import (
    Lines,
    interrupted_lines,
    message_lines,
    retried,
    run_state,
    settle_lines,
)
from belt.display.text import short

if TYPE_CHECKING:
    from belt.dialects.simreport import ReportRun, SimReport
    from belt.records.executions import ExecutionEntry
    from belt.records.hooktasks import HookTask
    from belt.records.messages import Message


def nexus_transcript_lines(report: SimReport) -> Lines:
    """A Nexus simulation: each execution, its hook tasks, and what needs attention."""
    lines: Lines = []
    runs = {run["id"]: run for run in report["runs"]}
    executions = {entry["turn"]: entry for entry in report.get("executions") or []}
    current = None
    for message in report["chat"]["chat_messages"]:
        turn = (message.get("sim") or {}).get("execution")
        if turn is not None and turn != current and turn in executions:
            current = turn
            lines += [("", ""), *execution_header(executions[turn], runs)]
        lines.extend(nexus_message_lines(message))
    tail = (pending_task_lines, approval_lines, attention_lines, interrupted_lines)
    return lines + [line for part in tail for line in part(report)]


def execution_header(entry: ExecutionEntry, runs: dict[str, ReportRun]) -> Lines:
    """The heading of one execution and the hooks frozen onto it."""
    kind = entry["kind"]
    if entry.get("conversation_id") is None and kind != "standalone":
        kind += ", standalone"
    run = runs.get(entry.get("run_id") or "")
    if run is None:
        head = f"── turn {entry['turn']} · {kind} · no run (no hooks, no tools) · {entry['state']}"
        return [(head, "bold")]
    lines = [(f"── turn {entry['turn']} · {kind} · run {run['id']} · {run_state(run)}", "bold")]
    if hooks := run.get("hooks"):
        groups: dict[str, list[str]] = {}
        for event, hook in hooks.items():
            limit = f", max {hook['max_continuations']}" if event == "stop" else ""
            groups.setdefault(f"{hook['tool']} ({hook['timeout_ms']} ms{limit})", []).append(event)
        parts = [f"{', '.join(events)} → {target}" for target, events in groups.items()]
        origin = run.get("profile") or {}
        where = f"{origin.get('source', '?')} profile r{origin.get('revision')}"
        where = f"reused from run {origin['reused_from']}" if origin.get("reused_from") else where
        if origin.get("hooks_from"):
            where += ", hooks stored by rho"
        lines.append((f"  hooks    {' · '.join(parts)}  [{where}]", "dim"))
    return lines


def nexus_message_lines(row: Mapping[str, object]) -> Lines:
    """How one message (a ``Message``) of a Nexus execution reads."""
    message = cast("Message", row)
    role = message["role"]
    sim = message.get("sim") or {}
    text = " ".join(c.get("text") or "" for c in message.get("content") or [] if c)
    if role == "user":
        label = "mail      " if sim.get("input") == "mail" else "user      "
        return [(f"{label} {text}", "bold cyan")]
    if role == "feedback":
        return [(f"  feedback {short(text)}  (stop hook, same execution)", "magenta")]
    if role == "assistant":
        lines = message_lines(message)
        notes = ["repeated: no scripted round left"] if sim.get("repeated") else []
        notes += [f"stop: {sim['stop']}"] if sim.get("stop") else []
        notes += [f"regenerated in turn {sim['replaced_by']}"] if "replaced_by" in sim else []
        if notes and lines and text:
            line, style = lines[0]
            lines[0] = (f"{line}  [{'; '.join(notes)}]", style)
        return lines
    if role == "event":
        out: Lines = []
        for content in message.get("content") or []:
            event = content.get("event") or {}
            hook = event.get("hook") or {}
            if event.get("type") == "hook" and hook.get("handler_type") == "executor":
                out.append(hook_task_line(hook))
            elif event.get("type") == "attention":
                out.append((f"  ⚠ {content.get('text', '')}", "bold red"))
            else:
                out.extend(message_lines({**message, "content": [content]}))
        return out
    return message_lines(message)


def hook_task_line(hook: Mapping[str, object]) -> tuple[str, str]:
    """One hook task attempt: event, tool, outcome, duration, key."""
    attempt = f", attempt {hook['attempt']}" if retried(hook.get("attempt")) else ""
    where = f"{hook.get('duration_ms', 0)}ms  [{hook['task_key']}{attempt}]"
    head = f"    hook   {hook['event']} → {hook['handler']}:"
    if hook.get("status") == "completed":
        if hook.get("decision") == "continue":
            return (f'{head} continue "{short(hook.get("reason") or "", 60)}"  {where}', "magenta")
        return (f"{head} acknowledged  {where}", "dim")
    failure = f"{str(hook.get('status')).upper()} ({hook.get('failure') or hook.get('status')})"
    return (f"{head} {failure}: {hook.get('error')}  {where}", "red")


def pending_task_lines(report: SimReport) -> Lines:
    """Hook tasks still waiting for an executor, and how to serve them."""
    waiting = [t for t in report.get("hook_tasks") or [] if t["status"] in ("pending", "claimed")]
    lines: Lines = []
    for task in waiting:
        who = f" by {task['claim']['by']}" if task.get("claim") else ""
        who += f"; deadline {task['deadline']}" if task.get("deadline") else ""
        what = f"{task['task_key']} ({task['event']} → {task['tool']}) is {task['status']}{who}"
        lines += [("", ""), (f"⏳ hook task {what}", "yellow")]
        if task["status"] == "pending":
            lines.append((f"  serve it:  belt executor run --tool {task['tool']}=cmd:COMMAND", ""))
    return lines


def approval_lines(report: SimReport) -> Lines:
    """Hook tasks waiting for approval (``approval_mode = "ask"``), and how to settle them."""
    expiry = {i["id"]: i.get("expires_at") for i in report.get("interrupts") or []}
    by_run: dict[str, list[tuple[HookTask, str]]] = {}
    for task in report.get("hook_tasks") or []:
        if task["status"] == "awaiting_approval" and (approval := task.get("approval")):
            by_run.setdefault(task["run_id"], []).append((task, str(approval["interrupt_id"])))
    lines: Lines = []
    for run_id, tasks in by_run.items():
        waiting = f"⏸ run {run_id} is waiting for {len(tasks)} hook task approval(s):"
        lines += [("", ""), (waiting, "bold yellow")]
        for task, interrupt_id in tasks:
            when = f"  expires {expires}" if (expires := expiry.get(interrupt_id)) else ""
            what = f"{task['event']} → {task['tool']} [{task['task_key']}]{when}"
            lines.append((f"  {interrupt_id}  {what}", "yellow"))
        commands = [f"belt interrupt resolve {i} allow   # or deny" for _, i in tasks]
        lines += settle_lines(report, run_id, commands, "approval", "approve its hook tasks")
    return lines


def attention_lines(report: SimReport) -> Lines:
    """Runs on an attention hold: which hook task failed, and the commands to go on."""
    lines: Lines = []
    for run in report["runs"]:
        attention = run.get("attention")
        if run["state"] != "attention_hold" or not attention:
            continue
        held = f"{attention['event']} hook task {attention['task_key']} failed"
        head = f"⚠ run {run['id']} is on an attention hold: {held} ({attention['reason']})"
        retry = f"  belt sim resume {run['id']} --executor {attention['tool']}=TARGET"
        said = ["fix the hook, then retry the same task:", retry, "or end the run without stop:"]
        lines += [("", ""), (head, "bold red"), (f"  {attention['detail']}", "red")]
        lines += [(text, "") for text in [*said, f"  belt sim stop {run['id']}"]]
    return lines
