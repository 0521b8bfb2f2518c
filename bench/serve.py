"""Server CPU per request of `belt serve --policy` against a bare ASGI app, under the same uvicorn.

The bare app reads the body and answers with the bytes `belt serve` answered the same payload
(the same length, sent with a Content-Length as belt's is, not chunked): the floor any hook
handler on this uvicorn can reach. `belt serve` also validates the payload, runs the example
policy, writes the journal and prints its live line. Both run as child processes with the same
uvicorn settings (h11, as belt serves it), on loopback, and are driven in alternating rounds by
the same client: CLIENTS processes, each with one keep-alive httpx client, so that the client is
not what limits the rate. Printed per server: requests per second, p50/p99 latency, and the
server's own CPU time per request (from /proc of the server process, in nanoseconds, so a
client that saturates first does not hide the server's cost). Targets: belt's server CPU per
request at most 1.5 times the bare app's, and its throughput at least 0.5 of the bare app's.

The same belt server is also measured with the inspector page open in a headless Chromium (the
deliveries view, live, as a person would watch it; see docs/inspector.md), in rounds alternating
with the rounds without it. Target: throughput without the page at most 1.1 times the throughput
with it, and server CPU per request with the page at most 1.1 times without. Without Playwright
and a Chromium (the test extras, the `browser` target of the Makefile), and with ``--quick``,
that part is skipped.

The same belt server is then measured holding IDLE_STREAMS chat streams open (the emulator's
`GET /chats/{id}/stream` on chats with no run, as SDK clients waiting for a reply hold them):
the server's CPU over IDLE_SECONDS, as a share of one core. Target: under 2%.
`python bench/serve.py --idle-streams` measures only that.

Run with `python bench/serve.py`; `--throughput` measures only the rounds against the bare app
(the same rounds, without the page and the idle streams); ``--quick`` runs 2 rounds of 600
requests and 10 idle streams for 3 s. ``--requests N`` sets a round's requests (the warm-up is
never longer than a round) and ``--clients N`` the client processes (default 4); the tests run
``--throughput --requests 40 --clients 1 --rounds 1``, for the CPU verdict, which one client
does not change. The test-only ``--handicap S`` serves belt with a
``--handler`` of this file that keeps the server busy S seconds per request before it allows
(in place of the policy): a belt whose server costs more.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]
from verdict import Verdicts, add_common_options  # noqa: E402

CLIENTS = 4
TARGET = 0.5
CPU_TARGET = 1.5
PAGE_TARGET = 1.1
IDLE_TARGET = 2.0
HANDICAP_ENV = "BELT_BENCH_SERVE_HANDICAP"
JSON = {"content-type": "application/json"}
ANSWER_ENV = "BELT_BENCH_SERVE_ANSWER"
"""The bytes the bare app answers (belt's answer to the payload), given to its process."""
UVICORN_OPTIONS: dict[str, Any] = {
    "http": "h11",
    "log_level": "warning",
    "access_log": False,
    "lifespan": "on",
    "ws": "none",
    "server_header": False,
}


@dataclass(frozen=True)
class Sizes:
    """How much one run measures."""

    requests: int = 3000
    rounds: int = 3
    clients: int = CLIENTS
    warmup: int = 300
    idle_streams: int = 50
    idle_seconds: float = 10.0


QUICK = Sizes(requests=600, rounds=2, warmup=100, idle_streams=10, idle_seconds=3.0)
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


def bare_app(answer: bytes) -> Any:
    """A bare ASGI app: read the body, answer ``answer`` (JSON, with its length)."""
    headers = [
        (b"content-length", str(len(answer)).encode()),
        (b"content-type", b"application/json"),
    ]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
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
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def run_bare_server() -> None:
    """Child process: serve the bare app on a free loopback port under belt's uvicorn settings."""
    import uvicorn

    from belt.server.listen import bind

    app = bare_app(os.environb[ANSWER_ENV.encode()])
    sock = bind("127.0.0.1", 0)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]} ", file=sys.stderr, flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, **UVICORN_OPTIONS)).run(sockets=[sock])
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
        """CPU time the process has used, from /proc (None elsewhere): in nanoseconds, the sum
        of its threads' ``schedstat`` (a quick round is a few tenths of a second, in which
        ``stat``'s clock ticks of 10 ms would be steps of several percent); where the kernel
        keeps no schedstat, user + system time from ``stat``. The server's threads live as
        long as it does, so none of their time is lost between two readings."""
        proc = Path(f"/proc/{self.process.pid}")
        try:
            return (
                sum(
                    int((task / "schedstat").read_text().split()[0])
                    for task in (proc / "task").iterdir()
                )
                / 1e9
            )
        except (OSError, ValueError, IndexError):
            pass
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
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


def handicapped(payload: dict[str, Any]) -> None:
    """The --handicap server's handler: busy for the handicap's seconds, then allow."""
    end = time.process_time() + float(os.environ[HANDICAP_ENV])
    while time.process_time() < end:
        pass


def client_process(inbox: Connection) -> None:
    """A client process: for each (url, count) it is sent, POST the payload ``count`` times on
    one keep-alive client kept per URL; sends back (start, end, latencies)."""
    clients: dict[str, httpx.Client] = {}
    while (order := inbox.recv()) is not None:
        url, count = order
        if url not in clients:
            clients[url] = httpx.Client(base_url=url, timeout=30, headers=JSON)
        client = clients[url]
        latencies: list[float] = []
        began = time.perf_counter()
        for _ in range(count):
            sent = time.perf_counter()
            reply = client.post("/hooks", content=PAYLOAD)
            latencies.append(time.perf_counter() - sent)
            if reply.status_code != 200:
                raise SystemExit(f"{url} answered {reply.status_code}: {reply.text}")
        inbox.send((began, time.perf_counter(), latencies))
    for client in clients.values():
        client.close()


class Clients:
    """``count`` client processes, kept for the whole run so their connections stay open."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes = []
        for _ in range(count):
            mine, theirs = context.Pipe()
            process = context.Process(target=client_process, args=(theirs,), daemon=True)
            process.start()
            self.pipes.append(mine)
            self.processes.append(process)

    def drive(self, url: str, total: int) -> tuple[float, list[float]]:
        """POST the payload ``total`` times, shared by the clients; (seconds, latencies)."""
        for pipe in self.pipes:
            pipe.send((url, total // len(self.pipes)))
        answers = [pipe.recv() for pipe in self.pipes]
        seconds = max(a[1] for a in answers) - min(a[0] for a in answers)
        return seconds, [x for a in answers for x in a[2]]

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for process in self.processes:
            process.join(10)


def measure(server: Server, clients: Clients, requests: int) -> None:
    """One round against ``server``."""
    cpu_before = server.cpu_seconds()
    seconds, latencies = clients.drive(server.url, requests)
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


def idle_streams(server: Server, home: str, sizes: Sizes) -> float | None:
    """The share of a core ``server`` uses while idle chat streams are open."""
    from belt.records.chats import create_chat
    from belt.store import open_store

    os.environ["BELT_HOME"] = home  # the server's store, which this process writes the chats to
    store = open_store()
    chats = [create_chat(store, agent_id="ag_bench")["id"] for _ in range(sizes.idle_streams)]
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
    time.sleep(sizes.idle_seconds)
    after, seconds = server.cpu_seconds(), time.perf_counter() - began
    closing.set()
    if before is None or after is None:
        return None
    return (after - before) / seconds


def start_belt(env: dict[str, str], handicap: float) -> Server:
    """`belt serve --policy examples/policy.toml`, or the handicapped handler of this file."""
    name, decider = "belt serve --policy", ["--policy", str(ROOT / "examples" / "policy.toml")]
    if handicap:
        env = {**env, HANDICAP_ENV: str(handicap)}
        handler = f"py:{Path(__file__).resolve()}:handicapped"
        name, decider = "belt, handicapped", ["--handler", handler]
    command = [sys.executable, "-m", "belt", "serve", "--port", "0", "--sweep-interval", "0"]
    return start(name, [*command, *decider], env)


def check_idle(verdicts: Verdicts, share: float | None, sizes: Sizes) -> None:
    """The idle streams line and verdict."""
    if share is None:
        print("idle streams: no /proc here, not measured")
        return
    print(
        f"{sizes.idle_streams} idle chat streams: server CPU {share * 100:.2f}% of a core over "
        f"{sizes.idle_seconds:g} s"
    )
    verdicts.check(
        f"server CPU with {sizes.idle_streams} idle chat streams, share of a core",
        figure=share * 100,
        target=IDLE_TARGET,
        unit="%",
    )


def main() -> None:
    """Start both servers, measure them in alternating rounds, print figures and verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", action="store_true", help="only the rounds against bare")
    parser.add_argument("--idle-streams", action="store_true", help="only the idle streams")
    parser.add_argument("--requests", type=int, help="per round; default 3000 (quick: 600)")
    parser.add_argument("--rounds", type=int, help="default 3 (quick: 2)")
    parser.add_argument("--clients", type=int, help=f"client processes; default {CLIENTS}")
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    add_common_options(parser)
    args = parser.parse_args()
    if args.bare_server:
        run_bare_server()
        return
    sizes = QUICK if args.quick else Sizes()
    requests = args.requests or sizes.requests
    sizes = replace(
        sizes,
        requests=requests,
        rounds=args.rounds or sizes.rounds,
        warmup=min(sizes.warmup, requests),
        clients=args.clients or sizes.clients,
    )
    verdicts = Verdicts("serve")
    from tests.browser import chromium, missing

    no_browser = (
        "--throughput measures only the rounds against the bare app"
        if args.throughput
        else "--quick leaves them out"
        if args.quick
        else "--idle-streams measures only the idle streams"
        if args.idle_streams
        else missing()
    )
    with tempfile.TemporaryDirectory(prefix="belt-bench-") as home, contextlib.ExitStack() as stack:
        env = {**os.environ, "BELT_HOME": home, "NO_COLOR": "1"}
        belt = start_belt(env, args.handicap)
        stack.callback(belt.stop)
        if not args.idle_streams:
            answer = httpx.post(f"{belt.url}/hooks", content=PAYLOAD, headers=JSON).content
            bare_env = {**env, ANSWER_ENV: answer.decode()}
            bare = start("bare ASGI app", [sys.executable, __file__, "--bare-server"], bare_env)
            stack.callback(bare.stop)
            watched = Server("  with the page open", belt.process, belt.url)
            servers = [bare, belt] + ([watched] if no_browser is None else [])
            browser = stack.enter_context(chromium()) if no_browser is None else None
            clients = Clients(sizes.clients)
            stack.callback(clients.close)
            for server in (bare, belt):
                clients.drive(server.url, sizes.warmup)
            for _ in range(sizes.rounds):
                for server in servers:
                    if server is watched:
                        page = open_page(browser, server.url)
                        measure(server, clients, sizes.requests)
                        page.close()
                    else:
                        measure(server, clients, sizes.requests)
            figures = [summary(server) for server in servers]
            print(
                f"{sizes.rounds} rounds of {sizes.requests} requests from {sizes.clients} client "
                f"processes (one keep-alive httpx client each), loopback; uvicorn "
                f"{_uvicorn_version()}"
            )
            for server, found in zip(servers, figures, strict=True):
                print(
                    f"{server.name:20}  {found['rps']:7.0f} req/s  p50 {found['p50_ms']:5.2f} ms"
                    f"  p99 {found['p99_ms']:5.2f} ms  server CPU {found['cpu_us']:5.0f} us/req"
                )
            verdicts.check(
                "server CPU per request, belt / bare app",
                figure=figures[1]["cpu_us"] / figures[0]["cpu_us"],
                target=CPU_TARGET,
            )
            verdicts.check(
                "throughput, belt / bare app",
                figure=figures[1]["rps"] / figures[0]["rps"],
                target=TARGET,
                higher_is_better=True,
            )
            if no_browser is None:
                verdicts.check(
                    "throughput without / with the page open",
                    figure=figures[1]["rps"] / figures[2]["rps"],
                    target=PAGE_TARGET,
                )
                verdicts.check(
                    "server CPU per request with / without the page open",
                    figure=figures[2]["cpu_us"] / figures[1]["cpu_us"],
                    target=PAGE_TARGET,
                )
            else:
                print(f"the page-open rounds were skipped: {no_browser}")
        if not args.throughput:
            check_idle(verdicts, idle_streams(belt, home, sizes), sizes)
    verdicts.report()


def _uvicorn_version() -> str:
    import uvicorn

    return str(uvicorn.__version__)


if __name__ == "__main__":
    main()
