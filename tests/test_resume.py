"""`belt serve --resume` killed at any point of continuing a run leaves it to the next continuer.

A real process (forked from one that has imported belt) takes one pass of `serve --resume` over
the runs held at gates and is SIGKILLed at a chosen point (tests/killed_continuer.py); the next
continuer (a pass in this process, or a `belt serve --resume` app) finds the run and takes it to
its end, and no hook is delivered twice and no tool runs twice.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import resume_settled, run_scenario
from belt.records import leases
from belt.records.interrupts import resolve_interrupt
from belt.records.runs import GATED_RUNS, RUN
from belt.server.app import create_app
from belt.store import Store, open_store
from tests import killed_continuer
from tests.cli.runner import belt
from tests.hookapp import HookApp, hook_app
from tests.servers import running
from tests.waiting import eventually

EVENTS = ("agent.turn_start", "agent.tool_call", "agent.turn_complete", "agent.complete")
POINTS = [
    "leased",
    "working",
    "driving",
    "step-1",
    "step-2",
    "step-3",
    "step-4",
    "ended",
    "begun",
    "finished",
]


def call(n: int) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"n": n}, "result": f"wrote {n}"}


@pytest.fixture
def hooks() -> Iterator[HookApp]:
    with hook_app() as app:
        yield app


def held_run(tmp_path: Path, hooks: HookApp) -> str:
    """A two-turn simulation whose first run holds at the gates of its two tool calls, both
    allowed since; returns that run's id."""
    declared: list[dict[str, Any]] = [
        {"event": event, "type": "webhook", "handler": f"{hooks.url}/{event}"} for event in EVENTS
    ]
    declared.append({"event": "agent.tool_call", "type": "gate"})
    first = {"say": "writing", "tool_calls": [call(1), call(2)]}
    turns = [
        {"user": "clean up", "model": [first, {"say": "ok"}]},
        {"user": "thanks", "model": [{"say": "bye"}]},
    ]
    path = tmp_path / "gated.json"
    path.write_text(json.dumps({"agent": {"name": "gated", "hooks": declared}, "turns": turns}))
    held, (run_id,) = run_scenario(scenario=path)
    assert held["runs"][0]["state"] == "input_required"
    store = open_store()
    for gate in held["chat"]["pending_interrupts"]:
        resolve_interrupt(store=store, interrupt_id=gate["id"], decision="allow")
    return str(run_id)


FORKS = multiprocessing.get_context("forkserver")
FORKS.set_forkserver_preload(["tests.test_resume"])
"""Continuers are forked from one server process that has imported belt, not started anew."""


def continue_in(belt_home: str, point: str) -> None:
    """The continuer of tests/killed_continuer.py, in a process forked for it."""
    os.environ["BELT_HOME"] = belt_home
    killed_continuer.main(point)


def kill_continuer(belt_home: Path, point: str) -> None:
    continuer = FORKS.Process(target=continue_in, args=(str(belt_home), point))
    continuer.start()
    continuer.join(60)
    if continuer.is_alive():  # it hung: ended here rather than left behind by the failed test
        continuer.kill()
        continuer.join()
    assert continuer.exitcode == -signal.SIGKILL, f"the continuer ended with {continuer.exitcode}"


def finished_once(store: Store, run_id: str, hooks: HookApp) -> None:
    """Both runs completed, the simulation finished, every hook delivered once and every tool
    run once, and the tag of held runs is empty again."""
    report = belt("sim", "show", run_id, "--json").json()
    assert [run["state"] for run in report["runs"]] == ["completed", "completed"]
    assert report["simulation"]["status"] == "finished"
    delivered = Counter(
        (payload["event"], payload.get("turn_count"), json.dumps(payload.get("data")))
        for _, payload in hooks.received
    )
    assert set(delivered.values()) == {1}, delivered
    assert sorted(event for event, _, _ in delivered) == sorted(
        ["agent.turn_start"] * 3
        + ["agent.tool_call"] * 2
        + ["agent.turn_complete"] * 3
        + ["agent.complete"] * 2
    )
    messages = report["chat"]["chat_messages"]
    results = Counter(m["tool_call_id"] for m in messages if m["role"] == "tool")
    assert len(results) == 2 and set(results.values()) == {1}, results
    answers = Counter(m["content"][0]["text"] for m in messages if m["role"] == "assistant")
    assert answers == {"writing": 1, "ok": 1, "bye": 1}
    assert [m["order"] for m in messages] == list(range(len(messages)))
    assert resume_settled(store, emulated=False) == []
    assert store.tagged(GATED_RUNS) == []


@pytest.mark.parametrize("point", POINTS)
def test_a_continuer_killed_at_any_point_leaves_the_run_to_the_next(
    tmp_path: Path, belt_home: Path, hooks: HookApp, point: str
) -> None:
    run_id = held_run(tmp_path, hooks)
    kill_continuer(belt_home, point)
    store = open_store()
    tried = resume_settled(store, emulated=False)
    assert [record.get("state") for record in tried] == ["completed"], tried
    finished_once(store, run_id, hooks)


def test_a_killed_continuer_is_followed_by_belt_serve_resume(
    tmp_path: Path, belt_home: Path, hooks: HookApp
) -> None:
    run_id = held_run(tmp_path, hooks)
    kill_continuer(belt_home, "step-1")
    store = open_store()
    assert store.read(RUN, run_id)["state"] == "working"
    with running(create_app(store=store, sweep_interval=0, resume=True)):
        eventually(
            lambda: (
                open_store().read("sim", store.read(RUN, run_id)["sim_id"])["status"] == "finished"
            ),
            "the simulation finished",
        )
    finished_once(store, run_id, hooks)


def test_a_run_another_live_process_continues_keeps_its_tag(tmp_path: Path, hooks: HookApp) -> None:
    run_id = held_run(tmp_path, hooks)
    store = open_store()
    holder = subprocess.Popen(["sleep", "60"])
    try:
        lease = {
            "pid": holder.pid,
            "host": leases.host(),
            "started": leases.process_start(holder.pid),
            "at": "2026-12-01T00:00:00.000Z",
            "renewed": "2026-12-01T00:00:00.000Z",
        }
        store.merge(RUN, run_id, {"state": "working", "lease": lease})
        assert resume_settled(store, emulated=False) == []
        assert store.tagged(GATED_RUNS) == [run_id]  # if that process dies, the run is found
    finally:
        holder.kill()
        holder.wait()
    [record] = resume_settled(store, emulated=False)
    assert (record["run_id"], record["state"]) == (run_id, "completed")
    finished_once(store, run_id, hooks)


def test_a_run_on_an_attention_hold_leaves_the_tag(tmp_path: Path, hooks: HookApp) -> None:
    run_id = held_run(tmp_path, hooks)
    store = open_store()
    store.merge(RUN, run_id, {"state": "attention_hold"})
    assert resume_settled(store, emulated=False) == []
    assert store.tagged(GATED_RUNS) == []
    assert store.read(RUN, run_id)["state"] == "attention_hold"


def test_a_run_swept_at_t_on_its_clock_is_continued_at_t_or_later(tmp_path: Path) -> None:
    """`belt serve --resume` continues a run held on a virtual clock whose gate a sweep settled
    at T: what the run and the turn after it record is dated from T on, never before."""
    from datetime import UTC, datetime

    from belt.records.interrupts import sweep

    turns = [
        {"user": "clean up", "model": [{"say": "writing", "tool_calls": [call(1)]}, {"say": "ok"}]},
        {"user": "thanks", "model": [{"say": "bye"}], "after": "1m"},
    ]
    declared = [{"event": "agent.tool_call", "type": "gate", "timeout": 60}]
    path = tmp_path / "clocked.json"
    path.write_text(
        json.dumps(
            {
                "agent": {"name": "clocked", "hooks": declared},
                "turns": turns,
                "clock": "2026-08-11T14:00:00Z",
            }
        )
    )
    held, (run_id,) = run_scenario(scenario=path)
    store = open_store()
    settled_at = datetime(2026, 8, 11, 15, 0, tzinfo=UTC)
    assert len(sweep(store=store, now=settled_at, run_id=run_id)) == 1

    [record] = resume_settled(store, emulated=False)
    assert (record["run_id"], record["state"]) == (run_id, "completed")
    report = belt("sim", "show", run_id, "--json").json()
    before = {m["id"] for m in held["chat"]["chat_messages"]}
    after = [m for m in report["chat"]["chat_messages"] if m["id"] not in before]
    assert [m["created_at"] for m in after] == ["2026-08-11T15:00:00.000Z"] * 3 + [
        "2026-08-11T15:01:00.000Z"
    ] * 2
    assert [m["role"] for m in after] == ["event", "tool", "assistant", "user", "assistant"]
    assert [(r["created_at"], r["updated_at"]) for r in report["runs"]] == [
        ("2026-08-11T14:00:00.000Z", "2026-08-11T15:00:00.000Z"),
        ("2026-08-11T15:01:00.000Z", "2026-08-11T15:01:00.000Z"),
    ]
