"""A simulation killed at any moment goes on from its last durable point, and no tool runs twice.

Real `belt sim run` and `belt sim resume` processes are killed with SIGKILL at seeded random
moments while their hooks answer, then resumed, until the simulation has finished.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.cli.runner import belt
from tests.hookapp import hook_app

KILLS = 6


def scenario(tmp_path: Path, url: str) -> Path:
    def call(i: int) -> dict[str, Any]:
        return {"name": "write_file", "arguments": {"n": i}, "result": f"wrote {i}"}

    turns = [
        {
            "user": f"task {t}",
            "model": [
                {"say": "first", "tool_calls": [call(3 * t), call(3 * t + 1)]},
                {"say": "second", "tool_calls": [call(3 * t + 2)]},
                {"say": f"done {t}"},
            ],
        }
        for t in range(3)
    ]
    hooks = [
        {"event": event, "type": "webhook", "handler": f"{url}/{event}"}
        for event in ("agent.turn_start", "agent.tool_call", "agent.turn_complete")
    ]
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"agent": {"name": "killed", "hooks": hooks}, "turns": turns}))
    return path


def runs() -> list[dict[str, Any]]:
    listed = belt("sim", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    rows: list[dict[str, Any]] = listed.json()
    return rows


def test_killed_again_and_again_a_simulation_finishes_with_every_tool_run_once(
    tmp_path: Path, belt_home: Path
) -> None:
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    chance = random.Random(20261130)
    kills = 0
    with hook_app(**{"agent.tool_call": 0.05, "agent.turn_start": 0.03}) as app:
        command = [sys.executable, "-m", "belt", "sim", "run", str(scenario(tmp_path, app.url))]
        for _ in range(60):
            proc = subprocess.Popen(
                command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
            if kills < KILLS:
                # Somewhere in the run: after a few more hook deliveries, and a little more.
                target = len(app.received) + chance.randint(1, 4)
                deadline = time.monotonic() + 30
                while len(app.received) < target and time.monotonic() < deadline:
                    time.sleep(0.005)
                time.sleep(chance.uniform(0, 0.12))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    kills += 1
            _, stderr = proc.communicate(timeout=60)
            assert proc.returncode in (0, -signal.SIGKILL), stderr
            rows = runs()
            if len(rows) == 3 and all(r["state"] == "completed" for r in rows):
                break
            (unfinished,) = [r for r in rows if r["state"] != "completed"]
            assert unfinished.get("interrupted"), unfinished
            command = [sys.executable, "-m", "belt", "sim", "resume", unfinished["id"]]
    assert kills == KILLS
    rows = runs()
    assert [r["state"] for r in rows] == ["completed"] * 3

    report = belt("sim", "show", rows[0]["id"], "--json").json()
    messages = report["chat"]["chat_messages"]
    assert [m["order"] for m in messages] == list(range(len(messages)))
    answers = Counter(
        (m["agent_run_id"], m["sim"]["model_index"]) for m in messages if m["role"] == "assistant"
    )
    assert set(answers.values()) == {1}, answers  # no model turn written twice
    invocations = [
        i for m in messages if m["role"] == "assistant" for i in m.get("tool_invocations") or []
    ]
    assert len(invocations) == 9
    assert {i["status"] for i in invocations} == {"completed"}
    results = Counter(m["tool_call_id"] for m in messages if m["role"] == "tool")
    assert sorted(results) == sorted(i["tool_invocation_id"] for i in invocations)
    assert set(results.values()) == {1}  # every tool ran exactly once
    assert [m["content"][0]["text"] for m in messages if m["role"] == "user"] == [
        "task 0",
        "task 1",
        "task 2",
    ]
