"""The Nexus executor inbox: durable hook tasks in the store, claimed by workers with a deadline.

Each (event, source) pair of an execution has one task, its id derived from its ``task_key``.
A claim whose worker is gone is released by whoever looks first, once the dead worker's marked
tool processes are killed, so a tool never runs in two places at once.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from belt.display.text import describe, short
from belt.errors import BeltError, Conflict, NotFound
from belt.executor.process import stop_marked
from belt.records import leases
from belt.records.hooktasks import (
    RUN_TASKS,
    HookTask,
    add_task,
    change_task,
    get_task,
    mark_pending,
    read_task,
    start_attempt,
)
from belt.records.hooktasks import run_tasks as run_tasks
from belt.records.ids import new_id
from belt.records.interrupts import cancel_interrupt, create_interrupt, read_record
from belt.store.clock import parse_timestamp, timestamp, utcnow
from belt.wire.nexus import NexusEvent, NexusHook
from belt.wire.validate import check_decision

if TYPE_CHECKING:
    from belt.store import Store

ASK = "ask"  # the approval mode whose hook tasks wait for approval before a claim
RESULT_KEYS = ("structured_content", "content")
STORED_RESULT_MAX_BYTES = 64 * 1024
DETAIL_MAX = 300
CLAIM_MARK = "BELT_HOOKTASK_CLAIM"  # the environment variable of a claim's tool processes


class TaskStatus(StrEnum):
    """Where a hook task is in its life (stored, and shown as it is spelt here)."""

    AWAITING_APPROVAL = "awaiting_approval"
    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Failure(StrEnum):
    """Why a hook task failed (its error's ``code``); each holds its execution for attention."""

    TOOL_FAILED = "tool_failed"
    TIMEOUT = "timeout"
    INVALID_DECISION = "invalid_decision"
    CONTINUATION_LIMIT_EXCEEDED = "continuation_limit_exceeded"
    APPROVAL_DENIED = "approval_denied"
    HOOK_REQUIRES_MODEL = "hook_requires_model"
    CANCELLED = "cancelled"


FINISHED = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)
IN_INBOX = (TaskStatus.PENDING, TaskStatus.CLAIMED)  # where a task's deadline runs
WORKER_GONE = "worker_gone"  # an attempt no failure counts: its worker died holding the claim


class _Keep(Exception):
    """Raised inside a store update to leave the task as it is."""


_HOLDER = ("pid", "host", "started")  # what a claim keeps of its worker's ``leases.mine()``


def task_key(run_id: str, event: NexusEvent | str, source: str) -> str:
    """The stable key of the hook task of one (event, source) pair of a run."""
    return f"{run_id}:{event}:{source}"


def task_id(key: str) -> str:
    """The store id of the task with ``key`` (a key holds ``:``, which ids may not)."""
    return "ht_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def time_left(task: HookTask) -> float:
    """Seconds to the task's deadline; inf while it awaits approval (its deadline starts then)."""
    deadline = task.get("deadline")
    return math.inf if deadline is None else (parse_timestamp(deadline) - utcnow()).total_seconds()


def _attempt_summary(task: HookTask) -> dict[str, object]:
    return {
        "attempt": task["attempt"],
        "status": task["status"],
        "dispatched_at": task["dispatched_at"],
        "claimed_by": (task.get("claim") or {}).get("by"),
        "error": task.get("error"),
        "duration_ms": task.get("duration_ms"),
    }


def _fail(
    task: HookTask,
    code: Failure,
    message: str,
    status: TaskStatus = TaskStatus.FAILED,
    **extra: Any,
) -> HookTask:
    now = timestamp(utcnow())
    error = {"code": code.value, "message": message, **extra}
    task.update({"status": status.value, "error": error, "finished_at": now, "updated_at": now})
    return task


def _redispatch(task: HookTask, attempt: int) -> HookTask:
    """Put ``task`` in the inbox as ``attempt``, unclaimed, its deadline starting now."""
    now = utcnow()
    stamp, deadline = timestamp(now), timestamp(now + timedelta(milliseconds=task["timeout_ms"]))
    task.update({"status": TaskStatus.PENDING.value, "attempt": attempt, "claim": None})
    task.update({"dispatched_at": stamp, "deadline": deadline, "updated_at": stamp})
    return task


def _filed(store: Store, task: HookTask) -> HookTask:
    """A pending task put in the inbox, a finished one taken out (any other left as it is)."""
    if (status := task["status"]) == TaskStatus.PENDING or status in FINISHED:
        mark_pending(store, task["id"], pending=status == TaskStatus.PENDING)
    return task


def _change(store: Store, identity: str, change: Callable[[HookTask], HookTask]) -> HookTask | None:
    """``change_task`` and ``_filed``, or None when ``change`` kept the task (raised ``_Keep``)."""
    try:
        return _filed(store, change_task(store, identity, change))
    except _Keep:
        return None


def schedule_task(
    store: Store,
    *,
    key: str,
    event: NexusEvent,
    hook: NexusHook,
    task_input: Mapping[str, object],
    run_id: str,
    sim_id: str | None = None,
    approval_mode: str | None = None,
    tool_only: bool = False,
    continuations_used: int = 0,
    chat_id: str | None = None,
) -> HookTask:
    """Put the task for ``key`` in the inbox, or reuse it (a failed or overdue one re-attempted)."""
    identity = task_id(key)
    now = utcnow()
    stamp = timestamp(now)
    asks = approval_mode == ASK
    deadline = None if asks else timestamp(now + timedelta(milliseconds=hook.timeout_ms))
    status = TaskStatus.AWAITING_APPROVAL if asks else TaskStatus.PENDING
    fresh: HookTask = {
        "id": identity,
        "task_key": key,
        "event": event.value,
        "tool": hook.tool,
        "timeout_ms": hook.timeout_ms,
        "max_continuations": hook.max_continuations,
        "continuations_used": continuations_used,
        "tool_only": tool_only,
        "approval_mode": approval_mode,
        "run_id": run_id,
        "sim_id": sim_id,
        "input": task_input,
        "chat_id": chat_id,
        "status": status.value,
        "attempt": 1,
        "history": [],
        "created_at": stamp,
    }
    start_attempt(fresh, status.value, 1, stamp, deadline)
    if add_task(store, fresh):
        return _ask(store, _filed(store, fresh))

    def rearm(task: HookTask) -> HookTask:
        overdue = task["status"] in IN_INBOX and time_left(task) <= 0
        if task["status"] != TaskStatus.FAILED and not overdue:
            raise _Keep
        task["history"] = [*task.get("history", []), _attempt_summary(task)]
        start_attempt(task, status.value, int(task["attempt"]) + 1, stamp, deadline)
        return task

    if (task := _change(store, identity, rearm)) is None:  # kept: asked already, if it asks
        return read_task(store, identity)
    return _ask(store, task)


def _ask(store: Store, task: HookTask) -> HookTask:
    """A new attempt that must be approved first asks for approval (a pending one is filed)."""
    if task["status"] != TaskStatus.AWAITING_APPROVAL:
        return task

    interrupt = create_interrupt(
        store=store,
        run_id=str(task["run_id"]),
        chat_id=str(task.get("chat_id") or task["run_id"]),
        event=str(task["event"]),
        reason="tool_approval",
        source=f"nexus:{task['event']}",
        resource_type="tool_invocation",
        resource_id=str(task["id"]),
        meta={
            "tool_name": task["tool"],
            "arguments": task["input"],
            "tool_invocation_id": task["id"],
            "task_key": task["task_key"],
            "attempt": task["attempt"],
        },
    )

    def ask(current: HookTask) -> HookTask:
        current["approval"] = {"interrupt_id": interrupt["id"], "status": "pending"}
        return current

    return change_task(store, task["id"], ask)


def settle_approval(store: Store, identity: str) -> HookTask:
    """Act on a task's settled approval: approved, it is dispatched; denied or expired, it fails."""
    task = read_task(store, identity)
    approval = task.get("approval") or {}
    if task["status"] != TaskStatus.AWAITING_APPROVAL or not approval.get("interrupt_id"):
        return task
    interrupt = read_record(store=store, interrupt_id=str(approval["interrupt_id"]))
    if interrupt["status"] == "pending":
        return task
    resolution = interrupt.get("resolution") or "deny"

    def settle(current: HookTask) -> HookTask:
        if current["status"] != TaskStatus.AWAITING_APPROVAL:
            raise _Keep
        current["approval"] = {**approval, "status": interrupt["status"], "resolution": resolution}
        if resolution != "allow":
            how = "expired unapproved" if interrupt["status"] == "expired" else "was denied"
            why = f"the hook task's approval {how} (interrupt {interrupt['id']})"
            return _fail(current, Failure.APPROVAL_DENIED, why)
        return _redispatch(current, current["attempt"])

    return _change(store, identity, settle) or read_task(store, identity)


def claim_task(store: Store, identity: str, *, worker: str) -> HookTask | None:
    """Claim a pending task for ``worker``; None if it is gone, taken or past its deadline.
    A claimed task stays in the inbox until it finishes, so a dead worker's claim is found
    (``release_abandoned``)."""
    status = None

    def claim(task: HookTask) -> HookTask:
        nonlocal status
        if (status := task["status"]) != TaskStatus.PENDING:
            raise _Keep
        if time_left(task) <= 0:
            return _fail(task, Failure.TIMEOUT, unclaimed_message(task))
        now = timestamp(utcnow())
        held = {k: v for k, v in leases.mine().items() if k in _HOLDER}
        task["status"] = TaskStatus.CLAIMED.value
        task["claim"] = {"by": worker, "at": now, **held, "mark": new_id("cl")}
        task["updated_at"] = now
        return task

    try:
        task = _change(store, identity, claim)
    except BeltError:
        return None
    if task is not None and task["status"] == TaskStatus.CLAIMED:
        return task
    if status != TaskStatus.CLAIMED:  # finished, or waiting for its approval
        mark_pending(store, identity, pending=False)
    return None


def abandoned(claim: Any) -> bool:
    """True for a claim whose worker, a process of this host, is gone (others run to deadline)."""
    if not isinstance(claim, dict) or not isinstance(claim.get("mark"), str):
        return False
    return claim.get("host") == leases.host() and not leases.holder_alive(claim)


def release_abandoned(store: Store, identity: str) -> HookTask | None:
    """Give a task whose worker died holding it back to the inbox, once its tools are killed."""
    task = get_task(store, identity)
    if task is None or task["status"] != TaskStatus.CLAIMED or not abandoned(task.get("claim")):
        return None
    claim = task["claim"]
    stop_marked(CLAIM_MARK, str(claim["mark"]))

    def release(current: HookTask) -> HookTask:
        if current["status"] != TaskStatus.CLAIMED or current.get("claim") != claim:
            raise _Keep
        message = f"{claim.get('by')} died holding the claim; the task went back to the inbox"
        gone = {**_attempt_summary(current), "error": {"code": WORKER_GONE, "message": message}}
        current["history"] = [*current.get("history", []), gone]
        return _redispatch(current, int(current["attempt"]) + 1)

    return _change(store, identity, release)


def unclaimed_message(task: HookTask) -> str:
    """Why a task that no worker claimed timed out."""
    return (
        f"no executor claimed the task within {task['timeout_ms']} ms "
        f"(is `belt executor run --tool {task['tool']}=...` running?)"
    )


def check_result(
    result: object, event: NexusEvent | str
) -> tuple[list[str], dict[str, object] | None]:
    """Check a tool's result: ``structured_content`` holds the decision, nothing else is added."""
    if not isinstance(result, dict):
        return [f"result: expected an object, got {describe(result)}"], None
    refused = "additional result fields are refused (a result holds structured_content)"
    problems = [f"result.{key}: {refused}" for key in result if key not in RESULT_KEYS]
    if "structured_content" not in result:
        problems.append(
            'result.structured_content: is required (the decision, e.g. {"continue": false})'
        )
        return problems, None
    findings, decision = check_decision(
        result["structured_content"], event, "result.structured_content"
    )
    problems += findings.problems
    if problems or decision is None:
        return problems, None
    return [], decision.model_dump(by_alias=True, exclude_none=True)


def _stored_result(result: Any) -> Any:
    try:
        size = len(json.dumps(result, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        return {"unstorable": describe(result)}
    if size > STORED_RESULT_MAX_BYTES:
        return {"omitted": f"the result is {size} bytes; belt keeps results up to 64 KiB"}
    return result


@dataclass
class ToolOutcome:
    """What running a tool gave: a result, or why there is none."""

    result: Any = None
    failure: str | None = None
    invalid: str | None = None
    timed_out: bool = False


def complete_task(
    store: Store, identity: str, outcome: ToolOutcome, *, duration_ms: int, mark: str | None = None
) -> HookTask:
    """Record a claimed task's outcome (with ``mark``, only that claim's); the task as it is."""

    def finish(task: HookTask) -> HookTask:
        ours = mark is None or (task.get("claim") or {}).get("mark") == mark
        if task["status"] != TaskStatus.CLAIMED or not ours:
            raise _Keep
        task["duration_ms"] = duration_ms
        timeout = int(task["timeout_ms"])
        if outcome.timed_out or time_left(task) <= 0:
            return _fail(task, Failure.TIMEOUT, f"the tool did not finish within {timeout} ms")
        if outcome.failure is not None:
            return _fail(task, Failure.TOOL_FAILED, short(outcome.failure, DETAIL_MAX))
        if outcome.invalid is not None:
            return _fail(task, Failure.INVALID_DECISION, short(outcome.invalid, DETAIL_MAX))
        task["result"] = _stored_result(outcome.result)
        problems, decision = check_result(outcome.result, str(task["event"]))
        if decision is None:
            return _fail(task, Failure.INVALID_DECISION, problems[0], problems=problems)
        task["decision"] = decision
        used, allowed = task.get("continuations_used", 0), task.get("max_continuations")
        if decision["continue"] and task.get("tool_only"):
            alone = "a tool-only execution has no model round to continue"
            why = f"{alone}; stop can only acknowledge here"
            return _fail(task, Failure.HOOK_REQUIRES_MODEL, why)
        if decision["continue"] and (allowed is None or used >= allowed):
            asked = f"the hook asked for continuation {used + 1}"
            why = f"{asked}; max_continuations is {allowed}"
            return _fail(task, Failure.CONTINUATION_LIMIT_EXCEEDED, why)
        now = timestamp(utcnow())
        task.update({"status": TaskStatus.COMPLETED.value, "finished_at": now, "updated_at": now})
        return task

    return _change(store, identity, finish) or read_task(store, identity)


def expire_task(store: Store, identity: str) -> HookTask:
    """Fail a task whose deadline has passed (timeout); returns the task as it now is."""

    def expire(task: HookTask) -> HookTask:
        if task["status"] not in IN_INBOX or not time_left(task) <= 0:
            raise _Keep
        if task["status"] == TaskStatus.PENDING:
            return _fail(task, Failure.TIMEOUT, unclaimed_message(task))
        by = (task.get("claim") or {}).get("by", "an executor")
        late = f"claimed the task but did not complete it within {task['timeout_ms']} ms"
        return _fail(task, Failure.TIMEOUT, f"{by} {late}")

    return _change(store, identity, expire) or read_task(store, identity)


def release_task(store: Store, identity: str, *, worker: str) -> None:
    """Give a claimed task back to the inbox (the worker was interrupted before finishing)."""

    def release(task: HookTask) -> HookTask:
        if task["status"] != TaskStatus.CLAIMED or (task.get("claim") or {}).get("by") != worker:
            raise _Keep
        now = timestamp(utcnow())
        return task | {"status": TaskStatus.PENDING.value, "claim": None, "updated_at": now}

    _change(store, identity, release)


def cancel_run_tasks(store: Store, run_id: str, reason: str) -> list[HookTask]:
    """Cancel a run's pending and claimed hook tasks; returns the ones cancelled."""
    cancelled = []

    def cancel(task: HookTask) -> HookTask:
        if task["status"] not in (*IN_INBOX, TaskStatus.AWAITING_APPROVAL):
            raise _Keep
        return _fail(task, Failure.CANCELLED, reason, TaskStatus.CANCELLED)

    for identity in store.members(RUN_TASKS, run_id):
        if (task := _change(store, identity, cancel)) is None:
            continue
        cancelled.append(task)
        if (approval := task.get("approval") or {}).get("status") == "pending":
            with suppress(Conflict, NotFound):  # settled meanwhile, or its creator never finished
                cancel_interrupt(store=store, interrupt_id=str(approval["interrupt_id"]))
    return cancelled


def outcome_of(task: Mapping[str, Any]) -> str:
    """One word for where a task ended: acknowledged, continue, failed, cancelled, or its status."""
    if (status := task["status"]) == TaskStatus.COMPLETED:
        return "continue" if (task.get("decision") or {}).get("continue") else "acknowledged"
    return str(status)


def task_record(task: HookTask, *, duration_ms: int | None = None) -> dict[str, object]:
    """One line's worth of a finished task: event, key, outcome, why, how long."""
    error = task.get("error") or {}
    decision = task.get("decision") or {}
    return {
        "kind": "task",
        "at": task.get("finished_at") or timestamp(utcnow()),
        "event": task["event"],
        "task_key": task["task_key"],
        "tool": task["tool"],
        "attempt": task["attempt"],
        "outcome": outcome_of(task),
        "code": error.get("code"),
        "detail": error.get("message"),
        "feedback": decision.get("feedback"),
        "duration_ms": duration_ms if duration_ms is not None else task.get("duration_ms"),
    }
