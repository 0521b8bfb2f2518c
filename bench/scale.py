"""Does a simulated turn cost the same at turn 800 as at turn 200, in memory and on disk? And a
tool call at call 800?

In one process and one run, for each dialect: a scenario of N turns with no hooks, each turn one
user message and one answer, timed at N = 200 and N = 800. The cost per turn at 800 divided by
the cost per turn at 200 says whether a turn's cost grows with the length of the chat
(target: at most 1.2). Then one model turn that calls 800 tools against one that calls 100:
cost per call at 800 over cost per call at 100 (target: at most 1.2).

Each figure is the median of ``--rounds`` alternating rounds, each simulation in a fresh state
directory, measured twice: in memory (``/dev/shm`` where it exists), in CPU time, which says
whether belt's own work grows, and on disk, in wall time (beside the repository, as a user's
data directory is, or ``--dir DIR``), where the operating system's write-back of the files a
long simulation leaves dirty weighs too. The growth targets hold in both. A turn on disk costs
several times a turn in memory (the files reach the disk; 5 to 22 times were seen on a shared
machine): that factor is printed too, without a target.

``--quick`` runs 40 against 160 turns (40 against 320 calls); ``--turns A B`` and ``--calls A B``
set the sizes (the tests run a few turns and calls). The test-only ``--handicap S`` keeps the
process busy S seconds more after every simulation at the large size, inside this bench's own
timing.

    .venv/bin/python bench/scale.py [--quick] [--turns 200 800] [--calls 100 800] [--rounds 3]
        [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verdict import Verdicts, add_common_options

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


def burn(seconds: float) -> None:
    """Keep this process busy for ``seconds`` (the handicap: CPU and wall time alike)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def simulate(doc: dict[str, Any], where: Path, handicap: float = 0.0) -> tuple[float, float]:
    """CPU and wall seconds to run ``doc`` as a scenario in a fresh state directory under
    ``where``."""
    from belt.engine.entrypoints import start_simulation
    from belt.engine.scenario import read_scenario
    from belt.engine.simulation import Options
    from belt.store import open_store

    home = Path(tempfile.mkdtemp(prefix=".bench-scale-", dir=where))
    try:
        os.environ["BELT_HOME"] = str(home)
        path = home / "scenario.json"
        path.write_text(json.dumps(doc))
        loaded = read_scenario(path)
        cpu, wall = time.process_time(), time.perf_counter()
        start_simulation(open_store(), loaded, Options())
        burn(handicap)
        return time.process_time() - cpu, time.perf_counter() - wall
    finally:
        shutil.rmtree(home, ignore_errors=True)


def per_unit(
    make: Callable[[int], dict[str, Any]],
    sizes: tuple[int, int],
    rounds: int,
    where: Path,
    handicap: float,
) -> dict[str, tuple[float, float]]:
    """Median CPU and wall cost per unit at the small and at the large size, in alternating
    rounds: {"cpu": (small, large), "wall": (small, large)}."""
    small, large = sizes
    runs: dict[str, list[tuple[float, float]]] = {"small": [], "large": []}
    for _ in range(rounds):
        runs["small"].append(simulate(make(small), where))
        runs["large"].append(simulate(make(large), where, handicap))
    return {
        clock: tuple(  # type: ignore[misc]
            statistics.median(run[index] for run in runs[size]) / count
            for size, count in (("small", small), ("large", large))
        )
        for index, clock in enumerate(("cpu", "wall"))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, nargs=2, metavar=("SMALL", "LARGE"))
    parser.add_argument("--calls", type=int, nargs=2, metavar=("SMALL", "LARGE"))
    parser.add_argument("--dir", type=Path, default=HERE, help="where the on-disk states go")
    add_common_options(parser)
    args = parser.parse_args()
    rounds = args.rounds or 3
    places = {"in memory": default_dir(), "on disk": args.dir.resolve()}
    turn_sizes, call_sizes = ((40, 160), (40, 320)) if args.quick else ((200, 800), (100, 800))
    turn_sizes, call_sizes = tuple(args.turns or turn_sizes), tuple(args.calls or call_sizes)
    rows: list[tuple[str, Callable[[int], dict[str, Any]], tuple[int, int], str]] = [
        ("platform turns", platform_turns, turn_sizes, "turn"),
        ("nexus turns", nexus_turns, turn_sizes, "turn"),
        ("tool calls", tool_calls, call_sizes, "call"),
    ]
    for place, where in places.items():
        print(f"{place}: state directories under {where}")
    simulate(platform_turns(min(20, turn_sizes[0])), places["in memory"])  # warm imports and caches
    verdicts = Verdicts("scale")
    short_turn: dict[str, float] = {}
    for place, where in places.items():
        clock = "cpu" if place == "in memory" else "wall"
        for label, make, sizes, unit in rows:
            costs = per_unit(make, sizes, rounds, where, args.handicap)
            a, b = costs[clock]
            if label == "platform turns":
                short_turn[place] = costs["wall"][0]
            print(
                f"{place:9} {label:15} {a * 1000:7.2f} ms/{unit} at {sizes[0]}, "
                f"{b * 1000:7.2f} ms/{unit} at {sizes[1]} ({clock}): ratio {b / a:.2f}"
            )
            verdicts.check(
                f"{label} {place}, per {unit} at {sizes[1]} / at {sizes[0]} ({clock})",
                figure=b / a,
                target=TARGET,
            )
    disk = short_turn["on disk"] / short_turn["in memory"]
    print(
        f"a turn on disk costs {disk:.1f} times a turn in memory (platform, {turn_sizes[0]} "
        "turns, wall time; no target)"
    )
    verdicts.report()


if __name__ == "__main__":
    main()
