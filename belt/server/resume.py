"""``belt serve --resume``: continue simulated runs as soon as their gates are settled, however
settled (each run by one process only: its lease)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool

from belt.engine.entrypoints import resume_settled
from belt.records.ids import now_iso
from belt.records.reports import Reporter

if TYPE_CHECKING:
    from belt.store import Store

RESUME_INTERVAL = 1.0  # seconds between two passes over the runs held at gates


async def resume_forever(store: Store, report: Reporter | None, interval: float) -> None:
    """Continue settled runs now and every ``interval`` seconds until cancelled."""
    while True:
        try:  # emulated chats' runs are the agent routes' own
            tried = await run_in_threadpool(resume_settled, store, emulated=False)
        except Exception as exc:  # one bad pass is reported; the server stays up
            tried = [{"run_id": "-", "error": f"{type(exc).__name__}: {exc}"}]
        if report is not None:
            for record in tried:
                report({"kind": "resume", "at": now_iso(), **record})
        await asyncio.sleep(interval)
