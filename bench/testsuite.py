"""Cost of the test layer: `belt test` on N small test scenarios, against `belt sim run --json`.

Writes N small test scenarios (one user turn, a tool call and a closing answer, an in-process
handler on agent.tool_call that denies every other call, and three expectations), then in the
same process, alternating, measures:

- `belt test DIR`: every scenario in its own fresh store in a temporary directory, its
  expectations checked, one line each;
- `belt sim run --json SCENARIO` for each scenario in turn, in one process, over one store.

Both go through belt's command line in-process, output thrown away; the temporary directories
and the store live beside the repository. Prints the scenarios per second of `belt test` and the
ratio of its time to the `sim run` loop's (target: at most 1.3).

    .venv/bin/python bench/testsuite.py [--scenarios 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HANDLER = f"py:{Path(__file__).resolve()}:guard"


def guard(payload: dict[str, object]) -> dict[str, object] | None:
    """Deny the tool calls of odd-numbered scenarios."""
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


def invoke(*args: str) -> int:
    """Run `belt ARGS` in this process, its output thrown away; its exit code."""
    from belt.cli import app

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        try:
            app([*args], prog_name="belt", standalone_mode=False)
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each kind")
    args = parser.parse_args()
    # Beside the repository, as a user's data directory would be; the system temporary
    # directory can be far slower at creating files on some machines.
    with tempfile.TemporaryDirectory(prefix=".bench-", dir=Path(__file__).parent) as tmp:
        home = Path(tmp)
        os.environ["BELT_HOME"] = str(home / "state")
        os.environ["TMPDIR"] = str(home / "tmp")
        (home / "tmp").mkdir()
        tempfile.tempdir = None  # read TMPDIR again
        suite = home / "suite"
        paths = write_scenarios(suite, args.scenarios)
        # Warm up both paths (imports, the handler's module) before measuring.
        invoke("test", str(paths[0]))
        invoke("sim", "run", "--json", str(paths[0]))
        tests, sims = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            code = invoke("test", str(suite))
            tests.append(time.perf_counter() - started)
            if code != 0:
                sys.exit(f"belt test failed (exit {code})")
            started = time.perf_counter()
            for path in paths:
                invoke("sim", "run", "--json", str(path))
            sims.append(time.perf_counter() - started)
        test = statistics.median(tests)
        sim = statistics.median(sims)
    print(f"scenarios:                  {args.scenarios}, {args.rounds} rounds (medians)")
    print(f"belt test:                  {test:.2f} s, {args.scenarios / test:,.0f} scenarios/s")
    print(f"belt sim run --json, each:  {sim:.2f} s, {args.scenarios / sim:,.0f} scenarios/s")
    print(f"ratio test / sim run:       {test / sim:.2f}  (target <= 1.3)")


if __name__ == "__main__":
    main()
