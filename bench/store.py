"""Cost of the store against its size: show, list, resolve and the inbox at 100 and 100,000
interrupts.

Fills two stores, one of SMALL and one of LARGE interrupts spread over runs of 10, through
``create_interrupt`` itself (without fsync, so the fill is quick). Then, alternating between the
stores, measures:

- show: ``get_interrupt`` of a random interrupt;
- list: ``list_interrupts`` of a random run;
- resolve: ``resolve_interrupt`` of a random pending interrupt, on a store opened with
  ``Store(root, fsync=False)`` (belt's own work: what grows with the store);
- resolve, fsynced: the same on the store as belt opens it (``Store(root)``), reported apart
  and without a target: each of its fsyncs costs what the disk costs (0.7 to 26 ms were seen),
  which would hide any growth in belt's own work.

Then a sweep settles every interrupt of both stores, 100 new gates open in each, and it measures

- inbox: what `belt interrupt list` (no run id) asks, ``LocalBackend.find_interrupts()``: every
  run's pending gates, among SMALL settled interrupts and among LARGE settled ones.

Prints each median and the ratio of the median at LARGE to the median at SMALL. Targets: at
most 2 for show, list, resolve and inbox. ``--quick`` fills 100 and 3,000; the test-only
``--handicap S`` adds S seconds to every measured operation at the large size (a store whose
cost grows), in this bench's own timing wrapper.

    .venv/bin/python bench/store.py [--quick] [--small 100] [--large 100000] [--samples 200]
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

from verdict import Verdicts, add_common_options

from belt.backends.backend import LocalBackend
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
TARGET = 2.0
QUICK_LARGE = 3000
QUICK_SAMPLES = 40
T0 = datetime(2026, 8, 11, 14, 0, 0, tzinfo=UTC)
SIZES = ("small", "large")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=None, help="default 100000 (quick: 3000)")
    parser.add_argument("--samples", type=int, default=None, help="default 200 (quick: 40)")
    add_common_options(parser)
    args = parser.parse_args()
    large = args.large or (QUICK_LARGE if args.quick else 100_000)
    samples = args.samples or (QUICK_SAMPLES if args.quick else 200)
    sizes = {"small": args.small, "large": large}
    chance = random.Random(2026)

    def timed(size: str, action: Callable[..., object], **kwargs: Any) -> float:
        start = time.perf_counter()
        action(**kwargs)
        if size == "large" and args.handicap:
            time.sleep(args.handicap)
        return time.perf_counter() - start

    base = Path(tempfile.mkdtemp(prefix="belt-bench-store-"))
    try:
        roots = {name: base / name for name in SIZES}
        runs = {}
        for name in SIZES:
            started = time.perf_counter()
            runs[name] = fill(roots[name], sizes[name])
            print(f"filled {sizes[name]:>7} interrupts in {time.perf_counter() - started:6.1f}s")

        quick = {name: Store(root, fsync=False) for name, root in roots.items()}
        synced = {name: Store(root) for name, root in roots.items()}
        every = {name: [i for ids in runs[name].values() for i in ids] for name in roots}
        pending = {name: chance.sample(ids, len(ids)) for name, ids in every.items()}
        resolvable = min(samples, args.small // 2)
        times: dict[str, dict[str, list[float]]] = {
            op: {"small": [], "large": []} for op in ("show", "list", "resolve", "resolve+fsync")
        }
        for sample in range(samples):
            for name in SIZES if sample % 2 else SIZES[::-1]:
                store = quick[name]
                shown = chance.choice(every[name])
                times["show"][name].append(
                    timed(name, get_interrupt, store=store, interrupt_id=shown)
                )
                run_id = chance.choice(list(runs[name]))
                times["list"][name].append(timed(name, list_interrupts, store=store, run_id=run_id))
                if sample < resolvable:
                    for op, opened in (("resolve", store), ("resolve+fsync", synced[name])):
                        times[op][name].append(
                            timed(
                                name,
                                resolve_interrupt,
                                store=opened,
                                interrupt_id=pending[name].pop(),
                                decision="allow",
                            )
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
        backends = {name: LocalBackend(store) for name, store in quick.items()}
        for sample in range(samples):
            for name in SIZES if sample % 2 else SIZES[::-1]:
                times["inbox"][name].append(timed(name, backends[name].find_interrupts))
        assert all(len(b.find_interrupts()) == PENDING for b in backends.values())

        print(f"\n{'operation':<14}{args.small:>10}{large:>10}{'ratio':>8}  (median µs)")
        verdicts = Verdicts("store")
        for op, measured in times.items():
            small_median = statistics.median(measured["small"])
            large_median = statistics.median(measured["large"])
            ratio = large_median / small_median
            print(f"{op:<14}{small_median * 1e6:>10.0f}{large_median * 1e6:>10.0f}{ratio:>8.2f}")
            if op != "resolve+fsync":
                verdicts.check(f"{op} at {large:,} / at {args.small}", figure=ratio, target=TARGET)
        print("(resolve+fsync: the store as belt opens it, fsync included; no target)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    verdicts.report()


if __name__ == "__main__":
    main()
