"""A raw HTTP server that misbehaves on purpose: slow heads, trickled bodies, huge answers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Behaviour = Callable[[socket.socket, threading.Event], None]


def read_request(conn: socket.socket) -> bytes | None:
    """One request read off a connection: its head (its body read and dropped), None at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head


def trickle(data: bytes, every: float = 0.1, seconds: float = 30.0) -> Behaviour:
    """Send ``data`` at once, then one more byte every ``every`` s for ``seconds``."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(data)
        for _ in range(int(seconds / every)):
            if stop.wait(every):
                return
            conn.sendall(b"a")

    return behave


def slow_head() -> Behaviour:
    """A status line, then a header that never ends."""
    return trickle(b"HTTP/1.1 200 OK\r\nX-Slow: ")


def slow_body() -> Behaviour:
    """Headers promising a long body, then the body a byte at a time."""
    return trickle(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )


def answer(body: bytes, status: int = 200) -> Behaviour:
    """A whole answer at once."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        head = (
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        conn.sendall(head + body)

    return behave


def endless() -> Behaviour:
    """A chunked body that never ends, sent as fast as it is read."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
        while not stop.is_set():
            conn.sendall(chunk)

    return behave


@contextmanager
def hostile_server(behaviour: Behaviour) -> Iterator[str]:
    """Serve ``behaviour`` on every connection of a loopback port; yield the base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()
    port = listener.getsockname()[1]

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                read_request(conn)
                behaviour(conn, stop)
            except OSError:
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join()
        listener.close()
