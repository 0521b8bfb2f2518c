"""Messages recorded together (a hook's transcript row and its injection): one append lists them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from belt.records.chats import create_chat
from belt.records.messages import MESSAGE, MESSAGES, NewMessage, Recorder
from belt.store import Store

ROOT = Path(__file__).parent.parent


def text(role: str, words: str) -> NewMessage:
    return NewMessage(role=role, run_id=None, content=[{"type": "text", "text": words}])


def index_lines(store: Store, chat_id: str) -> list[str]:
    return store.index_path(MESSAGES, chat_id).read_text().splitlines()


def test_messages_recorded_together_are_listed_in_order_by_one_append(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", fsync=False)
    chat_id = create_chat(store, agent_id="ag_1")["id"]
    engine = Recorder(store, chat_id)
    engine.add_message(role="user", run_id=None, content=[{"type": "text", "text": "hi"}])
    before = index_lines(store, chat_id)
    row, injection = engine.add_messages([text("event", "hook ran"), text("injection", "note")])
    assert [row["order"], injection["order"]] == [1, 2]
    # The two lines of the index were added in one write: both, after the lines before.
    assert index_lines(store, chat_id)[: len(before)] == before
    assert len(index_lines(store, chat_id)) == len(before) + 2
    stored = Recorder(store, chat_id).messages
    assert [(m["order"], m["role"]) for m in stored] == [
        (0, "user"),
        (1, "event"),
        (2, "injection"),
    ]
    assert stored[1] == row and stored[2] == injection
    assert engine.add_messages([]) == []
    assert engine.add_message(role="assistant", run_id=None, content=[])["order"] == 3


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from belt.records.messages import NewMessage, Recorder
    from belt.store import Store

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    Store.link_all = die  # killed once the files are written, before any is listed
    store = Store(Path(sys.argv[1]), fsync=False)
    Recorder(store, sys.argv[2]).add_messages(
        [
            NewMessage(role="event", run_id=None, content=[], message_id="msg_row"),
            NewMessage(role="injection", run_id=None, content=[], message_id="msg_note"),
        ]
    )
    """
)


def test_a_writer_killed_before_listing_messages_recorded_together_leaves_none_listed(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store", fsync=False)
    chat_id = create_chat(store, agent_id="ag_1")["id"]
    Recorder(store, chat_id).add_message(
        role="user", run_id=None, content=[{"type": "text", "text": "hi"}]
    )
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(store.root), chat_id],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # Both files were written, neither is listed: the chat reads as it was.
    assert store.exists(MESSAGE, "msg_row") and store.exists(MESSAGE, "msg_note")
    assert store.members(MESSAGES, chat_id) == [Recorder(store, chat_id).messages[0]["id"]]
    engine = Recorder(store, chat_id)
    assert [m["role"] for m in engine.messages] == ["user"]
    # A writer that goes on gives the next order, and may write a set-aside id left unlisted.
    again = engine.add_messages([text("event", "hook ran"), text("injection", "note")])
    assert [m["order"] for m in again] == [1, 2]
    reply = engine.add_message(role="assistant", run_id=None, content=[], message_id="msg_row")
    assert reply["order"] == 3
    assert store.read(MESSAGE, "msg_row") == reply
