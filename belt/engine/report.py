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


def run_dto(run: dict[str, Any]) -> dict[str, Any]:
    """An AgentRunDTO of a stored run."""
    return {key: run.get(key) for key in RUN_FIELDS}


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
    return {
        "simulation": {
            "id": sim["id"],
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
    """Cancel a run: its pending gates are cancelled and it will not resume."""
    from belt.engine.record import Recorder, now_iso
    from belt.interrupts import cancel_interrupt, pending_for_run

    sim = sim_of_run(store, run_id)
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

    def cancel(current: dict[str, Any]) -> dict[str, Any]:
        current.update(state="canceled", error="stopped by user", cursor=None, updated_at=now_iso())
        return current

    run = store.update("run", run_id, cancel)
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
            {
                "type": "event",
                "text": "run stopped by user",
                "event": {
                    "type": "run_ended",
                    "run": {"run_id": run_id, "state": "canceled", "reason": "stopped by user"},
                },
            }
        ],
    )
    recorder.update_chat(status="idle", active_run_id=None)

    def mark(current: dict[str, Any]) -> dict[str, Any]:
        current["status"] = "canceled"
        return current

    store.update("sim", str(sim["id"]), mark)
    return run_dto(run)


def short(value: Any, limit: int = 80) -> str:
    """A value as one short line of text."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def transcript_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The simulation as a conversation: (line, style) pairs for the terminal."""
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
