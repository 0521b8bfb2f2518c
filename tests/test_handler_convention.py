"""One way to call a Python handler: a dict, unless its first parameter asks for the model.

The same function is called by a scenario's ``py:`` hook and ``--route`` (the engine),
``belt serve --handler`` (and the pytest plugin's server), ``belt replay --handler`` and
``belt trigger --to py:``; each is driven here as a user drives it.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from belt.engine.entrypoints import run_scenario
from belt.server.app import create_app
from belt.server.deciders import handler_decider, load_handler
from belt.store import Store
from belt.wire.samples import sample_payload
from tests import pyhooks
from tests.cli.runner import belt
from tests.servers import running

AS_DICT = ("py:tests.pyhooks:reads_with_get", "dict delete_file")
AS_MODEL = ("py:tests.pyhooks:model_type", "LifecycleHookPayload agent.tool_call")
OLD_FORM = ("tests.pyhooks:reads_with_get", "dict delete_file")
HANDLERS = pytest.mark.parametrize(("spec", "reason"), [AS_DICT, AS_MODEL, OLD_FORM])


@HANDLERS
def test_belt_serve_handler(spec: str, reason: str, tmp_path: Path) -> None:
    app = create_app(
        store=Store(tmp_path), decide=handler_decider(load_handler(spec)), sweep_interval=0
    )
    with running(app) as url:
        reply = httpx.post(f"{url}/hooks", json=sample_payload("agent.tool_call"))
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"decision": "deny", "reason": reason}


@HANDLERS
def test_belt_replay_handler(spec: str, reason: str, tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.jsonl"
    payloads.write_text(json.dumps(sample_payload("agent.tool_call")) + "\n")
    result = belt("replay", str(payloads), "--handler", spec, "--json")
    assert result.exit_code == 0, result.stderr
    [row] = result.json()["rows"]
    assert row["replayed"]["error"] is None
    assert row["replayed"]["reason"] == reason


@pytest.mark.parametrize(("spec", "reason"), [AS_DICT, AS_MODEL])
def test_a_scenario_hook_and_a_route(spec: str, reason: str, tmp_path: Path) -> None:
    delete = {"name": "delete_file", "arguments": {"path": "/etc/passwd"}, "result": "deleted"}
    for handler, routes in (
        (spec, []),
        ("https://hooks.example.com/guard", [f"https://hooks.example.com={spec}"]),
    ):
        path = tmp_path / "scenario.json"
        hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": handler}]
        turns = [{"user": "go", "model": [{"tool_calls": [delete]}, {"say": "done"}]}]
        path.write_text(json.dumps({"agent": {"hooks": hooks}, "turns": turns}))
        report, _ = run_scenario(scenario=path, routes=routes)
        [call] = [
            invocation
            for message in report["chat"]["chat_messages"]
            for invocation in message.get("tool_invocations") or []
        ]
        assert (call["status"], call["result"]) == ("failed", reason)


@HANDLERS
def test_belt_trigger_to_a_py_handler(spec: str, reason: str) -> None:
    if not spec.startswith("py:"):
        spec = f"py:{spec}"  # --to names a py: handler by its prefix (a bare one is a URL)
    result = belt("trigger", "agent.tool_call", "--to", spec, "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["in_process"] is True
    assert report["response"] == {"decision": "deny", "reason": reason}


def test_a_file_handler_works_with_the_prefix_everywhere(tmp_path: Path) -> None:
    handler = tmp_path / "guard.py"
    handler.write_text(
        "def guard(payload):\n    return {'decision': 'deny', 'reason': payload.get('event')}\n"
    )
    spec = f"py:{handler}:guard"
    trigger = belt("trigger", "agent.start", "--to", spec, "--json")
    assert trigger.exit_code == 0, trigger.stderr
    assert trigger.json()["response"] == {"decision": "deny", "reason": "agent.start"}
    payloads = tmp_path / "payloads.jsonl"
    payloads.write_text(json.dumps(sample_payload("agent.start")) + "\n")
    replay = belt("replay", str(payloads), "--handler", spec, "--json")
    assert replay.exit_code == 0, replay.stderr
    assert replay.json()["rows"][0]["replayed"]["reason"] == "agent.start"


def test_replay_shows_a_handlers_whole_message(tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.jsonl"
    payloads.write_text(json.dumps(sample_payload("agent.tool_call")) + "\n")
    result = belt("replay", str(payloads), "--handler", "py:tests.pyhooks:fails_at_length")
    assert result.exit_code == 0, result.stderr
    expected = f"tests.pyhooks:fails_at_length raised RuntimeError: {pyhooks.LONG_MESSAGE}"
    assert f"  first error: {expected}" in result.stdout.splitlines()
    as_json = belt(
        "replay", str(payloads), "--handler", "py:tests.pyhooks:fails_at_length", "--json"
    )
    assert as_json.json()["rows"][0]["replayed"]["error"] == expected
