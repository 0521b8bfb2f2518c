"""What the SDK end-to-end tests share: the model script, `belt serve` running it, the
application's hook handler (it denies `delete_file`), and a tool invocation found in a chat.

The fixtures reach the tests through `pytest_plugins` in conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from belt.server.app import create_app
from tests.hookapp import HookApp, hook_app
from tests.servers import running

MODEL = """
[[rules]]
match = "clean up*"
agent = "guarded"
  [[rules.model]]
  say = "Cleaning up the old files."
  tool_calls = [
    { name = "delete_file", arguments = { path = "/etc/passwd" }, result = "deleted" },
    { name = "archive", arguments = { path = "/tmp/old" }, result = "archived 3 files" },
  ]
  [[rules.model]]
  say = "Done: one file archived, the other was refused."

[[rules]]
match = "re:where am I"
  [[rules.model]]
  say = "Let me look."
  tool_calls = [ { name = "get_location" } ]
  [[rules.model]]
  say = "You are where your device says."
"""


@pytest.fixture
def sdk_served(tmp_path: Path) -> Iterator[str]:
    model = tmp_path / "model.toml"
    model.write_text(MODEL)
    with running(create_app(sweep_interval=0, model=model)) as url:
        yield url


@pytest.fixture
def sdk_handler() -> Iterator[HookApp]:
    def decide(name: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        data = payload.get("data") or {}
        if payload["event"] == "agent.tool_call" and data.get("tool") == "delete_file":
            return {"decision": "deny", "reason": "never outside /tmp"}
        return None

    with hook_app(decide) as app:
        yield app


def invocation(chat: dict[str, Any], tool: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        i
        for m in chat["chat_messages"]
        for i in m.get("tool_invocations") or []
        if i["function"]["name"] == tool
    )
    return found
