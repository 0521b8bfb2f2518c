"""Cost of the test layer: `belt test` of N small scenarios against the floor that matters to
its users, a hand-written pytest file making the same handler calls with the same payloads.

Writes N small test scenarios (one user turn, a tool call and a closing answer, a sync hook on
agent.tool_call that denies the calls of odd-numbered scenarios, and three expectations), twice:

- ``py:``: the hook is ``serving.guard`` (``py:bench/serving.py:guard``), which belt calls in its
  worker processes; the floor, ``pytest`` of a file of N tests, each calling ``guard`` with the
  payload it got in a recorded `belt test` run (``serving.recorded``) and checking its decision;
- webhook: the hook is this bench's plain handler (``serving.start_handler``, its own process,
  port 0, the same decisions); the floor, ``pytest`` of a file of N tests, each POSTing the same
  payload to the same handler with one httpx client and checking its decision.

The floors run as a user's bare pytest does: ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` (no plugin
installed beside it is loaded) and ``-p no:cacheprovider`` (nothing written), which is all they
need. Whole processes against whole processes, in paired rounds (belt, floor, belt, floor, …),
the ratio of wall-clock times taken within each round; its median is the verdict:

- ``belt test -j 1`` of the ``py:`` scenarios against their floor: at most 3;
- ``belt test -j 1`` of the webhook scenarios against theirs: at most 1.5;
- with ``--parallel-scenarios M`` (default 1000; none with ``--quick``), ``-j 2`` against
  ``-j 1`` on M ``py:`` scenarios: at least 1.7 on two free cores. Wall-clock time on a loaded
  machine measures the share of the cores each run got more than the run, so the verdict takes
  the speed-up from CPU seconds: what ``-j 2`` would take on two free cores if its start-up
  (``belt test`` of one scenario, S) ran alone and its workers shared the rest evenly,
  S + (C2 - S) / 2, against C1 (C1 and C2 the CPU seconds of ``-j 1`` and ``-j 2``); the
  wall-clock speed-up is printed beside it;
- with ``--baseline DIR`` (a checkout of another belt commit: ``git worktree add DIR COMMIT``),
  ``belt test -j 1`` of the ``py:`` scenarios as installed here against the same with DIR first
  on ``PYTHONPATH``, both as ``python -m belt``: at most 1.1.

``--webhook`` measures the webhook scenarios only. ``--handicap S`` makes each call of belt's
hooks take as long as burning S CPU seconds would (``serving.napping``, and the handler under
``/nap/S/``: the verdicts are wall-clock ratios, so the hooks sleep most of it, which slows belt
alike without taking a core); the floors call the plain ones. The temporary directories live
beside the repository. The tests run it with a few scenarios (``--scenarios 2 --rounds 3``).

    .venv/bin/python bench/testsuite.py [--scenarios 120] [--parallel-scenarios 1000]
        [--rounds 5] [--webhook] [--baseline DIR] [--quick] [--handicap S]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from serving import HANDICAP, RECORD, handler, start_handler
from verdict import Verdicts, add_common_options

HERE = Path(__file__).resolve()


def write_scenarios(directory: Path, count: int, handler: str) -> None:
    directory.mkdir(parents=True)
    for number in range(count):
        denied = number % 2 == 1
        doc = {
            "agent": {
                "name": f"bench-{number}",
                "hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": handler}],
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
        (directory / f"scenario_{number:04d}.json").write_text(json.dumps(doc))


PY_FLOOR = '''"""The floor: each scenario's handler call, made by hand with its payload."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, {bench!r})
from serving import guard  # noqa: E402

PAYLOADS = [json.loads(line) for line in Path(__file__).with_name("payloads.jsonl").open()]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: str(p["data"]["arguments"]["n"]))
def test_guard(payload):
    answer = guard(payload)
    denied = payload["data"]["arguments"]["n"] % 2 == 1
    assert (answer or {{}}).get("decision", "allow") == ("deny" if denied else "allow")
'''

WEBHOOK_FLOOR = '''"""The floor: each scenario's webhook call, POSTed by hand with its payload."""

import json
from pathlib import Path

import httpx
import pytest

URL = {url!r}
PAYLOADS = [json.loads(line) for line in Path(__file__).with_name("payloads.jsonl").open()]


@pytest.fixture(scope="module")
def client():
    with httpx.Client() as client:
        yield client


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: str(p["data"]["arguments"]["n"]))
def test_guard(client, payload):
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    reply = client.post(URL, content=body, headers={{"content-type": "application/json"}})
    assert reply.status_code == 200
    denied = payload["data"]["arguments"]["n"] % 2 == 1
    assert reply.json().get("decision", "allow") == ("deny" if denied else "allow")
'''


def write_floor(directory: Path, payloads: Path, source: str) -> None:
    """A pytest project of its own (not belt's) at ``directory``, over the recorded payloads."""
    directory.mkdir()
    (directory / "payloads.jsonl").write_bytes(payloads.read_bytes())
    (directory / "test_floor.py").write_text(source)
    (directory / "pytest.ini").write_text("[pytest]\n")


def record_payloads(suite: Path, record: Path, env: dict[str, str]) -> None:
    """Record every handler call's payload with one `belt test` run of the ``py:`` scenarios."""
    code = subprocess.run(
        [*belt("test", str(suite)), "-j", "1"],
        env={**env, RECORD: str(record)},
        stdout=subprocess.DEVNULL,
    ).returncode
    if code != 0:
        sys.exit(f"belt test failed (exit {code})")


def belt(*args: str) -> list[str]:
    """The installed `belt` console script beside this interpreter, else `python -m belt`."""
    script = Path(sys.executable).parent / "belt"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "belt", *args]


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


def ratios(times: dict[str, list[float]], mine: str, theirs: str) -> list[float]:
    """``mine`` over ``theirs`` within each round."""
    return [a / b for a, b in zip(times[mine], times[theirs], strict=True)]


def spread(values: list[float]) -> str:
    """The median of ``values`` and their range."""
    return f"{statistics.median(values):.2f} (rounds: {min(values):.2f} to {max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, help="default 120 (quick: 20)")
    parser.add_argument(
        "--parallel-scenarios",
        type=int,
        help="the larger suite for -j 2 against -j 1 (0: none); default 1000 (quick: 0)",
    )
    parser.add_argument("--rounds", type=int, help="paired rounds of each; default 5 (quick: 2)")
    parser.add_argument("--webhook", action="store_true", help="the webhook scenarios only")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of another belt commit: -j 1 of this one against -j 1 of that one",
    )
    add_common_options(parser)
    args = parser.parse_args()
    args.scenarios = args.scenarios or (20 if args.quick else 120)
    args.rounds = args.rounds or (2 if args.quick else 5)
    if args.parallel_scenarios is None:
        args.parallel_scenarios = 0 if args.quick else 1000
    large = 0 if args.webhook else args.parallel_scenarios
    count = args.scenarios
    verdicts = Verdicts("testsuite")
    server = start_handler()
    # Beside the repository, as a user's data directory would be; the system temporary
    # directory can be far slower at creating files on some machines.
    with server, tempfile.TemporaryDirectory(prefix=".bench-", dir=HERE.parent) as tmp:
        home = Path(tmp)
        os.environ["BELT_HOME"] = str(home / "state")
        os.environ["TMPDIR"] = str(home / "tmp")
        (home / "tmp").mkdir()
        # With bytecode caching on, as an installed belt and pytest run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["NO_COLOR"] = "1"
        env[HANDICAP] = str(args.handicap)
        bare = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        py_handler = handler("napping" if args.handicap else "guard")
        write_scenarios(home / "record", count, handler("recorded"))
        record_payloads(home / "record", home / "payloads.jsonl", env)
        commands: dict[str, tuple[list[str], dict[str, str]]] = {}
        if not args.webhook:
            write_scenarios(home / "py", count, py_handler)
            write_floor(
                home / "py-floor", home / "payloads.jsonl", PY_FLOOR.format(bench=str(HERE.parent))
            )
            commands["py: belt"] = ([*belt("test", "py"), "-j", "1"], env)
            commands["py: floor"] = ([*pytest, "py-floor"], bare)
        write_scenarios(home / "webhook", count, server.hook_url(args.handicap, "nap"))
        floor_source = WEBHOOK_FLOOR.format(url=server.hook_url())
        write_floor(home / "webhook-floor", home / "payloads.jsonl", floor_source)
        commands["webhook: belt"] = ([*belt("test", "webhook"), "-j", "1"], env)
        commands["webhook: floor"] = ([*pytest, "webhook-floor"], bare)
        if large:
            write_scenarios(home / "large", large, py_handler)
            commands["-j 1, large"] = ([*belt("test", "large"), "-j", "1"], env)
            commands["-j 2, large"] = ([*belt("test", "large"), "-j", "2"], env)
            first = str(home / "large" / "scenario_0000.json")
            commands["one scenario"] = ([*belt("test", first), "-j", "1"], env)
        if args.baseline:
            suite = "webhook" if args.webhook else "py"
            module = [sys.executable, "-m", "belt", "test", suite, "-j", "1"]
            commands["-j 1, python -m"] = (module, env)
            commands["-j 1, baseline"] = (
                module,
                {**env, "PYTHONPATH": str(args.baseline.resolve())},
            )
        # Warm up (bytecode, disk caches); with --quick, only the floors: belt's code was just
        # run by the recording.
        for name, (command, command_env) in commands.items():
            if "floor" in name or not args.quick:
                measured(command, command_env, home)
        load = os.getloadavg()[0]
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (command, command_env) in commands.items():
                wall, cpu = measured(command, command_env, home)
                times[name].append(wall)
                cpus[name].append(cpu)
        load = max(load, os.getloadavg()[0])
    took = {name: statistics.median(values) for name, values in times.items()}
    spent = {name: statistics.median(values) for name, values in cpus.items()}
    print(f"scenarios: {count}, {args.rounds} paired rounds; medians of whole processes")
    print(f"machine: {cores()} cores, load average up to {load:.1f}")
    print("floors: pytest with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p no:cacheprovider")
    targets = {"py:": 3.0, "webhook:": 1.5}
    for kind, target in targets.items():
        if f"{kind} belt" not in times:
            continue
        mine, theirs = f"{kind} belt", f"{kind} floor"
        print(f"{kind[:-1]} scenarios:")
        print(f"  belt test -j 1:   {took[mine]:.2f} s, {spent[mine]:.2f} CPU s")
        print(f"  pytest floor:     {took[theirs]:.2f} s, {spent[theirs]:.2f} CPU s")
        within = ratios(times, mine, theirs)
        print(f"  ratio, wall:      {spread(within)}  (target <= {target:g})")
        print(f"  ratio, CPU:       {spread(ratios(cpus, mine, theirs))}")
        verdicts.check(
            f"belt test -j 1 / pytest, {kind[:-1]} scenarios, wall",
            figure=statistics.median(within),
            target=target,
        )
    if large:
        start = spent["one scenario"]
        one, two = spent["-j 1, large"], spent["-j 2, large"]
        estimate = one / (start + max(0.0, two - start) / 2)
        print(f"at {large} scenarios (py:):")
        print(f"  belt test -j 1:   {took['-j 1, large']:.2f} s, {one:.2f} CPU s")
        print(f"  belt test -j 2:   {took['-j 2, large']:.2f} s, {two:.2f} CPU s")
        print(f"  one scenario:     {took['one scenario']:.2f} s, {start:.2f} CPU s (the start-up)")
        print(f"  speed-up, wall:   {spread(ratios(times, '-j 1, large', '-j 2, large'))}")
        print(f"  speed-up from CPU seconds on 2 free cores: {estimate:.2f}  (target >= 1.7)")
        verdicts.check(
            f"belt test -j 2 speed-up at {large}, from CPU seconds",
            figure=estimate,
            target=1.7,
            higher_is_better=True,
        )
    if args.baseline:
        within = ratios(times, "-j 1, python -m", "-j 1, baseline")
        print(f"against {args.baseline} (-j 1, python -m belt):")
        here, there = took["-j 1, python -m"], took["-j 1, baseline"]
        print(f"  this commit {here:.2f} s, the baseline {there:.2f} s")
        print(f"  ratio, wall:      {spread(within)}  (target <= 1.1)")
        verdicts.check(
            "belt test -j 1, this / baseline, wall", figure=statistics.median(within), target=1.1
        )
    verdicts.report()


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
