"""What ``belt serve`` lets in: only requests no web page in the user's browser could forge.

Its ``Host`` names this machine or an ``--allow-host`` name (a rebound page sends its own), or it
carries the ``--token``; its ``Origin``, if any, is the server's own; a body that changes
something is ``application/json`` (which needs a preflight the server never allows). A refusal
is a problem document and one live line.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Callable, Iterable
from functools import lru_cache, partial

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from belt.display.text import printable
from belt.errors import UsageError
from belt.records.reports import Reporter, report_api
from belt.server.problems import Problem

BODY_LATE = "belt.body_late"
"""A scope key: its connection was closed for a late body (or at the cap)."""
STOPPING = "belt.stopping"
"""A scope key: the server began to stop while the request was going (a stream then ends)."""
HOSTS_REMEMBERED = 64
"""How many ``Host`` values (and content types) a guard remembers the verdict on."""
LOOPBACK_NAMES = ("localhost",)
"""Host names that always mean this machine (besides the loopback addresses)."""

HOST = re.compile(r"(?:\[([^\]]*)\]|([a-z0-9._-]+))(?::(\d{1,5}))?")
"""A ``Host`` value (lowercase): an IPv6 address in brackets or a name, and a port."""
HEADER_MAX = 255 + 8  # the longest Host or Origin value looked at: a DNS name, a port and a scheme
SHOWN_MAX = 100  # how much of a refused header value a refusal quotes
SAFE_METHOD_NAMES = ("GET", "HEAD", "OPTIONS")
"""Methods that change nothing (a preflight ``OPTIONS`` is answered 405: never allowed)."""
JSON_CHARSETS = ("utf-8", "utf8")
LOOPBACK_HOSTS = "a loopback host (127.0.0.1, localhost, [::1])"
CHECKED_HEADERS = frozenset((b"authorization", b"host", b"origin", b"content-type"))


def split_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` value's name (lowercase; IPv6 in brackets) and port; None if not name[:port]."""
    found = HOST.fullmatch(value.lower()) if len(value) <= HEADER_MAX and value.isascii() else None
    if found is None:
        return None
    address, name, port = found.groups()
    try:
        name = name or f"[{ipaddress.IPv6Address(address).compressed}]"
    except ValueError:
        return None
    if port is not None and not 0 < int(port) < 65536:
        return None
    return name, None if port is None else int(port)


def is_loopback_name(name: str) -> bool:
    """True for a host name or address (IPv6 in brackets or not) only this machine answers to."""
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_host_name(spec: str) -> str:
    """The name of an ``--allow-host`` value; UsageError saying why it is not one."""
    parsed = split_host(spec.strip())
    if parsed is None or parsed[1] is not None:
        raise UsageError(
            f"--allow-host {spec!r} is not a host name",
            hint="give the name requests are sent to, without a scheme or a port "
            "(--allow-host belt.internal)",
        )
    return parsed[0]


def host_allowed(value: str, allowed: Iterable[str] = ()) -> bool:
    """True when a ``Host`` value names this machine or an ``allowed`` name (any port)."""
    if (parsed := split_host(value)) is None:
        return False
    name = parsed[0]
    return is_loopback_name(name) or name in allowed


def same_origin(origin: str, host: str) -> bool:
    """True when an ``Origin`` is http(s) on the same name and port as the ``Host`` value."""
    scheme, sep, rest = origin.lower().partition("://")
    theirs, ours = split_host(rest), split_host(host)
    if len(origin) > HEADER_MAX or scheme not in ("http", "https") or not sep:
        return False
    if theirs is None or ours is None:
        return False
    default = 80 if scheme == "http" else 443
    return theirs[0] == ours[0] and (theirs[1] or default) == (ours[1] or default)


def is_json_type(value: str) -> bool:
    """True for ``application/json``, with at most a UTF-8 ``charset`` parameter."""
    essence, *parameters = value.split(";")
    pairs = [parameter.strip().partition("=") for parameter in parameters]
    return essence.strip().lower() == "application/json" and all(
        (not key and not given)
        or (key.strip().lower() == "charset" and given.strip().strip('"').lower() in JSON_CHARSETS)
        for key, _, given in pairs
    )


def has_body(scope: Scope) -> bool:
    """True when a request's head announces a body (a length above 0, or chunks)."""
    return any(
        name == b"transfer-encoding"
        or (name == b"content-length" and value.strip() not in (b"", b"0"))
        for name, value in scope["headers"]
    )


def shown(value: bytes) -> str:
    """A header value as a refusal quotes it: cut short, every character visible."""
    text = value.decode("latin-1")
    return repr(text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + "…")


class RequestGuard:
    """Pure ASGI middleware in front of every route; with ``token``, every route but those
    ``is_open`` names needs the bearer token, and one carrying it skips the Host/Origin rules."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None = None,
        allow_hosts: Iterable[str] = (),
        is_open: Callable[[str], bool] = lambda path: False,
        report: Reporter | None = None,
    ) -> None:
        self.app = app
        self.token = token.encode("utf-8") if token else None
        self.allowed = frozenset(allowed_host_name(name) for name in allow_hosts)
        self.host_allowed = lru_cache(HOSTS_REMEMBERED)(partial(host_allowed, allowed=self.allowed))
        self.json_type = lru_cache(HOSTS_REMEMBERED)(
            lambda value: is_json_type(value.decode("latin-1"))
        )
        self._passed: tuple[str, str, list[tuple[bytes, bytes]]] | None = None  # the last let in
        self.is_open = is_open
        self.report = report

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a refused request with its problem; pass the rest on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self.check(scope)
        except Problem as problem:
            self._tell("refused", scope, problem.status, problem.detail)
            headers = {"www-authenticate": "Bearer"} if problem.status == 401 else None
            await problem.response(headers)(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:  # nobody is left to answer: one line, not a traceback
            late = scope.get(BODY_LATE)
            self._tell(
                "cut short",
                scope,
                408 if late else 400,
                "the body was not all sent in time (or the server was at its connection cap); "
                "the connection was closed"
                if late
                else "the client closed the connection before sending its whole body",
            )

    def check(self, scope: Scope) -> None:
        """Raise a Problem for a request the rules refuse (one like the last let in passes)."""
        passed = self._passed
        if (
            passed is not None
            and scope["headers"] == passed[2]
            and scope["method"] == passed[0]
            and scope["path"] == passed[1]
        ):
            return
        headers: dict[bytes, list[bytes]] = {}
        for name, value in scope["headers"]:
            if name in CHECKED_HEADERS:
                headers.setdefault(name, []).append(value)
        scheme, _, offered = headers.get(b"authorization", [b""])[0].partition(b" ")
        token = self.token
        if token is None or not (
            scheme.lower() == b"bearer" and hmac.compare_digest(offered.strip(), token)
        ):
            if token is not None and not self.is_open(scope["path"]):
                sent = b"authorization" in headers
                raise Problem(401, "wrong bearer token" if sent else "missing bearer token")
            hosts = headers.get(b"host", [])
            if len(hosts) != 1:
                what = "without a Host header" if not hosts else "with more than one Host header"
                raise Problem(403, f"belt serve does not answer a request {what}")
            host = hosts[0].decode("latin-1")
            if token is None and not self.host_allowed(host):
                raise Problem(
                    403,
                    f"Host {shown(hosts[0])} is not a name of this server: without --token, "
                    f"belt serve answers only requests to {LOOPBACK_HOSTS} or to a name given "
                    "with --allow-host (a page of another site, rebound to 127.0.0.1, sends its "
                    "own name)",
                )
            origins = headers.get(b"origin")
            if origins is not None and (
                len(origins) != 1 or not same_origin(origins[0].decode("latin-1"), host)
            ):
                raise Problem(
                    403,
                    f"Origin {shown(b', '.join(origins))} is not this server's own "
                    f"(http://{printable(host[:SHOWN_MAX])}): belt serve does not answer "
                    "other sites' pages",
                )
        if scope["method"] not in SAFE_METHOD_NAMES and has_body(scope):
            types = headers.get(b"content-type", [])
            if len(types) != 1 or not self.json_type(types[0]):
                sent_type = (
                    f"it was {shown(b', '.join(types))}" if types else "it had no Content-Type"
                )
                raise Problem(415, f"send the body as application/json ({sent_type})")
        self._passed = (scope["method"], scope["path"], list(scope["headers"]))

    def _tell(self, action: str, scope: Scope, status: int, detail: str) -> None:
        path = str(scope.get("path", ""))
        path = path if len(path) <= SHOWN_MAX else path[:SHOWN_MAX] + "…"
        report_api(self.report, action, f"{scope.get('method', '-')} {path}", status, detail)
