"""The official Python SDK, unmodified, runs its agents against `belt serve` (issue: emulator).

`belt serve` runs in a thread on a free port with a model script; a real webhook server (the
test's) is the application's hook handler. The SDK creates an ad-hoc agent, sends messages with
its streaming callbacks, answers a client tool through `on_tool_call` and settles a gate with
its own `approve_tool`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from belt.server.app import create_app
from belt.store import open_store
from tests.hookapp import HookApp
from tests.sdk_flow import invocation
from tests.servers import running
from tests.waiting import eventually

inferencesh = pytest.importorskip("inferencesh")


def test_an_ad_hoc_agent_with_a_webhook_and_a_gate(sdk_served: str, sdk_handler: HookApp) -> None:
    client = inferencesh.inference(api_key="belt-local", base_url=sdk_served)
    agent = client.agent(
        {
            "name": "guarded",
            "core_app": {"ref": "infsh/claude-sonnet-4@latest"},
            "system_prompt": "You tidy up files.",
            "hooks": [
                {
                    "event": "agent.tool_call",
                    "type": "webhook",
                    "handler": sdk_handler.url + "/guard",
                },
                {"event": "agent.tool_call", "type": "gate", "default_resolution": "deny"},
            ],
        }
    )
    messages: list[dict[str, Any]] = []
    text: list[str] = []
    reply = agent.send_message(
        "clean up the disk",
        on_message=messages.append,
        on_delta=lambda delta: text.append(delta.delta.get("response") or ""),
    )
    assert reply["status"] == "pending" and reply["chat_id"] == agent.chat_id

    # The stream ended at the gate (the run is input_required): the deny is on the record.
    rows = [
        m["content"][0]["event"]["hook"]
        for m in messages
        if m["role"] == "event" and m["content"][0]["event"]["type"] == "hook"
    ]
    assert {"decision": "deny", "reason": "never outside /tmp"}.items() <= rows[0].items()
    assert rows[0]["handler"] == sdk_handler.url.removeprefix("http://")
    assert "Cleaning up the old files." in "".join(text)
    chat = agent.get_chat()
    assert chat["status"] == "awaiting_input"
    assert chat["active_run"]["state"] == "input_required"
    deleted = invocation(chat, "delete_file")
    assert (deleted["status"], deleted["result"]) == ("failed", "never outside /tmp")
    (gate,) = chat["pending_interrupts"]
    assert (gate["reason"], gate["source"]) == ("hook_gate", "hook:agent.tool_call")
    assert gate["resource_id"] == invocation(chat, "archive")["id"]
    assert gate["meta"]["data"]["tool"] == "archive"

    # The SDK's own approve settles the gate; the run goes on in the server, no resume.
    agent.approve_tool(gate["resource_id"])
    done = eventually(
        lambda: (c := agent.get_chat())["status"] == "idle" and c, "the run ended after approval"
    )
    archived = invocation(done, "archive")
    assert (archived["status"], archived["result"]) == ("completed", "archived 3 files")
    assert done["chat_messages"][-1]["content"][0]["text"].startswith("Done:")
    assert done["pending_interrupts"] == []
    assert [name for name, _ in sdk_handler.received] == ["guard", "guard"]

    # Everything is on the record: belt sim show sees the emulated chat.
    from belt.engine.entrypoints import list_runs, show_run

    (row,) = list_runs()
    assert row["state"] == "completed" and row["name"] == "guarded"
    report = show_run(run_id=row["id"])
    assert report["interrupts"][0]["resolution"] == "allow"


def test_a_client_tool_is_answered_through_on_tool_call(sdk_served: str) -> None:
    client = inferencesh.inference(api_key="belt-local", base_url=sdk_served)
    agent = client.agent(
        {
            "name": "locator",
            "tools": [{"name": "get_location", "type": "client", "client": {}}],
        }
    )
    calls: list[Any] = []

    def on_tool_call(call: Any) -> None:
        calls.append(call)
        agent.submit_tool_result(call.id, {"city": "Lisbon"})

    seen: list[dict[str, Any]] = []
    agent.send_message("where am I?", on_message=seen.append, on_tool_call=on_tool_call)

    (call,) = calls
    assert call.name == "get_location"
    # The run stayed working while the tool waited: the stream went on to the end.
    chat = agent.get_chat()
    assert chat["status"] == "idle" and chat["active_run"] is None
    located = invocation(chat, "get_location")
    assert (located["type"], located["status"]) == ("client", "completed")
    assert located["result"] == '{"city": "Lisbon"}'
    assert seen[-1]["content"][0]["text"] == "You are where your device says."
    waiting = [
        i for m in seen for i in m.get("tool_invocations") or [] if i["status"] == "awaiting_input"
    ]
    assert waiting and waiting[0]["type"] == "client"
    store = open_store()
    assert store.tagged("emulated-runs") == []


def test_the_example_app_runs_against_belt_serve() -> None:
    import os
    import subprocess
    import sys

    from belt.rules.policy import load_policy
    from belt.server.deciders import policy_decider

    examples = Path(__file__).resolve().parents[1] / "examples"
    app = create_app(
        decide=policy_decider(load_policy(examples / "policy.toml")),
        sweep_interval=0,
        model=examples / "model.toml",
    )
    with running(app) as url:
        done = subprocess.run(
            [sys.executable, str(examples / "sdk_app.py")],
            env={**os.environ, "INFERENCE_BASE_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  tool       delete_file [failed] → only /tmp deletions allowed" in lines
    assert "  tool       delete_file [completed] → deleted /tmp/old.txt" in lines
    assert '  tool       get_location [completed] → {"city": "Lisbon"}' in lines
    assert lines[-1].endswith(" is idle")
