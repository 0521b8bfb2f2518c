"""``belt chat settings`` against the local store."""

from __future__ import annotations

from belt.records.chats import CHAT, disabled
from belt.store import open_store
from tests.cli.runner import belt


def a_chat(chat_id: str = "ch_1") -> None:
    open_store().create(CHAT, chat_id, {"id": chat_id})


def test_disable_and_enable_hooks() -> None:
    a_chat()
    result = belt("chat", "settings", "ch_1", "--disable-hooks")
    assert result.exit_code == 0
    assert result.stdout == "hooks disabled for chat ch_1\n"
    assert disabled(open_store().get(CHAT, "ch_1"))

    result = belt("chat", "settings", "ch_1", "--enable-hooks", "--json")
    assert result.exit_code == 0
    chat = result.json()
    assert chat["id"] == "ch_1"
    assert chat["agent_data"] == {"disable_hooks": False}
    assert not disabled(open_store().get(CHAT, "ch_1"))
    assert open_store().read("chat", "ch_1") == chat


def test_one_of_the_flags_is_required() -> None:
    result = belt("chat", "settings", "ch_1")
    assert result.exit_code == 2
    assert "give --disable-hooks or --enable-hooks" in result.stderr
    assert not open_store().exists("chat", "ch_1")


def test_a_hostile_chat_id_exits_5() -> None:
    result = belt("chat", "settings", "../../x", "--disable-hooks")
    assert result.exit_code == 5
    assert "invalid chat id" in result.stderr


def test_a_damaged_chat_exits_5_and_is_left_alone() -> None:
    a_chat()
    path = open_store().path("chat", "ch_1")
    path.write_bytes(b'{"belt": "object", "schema": 1')
    result = belt("chat", "settings", "ch_1", "--enable-hooks")
    assert result.exit_code == 5
    assert str(path) in result.stderr
    assert path.read_bytes() == b'{"belt": "object", "schema": 1'


def test_a_chat_that_does_not_exist_is_not_found_and_never_made() -> None:
    result = belt("chat", "settings", "ch_nothere", "--disable-hooks")
    assert result.exit_code == 3
    assert result.stderr.startswith("error: no chat ch_nothere\n")
    assert not open_store().exists(CHAT, "ch_nothere")


def test_a_chat_is_named_by_its_short_id_or_a_unique_prefix() -> None:
    a_chat("ch_k2m9x0q4h7c1v8b5n3t6")
    a_chat("ch_q0000000000000000000")
    result = belt("chat", "settings", "k2m9x0q4", "--disable-hooks")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "hooks disabled for chat ch_k2m9x0q4h7c1v8b5n3t6\n"
    assert disabled(open_store().get(CHAT, "ch_k2m9x0q4h7c1v8b5n3t6"))
    ambiguous = belt("chat", "settings", "ch_", "--enable-hooks")
    assert ambiguous.exit_code == 4
    assert ambiguous.stderr.startswith(
        "error: 'ch_' names 2 chats: ch_k2m9x0q4h7c1v8b5n3t6, ch_q0000000000000000000\n"
    )
