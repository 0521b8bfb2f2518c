"""Wake-ups for readers that wait on a chat: a write in this process wakes them at once
(``touched``); a write from another process sends no signal, so readers also look at a low rate.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio


class Wake:
    """One reader's wake-up for one chat, usable from a thread or from an event loop."""

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        self._flag = threading.Event()
        # No event loop runs in a process that never imported asyncio (belt's quick commands
        # write records without it): asking costs nothing there, and loads nothing.
        loops = sys.modules.get("asyncio")
        self._loop: asyncio.AbstractEventLoop | None = None
        if loops is not None:
            with suppress(RuntimeError):
                self._loop = loops.get_running_loop()
        self._event = loops.Event() if loops is not None and self._loop is not None else None
        self._thread = threading.get_ident()

    def set(self) -> None:
        """Wake the reader (from any thread)."""
        if self._flag.is_set():
            return  # woken already: the reader looks after it clears the wake, so sees this write
        self._flag.set()
        if self._loop is None or self._event is None:
            return
        if threading.get_ident() == self._thread:
            self._loop.call_soon(self._event.set)  # no need to wake the loop's selector
            return
        with suppress(RuntimeError):  # the reader's loop has closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._event.set)

    def wait(self, timeout: float) -> bool:
        """Block until woken or ``timeout`` seconds pass; whether it was woken. Clears it."""
        woken = self._flag.wait(timeout)
        self._flag.clear()
        return woken

    async def wait_async(self, timeout: float) -> bool:
        """Wait in the event loop until woken or ``timeout`` seconds pass; whether it was woken."""
        assert self._loop is not None and self._event is not None, "a Wake made outside a loop"
        # A timer that sets the event costs less than wait_for's task, for many idle waiters.
        timer = self._loop.call_later(timeout, self._event.set)
        try:
            await self._event.wait()
        finally:
            timer.cancel()
        woken = self._flag.is_set()
        self._flag.clear()
        self._event.clear()
        return woken


_lock = threading.Lock()
_waiting: dict[str, set[Wake]] = {}


@contextmanager
def watching(chat_id: str) -> Iterator[Wake]:
    """A wake-up for ``chat_id``, registered while the block runs."""
    wake = Wake(chat_id)
    with _lock:
        _waiting.setdefault(chat_id, set()).add(wake)
    try:
        yield wake
    finally:
        with _lock:  # the set holds this wake until now, so it is there
            wakes = _waiting[chat_id]
            wakes.discard(wake)
            if not wakes:
                del _waiting[chat_id]


ANYTHING = "*"
"""The key of readers woken by every write (the inspector's stream); no chat id is spelled so."""


def touched(chat_id: object) -> None:
    """Wake whoever waits on ``chat_id`` in this process, and whoever waits on ``ANYTHING``."""
    if not _waiting:
        return
    key = chat_id if isinstance(chat_id, str) else ANYTHING
    with _lock:
        wakes = {*_waiting.get(key, ()), *_waiting.get(ANYTHING, ())}
    for wake in wakes:
        wake.set()


def touched_all() -> None:
    """Wake every reader in this process (the server begins to stop)."""
    with _lock:
        wakes = [wake for chat in _waiting.values() for wake in chat]
    for wake in wakes:
        wake.set()
