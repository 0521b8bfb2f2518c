"""Servers for the benchmarks: ``belt serve`` on a free port with its own store
(``start_server``), and a plain webhook handler, the floor's and belt's alike
(``start_handler``).

The handler is a standard-library HTTP/1.1 server (keep-alive, one thread per connection) in its
own process, on port 0. It answers a POST with ``guard``'s decision on its JSON body; under
``/spin/SECONDS/`` it first burns that many CPU seconds (``spin``), under ``/nap/SECONDS/`` it
first takes as long as that burning would take (``nap``): that is how a bench slows the handler
in belt's path and not the floor's (``--handicap``), and ``slowed`` and ``napping`` are the
``py:`` handler slowed the same ways. A bench whose verdicts are CPU-time ratios burns CPU; one
whose verdicts are wall-clock ratios naps, which a loaded machine stretches as it stretches the
burning (and the floor), without taking a core from it. ``GET /cpu`` answers the server's own
CPU seconds so far, so a bench can count the server's side of a call.

    python bench/serving.py    # serve on port 0; prints "listening on http://127.0.0.1:PORT"
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

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
    with httpx.Client() as client:  # one client: each new one costs tens of ms of CPU
        while time.monotonic() < deadline:
            try:
                if client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    return proc
            except httpx.TransportError:
                time.sleep(0.05)
    proc.kill()
    raise SystemExit("belt serve did not start")


HANDICAP = "BELT_BENCH_HANDICAP"
"""The CPU seconds ``slowed`` burns per call (``napping``: takes as long as burning them)."""
RECORD = "BELT_BENCH_RECORD"
"""The file to which ``recorded`` appends each payload, one JSON document a line."""
HERE = Path(__file__).resolve()


def handler(name: str = "guard") -> str:
    """The ``py:`` reference of one of this file's handlers (this file imports nothing of the
    benches', so belt can load it as a hook's module anywhere)."""
    return f"py:{HERE}:{name}"


def guard(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The benches' hook, as a ``py:`` handler and in the webhook handler: deny a tool call whose
    arguments' ``n`` is odd, allow the rest."""
    data = payload.get("data")
    arguments = data.get("arguments") if isinstance(data, dict) else None
    number = arguments.get("n") if isinstance(arguments, dict) else None
    if isinstance(number, int) and number % 2:
        return {"decision": "deny", "reason": "odd"}
    return None


def slowed(payload: dict[str, Any]) -> dict[str, Any] | None:
    """``guard``, after burning ``$BELT_BENCH_HANDICAP`` CPU seconds (a bench's ``--handicap``)."""
    spin(float(os.environ[HANDICAP]))
    return guard(payload)


def napping(payload: dict[str, Any]) -> dict[str, Any] | None:
    """``guard``, after a ``nap`` of ``$BELT_BENCH_HANDICAP`` seconds (a bench's ``--handicap``)."""
    nap(float(os.environ[HANDICAP]))
    return guard(payload)


def recorded(payload: dict[str, Any]) -> dict[str, Any] | None:
    """``guard``, after appending ``payload`` to ``$BELT_BENCH_RECORD`` (the payloads a floor
    sends again)."""
    with open(os.environ[RECORD], "a", encoding="utf-8") as out:
        out.write(json.dumps(payload) + "\n")
    return guard(payload)


def read_record(path: Path) -> list[dict[str, Any]]:
    """The payloads ``recorded`` appended to ``path``."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def spin(seconds: float) -> None:
    """Burn ``seconds`` of this thread's CPU time (a slower handler, for ``--handicap``)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def nap(seconds: float) -> None:
    """Take as long as burning ``seconds`` of CPU time would take now, burning a tenth of it: the
    rest is a sleep nine times as long as that tenth took on the wall clock."""
    started = time.perf_counter()
    spin(seconds / 10)
    time.sleep(9 * (time.perf_counter() - started))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the head and the body are two writes

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        slowed = re.match(r"/(spin|nap)/([0-9.]+)/", self.path)
        if slowed:
            (spin if slowed.group(1) == "spin" else nap)(float(slowed.group(2)))
        try:
            payload = json.loads(body)
        except ValueError:
            self.answer(400, {"error": "not JSON"})
            return
        self.answer(200, (guard(payload) if isinstance(payload, dict) else None) or {})

    def do_GET(self) -> None:  # noqa: N802
        self.answer(200, {"cpu": time.process_time()})

    def answer(self, status: int, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@dataclass
class HandlerServer:
    """A running ``start_handler`` process: its base URL (no trailing slash)."""

    process: subprocess.Popen[str]
    url: str

    def hook_url(self, handicap: float = 0.0, slowing: str = "spin") -> str:
        """The URL of the hook route; each call is first slowed by ``handicap`` CPU seconds,
        burnt (``slowing="spin"``) or as long as burning them would take (``"nap"``)."""
        if handicap > 0:
            return f"{self.url}/{slowing}/{handicap:f}/hooks"
        return f"{self.url}/hooks"

    def cpu_seconds(self) -> float:
        """The CPU seconds the server has spent so far (one GET, counted in). Plain HTTP: no
        certificates to load (loading them costs this process some 30 ms of CPU a call)."""
        return float(httpx.get(f"{self.url}/cpu", verify=False).json()["cpu"])

    def stop(self) -> None:
        """End the server's process."""
        self.process.terminate()
        self.process.wait(timeout=10)

    def __enter__(self) -> HandlerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_handler() -> HandlerServer:
    """The plain webhook handler in its own process, on port 0, once it listens."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve())],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not found:
        process.kill()
        raise SystemExit(f"the bench's webhook handler did not start: {line!r}")
    return HandlerServer(process, found.group(1))


def serve_handler() -> None:
    """Serve ``_Handler`` on port 0 of loopback until ended."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve_handler()
