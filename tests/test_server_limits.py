"""``belt serve`` stays up: header deadlines, a connection cap, handler deadlines, health."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from belt.server.app import create_app
from belt.server.connections import Connections, SlowClientGuard
from belt.server.deciders import HandlerPool, handler_decider
from belt.store import Store
from belt.wire.platform import LifecycleHookPayload
from belt.wire.samples import sample_payload
from tests.loopback import CLIENT
from tests.servers import running
from tests.waiting import eventually

PROBLEM = "application/problem+json"
JSON = {"content-type": "application/json"}


@contextmanager
def serving(root: Path, **options: Any) -> Iterator[str]:
    guard = {
        key: options.pop(key)
        for key in ("header_timeout", "body_timeout", "max_connections")
        if key in options
    }
    app = create_app(store=Store(root), sweep_interval=0, **options)
    with running(app, **guard) as url:
        yield url


def open_socket(url: str, head: bytes = b"") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    if head:
        sock.sendall(head)
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """True when the server closed the connection (read returns EOF or a reset)."""
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_request_head_that_never_finishes_is_closed(tmp_path: Path) -> None:
    with serving(tmp_path, header_timeout=0.3) as url:
        slow = open_socket(url, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        silent = open_socket(url)
        # A kept-alive connection that starts a second request and stalls is closed too.
        kept = open_socket(url, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = b""
        while not first.endswith(b'{"status":"ok"}'):
            first += kept.recv(1024)
        assert first.startswith(b"HTTP/1.1 200")
        kept.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert closed_by_server(slow)
        assert closed_by_server(silent)
        assert closed_by_server(kept)
        assert CLIENT.get(f"{url}/healthz").status_code == 200
        for sock in (slow, silent, kept):
            sock.close()


STALLED_BODY = (
    b"POST /hooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{"
)


def test_a_body_that_never_finishes_is_closed_and_nothing_is_journalled(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = []
    with serving(tmp_path, body_timeout=0.3, report=lines.append) as url:
        stalled = open_socket(url, STALLED_BODY)
        assert closed_by_server(stalled)
        reply = CLIENT.post(f"{url}/hooks", json=sample_payload("agent.turn_start"), timeout=30)
        assert reply.status_code == 200
        stalled.close()
    assert [line["status"] for line in lines if line.get("kind") == "hook"] == [200]
    cut = [line for line in lines if line.get("action") == "cut short"]
    assert len(cut) == 1 and "not all sent in time" in cut[0]["detail"]


def test_a_head_deadline_after_a_slow_body_is_not_held_back_by_the_body_deadline(
    tmp_path: Path,
) -> None:
    # The body outlives the head deadline (so the connection's one timer then waits for the
    # body's, far off); the next head, stalled, is still closed at its own deadline.
    with serving(tmp_path, header_timeout=0.3, body_timeout=600) as url:
        sock = open_socket(url, STALLED_BODY.replace(b"Length: 100", b"Length: 2"))
        time.sleep(0.6)
        sock.sendall(b"}")
        answer = sock.recv(65536)
        head, _, body = answer.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE)[1])  # type: ignore[index]
        while len(body) < length:
            body += sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 422")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert closed_by_server(sock)
        sock.close()


def test_under_another_server_the_middleware_still_cuts_a_late_body_short(tmp_path: Path) -> None:
    # uvicorn's own h11 protocol, not belt's GuardedConnection: the middleware keeps the body
    # deadline itself and tells the app the client left.
    lines: list[dict[str, Any]] = []
    app = create_app(store=Store(tmp_path), sweep_interval=0, report=lines.append)
    with running(SlowClientGuard(app, Connections(body_timeout=0.3))) as url:
        stalled = open_socket(url, STALLED_BODY)
        eventually(lambda: any(line.get("action") == "cut short" for line in lines), "the cut")
        stalled.close()
    cut = [line for line in lines if line.get("action") == "cut short"]
    assert cut[0]["status"] == 408 and "not all sent in time" in cut[0]["detail"]
    assert not [line for line in lines if line.get("kind") == "hook"]


def test_at_the_connection_cap_a_stalled_body_makes_room(tmp_path: Path) -> None:
    with serving(tmp_path, max_connections=3) as url:
        stalled = [open_socket(url, STALLED_BODY) for _ in range(3)]
        time.sleep(0.5)  # the three heads are read before the next connection arrives
        replies = [CLIENT.get(f"{url}/healthz", timeout=30) for _ in range(2)]
        assert [reply.status_code for reply in replies] == [200, 200]
        assert closed_by_server(stalled[0])
        for sock in stalled:
            sock.close()


def test_at_the_connection_cap_the_longest_waiting_connection_makes_room(tmp_path: Path) -> None:
    with serving(tmp_path, max_connections=5) as url:
        idle = [open_socket(url, b"GET / HTTP/1.1\r\n") for _ in range(5)]
        replies = [CLIENT.get(f"{url}/healthz", timeout=30) for _ in range(3)]
        assert [reply.status_code for reply in replies] == [200, 200, 200]
        assert closed_by_server(idle[0])
        for sock in idle:
            sock.close()


class Hang:
    """A sync handler that blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, payload: LifecycleHookPayload) -> None:
        self.release.wait(60)


def test_a_hanging_handler_is_a_504_and_never_starves_the_api(tmp_path: Path) -> None:
    hang = Hang()
    pool = HandlerPool(workers=2)
    decide = handler_decider(hang, timeout=0.2, pool=pool)
    try:
        with serving(tmp_path, decide=decide, handler_pool=pool) as url:
            payload = sample_payload("agent.tool_call")
            answers = [CLIENT.post(f"{url}/hooks", json=payload, timeout=30) for _ in range(3)]
            assert [a.status_code for a in answers] == [504, 504, 504]
            assert answers[0].headers["content-type"] == PROBLEM
            assert answers[0].json()["detail"] == "the handler did not answer within 0.2 s"
            health = CLIENT.get(f"{url}/healthz", timeout=30)
            assert health.status_code == 503
            assert health.headers["content-type"] == PROBLEM
            assert "the handler pool is saturated (2 of 2 threads" in health.json()["detail"]
            # The platform routes run on other threads and still answer.
            events = CLIENT.get(f"{url}/agents/hook-events", timeout=30)
            listed = CLIENT.get(f"{url}/agent-runs/run_1/interrupts", timeout=30)
            assert (events.status_code, listed.status_code) == (200, 200)
            hang.release.set()
            for _ in range(200):
                if not pool.saturated():
                    break
                threading.Event().wait(0.05)
            assert CLIENT.get(f"{url}/healthz", timeout=30).status_code == 200
    finally:
        hang.release.set()
        pool.close()


def exits(payload: LifecycleHookPayload) -> None:
    raise SystemExit(3)


async def async_exits(payload: LifecycleHookPayload) -> None:
    await asyncio.sleep(0)
    raise SystemExit(3)


def interrupts(payload: LifecycleHookPayload) -> None:
    raise KeyboardInterrupt


def surrogate_reason(payload: LifecycleHookPayload) -> dict[str, str]:
    return {"decision": "deny", "reason": "bad \ud800"}


@pytest.mark.parametrize(
    ("func", "detail"),
    [
        (exits, "the handler raised SystemExit"),
        (async_exits, "the handler raised SystemExit"),
        (interrupts, "the handler raised KeyboardInterrupt"),
        (surrogate_reason, "lone surrogate \\ud800"),
    ],
)
def test_a_handler_that_exits_is_a_500_problem_and_the_server_stays_up(
    tmp_path: Path, func: Any, detail: str
) -> None:
    with serving(tmp_path, decide=handler_decider(func)) as url:
        answer = CLIENT.post(f"{url}/hooks", json=sample_payload("agent.start"), timeout=30)
        assert answer.status_code == 500
        assert answer.headers["content-type"] == PROBLEM
        assert detail in answer.json()["detail"]
        assert CLIENT.get(f"{url}/healthz", timeout=30).status_code == 200


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested deeper than 100 levels"),
        (b'{"event": "agent.start", "turn_count": NaN}', "NaN is not a JSON number"),
        (b'{"event": "agent.start", "data": {"tool": "\\ud800"}}', "lone surrogate \\ud800"),
        (b'{"turn_count": ' + b"9" * 5000 + b"}", "an integer has 5000 digits"),
        (b"\xff\xfe", "not UTF-8 text"),
        # A lone surrogate written raw (its UTF-8-style encoding) is not UTF-8 either.
        (b'{"event": "agent.start", "data": {"tool": "\xed\xa0\x80"}}', "not UTF-8 text"),
    ],
)
def test_hostile_bodies_are_422_problems_and_journalled(
    tmp_path: Path, body: bytes, detail: str
) -> None:
    with serving(tmp_path) as url:
        sent = {"content": body, "headers": JSON, "timeout": 30}
        answer = CLIENT.post(f"{url}/hooks/x", **sent)
        resolve = CLIENT.post(f"{url}/interrupts/int_x/resolve", **sent)
        settings = CLIENT.post(f"{url}/chats/chat_1/settings", **sent)
    for reply in (answer, resolve, settings):
        assert reply.status_code == 422
        assert reply.headers["content-type"] == PROBLEM
        assert detail in reply.json()["detail"]
    [record] = Store(tmp_path).read_log("journal", "serve")
    assert record["status"] == 422


def test_resolve_refuses_nan_data(tmp_path: Path) -> None:
    with serving(tmp_path) as url:
        body = b'{"decision": "allow", "data": {"x": Infinity}}'
        reply = CLIENT.post(
            f"{url}/interrupts/int_x/resolve", content=body, headers=JSON, timeout=30
        )
    assert reply.status_code == 422
    assert "Infinity is not a JSON number" in reply.json()["detail"]


def test_healthz_is_unhealthy_when_the_store_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with serving(blocker / "store") as url:
        reply = CLIENT.get(f"{url}/healthz", timeout=30)
    assert reply.status_code == 503
    assert reply.headers["content-type"] == PROBLEM
    assert "cannot be written (Not a directory)" in reply.json()["detail"]


def test_unknown_routes_and_methods_are_problems(tmp_path: Path) -> None:
    with serving(tmp_path) as url:
        missing = CLIENT.get(f"{url}/nope", timeout=30)
        method = CLIENT.delete(f"{url}/hooks", timeout=30)
    assert (missing.status_code, method.status_code) == (404, 405)
    assert {missing.headers["content-type"], method.headers["content-type"]} == {PROBLEM}
    assert json.loads(missing.text)["status"] == 404
