"""The simulation's record: messages written by two processes keep distinct orders."""

from __future__ import annotations

import multiprocessing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from belt.errors import InvalidInput
from belt.records.chats import create_chat
from belt.records.interrupts import transcript_before
from belt.records.messages import MESSAGE, MESSAGES, NewMessage, Recorder, chat_messages
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


def legacy_injection(**sim: Any) -> NewMessage:
    info = {"role": None, "ttl_turns": 2, "dedup_key": "k", "items": None, "source": "h", "turn": 0}
    return NewMessage(
        role="injection",
        run_id=None,
        content=[{"type": "text", "text": "note"}],
        sim={"tokens": 1, "bytes": 4, "injection": info, **sim},
    )


def test_injections_written_before_their_rows_were_kept_in_them_read_as_written(
    tmp_path: Path,
) -> None:
    # A store written when a row had a file of its own and an injection's end was saved on it.
    store = Store(tmp_path / "store")
    chat_id = create_chat(store, agent_id="ag_1")["id"]
    old = Recorder(store, chat_id)
    row = NewMessage(role="event", run_id=None, content=[{"type": "event", "text": "hook"}])
    old.add_messages(
        [
            row,
            legacy_injection(active=False, remaining=1, ended="replaced"),
            row,
            legacy_injection(active=True, remaining=1),
        ]
    )
    old.update_chat(turn_count=1)
    written = [store.read(MESSAGE, m) for m in store.members(MESSAGES, chat_id)]
    read = chat_messages(store, chat_id, 1)
    assert [m["role"] for m in read] == ["event", "injection", "event", "injection"]
    assert read[:3] == written[:3]
    assert read[3]["sim"] == {**written[3]["sim"], "remaining": 1}
    assert chat_messages(store, chat_id, 2)[3]["sim"] == {
        **written[3]["sim"],
        "active": False,
        "remaining": 0,
        "ended": "ttl",
    }


def test_an_injection_whose_row_is_damaged_is_reported_with_its_path(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    chat_id = create_chat(store, agent_id="ag_1")["id"]
    row = NewMessage(role="event", run_id=None, content=[{"type": "event", "text": "hook"}])
    [_, injection] = Recorder(store, chat_id).add_messages(
        [replace(legacy_injection(active=True, remaining=2), row=row)]
    )
    assert [m["role"] for m in Recorder(store, chat_id).messages] == ["event", "injection"]
    stored = store.read(MESSAGE, injection["id"])
    store.write(MESSAGE, injection["id"], {**stored, "sim": {**stored["sim"], "row": [1]}})
    with pytest.raises(InvalidInput) as caught:
        chat_messages(store, chat_id, 0)
    assert str(store.path(MESSAGE, injection["id"])) in str(caught.value)
    assert "sim.row" in str(caught.value)


def test_the_transcript_before_a_gate_shows_an_injections_row_before_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    chat_id = create_chat(store, agent_id="ag_1")["id"]
    recorder = Recorder(store, chat_id)
    recorder.add_message(role="user", run_id=None, content=[{"type": "text", "text": "hi"}])
    row = NewMessage(role="event", run_id=None, content=[{"type": "event", "text": "hook"}])
    recorder.add_messages([replace(legacy_injection(active=True, remaining=2), row=row)])
    gate = {"chat_id": chat_id, "created_at": "9999-01-01T00:00:00.000Z"}
    before = transcript_before(store=store, record=gate, limit=2)
    assert [(m["order"], m["role"]) for m in before] == [(1, "event"), (2, "injection")]
    assert "row" not in before[1]["sim"]
    assert [m["role"] for m in transcript_before(store=store, record=gate)] == [
        "user",
        "event",
        "injection",
    ]
