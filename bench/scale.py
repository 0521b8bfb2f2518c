"""Does a simulated turn cost the same at turn 800 as at turn 200? And a tool call at call 800?

In one process and one run, for each dialect: a scenario of N turns with no hooks, each turn one
user message and one answer, timed at N = 200 and N = 800. The cost per turn at 800 divided by
the cost per turn at 200 says whether a turn's cost grows with the length of the chat
(target: at most 1.2). Then one model turn that calls 800 tools against one that calls 100:
cost per call at 800 over cost per call at 100 (target: at most 1.2).

Each figure is the median of ``--rounds`` alternating rounds, each simulation in a fresh state
directory. By default that directory is in memory (``/dev/shm`` where it exists): the question is
whether belt's own work grows, and on a disk the operating system's write-back of the files a
long simulation leaves dirty makes later file creations slower whatever writes them. ``--dir``
runs it anywhere else (for example ``--dir bench`` beside the repository) to see the disk too.

    .venv/bin/python bench/scale.py [--rounds 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET = 1.2


def turns(count: int) -> list[dict[str, Any]]:
    return [{"user": f"message {i}", "model": [{"say": f"answer {i}"}]} for i in range(count)]


def platform_turns(count: int) -> dict[str, Any]:
    return {"agent": {"name": "scale"}, "turns": turns(count)}


def nexus_turns(count: int) -> dict[str, Any]:
    return {"dialect": "nexus", "agent": {"name": "scale"}, "turns": turns(count)}


def tool_calls(calls: int) -> dict[str, Any]:
    call = {"name": "read_file", "arguments": {"path": "/tmp/a"}, "result": "hello"}
    model = [{"say": "working", "tool_calls": [call] * calls}, {"say": "ok"}]
    return {"agent": {"name": "scale"}, "turns": [{"user": "go", "model": model}]}


def default_dir() -> Path:
    """A memory file system when there is one, else beside the repository."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else HERE


WHERE = default_dir()


def simulate(doc: dict[str, Any]) -> float:
    """Seconds to run ``doc`` as a scenario in a fresh state directory under ``WHERE``."""
    from belt.engine.api import start_simulation
    from belt.engine.scenario import read_scenario
    from belt.engine.simulation import Options
    from belt.store import open_store

    home = Path(tempfile.mkdtemp(prefix=".bench-scale-", dir=WHERE))
    try:
        os.environ["BELT_HOME"] = str(home)
        path = home / "scenario.json"
        path.write_text(json.dumps(doc))
        loaded = read_scenario(path)
        started = time.perf_counter()
        start_simulation(open_store(), loaded, Options())
        return time.perf_counter() - started
    finally:
        shutil.rmtree(home, ignore_errors=True)


def ratio(make: Any, small: int, large: int, rounds: int) -> tuple[float, float, float]:
    """Median cost per unit at ``small`` and ``large``, and their ratio."""
    per_small, per_large = [], []
    for _ in range(rounds):
        per_small.append(simulate(make(small)) / small)
        per_large.append(simulate(make(large)) / large)
    a, b = statistics.median(per_small), statistics.median(per_large)
    return a, b, b / a


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the state directories go")
    args = parser.parse_args()
    global WHERE
    if args.dir is not None:
        WHERE = args.dir.resolve()
    print(f"state directories under {WHERE}")
    simulate(platform_turns(20))  # warm imports and caches
    failed = False
    rows = [
        ("platform turns", platform_turns, 200, 800, "turn"),
        ("nexus turns", nexus_turns, 200, 800, "turn"),
        ("tool calls", tool_calls, 100, 800, "call"),
    ]
    for label, make, small, large, unit in rows:
        a, b, r = ratio(make, small, large, args.rounds)
        verdict = "meets" if r <= TARGET else "MISSES"
        failed = failed or r > TARGET
        print(
            f"{label:15} {a * 1000:7.2f} ms/{unit} at {small}, {b * 1000:7.2f} ms/{unit} at "
            f"{large}: ratio {r:.2f} ({verdict} the target of {TARGET})"
        )
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
