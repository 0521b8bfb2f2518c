"""A scriptable hook webhook for tests: records every payload and answers as it is told."""

from __future__ import annotations

import asyncio
import json
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


@dataclass
class HookApp:
    """Answers POST /<name> with ``decide(name, payload)``; ``delay`` seconds per name."""

    decide: Decide = lambda name, payload: None  # noqa: E731
    delays: dict[str, float] = field(default_factory=dict)
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""

    def asgi(self) -> Starlette:
        """The Starlette app."""

        async def hook(request: Request) -> Response:
            name = request.path_params["name"]
            payload = json.loads(await request.body())
            self.received.append((name, payload))
            if name in self.delays:
                await asyncio.sleep(self.delays[name])
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
    with running(app.asgi()) as url:
        app.url = url
        yield app
