"""Total deadlines and size caps for HTTP calls to webhooks and platform APIs.

httpx's timeouts apply to each read: a server that sends its headers or body a byte at a time,
each byte within the timeout, holds a call for as long as it likes. Here a deadline covers the
whole call. Inside ``deadline(seconds)``, a transport from ``transport()`` gives every connect,
write and read of the call only the time that is left, so slow headers end at the deadline too;
``read_capped`` reads a streamed body within the same deadline and up to a byte cap, with any
transport. A client ``bounded_client`` makes with its own transport keeps that transport's
connection pool at hand (``own_pool``), for a caller that sends on it without httpx's per-call
work (belt.handlers.webhook). Such a transport sends each request in one write, its head and
body together. The same client keeps plain-HTTP connections of its own too (``own_sockets``),
for a caller that speaks HTTP/1.1 on them itself; they are closed with the client.
"""

from __future__ import annotations

import contextvars
import select
import socket
import threading
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import httpx

_END: contextvars.ContextVar[float | None] = contextvars.ContextVar("belt_deadline", default=None)
_POOLS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""The connection pool of each client made by ``bounded_client`` with its own transport."""
_SOCKETS: weakref.WeakKeyDictionary[Any, Sockets] = weakref.WeakKeyDictionary()
"""The plain-HTTP connections of each client made by ``bounded_client`` with its own transport."""


class DeadlinePassed(Exception):
    """The total deadline of a call passed."""


class BodyTooLarge(Exception):
    """An answer's body passed its byte cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit // 1024} KiB")
        self.limit = limit


class deadline:
    """Give every HTTP call made in the block (on this thread) ``seconds`` in total (a class
    rather than a generator's context manager: it is entered for every delivery)."""

    __slots__ = ("seconds", "token")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.token: contextvars.Token[float | None] | None = None

    def __enter__(self) -> None:
        self.token = _END.set(time.monotonic() + self.seconds)

    def __exit__(self, *exc_info: object) -> None:
        if self.token is not None:
            _END.reset(self.token)
            self.token = None


def time_left() -> float | None:
    """Seconds left before the current deadline (None: no deadline); never below 0."""
    end = _END.get()
    return None if end is None else max(0.0, end - time.monotonic())


def within_deadline(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout``, or the time left before the current deadline when that is shorter; raises
    ``error`` once the deadline has passed."""
    return _clamp(timeout, error)


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    left = time_left()
    if left is None:
        return timeout
    if left <= 0:
        raise error("the total deadline passed")
    return left if timeout is None else min(timeout, left)


def read_capped(response: httpx.Response, limit: int) -> bytes:
    """A streamed response's (decoded) body, at most ``limit`` bytes, within the deadline."""
    return read_capped_chunks(response.iter_bytes(), limit)


def read_capped_chunks(pieces: Iterable[bytes], limit: int) -> bytes:
    """A body read a piece at a time, at most ``limit`` bytes, within the deadline."""
    chunks: list[bytes] = []
    size = 0
    for chunk in pieces:
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        left = time_left()
        if left is not None and left <= 0:
            raise DeadlinePassed
    return b"".join(chunks)


def transport(**options: Any) -> httpx.HTTPTransport:
    """An httpx transport whose connects, writes and reads keep to the current deadline (and
    which keeps the ``Sockets`` of the client it is given to, closed when it closes)."""
    made = _transport_class()(**options)
    pool = getattr(made, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        raise RuntimeError("this httpx has no connection pool belt can bound")
    pool._network_backend = _backend()
    return cast("httpx.HTTPTransport", made)


WRITE_HELD = 64 * 1024
"""The most bytes of a request held to go out in one write (a larger body is written as it
comes)."""


def _backend() -> Any:
    import httpcore

    class Stream(httpcore.NetworkStream):
        """A connection whose calls keep to the deadline, and whose request goes out in one
        write: httpcore writes a request's head and its body apart, which on a connection
        without delay (TCP_NODELAY, as httpcore sets it) is two packets and two wake-ups of
        the server. The pieces are held until the call reads (its answer) or they pass
        ``WRITE_HELD``, then written at once."""

        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self.inner = inner
            self.held: list[bytes] = []
            self.held_size = 0
            self.held_timeout: float | None = None

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            if self.held:
                try:
                    self.flush()
                except httpcore.WriteError:
                    # As httpcore does when a write fails: a server may have closed the request
                    # early and answered it anyway; that answer is read.
                    pass
            return self.inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            if not buffer:
                return
            self.held.append(buffer)
            self.held_size += len(buffer)
            self.held_timeout = timeout
            if self.held_size >= WRITE_HELD:
                self.flush()

        def flush(self) -> None:
            held, self.held, self.held_size = self.held, [], 0
            data = held[0] if len(held) == 1 else b"".join(held)
            self.inner.write(data, _clamp(self.held_timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self.held, self.held_size = [], 0
            self.inner.close()

        def start_tls(
            self,
            ssl_context: Any,
            server_hostname: str | None = None,
            timeout: float | None = None,
        ) -> httpcore.NetworkStream:
            if self.held:
                self.flush()
            wrapped = self.inner.start_tls(
                ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout)
            )
            return Stream(wrapped)

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore.SyncBackend()

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.NetworkStream:
            stream = self.inner.connect_tcp(
                host,
                port,
                _clamp(timeout, httpcore.ConnectTimeout),
                local_address,
                socket_options,
            )
            return Stream(stream)

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> httpcore.NetworkStream:
            stream = self.inner.connect_unix_socket(
                path, _clamp(timeout, httpcore.ConnectTimeout), socket_options
            )
            return Stream(stream)

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return Backend()


_TRANSPORT: Any = None


def _transport_class() -> Any:
    global _TRANSPORT
    if _TRANSPORT is None:
        import httpx

        class Transport(httpx.HTTPTransport):
            def __init__(self, **options: Any) -> None:
                super().__init__(**options)
                self.sockets = Sockets()

            def close(self) -> None:
                self.sockets.close()
                super().close()

            def __exit__(self, *exc_info: Any) -> None:
                # What httpx's client calls when it leaves its ``with`` (not ``close``).
                self.sockets.close()
                super().__exit__(*exc_info)

        _TRANSPORT = Transport
    return _TRANSPORT


class Sockets:
    """Kept-alive plain-HTTP (TCP) connections to each host and port, for a caller that sends
    its requests on them itself and gives each one back once its answer was read whole. A
    connection is taken by one caller at a time; one that became readable while it was idle
    (the server closed it, or sent what was not asked for) is closed rather than used."""

    def __init__(self) -> None:
        self.idle: dict[tuple[str, int], list[socket.socket]] = {}
        self.lock = threading.Lock()
        self.closed = False
        self.connect: Any = socket.create_connection
        """How a connection is opened: ``socket.create_connection``'s signature."""

    def take(self, host: str, port: int, timeout: float | None) -> tuple[socket.socket, bool]:
        """An idle connection to ``host``:``port``, or a new one (opened within the deadline);
        and whether it was kept (a kept one may have been closed by the server just now).
        Raises httpcore's ConnectError or ConnectTimeout as its backend does."""
        import httpcore

        with self.lock:
            kept = self.idle.get((host, port))
            while kept:
                sock = kept.pop()
                if _is_quiet(sock):
                    return sock, True
                sock.close()
        try:
            sock = self.connect((host, port), _clamp(timeout, httpcore.ConnectTimeout))
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # not a TCP socket (an embedder's or a test's opener)
        return sock, False

    def give(self, host: str, port: int, sock: socket.socket) -> None:
        """Keep ``sock`` (whose last answer was read whole) for the next request there."""
        with self.lock:
            if not self.closed:
                self.idle.setdefault((host, port), []).append(sock)
                return
        sock.close()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            idle, self.idle = self.idle, {}
        for kept in idle.values():
            for sock in kept:
                sock.close()


def _is_quiet(sock: socket.socket) -> bool:
    """True when nothing can be read from an idle connection: no data, no end, no error."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def bounded_client(base: Any = None) -> Any:
    """An ``httpx.Client`` whose calls keep to the total deadline (``base``: a transport of a
    test or an embedder instead)."""
    import httpx

    if base is not None:
        return httpx.Client(transport=base, follow_redirects=False)
    made = transport()
    client = httpx.Client(transport=made, follow_redirects=False)
    _POOLS[client] = made._pool
    _SOCKETS[client] = getattr(made, "sockets")  # noqa: B009 - the transport's own kind
    return client


def own_pool(client: Any) -> Any:
    """The httpcore connection pool of a client ``bounded_client`` made with its own transport
    (its connects, writes and reads keep to the deadline); None for any other client."""
    return _POOLS.get(client)


def own_sockets(client: Any) -> Sockets | None:
    """The plain-HTTP connections kept for a client ``bounded_client`` made with its own
    transport (closed when the client closes); None for any other client."""
    return _SOCKETS.get(client)
