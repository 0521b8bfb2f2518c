"""The agent routes of ``belt serve``: the official SDKs run their agents against it, offline.

``POST /agents/run`` appends a message to an emulated chat and answers at once, the run going on
in the background as in ``belt sim`` (no ``py:`` handler in a request's ``agent_config``); client
tools, approvals and stops have routes here; every other SDK route answers 501, naming it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from belt.records.chats import read_chat
from belt.server.guard import STOPPING
from belt.server.problems import Problem, answering, calling, read_json_object
from belt.server.stream import chat_events
from belt.wire.validate import IN_PROCESS_PREFIX

if TYPE_CHECKING:
    from belt.emulator.conversation import Emulator

CONTINUE_INTERVAL = 0.25  # seconds between two looks for emulated runs that can go on

ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]

NOT_EMULATED: tuple[tuple[str, str], ...] = (
    ("POST", "/files"),
    ("POST", "/chats"),
    ("POST", "/chats/list"),
    ("POST", "/chats/{chat_id}"),
    ("DELETE", "/chats/{chat_id}"),
    ("POST", "/chats/{chat_id}/messages"),
    ("POST", "/chats/{chat_id}/agent"),
    ("GET", "/chats/{chat_id}/trace"),
    ("POST", "/chats/messages/{message_id}/cancel"),
    ("POST", "/agents"),
    ("POST", "/agents/list"),
    ("GET", "/agents/{agent:path}"),
    ("POST", "/agents/{agent:path}"),
    ("DELETE", "/agents/{agent_id}"),
)
"""Agent and chat routes the SDKs call that belt does not emulate (each answers 501)."""

OTHER_NAMESPACES = tuple(
    "apikeys apps artifacts credentials engines files flowruns flows knowledge mcp-servers mcps me "
    "projects search secrets sessions skills sockets store suggest tasks teams".split()
)
"""The SDKs' other namespaces (apps, tasks, files...): every route under them answers 501."""


async def continue_forever(emulator: Emulator, interval: float = CONTINUE_INTERVAL) -> None:
    """Look for emulated runs that can go on, now and every ``interval`` seconds."""
    while True:
        try:
            await run_in_threadpool(emulator.continue_settled)
        except Exception as exc:  # one bad pass is reported; the server stays up
            emulator.tell("continue", "-", f"{type(exc).__name__}: {exc}")
        await asyncio.sleep(interval)


def code_named(body: dict[str, object]) -> tuple[str, str] | None:
    """The path and value of the first ``py:`` handler of a request's ``agent_config``."""
    config = body.get("agent_config")
    hooks = config.get("hooks") if isinstance(config, dict) else None
    for index, hook in enumerate(hooks if isinstance(hooks, list) else ()):
        handler = hook.get("handler") if isinstance(hook, dict) else None
        if isinstance(handler, str) and handler.strip().lower().startswith(IN_PROCESS_PREFIX):
            return f"agent_config.hooks[{index}].handler", handler
    return None


def not_emulated(template: str) -> Callable[[Request], Any]:
    """A route belt does not emulate: 501, naming it."""

    async def answer(request: Request) -> Response:
        route = f"{request.method} {template}"
        raise Problem(
            501,
            f"belt serve does not emulate {route}; it answers the agent routes "
            "(see docs/emulator.md)",
            route=route,
        )

    return answering(answer, agent=True)


def agent_routes(emulator: Emulator) -> list[BaseRoute]:
    """The agent routes over ``emulator``, then the 501 routes of what is not emulated."""

    async def run(request: Request) -> Any:
        """POST /agents/run: a message to an emulated chat (a new one when chat_id is null)."""
        body = await read_json_object(request)
        if (named := code_named(body)) is not None:
            where, handler = named
            raise Problem(
                400,
                f"{where}: {handler!r} is code for the server's process to run, which a request "
                "may not name; declare the agent in a file under `belt serve --agents DIR` (its "
                "hooks may name py: handlers) and send its template ref as agent",
            )
        return await run_in_threadpool(emulator.send, body)

    async def stream(request: Request) -> Response:
        """GET /chats/{chat_id}/stream: the chat's events as NDJSON."""
        chat_id = request.path_params["chat_id"]
        await run_in_threadpool(read_chat, emulator.store, chat_id)
        scope = request.scope
        return StreamingResponse(
            chat_events(emulator.store, chat_id, lambda: bool(scope.get(STOPPING))),
            media_type="application/x-ndjson",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    routes: list[BaseRoute] = [
        Route(path, answering(handler, agent=True), methods=[method])
        for method, path, handler in (
            ("POST", "/agents/run", run),
            # The platform's aliases of /agents/run.
            ("POST", "/agents/message", run),
            ("POST", "/agents/messages", run),
            ("GET", "/chats/{chat_id}/status", calling(emulator.status, "chat_id")),
            ("GET", "/chats/{chat_id}/stream", stream),
            ("POST", "/chats/{chat_id}/stop", calling(emulator.stop, "chat_id")),
            (
                "POST",
                "/chats/{chat_id}/tools/{tool_id}/always-allow",
                calling(emulator.always_allow, "chat_id", "tool_id", body=True),
            ),
            ("POST", "/tools/{tool_id}", calling(emulator.tool_result, "tool_id", body=True)),
            ("POST", "/tools/{tool_id}/invoke", calling(emulator.approve, "tool_id")),
            ("POST", "/tools/{tool_id}/reject", calling(emulator.reject, "tool_id", body=True)),
        )
    ]
    routes += [Route(path, not_emulated(path), methods=[method]) for method, path in NOT_EMULATED]
    for namespace in OTHER_NAMESPACES:
        for path in (f"/{namespace}", f"/{namespace}/{{rest:path}}"):
            routes.append(Route(path, not_emulated(path), methods=ALL_METHODS))
    return routes
