"""The executor worker: claims hook tasks for the tools it serves, runs them, completes them."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from belt.errors import UsageError
from belt.executor.inbox import (
    CLAIM_MARK,
    FINISHED,
    TaskStatus,
    claim_task,
    complete_task,
    release_abandoned,
    release_task,
    task_record,
    time_left,
)
from belt.executor.targets import Target, parse_tools
from belt.records.hooktasks import PENDING_TAG, HookTask, get_task, mark_pending
from belt.records.reports import Reporter
from belt.store import open_store
from belt.store.clock import timestamp, utcnow

if TYPE_CHECKING:
    from belt.store import Store

POLL = 0.05  # seconds between passes over an inbox with nothing to serve


@dataclass
class Worker:
    """Claims hook tasks for the tools it serves and completes them."""

    store: Store
    targets: dict[str, Target]
    report: Reporter | None = None
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    _skipped: set[str] = field(default_factory=set)

    def serve_task(self, identity: str) -> HookTask | None:
        """Claim one task, run its tool and complete it; None if the claim was lost."""
        if (task := claim_task(self.store, identity, worker=self.name)) is None:
            return None
        mark, started = str(task["claim"]["mark"]), time.perf_counter()
        try:
            call = self.targets[task["tool"]].call
            outcome = call(task["input"], time_left(task), mark=(CLAIM_MARK, mark))
        except KeyboardInterrupt:
            release_task(self.store, identity, worker=self.name)
            raise
        duration_ms = round((time.perf_counter() - started) * 1000)
        final = complete_task(self.store, identity, outcome, duration_ms=duration_ms, mark=mark)
        if self.report is not None:
            self.report(task_record(final, duration_ms=duration_ms))
        return final

    def serve_pending(self) -> list[HookTask]:
        """One pass over the inbox: serve each waiting task of this worker's tools."""
        served = []
        for identity in self.store.tagged(PENDING_TAG):
            task = get_task(self.store, identity)
            if task is not None and task["status"] == TaskStatus.CLAIMED:
                task = release_abandoned(self.store, identity)  # None unless abandoned
            elif task is not None and task["status"] in FINISHED:
                mark_pending(self.store, identity, pending=False)
                continue
            if task is None or task["status"] != TaskStatus.PENDING:
                continue
            if task["tool"] in self.targets:
                if (final := self.serve_task(identity)) is not None:
                    served.append(final)
            elif task["id"] not in self._skipped and self.report is not None:
                self._skipped.add(task["id"])
                tool = task["tool"]
                named = {"event": task["event"], "task_key": task["task_key"], "tool": tool}
                detail = f"this worker does not serve {tool}"
                self.report({"kind": "skip", "at": timestamp(utcnow()), **named, "detail": detail})
        return served


def run_worker(
    *,
    tools: list[str],
    once: bool = False,
    report: Reporter | None = None,
    on_start: Callable[[Worker], None] | None = None,
) -> int:
    """``belt executor run``: serve the store's inbox until interrupted (or one pass with
    ``once``); returns the tasks served."""
    if not tools:
        raise UsageError("give at least one --tool NAME=TARGET")
    worker = Worker(open_store(), parse_tools(tools), report)
    if on_start is not None:
        on_start(worker)
    count = 0
    while True:
        count += len(served := worker.serve_pending())
        if once:
            return count
        if not served:
            time.sleep(POLL)
