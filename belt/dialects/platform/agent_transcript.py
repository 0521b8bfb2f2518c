"""How a platform simulation reads on a terminal: its runs, messages and hook rows, registry,
children and gates, as (text, style) lines for ``belt.display.output``."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from belt.display.render import (
    Lines,
    conversation,
    interrupted_lines,
    message_lines,
    run_state,
    settle_lines,
)
from belt.display.text import short

if TYPE_CHECKING:
    from belt.dialects.simreport import Delivery, SimReport


def platform_lines(report: SimReport, quiet: list[Delivery] | None = None) -> Lines:
    """A platform simulation's lines; ``quiet`` deliveries where they happened."""
    lines = registry_lines(report)
    runs = {run["id"]: run for run in report["runs"]}
    messages = report["chat"]["chat_messages"]
    current_run = None
    for message, message_lines_ in conversation(messages, message_lines, quiet or []):
        run_id = message.get("agent_run_id")
        if run_id != current_run and run_id in runs:
            current_run = run_id
            lines += [("", ""), (f"── run {run_id} · {run_state(runs[run_id])}", "bold")]
        lines.extend(message_lines_)
    return lines + task_lines(report) + gate_lines(report) + interrupted_lines(report)


LOADED = {"created": "created", "versioned": "new version", "skipped": "unchanged"}


def registry_lines(report: SimReport) -> Lines:
    """What the scenario's registry directory loaded: each entry created or versioned."""
    registry = report["simulation"].get("registry")
    if not registry:
        return []
    entries = registry.get("entries") or []
    counts = Counter(e.get("action") for e in entries)
    said = ", ".join(f"{counts[a]} {label}" for a, label in LOADED.items() if counts[a]) or "none"
    head = f"── registry {registry['owner']}: {len(entries)} entries loaded from "
    lines: Lines = [("", ""), (f"{head}{registry['directory']} ({said})", "bold")]
    for entry in (e for e in entries if e.get("action") != "skipped"):
        action = entry.get("action")
        version = f" v{entry['version']}" if action == "versioned" else ""
        what = f"{entry['name']}  ({entry['kind']}, {entry['id']}{version})"
        lines.append((f"  {LOADED.get(str(action), '?'):<11} {what}", "dim"))
    return lines


def quiet_deliveries(report: SimReport) -> list[Delivery]:
    """The hook calls that left no row: allowed with nothing injected, and every async one."""
    return [
        record
        for record in report.get("hook_executions") or []
        if record.get("async")
        or not (
            record.get("error")
            or record.get("injected")
            or (record.get("decision") and record.get("decision") != "allow")
        )
    ]


def task_lines(report: SimReport) -> Lines:
    """The chats task hooks started, and how their runs went; or the chat a task chat serves."""
    lines: Lines = []
    if parent := report["simulation"].get("parent"):
        kind = report["simulation"].get("kind") or "task"
        where = f"in run {parent['run_id']} (chat {parent['chat_id']})"
        lines += [("", ""), (f"{kind} chat of {parent['hook_event']} {where}", "dim")]
    if tasks := report.get("tasks") or []:
        lines += [("", ""), (f"── {len(tasks)} task chat(s) started by hooks", "bold")]
    for task in tasks:
        runs = ", ".join(f"run {r['id']} {r['state']}" for r in task["runs"]) or "not run"
        style = "red" if any(r["state"] != "completed" for r in task["runs"]) else ""
        chat = f"{task['agent']}: chat {task['chat_id']} · {runs}"
        lines.append((f"  task     {task['parent']['hook_event']} → {chat}", style))
    if reviews := report.get("reviews") or []:
        lines += [("", ""), (f"── {len(reviews)} review(s) by belt:extract", "bold")]
    for review in reviews:
        record = review.get("review") or {}
        done = ", ".join(f"{o['action']} {o['name']}" for o in record.get("outcomes") or [])
        what = done or record.get("note") or "no candidates"
        branch = f"branch {review['chat_id']} (from {record.get('ancestor')})"
        lines.append((f"  review   {review['parent']['hook_event']} → {branch}: {what}", ""))
    return lines


def gate_lines(report: SimReport) -> Lines:
    """Where a gate holds the run: the interrupt and the exact commands to go on."""
    pending = report["chat"]["pending_interrupts"]
    if not pending:
        return []
    run_id = pending[0]["run_id"]
    waiting = f"⏸ run {run_id} is waiting at {len(pending)} gate(s):"
    lines: Lines = [("", ""), (waiting, "bold yellow")]
    for interrupt in pending:
        data = (interrupt.get("meta") or {}).get("data") or {}
        on = f" {data['tool']}({short(data.get('arguments') or {}, 50)})" if "tool" in data else ""
        held = f"{interrupt['source']}{on}  expires {interrupt['expires_at']}"
        lines.append((f"  {interrupt['id']}  {held}", "yellow"))
    commands = [
        # A client tool's result is the resolution's data (what POST /tools/{id} stores).
        f"""belt interrupt resolve {i["id"]} allow --data '{{"result": "…"}}'"""
        if i.get("reason") == "client_tool"
        else f"belt interrupt resolve {i['id']} allow   # or deny"
        for i in pending
    ]
    return lines + settle_lines(report, run_id, commands, "gate", "settle its gates")
