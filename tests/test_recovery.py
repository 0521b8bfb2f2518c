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

import pytest

from belt.records import leases
from belt.records.runs import RUN
from belt.store import open_store
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
            unfinished = [r for r in rows if r["state"] != "completed"]
            if unfinished:
                [run] = unfinished
                assert run.get("interrupted"), run
            else:  # killed between two runs: the simulation goes on from its last run
                run = rows[-1]
                shown = belt("sim", "show", run["id"], "--json").json()
                assert shown["simulation"]["resume_run"] == run["id"], shown["simulation"]
            command = [sys.executable, "-m", "belt", "sim", "resume", run["id"]]
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


def killed_between_runs(tmp_path: Path, belt_home: Path, point: str) -> str:
    """A three-turn simulation killed at ``point`` after its first run (tests/killed_sim.py);
    returns the first run's id."""
    path = tmp_path / "three.json"
    turns = [{"user": f"task {t}", "model": [{"say": f"done {t}"}]} for t in range(3)]
    path.write_text(json.dumps({"turns": turns}))
    env = {**os.environ, "BELT_HOME": str(belt_home)}
    command = [sys.executable, "-m", "tests.killed_sim", str(path), point]
    killed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    return str(runs()[0]["id"])


def finished_once(first_run: str) -> None:
    """The simulation finished with each turn run once, in order."""
    rows = runs()
    assert [(r["turn_index"], r["state"]) for r in rows] == [
        (0, "completed"),
        (1, "completed"),
        (2, "completed"),
    ]
    report = belt("sim", "show", first_run, "--json").json()
    assert report["simulation"]["status"] == "finished"
    assert "interrupted" not in report["simulation"]
    messages = report["chat"]["chat_messages"]
    assert [(m["role"], m["content"][0]["text"]) for m in messages] == [
        (role, f"{text} {t}")
        for t in range(3)
        for role, text in (("user", "task"), ("assistant", "done"))
    ]
    assert [m["order"] for m in messages] == list(range(6))


@pytest.mark.parametrize("point", ["between", "listed"])
def test_a_simulation_killed_between_runs_goes_on_with_the_turns_left(
    tmp_path: Path, belt_home: Path, point: str
) -> None:
    # "listed": its next run was listed but never written, which counts as not begun.
    first = killed_between_runs(tmp_path, belt_home, point)
    shown = belt("sim", "show", first)
    assert "the simulation was interrupted between runs" in shown.stdout
    assert f"belt sim resume {first}" in shown.stdout
    simulation = belt("sim", "show", first, "--json").json()["simulation"]
    assert simulation["interrupted"] is True
    assert simulation["turns_left"] == 2
    assert simulation["resume_run"] == first
    [row] = runs()
    assert row["simulation_interrupted"] is True
    assert "completed (simulation interrupted)" in belt("sim", "list").stdout
    resumed = belt("sim", "resume", first)
    assert resumed.exit_code == 0, resumed.stderr
    finished_once(first)
    # Finished, it is a completed run like any other.
    assert belt("sim", "resume", first).exit_code == 4


@pytest.mark.parametrize("point", ["begun", "input", "unlisted"])
def test_a_run_begun_when_its_process_died_is_taken_over_and_counted_once(
    tmp_path: Path, belt_home: Path, point: str
) -> None:
    first = killed_between_runs(tmp_path, belt_home, point)
    [_, second] = runs()
    assert second["interrupted"] is True
    assert "working (interrupted)" in belt("sim", "list").stdout
    resumed = belt("sim", "resume", second["id"])
    assert resumed.exit_code == 0, resumed.stderr
    finished_once(first)


def test_a_stranded_simulation_held_by_a_live_process_is_not_taken(
    tmp_path: Path, belt_home: Path
) -> None:
    first = killed_between_runs(tmp_path, belt_home, "between")
    holder = subprocess.Popen(["sleep", "60"])
    try:
        lease = {
            "pid": holder.pid,
            "host": leases.host(),
            "started": leases.process_start(holder.pid),
            "at": "2026-11-30T00:00:00.000Z",
            "renewed": "2026-11-30T00:00:00.000Z",
        }
        open_store().merge(RUN, first, {"lease": lease})
        assert "interrupted" not in belt("sim", "show", first, "--json").json()["simulation"]
        refused = belt("sim", "resume", first)
    finally:
        holder.kill()
        holder.wait()
    assert refused.exit_code == 4
    assert f"process {holder.pid}" in refused.stderr
    assert belt("sim", "resume", first).exit_code == 0
    finished_once(first)


@pytest.mark.parametrize("point", ["between", "input"])
def test_a_nexus_simulation_killed_between_or_at_the_start_of_a_run_goes_on(
    tmp_path: Path, belt_home: Path, point: str
) -> None:
    path = tmp_path / "nexus.json"
    call = {"name": "read_file", "arguments": {}, "result": "read"}
    turns = [
        {"user": f"task {t}", "model": [{"say": "", "tool_calls": [call]}, {"say": f"done {t}"}]}
        for t in range(3)
    ]
    path.write_text(json.dumps({"dialect": "nexus", "turns": turns}))
    env = {**os.environ, "BELT_HOME": str(belt_home)}
    command = [sys.executable, "-m", "tests.killed_sim", str(path), point]
    killed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    rows = runs()
    resumed = belt("sim", "resume", rows[-1]["id"])
    assert resumed.exit_code == 0, resumed.stderr
    rows = runs()
    assert [(r["turn_index"], r["state"]) for r in rows] == [(t, "completed") for t in range(3)]
    messages = belt("sim", "show", rows[0]["id"], "--json").json()["chat"]["chat_messages"]
    users = [m["content"][0]["text"] for m in messages if m["role"] == "user"]
    assert users == ["task 0", "task 1", "task 2"]
    assert [m["order"] for m in messages] == list(range(len(messages)))


def test_a_simulation_killed_once_its_injection_is_written_resumes_with_the_same_injections(
    tmp_path: Path, belt_home: Path
) -> None:
    path = tmp_path / "reminded.json"
    turns = [{"user": f"task {t}", "model": [{"say": f"done {t}"}]} for t in range(3)]
    hook = {"event": "agent.turn_start", "type": "webhook", "handler": "py:tests.pyhooks:remind"}
    path.write_text(json.dumps({"agent": {"name": "reminded", "hooks": [hook]}, "turns": turns}))
    env = {**os.environ, "BELT_HOME": str(belt_home)}
    command = [sys.executable, "-m", "tests.killed_sim", str(path), "injected"]
    killed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [first, second] = runs()
    assert second["interrupted"] is True
    # Killed, the chat shows the turn's injection as it was written, in the context.
    shown = belt("sim", "show", first["id"], "--json").json()["chat"]["chat_messages"]
    assert [m["role"] for m in shown][-3:] == ["user", "event", "injection"]
    assert shown[-1]["sim"]["active"] is True
    resumed = belt("sim", "resume", second["id"])
    assert resumed.exit_code == 0, resumed.stderr
    messages = belt("sim", "show", first["id"], "--json").json()["chat"]["chat_messages"]
    assert [m["order"] for m in messages] == list(range(len(messages)))
    injections = [m for m in messages if m["role"] == "injection"]
    answers = [m for m in messages if m["role"] == "assistant"]
    # The step taken again delivered the hook again: its injection replaced the one written
    # before the kill, and each model turn saw exactly one reminder.
    assert [m["sim"]["ended"] for m in injections] == ["ttl", "replaced", "ttl", "ttl"]
    assert [m["sim"]["injections"] for m in answers] == [
        [injections[0]["id"]],
        [injections[2]["id"]],
        [injections[3]["id"]],
    ]
    rows = [messages[m["order"] - 1] for m in injections]
    assert all(r["content"][0]["event"]["hook"]["injected"] for r in rows)
