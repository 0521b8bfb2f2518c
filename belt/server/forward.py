"""``belt serve --forward-to URL``: hook requests passed on to the user's own handler.

Each payload is POSTed on (signed again with the server's secret; its ``traceparent`` carried)
within the webhook timeout, and its answer answered and journalled, for ``belt replay journal``.
A handler that fails (unreachable, slow, not 2xx, not a LifecycleHookResponse) is a 500.
"""

from __future__ import annotations

import asyncio

import httpx

from belt.deliveries.effects import url_host
from belt.errors import UsageError
from belt.handlers.webhook import encode_payload, read_answer
from belt.outgoing import tracing
from belt.outgoing.signing import signed_headers
from belt.outgoing.transport import MAX_CONNECTIONS, TooLarge, aread, async_client
from belt.rules.policy import Verdict
from belt.server.deciders import HandlerFailed
from belt.wire.platform import WEBHOOK_TIMEOUT_DEFAULT, LifecycleHookPayload
from belt.wire.validate import check_webhook_url

ANSWER_MAX_BYTES = 1024 * 1024
"""The largest answer read from the handler; a longer one is a failure."""


def check_forward_url(url: str) -> str:
    """``--forward-to URL``: an absolute http(s) URL, else a usage error."""
    if reason := check_webhook_url(url):
        raise UsageError(f"--forward-to {url!r}: the URL {reason}")
    return url


class Forwarder:
    """A decider that asks the handler at ``url`` and answers what it answers.

    One client for the server's life (the lifespan's ``async with``, or a first request). At
    most ``MAX_CONNECTIONS`` requests reach the handler at once; the rest wait in ``slots``, not
    in httpx's pool (which looks at every connection per waiter). ``timeout``: each request's
    total deadline, the wait included; the client's own timeouts are set to it, so none of
    httpx's shorter defaults cuts a call first.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str | None = None,
        timeout: float = WEBHOOK_TIMEOUT_DEFAULT,
    ) -> None:
        self.url = url
        self.host = url_host(url)
        self.secret = secret
        self.timeout = timeout
        self.client: httpx.AsyncClient | None = None
        self.slots = asyncio.Semaphore(MAX_CONNECTIONS)  # made anew with the client

    def open(self) -> httpx.AsyncClient:
        """The shared client, made now if it is not yet."""
        if self.client is None:
            self.client = async_client(self.url, timeout=self.timeout)
        return self.client

    async def __aenter__(self) -> Forwarder:
        self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        client, self.client = self.client, None
        self.slots = asyncio.Semaphore(MAX_CONNECTIONS)
        if client is not None:
            await client.aclose()

    async def __call__(self, payload: LifecycleHookPayload) -> Verdict:
        host = self.host
        body = encode_payload(payload.model_dump(mode="json", exclude_unset=True))
        headers = {"content-type": "application/json"}
        if self.secret:
            headers.update(signed_headers(self.secret, body))
        tracing.inject(headers)  # the request's trace goes on to the handler
        posting = self.open().stream("POST", self.url, content=body, headers=headers)
        try:
            async with asyncio.timeout(self.timeout), self.slots, posting as reply:
                status, answer = reply.status_code, await aread(reply, ANSWER_MAX_BYTES)
        except TooLarge as exc:
            raise HandlerFailed(f"forwarding to {host}: {exc}") from None
        except (TimeoutError, httpx.TimeoutException):
            raise HandlerFailed(
                f"forwarding to {host}: no answer within {self.timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise HandlerFailed(f"forwarding to {host} failed: {type(exc).__name__}") from None
        if not 200 <= status < 300:
            raise HandlerFailed(f"forwarding to {host}: it answered HTTP {status}")
        read = read_answer(answer.decode("utf-8", "replace"))
        if read.response is None:
            raise HandlerFailed(
                f"forwarding to {host}: the answer is not a LifecycleHookResponse: {read.problem}"
            )
        return Verdict(read.response, None)
