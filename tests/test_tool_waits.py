"""Tool calls that wait in a scenario: a tool that requires approval, and a client tool whose
result the application posts (its run stays working meanwhile)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import resume_run, run_scenario
from belt.errors import InvalidInput
from belt.store import open_store
from tests.cli.runner import belt


def scenario(tmp_path: Path, **call: Any) -> Path:
    path = tmp_path / "waits.json"
    tool = {"name": "lookup", "arguments": {"q": "x"}, "result": "scripted", **call}
    turn = {
        "user": "look it up",
        "model": [{"say": "looking", "tool_calls": [tool]}, {"say": "ok"}],
    }
    path.write_text(json.dumps({"agent": {"name": "waits"}, "turns": [turn]}))
    return path


def invocation(report: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(
        i for m in report["chat"]["chat_messages"] for i in m.get("tool_invocations") or []
    )
    return found


def test_a_tool_that_requires_approval_holds_its_run_until_approved(tmp_path: Path) -> None:
    held, (run_id,) = run_scenario(scenario=scenario(tmp_path, require_approval=True))
    (run,) = held["runs"]
    assert (run["state"], run["interrupt_reason"]) == ("input_required", "tool_approval")
    (approval,) = held["interrupts"]
    assert (approval["reason"], approval["source"]) == ("tool_approval", "tool:lookup")
    # An approval has no default: on expiry it is refused.
    assert open_store().read("interrupt", approval["id"])["default_resolution"] is None
    assert invocation(held)["status"] == "awaiting_approval"
    denied = belt("interrupt", "resolve", approval["id"], "deny", "--data", '{"reason": "no"}')
    assert denied.exit_code == 0
    report, _ = resume_run(run_id=run_id)
    assert report["runs"][0]["state"] == "completed"
    assert (invocation(report)["status"], invocation(report)["result"]) == (
        "failed",
        "rejected: no",
    )


def test_an_expired_approval_is_refused(tmp_path: Path) -> None:
    path = scenario(tmp_path, require_approval=True, approval_timeout=1)
    report, _ = run_scenario(scenario=path, wait=True)
    (approval,) = report["interrupts"]
    assert (approval["status"], approval["resolution"]) == ("expired", "deny")
    assert invocation(report)["result"] == f"rejected: expired at approval {approval['id']}"


def test_a_client_tool_stays_working_until_its_result_arrives(tmp_path: Path) -> None:
    held, (run_id,) = run_scenario(scenario=scenario(tmp_path, client=True))
    (run,) = held["runs"]
    assert (run["state"], run["interrupt_reason"]) == ("working", "client_tool")
    assert "interrupted" not in run
    assert held["simulation"]["status"] == "held"
    call = invocation(held)
    assert (call["type"], call["status"]) == ("client", "awaiting_input")
    (wait,) = held["interrupts"]
    assert (wait["reason"], wait["resource_id"]) == ("client_tool", call["id"])
    shown = belt("sim", "show", run_id)
    assert (
        f"""belt interrupt resolve {wait["id"]} allow --data '{{"result": "…"}}'""" in shown.stdout
    )
    listed = belt("sim", "list", "--json")
    assert json.loads(listed.stdout)[0]["state"] == "working"
    result = belt("interrupt", "resolve", wait["id"], "allow", "--data", '{"result": "42"}')
    assert result.exit_code == 0
    report, _ = resume_run(run_id=run_id)
    assert report["runs"][0]["state"] == "completed"
    assert (invocation(report)["status"], invocation(report)["result"]) == ("completed", "42")
    roles = [m["role"] for m in report["chat"]["chat_messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_run_waiting_for_its_client_can_be_stopped_without_force(tmp_path: Path) -> None:
    held, (run_id,) = run_scenario(scenario=scenario(tmp_path, client=True))
    assert belt("sim", "stop", run_id).exit_code == 0
    run = open_store().read("run", run_id)
    assert run["state"] == "canceled"
    assert open_store().read("interrupt", held["interrupts"][0]["id"])["status"] == "cancelled"


@pytest.mark.parametrize("key", ["client", "require_approval", "approval_timeout"])
def test_tool_waits_belong_to_the_platform_dialect(tmp_path: Path, key: str) -> None:
    from belt.engine.scenario import read_scenario

    path = tmp_path / "nexus.json"
    call = {"name": "t", key: 1 if key == "approval_timeout" else True}
    path.write_text(
        json.dumps(
            {"dialect": "nexus", "turns": [{"user": "x", "model": [{"tool_calls": [call]}]}]}
        )
    )
    with pytest.raises(InvalidInput) as caught:
        read_scenario(path)
    assert caught.value.message.endswith(
        f"turns[0].model[0].tool_calls[0].{key}: "
        + {
            "client": "client tools belong to the platform dialect",
            "require_approval": "per-tool approval belongs to the platform dialect",
            "approval_timeout": "per-tool approval belongs to the platform dialect",
        }[key]
    )
