"""Small hook handlers with one defect each, for tests of ``belt check``: ``py:`` functions here
(``py:tests/checked.py:NAME``) and webhooks of one Starlette app (``POST /NAME``)."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from belt.outgoing.signing import SignatureError, secret_key, verify

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
LARGE = 4000
"""Arguments longer than this (as JSON) make ``slow`` hang until the client gives up."""


def _path(payload: dict[str, Any]) -> str:
    return str(((payload.get("data") or {}).get("arguments") or {}).get("path", ""))


def guard(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The spec's policy, without a defect: delete_file outside /tmp/ is denied."""
    data = payload.get("data") or {}
    if data.get("tool") == "delete_file" and not _path(payload).startswith("/tmp/"):
        return {"decision": "deny", "reason": "only /tmp deletions allowed"}
    return None


def unicode_crash(payload: dict[str, Any]) -> None:
    """Crashes on a path that is not ASCII."""
    _path(payload).encode("ascii")


def leaky(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Denies only deletions under /var/: /etc/passwd goes through."""
    data = payload.get("data") or {}
    if data.get("tool") == "delete_file" and _path(payload).startswith("/var/"):
        return {"decision": "deny"}
    return None


def deny_everything(payload: dict[str, Any]) -> dict[str, Any]:
    """Denies on every event, observe-only ones included."""
    return {"decision": "deny"}


def suspends(payload: dict[str, Any]) -> dict[str, Any]:
    """Answers suspend, which only gate hooks may do."""
    return {"decision": "suspend"}


_calls = itertools.count()


def flip(payload: dict[str, Any]) -> dict[str, Any]:
    """Allows and denies by turns, whatever the payload."""
    return {"decision": ("allow", "deny")[next(_calls) % 2]}


_once = itertools.count()


def fails_once(payload: dict[str, Any]) -> None:
    """Fails on its third call only."""
    if next(_once) == 2:
        raise RuntimeError("only this once")


_first = itertools.count()


def fails_first(payload: dict[str, Any]) -> None:
    """Fails on its first call only (as a case timing out on a machine busy just then)."""
    if next(_first) == 0:
        raise RuntimeError("only the first time")


def extra_keys(payload: dict[str, Any]) -> dict[str, Any]:
    """Answers with a key the platform does not know."""
    return {"decision": "allow", "verdict": "fine"}


def nexus_continue_everywhere(task: dict[str, Any]) -> dict[str, Any]:
    """Asks to continue on every boundary (only stop may)."""
    return {"structured_content": {"continue": True, "feedback": "again"}}


def nexus_blank_feedback(task: dict[str, Any]) -> dict[str, Any]:
    """Continues on stop with blank feedback."""
    if task["event"] == "stop":
        return {"structured_content": {"continue": True, "feedback": " "}}
    return {"structured_content": {"continue": False}}


def nexus_ack(task: dict[str, Any]) -> dict[str, Any]:
    """Acknowledges every boundary."""
    return {"structured_content": {"continue": False}}


def app(release: asyncio.Event | None = None) -> Starlette:
    """The webhooks: /block, /slow, /unsigned, /verified, /once (verified, and a webhook-id seen
    before is refused with 409), and the executor tool /nexus (``nexus_blank_feedback``)."""

    async def block(request: Request) -> Response:
        await request.body()
        return JSONResponse({"decision": "block"})

    async def slow(request: Request) -> Response:
        payload = json.loads(await request.body())
        arguments = (payload.get("data") or {}).get("arguments") or {}
        if len(json.dumps(arguments)) > LARGE:
            # Hang until the client gives up, whatever its deadline: the body has been read,
            # so the next message is the disconnect.
            while (await request.receive())["type"] != "http.disconnect":
                pass
        return Response(status_code=200)

    async def unsigned(request: Request) -> Response:
        payload = json.loads(await request.body())
        return JSONResponse(guard(payload) or {})

    async def verified(request: Request) -> Response:
        body = await request.body()
        try:
            verify(SECRET, request.headers, body)
        except SignatureError as exc:
            return JSONResponse({"error": exc.message}, status_code=401)
        return JSONResponse(guard(json.loads(body)) or {})

    seen: set[str] = set()

    async def once(request: Request) -> Response:
        body = await request.body()
        try:
            msg_id = verify(secret_key(SECRET), request.headers, body)
        except SignatureError as exc:
            return JSONResponse({"error": exc.message}, status_code=401)
        if msg_id in seen:
            return JSONResponse({"error": "already delivered"}, status_code=409)
        seen.add(msg_id)
        return JSONResponse(guard(json.loads(body)) or {})

    async def nexus(request: Request) -> Response:
        task = json.loads(await request.body())
        return JSONResponse(nexus_blank_feedback(task))

    return Starlette(
        routes=[
            Route("/nexus", nexus, methods=["POST"]),
            Route("/once", once, methods=["POST"]),
            Route("/block", block, methods=["POST"]),
            Route("/slow", slow, methods=["POST"]),
            Route("/unsigned", unsigned, methods=["POST"]),
            Route("/verified", verified, methods=["POST"]),
        ]
    )
