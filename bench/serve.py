"""Throughput of `belt serve --policy` against a bare ASGI app, under the same uvicorn.

The bare app reads the body and answers a fixed decision: the floor any hook handler on this
uvicorn can reach. `belt serve` validates the payload, runs the example policy, writes the
journal and prints its live line. Both run as child processes with the same uvicorn settings,
on loopback, and are driven in alternating rounds by the same client: httpx, keep-alive, a
few worker threads. Printed per server: requests per second, p50/p99 latency, and the server's
own CPU time per request (from /proc, so a client that saturates first does not hide the
server's cost). Targets: belt's throughput at least 0.5 of the bare app's, and its server CPU
per request at most 1.5 times the bare app's.

The same belt server is also measured with the inspector page open in a headless Chromium (the
deliveries view, live, as a person would watch it; see docs/inspector.md), in rounds alternating
with the rounds without it. Target: throughput without the page at most 1.1 times the throughput
with it, and server CPU per request with the page at most 1.1 times without. Without Playwright
and a Chromium (the test extras, the `browser` target of the Makefile) that part is skipped.

The same belt server is then measured holding IDLE_STREAMS chat streams open (the emulator's
`GET /chats/{id}/stream` on chats with no run, as SDK clients waiting for a reply hold them):
the server's CPU over IDLE_SECONDS, as a share of one core. Target: under 2%.
`python bench/serve.py --idle-streams` measures only that.

Run with `python bench/serve.py`; `python bench/serve.py --throughput` measures only the rounds
against the bare app (the same rounds, without the page and the idle streams).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4
REQUESTS_PER_ROUND = 3000
ROUNDS = 3
WARMUP = 300
TARGET = 0.5
CPU_TARGET = 1.5
PAGE_TARGET = 1.1
IDLE_STREAMS = 50
IDLE_SECONDS = 10.0
IDLE_TARGET = 0.02
UVICORN_OPTIONS: dict[str, Any] = {
    "log_level": "warning",
    "access_log": False,
    "lifespan": "on",
    "ws": "none",
    "server_header": False,
}
FIXED = b'{"decision":"allow"}'
PAYLOAD = json.dumps(
    {
        "event": "agent.tool_call",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "agent_id": "ag_bench",
        "chat_id": "ch_bench",
        "run_id": "ar_bench",
        "turn_count": 3,
        "data": {"tool": "delete_file", "arguments": {"path": "/var/lib/app/production.db"}},
    }
).encode()


async def bare_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app: read the body, answer a fixed decision."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": FIXED})


def run_bare_server() -> None:
    """Child process: serve the bare app on a free loopback port under belt's uvicorn settings."""
    import uvicorn

    from belt.server.run import bind

    sock = bind("127.0.0.1", 0)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]} ", file=sys.stderr, flush=True)
    try:
        uvicorn.Server(uvicorn.Config(bare_app, **UVICORN_OPTIONS)).run(sockets=[sock])
    except KeyboardInterrupt:
        pass


@dataclass
class Server:
    """A server child process and where it listens."""

    name: str
    process: subprocess.Popen[str]
    url: str
    rounds: list[Round] = field(default_factory=list)

    def cpu_seconds(self) -> float | None:
        """User + system CPU time the process has used, from /proc (None elsewhere)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Stop the child with Ctrl-C and wait for it."""
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Round:
    """One measured round against one server."""

    seconds: float
    latencies: list[float]
    cpu: float | None


def start(name: str, command: list[str], env: dict[str, str]) -> Server:
    """Start a server child and read the URL from its start-up line on stderr."""
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"listening on (http://127\.0\.0\.1:\d+) ", line)
    if not found:
        process.kill()
        raise SystemExit(f"{name} did not start: {line}{process.stderr.read()}")
    # Drain stderr so the child can never block on a full pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return Server(name, process, found.group(1))


def drive(url: str, total: int) -> tuple[float, list[float]]:
    """POST the payload ``total`` times from WORKERS keep-alive clients; (seconds, latencies)."""
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(WORKERS + 1)

    def worker(count: int) -> None:
        mine: list[float] = []
        headers = {"content-type": "application/json"}
        with httpx.Client(base_url=url, timeout=30) as client:
            client.post("/hooks", content=PAYLOAD, headers=headers).raise_for_status()
            barrier.wait()
            for _ in range(count):
                began = time.perf_counter()
                reply = client.post("/hooks", content=PAYLOAD, headers=headers)
                mine.append(time.perf_counter() - began)
                if reply.status_code != 200:
                    raise SystemExit(f"{url} answered {reply.status_code}: {reply.text}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(total // WORKERS,)) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began, latencies


def measure(server: Server) -> None:
    """One round against ``server``."""
    cpu_before = server.cpu_seconds()
    seconds, latencies = drive(server.url, REQUESTS_PER_ROUND)
    cpu_after = server.cpu_seconds()
    cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
    server.rounds.append(Round(seconds, latencies, cpu))


def summary(server: Server) -> dict[str, float]:
    """Throughput of the best round, latency percentiles and CPU per request over all rounds."""
    best = min(server.rounds, key=lambda r: r.seconds)
    latencies = sorted(x for r in server.rounds for x in r.latencies)
    quantiles = statistics.quantiles(latencies, n=100)
    cpus = [r.cpu for r in server.rounds if r.cpu is not None]
    count = sum(len(r.latencies) for r in server.rounds)
    return {
        "rps": len(best.latencies) / best.seconds,
        "p50_ms": quantiles[49] * 1000,
        "p99_ms": quantiles[98] * 1000,
        "cpu_us": sum(cpus) / count * 1e6 if cpus else float("nan"),
    }


def open_page(browser: Any, url: str) -> Any:
    """The inspector's deliveries view, live, in a new tab."""
    page = browser.new_page()
    page.goto(f"{url}/#/deliveries")
    page.wait_for_selector("#live.on")
    return page


def idle_streams(server: Server, home: str) -> float | None:
    """The share of a core ``server`` uses while IDLE_STREAMS streams of idle chats are open."""
    from belt.records.chats import create_chat
    from belt.store import open_store

    os.environ["BELT_HOME"] = home  # the server's store, which this process writes the chats to
    store = open_store()
    chats = [create_chat(store, agent_id="ag_bench")["id"] for _ in range(IDLE_STREAMS)]
    replayed = threading.Semaphore(0)
    closing = threading.Event()

    def follow(chat_id: str) -> None:
        with (
            httpx.Client(base_url=server.url, timeout=60) as client,
            client.stream("GET", f"/chats/{chat_id}/stream") as reply,
        ):
            for raw in reply.iter_lines():
                if '"event": "chats"' in raw:
                    replayed.release()
                if closing.is_set():
                    return

    threads = [threading.Thread(target=follow, args=(c,), daemon=True) for c in chats]
    for thread in threads:
        thread.start()
    for _ in chats:
        if not replayed.acquire(timeout=60):
            raise SystemExit("a stream never sent its replay")
    time.sleep(1.0)  # let the streams settle into waiting
    before, began = server.cpu_seconds(), time.perf_counter()
    time.sleep(IDLE_SECONDS)
    after, seconds = server.cpu_seconds(), time.perf_counter() - began
    closing.set()
    if before is None or after is None:
        return None
    return (after - before) / seconds


def main_idle() -> None:
    """Only the idle streams figure."""
    with tempfile.TemporaryDirectory(prefix="belt-bench-") as home:
        env = {**os.environ, "BELT_HOME": home, "NO_COLOR": "1"}
        policy = str(ROOT / "examples" / "policy.toml")
        belt = start(
            "belt serve --policy",
            [sys.executable, "-m", "belt", "serve", "--port", "0", "--policy", policy],
            env,
        )
        try:
            share = idle_streams(belt, home)
        finally:
            belt.stop()
    print_idle(share)


def print_idle(share: float | None) -> None:
    """The idle streams line."""
    if share is None:
        print("idle streams: no /proc here, not measured")
        return
    verdict = "meets" if share < IDLE_TARGET else "ABOVE"
    print(
        f"{IDLE_STREAMS} idle chat streams: server CPU {share * 100:.2f}% of a core over "
        f"{IDLE_SECONDS:g} s ({verdict} the target of under {IDLE_TARGET * 100:g}%)"
    )


def main() -> None:
    """Start both servers, measure them in alternating rounds, print the figures and ratios."""
    if len(sys.argv) > 1 and sys.argv[1] == "--bare-server":
        run_bare_server()
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--idle-streams":
        main_idle()
        return
    only_throughput = len(sys.argv) > 1 and sys.argv[1] == "--throughput"
    sys.path.insert(0, str(ROOT))
    from tests.browser import chromium, missing

    no_browser = (
        "--throughput measures only the rounds against the bare app"
        if only_throughput
        else missing()
    )
    with tempfile.TemporaryDirectory(prefix="belt-bench-") as home, contextlib.ExitStack() as stack:
        env = {**os.environ, "BELT_HOME": home, "NO_COLOR": "1"}
        policy = str(ROOT / "examples" / "policy.toml")
        bare = start("bare ASGI app", [sys.executable, __file__, "--bare-server"], env)
        belt = start(
            "belt serve --policy",
            [sys.executable, "-m", "belt", "serve", "--port", "0", "--policy", policy],
            env,
        )
        watched = Server("  with the page open", belt.process, belt.url)
        servers = [bare, belt] + ([watched] if no_browser is None else [])
        browser = stack.enter_context(chromium()) if no_browser is None else None
        try:
            for server in (bare, belt):
                drive(server.url, WARMUP)
            for _ in range(ROUNDS):
                for server in servers:
                    if server is watched:
                        page = open_page(browser, server.url)
                        measure(server)
                        page.close()
                    else:
                        measure(server)
            share = None if only_throughput else idle_streams(belt, home)
        finally:
            for server in (bare, belt):
                server.stop()
    figures = [summary(server) for server in servers]
    print(
        f"{ROUNDS} rounds of {REQUESTS_PER_ROUND} requests, {WORKERS} keep-alive httpx workers, "
        f"loopback; uvicorn {_uvicorn_version()}"
    )
    for server, found in zip(servers, figures, strict=True):
        print(
            f"{server.name:20}  {found['rps']:7.0f} req/s  p50 {found['p50_ms']:5.2f} ms  "
            f"p99 {found['p99_ms']:5.2f} ms  server CPU {found['cpu_us']:5.0f} us/req"
        )
    ratio = figures[1]["rps"] / figures[0]["rps"]
    verdict = "meets" if ratio >= TARGET else "BELOW"
    print(f"throughput ratio belt/bare: {ratio:.2f} ({verdict} the target of {TARGET})")
    costlier_than_bare = figures[1]["cpu_us"] / figures[0]["cpu_us"]
    verdict = "meets" if costlier_than_bare <= CPU_TARGET else "ABOVE"
    print(
        f"server CPU per request belt/bare: {costlier_than_bare:.2f} "
        f"({verdict} the target of at most {CPU_TARGET})"
    )
    if not only_throughput:
        print_idle(share)
    if no_browser is not None:
        print(f"the page-open rounds were skipped: {no_browser}")
        return
    slower = figures[1]["rps"] / figures[2]["rps"]
    costlier = figures[2]["cpu_us"] / figures[1]["cpu_us"]
    for what, value in (
        ("throughput without/with the page", slower),
        ("server CPU per request with/without the page", costlier),
    ):
        verdict = "meets" if value <= PAGE_TARGET else "ABOVE"
        print(f"{what}: {value:.2f} ({verdict} the target of at most {PAGE_TARGET})")


def _uvicorn_version() -> str:
    import uvicorn

    return str(uvicorn.__version__)


if __name__ == "__main__":
    main()
