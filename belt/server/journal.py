"""``belt serve``'s journal, written in groups (group commit).

A hook request hands its line to ``GroupJournal.write`` and waits. The lines handed in while the
event loop runs the requests that are ready go in one append of the store (one lock, one write
of their lines), made at the next turn of the loop; each request is answered once the append
that holds its line has returned. A line is so as durable as one appended alone (written to
the file, not fsynced: docs/serve.md, "The journal"), and a server killed after answering has
its line on disk.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from belt.errors import BeltError
from belt.records.changes import touched_anything
from belt.records.journal import ServeLine, append_serve_line, append_serve_lines

if TYPE_CHECKING:
    from belt.store import Store

JOURNAL_ERRORS = (BeltError, OSError, ValueError)
"""What a journal that cannot be written raises (ValueError: a string the store cannot encode,
such as a lone surrogate in a reason)."""


class GroupJournal:
    """The journal of one server's event loop, appended a group of lines at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.waiting: list[tuple[ServeLine, asyncio.Future[str | None]]] = []

    async def write(self, line: ServeLine) -> str | None:
        """Append ``line`` with the others handed in meanwhile; once it is written, None, or why
        it could not be (a journal that cannot be written must not stop hooks being answered)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str | None] = loop.create_future()
        self.waiting.append((line, done))
        if len(self.waiting) == 1:
            loop.call_soon(self._append)
        return await done

    def _append(self) -> None:
        group, self.waiting = self.waiting, []
        try:
            append_serve_lines(self.store, [line for line, _ in group])
        except JOURNAL_ERRORS:
            # One line the store refuses must not cost the others theirs: each on its own.
            for line, done in group:
                _settle(done, _append_one(self.store, line))
            touched_anything()
            return
        for _, done in group:
            _settle(done, None)
        touched_anything()  # the inspector's stream: the deliveries changed


def _append_one(store: Store, line: ServeLine) -> str | None:
    try:
        append_serve_line(store, line)
    except JOURNAL_ERRORS as exc:
        return exc.message if isinstance(exc, BeltError) else str(exc)
    return None


def _settle(done: asyncio.Future[str | None], error: str | None) -> None:
    if not done.done():  # a request cancelled meanwhile (its client left) waits no more
        done.set_result(error)
