"""The inspector's deliveries kept within bounds: the window of summaries held in memory, the
bytes of one answer, and text searches that read recorded lines a piece at a time."""

from __future__ import annotations

import json
import threading
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.errors import InvalidInput, NotFound
from belt.records.journal import JOURNAL, SERVE
from belt.server.app import create_app
from belt.server.inspector import deliveries as inspector_deliveries
from belt.server.inspector.deliveries import SUMMARY_CHARS, Deliveries
from belt.store import Store
from tests.loopback import CLIENT
from tests.servers import running

MiB = 1024 * 1024


def journal(store: Store, number: int, *, padding: int = 0, reason: str = "ok") -> None:
    """``number`` hook requests in the serve journal, as ``belt serve`` records them, the
    n-th one's payload holding ``needle-<n>`` and ``padding`` bytes more."""
    fast = store.without_fsync()
    for n in range(number):
        request = {
            "event": "agent.tool_call",
            "timestamp": "2026-08-11T14:00:00.000Z",
            "agent_id": "ag_1",
            "chat_id": f"ch_{n % 3}",
            "run_id": "ar_1",
            "turn_count": n,
            "data": {
                "tool": "rm",
                "arguments": {"path": f"/tmp/needle-{n}/", "pad": "x" * padding},
            },
        }
        record = {
            "kind": "hook",
            "at": f"2026-08-11T14:{n // 60:02d}:{n % 60:02d}.000Z",
            "route": "/hooks",
            "event": "agent.tool_call",
            "tool": "rm",
            "request": request,
            "response": {"decision": "allow", "reason": reason},
            "status": 200,
            "decision": "allow",
            "reason": reason,
            "duration_ms": 1.0,
        }
        fast.append(JOURNAL, SERVE, record, sync=False)


def pages(deliveries: Deliveries, filters: dict[str, str], limit: int) -> list[dict[str, Any]]:
    """Every answer of a list, following ``next`` to its end."""
    answers = [deliveries.query(filters, limit=limit)]
    while answers[-1]["next"]:
        answers.append(deliveries.query(filters, limit=limit, before=answers[-1]["next"]))
        assert len(answers) < 1000
    return answers


def test_the_window_holds_the_newest_by_count_and_older_ones_open_from_the_log(
    store: Store,
) -> None:
    journal(store, 30)
    deliveries = Deliveries(store, window=10)
    found = deliveries.query({}, limit=500)
    assert (found["total"], found["held"], found["evicted"]) == (30, 10, 20)
    assert len(deliveries.entries) == len(deliveries.by_id) == 10
    ids = [item["id"] for item in found["items"]]
    oldest_held = deliveries.entries[0]
    assert ids[-1] == oldest_held.summary["id"] and found["next"] is None
    # A delivery no longer held opens from the journal, its attempts and all.
    first = f"serve.{deliveries.store.log_lines(JOURNAL, SERVE).lines[0][0]}"
    detail = deliveries.detail(first)
    assert detail["request"]["data"]["arguments"]["path"] == "/tmp/needle-0/"
    assert detail["attempts"] == [first]
    assert [entry.summary["id"] for entry in deliveries.summaries([first])] == [first]
    # A page before it is empty, not an error; an id that is no delivery is NotFound.
    assert deliveries.query({}, before=first)["items"] == []
    with pytest.raises(NotFound):
        deliveries.detail(f"serve.{int(first.split('.')[1]) + 1}")
    # New deliveries push the oldest out.
    journal(store, 5)
    found = deliveries.query({}, limit=500)
    assert (found["total"], found["held"], found["evicted"]) == (35, 10, 25)


def test_the_window_holds_within_its_bytes_and_each_text_is_cut(store: Store) -> None:
    journal(store, 40, reason="r" * 100_000)
    deliveries = Deliveries(store, window=1000, window_bytes=60_000)
    found = deliveries.query({}, limit=500)
    assert found["total"] == 40
    assert deliveries.held_bytes <= 60_000
    assert 0 < found["held"] < 40 and found["evicted"] == 40 - found["held"]
    reasons = {item["reason"] for item in found["items"]}
    assert reasons == {"r" * (SUMMARY_CHARS - 1) + "…"}
    # The detail has the whole reason.
    assert deliveries.detail(found["items"][0]["id"])["response"]["reason"] == "r" * 100_000


def test_an_answer_holds_at_most_its_bytes_and_next_pages_through_all(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal(store, 60, reason="r" * 900)
    monkeypatch.setattr(inspector_deliveries, "RESPONSE_BYTES", 20_000)
    deliveries = Deliveries(store)
    for filters in ({}, {"chat": "ch_1"}, {"q": "needle"}):
        answers = pages(deliveries, filters, 500)
        assert len(answers) > 1, filters
        for answer in answers:
            assert 0 < len(json.dumps(answer["items"])) <= 20_000
        seen = [item["id"] for answer in answers for item in answer["items"]]
        assert len(seen) == len(set(seen)) == (20 if "chat" in filters else 60), filters


def test_a_search_reads_at_most_its_bytes_and_next_goes_on(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal(store, 20, padding=10_000)
    monkeypatch.setattr(inspector_deliveries, "SEARCH_BYTES", 35_000)
    deliveries = Deliveries(store)
    # Only the oldest holds needle-0/: each answer reads about three lines, then says where to
    # go on, until the last one finds it.
    answers = pages(deliveries, {"q": "NEEDLE-0/"}, 50)
    assert 5 <= len(answers) <= 10
    assert all(answer["complete"] is False for answer in answers[:-1])
    assert [item["id"] for item in answers[-1]["items"]] == [deliveries.entries[0].summary["id"]]
    assert answers[-1]["complete"] is True and answers[-1]["next"] is None
    # A replay's selection is refused rather than cut short.
    with pytest.raises(InvalidInput, match="without finishing"):
        deliveries.select({"q": "needle-0/"}, limit=1000)


def test_a_match_across_two_pieces_of_a_line_is_found(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal(store, 3, padding=5000)
    monkeypatch.setattr(inspector_deliveries, "PIECE_BYTES", 64)
    deliveries = Deliveries(store)
    for n in range(3):
        (found,) = deliveries.query({"q": f"/tmp/needle-{n}/"})["items"]
        assert found["id"] == deliveries.entries[n].summary["id"]
    assert deliveries.query({"q": "needle-9"})["items"] == []


def test_the_journal_is_caught_up_with_a_part_at_a_time(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal(store, 50, padding=1000)
    monkeypatch.setattr(inspector_deliveries, "READ_BYTES", 5000)
    deliveries = Deliveries(store)
    assert deliveries.query({})["total"] == 50
    journal(store, 7, padding=1000)
    assert deliveries.query({})["total"] == 57


def peak_of(work: Any) -> int:
    """The most memory ``work`` had allocated at once (tracemalloc), in bytes."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_search_over_large_payloads_holds_one_piece_of_one_line(store: Store) -> None:
    # 40 payloads of 500 KB: a journal of 20 MB, every line read by a search for the oldest.
    journal(store, 40, padding=500_000)
    deliveries = Deliveries(store)
    deliveries.refresh()
    hits: list[int] = []

    def search() -> None:
        hits.append(len(deliveries.query({"q": "needle-0/"})["items"]))

    one = peak_of(search)
    assert one < 6 * MiB, one

    def at_once() -> None:
        threads = [threading.Thread(target=search) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    eight = peak_of(at_once)
    assert eight < 8 * 6 * MiB, eight
    assert hits == [1] * 9


def test_list_and_search_over_http_answer_pages_within_bounds(store: Store) -> None:
    journal(store, 30, reason="r" * 5000)
    with running(create_app(store=store, sweep_interval=0)) as url:
        reply = CLIENT.get(f"{url}/inspector/deliveries", params={"q": "needle-1", "limit": 5})
        assert reply.status_code == 200, reply.text
        found = reply.json()["data"]
        # needle-1, needle-10 ... needle-19: newest first, five of them, and where to go on.
        assert [item["id"] for item in found["items"]] == [
            f"serve.{offset}" for offset, _ in store.log_lines(JOURNAL, SERVE).lines[19:14:-1]
        ]
        assert found["next"] == found["items"][-1]["id"] and found["complete"] is False
        assert all(len(item["reason"]) == SUMMARY_CHARS for item in found["items"])
        rest = CLIENT.get(
            f"{url}/inspector/deliveries",
            params={"q": "needle-1", "limit": 50, "before": found["next"]},
        ).json()["data"]
        assert len(rest["items"]) == 6 and rest["complete"] is True and rest["next"] is None


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.one_of(
        st.none(),
        st.text(max_size=40),
        st.integers(min_value=-5, max_value=10**20).map(lambda n: f"serve.{n}"),
    ),
    q=st.text(max_size=30),
)
def test_any_page_or_search_is_an_answer_or_a_clean_error(
    store: Store, before: str | None, q: str
) -> None:
    if not store.log_size(JOURNAL, SERVE):
        journal(store, 5, padding=100)
    deliveries = Deliveries(store)
    try:
        found = deliveries.query({"q": q} if q else {}, limit=3, before=before)
    except (NotFound, InvalidInput):
        return
    assert len(found["items"]) <= 3
    assert found["next"] is None or found["next"] in {e.summary["id"] for e in deliveries.entries}
