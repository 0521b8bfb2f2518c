"""Chat settings in the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from belt.errors import InvalidInput, NotFound
from belt.records.chats import CHAT, disabled, set_chat_settings
from belt.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def test_settings_of_a_missing_chat_are_not_found_and_make_no_chat(store: Store) -> None:
    with pytest.raises(NotFound, match="no chat ch_1"):
        set_chat_settings(store=store, chat_id="ch_1", disable_hooks=True)
    assert not store.exists(CHAT, "ch_1")


def test_settings_switch_a_chats_hooks_off(store: Store) -> None:
    store.create(CHAT, "ch_1", {"id": "ch_1"})
    assert not disabled(store.get(CHAT, "ch_1"))
    chat = set_chat_settings(store=store, chat_id="ch_1", disable_hooks=True)
    assert chat["id"] == "ch_1"
    assert chat["agent_data"] == {"disable_hooks": True}
    assert store.read("chat", "ch_1") == chat
    assert disabled(store.get(CHAT, "ch_1"))


def test_settings_keep_everything_else_on_the_chat(store: Store) -> None:
    store.create(
        "chat",
        "ch_1",
        {"id": "ch_1", "status": "idle", "agent_id": "ag_1", "agent_data": {"allow_all_tools": 1}},
    )
    set_chat_settings(store=store, chat_id="ch_1", disable_hooks=True)
    chat = set_chat_settings(store=store, chat_id="ch_1", disable_hooks=False)
    assert chat["status"] == "idle" and chat["agent_id"] == "ag_1"
    assert chat["agent_data"] == {"allow_all_tools": 1, "disable_hooks": False}
    assert store.read("chat", "ch_1") == chat
    assert not disabled(store.get(CHAT, "ch_1"))


def test_a_damaged_chat_is_reported_and_left_alone(store: Store) -> None:
    store.create("chat", "ch_1", {"id": "ch_1"})
    path = store.path("chat", "ch_1")
    path.write_bytes(b"[]")
    with pytest.raises(InvalidInput, match=str(path)):
        set_chat_settings(store=store, chat_id="ch_1", disable_hooks=True)
    assert path.read_bytes() == b"[]"


def test_a_hostile_chat_id_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput, match="invalid chat id"):
        set_chat_settings(store=store, chat_id="../ch", disable_hooks=True)


def test_a_recorder_decodes_nothing_to_refresh_what_it_wrote_yet_sees_a_later_setting(
    store: Store, decoded: list[object]
) -> None:
    from belt.records.messages import Recorder

    store.create(CHAT, "ch_1", {"id": "ch_1", "status": "idle"})
    recorder = Recorder(store, "ch_1")
    recorder.refresh_chat()
    for turn in range(3):
        recorder.update_chat(turn_count=turn)
        decoded.clear()
        assert recorder.refresh_chat()["turn_count"] == turn
        assert decoded == []  # the file is the one it wrote: a stat, nothing decoded
    recorder.release_chat(None)
    decoded.clear()
    assert not disabled(recorder.refresh_chat())
    assert decoded == []
    # Switched off by another process right after this one's write, with no refresh between.
    recorder.update_chat(turn_count=9)
    set_chat_settings(store=Store(store.root), chat_id="ch_1", disable_hooks=True)
    chat = recorder.refresh_chat()
    assert disabled(chat) and chat["turn_count"] == 9
