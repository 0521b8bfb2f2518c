"""The inbox core: every run's gates, ids by short id or prefix, the transcript before a gate,
and the watch that finds what opened and settled from what changed on disk."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.errors import BeltError, Conflict, ExitCode, InvalidInput, NotFound
from belt.records import interrupts
from belt.records.interrupts import (
    Watch,
    cancel_interrupt,
    create_interrupt,
    find_interrupt_id,
    inbox,
    resolve_interrupt,
    sweep,
    transcript_before,
)
from belt.records.messages import MESSAGE, MESSAGES
from belt.store import Store

NOW = datetime.now(UTC)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def gate(store: Store, run_id: str = "run_1", chat_id: str = "ch_1", **kwargs) -> dict:
    kwargs.setdefault("event", "agent.tool_call")
    return create_interrupt(store=store, run_id=run_id, chat_id=chat_id, **kwargs)


def ids(records: list[dict]) -> list[str]:
    return [record["id"] for record in records]


# -- the inbox -----------------------------------------------------------------------------------


def test_inbox_lists_every_runs_pending_gates_newest_first(store: Store) -> None:
    first = gate(store, "run_a", now=NOW - timedelta(minutes=3))
    second = gate(store, "run_b", "ch_2", now=NOW - timedelta(minutes=2), default_resolution="deny")
    third = gate(store, "run_a", now=NOW - timedelta(minutes=1), reason="tool_approval")
    settled = gate(store, "run_c", now=NOW - timedelta(minutes=4))
    resolve_interrupt(store=store, interrupt_id=settled["id"], decision="deny")

    listed = inbox(store=store)
    assert ids(listed) == [third["id"], second["id"], first["id"]]
    assert listed[1]["default_resolution"] == "deny"  # what the CLI shows as "then"
    assert ids(inbox(store=store, include_settled=True)) == ids(listed) + [settled["id"]]
    assert ids(inbox(store=store, chat_id="ch_2")) == [second["id"]]
    assert ids(inbox(store=store, reason="tool_approval")) == [third["id"]]
    assert ids(inbox(store=store, reason="hook_gate", chat_id="ch_1")) == [first["id"]]
    # One run: in the order its gates opened, as `list RUN_ID` always listed them.
    assert ids(inbox(store=store, run_id="run_a")) == [first["id"], third["id"]]
    assert ids(inbox(store=store, run_id="run_c")) == []
    assert ids(inbox(store=store, run_id="run_c", include_settled=True)) == [settled["id"]]


def test_the_pending_inbox_reads_no_settled_interrupt(store: Store) -> None:
    pending = gate(store, "run_a")
    for _ in range(3):
        done = gate(store, "run_b")
        resolve_interrupt(store=store, interrupt_id=done["id"], decision="allow")
        # A damaged settled interrupt would fail any listing that read it.
        store.path("interrupt", done["id"]).write_bytes(b"{ damaged")
    assert ids(inbox(store=store)) == [pending["id"]]
    with pytest.raises(InvalidInput, match="damaged store file"):
        inbox(store=store, include_settled=True)


def test_the_inbox_skips_what_an_unfinished_creator_left(store: Store) -> None:
    store.tag(interrupts.PENDING, "001786456800000-int_ghost")
    store.tag(interrupts.PENDING, "not-a-marker")
    mine = gate(store)
    assert ids(inbox(store=store)) == [mine["id"]]


def test_the_inbox_refuses_hostile_ids(store: Store) -> None:
    for kwargs in ({"run_id": "../x"}, {"chat_id": "a/b"}):
        with pytest.raises(InvalidInput, match="invalid"):
            inbox(store=store, **kwargs)


# -- naming an interrupt by its short id or a prefix ---------------------------------------------


def test_an_interrupt_is_named_by_its_id_short_id_or_a_unique_prefix(store: Store) -> None:
    dto = gate(store)
    for ref in (dto["id"], dto["short_id"], dto["id"][:7], dto["short_id"][:3]):
        assert find_interrupt_id(store=store, ref=ref) == dto["id"]
        assert find_interrupt_id(store=store, ref=ref, pending_first=True) == dto["id"]


def plant(store: Store, interrupt_id: str, *, pending: bool) -> None:
    """An interrupt with a chosen id, written as ``create_interrupt`` writes one."""
    record = gate(Store(store.root.parent / "scratch"), timeout=600)
    record |= {"id": interrupt_id, "short_id": interrupt_id[4:12], "default_resolution": "allow"}
    if pending:
        store.tag(interrupts.PENDING, f"{1:015d}-{interrupt_id}")
    else:
        record |= {"status": "resolved", "resolution": "allow"}
    store.link(interrupts.RUN_INTERRUPTS, "run_1", interrupt_id)
    store.create(interrupts.INTERRUPT, interrupt_id, record)


def test_an_ambiguous_prefix_lists_the_candidates_and_exits_4(store: Store) -> None:
    plant(store, "int_abcd0000000000000001", pending=True)
    plant(store, "int_abcd0000000000000002", pending=True)
    plant(store, "int_abce0000000000000003", pending=False)
    with pytest.raises(Conflict) as caught:
        find_interrupt_id(store=store, ref="abcd")
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert "'abcd' names 2 interrupts" in caught.value.message
    assert "int_abcd0000000000000001, int_abcd0000000000000002" in caught.value.message
    assert caught.value.hint == "give more of the id, or the whole id"
    with pytest.raises(Conflict, match="names 3 interrupts"):
        find_interrupt_id(store=store, ref="int_abc")
    assert find_interrupt_id(store=store, ref="abcd0000000000000002") == (
        "int_abcd0000000000000002"
    )


def test_resolving_looks_among_the_pending_first(store: Store) -> None:
    plant(store, "int_abcd0000000000000001", pending=True)
    plant(store, "int_abcd0000000000000002", pending=False)
    plant(store, "int_wxyz0000000000000003", pending=False)
    with pytest.raises(Conflict, match="names 2"):
        find_interrupt_id(store=store, ref="abcd")
    assert find_interrupt_id(store=store, ref="abcd", pending_first=True) == (
        "int_abcd0000000000000001"
    )
    # No pending one matches: the settled one is found, and resolving it is the usual conflict.
    assert find_interrupt_id(store=store, ref="wx", pending_first=True) == (
        "int_wxyz0000000000000003"
    )


def test_an_unknown_prefix_is_not_found(store: Store) -> None:
    gate(store)
    with pytest.raises(NotFound, match="no interrupt zzzz") as caught:
        find_interrupt_id(store=store, ref="zzzz", pending_first=True)
    assert caught.value.exit_code == ExitCode.NOT_FOUND


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ref=st.text(max_size=40))
def test_any_reference_is_an_id_a_clear_error_or_a_refusal(store: Store, ref: str) -> None:
    dto = gate(store) if not store.tagged(interrupts.PENDING) else None
    known = dto["id"] if dto else store.list_ids("interrupt")[0]
    before = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    try:
        found = find_interrupt_id(store=store, ref=ref, pending_first=True)
    except BeltError as exc:
        assert exc.exit_code in (ExitCode.NOT_FOUND, ExitCode.CONFLICT, ExitCode.INVALID_INPUT)
    else:
        assert found == known
        assert known.startswith(ref) or known[4:].startswith(ref)
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == before


# -- the transcript just before a gate -----------------------------------------------------------


def message(store: Store, chat_id: str, order: int, text: str, created_at: str) -> None:
    message_id = f"msg_{order}"
    store.create(
        MESSAGE,
        message_id,
        {
            "id": message_id,
            "order": order,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "created_at": created_at,
        },
    )
    store.link(MESSAGES, chat_id, message_id)


def test_the_transcript_before_a_gate(store: Store) -> None:
    opened = datetime(2026, 8, 11, 14, 0, 0, tzinfo=UTC)
    for order in range(8):
        moment = opened + timedelta(seconds=order - 6)
        message(store, "ch_1", order, f"line {order}", interrupts.timestamp(moment))
    dto = gate(store, now=opened)
    before = transcript_before(store=store, record=dto, limit=3)
    assert [m["content"][0]["text"] for m in before] == ["line 4", "line 5", "line 6"]
    assert transcript_before(store=store, record={**dto, "chat_id": "ch_none"}) == []
    assert transcript_before(store=store, record={**dto, "chat_id": None}) == []


# -- watching ------------------------------------------------------------------------------------


def kinds(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["event"], e["interrupt"]["id"]) for e in events if "interrupt" in e]


def test_watch_reports_gates_pending_opened_and_settled(store: Store) -> None:
    old = gate(store, "run_a", default_resolution="deny")
    history = gate(store, "run_a", now=NOW - timedelta(hours=1))
    resolve_interrupt(
        store=store, interrupt_id=history["id"], decision="allow", now=NOW - timedelta(minutes=59)
    )
    watch = Watch(store=store)
    started = watch.start()
    assert kinds(started) == [("pending", old["id"])]
    assert started[0]["on_expiry"] == "deny"
    assert watch.poll() == []

    new = gate(store, "run_b")
    assert kinds(watch.poll()) == [("opened", new["id"])]
    resolve_interrupt(store=store, interrupt_id=new["id"], decision="deny")
    cancel_interrupt(store=store, interrupt_id=old["id"])
    events = watch.poll()
    assert sorted(kinds(events)) == sorted([("resolved", new["id"]), ("cancelled", old["id"])])
    assert {e["interrupt"]["id"]: e["interrupt"]["resolution"] for e in events}[new["id"]] == "deny"
    assert watch.poll() == []


def test_watch_sees_expiry_by_a_sweep(store: Store) -> None:
    due = gate(store, timeout=1, now=NOW - timedelta(seconds=30))
    watch = Watch(store=store)
    watch.start()
    sweep(store=store)
    assert kinds(watch.poll()) == [("expired", due["id"])]


def test_watch_sees_a_gate_opened_and_settled_between_two_looks(store: Store) -> None:
    gate(store, "run_known")
    watch = Watch(store=store)
    watch.start()
    on_known = gate(store, "run_known")
    resolve_interrupt(store=store, interrupt_id=on_known["id"], decision="allow")
    on_new = gate(store, "run_new")
    resolve_interrupt(store=store, interrupt_id=on_new["id"], decision="deny")
    assert sorted(kinds(watch.poll())) == sorted(
        [("resolved", on_known["id"]), ("resolved", on_new["id"])]
    )


def test_watch_sees_a_quick_gate_on_a_run_it_did_not_follow(store: Store) -> None:
    quiet = gate(store, "run_quiet", now=NOW - timedelta(hours=1))
    resolve_interrupt(
        store=store, interrupt_id=quiet["id"], decision="allow", now=NOW - timedelta(minutes=59)
    )
    watch = Watch(store=store)
    assert watch.start() == []
    time.sleep(0.01)
    quick = gate(store, "run_quiet")
    resolve_interrupt(store=store, interrupt_id=quick["id"], decision="allow")
    assert kinds(watch.poll()) == [("resolved", quick["id"])]


def test_watch_follows_only_the_runs_it_was_given(store: Store) -> None:
    watch = Watch(store=store, run_ids=["run_mine"])
    watch.start()
    gate(store, "run_other")
    mine = gate(store, "run_mine")
    assert kinds(watch.poll()) == [("opened", mine["id"])]


def test_while_nothing_changes_the_watch_reads_no_interrupt(store: Store) -> None:
    dtos = [gate(store, f"run_{i}") for i in range(5)]
    watch = Watch(store=store)
    assert len(watch.start()) == 5
    # Damage every interrupt file in place: the directories it stats do not change, so a watch
    # that read an interrupt would report it as a warning.
    for dto in dtos:
        store.path("interrupt", dto["id"]).write_bytes(b"{ damaged")
    for _ in range(3):
        assert watch.poll() == []


def test_watch_waits_for_a_creator_that_has_not_written_its_gate_yet(store: Store) -> None:
    watch = Watch(store=store)
    watch.start()
    # A creator marks and links a gate before it writes the gate itself.
    scratch = gate(Store(store.root.parent / "scratch"))
    store.tag(interrupts.PENDING, interrupts._pending_marker(scratch))
    store.link(interrupts.RUN_INTERRUPTS, "run_1", scratch["id"])
    assert watch.poll() == []
    store.create(interrupts.INTERRUPT, scratch["id"], {**scratch, "default_resolution": "allow"})
    assert kinds(watch.poll()) == [("opened", scratch["id"])]


def test_watch_warns_of_a_damaged_gate_and_goes_on(store: Store) -> None:
    watch = Watch(store=store)
    watch.start()
    bad = gate(store, "run_1")
    store.path("interrupt", bad["id"]).write_bytes(b"[]")
    good = gate(store, "run_2")
    events = watch.poll()
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert len(warnings) == 1 and str(store.path("interrupt", bad["id"])) in warnings[0]
    assert kinds(events) == [("opened", good["id"])]
    assert watch.poll() == []


def test_a_change_in_the_same_clock_tick_is_not_missed(store: Store) -> None:
    watch = Watch(store=store)
    watch.start()
    first = gate(store, "run_1")
    assert kinds(watch.poll()) == [("opened", first["id"])]
    # The tag directory's time goes back to what the last look saw, as a coarse clock would.
    tags = store.root / "tags" / interrupts.PENDING
    seen = os.stat(tags).st_mtime_ns
    second = gate(store, "run_1")
    os.utime(tags, ns=(seen, seen))
    assert kinds(watch.poll()) == [("opened", second["id"])]
