"""Emulated chats across `belt serve` processes: two servers over one store (as `--workers`), a
server stopped at a gate and started again, a server killed in the middle of a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from belt.store import open_store
from tests.cli.runner import belt
from tests.cli.test_serve import ROOT, serve_process
from tests.hookapp import hook_app
from tests.waiting import eventually

MODEL = """
[[rules]]
match = "tidy*"
  [[rules.model]]
  say = "Tidying."
  tool_calls = [ { name = "archive", arguments = { path = "/tmp/old" }, result = "archived" } ]
  [[rules.model]]
  say = "All tidy."
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.toml"
    path.write_text(MODEL)
    return path


def first_message(url: str, hooks: list[dict[str, Any]]) -> dict[str, Any]:
    body = {
        "chat_id": None,
        "input": {"text": "tidy up"},
        "agent_config": {"name": "tidy", "hooks": hooks},
        "agent_name": "tidy",
    }
    reply = httpx.post(f"{url}/agents/run", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()["data"]["assistant_message"]
    return data


def chat_of(url: str, chat_id: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{url}/chats/{chat_id}", timeout=30).json()["data"]
    return data


def test_two_servers_over_one_store_share_a_chat_its_stream_and_its_gate(
    model: Path,
) -> None:
    with (
        hook_app() as hooks,
        serve_process("--model", str(model), "--sweep-interval", "0") as (first, _),
        serve_process("--model", str(model), "--sweep-interval", "0") as (second, _),
    ):
        agent_hooks = [
            {"event": "agent.tool_call", "type": "webhook", "handler": hooks.url + "/seen"},
            {"event": "agent.tool_call", "type": "gate"},
        ]
        reply = first_message(first, agent_hooks)
        chat_id = reply["chat_id"]
        gate = eventually(lambda: chat_of(second, chat_id)["pending_interrupts"], "a gate")[0]
        lines: list[dict[str, Any]] = []

        def read() -> None:
            with httpx.stream("GET", f"{second}/chats/{chat_id}/stream", timeout=60) as stream:
                for raw in stream.iter_lines():
                    if raw.strip():
                        lines.append(json.loads(raw))

        reader = threading.Thread(target=read)
        reader.start()
        eventually(lambda: any(line.get("event") == "chats" for line in lines), "the replay")
        # Approved through the second server: whichever server takes the run's lease goes on.
        assert httpx.post(f"{second}/tools/{gate['resource_id']}/invoke").status_code == 200
        reader.join(timeout=60)
        assert not reader.is_alive()
    chats = [line["data"] for line in lines if line.get("event") == "chats"]
    assert chats[0]["status"] == "awaiting_input" and chats[-1]["status"] == "idle"
    answers = [
        line["data"]["content"][0]["text"]
        for line in lines
        if line.get("event") == "chat_messages" and line["data"]["role"] == "assistant"
    ]
    assert answers[-1] == "All tidy."
    assert hooks.events() == ["agent.tool_call"]
    (run,) = [open_store().read("run", i) for i in open_store().list_ids("run")]
    assert run["state"] == "completed"


def test_a_run_held_at_a_gate_goes_on_in_a_server_started_after_a_restart(
    model: Path,
) -> None:
    with hook_app() as hooks:
        agent_hooks = [
            {"event": "agent.tool_call", "type": "gate"},
            {"event": "agent.complete", "type": "webhook", "handler": hooks.url + "/done"},
        ]
        with serve_process("--model", str(model), "--sweep-interval", "0") as (url, output):
            chat_id = first_message(url, agent_hooks)["chat_id"]
            gate = eventually(lambda: chat_of(url, chat_id)["pending_interrupts"], "a gate")[0]
        assert output["code"] == "130", output["stderr"]
        # Settled while no server runs; the next server continues the run by itself, with the
        # webhook's full URL from the store's private part.
        assert belt("interrupt", "resolve", gate["id"], "allow").exit_code == 0
        with serve_process("--model", str(model), "--sweep-interval", "0") as (url, output):
            done = eventually(
                lambda: (c := chat_of(url, chat_id))["status"] == "idle" and c, "the run ended"
            )
        assert output["code"] == "130", output["stderr"]
        assert hooks.events() == ["agent.complete"]
    assert done["chat_messages"][-1]["content"][0]["text"] == "All tidy."


@contextmanager
def killable_server(model: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", "--model", str(model)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        assert "listening on " in banner, banner + process.stderr.read()
        yield banner.split("listening on ")[1].split(" ")[0], process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_a_run_whose_server_was_killed_goes_on_from_its_last_durable_point(
    model: Path,
) -> None:
    def hold_first(name: str, payload: dict[str, Any]) -> bool:
        return payload["event"] == "agent.tool_call" and not hooks.held.is_set()

    with hook_app() as hooks:
        hooks.hold = hold_first
        agent_hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": hooks.url}]
        with killable_server(model) as (url, process):
            chat_id = first_message(url, agent_hooks)["chat_id"]
            assert hooks.held.wait(30), "the hook was never called"
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        store = open_store()
        (run_id,) = store.list_ids("run")
        assert store.read("run", run_id)["state"] == "working"
        with killable_server(model) as (url, _):
            done = eventually(
                lambda: (c := chat_of(url, chat_id))["status"] == "idle" and c, "the run ended"
            )
    # The tool call's step was taken again: its hook was asked twice, the tool ran once.
    assert hooks.events() == ["agent.tool_call", "agent.tool_call"]
    tool_rows = [m for m in done["chat_messages"] if m["role"] == "tool"]
    assert [m["content"][0]["text"] for m in tool_rows] == ["archived"]
    assert store.read("run", run_id)["state"] == "completed"


def test_the_sdk_runs_its_agent_against_belt_serve_with_workers(model: Path) -> None:
    inferencesh = pytest.importorskip("inferencesh")
    args = ("--model", str(model), "--workers", "2", "--sweep-interval", "0")
    with serve_process(*args) as (url, output):
        client = inferencesh.inference(api_key="belt-local", base_url=url)

        def one_chat() -> None:
            agent = client.agent(
                {"name": "tidy", "hooks": [{"event": "agent.tool_call", "type": "gate"}]}
            )
            agent.send_message("tidy up", on_message=lambda message: None)
            (gate,) = eventually(lambda: agent.get_chat()["pending_interrupts"], "a gate")
            agent.approve_tool(gate["resource_id"])
            agent.stream_all(on_message=lambda message: None)
            done = eventually(
                lambda: (c := agent.get_chat())["status"] == "idle" and c, "the run ended"
            )
            assert done["chat_messages"][-1]["content"][0]["text"] == "All tidy."
            agent.send_message("and thanks", on_message=lambda message: None)
            assert agent.get_chat()["chat_messages"][-1]["content"][0]["text"] == (
                "You said: and thanks"
            )

        for _ in range(4):
            one_chat()
    assert output["code"] == "130", output["stderr"]
    assert "2 workers" in output["stderr"]


def test_ctrl_c_ends_the_streams_still_open_and_stops_cleanly(model: Path) -> None:
    ended = threading.Event()
    with serve_process("--model", str(model), "--sweep-interval", "0") as (url, output):
        body = {"chat_id": None, "input": {"text": "hi"}, "agent_config": {}}
        chat_id = httpx.post(f"{url}/agents/run", json=body).json()["data"]["user_message"][
            "chat_id"
        ]
        eventually(lambda: chat_of(url, chat_id)["status"] == "idle", "the run ended")
        replayed = threading.Event()

        def listen() -> None:
            # The chat is idle and was never seen busy by this stream: it stays open.
            with httpx.stream("GET", f"{url}/chats/{chat_id}/stream", timeout=60) as stream:
                for raw in stream.iter_lines():
                    if '"event": "chats"' in raw:
                        replayed.set()
            ended.set()

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert replayed.wait(30)
    listener.join(30)
    assert ended.is_set()
    assert output["code"] == "130", output["stderr"]
    assert "Traceback" not in output["stderr"] and "ERROR" not in output["stderr"]
