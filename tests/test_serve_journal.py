"""`belt serve`'s journal is written in groups (group commit), and a request is answered only
once its own line is in the file."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any, cast

import httpx
import pytest

from belt.records.journal import JOURNAL, SERVE, ServeLine
from belt.server.app import create_app
from belt.server.group_commit import GROUP_TURNS, UNWRITTEN, GroupJournal, stamp_now
from belt.store import Store, open_store
from belt.store.clock import parse_timestamp, timestamp, utcnow
from tests.loopback import CLIENT
from tests.servers import running, turn_start


def line(chat_id: str, reason: str = "fine") -> ServeLine:
    return cast(
        ServeLine,
        {
            "kind": "hook",
            "at": "2026-08-11T14:00:00.000Z",
            "route": "/hooks",
            "name": None,
            "headers": {},
            "request": {"chat_id": chat_id},
            "reason": reason,
        },
    )


class CountingStore(Store):
    """A file store that counts the log appends it makes (a real store, not a mock)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups: list[int] = []

    def append_group(
        self, log: str, id: str, records: Sequence[Mapping[str, object]], **kw: Any
    ) -> None:
        self.groups.append(len(records))
        super().append_group(log, id, records, **kw)


def test_lines_handed_in_together_are_written_in_one_append_in_order() -> None:
    store = CountingStore(open_store().root)
    journal = GroupJournal(store)

    async def together() -> list[str | None]:
        return list(await asyncio.gather(*(journal.write(line(f"ch_{n}")) for n in range(5))))

    assert asyncio.run(together()) == [None] * 5
    assert store.groups == [5]
    written = store.read_log(JOURNAL, SERVE)
    assert [cast(ServeLine, record)["request"]["chat_id"] for record in written] == [
        f"ch_{n}" for n in range(5)
    ]


def test_lines_handed_in_a_few_turns_apart_while_the_loop_is_busy_share_one_append() -> None:
    store = CountingStore(open_store().root)
    journal = GroupJournal(store)

    async def after(turns: int, chat_id: str) -> str | None:
        for _ in range(turns):  # a request that has a few steps to go before its line is made
            await asyncio.sleep(0)
        return await journal.write(line(chat_id))

    async def burst() -> list[str | None]:
        return list(await asyncio.gather(*(after(n, f"ch_{n}") for n in range(3))))

    assert asyncio.run(burst()) == [None] * 3
    assert store.groups == [3]
    written = store.read_log(JOURNAL, SERVE)
    assert [cast(ServeLine, record)["request"]["chat_id"] for record in written] == [
        "ch_0",
        "ch_1",
        "ch_2",
    ]


def test_a_group_waits_a_bounded_number_of_turns_however_busy_the_loop() -> None:
    store = CountingStore(open_store().root)
    journal = GroupJournal(store)
    spins = 0
    stop = asyncio.Event()

    async def spinner() -> None:
        # Something else to run on every turn (for 1,000 turns, so a group that waited for the
        # loop to be idle would still end, and fail the test rather than hang it).
        nonlocal spins
        while not stop.is_set() and spins < 1000:
            spins += 1
            await asyncio.sleep(0)

    async def busy() -> int:
        task = asyncio.create_task(spinner())
        await asyncio.sleep(0)
        begun = spins
        assert await journal.write(line("ch_busy")) is None
        turns = spins - begun
        stop.set()
        await task
        return turns

    assert asyncio.run(busy()) <= GROUP_TURNS + 1
    assert store.groups == [1]


def test_a_line_the_store_refuses_costs_only_its_own_request_its_line() -> None:
    store = open_store()
    journal = GroupJournal(store)

    async def together() -> list[str | None]:
        lines = [line("ch_a"), line("ch_b", reason="lone \ud800 surrogate"), line("ch_c")]
        return list(await asyncio.gather(*(journal.write(one) for one in lines)))

    first, refused, last = asyncio.run(together())
    assert first is None and last is None
    assert refused is not None and "surrogate" in refused
    written = store.read_log(JOURNAL, SERVE)
    assert [cast(ServeLine, record)["request"]["chat_id"] for record in written] == ["ch_a", "ch_c"]


@pytest.mark.parametrize("guard", [{}, {"max_connections": 100}], ids=["any server", "belt's"])
def test_every_answered_request_has_its_line_in_the_journal_already(guard: dict[str, int]) -> None:
    store = open_store()
    missing: list[str] = []

    def client(worker: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            for n in range(25):
                chat_id = f"ch_w{worker}n{n}"
                payload = {
                    "event": "agent.turn_start",
                    "timestamp": "2026-08-11T14:00:00.000Z",
                    "agent_id": "ag_1",
                    "chat_id": chat_id,
                    "run_id": "ar_1",
                    "turn_count": 1,
                    "data": {},
                }
                assert http.post("/hooks", json=payload).status_code == 200
                # Answered: the line is in the file (read by another reader of the store).
                journalled = {
                    cast(ServeLine, record)["request"]["chat_id"]
                    for record in store.read_log(JOURNAL, SERVE)
                }
                if chat_id not in journalled:
                    missing.append(chat_id)

    # Under belt's own connections the journal knows the requests coming; under another server
    # it groups without knowing.
    with running(create_app(store=store, sweep_interval=0), **guard) as url:
        workers = [threading.Thread(target=client, args=(w, url)) for w in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers)
    assert missing == []
    assert len(store.read_log(JOURNAL, SERVE)) == 100


class BrokenStore(Store):
    """A file store whose log appends fail in a way a store never should (a real store)."""

    def append_group(
        self, log: str, id: str, records: Sequence[Mapping[str, object]], **kw: Any
    ) -> None:
        raise RuntimeError("the disk caught fire")

    def append(self, log: str, id: str, record: Mapping[str, object], **kw: Any) -> None:
        raise RuntimeError("the disk caught fire")


def test_a_store_failing_unforeseen_leaves_no_request_of_the_group_waiting() -> None:
    journal = GroupJournal(BrokenStore(open_store().root))

    async def together() -> list[Any]:
        writes = [journal.write(line(f"ch_{n}")) for n in range(3)]
        # A guard against hanging, not a measure of time: the group is settled at once.
        return list(await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), 60))

    first, *others = asyncio.run(together())
    assert isinstance(first, RuntimeError)  # the request that wrote the group: a 500
    assert others == [UNWRITTEN, UNWRITTEN]  # the others are answered, their line not written


def test_a_hook_request_failing_as_nothing_foresaw_is_a_500_problem_and_serving_goes_on() -> None:
    payload = turn_start()
    app = create_app(store=BrokenStore(open_store().root), sweep_interval=0)
    with running(app) as url:
        for _ in range(2):  # each on a connection of its own: the server closes one that failed
            reply = CLIENT.post(f"{url}/hooks", json=payload, timeout=30)
            assert reply.status_code == 500
            assert reply.headers["content-type"] == "application/problem+json"
            assert reply.json()["detail"] == "internal error (RuntimeError)"
        # Checked first as ever: a request the guard refuses never reaches the journal.
        headers = {"host": "evil.example"}
        refused = CLIENT.post(f"{url}/hooks", json=payload, headers=headers, timeout=30)
        assert refused.status_code == 403


def test_a_group_is_written_even_when_the_request_that_began_it_is_cancelled() -> None:
    store = CountingStore(open_store().root)
    journal = GroupJournal(store)

    async def cancelled_first() -> list[Any]:
        first = asyncio.create_task(journal.write(line("ch_first")))
        others = [asyncio.create_task(journal.write(line(f"ch_{n}"))) for n in range(2)]
        await asyncio.sleep(0)  # the first has begun the group, the others have joined it
        assert journal.waiting is not None and len(journal.waiting) == 3
        first.cancel()
        return list(await asyncio.gather(first, *others, return_exceptions=True))

    first, *others = asyncio.run(cancelled_first())
    assert isinstance(first, asyncio.CancelledError)
    assert others == [None, None]
    assert store.groups == [3]
    written = store.read_log(JOURNAL, SERVE)
    assert [cast(ServeLine, record)["request"]["chat_id"] for record in written] == [
        "ch_first",
        "ch_0",
        "ch_1",
    ]


def test_a_lines_time_is_written_as_every_belt_timestamp() -> None:
    before = utcnow()
    stamp = stamp_now()
    after = utcnow()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    assert timestamp(before) <= stamp <= timestamp(after)
    assert timestamp(parse_timestamp(stamp)) == stamp


class Turns:
    """Counts the turns of the running event loop from a task of its own, which waits a turn
    at a time as any request does (asyncio's public API has no count of its turns)."""

    def __init__(self) -> None:
        self.count = 0
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Turns:
        self.task = asyncio.create_task(self.counting())
        await asyncio.sleep(0)  # counting from this turn on
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()

    async def counting(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0)


def test_a_line_no_other_request_is_coming_to_join_is_written_without_waiting_a_turn() -> None:
    store = CountingStore(open_store().root)
    journal = GroupJournal(store, coming=lambda: 0)

    async def alone() -> None:
        # The server says no other request is on its way: the write never gives the loop a turn.
        writing = journal.write(line("ch_alone"))
        with pytest.raises(StopIteration) as finished:
            writing.send(None)
        assert finished.value.value is None

    asyncio.run(alone())
    assert store.groups == [1]


def test_a_group_waits_for_the_requests_said_to_be_coming() -> None:
    store = CountingStore(open_store().root)
    coming = [1]
    journal = GroupJournal(store, coming=lambda: coming[0])

    async def late() -> str | None:
        for _ in range(2):  # turns in which no line joins: a group that only watched would go
            await asyncio.sleep(0)
        coming[0] = 0
        return await journal.write(line("ch_late"))

    async def both() -> list[str | None]:
        return list(await asyncio.gather(journal.write(line("ch_first")), late()))

    assert asyncio.run(both()) == [None, None]
    assert store.groups == [2]
    written = store.read_log(JOURNAL, SERVE)
    assert [cast(ServeLine, r)["request"]["chat_id"] for r in written] == ["ch_first", "ch_late"]


def test_a_group_waits_at_most_group_turns_however_many_are_said_to_be_coming() -> None:
    store = CountingStore(open_store().root)
    asked = [0]

    def coming() -> int:
        # Always some, for 100 looks (a group that waited for none would still end, and fail
        # the test rather than hang it).
        asked[0] += 1
        return 5 if asked[0] < 100 else 0

    journal = GroupJournal(store, coming=coming)

    async def alone() -> int:
        async with Turns() as turns:
            begun = turns.count
            assert await journal.write(line("ch_first")) is None
            return turns.count - begun

    assert asyncio.run(alone()) <= GROUP_TURNS + 1
    assert store.groups == [1]


def test_a_line_nothing_else_joins_is_written_once_a_turn_has_passed_without_another() -> None:
    store = CountingStore(open_store().root)
    journal = GroupJournal(store)

    async def alone() -> int:
        async with Turns() as turns:
            begun = turns.count
            assert await journal.write(line("ch_alone")) is None
            return turns.count - begun

    # A turn for the lines ready with it, one more to see that none came: not GROUP_TURNS.
    assert asyncio.run(alone()) == 2 < GROUP_TURNS
    assert store.groups == [1]
    assert [cast(ServeLine, r)["request"]["chat_id"] for r in store.read_log(JOURNAL, SERVE)] == [
        "ch_alone"
    ]


def test_the_requests_of_a_group_go_on_in_the_turn_it_is_written() -> None:
    went_on: list[int] = []
    written: list[int] = []
    counted = Turns()

    class TurnStore(CountingStore):
        def append_group(self, *args: Any, **kw: Any) -> None:
            written.append(counted.count)
            super().append_group(*args, **kw)

    store = TurnStore(open_store().root)
    journal = GroupJournal(store)

    async def request(chat_id: str) -> str | None:
        error = await journal.write(line(chat_id))
        went_on.append(counted.count)
        return error

    async def together() -> None:
        async with counted:
            tasks = [asyncio.create_task(request(f"ch_{n}")) for n in range(3)]
            assert await asyncio.gather(*tasks) == [None] * 3

    asyncio.run(together())
    # Each request goes on in the turn its group is written (no turn more to be woken in).
    assert store.groups == [3]
    assert went_on == written * 3


def test_each_line_has_its_own_requests_headers_on_one_keep_alive_connection() -> None:
    store = open_store()
    payload = turn_start()
    sent = [{"x-try": "one"}, {"x-try": "one"}, {"x-try": "two"}, {"x-try": "one"}]
    with running(create_app(store=store, sweep_interval=0)) as url, httpx.Client() as http:
        for headers in sent:
            assert http.post(f"{url}/hooks", json=payload, headers=headers).status_code == 200
    written = store.read_log(JOURNAL, SERVE)
    assert [cast(ServeLine, record)["headers"]["x-try"] for record in written] == [
        "one",
        "one",
        "two",
        "one",
    ]
    assert all(
        cast(ServeLine, record)["headers"]["host"].startswith("127.0.0.1:") for record in written
    )
