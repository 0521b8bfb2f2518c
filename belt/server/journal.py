"""``belt serve``'s journal, written in groups (group commit).

A hook request hands its line to ``GroupJournal.write`` and waits. The lines handed in while the
event loop runs the requests that are ready go in one append of the store (one lock, one write
of their lines), made by a callback of the loop once the loop has nothing else to run or after
``GROUP_TURNS`` turns of it (each request of the group is woken once, when it is written), or at
once by the request when nothing else is to run in this turn (no other line could join); each
request is answered once the append that holds its line has returned. A line is so as durable as one
appended alone (written to the file, not fsynced: docs/serve.md, "The journal"), and a server
killed after answering has its line on disk.
"""

from __future__ import annotations

import asyncio
import time
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


class GroupJournal:
    """The journal of one server's event loop, appended a group of lines at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.waiting: list[tuple[ServeLine, asyncio.Future[str | None] | None]] | None = None
        """The group being gathered (written by a callback of its loop), None between."""
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop of the group being gathered (every line of it is handed in there)."""
        self._turns = 0
        """The turns of the loop the group being gathered has waited."""

    async def write(self, line: ServeLine) -> str | None:
        """Append ``line`` with the others handed in meanwhile; once it is written, None, or why
        it could not be (a journal that cannot be written must not stop hooks being answered)."""
        if self.waiting is not None and self._loop is not None:
            done: asyncio.Future[str | None] = self._loop.create_future()
            self.waiting.append((line, done))
            return await done
        loop = asyncio.get_running_loop()
        if not _others_ready(loop):
            # Nothing else runs in this turn of the loop, so no line could join: no turn waited.
            return self._append([(line, None)])
        done = loop.create_future()
        self.waiting = [(line, done)]
        self._loop = loop
        self._turns = 0
        # The group is written by a callback, so this request waits only for its line, however
        # many turns the group waits (and it is written even when this request is cancelled).
        loop.call_soon(self._flush)
        return await done

    def _flush(self) -> None:
        """Write the group, after turns of the loop while it has other things to run (the
        requests it runs meanwhile hand in their lines too), at most GROUP_TURNS."""
        group, loop = self.waiting, self._loop
        if group is None or loop is None:
            return
        self._turns += 1
        if self._turns < GROUP_TURNS and _others_ready(loop):
            loop.call_soon(self._flush)
            return
        self.waiting = None
        first = group[0][1]
        try:
            error = self._append(group)
        except BaseException as exc:
            # The store failed as it never should: the request that began the group gets the
            # error (a 500), the others are answered with their line unwritten.
            if first is not None and not first.done():
                if isinstance(exc, Exception):
                    first.set_exception(exc)
                else:
                    first.set_result(UNWRITTEN)
            if not isinstance(exc, Exception):
                raise
            return
        if first is not None:
            _settle(first, error)

    def _append(
        self, group: list[tuple[ServeLine, asyncio.Future[str | None] | None]]
    ) -> str | None:
        """Write ``group``, wake the requests after the first waiting for it; the first line's
        error, if any."""
        errors: list[str | None] = [UNWRITTEN] * len(group)
        try:
            append_serve_lines(self.store, [line for line, _ in group])
            errors = [None] * len(group)
        except JOURNAL_ERRORS:
            # One line the store refuses must not cost the others theirs: each on its own.
            errors = [_append_one(self.store, line) for line, _ in group]
        finally:
            # Even when the store raised what it never should, no request waits forever.
            for (_, done), error in zip(group[1:], errors[1:], strict=True):
                if done is not None:
                    _settle(done, error)
            touched_anything()  # the inspector's stream: the deliveries changed
        return errors[0]


def _others_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether other callbacks are to run in this turn of the event loop (or the next: asyncio's
    loop keeps both in ``_ready``), so other requests may hand in lines; a loop that does not
    say is taken to have some."""
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0


def _append_one(store: Store, line: ServeLine) -> str | None:
    try:
        append_serve_line(store, line)
    except JOURNAL_ERRORS as exc:
        return exc.message if isinstance(exc, BeltError) else str(exc)
    return None


def _settle(done: asyncio.Future[str | None], error: str | None) -> None:
    if not done.done():  # a request cancelled meanwhile (its client left) waits no more
        done.set_result(error)
