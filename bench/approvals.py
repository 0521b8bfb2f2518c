"""Approval rules at volume: what-if over a settled history, and how soon auto settles a gate.

Measures, each as a whole process where the target names one:

- what-if: ``belt interrupt what-if --rules examples/approvals.toml --json`` over a store of
  GATES settled gates (settled by people, by a rule and by expiry, ten to a run), against
  ``belt interrupt list --all --json`` over the same store, paired (A B A B) for ROUNDS rounds;
  the figure is the median of the per-round ratios. Target: at most 3.
- auto: ``belt interrupt auto --rules examples/approvals.toml`` runs in its own process on a
  fresh store while this process opens OPENED gates one after another (each after the last was
  settled, a random 0-50 ms later); a gate's latency is its ``resolved_at`` minus its
  ``created_at``, both stamped by belt. The figure is the 95th percentile. Target: 0.5 s.
- idle look: the ``stat`` calls (and directory reads, file opens) of one look of the watch
  auto uses while nothing changes, counted in this process. Target: at most 2.

``--quick`` uses 2,000 gates, 3 rounds and 40 opened gates; the test-only ``--handicap S`` adds
S seconds to every what-if run and to every latency (a slower what-if and a slower auto).

    .venv/bin/python bench/approvals.py [--quick] [--gates 10000] [--rounds 5] [--opened 200]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from verdict import Verdicts, add_common_options

from belt.records.interrupts import create_interrupt, person, read_record, resolve_interrupt, sweep
from belt.store import Store

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "approvals.toml"
T0 = datetime(2026, 8, 11, 9, 0, 0, tzinfo=UTC)
TOOLS = ("read_file", "delete_file", "send_email", "run_shell")


def belt(*args: str) -> list[str]:
    return [sys.executable, "-m", "belt", *args]


def fill(root: Path, count: int) -> None:
    """``count`` settled gates: most by a person (a tenth denied), some by a rule, the rest by
    expiry, ten to a run."""
    store = Store(root, fsync=False)
    chance = random.Random(2026)
    rule = {"how": "rule", "file": str(RULES), "rule": "reads", "digest": "sha256:0"}
    expiring = []
    for number in range(count):
        tool = TOOLS[number % len(TOOLS)]
        opened = T0 + timedelta(seconds=number)
        item = create_interrupt(
            store=store,
            run_id=f"ar_{number // 10:07d}",
            chat_id="ch_bench",
            event="agent.tool_call",
            meta={"data": {"tool": tool, "arguments": {"path": f"/srv/{number}"}}},
            now=opened,
            timeout=60,
        )
        kind = number % 10
        if kind == 9:
            expiring.append(item["id"])
            continue
        resolve_interrupt(
            store=store,
            interrupt_id=item["id"],
            decision="deny" if kind == 0 else "allow",
            data={"reason": "not now"} if kind == 0 else None,
            now=opened + timedelta(seconds=chance.randint(5, 600)),
            by=rule if kind == 8 else person("cli"),
        )
    sweep(store=store, now=T0 + timedelta(days=2))


def timed(command: list[str], home: Path) -> float:
    env = {**os.environ, "BELT_HOME": str(home), "NO_COLOR": "1"}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[3:])} exited {done.returncode}: {done.stderr!r}")
    return took


def what_if_ratio(home: Path, rounds: int, handicap: float) -> float:
    what_if = belt("interrupt", "what-if", "--rules", str(RULES), "--json")
    listing = belt("interrupt", "list", "--all", "--json")
    ratios = []
    for number in range(rounds):
        first, second = (what_if, listing) if number % 2 else (listing, what_if)
        times = {id(first): timed(first, home), id(second): timed(second, home)}
        ratio = (times[id(what_if)] + handicap) / times[id(listing)]
        ratios.append(ratio)
        print(f"round {number + 1}: what-if {times[id(what_if)]:.3f}s, list "
              f"{times[id(listing)]:.3f}s, ratio {ratio:.2f}")  # fmt: skip
    return statistics.median(ratios)


def auto_latencies(home: Path, count: int, handicap: float) -> list[float]:
    store = Store(home / "store", fsync=False)
    env = {**os.environ, "BELT_HOME": str(home), "NO_COLOR": "1"}
    auto = subprocess.Popen(
        belt("interrupt", "auto", "--rules", str(RULES)),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    chance = random.Random(7)
    latencies = []
    try:
        assert auto.stderr is not None
        auto.stderr.readline()  # its first line, said as it starts to look
        time.sleep(0.5)  # its first look taken: what is timed is the settling, not the start
        for number in range(count):
            time.sleep(chance.uniform(0, 0.05))
            item = create_interrupt(
                store=store,
                run_id=f"ar_live_{number // 10:04d}",
                chat_id="ch_bench",
                event="agent.tool_call",
                meta={"data": {"tool": "read_file", "arguments": {"path": "/srv/x"}}},
            )
            deadline = time.monotonic() + 30
            while (record := read_record(store=store, interrupt_id=item["id"]))["status"] == (
                "pending"
            ):
                if time.monotonic() > deadline or auto.poll() is not None:
                    raise SystemExit(f"gate {item['id']} was not settled by auto")
                time.sleep(0.005)
            opened = datetime.fromisoformat(record["created_at"])
            settled = datetime.fromisoformat(record["resolved_at"])
            latencies.append((settled - opened).total_seconds() + handicap)
    finally:
        auto.terminate()
        auto.wait(30)
    return latencies


def idle_look_calls(home: Path) -> int:
    """The file-system calls of one look of auto's watch while nothing changes."""
    from belt.backends.backend import LocalBackend

    store = Store(home / "store", fsync=False)
    create_interrupt(store=store, run_id="ar_idle", chat_id="ch_bench", event="agent.tool_call")
    past = time.time() - 60  # changed long enough ago for a look to trust their times
    for directory in (store.root / "tags", store.root / "index"):
        for path in [directory, *directory.rglob("*")]:
            os.utime(path, (past, past))
    calls: list[str] = []
    real = {name: getattr(os, name) for name in ("stat", "lstat", "scandir", "listdir", "open")}

    def counting(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real[name](*args, **kwargs)

        return call

    looks = 0

    class Done(Exception):
        pass

    def sleep(_: float) -> None:
        nonlocal looks
        looks += 1
        if looks == 1:
            for name in real:
                setattr(os, name, counting(name))
        elif looks == 2:
            for name, function in real.items():
                setattr(os, name, function)
            raise Done

    try:
        for _ in LocalBackend(store).watch_interrupts(interval=0, sleep=sleep):
            pass
    except Done:
        pass
    finally:
        for name, function in real.items():
            setattr(os, name, function)
    return len(calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gates", type=int, default=None, help="default 10000 (quick: 2000)")
    parser.add_argument("--rounds", type=int, default=None, help="default 5 (quick: 3)")
    parser.add_argument("--opened", type=int, default=None, help="default 200 (quick: 40)")
    add_common_options(parser)
    args = parser.parse_args()
    gates = args.gates or (2000 if args.quick else 10_000)
    rounds = args.rounds or (3 if args.quick else 5)
    opened = args.opened or (40 if args.quick else 200)
    base = Path(tempfile.mkdtemp(prefix="belt-bench-approvals-"))
    verdicts = Verdicts("approvals")
    try:
        history = base / "history"
        started = time.perf_counter()
        fill(history / "store", gates)
        print(f"filled {gates} settled gates in {time.perf_counter() - started:.1f}s")
        ratio = what_if_ratio(history, rounds, args.handicap)
        latencies = sorted(auto_latencies(base / "live", opened, args.handicap))
        p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)]
        print(f"auto: median {statistics.median(latencies):.3f}s, p95 {p95:.3f}s, "
              f"max {latencies[-1]:.3f}s over {len(latencies)} gates")  # fmt: skip
        calls = idle_look_calls(base / "idle")
        verdicts.check(
            f"what-if / list --all --json over {gates:,} settled gates (wall)",
            figure=ratio,
            target=3,
        )
        verdicts.check(
            f"auto: a gate opened by another process settled, p95 of {opened}",
            figure=p95,
            target=0.5,
            unit="s",
        )
        verdicts.check("auto: file-system calls of an idle look", figure=calls, target=2)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    verdicts.report()


if __name__ == "__main__":
    main()
