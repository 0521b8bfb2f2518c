"""Webhook handlers: POST the payload, read back a LifecycleHookResponse.

Failures are described by host only: a webhook URL can carry credentials in its path or query,
so the full URL never reaches a message, a log or the store. A delivery has a total deadline
(headers and a trickled body included) and its answer a byte cap; an answer that is not strict
JSON (NaN, deep nesting, a huge integer, a lone surrogate) is that handler's failure.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from belt.deliveries.effects import is_loopback_host, url_host
from belt.display.text import describe
from belt.outgoing.signing import signed_headers
from belt.reading.strictjson import StrictJSONError, decode
from belt.records import serves
from belt.records.leases import is_alive
from belt.wire.platform import LifecycleHookResponse
from belt.wire.validate import check_response, model_problems


@dataclass
class WebhookResult:
    """What one webhook call gave back."""

    status: int | None
    body: str
    response: LifecycleHookResponse | None
    error: str | None
    duration_ms: int
    warnings: list[str] = field(default_factory=list)  # the answer's unknown keys, ignored
    exception: BaseException | None = None  # what an in-process handler raised (for ``-v``)


TIMED_OUT = "did not answer within"
CLOSED = "closed the connection without answering"
MALFORMED = "sent a malformed answer"
DISCONNECTED = "Server disconnected without sending a response."  # httpx's words
MAX_ANSWER_BYTES = 1024 * 1024

_PAYLOAD_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_payload(payload: Mapping[str, object]) -> bytes:
    """The exact bytes sent (and signed) for a payload: compact JSON, not ASCII-escaped."""
    return _PAYLOAD_ENCODER.encode(payload).encode("utf-8")


def deliver(
    url: str, payload: Mapping[str, object], *, timeout: float, secret: str | None = None
) -> WebhookResult:
    """POST ``payload`` to ``url`` and parse the answer; a failure is returned, never raised."""
    body = encode_payload(payload)
    headers = {"content-type": "application/json"}
    if secret:
        headers.update(signed_headers(secret, body))
    return post_body(url, body, headers, timeout=timeout)


def post_body(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> WebhookResult:
    """POST exactly ``body`` with exactly ``headers`` and parse the answer as ``deliver`` does."""
    import httpx  # noqa: PLC0415 - loaded when a webhook is sent

    from belt.outgoing.transport import TooLarge, call, read  # noqa: PLC0415 - it loads httpx

    host = url_host(url)
    started = time.perf_counter()
    timed_out = f"{host} {TIMED_OUT} {timeout:g} s"
    error = None
    try:
        with call("POST", url, content=body, headers=headers, timeout=timeout) as reply:
            raw = read(reply, MAX_ANSWER_BYTES)
        status, encoding = reply.status_code, reply.encoding
    except httpx.TimeoutException:
        error = timed_out
    except TooLarge as exc:
        error = f"{host}: {exc}"
    except httpx.ConnectError as exc:
        error = f"cannot connect to {host}: {_reason(exc, url)}"
    except (httpx.ReadError, httpx.WriteError) as exc:
        # Connected, the request (being) sent, and the connection reset or closed under it.
        error = _closed(host, _reason(exc, url))
    except httpx.RemoteProtocolError as exc:
        reason = _reason(exc, url)
        error = _closed(host, None) if reason == DISCONNECTED else f"{host} {MALFORMED}: {reason}"
    except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:  # Unicode: IDNA failed
        error = f"request to {host} failed: {_reason(exc, url)}"
    duration = round((time.perf_counter() - started) * 1000)
    if error is None and duration > timeout * 1000:
        # The last bytes came just as the deadline passed: that is still too late.
        error = timed_out
    if error is not None:
        return WebhookResult(None, "", None, error, duration)
    text = raw.decode(encoding or "utf-8", errors="replace")
    if not 200 <= status < 300:
        return WebhookResult(status, text, None, f"{host} answered HTTP {status}", duration)
    answer = read_answer(text)
    if answer.problem is not None:
        error = f"{host} answered with a body that is not a LifecycleHookResponse: {answer.problem}"
        return WebhookResult(status, text, None, error, duration)
    return WebhookResult(status, text, answer.response, None, duration, answer.warnings)


@dataclass(frozen=True)
class Answer:
    """A 2xx body read: the response, or what is wrong with it; and what was ignored in it."""

    response: LifecycleHookResponse | None
    problem: str | None = None
    warnings: list[str] = field(default_factory=list)


ANSWERS_KEPT = 64
ANSWER_KEPT_MAX = 1024
"""Answers up to this many characters are read once and kept: a webhook repeats a few."""


def read_answer(text: str) -> Answer:
    """Read a 2xx body; an empty body (or JSON null) is allow, an unknown key a warning."""
    if len(text) > ANSWER_KEPT_MAX:
        return _read_answer(text)
    answer = _read_kept(text)  # never changed: each caller gets its own list of warnings
    return Answer(answer.response, answer.problem, list(answer.warnings))


def _read_answer(text: str) -> Answer:
    try:
        document = decode(text) if text.strip() else None
    except StrictJSONError as exc:
        if exc.lineno is not None:
            reason = exc.reason.removeprefix("invalid JSON: ")
            return Answer(None, f"invalid JSON at line {exc.lineno} column {exc.colno}: {reason}")
        return Answer(None, exc.reason)
    if document is None:  # an empty body, or JSON null
        return Answer(LifecycleHookResponse())
    if not isinstance(document, dict):
        return Answer(None, f"expected a JSON object, got {describe(document)}")
    return checked_answer(document)


def checked_answer(document: dict[str, Any]) -> Answer:
    """A JSON object checked as a LifecycleHookResponse (unknown keys: warnings)."""
    try:
        response, warnings = check_response(document)
    except ValidationError as exc:
        return Answer(None, "; ".join(model_problems(exc)))
    return Answer(response, None, warnings)


_read_kept = functools.lru_cache(maxsize=ANSWERS_KEPT)(_read_answer)


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
NOT_CONNECTED = "not connected"  # no connection (refused, no such host, a TLS failure)
CLOSED_UNANSWERED = "closed"  # closed or reset after the request went out: the handler failed
TIMED_OUT_KIND = "timeout"
NOT_2XX = "status"
NOT_A_RESPONSE = "invalid"  # malformed HTTP, too large, or not a LifecycleHookResponse
OTHER = "other"  # a request that could not be made (an invalid URL, a proxy's failure)
ANSWERED = (CLOSED_UNANSWERED, NOT_2XX, NOT_A_RESPONSE)  # the handler was there: exit 1, not 6

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
        if found := pattern.match(error):
            status = found.groupdict().get("status")
            return Failure(kind, found["host"], error, int(status) if status else None)
    return None


def likely_fix(error: str | None, *, timeout: float | None = None) -> str | None:
    """What probably fixes a failed delivery (``timeout``: the seconds the handler had)."""
    failure = failure_of(error)
    if failure is None:
        return None
    host = failure.host
    mine = serves.recorded_at(host)
    if failure.kind == NOT_CONNECTED:
        return _not_connected(failure, mine)
    if mine is not None and not is_alive(mine.pid):
        mine = None  # a serve gone since: whatever answered there is not it
    who = mine.describe() if mine is not None else f"the handler at {host}"
    if failure.kind == CLOSED_UNANSWERED:
        why = "it probably crashed or exited handling it; check its output"
        why = "its output says why" if mine is not None else why
        return f"{who} took the request and closed the connection without an answer: {why}"
    if failure.kind == TIMED_OUT_KIND:
        within = f" within {timeout:g} s" if timeout is not None else " within the hook's timeout"
        return f"{who} must answer{within}: check that it does not block"
    if failure.kind == NOT_2XX:
        return _not_2xx(failure, mine, who)
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


def _not_2xx(failure: Failure, mine: serves.Serve | None, who: str) -> str:
    """The hint of an answer other than 2xx from ``who``."""
    status = failure.status or 0
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
