"""A platform API for tests: canned answers served over real HTTP (tests/servers.py)."""

from __future__ import annotations

import asyncio
import json
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.servers import running


@dataclass
class Canned:
    """One canned answer."""

    status: int
    body: bytes
    content_type: str
    delay: float = 0.0


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


NOT_FOUND = Canned(
    404,
    json.dumps({"title": "Not Found", "status": 404, "detail": "no such route"}).encode(),
    "application/problem+json",
)


@dataclass
class FakePlatform:
    """Serves ``routes`` (method, path) → Canned; unknown routes get a problem+json 404."""

    routes: dict[tuple[str, str], Canned] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    url: str = ""
    _stack: ExitStack = field(default_factory=ExitStack)

    def app(self) -> Starlette:
        async def answer(request: Request) -> Response:
            body = await request.body()
            path = request.url.path
            self.requests.append(
                Seen(request.method, path, {k.lower(): v for k, v in request.headers.items()}, body)
            )
            canned = self.routes.get((request.method, path)) or NOT_FOUND
            if canned.delay:
                await asyncio.sleep(canned.delay)
            return Response(canned.body, status_code=canned.status, media_type=canned.content_type)

        return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST", "PUT"])])

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    def reply(
        self, method: str, path: str, status: int, body: Any = None, *, delay: float = 0.0
    ) -> None:
        """Answer ``method path`` with ``status`` and ``body`` (JSON unless bytes)."""
        if isinstance(body, bytes):
            self.routes[(method, path)] = Canned(status, body, "text/plain", delay)
        else:
            kind = "application/problem+json" if status >= 400 else "application/json"
            data = b"" if body is None else json.dumps(body).encode()
            self.routes[(method, path)] = Canned(status, data, kind, delay)

    def __enter__(self) -> FakePlatform:
        self.url = self._stack.enter_context(running(self.app()))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def envelope(data: Any) -> dict[str, Any]:
    """A success body of the platform API."""
    return {"data": data, "messages": []}


def problem(status: int, title: str, detail: str | None = None) -> dict[str, Any]:
    """An RFC 9457 problem document."""
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status}
    if detail is not None:
        body["detail"] = detail
    return body


def closed_port() -> int:
    """A local port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
