"""Hook tasks in the store: one task for an executor tool per (event, source) of an execution.

A hook task (kind ``hooktask``) is updated under its lock so exactly one worker claims it; the
``hooktask-pending`` tag lists the tasks a worker may claim and the run's ``run-hooktasks``
index lists every task of a run. ``belt.executor.inbox`` schedules, claims and settles them.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from belt.store.shapes import record_shape

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
    decision: NotRequired[dict[str, Any] | None]
    error: NotRequired[dict[str, Any] | None]
    approval: NotRequired[dict[str, Any] | None]
    max_continuations: NotRequired[Any]
    continuations_used: NotRequired[Any]
    tool_only: NotRequired[Any]
    approval_mode: NotRequired[Any]
    sim_id: NotRequired[Any]
    input: NotRequired[Any]
    chat_id: NotRequired[Any]
    dispatched_at: NotRequired[Any]
    claim: NotRequired[Any]
    result: NotRequired[Any]
    duration_ms: NotRequired[Any]
    finished_at: NotRequired[Any]
    history: NotRequired[list[Any]]
    created_at: NotRequired[Any]
    updated_at: NotRequired[Any]


record_shape(HOOKTASK, HookTask)
