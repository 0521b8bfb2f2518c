"""The slow-client defence (``belt.server.connections``) on its own: the cap alone makes room,
with deadlines too long to do it instead; and the stop's mark on the requests in progress."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from belt.server.app import create_app
from belt.server.connections import Connections, GuardedConnection, SlowClientGuard
from belt.server.listen import bind
from belt.store import Store
from tests.loopback import CLIENT
from tests.servers import running, turn_start
from tests.test_serve_stop import serving
from tests.test_server_limits import closed_by_server, open_socket
from tests.waiting import eventually

CLOSE = {"connection": "close"}
LONG = 600.0
"""A head and body deadline no test waits for: what closes a connection here is the cap."""


def test_the_cap_closes_the_longest_waiting_connection_and_no_other(tmp_path: Path) -> None:
    app = create_app(store=Store(tmp_path), sweep_interval=0)
    limits = {"header_timeout": LONG, "body_timeout": LONG, "max_connections": 3}
    with running(app, **limits) as url:
        heads = [
            open_socket(url, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n") for _ in range(2)
        ]
        body = open_socket(
            url,
            b"POST /hooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{",
        )
        # (The server closes each newcomer once answered, before it takes the next connection.)
        reply = CLIENT.get(f"{url}/healthz", headers=CLOSE, timeout=30)
        assert reply.status_code == 200
        assert closed_by_server(heads[0])
        # The cap is full again: the next newcomer closes the second head, and the body,
        # waiting since later, is let be.
        late = open_socket(url, b"GET /healthz HTTP/1.1\r\n")
        assert CLIENT.get(f"{url}/healthz", headers=CLOSE, timeout=30).status_code == 200
        assert closed_by_server(heads[1])
        body.settimeout(0.5)
        assert not closed_by_server(body)
        for sock in (*heads, body, late):
            sock.close()


def test_a_worker_ends_its_open_streams_when_the_stop_begins_not_at_the_cut() -> None:
    # The stop marks the requests in progress in each worker process too, so a stream ends
    # itself then rather than being cut off (a 503 line) when the grace ends.
    with serving("--workers", "2") as served:
        opened = threading.Event()
        lines: list[str] = []

        def watch() -> None:
            url = f"http://127.0.0.1:{served.port}/inspector/stream"
            with CLIENT.stream("GET", url, timeout=60) as stream:
                opened.set()
                lines.extend(stream.iter_lines())

        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        assert opened.wait(30)
        eventually(lambda: bool(lines), "the stream's first line")
        code = served.stop(signal.SIGTERM)
        reader.join(30)
    assert code == 0, served.stderr
    assert not reader.is_alive()
    assert "503" not in served.stdout, served.stdout
    assert "Traceback" not in served.stderr, served.stderr


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the timers the connections schedule (their deadlines)."""

    guarded = 0

    def call_at(  # type: ignore[override]
        self, when: float, callback: Any, *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        if isinstance(getattr(callback, "__self__", None), GuardedConnection):
            CountingLoop.guarded += 1
        return super().call_at(when, callback, *args, context=context)


def test_a_kept_alive_client_sending_whole_requests_costs_no_timer_per_request(
    tmp_path: Path,
) -> None:
    # The head and body deadlines share one timer per connection, which is not made again for
    # each request that comes in time.
    app = SlowClientGuard(
        create_app(store=Store(tmp_path), sweep_interval=0),
        Connections(header_timeout=LONG, body_timeout=LONG),
    )
    config = uvicorn.Config(app, http=GuardedConnection, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    sock = bind("127.0.0.1", 0)

    def run() -> None:
        with asyncio.Runner(loop_factory=CountingLoop) as runner:
            runner.run(server.serve(sockets=[sock]))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started, "the server's start")
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with httpx.Client(base_url=url, timeout=30) as client:
            for _ in range(20):
                assert client.post("/hooks", json=turn_start()).status_code == 200
                assert client.get("/healthz").status_code == 200
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
    assert 1 <= CountingLoop.guarded <= 2


def test_a_body_sent_after_its_head_is_not_taken_for_the_next_request(tmp_path: Path) -> None:
    # The journal waits for the requests counted arriving (Connections.arriving) to group their
    # lines with its own: a request's own body, come after its head, is not one once answered.
    connections = Connections(header_timeout=LONG, body_timeout=LONG)
    app = SlowClientGuard(create_app(store=Store(tmp_path), sweep_interval=0), connections)
    config = uvicorn.Config(app, http=GuardedConnection, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    sock = bind("127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    body = json.dumps(turn_start()).encode()
    try:
        eventually(lambda: server.started, "the server's start")
        client = open_socket(
            f"http://127.0.0.1:{sock.getsockname()[1]}",
            b"POST /hooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body),
        )

        def in_progress() -> bool:
            return any(held.scope is not None for held in connections.held)

        with client:
            eventually(in_progress, "the request's start, its body still to come")
            client.sendall(body)
            reply = b""
            while b'"decision"' not in reply:
                chunk = client.recv(4096)
                assert chunk, reply
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200 ")
            eventually(lambda: not in_progress(), "the request's end")
            assert connections.arriving == 0
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
