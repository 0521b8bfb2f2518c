"""``belt serve`` started for a benchmark: on a free port, with its own store, ready when it
answers ``/healthz``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(home: Path, port: int, *args: str) -> subprocess.Popen[bytes]:
    """``belt serve --port PORT ARGS…`` over the store at ``home``, once it answers."""
    env = {**os.environ, "BELT_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", str(port), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("belt serve did not start")
