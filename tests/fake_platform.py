"""A real HTTP server on 127.0.0.1, port 0, that answers canned platform API responses."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


@dataclass
class FakePlatform:
    """Serves ``routes`` (method, path) → Canned; unknown routes get a problem+json 404."""

    routes: dict[tuple[str, str], Canned] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                platform.requests.append(
                    Seen(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
                canned = platform.routes.get((self.command, self.path)) or Canned(
                    404,
                    json.dumps(
                        {"title": "Not Found", "status": 404, "detail": "no such route"}
                    ).encode(),
                    "application/problem+json",
                )
                if canned.delay:
                    time.sleep(canned.delay)
                self.send_response(canned.status)
                self.send_header("Content-Type", canned.content_type)
                self.send_header("Content-Length", str(len(canned.body)))
                self.end_headers()
                self.wfile.write(canned.body)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

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
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


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
