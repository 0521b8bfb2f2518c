"""Start-up cost of belt's quickest commands, as ratios to `python -c "import typer"`.

Measures, interleaved with the floor so that machine load and disk caches weigh on all alike:

- `belt version` (target: at most 1.3 times the floor);
- `belt interrupt list` with no run id, over a store of 100 pending interrupts (at most 1.5);
- `belt interrupt resolve ID allow` of a pending interrupt, a fresh one each time (at most 1.5);
- `belt test` and `belt sim run` of one small scenario (a tool call, no hook; no target: the
  serial start-up that bounds `belt test -j 2` against `-j 1`, shown for comparison).

Every command runs with this interpreter and with bytecode caching on (as an installed belt
runs), after one warm-up run of each. ``--quick`` runs each 5 times rather than 15 and leaves
out the two commands without a target; the test-only ``--handicap S`` makes each belt command
take S times its own wall time more, inside this bench's own timing (a fixed number of seconds
could be lost when a loaded machine takes seconds to start any Python). Run with
`python bench/startup.py [--quick]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from verdict import Verdicts, add_common_options

RUNS = 15
PENDING = 100


def belt_command(*args: str) -> list[str]:
    """The installed `belt` console script beside this interpreter, else `python -m belt`."""
    script = Path(sys.executable).parent / "belt"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "belt", *args]


def wall_time(command: list[str], env: dict[str, str], handicap: float = 0.0) -> float:
    """Seconds one run of ``command`` takes, start to exit (and ``handicap`` times that more)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    time.sleep(handicap * (time.perf_counter() - start))
    return time.perf_counter() - start


def fill(home: Path, count: int, run_id: str) -> list[str]:
    """``count`` pending gates on one run in the store of ``home``; their ids."""
    from belt.records.interrupts import create_interrupt
    from belt.store import Store

    store = Store(home / "store", fsync=False)
    return [
        create_interrupt(
            store=store, run_id=run_id, chat_id="ch_bench", event="agent.tool_call", timeout=86400
        )["id"]
        for _ in range(count)
    ]


def write_scenario(path: Path) -> Path:
    """One small test scenario: a turn with a tool call and its answer, expected to complete."""
    call = {"name": "read_file", "arguments": {"path": "/tmp/a"}, "result": "hello"}
    turn = {"user": "go", "model": [{"say": "reading", "tool_calls": [call]}, {"say": "done"}]}
    expect = [{"tool": "read_file", "status": "completed"}]
    path.write_text(json.dumps({"agent": {"name": "startup"}, "turns": [turn], "expect": expect}))
    return path


def main() -> None:
    """Time each command RUNS times against the floor; print medians, ratios and verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=None, help="runs of each; default 15 (quick: 5)"
    )
    add_common_options(parser)
    args = parser.parse_args()
    runs = args.runs or (5 if args.quick else RUNS)
    base = Path(tempfile.mkdtemp(prefix="belt-bench-startup-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(NO_COLOR="1")
    try:
        inbox, resolving = base / "inbox", base / "resolve"
        fill(inbox, PENDING, "run_inbox")
        targets: Iterator[str] = iter(fill(resolving, runs + 1, "run_resolve"))

        scenario = write_scenario(base / "scenario.json")
        commands: dict[str, tuple[Callable[[], list[str]], Path | None, float | None]] = {
            "belt version": (lambda: belt_command("version"), None, 1.3),
            f"belt interrupt list ({PENDING} pending)": (
                lambda: belt_command("interrupt", "list"),
                inbox,
                1.5,
            ),
            "belt interrupt resolve": (
                lambda: belt_command("interrupt", "resolve", next(targets), "allow"),
                resolving,
                1.5,
            ),
            "belt test (one scenario)": (
                lambda: belt_command("test", str(scenario)),
                base / "test",
                None,
            ),
            "belt sim run (one scenario)": (
                lambda: belt_command("sim", "run", str(scenario)),
                base / "sim",
                None,
            ),
        }
        if args.quick:
            commands = {name: made for name, made in commands.items() if made[2] is not None}
        floor = [sys.executable, "-c", "import typer"]

        def run(name: str) -> float:
            make, home, _ = commands[name]
            run_env = env if home is None else {**env, "BELT_HOME": str(home)}
            return wall_time(make(), run_env, args.handicap)

        for name in commands:  # warm the bytecode and file caches
            run(name)
        wall_time(floor, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        floor_times: list[float] = []
        for _ in range(runs):
            for name in commands:
                times[name].append(run(name))
                floor_times.append(wall_time(floor, env))
        floor_median = statistics.median(floor_times)
        width = max(len(name) for name in commands)
        floor_name = "python -c 'import typer'"
        print(f"{floor_name:<{width}}  median {floor_median * 1000:6.1f} ms")
        verdicts = Verdicts("startup")
        for name, measured in times.items():
            median = statistics.median(measured)
            ratio = median / floor_median
            print(f"{name:<{width}}  median {median * 1000:6.1f} ms  ratio {ratio:.2f}")
            target = commands[name][2]
            if target is not None:
                verdicts.check(f"{name} / import typer (wall)", figure=ratio, target=target)
        print(f"(median of {runs} runs each, interleaved)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    verdicts.report()


if __name__ == "__main__":
    main()
