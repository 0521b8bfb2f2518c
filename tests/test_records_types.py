"""The record types: the fields of each kind's TypedDict are checked on read, and the typed
readers give what passed that check (that every kind has its TypedDict: tests/test_store.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from belt.errors import ExitCode, InvalidInput, NotFound
from belt.records import chats, hooktasks, interrupts, sims
from belt.records.runs import RUN, get_run, read_run
from belt.store import Store
from belt.store.shapes import shape_problem


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", shapes=True)


def test_a_run_is_read_through_its_typed_readers(store: Store) -> None:
    assert get_run(store, "ar_1") is None
    with pytest.raises(NotFound) as caught:
        read_run(store, "ar_1")
    assert caught.value.exit_code == ExitCode.NOT_FOUND
    store.create(RUN, "ar_1", {"id": "ar_1", "state": "working", "lease": None})
    assert (
        read_run(store, "ar_1")
        == get_run(store, "ar_1")
        == {
            "id": "ar_1",
            "state": "working",
            "lease": None,
        }
    )


def test_a_run_whose_lease_is_not_an_object_is_damaged(store: Store) -> None:
    store.create(RUN, "ar_1", {"id": "ar_1", "state": "working", "lease": "mine"})
    with pytest.raises(InvalidInput, match="its lease is not an object or null"):
        get_run(store, "ar_1")


def test_a_chat_whose_graph_or_settings_are_not_objects_is_damaged(store: Store) -> None:
    assert shape_problem(chats.CHAT, {"id": "ch_1", "graph": []}) == "its graph is not an object"
    assert shape_problem(chats.CHAT, {"id": "ch_1", "agent_data": 1}) == (
        "its agent_data is not an object or null"
    )
    store.create(chats.CHAT, "ch_1", {"id": "ch_1", "graph": "review"})
    with pytest.raises(InvalidInput, match="its graph is not an object"):
        chats.read_chat(store, "ch_1")


def test_a_childs_parent_and_a_registry_are_objects(store: Store) -> None:
    sim = {"id": "sim_1", "chat_id": "ch_1", "next_turn": 0, "status": "running"}
    assert shape_problem(sims.SIM, {**sim, "parent": "sim_0"}) == "its parent is not an object"
    assert shape_problem(sims.SIM, {**sim, "registry": []}) == "its registry is not an object"
    assert shape_problem(sims.SIM, {**sim, "parent": {"sim_id": "s", "chat_id": "c"}}) is None


def test_fields_belt_writes_are_checked_with_their_types(store: Store) -> None:
    run = {"id": "ar_1", "state": "working"}
    assert shape_problem(RUN, {**run, "created_at": 5}) == "its created_at is not a string"
    assert shape_problem(RUN, {**run, "interrupt_reason": None}) is None
    task = {"id": "t", "task_key": "k", "event": "e", "tool": "x", "status": "pending"}
    task |= {"attempt": 1, "run_id": "ar_1", "timeout_ms": 100}
    assert shape_problem(hooktasks.HOOKTASK, {**task, "tool_only": "yes"}) == (
        "its tool_only is not true or false"
    )


def test_an_interrupt_settled_before_the_trail_still_reads(store: Store) -> None:
    gate = {"id": "int_1", "status": "resolved", "run_id": "ar_1"}
    assert shape_problem(interrupts.INTERRUPT, {**gate, "resolved_by": "cli"}) is None
    assert shape_problem(interrupts.INTERRUPT, {**gate, "resolved_by": None}) is None
    assert shape_problem(interrupts.INTERRUPT, {**gate, "resolved_by": 3}) == (
        "its resolved_by is not an object or a string or null"
    )
    assert interrupts.settled_by({**gate, "resolved_by": "cli"}) == "unknown (recorded as: cli)"
