"""Gates a scenario settles itself (``[[turns.resolve]]``): the run never waits for a person."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import run_scenario
from belt.engine.scenario import resolution_for
from belt.errors import InvalidInput
from tests.cli.runner import belt

GATE = {"event": "agent.tool_call", "type": "gate", "timeout": 600, "default_resolution": "deny"}


def delete(path: str) -> dict[str, Any]:
    return {"name": "delete_file", "arguments": {"path": path}, "result": f"deleted {path}"}


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc))
    return path


def gated(tmp_path: Path, resolve: list[dict[str, Any]], *paths: str) -> Path:
    turn = {
        "user": "clean up",
        "resolve": resolve,
        "model": [{"tool_calls": [delete(p) for p in paths]}, {"say": "done"}],
    }
    return write(tmp_path, {"agent": {"hooks": [GATE]}, "turns": [turn]})


def calls(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        invocation["function"]["arguments"]["path"]: invocation
        for message in report["chat"]["chat_messages"]
        for invocation in message.get("tool_invocations") or []
    }


def test_a_scripted_allow_and_deny_settle_the_gates_of_a_turn(tmp_path: Path) -> None:
    resolve = [
        {"tool": "delete_file", "arguments": {"path": "/tmp/*"}, "decision": "allow"},
        {"decision": "deny", "data": {"by": "the test"}},
    ]
    report, _ = run_scenario(scenario=gated(tmp_path, resolve, "/tmp/a", "/etc/b"))
    assert report["runs"][0]["state"] == "completed"
    found = calls(report)
    assert found["/tmp/a"]["status"] == "completed"
    assert found["/etc/b"]["status"] == "failed"
    assert found["/etc/b"]["result"].startswith("rejected: denied at gate int_")
    by_tool = {i["meta"]["data"]["arguments"]["path"]: i for i in report["interrupts"]}
    assert by_tool["/tmp/a"]["resolution"] == "allow"
    assert by_tool["/etc/b"]["resolved_data"] == {"by": "the test"}
    rows = [m for m in report["chat"]["chat_messages"] if "by the scenario" in json.dumps(m)]
    assert len(rows) == 2


def test_a_gate_no_resolution_matches_holds_the_run(tmp_path: Path) -> None:
    resolve = [{"tool": "send_email", "decision": "allow"}]
    result = belt("sim", "run", str(gated(tmp_path, resolve, "/tmp/a")), "--json")
    assert result.exit_code == 0
    report = result.json()
    assert report["runs"][0]["state"] == "input_required"
    assert report["simulation"]["status"] == "held"
    assert [i["status"] for i in report["interrupts"]] == ["pending"]


def test_a_turn_gate_denied_by_the_scenario_fails_the_run(tmp_path: Path) -> None:
    hook = {"event": "agent.turn_start", "type": "gate"}
    turns = [
        {
            "user": "first",
            "resolve": [{"event": "agent.turn_start", "decision": "deny"}],
            "model": [{"say": "hi"}],
        },
        {"user": "second", "resolve": [{"decision": "allow"}], "model": [{"say": "hello"}]},
    ]
    report, executed = run_scenario(
        scenario=write(tmp_path, {"agent": {"hooks": [hook]}, "turns": turns})
    )
    assert [run["state"] for run in report["runs"]] == ["failed", "completed"]
    assert report["runs"][0]["error"].startswith("turn blocked: deny at gate int_")
    assert len(executed) == 2


def test_the_transcript_says_the_scenario_resolved_the_gate(tmp_path: Path) -> None:
    path = gated(tmp_path, [{"decision": "allow"}], "/tmp/a")
    result = belt("sim", "run", str(path))
    assert result.exit_code == 0
    assert "resolved allow by the scenario" in result.stdout
    assert "belt sim resume" not in result.stdout


def test_nexus_approvals_are_resolved_by_the_scenario(tmp_path: Path) -> None:
    doc = {
        "dialect": "nexus",
        "profile": {
            "approval_mode": "ask",
            "lifecycle_hooks": {"turn_start": {"tool": "check", "timeout_ms": 30000}},
        },
        "executors": {"check": "py:tests.pyhooks:ack"},
        "turns": [
            {
                "user": "one",
                "resolve": [{"event": "turn_start", "decision": "allow"}],
                "model": [{"say": "ok"}],
            },
            {
                "user": "two",
                "resolve": [{"tool": "check", "decision": "deny"}],
                "model": [{"say": "ok"}],
            },
        ],
    }
    result = belt("sim", "run", str(write(tmp_path, doc)), "--json")
    report = result.json()
    assert [run["state"] for run in report["runs"]] == ["completed", "attention_hold"]
    assert report["runs"][1]["attention"]["reason"] == "approval_denied"
    assert result.exit_code == 1


@pytest.mark.parametrize(
    ("resolve", "problem"),
    [
        ({"decision": "allow", "colour": "red"}, "turns[0].resolve[0].colour: unknown key"),
        ({"decision": "maybe"}, "turns[0].resolve[0].decision: Input should be 'allow' or 'deny'"),
        ({"event": "agent.complete", "decision": "allow"}, "'agent.complete' opens no gate"),
        (
            {"arguments": {"path": "re:("}, "decision": "allow"},
            "turns[0].resolve[0].arguments.path: bad regex",
        ),
        ({"tool": 3, "decision": "allow"}, "turns[0].resolve[0].tool: Input should be a valid"),
    ],
)
def test_a_wrong_resolution_is_named_by_its_path(
    tmp_path: Path, resolve: dict[str, Any], problem: str
) -> None:
    result = belt("sim", "run", str(gated(tmp_path, [resolve], "/tmp/a")))
    assert result.exit_code == 5
    assert problem in result.stderr


def test_resolutions_match_by_event_tool_and_arguments() -> None:
    interrupt = {
        "source": "hook:agent.tool_call",
        "meta": {"data": {"tool": "delete_file", "arguments": {"path": "/tmp/x", "force": True}}},
    }
    assert resolution_for([{"event": "agent.turn_start", "decision": "allow"}], interrupt) is None
    assert resolution_for([{"tool": "rm*", "decision": "allow"}], interrupt) is None
    spec = {"tool": "delete_*", "arguments": {"force": True}, "decision": "deny"}
    assert (
        resolution_for([{"arguments": {"path": "/etc/*"}, "decision": "allow"}, spec], interrupt)
        == spec
    )
    approval = {"source": "nexus:stop", "meta": {"tool_name": "verify", "arguments": {}}}
    assert resolution_for([{"event": "stop", "tool": "verify", "decision": "allow"}], approval)


def test_resolutions_of_a_nexus_scenario_name_nexus_events(tmp_path: Path) -> None:
    doc = {
        "dialect": "nexus",
        "turns": [
            {
                "user": "x",
                "resolve": [{"event": "agent.start", "decision": "allow"}],
                "model": [{"say": "y"}],
            }
        ],
    }
    with pytest.raises(InvalidInput) as caught:
        run_scenario(scenario=write(tmp_path, doc))
    assert "turns[0].resolve[0].event: 'agent.start' opens no gate (one of turn_start" in str(
        [caught.value.message, *caught.value.problems]
    )
