"""Webhook handlers: POST the payload, read back a LifecycleHookResponse.

Failures are described by host only: a webhook URL can carry credentials in its path or query,
so the full URL never reaches a message, a log or the store. A delivery has a total deadline
(headers and a trickled body included) and its answer a byte cap; an answer that is not strict
JSON (NaN, deep nesting, a huge integer, a lone surrogate) is that handler's failure.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from belt.deadline import BodyTooLarge, DeadlinePassed, bounded_client, deadline, read_capped
from belt.effects import url_host
from belt.signing import signed_headers
from belt.strictjson import StrictJSONError, decode
from belt.text import describe
from belt.wire.platform import LifecycleHookResponse
from belt.wire.validate import check_response, model_problems

if TYPE_CHECKING:
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
MAX_ANSWER_BYTES = 1024 * 1024
"""The most bytes of a webhook's answer that are read."""


def webhook_client(transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """A client for deliveries; without a ``transport`` its calls keep to the total deadline."""
    client: httpx.Client = bounded_client(transport)
    return client


def encode_payload(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed) for a payload."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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
    (``belt check`` sends tampered and unsigned requests through it)."""
    import httpx  # noqa: PLC0415 - loaded when a webhook is sent

    host = url_host(url)
    started = time.perf_counter()

    def elapsed() -> int:
        return round((time.perf_counter() - started) * 1000)

    timed_out = f"{host} {TIMED_OUT} {timeout:g} s"
    try:
        with deadline(timeout):
            with client.stream(
                "POST", url, content=body, headers=headers, timeout=timeout
            ) as reply:
                raw = read_capped(reply, MAX_ANSWER_BYTES)
    except (httpx.TimeoutException, DeadlinePassed):
        return WebhookResult(None, "", None, timed_out, elapsed())
    except BodyTooLarge as exc:
        return WebhookResult(None, "", None, f"{host}: {exc}", elapsed())
    except httpx.ConnectError as exc:
        return WebhookResult(
            None, "", None, f"cannot connect to {host}: {_reason(exc, url)}", elapsed()
        )
    except (httpx.HTTPError, httpx.InvalidURL, UnicodeError) as exc:
        # UnicodeError: a host name that IDNA cannot encode.
        return WebhookResult(
            None, "", None, f"request to {host} failed: {_reason(exc, url)}", elapsed()
        )
    duration = elapsed()
    if duration > timeout * 1000:
        # The last bytes came just as the deadline passed: that is still too late.
        return WebhookResult(None, "", None, timed_out, duration)
    text = raw.decode(reply.encoding or "utf-8", errors="replace")
    if not 200 <= reply.status_code < 300:
        return WebhookResult(
            reply.status_code, text, None, f"{host} answered HTTP {reply.status_code}", duration
        )
    answer = read_answer(text)
    if answer.problem is not None:
        error = f"{host} answered with a body that is not a LifecycleHookResponse: {answer.problem}"
        return WebhookResult(reply.status_code, text, None, error, duration)
    return WebhookResult(reply.status_code, text, answer.response, None, duration, answer.warnings)


@dataclass(frozen=True)
class Answer:
    """A 2xx body read: the response, or what is wrong with it; and what was ignored in it."""

    response: LifecycleHookResponse | None
    problem: str | None = None
    warnings: list[str] = field(default_factory=list)


def read_answer(text: str) -> Answer:
    """Read a 2xx body; an empty body (or JSON null) is allow. Unknown keys are ignored, each
    with a warning (``check_response``)."""
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


_REFUSED = re.compile(r"^cannot connect to (?P<host>\S+): .*(refused|Errno 111)", re.IGNORECASE)


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


def likely_fix(error: str | None) -> str | None:
    """What probably fixes a failed call, when its cause is recognisable: a refused
    connection to a loopback port is a ``belt serve`` (or another local server) not running."""
    if not error:
        return None
    match = _REFUSED.match(error)
    if match is None:
        return None
    host = match.group("host")
    try:
        hostname = urlsplit(f"//{host}").hostname
    except ValueError:
        return None
    if not hostname or not is_loopback_host(hostname):
        return None
    return f"is `belt serve` running on {host}?"
