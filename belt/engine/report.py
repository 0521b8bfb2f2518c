"""Reading a simulation back from the store: the ``--json`` object and the terminal view."""

from __future__ import annotations

import json
from typing import Any

from belt.errors import Conflict, NotFound
from belt.store import Store

RUN_FIELDS = (
    "id",
    "agent_id",
    "chat_id",
    "state",
    "error",
    "interrupt_reason",
    "interrupt_tool_id",
    "interrupt_meta",
    "created_at",
    "updated_at",
)
TERMINAL_STATES = ("completed", "failed", "canceled", "rejected")
NEXUS_RUN_FIELDS = (
    "kind",
    "conversation_id",
    "hooks",
    "approval_mode",
    "profile",
    "regenerates",
    "attention",
    "execution",
    "stopped",
)


def run_dto(run: dict[str, Any]) -> dict[str, Any]:
    """An AgentRunDTO of a stored run (with what a Nexus execution adds)."""
    dto = {key: run.get(key) for key in RUN_FIELDS}
    if run.get("dialect") == "nexus":
        dto.update({key: run.get(key) for key in NEXUS_RUN_FIELDS})
    return dto


def sim_of_run(store: Store, run_id: str) -> dict[str, Any]:
    """The simulation a run belongs to; an unknown run exits 3."""
    run = store.get("run", run_id)
    if run is None or "sim_id" not in run:
        raise NotFound(f"no simulated run {run_id}", hint="list runs with `belt sim list`")
    return store.read("sim", str(run["sim_id"]))


def build_report(store: Store, sim: dict[str, Any]) -> dict[str, Any]:
    """The whole record of a simulation, names as on the wire."""
    from belt.interrupts import list_interrupts

    chat = store.read("chat", str(sim["chat_id"]))
    messages = sorted(
        (store.read("message", mid) for mid in store.members("chat-messages", chat["id"])),
        key=lambda m: int(m["order"]),
    )
    runs = [store.read("run", rid) for rid in store.members("sim-runs", str(sim["id"]))]
    interrupts = [
        interrupt
        for run in runs
        for interrupt in list_interrupts(store=store, run_id=run["id"], include_settled=True)
    ]
    executions = [
        record
        for run in runs
        for record in store.read_log("events", run["id"])
        if record.get("type") == "hook.executed"
    ]
    active = next((run for run in runs if run["id"] == chat.get("active_run_id")), None)
    chat_dto = {
        "id": chat["id"],
        "status": chat.get("status"),
        "agent_id": chat.get("agent_id"),
        "agent_data": chat.get("agent_data") or {},
        "parent_id": chat.get("parent_id"),
        "active_run": run_dto(active) if active else None,
        "chat_messages": messages,
        "pending_interrupts": [i for i in interrupts if i["status"] == "pending"],
        "created_at": chat.get("created_at"),
        "updated_at": chat.get("updated_at"),
    }
    report: dict[str, Any] = {
        "simulation": {
            "id": sim["id"],
            "dialect": sim.get("dialect", "platform"),
            "source": sim.get("source"),
            "name": sim.get("name"),
            "status": sim.get("status"),
            "fail_closed": sim.get("fail_closed", False),
        },
        "chat": chat_dto,
        "runs": [run_dto(run) for run in runs],
        "interrupts": interrupts,
        "hook_executions": executions,
    }
    if sim.get("dialect") == "nexus":
        from belt.executor import run_tasks

        report["simulation"]["profile"] = sim.get("profile")
        report["simulation"]["profile_revision"] = sim.get("profile_revision")
        report["executions"] = sim.get("executions") or []
        report["hook_tasks"] = [task for run in runs for task in run_tasks(store, run["id"])]
    return report


def list_runs(store: Store) -> list[dict[str, Any]]:
    """Every simulated run, oldest first, with its simulation's name."""
    sims: dict[str, dict[str, Any]] = {}
    rows = []
    for run_id in store.list_ids("run"):
        run = store.read("run", run_id)
        sim_id = run.get("sim_id")
        if not sim_id:
            continue
        if sim_id not in sims:
            sims[sim_id] = store.read("sim", sim_id)
        sim = sims[sim_id]
        rows.append(
            {
                **run_dto(run),
                "sim_id": sim_id,
                "scenario": sim.get("source"),
                "name": sim.get("name"),
                "turn_index": run.get("turn_index"),
            }
        )
    return sorted(rows, key=lambda r: str(r.get("created_at") or ""))


def stop_run(store: Store, run_id: str, *, force: bool = False) -> dict[str, Any]:
    """Cancel a run: its pending gates (or Nexus hook tasks) are cancelled; it will not resume."""
    from belt.engine.record import Recorder, now_iso, run_event

    sim = sim_of_run(store, run_id)
    if sim.get("dialect") == "nexus":
        from belt.engine.nexus import stop_run as stop_nexus_run

        return run_dto(stop_nexus_run(store, run_id, force=force))
    from belt.interrupts import cancel_interrupt, pending_for_run

    run = store.read("run", run_id)
    if run["state"] in TERMINAL_STATES:
        raise Conflict(f"run {run_id} is already {run['state']}")
    if run["state"] == "working" and not force:
        raise Conflict(
            f"run {run_id} is working",
            hint="a simulation process may be running it; `belt sim stop --force` cancels it",
        )
    for interrupt in pending_for_run(store=store, run_id=run_id):
        cancel_interrupt(store=store, interrupt_id=interrupt["id"])

    run = store.merge(
        "run",
        run_id,
        {"state": "canceled", "error": "stopped by user", "cursor": None, "updated_at": now_iso()},
    )
    recorder = Recorder(store, str(run["chat_id"]))
    for message in recorder.messages:
        changed = False
        for invocation in message.get("tool_invocations") or []:
            if invocation["status"] in ("awaiting_approval", "pending", "in_progress"):
                invocation["status"] = "cancelled"
                changed = True
        if changed:
            recorder.save_message(message)
    recorder.add_message(
        role="event",
        run_id=run_id,
        content=[
            run_event(
                run_id,
                kind="run_ended",
                state="canceled",
                reason="stopped by user",
                text="run stopped by user",
            )
        ],
    )
    recorder.update_chat(status="idle", active_run_id=None)

    store.merge("sim", str(sim["id"]), {"status": "canceled"})
    return run_dto(run)


def short(value: Any, limit: int = 80) -> str:
    """A value as one short line of text."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def transcript_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The simulation as a conversation: (line, style) pairs for the terminal."""
    if report["simulation"].get("dialect") == "nexus":
        return nexus_transcript_lines(report)
    lines: list[tuple[str, str]] = []
    runs = {run["id"]: run for run in report["runs"]}
    current_run = None
    for message in report["chat"]["chat_messages"]:
        run_id = message.get("agent_run_id")
        if run_id != current_run and run_id in runs:
            current_run = run_id
            run = runs[run_id]
            lines.append(("", ""))
            lines.append((f"── run {run_id} · {run['state']}", "bold"))
        lines.extend(message_lines(message))
    lines.extend(gate_lines(report))
    return lines


def message_lines(message: dict[str, Any]) -> list[tuple[str, str]]:
    """How one message reads in the transcript."""
    role = message["role"]
    text = " ".join(c.get("text") or "" for c in message.get("content") or [] if c)
    sim = message.get("sim") or {}
    if role == "user":
        return [(f"user       {text}", "bold cyan")]
    if role == "assistant":
        out = [(f"assistant  {text}", "green")] if text else []
        for invocation in message.get("tool_invocations") or []:
            function = invocation["function"]
            call = f"{function['name']}({short(function.get('arguments') or {}, 60)})"
            result = invocation.get("result")
            status = invocation["status"]
            tail = f" → {short(result, 60)}" if result else ""
            style = {"completed": "", "failed": "red", "awaiting_approval": "yellow"}.get(
                status, "dim"
            )
            out.append((f"  tool     {call}  [{status}]{tail}", style))
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
                kind = (
                    "" if hook["handler"] == hook["handler_type"] else f" ({hook['handler_type']})"
                )
                parts = [f"    hook   {hook['event']}: {hook['handler']}{kind}"]
                if hook.get("decision"):
                    parts.append(f"→ {hook['decision']}")
                if hook.get("reason"):
                    parts.append(f"({hook['reason']})")
                if hook.get("injected"):
                    parts.append("+ injected")
                if hook.get("error"):
                    parts.append(f"! error: {hook['error']}")
                parts.append(f"{hook.get('duration_ms', 0)}ms")
                out.append((" ".join(parts), "dim"))
            else:
                style = "red" if event.get("type") == "run_failed" else "yellow"
                out.append((f"  {content.get('text', '')}", style))
        return out
    return []


def gate_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Where a gate holds the run: the interrupt and the exact commands to go on."""
    pending = report["chat"]["pending_interrupts"]
    if not pending:
        return []
    lines: list[tuple[str, str]] = [("", "")]
    run_id = pending[0]["run_id"]
    lines.append((f"⏸ run {run_id} is waiting at {len(pending)} gate(s):", "bold yellow"))
    for interrupt in pending:
        meta = interrupt.get("meta") or {}
        data = meta.get("data") or {}
        what = (
            f" {data['tool']}({short(data.get('arguments') or {}, 50)})" if "tool" in data else ""
        )
        expires = interrupt["expires_at"]
        lines.append(
            (f"  {interrupt['id']}  {interrupt['source']}{what}  expires {expires}", "yellow")
        )
    lines.append(("resolve each gate, then resume:", ""))
    for interrupt in pending:
        lines.append((f"  belt interrupt resolve {interrupt['id']} allow   # or deny", ""))
    lines.append((f"  belt sim resume {run_id}", ""))
    return lines


# -- the Nexus dialect ---------------------------------------------------------------------------


def nexus_transcript_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """A Nexus simulation: each execution, its hook tasks, and what needs attention."""
    lines: list[tuple[str, str]] = []
    runs = {run["id"]: run for run in report["runs"]}
    executions = {entry["turn"]: entry for entry in report.get("executions") or []}
    current = None
    for message in report["chat"]["chat_messages"]:
        turn = (message.get("sim") or {}).get("execution")
        if turn is not None and turn != current and turn in executions:
            current = turn
            lines.append(("", ""))
            lines.extend(execution_header(executions[turn], runs))
        lines.extend(nexus_message_lines(message))
    lines.extend(pending_task_lines(report))
    lines.extend(attention_lines(report))
    return lines


def execution_header(entry: dict[str, Any], runs: dict[str, Any]) -> list[tuple[str, str]]:
    """The heading of one execution and the hooks frozen onto it."""
    kind = entry["kind"]
    if entry.get("conversation_id") is None and kind != "standalone":
        kind += ", standalone"
    run = runs.get(entry.get("run_id") or "")
    if run is None:
        head = f"── turn {entry['turn']} · {kind} · no run (no hooks, no tools) · {entry['state']}"
        return [(head, "bold")]
    lines = [(f"── turn {entry['turn']} · {kind} · run {run['id']} · {run['state']}", "bold")]
    hooks = run.get("hooks") or {}
    if hooks:
        groups: dict[str, list[str]] = {}
        for event, hook in hooks.items():
            limit = f", max {hook['max_continuations']}" if event == "stop" else ""
            groups.setdefault(f"{hook['tool']} ({hook['timeout_ms']} ms{limit})", []).append(event)
        parts = [f"{', '.join(events)} → {target}" for target, events in groups.items()]
        origin = run.get("profile") or {}
        if origin.get("reused_from"):
            where = f"reused from run {origin['reused_from']}"
        else:
            where = f"{origin.get('source', '?')} profile r{origin.get('revision')}"
        lines.append((f"  hooks    {' · '.join(parts)}  [{where}]", "dim"))
    return lines


def nexus_message_lines(message: dict[str, Any]) -> list[tuple[str, str]]:
    """How one message of a Nexus execution reads."""
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
        notes = []
        if sim.get("repeated"):
            notes.append("repeated: no scripted round left")
        if sim.get("stop"):
            notes.append(f"stop: {sim['stop']}")
        if "replaced_by" in sim:
            notes.append(f"regenerated in turn {sim['replaced_by']}")
        if notes and lines and text:
            line, style = lines[0]
            lines[0] = (f"{line}  [{'; '.join(notes)}]", style)
        return lines
    if role == "event":
        out: list[tuple[str, str]] = []
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


def hook_task_line(hook: dict[str, Any]) -> tuple[str, str]:
    """One hook task attempt: event, tool, outcome, duration, key."""
    attempt = f", attempt {hook['attempt']}" if int(hook.get("attempt") or 1) > 1 else ""
    where = f"{hook.get('duration_ms', 0)}ms  [{hook['task_key']}{attempt}]"
    head = f"    hook   {hook['event']} → {hook['handler']}:"
    if hook.get("status") == "completed":
        if hook.get("decision") == "continue":
            return (f'{head} continue "{short(hook.get("reason") or "", 60)}"  {where}', "magenta")
        return (f"{head} acknowledged  {where}", "dim")
    failure = hook.get("failure") or hook.get("status")
    return (
        f"{head} {str(hook.get('status')).upper()} ({failure}): {hook.get('error')}  {where}",
        "red",
    )


def pending_task_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Hook tasks still waiting for an executor, and how to serve them."""
    waiting = [t for t in report.get("hook_tasks") or [] if t["status"] in ("pending", "claimed")]
    lines: list[tuple[str, str]] = []
    for task in waiting:
        who = f" by {task['claim']['by']}" if task.get("claim") else ""
        lines.append(("", ""))
        lines.append(
            (
                f"⏳ hook task {task['task_key']} ({task['event']} → {task['tool']}) is "
                f"{task['status']}{who}; deadline {task['deadline']}",
                "yellow",
            )
        )
        if task["status"] == "pending":
            lines.append((f"  serve it:  belt executor run --tool {task['tool']}=cmd:COMMAND", ""))
    return lines


def attention_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Runs on an attention hold: which hook task failed, and the commands to go on."""
    lines: list[tuple[str, str]] = []
    for run in report["runs"]:
        attention = run.get("attention")
        if run["state"] != "attention_hold" or not attention:
            continue
        lines.append(("", ""))
        lines.append(
            (
                f"⚠ run {run['id']} is on an attention hold: {attention['event']} hook task "
                f"{attention['task_key']} failed ({attention['reason']})",
                "bold red",
            )
        )
        lines.append((f"  {attention['detail']}", "red"))
        tool = attention["tool"]
        lines.append(("fix the hook, then retry the same task:", ""))
        lines.append((f"  belt sim resume {run['id']} --executor {tool}=TARGET", ""))
        lines.append(("or end the run without stop:", ""))
        lines.append((f"  belt sim stop {run['id']}", ""))
    return lines
