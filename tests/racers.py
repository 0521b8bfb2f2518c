"""Racing belt processes: each imports belt first, then all start the command together."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence

RACER = """
import runpy
import sys

import belt.cli  # start-up done before the start line, so the racers really overlap

sys.argv = ["belt", *sys.argv[1:]]
print("ready", flush=True)
sys.stdin.readline()
runpy.run_module("belt", run_name="__main__", alter_sys=True)
"""


def race(
    commands: Sequence[Sequence[str]], env: Mapping[str, str], timeout: float = 60
) -> list[tuple[int, str, str]]:
    """Run ``belt COMMAND`` for each command at once; (exit code, stdout, stderr) of each."""
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, *command],
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    for proc in racers:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in racers:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    finished = []
    for proc in racers:
        out, err = proc.communicate(timeout=timeout)
        finished.append((proc.returncode, out, err))
    return finished
