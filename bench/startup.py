"""Start-up cost of `belt version`, as a ratio to `python -c "import typer"` in the same run.

Both commands run with this interpreter, interleaved, so machine load and disk caches weigh on
both alike. Target: a ratio of at most 1.3. Run with `make bench` or `python bench/startup.py`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 20
TARGET = 1.3


def belt_command() -> list[str]:
    """The installed `belt` console script beside this interpreter, else `python -m belt`."""
    script = Path(sys.executable).parent / "belt"
    if script.exists():
        return [str(script), "version"]
    return [sys.executable, "-m", "belt", "version"]


def wall_time(command: list[str]) -> float:
    """Seconds one run of ``command`` takes, start to exit."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    """Measure both commands RUNS times and print the medians and their ratio."""
    belt = belt_command()
    floor = [sys.executable, "-c", "import typer"]
    for command in (belt, floor):  # warm the bytecode and file caches
        wall_time(command)
    belt_times: list[float] = []
    floor_times: list[float] = []
    for _ in range(RUNS):
        belt_times.append(wall_time(belt))
        floor_times.append(wall_time(floor))
    belt_median = statistics.median(belt_times)
    floor_median = statistics.median(floor_times)
    ratio = belt_median / floor_median
    print(f"belt version              median of {RUNS} runs: {belt_median * 1000:6.1f} ms")
    print(f"python -c 'import typer'  median of {RUNS} runs: {floor_median * 1000:6.1f} ms")
    verdict = "within" if ratio <= TARGET else "ABOVE"
    print(f"ratio: {ratio:.2f} ({verdict} the target of {TARGET})")


if __name__ == "__main__":
    main()
