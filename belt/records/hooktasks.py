"""Hook tasks in the store: one task for an executor tool per (event, source) of an execution,
updated under its lock so one worker claims it; ``belt.executor.inbox`` schedules and settles them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from belt.errors import Conflict
from belt.store.shapes import record_shape

if TYPE_CHECKING:
    from belt.store import Store

HOOKTASK = "hooktask"
PENDING_TAG = "hooktask-pending"
RUN_TASKS = "run-hooktasks"


class HookTask(TypedDict):
    """One hook task (kind ``hooktask``)."""

    id: str
    task_key: str
    event: str
    tool: str
    status: str
    attempt: int
    run_id: str
    timeout_ms: int
    deadline: NotRequired[str | None]
    decision: NotRequired[dict[str, object] | None]
    error: NotRequired[dict[str, object] | None]
    approval: NotRequired[dict[str, object] | None]
    """The approval it waits for before it is dispatched (``interrupt_id``, ``status``)."""
    max_continuations: NotRequired[int | None]
    continuations_used: NotRequired[int]
    tool_only: NotRequired[bool]
    approval_mode: NotRequired[str | None]
    sim_id: NotRequired[str | None]
    input: NotRequired[Any]
    chat_id: NotRequired[str | None]
    dispatched_at: NotRequired[str | None]
    claim: NotRequired[Any]
    """The worker that claimed the attempt: ``by``, ``at``, its process and a ``mark``."""
    result: NotRequired[Any]
    duration_ms: NotRequired[float | None]
    finished_at: NotRequired[str | None]
    history: NotRequired[list[dict[str, object]]]
    created_at: NotRequired[str]
    updated_at: NotRequired[str]


record_shape(HOOKTASK, HookTask)


def start_attempt(
    task: HookTask, status: str, attempt: int, stamp: str, deadline: str | None
) -> None:
    """Make ``task`` attempt ``attempt`` in ``status`` at ``stamp``, nothing claimed or answered."""
    answered = ("claim", "result", "decision", "error", "duration_ms", "finished_at")
    attempt_fields = {
        "status": status,
        "attempt": attempt,
        "approval": None,
        "dispatched_at": stamp,
        "deadline": deadline,
        **dict.fromkeys(answered),
        "updated_at": stamp,
    }
    task.update(cast(HookTask, attempt_fields))  # in this order: a new task's file lists them so


def add_task(store: Store, task: HookTask) -> bool:
    """Write a new task and list it on its run; False when its id is stored already."""
    identity, run_id = task["id"], task["run_id"]
    try:
        store.create(HOOKTASK, identity, dict(task))
    except Conflict:
        if identity not in store.members(RUN_TASKS, run_id):
            store.link(RUN_TASKS, run_id, identity)
        return False
    store.link(RUN_TASKS, run_id, identity)
    return True


def read_task(store: Store, identity: str) -> HookTask:
    """One hook task; NotFound (exit 3) if missing, InvalidInput (exit 5) if damaged."""
    return cast(HookTask, store.read(HOOKTASK, identity))


def get_task(store: Store, identity: str) -> HookTask | None:
    """One hook task, or None when there is none."""
    return cast("HookTask | None", store.get(HOOKTASK, identity))


def change_task(store: Store, identity: str, change: Callable[[HookTask], HookTask]) -> HookTask:
    """Change a hook task under its lock (so exactly one worker claims it); returns it."""
    return store.update(HOOKTASK, identity, change)


def run_tasks(store: Store, run_id: str) -> list[HookTask]:
    """A run's hook tasks, in the order they were first scheduled."""
    return [read_task(store, identity) for identity in store.members(RUN_TASKS, run_id)]


def mark_pending(store: Store, identity: str, pending: bool = True) -> None:
    """Put a task in the inbox workers look at, or take it out."""
    (store.tag if pending else store.untag)(PENDING_TAG, identity)
