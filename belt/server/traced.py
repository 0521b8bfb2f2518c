"""``belt serve`` with tracing on (docs/tracing.md#belt-serve): a server span per request (which
continues an incoming ``traceparent``), named by its route's template, never its path; and a
``belt.hook`` span under it for each hook request answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from belt.outgoing import tracing
from belt.records.journal import ServeLine
from belt.server.deciders import PolicyDecider
from belt.server.forward import Forwarder
from belt.wire.platform import LifecycleHookResponse

CARRIED = (b"traceparent", b"tracestate")


class TracedRequests:
    """ASGI middleware: each HTTP request in a ``{METHOD} {route}`` server span (a 5xx is an
    ERROR); ``routes`` are the app's, matched as its router does."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    def route(self, scope: Scope) -> str | None:
        """The template of the route the request goes to, as ``http.route`` writes it (without
        a parameter's ``:path``)."""
        partial = None
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(getattr(route, "path_format", "")) or None
            if match is Match.PARTIAL and partial is None:
                partial = route  # it takes the path but not the method: the 405's route
        return None if partial is None else str(getattr(partial, "path_format", "")) or None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # ``span`` is bound below, before an HTTP request's app can start its response.
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                error = str(status) if status >= 500 else None
                attributes = {"http.response.status_code": status, "error.type": error}
                tracing.set_attributes(span, attributes, error and f"HTTP {status}")
            elif message["type"] == "lifespan.shutdown.complete":
                tracing.shutdown()  # the spans held, exported: a worker skips atexit
            await send(message)

        if scope["type"] != "http":
            await self.app(scope, receive, sending)
            return
        method = scope["method"]
        route = self.route(scope)
        carried = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in CARRIED
        }
        attributes = {"http.request.method": method, "http.route": route}
        name = f"{method} {route}" if route else method
        with tracing.span(name, attributes, kind="server", parent=carried) as span:
            await self.app(scope, receive, sending)


def served_hook(record: ServeLine, decider: str, started_ns: int) -> None:
    """A ``belt.hook {event}`` span from ``started_ns`` to now for the answered ``record``."""
    event = record.get("event")
    answer = record.get("response") if record.get("injected") else None
    size = LifecycleHookResponse(**answer).injection_size if answer else None
    attributes = {
        "belt.hook.event": event,
        "belt.hook.handler_type": decider,
        "belt.hook.decision": record.get("decision"),
        "belt.hook.reason": tracing.bounded(record.get("reason")),
        "belt.hook.injection_size": size,
        "belt.hook.error": tracing.bounded(record.get("error")),
    }
    name = f"belt.hook {event}" if event else "belt.hook"
    failed = f"HTTP {record.get('status')}" if record.get("error") else None
    with tracing.span(name, start_time_ns=started_ns) as span:
        tracing.set_attributes(span, attributes, failed)


def decider_kind(decide: Any) -> str:
    """What answers a server's hooks: ``policy``, ``forward`` or ``handler`` (or allow-all)."""
    if isinstance(decide, PolicyDecider):
        return "policy"
    return "forward" if isinstance(decide, Forwarder) else "handler"
