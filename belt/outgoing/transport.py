"""Every outgoing HTTP call of belt through one httpx transport per process.

Connections are kept alive between calls (never credentials or cookies). A call has a **total**
deadline: httpcore pools on a network backend whose every connect, write and read gets only the
time left, and a body read up to a byte cap against it (httpx's timeouts bound each read only).
Proxies are honoured, never for loopback. ``using`` lends the process a test's transport."""

from __future__ import annotations

import atexit
import base64
import contextlib
import contextvars
import os
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpcore
import httpx

from belt.deliveries.effects import is_loopback_host
from belt.outgoing import tracing

MAX_CONNECTIONS = 100  # open at once, for each proxy (or none)
KEPT_CONNECTIONS = 20  # idle, kept open between calls
KEEP_SECONDS = 4.0  # under the 5 s of uvicorn and Node: a call seldom meets one being closed

_END: contextvars.ContextVar[float | None] = contextvars.ContextVar("belt_call_end", default=None)


class TooLarge(Exception):
    """An answer's body passed its byte cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit // 1024} KiB")


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout``, or the time left before the call's deadline if shorter; ``error`` once past."""
    end = _END.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the total deadline passed")
    return left if timeout is None else min(timeout, left)


WRITE_HELD = 64 * 1024  # the most bytes of a request held to go out in one write


class _Stream(httpcore.NetworkStream):
    """A connection that keeps to the call's deadline and sends a request in one write (httpcore
    writes head and body apart: two packets, two wake-ups) until the call reads or WRITE_HELD."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner
        self.held = bytearray()
        self.timeout: float | None = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        # As httpcore does: a server that closed early may have answered; read it.
        with contextlib.suppress(httpcore.WriteError):
            if self.held:
                self.flush()
        return self.inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.held += buffer
        self.timeout = timeout
        if len(self.held) >= WRITE_HELD:
            self.flush()

    def flush(self) -> None:
        held, self.held = bytes(self.held), bytearray()
        self.inner.write(held, _left(self.timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.held = bytearray()
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        if self.held:
            self.flush()
        tls = self.inner.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
        )
        return _Stream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _Backend(httpcore.SyncBackend):
    """httpcore's own blocking sockets, each a ``_Stream``."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        left = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(super().connect_tcp(host, port, left, local_address, socket_options))


_HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


@contextmanager
def _as_httpx() -> Iterator[None]:
    """httpcore's exceptions raised as httpx's of the same name, as httpx's own transport does."""
    try:
        yield
    except _HTTPCORE_ERRORS as exc:
        raise getattr(httpx, type(exc).__name__)(str(exc)) from exc


class _Body(httpx.SyncByteStream):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx():
            yield from self.inner

    def close(self) -> None:
        with _as_httpx():
            self.inner.close()


Pool = httpcore.ConnectionPool | httpcore.HTTPProxy


def _core_url(url: httpx.URL) -> httpcore.URL:
    return httpcore.URL(
        scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
    )


class Transport(httpx.BaseTransport):
    """httpx's transport over httpcore pools of ``_Backend`` connections, one per (https, proxy)."""

    def __init__(self) -> None:
        self.backend = _Backend()
        self.pools: dict[tuple[bool, str | None], Pool] = {}
        self.lock = threading.Lock()

    def pool(self, tls: bool, proxy: str | None) -> Pool:
        """The pool for ``https`` (``tls``) or ``http`` URLs, through ``proxy`` or none."""
        with self.lock:
            if (tls, proxy) not in self.pools:
                self.pools[tls, proxy] = self._made(tls, proxy)
            return self.pools[tls, proxy]

    def _made(self, tls: bool, proxy: str | None) -> Pool:
        common: dict[str, Any] = {
            "ssl_context": tls_context() if tls else None,
            "max_connections": MAX_CONNECTIONS,
            "max_keepalive_connections": KEPT_CONNECTIONS,
            "keepalive_expiry": KEEP_SECONDS,
            "network_backend": self.backend,
        }
        if proxy is None:
            return httpcore.ConnectionPool(**common)
        try:
            url = httpx.URL(proxy)
        except httpx.InvalidURL:
            raise httpx.ProxyError("the proxy the environment names is not a valid URL") from None
        if url.scheme not in ("http", "https"):
            raise httpx.ProxyError(f"a {url.scheme} proxy is not supported (only http and https)")
        return httpcore.HTTPProxy(
            proxy_url=_core_url(url),
            proxy_auth=(url.username, url.password) if url.username else None,
            proxy_ssl_context=tls_context() if url.scheme == "https" else None,
            **common,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=_core_url(url),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        pool = self.pool(url.scheme == "https", proxy_for(url.scheme, url.host))
        with _as_httpx():
            answer = pool.handle_request(sent)
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        with self.lock:
            pools, self.pools = list(self.pools.values()), {}
        for pool in pools:
            pool.close()


def proxy_for(scheme: str, host: str) -> str | None:
    """The proxy the environment names for ``host`` (none for loopback or ``NO_PROXY``)."""
    if is_loopback_host(host):
        return None
    env = os.environ
    names = (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY")
    proxy = next((env[name] for name in names if env.get(name)), None)
    if not proxy:
        return None
    host = host.lower()
    for entry in (env.get("no_proxy") or env.get("NO_PROXY") or "").split(","):
        name = entry.strip().lower().lstrip(".")
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return None
    return proxy if "://" in proxy else f"http://{proxy}"


@dataclass
class _Process:
    """A process's transport, TLS context and lent transport; a forked child starts with none."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    transport: Transport | None = None
    tls: ssl.SSLContext | None = None
    lent: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None


_MINE = _Process()
# A forked child's parents' state, kept unused: collecting it would close the child's copies of
# their sockets, each with a ResourceWarning.
_PARENTS: list[_Process] = []


def _forked() -> None:
    global _MINE
    _PARENTS.append(_MINE)
    _MINE = _Process()


os.register_at_fork(after_in_child=_forked)


def tls_context() -> ssl.SSLContext:
    """The process's TLS context (certificates checked as httpx checks them)."""
    mine = _MINE
    with mine.lock:
        mine.tls = mine.tls or httpx.create_ssl_context()
        return mine.tls


@contextmanager
def using(lent: httpx.BaseTransport | httpx.AsyncBaseTransport) -> Iterator[None]:
    """Send this process's calls (sync or async, as ``lent`` is) through ``lent`` for the block."""
    mine = _MINE
    before, mine.lent = mine.lent, lent
    try:
        yield
    finally:
        mine.lent = before


def _transport() -> httpx.BaseTransport:
    mine = _MINE
    if isinstance(mine.lent, httpx.BaseTransport):
        return mine.lent
    with mine.lock:
        mine.transport = mine.transport or Transport()
        return mine.transport


def close() -> None:
    """Close this process's connections and forget its TLS context."""
    mine = _MINE
    with mine.lock:
        made, mine.transport, mine.tls = mine.transport, None, None
    if made is not None:
        made.close()


atexit.register(close)  # a process's kept connections are closed as it ends, not collected


# What every request carries unless it says otherwise (httpx's client's own defaults), no more.
HEADERS = {
    "accept": "*/*",
    "accept-encoding": "gzip, deflate",
    "connection": "keep-alive",
    "user-agent": f"python-httpx/{httpx.__version__}",
}


@contextmanager
def call(
    method: str,
    url: str | httpx.URL,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    **content: Any,
) -> Iterator[httpx.Response]:
    """Send a request and give its answer, body unread (``read``), all within ``timeout`` seconds.

    URL credentials go as basic authentication; no redirect is followed; raises what httpx does."""
    target = httpx.URL(url)
    sent = dict(HEADERS)
    if target.userinfo:
        pair = f"{target.username}:{target.password}".encode()
        sent["authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    sent.update((name.lower(), value) for name, value in (headers or {}).items())
    tracing.inject(sent)  # the current span's traceparent (tracestate), when tracing is on
    limits = dict.fromkeys(("connect", "read", "write", "pool"), timeout)
    request = httpx.Request(method, target, headers=sent, extensions={"timeout": limits}, **content)
    token = _END.set(time.monotonic() + timeout)
    try:
        answer = _transport().handle_request(request)
        answer.request = request
        try:
            yield answer
        finally:
            answer.close()
    finally:
        _END.reset(token)


def read(answer: httpx.Response, limit: int) -> bytes:
    """``call``'s decoded body, up to ``limit`` bytes (else TooLarge), within its deadline."""
    body = bytearray()
    for chunk in answer.iter_bytes():
        body += chunk
        if len(body) > limit:
            raise TooLarge(limit)
        _left(None, httpx.ReadTimeout)
    return bytes(body)


def async_client(url: str, *, timeout: float) -> httpx.AsyncClient:
    """An async client for ``url``'s origin (``belt serve --forward-to``); its caller keeps each
    call's total deadline with ``asyncio.timeout`` of the same ``timeout``: neither cuts first."""
    if not isinstance(transport := _MINE.lent, httpx.AsyncBaseTransport):
        target = httpx.URL(url)
        proxy = proxy_for(target.scheme, target.host)
        tls = target.scheme == "https" or (proxy or "").startswith("https:")
        transport = httpx.AsyncHTTPTransport(
            # The checked context only for https; for http, httpx's bare one (no certificates).
            verify=tls_context() if tls else False,
            proxy=proxy,
            limits=httpx.Limits(
                max_connections=MAX_CONNECTIONS,
                max_keepalive_connections=KEPT_CONNECTIONS,
                keepalive_expiry=KEEP_SECONDS,
            ),
        )
    made = httpx.AsyncClient(
        transport=transport, trust_env=False, follow_redirects=False, timeout=timeout
    )
    # Each call is a request of its own, not part of a session: no cookie is kept.
    made.cookies = CookieJar(DefaultCookiePolicy(allowed_domains=[]))
    return made


async def aread(answer: httpx.Response, limit: int) -> bytes:
    """``read`` for an async call (its deadline kept by the caller)."""
    body = bytearray()
    async for chunk in answer.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise TooLarge(limit)
    return bytes(body)
