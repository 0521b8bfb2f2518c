"""The interrupt core: create, list, show, resolve and sweep over the store."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from belt.errors import Conflict, ExitCode, InvalidInput, NotFound
from belt.records import interrupts
from belt.records.interrupts import (
    create_interrupt,
    get_interrupt,
    list_interrupts,
    read_record,
    resolve_interrupt,
    sweep,
)
from belt.store import Store
from belt.wire.platform import InterruptDTO

T0 = datetime(2026, 8, 11, 14, 0, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def gate(store: Store, run_id: str = "run_1", **kwargs) -> dict:
    kwargs.setdefault("event", "agent.tool_call")
    kwargs.setdefault("now", T0)
    return create_interrupt(store=store, run_id=run_id, chat_id="ch_1", **kwargs)


def test_dto_fields_are_the_wire_model_fields() -> None:
    assert interrupts.DTO_FIELDS == tuple(InterruptDTO.model_fields)


def test_a_tool_call_gate(store: Store) -> None:
    dto = gate(store, resource_id="ti_9", meta={"event": "agent.tool_call", "data": {"tool": "rm"}})
    assert list(dto) == list(interrupts.DTO_FIELDS)
    assert dto["id"].startswith("int_") and dto["id"].removeprefix("int_").startswith(
        dto["short_id"]
    )
    assert dto | {"id": None, "short_id": None} == {
        "id": None,
        "short_id": None,
        "created_at": "2026-08-11T14:00:00.000Z",
        "updated_at": "2026-08-11T14:00:00.000Z",
        "run_id": "run_1",
        "chat_id": "ch_1",
        "reason": "hook_gate",
        "source": "hook:agent.tool_call",
        "resource_id": "ti_9",
        "resource_type": "tool_invocation",
        "status": "pending",
        "resolution": None,
        "resolved_at": None,
        "resolved_data": None,
        "expires_at": "2026-08-11T14:05:00.000Z",
        "meta": {"event": "agent.tool_call", "data": {"tool": "rm"}},
    }
    InterruptDTO.model_validate(dto)
    record = read_record(store=store, interrupt_id=dto["id"])
    assert record["default_resolution"] == "allow"
    assert "default_resolution" not in get_interrupt(store=store, interrupt_id=dto["id"])


def test_a_turn_gate_guards_the_hook_event_and_carries_a_payload(store: Store) -> None:
    dto = gate(store, event="agent.turn_start", timeout=60, default_resolution="deny")
    assert dto["resource_type"] == "hook_event"
    assert dto["source"] == "hook:agent.turn_start"
    assert dto["expires_at"] == "2026-08-11T14:01:00.000Z"
    assert dto["meta"] == {
        "event": "agent.turn_start",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "run_id": "run_1",
        "chat_id": "ch_1",
    }
    assert read_record(store=store, interrupt_id=dto["id"])["default_resolution"] == "deny"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"event": "agent.complete"}, "a gate cannot attach to agent.complete"),
        ({"event": "agent.bogus"}, "unknown event"),
        ({"timeout": 0}, "1 through 86400"),
        ({"timeout": 86401}, "1 through 86400"),
        ({"default_resolution": "maybe"}, "must be allow or deny"),
        ({"reason": "coffee"}, "unknown interrupt reason"),
        ({"run_id": "../run"}, "invalid run id"),
    ],
)
def test_create_refuses_what_a_gate_cannot_be(store: Store, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        gate(store, **kwargs)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert not (store.root / "objects").exists()


def test_timeout_bounds_are_inclusive(store: Store) -> None:
    assert gate(store, timeout=1)["expires_at"] == "2026-08-11T14:00:01.000Z"
    assert gate(store, timeout=86400)["expires_at"] == "2026-08-12T14:00:00.000Z"


def test_list_shows_one_runs_pending_interrupts_oldest_first(store: Store) -> None:
    first = gate(store, now=T0)
    second = gate(store, now=T0 + timedelta(seconds=5))
    third = gate(store, now=T0 + timedelta(seconds=1))
    gate(store, run_id="run_2")
    resolve_interrupt(store=store, interrupt_id=third["id"], decision="deny")
    ids = [item["id"] for item in list_interrupts(store=store, run_id="run_1")]
    assert ids == [first["id"], second["id"]]
    everything = list_interrupts(store=store, run_id="run_1", include_settled=True)
    assert [item["id"] for item in everything] == [first["id"], third["id"], second["id"]]
    assert list_interrupts(store=store, run_id="run_none") == []


def test_resolve_records_the_decision_and_its_data(store: Store) -> None:
    dto = gate(store)
    later = T0 + timedelta(seconds=30)
    resolved = resolve_interrupt(
        store=store, interrupt_id=dto["id"], decision="deny", data={"by": "ana"}, now=later
    )
    assert resolved == dto | {
        "status": "resolved",
        "resolution": "deny",
        "resolved_at": "2026-08-11T14:00:30.000Z",
        "updated_at": "2026-08-11T14:00:30.000Z",
        "resolved_data": {"by": "ana"},
    }
    assert get_interrupt(store=store, interrupt_id=dto["id"]) == resolved
    assert store.tagged(interrupts.PENDING) == []


def test_a_settled_interrupt_is_a_conflict_and_stays_as_it_was(store: Store) -> None:
    dto = gate(store)
    resolve_interrupt(store=store, interrupt_id=dto["id"], decision="allow")
    path = store.path("interrupt", dto["id"])
    before = path.read_bytes()
    with pytest.raises(Conflict, match="no longer pending: it is resolved \\(allow\\)") as caught:
        resolve_interrupt(store=store, interrupt_id=dto["id"], decision="deny", data=1)
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert path.read_bytes() == before


def test_unknown_and_malformed_ids(store: Store) -> None:
    with pytest.raises(NotFound) as caught:
        resolve_interrupt(store=store, interrupt_id="int_missing", decision="allow")
    assert caught.value.hint and "belt interrupt list" in caught.value.hint
    with pytest.raises(NotFound):
        get_interrupt(store=store, interrupt_id="int_missing")
    with pytest.raises(InvalidInput):
        get_interrupt(store=store, interrupt_id="../../etc/passwd")
    with pytest.raises(InvalidInput, match="allow or deny"):
        resolve_interrupt(store=store, interrupt_id=gate(store)["id"], decision="stop")


def test_racing_threads_exactly_one_resolves(tmp_path: Path) -> None:
    dto = gate(Store(tmp_path / "store"))
    barrier = threading.Barrier(16)
    outcomes: list[str] = []

    def race(decision: str) -> None:
        mine = Store(tmp_path / "store")
        barrier.wait()
        try:
            resolve_interrupt(store=mine, interrupt_id=dto["id"], decision=decision, data=decision)
            outcomes.append(f"won {decision}")
        except Conflict:
            outcomes.append("conflict")

    threads = [
        threading.Thread(target=race, args=("allow" if i % 2 else "deny",)) for i in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1 and outcomes.count("conflict") == 15
    stored = get_interrupt(store=Store(tmp_path / "store"), interrupt_id=dto["id"])
    assert f"won {stored['resolution']}" == winners[0]
    assert stored["resolved_data"] == stored["resolution"]


def test_sweep_settles_overdue_gates_with_their_default(store: Store) -> None:
    allow = gate(store, timeout=10)
    deny = gate(store, timeout=10, default_resolution="deny")
    later = gate(store, timeout=100)
    done = gate(store, timeout=10)
    resolve_interrupt(store=store, interrupt_id=done["id"], decision="deny", now=T0)

    assert sweep(store=store, now=T0 + timedelta(seconds=9, milliseconds=999)) == []
    settled = sweep(store=store, now=T0 + timedelta(seconds=10))
    at = "2026-08-11T14:00:10.000Z"
    assert sorted(settled, key=lambda d: d["resolution"]) == [
        allow | {"status": "expired", "resolution": "allow", "resolved_at": at, "updated_at": at},
        deny | {"status": "expired", "resolution": "deny", "resolved_at": at, "updated_at": at},
    ]
    by_id = {item["id"]: item for item in settled}
    assert get_interrupt(store=store, interrupt_id=allow["id"]) == by_id[allow["id"]]
    assert get_interrupt(store=store, interrupt_id=later["id"])["status"] == "pending"
    assert get_interrupt(store=store, interrupt_id=done["id"])["resolution"] == "deny"
    assert sweep(store=store, now=T0 + timedelta(seconds=50)) == []
    assert [d["id"] for d in sweep(store=store, now=T0 + timedelta(days=1))] == [later["id"]]
    assert store.tagged(interrupts.PENDING) == []


def test_sweep_denies_an_interrupt_stored_without_a_default(store: Store) -> None:
    dto = gate(store, reason="tool_approval", timeout=5)
    assert read_record(store=store, interrupt_id=dto["id"])["default_resolution"] is None
    [settled] = sweep(store=store, now=T0 + timedelta(seconds=5))
    assert (settled["status"], settled["resolution"]) == ("expired", "deny")


def test_an_expired_gate_can_no_longer_be_resolved(store: Store) -> None:
    dto = gate(store, timeout=5)
    sweep(store=store, now=T0 + timedelta(minutes=1))
    with pytest.raises(Conflict, match="it is expired \\(allow\\)"):
        resolve_interrupt(store=store, interrupt_id=dto["id"], decision="deny")


def test_operations_read_only_their_own_files(store: Store) -> None:
    # A damaged interrupt is reported by whatever reads it, so nothing else may read it.
    mine = gate(store, run_id="run_a", timeout=10)
    other = gate(store, run_id="run_b", timeout=1000)
    path = store.path("interrupt", other["id"])
    path.write_bytes(b"{ damaged")

    assert [d["id"] for d in list_interrupts(store=store, run_id="run_a")] == [mine["id"]]
    assert get_interrupt(store=store, interrupt_id=mine["id"])["status"] == "pending"
    assert [d["id"] for d in sweep(store=store, now=T0 + timedelta(seconds=60))] == [mine["id"]]
    assert path.read_bytes() == b"{ damaged"
    with pytest.raises(InvalidInput, match=str(path)):
        list_interrupts(store=store, run_id="run_b")


def test_sweep_settles_the_rest_and_then_reports_a_damaged_file(store: Store) -> None:
    good = gate(store, timeout=10)
    bad = gate(store, timeout=10)
    path = store.path("interrupt", bad["id"])
    path.write_bytes(b"")
    with pytest.raises(InvalidInput, match="settled 1 overdue interrupt") as caught:
        sweep(store=store, now=T0 + timedelta(seconds=10))
    assert any(str(path) in problem for problem in caught.value.problems)
    assert get_interrupt(store=store, interrupt_id=good["id"])["status"] == "expired"
    assert path.read_bytes() == b""


def test_leftovers_of_an_unfinished_create_are_skipped_and_cleared(store: Store) -> None:
    # A creator killed after its marker and link but before the object itself.
    store.tag(interrupts.PENDING, "001786456800000-int_ghost")
    store.link(interrupts.RUN_INTERRUPTS, "run_1", "int_ghost")
    assert list_interrupts(store=store, run_id="run_1", include_settled=True) == []
    assert sweep(store=store, now=T0 + timedelta(days=1)) == []
    assert store.tagged(interrupts.PENDING) == []


def test_cancel(store: Store) -> None:
    dto = gate(store, timeout=10)
    cancelled = interrupts.cancel_interrupt(
        store=store, interrupt_id=dto["id"], now=T0 + timedelta(seconds=2)
    )
    assert (cancelled["status"], cancelled["resolution"]) == ("cancelled", None)
    assert cancelled["resolved_at"] == "2026-08-11T14:00:02.000Z"
    assert list_interrupts(store=store, run_id="run_1") == []
    assert sweep(store=store, now=T0 + timedelta(days=1)) == []
    with pytest.raises(Conflict, match="it is cancelled"):
        interrupts.cancel_interrupt(store=store, interrupt_id=dto["id"])
    with pytest.raises(Conflict):
        resolve_interrupt(store=store, interrupt_id=dto["id"], decision="allow")
    with pytest.raises(NotFound):
        interrupts.cancel_interrupt(store=store, interrupt_id="int_none")


# -- a gate opened by hand needs a running conversation ------------------------------------------


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and what it holds: what a refused command must leave as it was."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def run_in_chat(store: Store, state: str = "working") -> tuple[str, str]:
    """A run of the store in ``state``, and its chat (written as a simulation writes them)."""
    from belt.records.chats import create_chat
    from belt.records.runs import RUN, RunRecord

    chat = create_chat(store, agent_id="agent_1")
    run = RunRecord.create(
        store, sim_id="sim_1", agent_id="agent_1", chat_id=chat["id"], turn_index=0, execution={}
    )
    store.update(RUN, run.id, lambda data: {**data, "state": state})
    return run.id, chat["id"]


@pytest.mark.parametrize("state", ["working", "input_required"])
def test_a_gate_opens_by_hand_on_a_running_or_waiting_run_in_its_chat(
    store: Store, state: str
) -> None:
    run_id, chat_id = run_in_chat(store, state)
    dto = interrupts.open_gate(
        store=store, run_id=run_id[:8], chat_id=chat_id[:8], event="agent.tool_call"
    )
    # Named by a prefix, stored by its whole id.
    assert (dto["run_id"], dto["chat_id"], dto["status"]) == (run_id, chat_id, "pending")
    assert list_interrupts(store=store, run_id=run_id) == [dto]


def refused(store: Store, error: type[Exception], match: str, **where: Any) -> None:
    """``open_gate`` with ``where`` raises ``error`` matching ``match`` and writes nothing."""
    before = files_of(store.root)
    where.setdefault("event", "agent.tool_call")
    with pytest.raises(error, match=match):
        interrupts.open_gate(store=store, **where)
    assert files_of(store.root) == before


def test_a_gate_by_hand_on_an_unknown_run_or_chat_is_not_found(store: Store) -> None:
    run_id, chat_id = run_in_chat(store)
    refused(store, NotFound, "^no run ar_doesnotexist$", run_id="ar_doesnotexist", chat_id=chat_id)
    refused(store, NotFound, "^no chat ch_doesnotexist$", run_id=run_id, chat_id="ch_doesnotexist")


OTHER_STATES = [
    "submitted", "auth_required", "completed", "failed", "canceled", "rejected", "attention_hold"
]  # fmt: skip


@pytest.mark.parametrize("state", OTHER_STATES)
def test_a_gate_by_hand_on_a_run_neither_running_nor_waiting_is_a_conflict(
    store: Store, state: str
) -> None:
    run_id, chat_id = run_in_chat(store, state)
    refused(
        store,
        Conflict,
        f"^run {run_id} is {state}: a gate opens only on a run that is working or awaiting a "
        r"decision \(input_required\)$",
        run_id=run_id,
        chat_id=chat_id,
    )


def test_the_states_a_gate_by_hand_opens_on_are_the_wire_states_left_over() -> None:
    from belt.wire.enums import ATTENTION_HOLD, AgentRunState

    assert {str(s) for s in interrupts.ACTIVE_RUN_STATES} | set(OTHER_STATES) == {
        *(s.value for s in AgentRunState),
        ATTENTION_HOLD,
    }


def test_a_gate_by_hand_in_a_chat_its_run_is_not_in_is_a_conflict(store: Store) -> None:
    run_id, chat_id = run_in_chat(store)
    _, other_chat = run_in_chat(store)
    refused(
        store,
        Conflict,
        f"^run {run_id} does not belong to chat {other_chat} \\(its chat is {chat_id}\\)$",
        run_id=run_id,
        chat_id=other_chat,
    )


def test_a_gate_by_hand_checks_its_terms_before_the_store(store: Store) -> None:
    run_id, chat_id = run_in_chat(store)
    refused(
        store,
        InvalidInput,
        "a gate cannot attach to agent.complete",
        run_id="ar_x",
        chat_id="ch_x",
        event="agent.complete",
    )
    refused(store, InvalidInput, "1 through 86400", run_id=run_id, chat_id=chat_id, timeout=0)
