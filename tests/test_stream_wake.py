"""A chat's stream waits instead of polling: a write through the records layer in the server's
process wakes it, and a write from another process reaches it by its low-rate look."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from typing import Any

import pytest

from belt.records.changes import watching
from belt.records.chats import create_chat, set_chat_settings, update_chat
from belt.server import stream
from belt.store import open_store
from tests.cli.test_serve import ROOT, serve_process
from tests.loopback import CLIENT
from tests.test_emulator_processes import first_message, model  # noqa: F401
from tests.waiting import eventually


def test_a_write_to_a_chat_wakes_whoever_watches_it_and_nobody_else() -> None:
    store = open_store()
    create_chat(store, agent_id="a", chat_id="ch_watched")
    create_chat(store, agent_id="a", chat_id="ch_other")
    with watching("ch_watched") as watched, watching("ch_other") as other:
        assert not watched.wait(0)
        update_chat(store, "ch_watched", status="busy")
        assert watched.wait(0)
        assert not watched.wait(0)  # a wake is cleared once seen
        set_chat_settings(store=store, chat_id="ch_watched", disable_hooks=True)
        assert watched.wait(0)
        assert not other.wait(0)


def test_a_stream_is_woken_by_a_write_in_its_process_without_looking_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # With no fallback look in the test's lifetime, only the wake-up can bring the change.
    monkeypatch.setattr(stream, "FALLBACK", 3600.0)
    monkeypatch.setattr(stream, "HEARTBEAT", 3600.0)
    store = open_store()
    create_chat(store, agent_id="a", chat_id="ch_streamed")

    async def follow() -> list[dict[str, Any]]:
        lines = stream.chat_events(store, "ch_streamed")
        replay = json.loads(await asyncio.wait_for(anext(lines), 30))
        assert replay["event"] == "chats" and replay["data"]["status"] == "idle"
        writer = threading.Thread(
            target=update_chat, args=(store, "ch_streamed"), kwargs={"status": "busy"}
        )
        writer.start()
        changed = json.loads(await asyncio.wait_for(anext(lines), 30))
        writer.join()
        await lines.aclose()
        return [replay, changed]

    _, changed = asyncio.run(follow())
    assert changed["event"] == "chats" and changed["data"]["status"] == "busy"


def test_a_write_from_another_process_reaches_a_stream(model: Any) -> None:  # noqa: F811
    with serve_process("--model", str(model), "--sweep-interval", "0") as (url, _):
        chat_id = first_message(url, [])["chat_id"]
        eventually(
            lambda: CLIENT.get(f"{url}/chats/{chat_id}").json()["data"]["status"] == "idle",
            "the first run ended",
        )
        lines: list[dict[str, Any]] = []
        done = threading.Event()

        def read() -> None:
            with CLIENT.stream("GET", f"{url}/chats/{chat_id}/stream", timeout=60) as reply:
                for raw in reply.iter_lines():
                    if raw.strip():
                        lines.append(json.loads(raw))
                    if done.is_set():
                        return

        def settings() -> list[Any]:
            return [
                line["data"]["agent_data"].get("disable_hooks")
                for line in lines
                if line.get("event") == "chats"
            ]

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        eventually(lambda: settings() == [False], "the replay")
        # Another process changes the chat: no wake-up reaches the server, its look does.
        changed = subprocess.run(
            [sys.executable, "-m", "belt", "chat", "settings", chat_id, "--disable-hooks"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert changed.returncode == 0, changed.stderr
        eventually(lambda: settings() == [False, True], "the other process's write")
        done.set()
    reader.join(timeout=60)  # the server's stop ends the stream
    assert not reader.is_alive()


def test_the_inspector_stream_is_woken_by_a_journal_line_of_its_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from belt.server.app import create_app
    from belt.server.inspector import page as api
    from tests.servers import running, turn_start

    # With no fallback look in the test's lifetime, only the wake-up can bring the change.
    monkeypatch.setattr(api, "FALLBACK", 3600.0)
    payload = turn_start()
    with (
        running(create_app(store=open_store(), sweep_interval=0)) as url,
        CLIENT.stream("GET", f"{url}/inspector/stream", timeout=30) as reply,
    ):
        lines = reply.iter_lines()
        assert json.loads(next(lines))["type"] == "hello"
        assert CLIENT.post(f"{url}/hooks", json=payload).status_code == 200
        changed = json.loads(next(lines))
    assert changed["type"] == "changed" and "deliveries" in changed["areas"]
