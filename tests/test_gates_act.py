"""Gates whose resolution acts: `--wait` runs and `belt serve --resume` go on by themselves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import resume_run, run_scenario
from belt.errors import Conflict
from belt.records.interrupts import resolve_interrupt
from belt.server.app import create_app
from belt.store import Store, open_store
from tests.cli.runner import belt
from tests.loopback import CLIENT
from tests.servers import running
from tests.waiting import eventually

DELETE = {"name": "delete_file", "arguments": {"path": "/tmp/old.txt"}, "result": "deleted"}


def gated_scenario(tmp_path: Path, **gate: Any) -> Path:
    path = tmp_path / "gated.json"
    turn = {
        "user": "clean up",
        "model": [{"say": "deleting", "tool_calls": [DELETE]}, {"say": "ok"}],
    }
    hook = {"event": "agent.tool_call", "type": "gate", **gate}
    path.write_text(json.dumps({"agent": {"name": "waits", "hooks": [hook]}, "turns": [turn]}))
    return path


def pending_gate(store: Store) -> str:
    def look() -> str | None:
        markers = store.tagged("pending-interrupts")
        found = markers[0].partition("-")[2] if markers else None
        # The marker is written before the interrupt itself: wait for both.
        return found if found and store.exists("interrupt", found) else None

    gate_id: str = eventually(look, "a gate opened")
    return gate_id


def start_waiting(path: Path, belt_home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", str(path), "--wait", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def tool_status(report: dict[str, Any]) -> str:
    (assistant, *_) = [m for m in report["chat"]["chat_messages"] if m["role"] == "assistant"]
    return str(assistant["tool_invocations"][0]["status"])


def test_a_waiting_run_goes_on_when_its_gate_is_resolved_through_serve(
    tmp_path: Path, belt_home: Path
) -> None:
    store = open_store()
    waiting = start_waiting(gated_scenario(tmp_path), belt_home)
    try:
        with running(create_app(store=store, sweep_interval=0)) as api:
            gate_id = pending_gate(store)
            run_id = store.read("interrupt", gate_id)["run_id"]
            # While it waits, the waiting process holds the run: nobody else continues it.
            assert belt("sim", "resume", run_id).exit_code == 4
            reply = CLIENT.post(f"{api}/interrupts/{gate_id}/resolve", json={"decision": "allow"})
            assert reply.status_code == 200
            stdout, stderr = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["runs"][0]["state"] == "completed"
    assert tool_status(report) == "completed"
    assert f"waiting at 1 gate(s) of run {run_id}" in stderr


def test_an_expired_deny_gate_finishes_a_waiting_run_with_the_tool_failed(
    tmp_path: Path,
) -> None:
    path = gated_scenario(tmp_path, timeout=1, default_resolution="deny")
    report, (run_id,) = run_scenario(scenario=path, wait=True)
    assert report["runs"][0]["state"] == "completed"
    assert tool_status(report) == "failed"
    (gate,) = report["interrupts"]
    assert (gate["status"], gate["resolution"]) == ("expired", "deny")
    (assistant, *_) = [m for m in report["chat"]["chat_messages"] if m["role"] == "assistant"]
    assert assistant["tool_invocations"][0]["result"] == f"rejected: expired at gate {gate['id']}"


def test_ctrl_c_stops_waiting_and_leaves_the_run_resumable(tmp_path: Path, belt_home: Path) -> None:
    store = open_store()
    waiting = start_waiting(gated_scenario(tmp_path), belt_home)
    try:
        gate_id = pending_gate(store)
        run_id = store.read("interrupt", gate_id)["run_id"]
        eventually(lambda: store.read("run", run_id)["state"] == "input_required", "held")
        waiting.send_signal(signal.SIGINT)
        _, stderr = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 130, stderr
    assert "stopped waiting" in stderr
    assert store.read("run", run_id)["lease"] is None
    assert belt("interrupt", "resolve", gate_id, "deny").exit_code == 0
    report, _ = resume_run(run_id=run_id)
    assert report["runs"][0]["state"] == "completed"
    assert tool_status(report) == "failed"


def test_serve_resume_continues_a_run_once_its_gate_is_settled(tmp_path: Path) -> None:
    store = open_store()
    held, (run_id,) = run_scenario(scenario=gated_scenario(tmp_path))
    assert held["runs"][0]["state"] == "input_required"
    # A second held run, settled before the server starts: the pass that continues it looks at
    # the first run too, so once that pass is reported the first run was seen and left alone.
    (tmp_path / "other").mkdir()
    other, (other_id,) = run_scenario(scenario=gated_scenario(tmp_path / "other"))
    other_gate = other["chat"]["pending_interrupts"][0]["id"]
    resolve_interrupt(store=store, interrupt_id=other_gate, decision="allow")
    lines: list[dict[str, Any]] = []
    with running(
        create_app(store=store, sweep_interval=0, resume=True, report=lines.append)
    ) as api:
        eventually(
            lambda: any(line.get("run_id") == other_id for line in lines), "the settled run resumed"
        )
        assert store.read("run", other_id)["state"] == "completed"
        assert store.read("run", run_id)["state"] == "input_required"  # still pending
        gate_id = held["chat"]["pending_interrupts"][0]["id"]
        CLIENT.post(f"{api}/interrupts/{gate_id}/resolve", json={"decision": "allow"})
        eventually(lambda: store.read("run", run_id)["state"] == "completed", "run completed")
    assert {"kind": "resume", "run_id": run_id, "state": "completed"}.items() <= next(
        line for line in lines if line.get("kind") == "resume" and line.get("run_id") == run_id
    ).items()
    with pytest.raises(Conflict):
        resume_run(run_id=run_id)


def test_resume_wait_attaches_to_a_held_run_and_goes_on_once_settled(
    tmp_path: Path, belt_home: Path
) -> None:
    store = open_store()
    held, (run_id,) = run_scenario(scenario=gated_scenario(tmp_path))
    gate_id = held["chat"]["pending_interrupts"][0]["id"]
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "resume", run_id, "--wait", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: (store.read("run", run_id).get("lease") or {}).get("pid"), "attached")
        assert belt("interrupt", "resolve", gate_id, "deny").exit_code == 0
        stdout, stderr = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["runs"][0]["state"] == "completed"
    assert tool_status(report) == "failed"
