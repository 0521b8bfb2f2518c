"""Run an ASGI app under uvicorn on a free loopback port, in a thread, for real HTTP in tests."""

from __future__ import annotations

import atexit
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from belt.server.connections import Connections, GuardedConnection, SlowClientGuard
from belt.server.listen import bind


def _refusing_address() -> str:
    """``127.0.0.1:PORT`` for a port this process holds bound and never listens on: every
    connection to it is refused for as long as the tests run, and no other server can take it
    (a fixed port such as 9 or 8787 may have something listening on another machine)."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    atexit.register(held.close)  # held until then; closed, not left to the garbage collector
    return f"127.0.0.1:{held.getsockname()[1]}"


REFUSED = _refusing_address()
"""A loopback address that refuses every connection (see ``_refusing_address``)."""


@contextmanager
def running(app: Any, **guard: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1, port 0; yield its base URL; stop it cleanly on exit.

    ``guard`` (``header_timeout``, ``body_timeout``, ``max_connections``) serves with belt's
    slow-client defence (``belt.server.connections``), as ``belt serve`` does.
    """
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    state = getattr(app, "state", None)
    # A response still streaming when the test ends (a chat stream) is cut after a few seconds
    # rather than holding the test forever.
    config = uvicorn.Config(
        SlowClientGuard(app, Connections(**guard)) if guard else app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=5,
        http=GuardedConnection if guard else "auto",
    )
    server = uvicorn.Server(config)
    if state is not None:
        # Open inspector streams end when the server stops, as under `belt serve`.
        state.stopping = lambda: server.should_exit
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the test server stopped during start-up")
            time.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


def turn_start() -> dict[str, Any]:
    """A fresh ``agent.turn_start`` payload of chat ch_1's run ar_1, for a server's hook route."""
    return {
        "event": "agent.turn_start",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "agent_id": "ag_1",
        "chat_id": "ch_1",
        "run_id": "ar_1",
        "turn_count": 1,
        "data": {},
    }
