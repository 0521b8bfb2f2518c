"""The inspector's runs (each a timeline of its messages and, per boundary, its hook deliveries)
and gates (resolved as ``belt interrupt resolve`` does)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from belt.deliveries.replay import Skipped, log_records
from belt.engine.hooksummary import run_hook_summary, summary_text
from belt.engine.readback import build_report
from belt.engine.readback import list_runs as every_run
from belt.engine.simrecord import sim_of_run
from belt.errors import InvalidInput
from belt.executor.inbox import outcome_of
from belt.records import leases
from belt.records.interrupts import (
    inbox,
    list_interrupts,
    on_expiry,
    person,
    read_record,
    resolve_interrupt,
    settled_by,
    to_dto,
    trail,
)
from belt.records.journal import SERVE
from belt.records.runs import EVENTS_LOG, RUN
from belt.server.inspector.deliveries import Row, executed_summary, mapping, text
from belt.store import check_id, clock
from belt.store.clock import parse_timestamp
from belt.wire.enums import AgentRunState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from belt.records.interrupts import Interrupt
    from belt.store import Store

RUNS_SHOWN = 500
RUN_FIELDS = (
    "id sim_id chat_id name kind state error interrupt_reason created_at updated_at interrupted "
    "scenario"
).split()
"""What the list of runs shows of each."""


def list_runs(store: Store) -> dict[str, object]:
    """Every simulated run (task and review chats' too), newest first, the newest RUNS_SHOWN."""
    runs = every_run(store, include_tasks=True)[::-1]
    return {
        "total": len(runs),
        "items": [{key: run.get(key) for key in RUN_FIELDS} for run in runs[:RUNS_SHOWN]],
    }


def _message_item(message: Mapping[str, object]) -> dict[str, object] | None:
    """A chat message as a timeline item (hook rows are left out: the deliveries say it)."""
    role = str(message.get("role"))
    raw = message.get("content")
    content: list[Any] = raw if isinstance(raw, list) else []
    texts = [str(b.get("text")) for b in content if isinstance(b, dict) and b.get("text")]
    item: dict[str, object] = {
        "kind": "message",
        "role": role,
        "id": message.get("id"),
        "at": str(message.get("created_at") or ""),
        "status": message.get("status"),
        "text": "\n".join(texts),
    }
    if role == "event":
        kinds = {str(mapping(b.get("event")).get("type")) for b in content if isinstance(b, dict)}
        if kinds <= {"hook"}:
            return None
        item["event"] = sorted(kinds - {"hook"})[0]
    calls = message.get("tool_invocations")
    if isinstance(calls, list):
        item["tool_calls"] = [
            {
                "id": call.get("id"),
                **{key: mapping(call.get("function")).get(key) for key in ("name", "arguments")},
                **{key: call.get(key) for key in ("status", "result")},
            }
            for call in calls
            if isinstance(call, dict)
        ]
    if message.get("tool_call_id"):
        item["tool_call_id"] = message.get("tool_call_id")
    injection = mapping(message.get("sim")).get("injection")
    if role == "injection" and isinstance(injection, dict):
        item["injection"] = {
            key: injection.get(key) for key in ("role", "ttl_turns", "dedup_key", "source")
        }
    return item


def _boundaries(
    store: Store, run_id: str, interrupts: dict[str, dict[str, object]]
) -> list[dict[str, object]]:
    """The run's hook deliveries grouped by the boundary that fired them, in order."""
    boundaries: list[dict[str, object]] = []
    deliveries: list[dict[str, object]] = []
    last: object = None
    for offset, record in log_records(store, EVENTS_LOG, run_id, Skipped()):  # damage left out
        if record.get("type") != "hook.executed":
            continue
        summary = executed_summary(run_id, offset, record)
        payload = mapping(record.get("payload"))
        data = mapping(payload.get("data"))
        key = (summary["event"], payload.get("turn_count"), text(record.get("resource_id")))
        delivery = {
            **summary,
            "effect": _effect(summary, interrupts),
            "interrupt": interrupts.get(summary["interrupt_id"] or ""),
        }
        if boundaries and key == last:
            deliveries.append(delivery)
            continue
        last, deliveries = key, [delivery]
        boundaries.append(
            {
                "kind": "boundary",
                "event": summary["event"],
                "turn_count": payload.get("turn_count"),
                "tool": data.get("tool"),
                "arguments": data.get("arguments"),
                "resource_id": text(record.get("resource_id")),
                "at": text(payload.get("timestamp")) or summary["at"],
                "deliveries": deliveries,
            }
        )
    return boundaries


def _effect(summary: Row, interrupts: dict[str, dict[str, object]]) -> str | None:
    """What one hook run did to the run, in a few words."""
    if summary.get("async"):
        return "async: observes only"
    if summary["error"]:
        return f"failed: {summary['error']}"
    if summary["interrupt_id"]:
        gate = interrupts.get(summary["interrupt_id"]) or {}
        status = gate.get("status") or "opened"
        resolution = f" ({gate['resolution']})" if gate.get("resolution") else ""
        return f"gate {summary['interrupt_id']}: {status}{resolution}"
    if summary["task_chat_id"]:
        return f"task chat {summary['task_chat_id']}"
    decision = summary["decision"]
    event = summary["event"]
    parts = []
    if decision == "deny" and event == "agent.tool_call":
        parts.append("tool denied")
    elif decision in ("deny", "stop") and event in ("agent.start", "agent.turn_start"):
        parts.append("turn blocked")
    elif decision in ("deny", "stop") and event == "agent.pre_compact":
        parts.append("compaction skipped")
    if summary["injected"]:
        parts.append("injected context")
    return ", ".join(parts) or None


def _order(item: dict[str, object]) -> tuple[str, int]:
    """Time, then at a boundary: the message that reaches it, its hooks, what they add."""
    if item["kind"] in ("boundary", "hook_task"):
        return str(item["at"]), 1
    return str(item["at"]), 2 if item["role"] in ("injection", "compaction") else 0


def run_view(store: Store, run_id: str) -> dict[str, object]:
    """One run: its record, its timeline, its gates, the chats it started or came from."""
    check_id(run_id, what="run id")
    store.read(RUN, run_id)  # NotFound for an unknown run
    sim = sim_of_run(store, run_id)
    report = build_report(store, sim)
    run = next(r for r in report["runs"] if r["id"] == run_id)
    now = clock.now()  # the server's clock: virtual under belt serve --clock
    gates = {
        dto["id"]: gate_item(read_record(store=store, interrupt_id=dto["id"]), now)
        for dto in list_interrupts(store=store, run_id=run_id, include_settled=True)
    }
    mine = [m for m in report["chat"]["chat_messages"] if m.get("agent_run_id") == run_id]
    timeline = [item for item in map(_message_item, mine) if item is not None]
    timeline += _boundaries(store, run_id, gates)
    timeline += [_task_item(t) for t in report.get("hook_tasks", []) if t.get("run_id") == run_id]
    timeline.sort(key=_order)
    summary, simulation = run_hook_summary(store, run_id), report["simulation"]
    children = [
        {"kind": kind, **child}
        for kind, found in (
            ("tasks", report.get("tasks", [])),
            ("reviews", report.get("reviews", [])),
        )
        for child in found
        if mapping(child.get("parent")).get("run_id") in (run_id, None)
    ]
    return {
        "run": run,
        "simulation": simulation,
        "chat_id": report["chat"]["id"],
        "parent": simulation.get("parent"),
        "children": children,
        "timeline": timeline,
        "gates": list(gates.values()),
        "executions": [e for e in report.get("executions", []) if e.get("run_id") == run_id],
        "continuations": mapping(store.read(RUN, run_id).get("execution")).get("continuations"),
        "runs_of_chat": [r["id"] for r in report["runs"]],
        "journal": SERVE,
        "hook_summary": summary,
        "hook_summary_text": [{"text": t, "failed": f} for t, f in summary_text(summary)],
    }


def _task_item(task: Mapping[str, object]) -> dict[str, object]:
    """A Nexus hook task as a timeline item: the boundary, the executor tool, what it decided."""
    error = mapping(task.get("error"))
    decision = mapping(task.get("decision"))
    return {
        "kind": "hook_task",
        "at": str(task.get("created_at") or ""),
        **{key: task.get(key) for key in ("id", "event", "tool", "status")},
        "outcome": outcome_of(task) if isinstance(task.get("status"), str) else None,
        **{key: task.get(key) for key in ("attempt", "continuations_used", "max_continuations")},
        "feedback": decision.get("feedback") or decision.get("reason"),
        "error": error.get("message"),
        "input": task.get("input"),
    }


def gates(store: Store) -> dict[str, object]:
    """The pending gates of every run, the one that expires first first."""
    now = clock.now()  # the server's clock: virtual under belt serve --clock
    items = [gate_item(record, now) for record in inbox(store=store)]
    items.sort(key=lambda item: str(item.get("expires_at") or ""))
    return {"now": now.isoformat(), "items": items}


def gate_item(record: Interrupt, now: datetime) -> dict[str, object]:
    """A stored interrupt as the page shows a gate: its DTO, data, time left, expiry, trail."""
    dto = to_dto(record)
    meta = mapping(dto.get("meta"))
    data = mapping(meta.get("data"))
    return {
        **dto,
        "event": meta.get("event") or str(dto.get("source") or "").removeprefix("hook:"),
        "tool": data.get("tool"),
        "arguments": data.get("arguments"),
        "turn_count": meta.get("turn_count"),
        "on_expiry": on_expiry(record),
        "seconds_left": _seconds_left(dto.get("expires_at"), now),
        "settled_by": settled_by(record),
        "trail": trail(record),
    }


def _seconds_left(expires_at: Any, now: datetime) -> float | None:
    try:
        return round((parse_timestamp(str(expires_at)) - now).total_seconds(), 1)
    except InvalidInput:
        return None


def resolve(
    store: Store, *, interrupt_id: str, decision: Any, data: Any
) -> tuple[dict[str, object], dict[str, object]]:
    """Resolve a gate from the page: (its ``gate_item``, whether its run goes on); Conflict."""
    if decision not in ("allow", "deny"):
        raise InvalidInput(f"decision: expected allow or deny, got {decision!r}")
    resolve_interrupt(
        store=store, interrupt_id=interrupt_id, decision=decision, data=data, by=person("inspector")
    )
    dto = gate_item(read_record(store=store, interrupt_id=interrupt_id), clock.now())
    run_id = str(dto["run_id"])
    run = store.get(RUN, run_id)
    waiting: dict[str, object] = {}
    if run is None or not run.get("sim_id"):
        why = "not a simulated run"
    elif pending := list_interrupts(store=store, run_id=run_id):
        why = f"{len(pending)} more gate(s) of the run are pending"
        waiting = {"waiting": len(pending)}
    elif run.get("state") != AgentRunState.INPUT_REQUIRED:
        why = f"the run is {run['state']}"
    elif leases.holder_alive(lease := run.get("lease")) and not leases.is_mine(lease):
        why = f"{leases.describe(lease)} continues it"
    else:
        return dto, {"run_id": run_id, "continues": True, "why": "this server continues it"}
    return dto, {"run_id": run_id, "continues": False, "why": why, **waiting}
