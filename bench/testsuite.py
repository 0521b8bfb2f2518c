"""Cost of the test layer: `belt test` of N small scenarios against the floor that matters to
its users, hand-written pytest tests making the same handler calls with the same payloads.

Writes N small test scenarios (one user turn, a tool call and a closing answer, an in-process
`py:` handler on agent.tool_call that denies the calls of odd-numbered scenarios, and three
expectations). One `belt test` run records the payload each handler call received; from them it
writes the floor: a pytest file of N tests, each calling the same handler with the same payload
and checking its decision. Then, alternating rounds so that machine load weighs on all alike,
whole processes against whole processes:

- `belt test -j 1 DIR` against `python -m pytest FLOOR` (target: at most 3x), pytest with the
  plugins installed beside it and without any (`PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`), and the cost
  per scenario at the margin (the suite against its first half);
- `belt test -j 2 DIR` against `belt test -j 1 DIR` (target: -j 2 at least 1.7x faster, on a
  machine with 2 free cores), on the N scenarios and on a larger suite of M (the size a team's
  suite grows to; default 1000), beside `belt test` of one scenario: the serial start-up
  (interpreter, imports, first use) that no worker can share, which bounds the speed-up on two
  cores at T / (S + (T - S) / 2) for a `-j 1` run of T seconds and a start-up of S (printed as
  the bound), so that on a sub-second suite start-up, not the workers, sets the figure; and,
  as wall-clock time on a loaded machine measures the share of the cores each run got more
  than the run itself, the same speed-up from CPU seconds: what -j 2 would take on 2 free
  cores if its start-up ran alone and its workers shared the rest evenly, S + (C2 - S) / 2,
  against C1 (C1 and C2 the CPU seconds of -j 1 and -j 2, S of one scenario);
- in one process, `belt test DIR` against `belt sim run --json` of each scenario over one store
  (the cost of the test layer itself: at most 1.3; skipped with --no-sim);
- with `--baseline DIR` (a checkout of another commit of belt, such as the one before
  supervised workers: `git worktree add DIR COMMIT`), `belt test -j 1` of the N scenarios as
  installed here against the same command with DIR first on `PYTHONPATH`, both run as
  `python -m belt` (target for supervised workers against the in-process `-j 1` before them:
  at most 1.1).

The temporary directories live beside the repository. Prints medians and ratios.

    .venv/bin/python bench/testsuite.py [--scenarios 120] [--parallel-scenarios 1000]
        [--rounds 5] [--no-sim] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HANDLER = f"py:{Path(__file__).resolve()}:guard"
RECORD = "BENCH_TESTSUITE_RECORD"
"""When set, the file to which `guard` appends each payload it is called with."""


def guard(payload: dict[str, object]) -> dict[str, object] | None:
    """Deny the tool calls of odd-numbered scenarios."""
    record = os.environ.get(RECORD)
    if record:
        with open(record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(payload) + "\n")
    data = payload.get("data")
    arguments = data.get("arguments") if isinstance(data, dict) else None
    number = arguments.get("n") if isinstance(arguments, dict) else 0
    if isinstance(number, int) and number % 2:
        return {"decision": "deny", "reason": "odd"}
    return None


def write_scenarios(directory: Path, count: int) -> list[Path]:
    directory.mkdir(parents=True)
    paths = []
    for number in range(count):
        denied = number % 2 == 1
        doc = {
            "agent": {
                "name": f"bench-{number}",
                "hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": HANDLER}],
            },
            "turns": [
                {
                    "user": f"task {number}",
                    "model": [
                        {
                            "say": "working",
                            "tool_calls": [
                                {"name": "write_file", "arguments": {"n": number}, "result": "ok"}
                            ],
                        },
                        {"say": "done"},
                    ],
                }
            ],
            "expect": [
                {"tool": "write_file", "status": "failed" if denied else "completed"},
                {"event": "agent.turn_start", "fired": 2},
                {"run_state": "completed"},
            ],
        }
        path = directory / f"scenario_{number:04d}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


FLOOR = '''"""The floor: each scenario's handler call, made by hand with the payload it received."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, {bench!r})
from testsuite import guard  # noqa: E402

PAYLOADS = [json.loads(line) for line in Path(__file__).with_name("payloads.jsonl").open()]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: str(p["data"]["arguments"]["n"]))
def test_guard(payload):
    answer = guard(payload)
    denied = payload["data"]["arguments"]["n"] % 2 == 1
    assert (answer or {{}}).get("decision", "allow") == ("deny" if denied else "allow")
'''


def write_floor(directory: Path, suite: Path, env: dict[str, str]) -> None:
    """Record every handler call's payload with one `belt test` run; write the pytest floor."""
    directory.mkdir()
    record = directory / "payloads.jsonl"
    code = subprocess.run(
        [*belt("test", str(suite)), "-j", "1"],
        env={**env, RECORD: str(record)},
        stdout=subprocess.DEVNULL,
    ).returncode
    if code != 0:
        sys.exit(f"belt test failed (exit {code})")
    (directory / "test_floor.py").write_text(FLOOR.format(bench=str(Path(__file__).parent)))
    (directory / "pytest.ini").write_text("[pytest]\n")  # its own project, not belt's


def belt(*args: str) -> list[str]:
    """The installed `belt` console script beside this interpreter, else `python -m belt`."""
    script = Path(sys.executable).parent / "belt"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "belt", *args]


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds one whole process of ``command`` takes, start to exit; it must exit 0."""
    return measured(command, env, cwd)[0]


def measured(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """The wall-clock seconds and the CPU seconds (user and system, its worker processes
    included) of one whole process of ``command``; it must exit 0. CPU time hardly moves with
    the load of other work on the machine; wall-clock time does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    code = subprocess.run(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ).returncode
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        again = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
        tail = (again.stdout + again.stderr)[-4000:]
        sys.exit(
            f"{' '.join(command)} failed (exit {code}; run again: exit {again.returncode})\n{tail}"
        )
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu


def invoke(*args: str) -> int:
    """Run `belt ARGS` in this process, its output thrown away; its exit code."""
    from belt.cli import app

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        try:
            app([*args], prog_name="belt", standalone_mode=False)
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


def in_process(suite: Path, paths: list[Path], rounds: int) -> tuple[float, float]:
    """Medians of `belt test DIR` and of `belt sim run --json` of each scenario, in this
    process."""
    invoke("test", str(paths[0]))
    invoke("sim", "run", "--json", str(paths[0]))
    tests, sims = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        code = invoke("test", str(suite))
        tests.append(time.perf_counter() - started)
        if code != 0:
            sys.exit(f"belt test failed (exit {code})")
        started = time.perf_counter()
        for path in paths:
            invoke("sim", "run", "--json", str(path))
        sims.append(time.perf_counter() - started)
    return statistics.median(tests), statistics.median(sims)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=120)
    parser.add_argument(
        "--parallel-scenarios",
        type=int,
        default=1000,
        help="the larger suite for -j 2 against -j 1 (0: none)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating runs of each kind")
    parser.add_argument("--no-sim", action="store_true", help="skip the in-process comparison")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of another belt commit: -j 1 of this one against -j 1 of that one",
    )
    args = parser.parse_args()
    count, half = args.scenarios, args.scenarios // 2
    # Beside the repository, as a user's data directory would be; the system temporary
    # directory can be far slower at creating files on some machines.
    with tempfile.TemporaryDirectory(prefix=".bench-", dir=Path(__file__).parent) as tmp:
        home = Path(tmp)
        os.environ["BELT_HOME"] = str(home / "state")
        os.environ["TMPDIR"] = str(home / "tmp")
        (home / "tmp").mkdir()
        tempfile.tempdir = None  # read TMPDIR again
        # With bytecode caching on, as an installed belt and pytest run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["NO_COLOR"] = "1"
        bare = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        paths = write_scenarios(home / "suite", count)
        (home / "half").mkdir()
        for path in paths[:half]:
            (home / "half" / path.name).write_bytes(path.read_bytes())
        large = args.parallel_scenarios
        if large:
            write_scenarios(home / "large", large)
        write_floor(home / "floor", home / "suite", env)
        write_floor(home / "floor-half", home / "half", env)

        def pytest(directory: str) -> list[str]:
            return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", directory]

        commands = {
            "floor": (pytest("floor"), env),
            "bare floor": (pytest("floor"), bare),
            "bare floor, half": (pytest("floor-half"), bare),
            "-j 1": ([*belt("test", "suite"), "-j", "1"], env),
            "-j 1, half": ([*belt("test", "half"), "-j", "1"], env),
            "-j 2": ([*belt("test", "suite"), "-j", "2"], env),
            "one scenario": ([*belt("test", str(paths[0])), "-j", "1"], env),
        }
        if large:
            commands["-j 1, large"] = ([*belt("test", "large"), "-j", "1"], env)
            commands["-j 2, large"] = ([*belt("test", "large"), "-j", "2"], env)
        if args.baseline:
            module = [sys.executable, "-m", "belt", "test", "suite", "-j", "1"]
            baseline = {**env, "PYTHONPATH": str(args.baseline.resolve())}
            commands["-j 1, python -m"] = (module, env)
            commands["-j 1, baseline"] = (module, baseline)
        for command, command_env in commands.values():  # warm up (bytecode, disk caches)
            timed(command, command_env, home)
        load = os.getloadavg()[0]
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (command, command_env) in commands.items():
                wall, cpu = measured(command, command_env, home)
                times[name].append(wall)
                cpus[name].append(cpu)
        load = max(load, os.getloadavg()[0])
        sim = None if args.no_sim else in_process(home / "suite", paths, max(1, args.rounds // 2))
    took = {name: statistics.median(values) for name, values in times.items()}
    spent = {name: statistics.median(values) for name, values in cpus.items()}
    one, two = took["-j 1"], took["-j 2"]
    start = took["one scenario"]
    margin = (one - took["-j 1, half"]) / (count - half)
    floor_margin = (took["bare floor"] - took["bare floor, half"]) / (count - half)
    print(f"scenarios:                    {count} ({half} for the margins), {args.rounds} rounds")
    print(f"machine:                      {cores()} cores, load average up to {load:.1f}")
    print(f"pytest floor, whole run:      {took['floor']:.2f} s (its plugins as installed)")
    print(f"pytest floor without plugins: {took['bare floor']:.2f} s")
    print("                              (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1)")
    print(f"belt test -j 1, whole run:    {one:.2f} s, {count / one:,.0f} scenarios/s")
    print(f"belt test -j 2, whole run:    {two:.2f} s, {count / two:,.0f} scenarios/s")
    print(f"ratio -j 1 / pytest floor:    {one / took['floor']:.2f}  (target <= 3)")
    print(f"ratio -j 1 / floor, no plugins: {one / took['bare floor']:.2f}")
    print(
        f"per scenario at the margin:   belt test {margin * 1000:.2f} ms, "
        f"pytest {floor_margin * 1000:.3f} ms"
    )
    print(f"belt test of one scenario:    {start:.2f} s (the serial start-up)")
    print(
        f"speed-up -j 2 over -j 1:      {one / two:.2f}  (target >= 1.7 on 2 free cores); "
        f"{speedups(times, '')}"
    )
    print(f"  bound by the start-up:      {bound(one, start):.2f} on 2 cores")
    if large:
        big, big_two = took["-j 1, large"], took["-j 2, large"]
        print(f"at {large} scenarios:")
        print(f"  belt test -j 1, whole run:  {big:.2f} s, {large / big:,.0f} scenarios/s")
        print(f"  belt test -j 2, whole run:  {big_two:.2f} s, {large / big_two:,.0f} scenarios/s")
        print(
            f"  speed-up -j 2 over -j 1:    {big / big_two:.2f}  (target >= 1.7 on 2 free "
            f"cores); {speedups(times, ', large')}"
        )
        print(f"  bound by the start-up:      {bound(big, start):.2f} on 2 cores")
    print("CPU seconds (user + system, workers included), medians:")
    print(
        f"  pytest floor {spent['floor']:.2f}, without plugins {spent['bare floor']:.2f}; "
        f"belt test -j 1 {spent['-j 1']:.2f}, -j 2 {spent['-j 2']:.2f}; "
        f"one scenario {spent['one scenario']:.2f}"
    )
    if large:
        print(
            f"  at {large} scenarios: belt test -j 1 {spent['-j 1, large']:.2f}, "
            f"-j 2 {spent['-j 2, large']:.2f}"
        )
    print(
        f"  ratio -j 1 / pytest floor {spent['-j 1'] / spent['floor']:.2f}, "
        f"/ floor without plugins {spent['-j 1'] / spent['bare floor']:.2f}; "
        f"-j 2 / -j 1 {spent['-j 2'] / spent['-j 1']:.2f}"
    )
    print(
        f"  per scenario at the margin: belt test "
        f"{(spent['-j 1'] - spent['-j 1, half']) / (count - half) * 1000:.2f} ms, pytest "
        f"{(spent['bare floor'] - spent['bare floor, half']) / (count - half) * 1000:.3f} ms"
    )
    start_cpu = spent["one scenario"]
    estimates = [f"{estimate(spent['-j 1'], spent['-j 2'], start_cpu):.2f} at {count}"]
    if large:
        estimate_large = estimate(spent["-j 1, large"], spent["-j 2, large"], start_cpu)
        estimates.append(f"{estimate_large:.2f} at {large}")
    print(f"  speed-up -j 2 over -j 1 from them, on 2 free cores: {', '.join(estimates)}")
    if args.baseline:
        here, there = took["-j 1, python -m"], took["-j 1, baseline"]
        ratios = [
            mine / theirs
            for mine, theirs in zip(times["-j 1, python -m"], times["-j 1, baseline"], strict=True)
        ]
        print(f"against {args.baseline} (-j 1, python -m belt, {count} scenarios):")
        print(f"  this commit {here:.2f} s, the baseline {there:.2f} s")
        print(
            f"  ratio this / baseline:      {here / there:.2f}  (target <= 1.1); within a round: "
            f"best {min(ratios):.2f}, median {statistics.median(ratios):.2f}"
        )
        print(
            f"  CPU seconds: this commit {spent['-j 1, python -m']:.2f}, "
            f"the baseline {spent['-j 1, baseline']:.2f}"
        )
    if sim is not None:
        test, sims = sim
        print(f"in one process: belt test {test:.2f} s, sim run of each {sims:.2f} s")
        print(f"ratio test / sim run:         {test / sims:.2f}  (target <= 1.3)")


def speedups(times: dict[str, list[float]], suffix: str) -> str:
    """The speed-up of -j 2 over -j 1 within each round (the two ran one after the other,
    under much the same load): the best of them and their median."""
    ratios = [
        one / two for one, two in zip(times[f"-j 1{suffix}"], times[f"-j 2{suffix}"], strict=True)
    ]
    return f"within a round: best {max(ratios):.2f}, median {statistics.median(ratios):.2f}"


def bound(serial: float, start: float) -> float:
    """The most -j 2 can gain on 2 cores over a -j 1 run of ``serial`` seconds of which
    ``start`` are start-up that only one process does (Amdahl's law)."""
    return serial / (start + max(0.0, serial - start) / 2)


def estimate(serial: float, parallel: float, start: float) -> float:
    """The speed-up of -j 2 over -j 1 from CPU seconds: -j 1's against the start-up's plus
    half of the rest of -j 2's (both workers busy on their own cores to the end)."""
    return serial / (start + max(0.0, parallel - start) / 2)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
