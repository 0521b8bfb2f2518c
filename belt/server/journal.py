"""``belt serve``'s journal, written in groups (group commit).

A hook request hands its line to ``GroupJournal.write`` and waits. The lines handed in while the
event loop runs the requests that are ready go in one append of the store (one lock, one write
of their lines), made by a callback of the loop once the loop has nothing else to run than the
requests of the group or after ``GROUP_TURNS`` turns of it, or at once by the request when
nothing else is to run in this turn (no other line could join). A request of a group parks for
one turn behind that callback, so when the group is written on the next turn (as it mostly is)
the request goes on in that same turn, with no future made or woken for it; it waits for one of
its own only while the group waits longer. Each request is answered once the append that holds
its line has returned. A line is so as durable as one appended alone (written to the file, not
fsynced: docs/serve.md, "The journal"), and a server killed after answering has its line on
disk.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from belt.errors import BeltError
from belt.records.changes import touched_anything
from belt.records.journal import ServeLine, append_serve_line, append_serve_lines

if TYPE_CHECKING:
    from belt.store import Store

JOURNAL_ERRORS = (BeltError, OSError, ValueError)
"""What a journal that cannot be written raises (ValueError: a string the store cannot encode,
such as a lone surrogate in a reason)."""

UNWRITTEN = "the journal could not be written"
"""Why a line was not written when the store failed in a way it never should."""


def stamp_now() -> str:
    """The wall time now as a journal line's ``at`` (``2026-08-11T14:00:00.000Z``, as
    ``belt.store.clock.timestamp`` writes it; a virtual clock never changes it): the date and
    time of a second are formatted once, for all the lines of that second."""
    second, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
    if _last_second[0] != second:
        _last_second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_last_second[1]}.{_MILLISECONDS[nanoseconds // 1_000_000]}Z"


_last_second: list[Any] = [-1, ""]
_MILLISECONDS = [f"{n:03d}" for n in range(1000)]


GROUP_TURNS = 4
"""The most turns of the event loop a group waits for lines while the loop has other things to
run (the other requests of a burst, each a few turns from handing in its line)."""


class _Group:
    """The lines handed in since a group began, and once they are written, what each got."""

    __slots__ = ("lines", "loop", "parked", "results", "turns", "waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop, line: ServeLine) -> None:
        self.loop = loop
        self.lines = [line]
        self.parked = 0
        """How many of the requests that handed in a line are parked for one turn (each is one
        callback in the loop's queue, behind the group's own)."""
        self.turns = 0
        """The turns of the loop the group has waited."""
        self.results: list[str | BaseException | None] | None = None
        """Once the group is written: None for each line written, else why not (or what the
        store raised, for the request that began the group)."""
        self.waiters: dict[int, asyncio.Future[str | None]] = {}
        """The requests still waiting after their turn (the group waited longer), by line."""


@types.coroutine
def _one_turn() -> Generator[None, None, None]:
    """Give the loop one turn (``asyncio.sleep(0)`` without its call)."""
    yield


class GroupJournal:
    """The journal of one server's event loop, appended a group of lines at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._group: _Group | None = None
        """The group being gathered (written by a callback of its loop), None between."""

    @property
    def waiting(self) -> list[ServeLine] | None:
        """The lines of the group being gathered, None between groups."""
        return self._group.lines if self._group is not None else None

    async def write(self, line: ServeLine) -> str | None:
        """Append ``line`` with the others handed in meanwhile; once it is written, None, or why
        it could not be (a journal that cannot be written must not stop hooks being answered).

        A request that hands in a line parks for one turn of the loop behind the callback that
        writes the group, so it goes on in the next turn with its line written, woken by no
        future; only when the group waits longer does it wait for a future of its own."""
        group = self._group
        if group is None:
            loop = asyncio.get_running_loop()
            if not _others_ready(loop, 0):
                # Nothing else runs in this turn of the loop, so no line could join: no turn waited.
                return _outcome(self._append([line])[0])
            group = self._group = _Group(loop, line)
            # Queued before this request parks: the group is written before it goes on.
            loop.call_soon(self._flush)
            index = 0
        else:
            index = len(group.lines)
            group.lines.append(line)
        group.parked += 1
        try:
            await _one_turn()
        finally:
            group.parked -= 1
        if group.results is None:
            done: asyncio.Future[str | None] = group.loop.create_future()
            group.waiters[index] = done
            return await done
        return _outcome(group.results[index])

    def _flush(self) -> None:
        """Write the group, after turns of the loop while it has other things to run than the
        requests parked behind this callback (the requests it runs meanwhile hand in their lines
        too), at most GROUP_TURNS."""
        group = self._group
        if group is None:
            return
        group.turns += 1
        if group.turns < GROUP_TURNS and _others_ready(group.loop, group.parked):
            group.loop.call_soon(self._flush)
            return
        self._group = None
        try:
            results: list[str | BaseException | None] = list(self._append(group.lines))
        except BaseException as exc:
            # The store failed as it never should: the request that began the group gets the
            # error (a 500), the others are answered with their line unwritten.
            results = [UNWRITTEN] * len(group.lines)
            results[0] = exc if isinstance(exc, Exception) else UNWRITTEN
            self._settle(group, results)
            if not isinstance(exc, Exception):
                raise
            return
        self._settle(group, results)

    @staticmethod
    def _settle(group: _Group, results: list[str | BaseException | None]) -> None:
        group.results = results
        for index, done in group.waiters.items():
            if done.done():  # a request cancelled meanwhile (its client left) waits no more
                continue
            result = results[index]
            if isinstance(result, BaseException):
                done.set_exception(result)
            else:
                done.set_result(result)

    def _append(self, lines: list[ServeLine]) -> list[str | None]:
        """Write ``lines``; None for each line written, else why it was not."""
        try:
            append_serve_lines(self.store, lines)
            return [None] * len(lines)
        except JOURNAL_ERRORS:
            # One line the store refuses must not cost the others theirs: each on its own.
            return [_append_one(self.store, line) for line in lines]
        finally:
            touched_anything()  # the inspector's stream: the deliveries changed


def _outcome(result: str | BaseException | None) -> str | None:
    if isinstance(result, BaseException):
        raise result
    return result


def _others_ready(loop: asyncio.AbstractEventLoop, parked: int) -> bool:
    """Whether callbacks other than ``parked`` requests' are to run in this turn of the event
    loop (or the next: asyncio's loop keeps both in ``_ready``), so other requests may hand in
    lines; a loop that does not say is taken to have some."""
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > parked


def _append_one(store: Store, line: ServeLine) -> str | None:
    try:
        append_serve_line(store, line)
    except JOURNAL_ERRORS as exc:
        return exc.message if isinstance(exc, BeltError) else str(exc)
    return None
