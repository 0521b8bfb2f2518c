"""Connection limits that uvicorn does not have: a header deadline and a cap on connections.

uvicorn times out an idle kept-alive connection, but not a client that opens a connection and
sends its request line and headers a byte at a time (slowloris): each such client holds a file
descriptor forever, and enough of them exhaust the process's open files. ``GuardedH11Protocol``
gives every request ``header_timeout`` seconds from its first byte (or from the connection's
start) to finish its headers, and holds at most ``max_connections`` connections: when a new one
arrives at the cap, the connection that has waited longest without a complete request is closed
to make room, so clients that send whole requests are served while slow ones take turns.

The limits are read from the uvicorn ``Config`` (attributes set by ``belt serve``), so the class
can be named by import string and used by every worker process.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0
"""Seconds a client has to send a whole request head."""

IDLE_TIMEOUT = 5
"""Seconds a kept-alive connection may sit idle between requests (uvicorn's keep-alive)."""

MAX_CONNECTIONS = 1000
"""Connections held at once by one server process, unless the open-file limit is lower."""

STOPPING = "belt.stopping"
"""A key set in the scope of a response still being sent when the server begins to stop: a
stream that never ends by itself (the inspector's) ends when it sees it, instead of holding the
server's graceful shutdown until its client leaves."""

BACKLOG = 64
"""The listen queue; asyncio also accepts up to this many connections in one go."""

FD_RESERVE = 3 * BACKLOG + 64
"""File descriptors kept free: a few accept batches (asyncio accepts a batch each loop turn,
and a connection can be closed only turns later), and the store, handlers and the listening
socket."""


def connection_cap(requested: int | None = None) -> int:
    """The connection cap: ``requested`` (or the default), lowered to fit the open-file limit."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = requested if requested is not None else MAX_CONNECTIONS
    if requested is None and soft != resource.RLIM_INFINITY:
        cap = min(cap, max(8, soft - FD_RESERVE))
    return cap


class _Waiting:
    """Connections without a complete request, oldest first (per server process)."""

    def __init__(self) -> None:
        self.since: dict[GuardedH11Protocol, float] = {}

    def add(self, protocol: GuardedH11Protocol) -> None:
        self.since.setdefault(protocol, time.monotonic())

    def discard(self, protocol: GuardedH11Protocol) -> None:
        self.since.pop(protocol, None)

    def oldest(self) -> GuardedH11Protocol | None:
        return next(iter(self.since), None)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline and a connection cap."""

    def __init__(self, config: Any, server_state: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, server_state, *args, **kwargs)
        self.header_timeout: float = getattr(config, "belt_header_timeout", HEADER_TIMEOUT)
        self.max_connections: int = getattr(config, "belt_max_connections", MAX_CONNECTIONS)
        waiting = getattr(server_state, "belt_waiting", None)
        if waiting is None:
            waiting = _Waiting()
            server_state.belt_waiting = waiting
        self.waiting: _Waiting = waiting
        self.head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Take the connection, making room at the cap; start its header deadline."""
        if len(self.connections) >= self.max_connections:
            oldest = self.waiting.oldest()
            if oldest is None:
                # Every held connection is busy with a request: refuse this one.
                super().connection_made(transport)
                self.connections.discard(self)
                transport.abort()
                return
            oldest.drop()
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        """Pass data on; a request whose head is complete has no header deadline any more."""
        before = self.cycle
        super().data_received(data)
        if self.cycle is not None and self.cycle is not before:
            self._head_done()
        elif self.cycle is None or self.cycle.response_complete:
            self._await_head()

    def on_response_complete(self) -> None:
        """Back to waiting: uvicorn's keep-alive timer bounds the idle time until the next."""
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self.waiting.add(self)

    def shutdown(self) -> None:
        """Begin a graceful stop, as uvicorn does; a response still being sent is told so."""
        if self.cycle is not None and not self.cycle.response_complete:
            scope = cast(dict[str, Any], self.cycle.scope)
            scope[STOPPING] = True
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection."""
        self._head_done()
        super().connection_lost(exc)

    def drop(self) -> None:
        """Close this connection now (it has no request in progress)."""
        self._head_done()
        self.connections.discard(self)
        self.transport.abort()

    def _await_head(self) -> None:
        self.waiting.add(self)
        if self.head_timer is None:
            self.head_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _head_done(self) -> None:
        self.waiting.discard(self)
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_too_slow(self) -> None:
        self.head_timer = None
        if self.cycle is None or self.cycle.response_complete:
            self.drop()


class AcceptErrors:
    """An event-loop exception handler: one line per burst of refused connections.

    When the process runs out of file descriptors, asyncio's accept loop reports every failed
    accept with a traceback; under a flood that is megabytes a minute. A burst (failures less
    than ``quiet`` seconds apart) is reported once; anything else goes to the default handler.
    """

    MESSAGE = "socket.accept() out of system resource"

    def __init__(self, report: Any, quiet: float = 5.0) -> None:
        self.report = report
        self.quiet = quiet
        self.last = float("-inf")
        self.count = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Handle one exception context of the loop."""
        if context.get("message") != self.MESSAGE:
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self.last > self.quiet:
            exc = context.get("exception")
            reason = getattr(exc, "strerror", None) or str(exc)
            self.report(
                f"refusing connections: {reason} (open-file limit reached; "
                "lower --max-connections or raise the limit)"
            )
        self.last = now
        self.count += 1
