"""A scriptable hook webhook for tests: records every payload and answers as it is told."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.servers import running

Answer = dict[str, Any] | str | tuple[int, Any] | None
Decide = Callable[[str, dict[str, Any]], Answer]
Hold = Callable[[str, dict[str, Any]], bool]


@dataclass
class HookApp:
    """Answers POST /<name> with ``decide(name, payload)``.

    ``delays`` sleeps that many seconds per name; a request for which ``hold`` is true sets
    ``held`` and waits until ``released`` is set (which leaving ``hook_app`` does).
    """

    decide: Decide = lambda name, payload: None  # noqa: E731
    delays: dict[str, float] = field(default_factory=dict)
    hold: Hold = lambda name, payload: False  # noqa: E731
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def asgi(self) -> Starlette:
        """The Starlette app."""

        async def hook(request: Request) -> Response:
            name = request.path_params["name"]
            payload = json.loads(await request.body())
            self.received.append((name, payload))
            if name in self.delays:
                await asyncio.sleep(self.delays[name])
            if self.hold(name, payload):
                self.held.set()
                while not self.released.is_set():
                    await asyncio.sleep(0.01)
            answer = self.decide(name, payload)
            status = 200
            if isinstance(answer, tuple):
                status, answer = answer
            if answer is None:
                return Response(status_code=status)
            body = answer if isinstance(answer, str) else json.dumps(answer)
            return Response(body, status_code=status, media_type="application/json")

        return Starlette(routes=[Route("/{name:path}", hook, methods=["POST"])])

    def events(self, name: str | None = None) -> list[str]:
        """The events received (by the handler ``name`` only, when given), in order."""
        return [p["event"] for n, p in self.received if name is None or n == name]


@contextmanager
def hook_app(decide: Decide | None = None, **delays: float) -> Iterator[HookApp]:
    """Serve a HookApp on a free loopback port."""
    app = HookApp(decide or (lambda name, payload: None), dict(delays))
    try:
        with running(app.asgi()) as url:
            app.url = url
            yield app
            app.released.set()
    finally:
        app.released.set()
