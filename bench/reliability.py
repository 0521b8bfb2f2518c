"""Reliability figures of belt's edges: bad inputs and clean errors, and load under slowloris.

Three measurements, each printed as one block (docs/reliability.md quotes them):

1. Bad inputs: a catalogue of hostile command lines, files and option values (NaN, deep
   nesting, huge integers, lone surrogates, NUL in paths, FIFOs and devices, bad ports and
   URLs, empty declarations) run through the `belt` command in-process. Counted: how many end
   in a clean error (a one-line message and an exit code from 2 to 6, no traceback).
2. Hostile answers: webhooks and `--api` servers that answer deep JSON, huge integers, lone
   surrogates, NaN, endless bodies, slow headers and trickled bodies. Counted: how many end as
   that handler's failure (or a clean error), and the slowest of the deadline cases against
   its deadline.
3. Load under slowloris: `belt serve --policy examples/policy.toml` under a closed loop of hook
   requests (4 keep-alive clients), first alone, then with SLOW clients holding slow request
   heads open and reconnecting when closed. Printed: requests per second, p50/p99 latency,
   failed requests, /healthz answers during the attack, and stderr bytes; the ratio of the
   attacked throughput to the quiet one is the figure (target: at least 0.5).

Run with `python bench/reliability.py` (about a minute).
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SLOW = 1100
LOAD_SECONDS = 8.0
CLIENTS = 4
TARGET = 0.5


# 1. Bad inputs -------------------------------------------------------------------------------


def bad_inputs(folder: Path) -> list[tuple[str, list[str], str | None]]:
    """(name, argv, stdin) for each hostile command line."""
    files = {
        "nan.json": '{"hooks": [{"event": "agent.start", "type": "gate", "timeout": NaN}]}',
        "inf.toml": "[[hooks]]\ntimeout = inf\n",
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "deep.toml": "a = " + "[" * 5000 + "]" * 5000,
        "dotted.toml": ".".join(["k"] * 500) + " = 1\n",
        "huge.json": "[" + "9" * 10_000 + "]",
        "huge.toml": "a = " + "9" * 10_000,
        "surrogate.json": '["\\ud800"]',
        "empty.toml": "",
        "empty.json": "",
        "big.json": " " * (2 * 1024 * 1024),
        "binary.json": "\udcff\udcfe",
        "policy-redos.toml": '[[rules]]\narguments = { cmd = "re:(a)\\\\1" }\n',
        "policy-deep.toml": "rules = " + "[" * 3000 + "]" * 3000,
    }
    for name, text in files.items():
        (folder / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    fifo = folder / "fifo.json"
    os.mkfifo(fifo)
    cases: list[tuple[str, list[str], str | None]] = []
    for name in files:
        if name.startswith("policy-"):
            cases.append((name, ["serve", "--policy", str(folder / name), "--port", "0"], None))
        else:
            cases.append((name, ["hooks", "validate", str(folder / name)], None))
    for path in ("/dev/zero", str(fifo), str(folder)):
        cases.append((f"validate {path}", ["hooks", "validate", path], None))
        cases.append(
            (
                f"--data @{path}",
                ["interrupt", "resolve", "int_x", "allow", "--data", f"@{path}"],
                None,
            )
        )
    hostile_values = [
        '{"x": NaN}',
        "[Infinity]",
        "1e999",
        "[" * 50_000,
        "9" * 5000,
        '"\\ud800"',
        "\udcff",
        "{",
        "",
        "[1]",
    ]
    for value in hostile_values:
        cases.append(
            (
                f"--data {value[:12]!r}",
                ["trigger", "agent.start", "--to", "http://127.0.0.1:9/h", "--data", value],
                None,
            )
        )
        cases.append(
            (
                f"--meta {value[:12]!r}",
                [
                    "interrupt",
                    "create",
                    "--run",
                    "run_1",
                    "--chat",
                    "ch_1",
                    "--event",
                    "agent.start",
                    "--meta",
                    value,
                ],
                None,
            )
        )
    for value in ("99999", "-1", "70000"):
        cases.append((f"--port {value}", ["serve", "--port", value], None))
    for value in ("1e-9", "nan", "inf", "-1"):
        cases.append((f"--sweep-interval {value}", ["serve", "--sweep-interval", value], None))
    for token in (" ", "", "a b", "\x1b"):
        cases.append((f"--token {token!r}", ["serve", "--token", token], None))
    urls = [
        "http://[::1/x",
        "http://h:99999/",
        "ftp://h/",
        "http://",
        "http://h:abc/",
        "http://a\x00b/",
        "http://\udcff/",
    ]
    for url in urls:
        cases.append((f"--api {url!r}", ["interrupt", "list", "run_1", "--api", url], None))
        cases.append(
            (
                f"--webhook {url!r}",
                ["hooks", "add", "agent.start", "--webhook", url, "--file", str(folder / "h.json")],
                None,
            )
        )
        cases.append((f"--to {url!r}", ["trigger", "agent.start", "--to", url], None))
    for nul in ("a\x00b", "@a\x00b"):
        cases.append(
            (f"NUL {nul!r}", ["interrupt", "resolve", "int_x", "allow", "--data", nul], None)
        )
    for ident in ("../etc", "int_\x00", "x" * 5000, "\udcff", "a/b"):
        cases.append((f"id {ident[:10]!r}", ["interrupt", "show", ident], None))
    cases.append(
        ("stdin deep", ["rho", "extensions", "configure", "rho.lifecycle_hooks"], "[" * 100_000)
    )
    cases.append(
        (
            "stdin NaN",
            ["rho", "extensions", "configure", "rho.lifecycle_hooks"],
            '{"stop": {"tool": "t", "timeout_ms": NaN, "max_continuations": 1}}',
        )
    )
    return cases


def run_bad_inputs() -> dict[str, Any]:
    from typer.testing import CliRunner

    from belt.cli import app as belt_app
    from belt.cli.rho import app as rho_app

    clean = 0
    unclean: list[str] = []
    with tempfile.TemporaryDirectory() as home:
        os.environ["BELT_HOME"] = home
        folder = Path(home) / "inputs"
        folder.mkdir()
        cases = bad_inputs(folder)
        for name, argv, stdin in cases:
            target = rho_app if argv[0] == "rho" else belt_app
            args = argv[1:] if argv[0] == "rho" else argv
            result = CliRunner().invoke(target, args, input=stdin)
            error = result.exception
            ok = (
                2 <= result.exit_code <= 6
                and (error is None or isinstance(error, SystemExit))
                and "Traceback" not in result.stderr
            )
            if ok:
                clean += 1
            else:
                unclean.append(f"{name}: exit {result.exit_code} {type(error).__name__}")
    return {"tried": len(cases), "clean": clean, "unclean": unclean}


# 2. Hostile answers --------------------------------------------------------------------------


def run_hostile_answers() -> dict[str, Any]:
    from belt.errors import BeltError
    from belt.handlers.webhook import deliver, webhook_client
    from belt.remote import Platform
    from belt.samples import sample_payload
    from tests import hostile

    bodies = {
        "deep JSON": b"[" * 200_000 + b"]" * 200_000,
        "huge integer": b'{"decision": ' + b"9" * 10_000 + b"}",
        "lone surrogate": b'{"decision": "deny", "reason": "\\ud800"}',
        "NaN": b'{"decision": NaN}',
        "Infinity": b'{"data": Infinity}',
    }
    behaviours: dict[str, Callable[[], Any]] = {
        **{name: (lambda body=body: hostile.answer(body)) for name, body in bodies.items()},
        "endless body": hostile.endless,
        "slow head": hostile.slow_head,
        "trickled body": hostile.slow_body,
    }
    deadline = 1.0
    clean = 0
    tried = 0
    slowest = 0.0
    for name, behaviour in behaviours.items():
        with hostile.hostile_server(behaviour()) as url:
            tried += 1
            started = time.monotonic()
            with webhook_client() as client:
                result = deliver(
                    client, f"{url}/h", sample_payload("agent.start"), timeout=deadline
                )
            if result.error is not None and result.response is None:
                clean += 1
            if name in ("slow head", "trickled body"):
                slowest = max(slowest, time.monotonic() - started)
            tried += 1
            started = time.monotonic()
            try:
                with Platform(url, timeout=deadline) as platform:
                    platform.list_interrupts(run_id="run_1")
            except BeltError:
                clean += 1
            if name in ("slow head", "trickled body"):
                slowest = max(slowest, time.monotonic() - started)
    return {"tried": tried, "clean": clean, "deadline": deadline, "slowest": slowest}


# 3. Load under slowloris ---------------------------------------------------------------------


def start_server(home: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "belt",
            "serve",
            "--port",
            "0",
            "--sweep-interval",
            "0",
            "--policy",
            str(ROOT / "examples" / "policy.toml"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "BELT_HOME": home},
    )
    assert process.stderr is not None
    banner = process.stderr.readline()
    found = re.search(r"listening on (http://\S+) ", banner)
    if not found:
        raise SystemExit(f"belt serve did not start: {banner}")
    return process, found.group(1)


class Slowloris:
    """SLOW connections that send part of a request head, reopened whenever they are closed."""

    def __init__(self, url: str, count: int) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.count = count
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self) -> socket.socket | None:
        try:
            sock = socket.create_connection(self.address, timeout=2)
            sock.sendall(b"POST /hooks HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            sock.setblocking(False)
        except OSError:
            return None
        self.opened += 1
        return sock

    def run(self) -> None:
        held: list[socket.socket] = []
        while not self.stop.is_set():
            alive = []
            for sock in held:
                try:
                    if sock.recv(1) == b"":
                        sock.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    sock.close()
                    continue
                alive.append(sock)
            held = alive
            while len(held) < self.count and not self.stop.is_set():
                sock = self.open()
                if sock is None:
                    break
                held.append(sock)
            self.stop.wait(0.2)
        for sock in held:
            sock.close()


def drive(url: str, seconds: float) -> dict[str, Any]:
    from belt.samples import sample_payload

    body = json.dumps(sample_payload("agent.tool_call")).encode()
    latencies: list[float] = []
    failures = 0
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client() -> None:
        nonlocal failures
        with httpx.Client(timeout=30) as http:
            while time.monotonic() < end:
                started = time.perf_counter()
                try:
                    ok = http.post(f"{url}/hooks", content=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                elapsed = time.perf_counter() - started
                with lock:
                    if ok:
                        latencies.append(elapsed)
                    else:
                        failures += 1

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {
        "rps": len(latencies) / seconds,
        "p50": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "p99": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan"),
        "failed": failures,
        "done": len(latencies),
    }


def run_load() -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, SLOW + 512)), hard))
    with tempfile.TemporaryDirectory() as home:
        process, url = start_server(home)
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(process.stderr or []), daemon=True)
        reader.start()
        try:
            quiet = drive(url, LOAD_SECONDS)
            attack = Slowloris(url, SLOW)
            attack.thread.start()
            time.sleep(2.0)
            health: list[int] = []

            def probe() -> None:
                deadline = time.monotonic() + LOAD_SECONDS
                while time.monotonic() < deadline:
                    try:
                        health.append(httpx.get(f"{url}/healthz", timeout=10).status_code)
                    except httpx.HTTPError:
                        health.append(0)
                    time.sleep(0.5)

            prober = threading.Thread(target=probe)
            prober.start()
            attacked = drive(url, LOAD_SECONDS)
            prober.join()
            attack.stop.set()
            attack.thread.join()
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
            reader.join(timeout=5)
    return {
        "quiet": quiet,
        "attacked": attacked,
        "slow_opened": attack.opened,
        "health_ok": sum(1 for status in health if status == 200),
        "health_total": len(health),
        "stderr_bytes": sum(len(line) for line in stderr),
        "tracebacks": sum(1 for line in stderr if "Traceback" in line),
    }


def main() -> None:
    bad = run_bad_inputs()
    print(
        f"bad inputs: {bad['clean']} of {bad['tried']} end in a clean error (exit 2-6, "
        "one line, no traceback)"
    )
    for line in bad["unclean"]:
        print(f"  not clean: {line}")
    answers = run_hostile_answers()
    print(
        f"hostile answers (webhook and --api): {answers['clean']} of {answers['tried']} are "
        f"the handler's failure or a clean error; slowest deadline case "
        f"{answers['slowest']:.2f} s against a {answers['deadline']:g} s deadline "
        "(the servers trickle for 30 s)"
    )
    load = run_load()
    quiet, attacked = load["quiet"], load["attacked"]
    print(f"load, {CLIENTS} keep-alive clients, {LOAD_SECONDS:g} s each, uvicorn via belt serve")
    for name, figures in (("quiet", quiet), (f"{SLOW} slowloris", attacked)):
        print(
            f"  {name:<16} {figures['rps']:7.0f} req/s  p50 {figures['p50']:6.2f} ms  "
            f"p99 {figures['p99']:7.2f} ms  failed {figures['failed']}"
        )
    ratio = attacked["rps"] / quiet["rps"] if quiet["rps"] else float("nan")
    verdict = "meets" if ratio >= TARGET else "misses"
    print(f"  throughput under attack / quiet: {ratio:.2f} ({verdict} the target of {TARGET})")
    print(
        f"  slow connections opened: {load['slow_opened']}; /healthz 200 in "
        f"{load['health_ok']} of {load['health_total']} probes; server stderr "
        f"{load['stderr_bytes']} bytes, {load['tracebacks']} tracebacks"
    )


if __name__ == "__main__":
    main()
