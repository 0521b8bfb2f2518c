"""``belt serve --forward-to URL``: hook requests passed on to the user's own handler.

The decider POSTs each payload on to the URL (signed again with the server's secret, when it has
one), within the webhook timeout as a total deadline and a bound on the answer's size, and
answers what the handler answered. ``belt serve`` journals the request and that answer as it
journals every hook request, so real traffic can be replayed later (``belt replay journal``)
against an edited handler. A handler that fails (unreachable, slow, a non-2xx answer, a body that
is not a LifecycleHookResponse) is a handler failure: the caller gets HTTP 500 saying why.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from belt.effects import url_host
from belt.errors import UsageError
from belt.policy import Verdict
from belt.server.deciders import Decider, HandlerResponseError
from belt.wire.platform import WEBHOOK_TIMEOUT_DEFAULT, LifecycleHookPayload

if TYPE_CHECKING:
    import httpx

ANSWER_MAX_BYTES = 1024 * 1024
"""The largest answer read from the handler; a longer one is a failure."""


def check_forward_url(url: str) -> str:
    """``--forward-to URL``: an absolute http(s) URL, else a usage error."""
    from belt.wire.validate import check_webhook_url

    reason = check_webhook_url(url)
    if reason:
        raise UsageError(f"--forward-to {url!r}: the URL {reason}")
    return url


def forward_decider(
    url: str,
    *,
    secret: str | None = None,
    timeout: float = WEBHOOK_TIMEOUT_DEFAULT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Decider:
    """A decider that asks the handler at ``url`` and answers what it answers."""
    import httpx

    from belt.handlers.webhook import encode_payload, parse_response

    host = url_host(url)

    async def post(body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        # A client per request: nothing is left open between requests or after the server.
        async with (
            httpx.AsyncClient(transport=transport, follow_redirects=False) as client,
            client.stream("POST", url, content=body, headers=headers) as reply,
        ):
            chunks: list[bytes] = []
            size = 0
            async for chunk in reply.aiter_bytes():
                size += len(chunk)
                if size > ANSWER_MAX_BYTES:
                    raise HandlerResponseError(
                        f"forwarding to {host}: the answer is larger than "
                        f"{ANSWER_MAX_BYTES // 1024} KiB"
                    )
                chunks.append(chunk)
            return reply.status_code, b"".join(chunks)

    async def decide(payload: LifecycleHookPayload) -> Verdict:
        body = encode_payload(payload.model_dump(mode="json", exclude_unset=True))
        headers = {"content-type": "application/json"}
        if secret:
            from belt.signing import signed_headers

            headers.update(signed_headers(secret, body))
        try:
            async with asyncio.timeout(timeout):
                status, answer = await post(body, headers)
        except TimeoutError:
            raise HandlerResponseError(
                f"forwarding to {host}: no answer within {timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise HandlerResponseError(
                f"forwarding to {host} failed: {type(exc).__name__}"
            ) from None
        if not 200 <= status < 300:
            raise HandlerResponseError(f"forwarding to {host}: it answered HTTP {status}")
        response, problem = parse_response(answer.decode("utf-8", "replace"))
        if response is None:
            raise HandlerResponseError(
                f"forwarding to {host}: the answer is not a LifecycleHookResponse: {problem}"
            )
        return Verdict(response, None)

    return decide
