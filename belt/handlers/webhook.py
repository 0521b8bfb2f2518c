"""Webhook handlers: POST the payload, read back a LifecycleHookResponse.

Failures are described by host only: a webhook URL can carry credentials in its path or query,
so the full URL never reaches a message, a log or the store. A delivery has a total deadline
(headers and a trickled body included) and its answer a byte cap; an answer that is not strict
JSON (NaN, deep nesting, a huge integer, a lone surrogate) is that handler's failure.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from belt.deadline import (
    BodyTooLarge,
    DeadlinePassed,
    Sockets,
    bounded_client,
    deadline,
    own_pool,
    own_sockets,
    read_capped,
    read_capped_chunks,
    within_deadline,
)
from belt.effects import url_host
from belt.records import serves
from belt.records.leases import is_alive
from belt.signing import signed_headers
from belt.strictjson import StrictJSONError, decode
from belt.text import describe
from belt.wire.platform import LifecycleHookResponse
from belt.wire.validate import check_response, model_problems

if TYPE_CHECKING:
    import socket

    import httpx


@dataclass
class WebhookResult:
    """What one webhook call gave back."""

    status: int | None
    body: str
    response: LifecycleHookResponse | None
    error: str | None
    duration_ms: int
    warnings: list[str] = field(default_factory=list)
    """What was ignored in the answer (its unknown keys)."""
    exception: BaseException | None = None
    """What an in-process handler raised (its traceback, for ``-v``)."""


TIMED_OUT = "did not answer within"
CLOSED = "closed the connection without answering"
MALFORMED = "sent a malformed answer"
DISCONNECTED = "Server disconnected without sending a response."
"""What httpcore (and ``_Reply``) say of a connection closed before any byte of an answer."""
MAX_ANSWER_BYTES = 1024 * 1024
"""The most bytes of a webhook's answer that are read."""


def webhook_client(transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """A client for deliveries; without a ``transport`` its calls keep to the total deadline
    (and go straight to its own kept-alive connections, see ``post_body``). It keeps no
    cookies: each delivery is a request of its own, as the platform sends it, not part of a
    session."""
    # Start-up: http.cookiejar loads urllib.request, http.client and ssl, which a run with no
    # webhook does not need.
    import http.cookiejar

    client: httpx.Client = bounded_client(transport)
    client.cookies = http.cookiejar.CookieJar(
        http.cookiejar.DefaultCookiePolicy(allowed_domains=[])
    )
    return client


_PAYLOAD_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_payload(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed) for a payload (``json.dumps(payload,
    ensure_ascii=False, separators=(",", ":"))``, by one encoder kept for it)."""
    return _PAYLOAD_ENCODER.encode(payload).encode("utf-8")


def deliver(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    *,
    timeout: float,
    secret: str | None = None,
) -> WebhookResult:
    """POST ``payload`` to ``url`` and parse the answer; a failure is returned, never raised."""
    body = encode_payload(payload)
    headers = {"content-type": "application/json"}
    if secret:
        headers.update(signed_headers(secret, body))
    return post_body(client, url, body, headers, timeout=timeout)


def post_body(
    client: httpx.Client, url: str, body: bytes, headers: dict[str, str], *, timeout: float
) -> WebhookResult:
    """POST exactly ``body`` with exactly ``headers`` and parse the answer as ``deliver`` does
    (``belt check`` sends tampered and unsigned requests through it).

    On a client of ``webhook_client`` the request skips httpx's per-call work: to a plain-HTTP
    URL it goes out on the client's own connections (``_post_plain``), to an HTTPS one on its
    transport's pool (``_post_direct``); a URL with credentials, or headers httpx sets itself,
    go through httpx's client, as on any other client."""
    import httpcore  # noqa: PLC0415 - loaded when a webhook is sent
    import httpx  # noqa: PLC0415 - loaded when a webhook is sent

    host = url_host(url)
    started = time.perf_counter()

    def elapsed() -> int:
        return round((time.perf_counter() - started) * 1000)

    timed_out = f"{host} {TIMED_OUT} {timeout:g} s"
    pool = own_pool(client)
    try:
        with deadline(timeout):
            target = _direct_target(url, tuple(headers)) if pool is not None else None
            sockets = own_sockets(client) if target is not None and target.plain else None
            request = None
            if sockets is not None and target is not None:
                request = _plain_request(client, target, body, headers)
            if request is not None and sockets is not None and target is not None:
                status, encoding, raw = _post_plain(sockets, target, request, timeout=timeout)
            elif target is not None:
                status, encoding, raw = _post_direct(
                    client, pool, target, body, headers, timeout=timeout
                )
            else:
                with client.stream(
                    "POST", url, content=body, headers=headers, timeout=timeout
                ) as reply:
                    raw = read_capped(reply, MAX_ANSWER_BYTES)
                status, encoding = reply.status_code, reply.encoding
    except (httpx.TimeoutException, httpcore.TimeoutException, DeadlinePassed):
        return WebhookResult(None, "", None, timed_out, elapsed())
    except BodyTooLarge as exc:
        return WebhookResult(None, "", None, f"{host}: {exc}", elapsed())
    except (httpx.ConnectError, httpcore.ConnectError) as exc:
        return WebhookResult(
            None, "", None, f"cannot connect to {host}: {_reason(exc, url)}", elapsed()
        )
    except (httpx.ReadError, httpx.WriteError, httpcore.ReadError, httpcore.WriteError) as exc:
        # Connected, the request (being) sent, and the connection reset or closed under it.
        return WebhookResult(None, "", None, _closed(host, _reason(exc, url)), elapsed())
    except (httpx.RemoteProtocolError, httpcore.RemoteProtocolError) as exc:
        reason = _reason(exc, url)
        if reason == DISCONNECTED:
            return WebhookResult(None, "", None, _closed(host, None), elapsed())
        error = f"{host} {MALFORMED}: {reason}"
        return WebhookResult(None, "", None, error, elapsed())
    except (
        httpx.HTTPError,
        httpx.InvalidURL,
        UnicodeError,
        # What httpcore raises on a direct delivery (httpx maps them to its own, same messages).
        httpcore.NetworkError,
        httpcore.ProtocolError,
        httpcore.ProxyError,
        httpcore.UnsupportedProtocol,
    ) as exc:
        # UnicodeError: a host name that IDNA cannot encode.
        return WebhookResult(
            None, "", None, f"request to {host} failed: {_reason(exc, url)}", elapsed()
        )
    duration = elapsed()
    if duration > timeout * 1000:
        # The last bytes came just as the deadline passed: that is still too late.
        return WebhookResult(None, "", None, timed_out, duration)
    text = raw.decode(encoding or "utf-8", errors="replace")
    if not 200 <= status < 300:
        return WebhookResult(status, text, None, f"{host} answered HTTP {status}", duration)
    answer = read_answer(text)
    if answer.problem is not None:
        error = f"{host} answered with a body that is not a LifecycleHookResponse: {answer.problem}"
        return WebhookResult(status, text, None, error, duration)
    return WebhookResult(status, text, answer.response, None, duration, answer.warnings)


@dataclass(frozen=True)
class _Target:
    """Where a direct delivery goes: httpcore's URL and the headers every delivery to it sends
    before its own (Host); for plain HTTP, the host name, port and request target too."""

    url: Any
    host: bytes
    plain: bool = False
    hostname: str = ""
    port: int = 0
    path: bytes = b"/"


@functools.lru_cache(maxsize=64)
def _direct_target(url: str, headers: tuple[str, ...]) -> _Target | None:
    """The target of a delivery to ``url`` sent straight on a bounded client's connection pool,
    or None when httpx itself must send it: a URL with credentials in it (httpx turns them into
    basic authentication), a scheme other than http(s), or ``headers`` that name one httpx sets
    itself. An invalid URL raises as httpx's client raises (InvalidURL, UnicodeError)."""
    import httpcore  # noqa: PLC0415 - loaded when a webhook is sent
    import httpx  # noqa: PLC0415 - loaded when a webhook is sent

    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host or parsed.userinfo:
        return None
    if {name.lower() for name in headers} & {"host", "content-length", "transfer-encoding"}:
        return None
    core = httpcore.URL(
        scheme=parsed.raw_scheme, host=parsed.raw_host, port=parsed.port, target=parsed.raw_path
    )
    plain = parsed.scheme == "http"
    port = parsed.port or (80 if plain else 443)
    return _Target(
        core, parsed.netloc, plain, parsed.raw_host.decode("ascii"), port, parsed.raw_path
    )


def _post_direct(
    client: httpx.Client,
    pool: Any,
    target: _Target,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float,
) -> tuple[int, str | None, bytes]:
    """POST on the client's own connection pool (kept-alive connections, the deadline's
    transport) without httpx's per-call work: the same request bytes as the client sends (its
    default headers), the answer read within the deadline and the cap, decoded as httpx decodes
    it. Returns (status, text encoding, body); raises what httpcore raises."""
    import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

    own = {name.lower() for name in headers}
    sent = [
        (b"Host", target.host),
        *((name, value) for name, value in client.headers.raw if name.lower().decode() not in own),
        *((name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()),
        (b"Content-Length", str(len(body)).encode()),
    ]
    request = httpcore.Request(
        b"POST",
        target.url,
        headers=sent,
        content=body,
        extensions={"timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout)},
    )
    reply = _send(pool, request)
    try:
        encoding, raw = _read_body(reply.status, reply.headers, reply.stream)
        return reply.status, encoding, raw
    finally:
        reply.close()


def _read_body(
    status: int, fields: list[tuple[bytes, bytes]], pieces: Iterable[bytes]
) -> tuple[str | None, bytes]:
    """An answer's body read from its pieces within the deadline and the cap, decoded as httpx
    decodes it; and the encoding of its text."""
    import httpx  # noqa: PLC0415 - loaded when a webhook is sent

    plain = all(
        value.strip().lower() in (b"", b"identity")
        for name, value in fields
        if name.lower() == b"content-encoding"
    )
    charset = any(
        b"charset" in value.lower() for name, value in fields if name.lower() == b"content-type"
    )
    if plain and not charset:
        return "utf-8", read_capped_chunks(pieces, MAX_ANSWER_BYTES)
    # Compressed, or a charset named: httpx's own decoding of the same stream.
    decoded = httpx.Response(status, headers=fields, stream=_stream_class()(pieces))
    return decoded.encoding, read_capped(decoded, MAX_ANSWER_BYTES)


_FIELD_NAME = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")
_FIELD_NAME_BYTES = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: [^\r\n]*)?")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_BLANK_LINE = re.compile(rb"\n\r?\n")
HEAD_MAX = 16 * 1024
"""The most bytes of an answer's head (its status line and fields) that are read, as h11 reads."""


def _plain_request(
    client: httpx.Client, target: _Target, body: bytes, headers: dict[str, str]
) -> bytes | None:
    """The bytes of a POST of ``body`` as httpx's client sends it (Host, the client's default
    headers, ``headers``, then Content-Length), head and body together; None when one of
    ``headers`` is not a plain ASCII field (then httpcore sends it, and refuses what it must)."""
    start = _request_start(target.path, target.host, tuple(client.headers.raw), tuple(headers))
    if start is None:
        return None
    parts = [start]
    for name, value in headers.items():
        if _FIELD_VALUE.fullmatch(value) is None:
            return None
        parts += (name.encode("ascii"), b": ", value.encode("ascii"), b"\r\n")
    parts += (b"Content-Length: ", str(len(body)).encode(), b"\r\n\r\n", body)
    return b"".join(parts)


@functools.lru_cache(maxsize=64)
def _request_start(
    path: bytes, host: bytes, defaults: tuple[tuple[bytes, bytes], ...], names: tuple[str, ...]
) -> bytes | None:
    """A POST's request line (to ``path``), Host and the client's ``defaults`` that ``names`` do
    not replace; None when one of ``names`` is not a field name."""
    if not all(_FIELD_NAME.fullmatch(name) for name in names):
        return None
    own = {name.lower() for name in names}
    parts = [b"POST ", path, b" HTTP/1.1\r\nHost: ", host, b"\r\n"]
    for name, value in defaults:
        if name.lower().decode() not in own:
            parts += (name, b": ", value, b"\r\n")
    return b"".join(parts)


def _post_plain(
    sockets: Sockets, target: _Target, request: bytes, *, timeout: float
) -> tuple[int, str | None, bytes]:
    """Send ``request`` (``_plain_request``) in one write on a kept-alive plain-HTTP connection
    of ``sockets`` (or a new one) and read its answer as HTTP/1.1 within the deadline and the
    cap, without httpcore and h11's per-request work: the status line, the fields, the body by
    its length, its chunks or the end of the connection, interim (1xx) answers passed over.
    The connection is kept for the next delivery only when its answer was read whole and it
    may carry another. Returns (status, text encoding, body); raises what httpcore raises."""
    import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

    sock, _ = sockets.take(target.hostname, target.port, timeout)
    again = False
    try:
        refused = _send_all(sock, request, timeout)
        reply = _Reply(sock, timeout)
        try:
            version, status, fields = reply.head()
            while 100 <= status < 200 and status != 101:
                version, status, fields = reply.head()
        except (httpcore.RemoteProtocolError, httpcore.ReadError):
            if refused is not None:
                # As httpcore: the request could not be sent whole, and no answer came.
                raise httpcore.WriteError(str(refused)) from refused
            raise
        if status == 101:
            raise httpcore.RemoteProtocolError("the server switched protocols")
        pieces, sized = reply.body(status, fields)
        named = reply.named
        coding = named.get(b"content-encoding", b"").strip().lower()
        encoding: str | None = "utf-8"
        if (
            coding in (b"", b"identity")
            and b"charset" not in named.get(b"content-type", b"").lower()
        ):
            raw = read_capped_chunks(pieces, MAX_ANSWER_BYTES)
        else:
            encoding, raw = _read_body(status, fields, pieces)
        connection = named.get(b"connection", b"").lower()
        again = (
            sized
            and refused is None
            and version == b"1"
            and (
                not connection or b"close" not in {part.strip() for part in connection.split(b",")}
            )
            and not reply.buffer
        )
        return status, encoding, raw
    finally:
        if again:
            sockets.give(target.hostname, target.port, sock)
        else:
            sock.close()


def _send_all(sock: socket.socket, data: bytes, timeout: float) -> OSError | None:
    """Write ``data`` within the deadline; the error if the connection refused it (the server
    may have answered and closed it early: its answer is read all the same)."""
    import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

    sock.settimeout(within_deadline(timeout, httpcore.WriteTimeout))
    try:
        sock.sendall(data)
    except TimeoutError as exc:
        raise httpcore.WriteTimeout(str(exc) or "timed out") from exc
    except OSError as exc:
        return exc
    return None


class _Reply:
    """An HTTP/1.1 answer read from a connection, within the deadline."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.timeout = timeout
        self.buffer = bytearray()
        self.named: dict[bytes, bytes] = {}

    def fill(self) -> bool:
        """Read what came next onto the buffer; False at the end of the connection."""
        import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

        self.sock.settimeout(within_deadline(self.timeout, httpcore.ReadTimeout))
        try:
            data = self.sock.recv(65536)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc) or "timed out") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc
        self.buffer += data
        return bool(data)

    def head(self) -> tuple[bytes, int, list[tuple[bytes, bytes]]]:
        """The next status line and fields: the HTTP minor version, the status and the fields
        (names in lower case; ``named`` has each name's values joined by commas)."""
        import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

        start = 0
        while True:
            found = _BLANK_LINE.search(self.buffer, start)
            if found is not None:
                block = bytes(self.buffer[: found.start()])
                del self.buffer[: found.end()]
                break
            if len(self.buffer) > HEAD_MAX:
                raise httpcore.RemoteProtocolError("the answer's head is too long")
            start = max(0, len(self.buffer) - 2)
            if not self.fill():
                if not self.buffer:
                    raise httpcore.RemoteProtocolError(DISCONNECTED)
                raise httpcore.RemoteProtocolError("the server closed the connection mid-answer")
        lines = [line.rstrip(b"\r") for line in block.split(b"\n")]
        matched = _STATUS_LINE.fullmatch(lines[0])
        if matched is None:
            raise httpcore.RemoteProtocolError(f"illegal status line: {lines[0][:100]!r}")
        fields: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            if line[:1] in (b" ", b"\t") and fields:
                # An obsolete folded line continues the field before it.
                name, value = fields[-1]
                fields[-1] = (name, (value + b" " + line.strip(b" \t")).strip(b" \t"))
                continue
            name, sep, value = line.partition(b":")
            if not sep or _FIELD_NAME_BYTES.fullmatch(name) is None:
                raise httpcore.RemoteProtocolError(f"illegal header line: {line[:100]!r}")
            fields.append((name.lower(), value.strip(b" \t")))
        named: dict[bytes, bytes] = {}
        for name, value in fields:
            named[name] = named[name] + b"," + value if name in named else value
        self.named = named
        return matched.group(1), int(matched.group(2)), fields

    def body(self, status: int, fields: list[tuple[bytes, bytes]]) -> tuple[Iterator[bytes], bool]:
        """The body's pieces, and whether its end is known without the connection's end (by
        its length or its chunks: only then can the connection carry another request)."""
        import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

        if status in (204, 304):
            return iter(()), True
        named = self.named
        coding = named.get(b"transfer-encoding")
        if coding is not None:
            if [part.strip() for part in coding.lower().split(b",")] != [b"chunked"]:
                raise httpcore.RemoteProtocolError("unsupported transfer encoding")
            return self.chunks(), True
        given = named.get(b"content-length")
        if given is not None:
            lengths = {value.strip() for value in given.split(b",")}
            length = lengths.pop()
            if lengths or not length.isdigit() or len(length) > 18:
                raise httpcore.RemoteProtocolError("bad Content-Length")
            return self.sized(int(length)), True
        return self.until_closed(), False

    def sized(self, length: int) -> Iterator[bytes]:
        import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

        left = length
        while left:
            if not self.buffer and not self.fill():
                raise httpcore.RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    f"received {length - left} bytes, expected {length}"
                )
            piece = bytes(self.buffer[:left])
            del self.buffer[: len(piece)]
            left -= len(piece)
            yield piece

    def until_closed(self) -> Iterator[bytes]:
        while True:
            if self.buffer:
                piece = bytes(self.buffer)
                self.buffer.clear()
                yield piece
            if not self.fill():
                return

    def line(self) -> bytes:
        """The next line (for the chunks' framing), without its line end."""
        import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

        start = 0
        while True:
            end = self.buffer.find(b"\n", start)
            if end >= 0:
                line = bytes(self.buffer[:end]).rstrip(b"\r")
                del self.buffer[: end + 1]
                return line
            if len(self.buffer) > HEAD_MAX:
                raise httpcore.RemoteProtocolError("a chunk's line is too long")
            start = len(self.buffer)
            if not self.fill():
                raise httpcore.RemoteProtocolError("the server closed the connection mid-answer")

    def chunks(self) -> Iterator[bytes]:
        import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

        while True:
            size = self.line().split(b";", 1)[0].strip(b" \t")
            if _CHUNK_SIZE.fullmatch(size) is None:
                raise httpcore.RemoteProtocolError(f"illegal chunk size: {size[:20]!r}")
            length = int(size, 16)
            if length == 0:
                while self.line():
                    pass  # the trailer fields, which say nothing a delivery reads
                return
            yield from self.sized(length)
            if self.line():
                raise httpcore.RemoteProtocolError("a chunk does not end where its size says")


def _send(pool: Any, request: Any) -> Any:
    """Send ``request`` on an idle kept-alive connection of ``pool`` to its origin, without the
    pool's queue (its lock, its wait for a connection and its second look at every connection
    when the answer is closed), or else through the pool, which opens one. A connection taken
    by another thread meanwhile refuses the request (ConnectionNotAvailable): the pool takes it.
    Returns httpcore's response; raises what httpcore raises."""
    import httpcore  # noqa: PLC0415 - loaded when a webhook is sent

    origin = request.url.origin
    for connection in pool.connections:
        if (
            connection.can_handle_request(origin)
            and connection.is_idle()
            and not connection.is_closed()
            and not connection.has_expired()
        ):
            try:
                return connection.handle_request(request)
            except httpcore.ConnectionNotAvailable:
                break
    return pool.handle_request(request)


@functools.cache
def _stream_class() -> Any:
    """httpx's stream type for httpcore's body stream, which httpx's Response decodes."""
    import httpx  # noqa: PLC0415 - loaded when a webhook is sent

    class Stream(httpx.SyncByteStream):
        def __init__(self, pieces: Iterable[bytes]) -> None:
            self.pieces = pieces

        def __iter__(self) -> Iterator[bytes]:
            yield from self.pieces

    return Stream


@dataclass(frozen=True)
class Answer:
    """A 2xx body read: the response, or what is wrong with it; and what was ignored in it."""

    response: LifecycleHookResponse | None
    problem: str | None = None
    warnings: list[str] = field(default_factory=list)


ANSWERS_KEPT = 64
ANSWER_KEPT_MAX = 1024
"""Answers up to this many characters are read once and kept (``ANSWERS_KEPT`` of them): a
webhook gives the same few answers again and again (``{}``, an allow, a deny with its reason),
and reading one is a strict parse and a validation."""


def read_answer(text: str) -> Answer:
    """Read a 2xx body; an empty body (or JSON null) is allow. Unknown keys are ignored, each
    with a warning (``check_response``)."""
    if len(text) > ANSWER_KEPT_MAX:
        return _read_answer(text)
    answer = _read_kept(text)
    return Answer(answer.response, answer.problem, list(answer.warnings))


@functools.lru_cache(maxsize=ANSWERS_KEPT)
def _read_kept(text: str) -> Answer:
    """``_read_answer`` of a short answer, kept: the same text reads the same, and what it
    reads is never changed (each caller gets its own list of warnings)."""
    return _read_answer(text)


def _read_answer(text: str) -> Answer:
    if not text.strip():
        return Answer(LifecycleHookResponse())
    try:
        document = decode(text)
    except StrictJSONError as exc:
        if exc.lineno is not None:
            reason = exc.reason.removeprefix("invalid JSON: ")
            return Answer(None, f"invalid JSON at line {exc.lineno} column {exc.colno}: {reason}")
        return Answer(None, exc.reason)
    if document is None:
        return Answer(LifecycleHookResponse())
    if not isinstance(document, dict):
        return Answer(None, f"expected a JSON object, got {describe(document)}")
    try:
        response, warnings = check_response(document)
    except ValidationError as exc:
        return Answer(None, "; ".join(model_problems(exc)))
    return Answer(response, None, warnings)


def parse_response(text: str) -> tuple[LifecycleHookResponse | None, str | None]:
    """Parse a 2xx body as ``read_answer`` does. Returns (response, problem)."""
    answer = read_answer(text)
    return answer.response, answer.problem


def _reason(exc: Exception, url: str) -> str:
    """An exception's message with the URL (and so any credentials in it) taken out."""
    text = str(exc) or type(exc).__name__
    host = url_host(url)
    # Longest first, so a bare URL never leaves a query string behind.
    for form in sorted({url, url.rstrip("/"), url.split("?", 1)[0]}, key=len, reverse=True):
        if form:
            text = text.replace(form, host)
    return text


def _closed(host: str, reason: str | None) -> str:
    """The error of a connection closed (or reset) after the request went out, unanswered."""
    return f"{host} {CLOSED}" + (f" ({reason})" if reason else "")


# What went wrong with a delivery, as its error says it: a run's records keep only the error,
# so the hint of a run's summary is read from it, as is that of belt trigger and belt replay.
NOT_CONNECTED = "not connected"
"""Nothing answered: no connection (refused, no such host, a TLS failure)."""
CLOSED_UNANSWERED = "closed"
"""The connection was closed or reset after the request went out, with no answer: the handler
took the request and failed with it (it crashed, or exited)."""
TIMED_OUT_KIND = "timeout"
"""No whole answer within the deadline."""
NOT_2XX = "status"
"""An answer other than 2xx."""
NOT_A_RESPONSE = "invalid"
"""An answer that is not a valid one: malformed HTTP, too large, or a 2xx body that is not a
LifecycleHookResponse."""
OTHER = "other"
"""A request that could not be made (an invalid URL, a proxy's failure)."""

ANSWERED = (CLOSED_UNANSWERED, NOT_2XX, NOT_A_RESPONSE)
"""The kinds of failure where the handler was there and failed: exit 1, never 6."""

_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^cannot connect to (?P<host>\S+): "), NOT_CONNECTED),
    (re.compile(rf"^(?P<host>\S+) {CLOSED}\b"), CLOSED_UNANSWERED),
    (re.compile(rf"^(?P<host>\S+) {TIMED_OUT} "), TIMED_OUT_KIND),
    (re.compile(r"^(?P<host>\S+) answered HTTP (?P<status>\d{3})\b"), NOT_2XX),
    (re.compile(r"^(?P<host>\S+) answered with a body that is not "), NOT_A_RESPONSE),
    (re.compile(rf"^(?P<host>\S+) {MALFORMED}: "), NOT_A_RESPONSE),
    (re.compile(r"^(?P<host>\S+): the answer is larger than "), NOT_A_RESPONSE),
    (re.compile(r"^request to (?P<host>\S+) failed: "), OTHER),
)
_REFUSED = re.compile(r"refused|Errno 111\b", re.IGNORECASE)
_NO_SUCH_HOST = re.compile(
    r"Name or service not known|nodename nor servname|No address associated|"
    r"Temporary failure in name resolution|getaddrinfo failed|Errno -[235]\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Failure:
    """What a failed delivery's error says happened, and to which host (``HOST:PORT``)."""

    kind: str
    host: str
    error: str
    status: int | None = None

    @property
    def answered(self) -> bool:
        """True when the handler was there and failed (exit 1), not when nothing answered."""
        return self.kind in ANSWERED


def failure_of(error: str | None) -> Failure | None:
    """What a delivery's ``error`` says happened (None: not a webhook's error belt wrote)."""
    if not error:
        return None
    for pattern, kind in _FAILURES:
        found = pattern.match(error)
        if found is not None:
            status = found.groupdict().get("status")
            return Failure(kind, found.group("host"), error, int(status) if status else None)
    return None


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and the loopback addresses (127.0.0.0/8, ::1), written as they
    are in a URL (an IPv6 address may be bracketed)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def likely_fix(error: str | None, *, timeout: float | None = None) -> str | None:
    """What probably fixes a failed delivery, from what happened (``failure_of``) and whose
    the target is: a ``belt serve`` of this user (its running-serve file names the address) or
    something else. ``timeout``: the seconds the handler had, when known."""
    failure = failure_of(error)
    if failure is None:
        return None
    host = failure.host
    mine = serves.recorded_at(host)
    if mine is not None and failure.kind != NOT_CONNECTED and not is_alive(mine.pid):
        mine = None  # a serve gone since: whatever answered there is not it
    if failure.kind == NOT_CONNECTED:
        return _not_connected(failure, mine)
    if failure.kind == CLOSED_UNANSWERED:
        if mine is not None:
            return (
                f"{mine.describe()} took the request and closed the connection without an "
                "answer: its output says why"
            )
        return (
            f"the handler at {host} took the request and closed the connection without an "
            "answer: it probably crashed or exited handling it; check its output"
        )
    if failure.kind == TIMED_OUT_KIND:
        within = f" within {timeout:g} s" if timeout is not None else " within the hook's timeout"
        who = mine.describe() if mine is not None else f"the handler at {host}"
        return f"{who} must answer{within}: check that it does not block"
    if failure.kind == NOT_2XX:
        return _not_2xx(failure, mine)
    if failure.kind == NOT_A_RESPONSE:
        if MALFORMED in failure.error or ": the answer is larger" in failure.error:
            return f"the handler at {host} must answer HTTP/1.1 with a body of at most 1 MiB"
        return (
            "answer a JSON object whose decision, reason, inject, system and override have "
            "their wire types (other keys are ignored; an empty 2xx body means allow)"
        )
    return None


def _not_connected(failure: Failure, mine: serves.Serve | None) -> str:
    """The hint of a connection that could not be made."""
    host = failure.host
    if not _REFUSED.search(failure.error):
        if _NO_SUCH_HOST.search(failure.error):
            return f"the name in {host} does not resolve: check the URL's host"
        return f"check that a handler listens at {host}, and the URL's host, port and scheme"
    hostname = _hostname(host)
    if hostname is None or not is_loopback_host(hostname):
        return f"nothing answered at {host}: check that the handler runs there, and the URL's port"
    if mine is not None:
        # Its file is there, its port refuses: it stopped without removing the file (killed).
        return (
            f"the {mine.describe()} has stopped: start it again (belt serve --port "
            f"{mine.record['port']} …), or point the hook at your handler"
        )
    port = host.rsplit(":", 1)[-1]
    if port == str(serves.DEFAULT_PORT):
        return (
            f"nothing listens on {host}, the port belt serve takes by default: start "
            "`belt serve` (or your handler) there"
        )
    hint = f"nothing listens on {host}: start your handler there, or fix the port in its URL"
    elsewhere = [serve.address for serve in serves.running()]
    if elsewhere:
        hint += f" (your belt serve listens on {', '.join(elsewhere)})"
    return hint


def _not_2xx(failure: Failure, mine: serves.Serve | None) -> str:
    """The hint of an answer other than 2xx."""
    status = failure.status or 0
    who = mine.describe() if mine is not None else f"the handler at {failure.host}"
    if status in (401, 403):
        if mine is not None and mine.record["token"]:
            return (
                f"{who} requires its bearer token (--token) on every request, and a hook "
                "delivery carries none: serve without --token to deliver hooks to it"
            )
        return (
            f"{who} refused the request: give --secret the whsec_ secret it verifies "
            "signatures with"
        )
    if 300 <= status < 400:
        return "a hook handler must answer 2xx, and belt follows no redirect: give the URL itself"
    if status == 404:
        return f"nothing answers at that path of {failure.host}: check the URL's path"
    if status >= 500:
        return (
            f"{who} failed with HTTP {status} (a hook handler must answer 2xx): its output says why"
        )
    return f"a hook handler must answer 2xx; {who} answered HTTP {status} (its body says why)"


def _hostname(host: str) -> str | None:
    try:
        return urlsplit(f"//{host}").hostname
    except ValueError:
        return None
