"""A small application written only against the official inference.sh Python SDK.

It creates an agent with hooks, sends two messages and streams the replies: a tool call its
webhook hook denies, one a gate holds until the application approves it, and a client tool the
application answers. Nothing here knows about belt: pointed at the platform it runs there;
`make demo-sdk` points it at `belt serve --policy examples/policy.toml --model
examples/model.toml`, which plays the platform (its model answers from the script) and is the
webhook handler too (the policy), all on this machine.

    INFERENCE_BASE_URL=http://127.0.0.1:8787 python examples/sdk_app.py
"""

from __future__ import annotations

import os
from typing import Any

from inferencesh import inference

BASE_URL = os.environ.get("INFERENCE_BASE_URL", "http://127.0.0.1:8787")
HOOKS_URL = os.environ.get("HOOKS_URL", f"{BASE_URL}/hooks")

client = inference(api_key=os.environ.get("INFERENCE_API_KEY", "local-key"), base_url=BASE_URL)
agent = client.agent(
    {
        "name": "guarded-agent",
        "core_app": {"ref": "infsh/claude-sonnet-4@latest"},
        "system_prompt": "You keep the file system tidy.",
        "tools": [
            {"name": "get_location", "type": "client", "description": "Where the user is."},
        ],
        "hooks": [
            # The policy webhook decides first, and reminds the model before each turn.
            {"event": "agent.tool_call", "type": "webhook", "handler": f"{HOOKS_URL}/tool-call"},
            {"event": "agent.turn_start", "type": "webhook", "handler": f"{HOOKS_URL}/turn-start"},
            # What the policy lets through still waits for a person.
            {"event": "agent.tool_call", "type": "gate", "default_resolution": "deny"},
        ],
    }
)

seen_messages: set[str] = set()
seen_calls: dict[str, str] = {}


def show(message: dict[str, Any]) -> None:
    """Print a message the first time it is seen, and each tool call when its status changes."""
    if message["id"] not in seen_messages and message["role"] != "tool":
        for block in message.get("content") or []:
            event = block.get("event") or {}
            if event.get("type") == "hook":
                hook = event["hook"]
                what = hook.get("decision") or ("injected" if hook.get("injected") else "ran")
                print(f"  hook       {hook['event']}: {what} {hook.get('reason') or ''}")
            elif block.get("text"):
                print(f"  {message['role']:<10} {block['text']}")
    seen_messages.add(message["id"])
    for call in message.get("tool_invocations") or []:
        if seen_calls.get(call["id"]) != call["status"]:
            seen_calls[call["id"]] = call["status"]
            result = f" → {call['result']}" if call.get("result") else ""
            print(f"  tool       {call['function']['name']} [{call['status']}]{result}")


def answer_client_tool(call: Any) -> None:
    """The application runs its own tools: here, where the user is."""
    print(f"  (the app runs {call.name} and answers)")
    agent.submit_tool_result(call.id, {"city": "Lisbon"})


def converse(text: str) -> None:
    """Send one message and follow its run to the end, approving what waits for a person."""
    print(f"> {text}")
    agent.send_message(text, on_message=show, on_tool_call=answer_client_tool)
    while gates := (agent.get_chat() or {}).get("pending_interrupts"):
        for gate in gates:
            tool = (gate.get("meta") or {}).get("data", {}).get("tool")
            print(f"  gate       {gate['id']} holds {tool}: the app approves it")
            agent.approve_tool(gate["resource_id"])
        # Approved, the run goes on by itself: follow it.
        agent.stream_all(on_message=show, on_tool_call=answer_client_tool)


converse("Clean up the old database and the temp files")
converse("Where am I?")
final = agent.get_chat() or {}
print(f"chat {final.get('id')} is {final.get('status')}")
