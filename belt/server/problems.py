"""RFC 9457 problem+json answers and strict request bodies, shared by every route of the server.

Every error is a problem document. One body satisfies every SDK's reader (``spec/WIRE.md``): a
success is ``{"success": true, "data": …, "messages": []}``; an error carries ``success`` and
``error: {code, message}`` beside the problem fields.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope

from belt.display.text import describe
from belt.errors import BeltError, http_status
from belt.reading.strictjson import StrictJSONError, decode

MAX_BODY_BYTES = 1024 * 1024
PROBLEM_TYPE = "about:blank"


TITLES = {413: "Payload Too Large", 422: "Unprocessable Content"}
"""The problem titles that are not Python's phrase of their status."""

ERROR_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "invalid_request",
    422: "validation_error",
    501: "not_configured",
}
"""The SDKs' ErrorCode of each status (``internal_error`` for the rest)."""


def json_bytes(document: Any) -> bytes:
    """A document as UTF-8 JSON; a lone surrogate (which UTF-8 cannot hold) becomes its escape."""
    text = json.dumps(document, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(document).encode("ascii")


class Problem(Exception):
    """An error answered as RFC 9457 problem+json, titled as its status is."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.detail, self.extra = status, detail, extra

    def body(self) -> dict[str, object]:
        """The problem document, with the SDKs' ``success`` and ``error`` beside it."""
        return {
            "type": PROBLEM_TYPE,
            "title": TITLES.get(self.status) or HTTPStatus(self.status).phrase,
            "status": self.status,
            "detail": self.detail,
            "success": False,
            "error": {
                "code": ERROR_CODES.get(self.status, "internal_error"),
                "message": self.detail,
            },
            **self.extra,
        }

    def response(self, headers: dict[str, str] | None = None, *, agent: bool = False) -> Response:
        """The problem as an HTTP response; ``agent``: typed ``application/json`` (the SDKs')."""
        media_type = "application/json" if agent else "application/problem+json"
        return Response(json_bytes(self.body()), self.status, headers, media_type)


def envelope(data: Any) -> Response:
    """A success response in the platform's envelope."""
    return Response(
        json_bytes({"success": True, "data": data, "messages": []}), media_type="application/json"
    )


def belt_problem(exc: BeltError) -> Problem:
    """A belt error as the platform API's problem (every finding of invalid input in ``errors``)."""
    problems = getattr(exc, "problems", None)
    extra = {"errors": [exc.message, *problems]} if problems else {}
    return Problem(http_status(exc), exc.message, **extra)


async def http_problem(request: Request, exc: Exception) -> Response:
    """Starlette's own HTTP errors (unknown route, wrong method) as problem+json."""
    assert isinstance(exc, HTTPException)  # the handler of HTTPException alone
    return Problem(exc.status_code, exc.detail).response(dict(exc.headers or {}))


def answering(
    handler: Endpoint,
    *,
    agent: bool = False,
    headers: dict[str, str] | None = None,
    problem_of: Callable[[BeltError], Problem] = belt_problem,
) -> Callable[[Request], Any]:
    """A route whose ``handler`` returns its data (in the envelope; a Response as it is) or
    raises a Problem or belt error (``problem_of``'s problem)."""

    async def route(request: Request) -> Response:
        try:
            found = await handler(request)
        except (Problem, BeltError) as exc:
            problem = exc if isinstance(exc, Problem) else problem_of(exc)
            return problem.response(headers, agent=agent)
        if isinstance(found, Response):
            return found
        response = envelope(found)
        response.headers.update(headers or {})
        return response

    return route


Endpoint = Callable[[Request], Awaitable[Any]]


def calling(method: Callable[..., Any], *params: str, body: bool = False) -> Endpoint:
    """A route calling ``method`` in a thread with the path ``params`` (and the JSON ``body``)."""

    async def route(request: Request) -> Any:
        args: list[Any] = [request.path_params[name] for name in params]
        if body:
            args.append(await read_json_object(request))
        return await run_in_threadpool(method, *args)

    return route


async def internal_problem(request: Request, exc: Exception) -> Response:
    """An error no route foresaw, as a 500 problem naming only its kind."""
    return Problem(500, f"internal error ({type(exc).__name__})").response()


async def receive_body(scope: Scope, receive: Receive, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body; 413 past ``limit`` bytes, ClientDisconnect when the client leaves."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise Problem(413, f"the body is over {limit} bytes")
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if chunk := message.get("body", b""):
            size += len(chunk)
            if size > limit:
                raise Problem(413, f"the body is over {limit} bytes")
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """A request body parsed strictly as JSON; 422 saying why otherwise."""
    try:
        return decode(body)
    except StrictJSONError as exc:
        raise Problem(422, f"the body is not JSON: {exc}") from None


async def read_json_object(request: Request) -> dict[str, object]:
    """The request body as a JSON object (an empty body is ``{}``); 422 otherwise."""
    body = await receive_body(request.scope, request.receive)
    if not body.strip():
        return {}
    document = parse_json(body)
    if not isinstance(document, dict):
        raise Problem(422, f"expected a JSON object, got {describe(document)}")
    return document
