"""The official JavaScript SDK, unmodified, runs its agents against `belt serve`.

Runs where `node` is on the machine. The SDK is installed once, with npm, into a directory these
tests own (`.venv/js-sdk` in the repository, which git ignores) and reused from there: the tests
download nothing once it is installed, and are skipped, saying why, when it cannot be installed.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.hookapp import HookApp
from tests.sdk_flow import invocation

SDK = "@inferencesh/sdk@0.6.54"
ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".venv" / "js-sdk"
SCRIPT = Path(__file__).parent / "js" / "sdk_flow.mjs"
RESOLVER = Path(__file__).parent / "js" / "extensionless.mjs"
INSTALL_SECONDS = 300
RUN_SECONDS = 120


def installed_sdk() -> Path:
    """The directory holding the installed SDK; installs it the first time, else skips."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        pytest.skip("node is not on this machine: the JavaScript SDK cannot run here")
    marker = CACHE / "node_modules" / "@inferencesh" / "sdk" / "package.json"
    CACHE.mkdir(parents=True, exist_ok=True)
    # Test workers running at once install it once: the others wait for the first.
    with open(CACHE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        install(npm, marker)
    if json.loads(marker.read_text())["version"] != SDK.rsplit("@", 1)[1]:
        pytest.skip(f"{CACHE} holds another version of the SDK; remove it to install {SDK}")
    return CACHE


def install(npm: str | None, marker: Path) -> None:
    """Install the SDK into the cache unless it is there; skip, saying why, when it cannot."""
    if not marker.is_file():
        if npm is None:
            pytest.skip("npm is not on this machine: the JavaScript SDK cannot be installed")
        try:
            done = subprocess.run(
                [npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(CACHE)]
                + [SDK],
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm could not install {SDK} within {INSTALL_SECONDS} s")
        if done.returncode != 0 or not marker.is_file():
            pytest.skip(f"npm could not install {SDK}: {done.stderr.strip()[-300:]}")
    for source in (SCRIPT, RESOLVER):
        target = CACHE / source.name
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            shutil.copy(source, target)


def run_flow(*args: str) -> dict[str, Any]:
    """Run the JS flow script with ``args``; what the application saw, as JSON."""
    directory = installed_sdk()
    done = subprocess.run(
        ["node", "--import", f"./{RESOLVER.name}", str(directory / SCRIPT.name), *args],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        cwd=directory,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def test_the_js_sdk_sees_the_deny_resolves_the_gate_and_the_run_ends(
    sdk_served: str, sdk_handler: HookApp
) -> None:
    seen = run_flow(sdk_served, "gate", sdk_handler.url)
    chat = seen["chat"]
    deleted = invocation(chat, "delete_file")
    assert (deleted["status"], deleted["result"]) == ("failed", "never outside /tmp")
    archived = invocation(chat, "archive")
    assert (archived["status"], archived["result"]) == ("completed", "archived 3 files")
    # The stream kept listening at the gate (input_required is busy to the JS SDK) ...
    assert {"status": "awaiting_input", "state": "input_required"} in seen["chats"]
    assert len(seen["resolved"]) == 1
    # ... and sendMessage returned once the chat was idle again.
    assert chat["status"] == "idle" and chat["active_run"] is None
    assert "Cleaning up the old files." in seen["text"]
    rows = [m for m in seen["messages"] if m["role"] == "event"]
    assert rows[0]["content"][0]["event"]["hook"]["decision"] == "deny"
    # The second message got the plain model's reply in the same chat.
    assert chat["chat_messages"][-1]["content"][0]["text"] == "You said: thanks"
    assert seen["reply"]["chat_id"] == chat["id"]


def test_the_js_sdk_answers_a_client_tool(sdk_served: str) -> None:
    seen = run_flow(sdk_served, "client")
    (call,) = seen["toolCalls"]
    assert (call["name"], call["args"]) == ("get_location", {})
    located = invocation(seen["chat"], "get_location")
    assert (located["type"], located["status"]) == ("client", "completed")
    assert json.loads(located["result"]) == {"city": "Lisbon"}
    assert seen["status"]["status"] == "idle"
