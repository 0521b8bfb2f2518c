"""The simulation's record: messages written by two processes keep distinct orders."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from belt.records.chats import create_chat
from belt.records.messages import Recorder
from belt.store import Store


def add_from_another_process(root: str, chat_id: str) -> None:
    Recorder(Store(Path(root)), chat_id).add_message(
        role="event", run_id=None, content=[{"type": "event", "text": "from elsewhere"}]
    )


def test_a_writer_sees_messages_another_process_added(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    chat_id = create_chat(store, agent_id="ag_1")["id"]
    engine = Recorder(store, chat_id)
    engine.add_message(role="user", run_id=None, content=[{"type": "text", "text": "hi"}])

    other = multiprocessing.get_context("spawn").Process(
        target=add_from_another_process, args=(str(store.root), chat_id)
    )
    other.start()
    other.join(30)
    assert other.exitcode == 0

    engine.add_message(role="assistant", run_id=None, content=[{"type": "text", "text": "yo"}])
    stored = Recorder(store, chat_id).messages
    assert [(m["order"], m["role"]) for m in stored] == [
        (0, "user"),
        (1, "event"),
        (2, "assistant"),
    ]


def test_a_set_aside_id_is_created_and_one_a_killed_writer_left_unlisted_is_written_again(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    chat_id = create_chat(store, agent_id="ag_1")["id"]
    engine = Recorder(store, chat_id)
    engine.add_message(
        role="user", run_id=None, content=[{"type": "text", "text": "hi"}], message_id="msg_in"
    )
    # A new file needs no lock: created, as a message with an id of its own is.
    assert not (store.root / "locks" / "objects" / "message").exists()
    # A process killed after writing its reply, before listing it.
    store.create("message", "msg_out", {"id": "msg_out", "stale": True})
    reply = engine.add_message(
        role="assistant",
        run_id=None,
        content=[{"type": "text", "text": "yo"}],
        message_id="msg_out",
    )
    assert store.read("message", "msg_out") == reply
    stored = Recorder(store, chat_id).messages
    assert [(m["id"], m["order"]) for m in stored] == [("msg_in", 0), ("msg_out", 1)]
