"""Cost of the store against its size: show, resolve and list at 100 and at 100,000 interrupts.

Fills two stores, one of SMALL and one of LARGE interrupts spread over runs of 10, through
``create_interrupt`` itself (without per-file fsync, so the fill is quick; the measured
operations fsync as they always do). Then, alternating between the stores, measures:

- show: ``get_interrupt`` of a random interrupt;
- resolve: ``resolve_interrupt`` of a random pending interrupt;
- list: ``list_interrupts`` of a random run.

Then a sweep settles every interrupt of both stores, 100 new gates open in each, and it
measures

- inbox: what `belt interrupt list` (no run id) asks, ``LocalBackend.find_interrupts()``: every
  run's pending gates, among SMALL settled interrupts and among LARGE settled ones.

Prints each median and the ratio of the median at LARGE to the median at SMALL (target: at
most 2 for resolve, list and inbox).

    .venv/bin/python bench/store.py [--small 100] [--large 100000] [--samples 200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from belt.backend import LocalBackend
from belt.records.interrupts import (
    create_interrupt,
    get_interrupt,
    list_interrupts,
    resolve_interrupt,
    sweep,
)
from belt.store import Store

PER_RUN = 10
PENDING = 100
T0 = datetime(2026, 8, 11, 14, 0, 0, tzinfo=UTC)


def fill(root: Path, count: int) -> dict[str, list[str]]:
    """A store of ``count`` pending gates, ``PER_RUN`` to a run; returns run id → interrupt ids."""
    store = Store(root, fsync=False)
    runs: dict[str, list[str]] = {}
    for number in range(count):
        run_id = f"run_{number // PER_RUN:07d}"
        dto = create_interrupt(
            store=store, run_id=run_id, chat_id="ch_bench", event="agent.tool_call", now=T0
        )
        runs.setdefault(run_id, []).append(dto["id"])
    return runs


def timed(action: Callable[..., object], **kwargs: Any) -> float:
    start = time.perf_counter()
    action(**kwargs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    chance = random.Random(2026)
    base = Path(tempfile.mkdtemp(prefix="belt-bench-store-"))
    try:
        roots = {"small": base / "small", "large": base / "large"}
        runs = {}
        for name, size in (("small", args.small), ("large", args.large)):
            started = time.perf_counter()
            runs[name] = fill(roots[name], size)
            print(f"filled {size:>7} interrupts in {time.perf_counter() - started:6.1f}s")

        stores = {name: Store(root) for name, root in roots.items()}
        every = {name: [i for ids in runs[name].values() for i in ids] for name in roots}
        pending = {name: chance.sample(ids, len(ids)) for name, ids in every.items()}
        resolvable = min(args.samples, len(pending["small"]), len(pending["large"]))
        times: dict[str, dict[str, list[float]]] = {
            op: {"small": [], "large": []} for op in ("show", "resolve", "list")
        }
        for sample in range(args.samples):
            for name in ("small", "large") if sample % 2 else ("large", "small"):
                store = stores[name]
                shown = chance.choice(every[name])
                times["show"][name].append(timed(get_interrupt, store=store, interrupt_id=shown))
                run_id = chance.choice(list(runs[name]))
                times["list"][name].append(timed(list_interrupts, store=store, run_id=run_id))
                if sample < resolvable:
                    target = pending[name].pop()
                    times["resolve"][name].append(
                        timed(resolve_interrupt, store=store, interrupt_id=target, decision="allow")
                    )
        for name, root in roots.items():  # every interrupt settled, then 100 gates pending
            started = time.perf_counter()
            fast = Store(root, fsync=False)
            sweep(store=fast, now=T0 + timedelta(hours=1))
            for number in range(PENDING):
                create_interrupt(
                    store=fast,
                    run_id=f"run_open_{number:03d}",
                    chat_id="ch_bench",
                    event="agent.tool_call",
                    timeout=86400,
                )
            took = time.perf_counter() - started
            print(f"settled every interrupt of {name}, opened {PENDING} gates in {took:6.1f}s")
        times["inbox"] = {"small": [], "large": []}
        backends = {name: LocalBackend(store) for name, store in stores.items()}
        for sample in range(args.samples):
            for name in ("small", "large") if sample % 2 else ("large", "small"):
                listed = timed(backends[name].find_interrupts)
                times["inbox"][name].append(listed)
        assert all(len(b.find_interrupts()) == PENDING for b in backends.values())

        print(f"{'operation':<10}{'small':>12}{'large':>12}{'ratio':>8}")
        for op, measured in times.items():
            small = statistics.median(measured["small"])
            large = statistics.median(measured["large"])
            print(f"{op:<10}{small * 1e6:>10.0f}µs{large * 1e6:>10.0f}µs{large / small:>8.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
