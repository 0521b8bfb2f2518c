"""``belt serve``'s journal, written in groups (group commit).

A hook request hands its line to ``GroupJournal.write`` and is answered once the append that
holds it returns. A group waits while other requests are on their way to a line (``coming``;
when that is unknown, while lines keep joining), at most ``GROUP_TURNS`` turns of the event
loop, then goes in one append: as durable as a line appended alone (not fsynced).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from belt.errors import BeltError
from belt.records.changes import ANYTHING, touched
from belt.records.journal import ServeLine, append_serve_lines

if TYPE_CHECKING:
    from belt.store import Store

JOURNAL_ERRORS = (BeltError, OSError, ValueError)
"""What a journal that cannot be written raises (ValueError: a lone surrogate, say)."""

UNWRITTEN = "the journal could not be written"
"""Why a line was not written when the store failed in a way it never should."""


def stamp_now() -> str:
    """The wall time now as a journal line's ``at`` (as ``timestamp`` writes it; a virtual
    clock never changes it), formatted once a second."""
    global _second, _second_text
    second, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
    if _second != second:
        _second, _second_text = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    return f"{_second_text}.{_MILLISECONDS[nanoseconds // 1_000_000]}Z"


_second, _second_text = -1, ""
_MILLISECONDS = [f"{n:03d}" for n in range(1000)]


GROUP_TURNS = 4  # the most turns of the event loop a group waits for lines (while more are coming)


@dataclass(slots=True, eq=False)
class _Group:
    """The lines handed in since a group began, and once they are written, what each got."""

    lines: list[ServeLine]
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    looked: int = 0  # the lines the writer saw at its last look
    turns: int = 0
    results: list[str | BaseException | None] | None = None  # once written: None, or why not


class GroupJournal:
    """The journal of one server's event loop, appended a group of lines at a time."""

    def __init__(self, store: Store, coming: Callable[[], int | None] = lambda: None) -> None:
        self.store = store
        self.coming = coming  # how many other requests are on their way to a line (None: unknown)
        self._group: _Group | None = None

    @property
    def waiting(self) -> list[ServeLine] | None:
        """The lines of the group being gathered, None between groups."""
        return self._group.lines if self._group is not None else None

    async def write(self, line: ServeLine) -> str | None:
        """Append ``line`` with the others handed in meanwhile; None once written, else why not
        (a journal that cannot be written must not stop hooks being answered)."""
        group = self._group
        if group is None:
            if self.coming() == 0:
                return self._append([line])[0]  # no other line could join: no turn waited
            group = self._group = _Group([line])
            group.loop.call_soon(self._flush, group)
            index = 0
        else:
            index = len(group.lines)
            group.lines.append(line)
        while group.results is None:  # at most GROUP_TURNS turns
            await asyncio.sleep(0)
        result = group.results[index]
        if isinstance(result, BaseException):
            raise result
        return result

    def _flush(self, group: _Group) -> None:
        """Write ``group`` once no other line is coming (or none joined in a turn)."""
        group.turns += 1
        if group.turns < GROUP_TURNS:
            coming = self.coming()
            if coming is None:
                coming = group.turns == 1 or len(group.lines) > group.looked
                group.looked = len(group.lines)
            if coming:
                group.loop.call_soon(self._flush, group)
                return
        self._group = None
        try:
            group.results = list(self._append(group.lines))
        except BaseException as exc:  # the first request gets the error, the others UNWRITTEN
            group.results = [UNWRITTEN] * len(group.lines)
            group.results[0] = exc if isinstance(exc, Exception) else UNWRITTEN
            if not isinstance(exc, Exception):
                raise

    def _append(self, lines: list[ServeLine]) -> list[str | None]:
        """Write ``lines``; None for each line written, else why it was not."""
        try:
            append_serve_lines(self.store, lines)
            return [None] * len(lines)
        except JOURNAL_ERRORS:  # one line refused must not cost the others theirs
            return [append_one(self.store, line) for line in lines]
        finally:
            touched(ANYTHING)  # the inspector's stream: the deliveries changed


def append_one(store: Store, line: ServeLine) -> str | None:
    """Append ``line`` alone; None once it is written, else why it could not be."""
    try:
        append_serve_lines(store, [line])
    except JOURNAL_ERRORS as exc:
        return exc.message if isinstance(exc, BeltError) else str(exc)
    return None
