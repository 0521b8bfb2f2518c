"""``belt serve --approvals FILE``: the server settles gates by rules as they open.

Of a store's processes, the one holding the ``approvals`` lease settles (the others look every
second), following the gates with a ``Watch`` as ``belt interrupt auto`` does.
"""

from __future__ import annotations

import asyncio
import time

from starlette.concurrency import run_in_threadpool

from belt.records.interrupts import Watch
from belt.records.leases import hold
from belt.records.reports import Reporter, report_api
from belt.rules.approvals import Rules, settle_as_they_open, store_resolver
from belt.store import Store

SETTLER = "approvals"  # the name of the lease that says which process settles gates by rules
INTERVAL = 0.2  # seconds between two looks at the store's gates
LEASE_CHECK = 1.0  # seconds between two looks at the lease


class Settler:
    """One process's part in settling a store's gates by rules."""

    def __init__(self, store: Store, rules: Rules, report: Reporter | None) -> None:
        self.store = store
        self.rules = rules
        self.report = report
        self.resolve = store_resolver(store)
        self.watch: Watch | None = None
        self.checked = -LEASE_CHECK
        self.holding = False

    def look(self) -> None:
        """Settle what opened since the last look, when this process holds the lease."""
        if time.monotonic() - self.checked >= LEASE_CHECK:
            self.checked = time.monotonic()
            self.holding = hold(self.store, SETTLER)
        if not self.holding:
            self.watch = None
            return
        if self.watch is None:
            self.watch = Watch(store=self.store)
            events = self.watch.start()
        else:
            events = self.watch.poll()
        for outcome in settle_as_they_open(self.rules, events, self.resolve):
            if isinstance(outcome, str):
                report_api(self.report, "approvals", "-", 500, outcome)
                continue
            verdict, target = outcome.verdict, str(outcome.item.get("id"))
            done = "ask, left to a person:" if outcome.settled is None else f"{verdict.decision} by"
            status, detail = 200, f"{done} {verdict.why}"
            if outcome.skipped is not None:
                status, detail = 409, outcome.skipped
            report_api(self.report, "approvals", target, status, detail)

    async def forever(self) -> None:
        """Look every ``INTERVAL`` seconds until cancelled; a failed look is reported."""
        while True:
            try:
                await run_in_threadpool(self.look)
            except Exception as exc:  # one bad look is reported; the server stays up
                self.watch = None
                report_api(self.report, "approvals", "-", 500, f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(INTERVAL)
