"""The slow-client defence of ``belt serve``, which uvicorn lacks: deadlines for a request's head
and body, and a cap on the connections held.

``GuardedConnection``, the ``http`` protocol class uvicorn is given, wraps uvicorn's own h11
protocol (passing on every call, reading none of its state): each connection has
``header_timeout`` seconds to send a whole head and ``body_timeout`` more for its body, and at
``max_connections`` the one waiting longest without a complete request is closed. It learns of
requests from ``SlowClientGuard`` (ASGI middleware, which keeps the body deadline itself under
another server) through the lifespan state and ``scope["state"]``.
"""

from __future__ import annotations

import asyncio
import resource
import time
import weakref
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from belt.records.changes import touched_all
from belt.server.guard import BODY_LATE, STOPPING, has_body

HEADER_TIMEOUT = 10.0  # seconds a client has to send a whole request head

BODY_TIMEOUT = 30.0
"""Seconds a client has, once its request head is in, to send the whole body (1 MiB at most)."""
IDLE_TIMEOUT = 5
"""Seconds a kept-alive connection may sit idle between requests (uvicorn's keep-alive)."""
MAX_CONNECTIONS = 1000
"""Connections held at once by one server process, unless the open-file limit is lower."""
BACKLOG = 64  # the listen queue; asyncio also accepts up to this many connections in one go
FD_RESERVE = 3 * BACKLOG + 64
"""File descriptors kept free: a few accept batches (asyncio accepts one each loop turn, and a
connection can be closed only turns later), the store, handlers and the socket."""
LIMITS = "belt.connections"  # the key of a server's ``Connections`` in the lifespan state
CONNECTION = "belt.connection"  # the key of a request's ``GuardedConnection`` in its scope's state


def connection_cap(requested: int | None = None) -> int:
    """The connection cap: ``requested`` (or the default), lowered to fit the open-file limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if requested is not None or soft == resource.RLIM_INFINITY:
        return requested if requested is not None else MAX_CONNECTIONS
    return min(MAX_CONNECTIONS, max(8, soft - FD_RESERVE))


class Connections:
    """The limits of one server and the connections it holds."""

    def __init__(
        self,
        *,
        max_connections: int | None = None,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
    ) -> None:
        self.max_connections = connection_cap(max_connections)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.held: set[GuardedConnection] = set()
        self.waiting: dict[GuardedConnection, None] = {}  # no complete request; oldest first
        self.arriving = 0  # requests whose bytes came but whose app has not started
        SERVERS.add(self)

    def stopping(self) -> None:
        """Mark each request in progress ``STOPPING`` (an endless stream then ends)."""
        for connection in self.held:
            if connection.scope is not None:
                connection.scope[STOPPING] = True
        touched_all()  # a chat's stream waiting for a write sees that the server stops


SERVERS: weakref.WeakSet[Connections] = weakref.WeakSet()
"""The ``Connections`` of this process (one per server)."""


def server_stopping() -> None:
    """Every server of this process begins to stop (see ``Connections.stopping``)."""
    for connections in list(SERVERS):
        connections.stopping()


class GuardedConnection(asyncio.Protocol):
    """One connection: uvicorn's h11 protocol with the request deadlines and the cap.

    One deadline at a time (the head's, then the body's), watched by one timer that is not
    remade per request: due early, it looks again at the deadline then."""

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any], **options: Any):
        self.limits: Connections | None = app_state.get(LIMITS)
        self.http = H11Protocol(
            config=config,
            server_state=server_state,
            app_state={**app_state, CONNECTION: self},
            **options,
        )
        self.transport: asyncio.Transport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # asked once: each ask is a syscall
        self.deadline: float | None = None  # loop time the head or body is due; None: neither
        self.timer: asyncio.TimerHandle | None = None
        self.scope: Scope | None = None  # the request its app has
        self.heard = False  # bytes came while the app had the request
        self.heard_next = False  # ... once its body was in: the next request's
        self.arriving = False  # counted in Connections.arriving

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Take the connection, making room at the cap; start its head deadline."""
        limits = self.limits
        self.transport = transport  # type: ignore[assignment]
        self.loop = asyncio.get_running_loop()
        if limits is not None:
            if len(limits.held) >= limits.max_connections:
                oldest = next(iter(limits.waiting), None)
                if oldest is None:
                    # Every held connection is busy with a request: refuse this one.
                    transport.abort()  # type: ignore[attr-defined]
                    self.limits = None
                    self.transport = None
                    return
                oldest.drop()
            limits.held.add(self)
            limits.waiting[self] = None
            self.await_head()
        self.http.connection_made(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        """Pass the bytes on; the first after a request starts the next head's deadline."""
        if self.scope is not None:
            self.heard = True
            if self.deadline is None:  # its body is in: these bytes are not of it
                self.heard_next = True
        else:
            self.arrives()
            if self.deadline is None and self.limits is not None:
                self.await_head()
        self.http.data_received(data)

    def eof_received(self) -> None:
        """Pass it on (uvicorn's protocol keeps the transport open, so a reply can still go)."""
        self.http.eof_received()

    def pause_writing(self) -> None:
        """Pass it on."""
        self.http.pause_writing()

    def resume_writing(self) -> None:
        """Pass it on."""
        self.http.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection."""
        if self.transport is None:
            return  # refused at the cap: uvicorn never had it
        self.forget()
        self.http.connection_lost(exc)

    def request_started(self, scope: Scope, *, body_timeout: float | None) -> None:
        """A request's head is in: its body is awaited for ``body_timeout`` (None: no body)."""
        self.scope = scope
        self.heard = self.heard_next = False
        if self.arriving:
            self.arriving = False
            if self.limits is not None:
                self.limits.arriving -= 1
        if body_timeout is None:
            self.complete()
        else:
            self.watch(body_timeout)

    def receiving(self, scope: Scope, receive: Receive) -> Receive:
        """``receive`` of ``scope``'s request, ending its body deadline once the body is in."""

        async def receiving() -> Message:
            message = await receive()
            if self.scope is scope and (
                message["type"] != "http.request" or not message.get("more_body", False)
            ):
                self.complete()
            return message

        return receiving

    def request_ended(self, scope: Scope) -> None:
        """The app is done with ``scope``: the connection waits for its next request."""
        if self.scope is not scope:
            return  # the next request (pipelined) has begun
        self.scope = None
        self.deadline = None
        limits = self.limits
        if limits is not None and self in limits.held:
            limits.waiting.pop(self, None)
            limits.waiting[self] = None  # the longest waiting is the one waiting first
            if self.heard:
                if self.heard_next:
                    self.arrives()
                self.await_head()

    def complete(self) -> None:
        """The request is all in: no deadline, and not waiting at the cap."""
        self.deadline = None
        if self.limits is not None:
            self.limits.waiting.pop(self, None)

    def drop(self) -> None:
        """Close this connection now (a request whose body is not in is told the client left)."""
        if self.scope is not None and self.deadline is not None:
            self.scope[BODY_LATE] = True
        self.forget()
        if self.transport is not None:
            self.transport.abort()

    def await_head(self) -> None:
        assert self.limits is not None
        self.watch(self.limits.header_timeout)

    def watch(self, seconds: float) -> None:
        """A deadline ``seconds`` from now, in place of any other."""
        loop = self.loop or asyncio.get_running_loop()
        self.deadline = loop.time() + seconds
        if self.timer is not None and self.timer.when() > self.deadline:
            self.timer.cancel()  # due after this deadline (a body's, which waits longer)
            self.timer = None
        if self.timer is None:
            self.timer = loop.call_at(self.deadline, self.deadline_due)

    def deadline_due(self) -> None:
        """Drop the connection if its deadline has passed, else wait for the later deadline."""
        self.timer = None
        if self.deadline is None:
            return
        loop = self.loop or asyncio.get_running_loop()
        if loop.time() < self.deadline:
            self.timer = loop.call_at(self.deadline, self.deadline_due)
            return
        self.drop()

    def arrives(self) -> None:
        """The bytes of a request have come, before its app has started."""
        if not self.arriving and self.limits is not None:
            self.arriving = True
            self.limits.arriving += 1

    def forget(self) -> None:
        if self.arriving and self.limits is not None:
            self.limits.arriving -= 1
        self.arriving = False
        self.complete()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.limits is not None:
            self.limits.held.discard(self)


class SlowClientGuard:
    """Pure ASGI middleware: the body deadline, and what ``GuardedConnection`` learns of each
    request."""

    def __init__(self, app: ASGIApp, connections: Connections) -> None:
        self.app = app
        self.connections = connections

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, its ``receive`` bounded by the body deadline."""
        if scope["type"] == "lifespan":
            scope.setdefault("state", {})[LIMITS] = self.connections
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection: GuardedConnection | None = scope.get("state", {}).get(CONNECTION)
        timeout = self.connections.body_timeout if has_body(scope) else None
        if connection is None:
            bounded = receive if timeout is None else self.bounded(scope, receive, timeout)
            await self.app(scope, bounded, send)
            return
        connection.request_started(scope, body_timeout=timeout)
        try:
            await self.app(
                scope, receive if timeout is None else connection.receiving(scope, receive), send
            )
        finally:
            connection.request_ended(scope)

    @staticmethod
    def bounded(scope: Scope, receive: Receive, timeout: float) -> Receive:
        """``receive`` that says the client left (``BODY_LATE``) past ``timeout`` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        body_in = False

        async def receiving() -> Message:
            nonlocal body_in
            if body_in:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                scope[BODY_LATE] = True
                return {"type": "http.disconnect"}
            body_in = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        return receiving


def accept_errors(
    report: Callable[[str], None], quiet: float = 5.0
) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """An event-loop exception handler: one line per burst (gaps under ``quiet`` s) of accepts
    failed for lack of file descriptors, in place of a traceback each."""
    last = float("-inf")

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal last
        if context.get("message") != "socket.accept() out of system resource":
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - last > quiet:
            exc = context.get("exception")
            reason = getattr(exc, "strerror", None) or str(exc)
            report(
                f"refusing connections: {reason} (open-file limit reached; "
                "lower --max-connections or raise the limit)"
            )
        last = now

    return handle
