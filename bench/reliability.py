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

4. The engine: racing resumers (several `belt sim resume` of one run released together, many
   trials; counted: winners per trial, which must be exactly one), killed simulations (a
   `belt sim run` and then each `belt sim resume` SIGKILLed at random moments, KILLS times in
   all, at random hook deliveries; then ANYWHERE times at random moments of a simulation with
   no hooks; counted: resumes that went on, and tools run more than once, which must be none), and
   damaged store records (each kind of damage to each record of a held simulation, then
   `sim resume`, `sim stop`, `sim show`; counted: clean errors that leave the file as it was).

5. Nothing stranded: `belt serve --resume` SIGKILLed at a random moment while it continues a run
   held at a gate, then a second one (counted: runs stranded, tools run twice, hook deliveries
   made twice); `belt executor run` SIGKILLed while its tool runs, then a second worker
   (counted: runs on an attention hold, tasks run twice); and a burst of requests at once
   through `belt serve --forward-to` (failed requests, time, the server's memory).

6. Nothing grows: `belt serve`'s memory (resident and peak) over a journal of 500 payloads of
   500 KB, for the largest list, one text search through every page and 100 searches at once;
   over a journal of 300,000 deliveries once the inspector has read them; and the peak memory of
   `belt replay journal --json` over 200,000 records.

The guard: every route of `belt serve` tried as another site's page would ask it
(`tests/foreign.py`): from a rebound name (its own `Host` and `Origin`), from another origin,
and, for a route that changes something, as a `text/plain` form with no `Origin`. Counted: the
routes, the requests, and how many were refused (all must be). `--only guard` runs it alone, in
a few seconds.

Each part ends in verdicts (one line each; the bench exits 1 when one is missed): nothing
unclean, no request failed, nothing run twice or stranded, the throughput under attack, the
slowest deadline case at most 1.5 times its deadline, and the memory of part 6 under bounds
twice what was measured when its limits were built.

Run with `python bench/reliability.py` (about twenty minutes, most of them in parts 4 to 6);
`--only NAME...` runs some parts: inputs (1), answers (2), load (3), engine (4), stranded (5),
growth (6), guard. ``--quick`` runs parts 1 to 3 and the guard, the load for 3 s with 200 slow
clients (about half a minute in all); ``--load-seconds S`` and ``--slow N`` set the load's size
(the tests run it for a fraction of a second). The test-only ``--handicap S`` adds S seconds to
each request of the attacked load and to each deadline case, inside this bench's own timing.
"""

from __future__ import annotations

import argparse
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
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
from verdict import Verdicts, add_common_options  # noqa: E402

SLOW = 1100
LOAD_SECONDS = 8.0
CLIENTS = 4
TARGET = 0.5
DEADLINE_TARGET = 1.5
PARTS = ("inputs", "answers", "load", "engine", "stranded", "growth", "guard")
QUICK_PARTS = ("inputs", "answers", "load", "guard")


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
        entry = ["registry", "add", "--kind", "skill", "--name", "x", "--file", path]
        cases.append((f"registry add --file {path}", entry, None))
    policy = str(ROOT / "examples" / "policy.toml")
    for since in ("99999999d", "9999999999999999999h"):
        replayed = ["replay", "journal", "--policy", policy, "--since", since]
        cases.append((f"replay --since {since}", replayed, None))
    cases.append(("replay of a long source", ["replay", "a" * 100_000, "--policy", policy], None))
    dangling = folder / "dangling.json"
    dangling.symlink_to(folder / "nowhere" / "hooks.json")
    cases.append(
        (
            "hooks add --file a dangling link",
            ["hooks", "add", "agent.start", "--gate", "--file", str(dangling)],
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


def run_hostile_answers(handicap: float = 0.0) -> dict[str, Any]:
    from belt.backends.remote import Platform
    from belt.errors import BeltError
    from belt.handlers.webhook import deliver
    from belt.wire.samples import sample_payload
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
            result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=deadline)
            time.sleep(handicap)
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
            time.sleep(handicap)
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


def drive(url: str, seconds: float, handicap: float = 0.0) -> dict[str, Any]:
    from belt.wire.samples import sample_payload

    body = json.dumps(sample_payload("agent.tool_call")).encode()
    latencies: list[float] = []
    failures = 0
    lock = threading.Lock()
    # The clients start together, once each has its connection pool: the time counted is that
    # of their requests, not of starting threads on a busy machine.
    ready = threading.Barrier(CLIENTS + 1)
    end = 0.0

    def client() -> None:
        nonlocal failures
        json_body = {"content-type": "application/json"}
        with httpx.Client(timeout=30, headers=json_body) as http:
            ready.wait()
            ready.wait()
            while time.monotonic() < end:
                started = time.perf_counter()
                try:
                    ok = http.post(f"{url}/hooks", content=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                time.sleep(handicap)
                elapsed = time.perf_counter() - started
                with lock:
                    if ok:
                        latencies.append(elapsed)
                    else:
                        failures += 1

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    ready.wait()
    began = time.monotonic()
    end = began + seconds
    ready.wait()
    for thread in threads:
        thread.join()
    took = time.monotonic() - began  # a request begun before the end is counted when it ends
    latencies.sort()
    return {
        "rps": len(latencies) / took,
        "p50": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "p99": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan"),
        "failed": failures,
        "done": len(latencies),
    }


def run_load(seconds: float, slow: int, handicap: float = 0.0) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, slow + 512)), hard))
    with tempfile.TemporaryDirectory() as home:
        process, url = start_server(home)
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(process.stderr or []), daemon=True)
        reader.start()
        try:
            quiet = drive(url, seconds)
            attack = Slowloris(url, slow)
            attack.thread.start()
            time.sleep(min(2.0, seconds))
            health: list[int] = []

            def probe() -> None:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    try:
                        health.append(httpx.get(f"{url}/healthz", timeout=10).status_code)
                    except httpx.HTTPError:
                        health.append(0)
                    time.sleep(0.5)

            prober = threading.Thread(target=probe)
            prober.start()
            attacked = drive(url, seconds, handicap)
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


# 4. The engine ---------------------------------------------------------------------------------

RACER = """
import runpy, sys
import belt.cli
sys.argv = ["belt", *sys.argv[1:]]
print("ready", flush=True)
sys.stdin.readline()
runpy.run_module("belt", run_name="__main__", alter_sys=True)
"""
KILLS = 25
ANYWHERE = 100


def belt_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "belt", *args], env=env, capture_output=True, text=True, cwd=ROOT
    )


def gated_scenario(folder: Path, hook_url: str) -> Path:
    call = {"name": "delete_file", "arguments": {"path": "/tmp/x"}, "result": "ok"}
    doc = {
        "agent": {
            "hooks": [
                {"event": "agent.tool_call", "type": "gate"},
                {"event": "agent.complete", "type": "webhook", "handler": f"{hook_url}/hooks"},
            ]
        },
        "turns": [{"user": "go", "model": [{"say": "x", "tool_calls": [call]}, {"say": "ok"}]}],
    }
    path = folder / "gated.json"
    path.write_text(json.dumps(doc))
    return path


def race_resumers(env: dict[str, str], folder: Path, hook_url: str, racers: int) -> int:
    """Winners among ``racers`` resumes of one held run, released together."""
    held = json.loads(
        belt_cli(env, "sim", "run", str(gated_scenario(folder, hook_url)), "--json").stdout
    )
    run_id = held["runs"][0]["id"]
    belt_cli(env, "interrupt", "resolve", held["chat"]["pending_interrupts"][0]["id"], "allow")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, "sim", "resume", run_id],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        for _ in range(racers)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    codes = [proc.wait(120) for proc in procs]
    for proc in procs:
        proc.communicate()
    return sum(1 for code in codes if code == 0)


def deliveries(folder: Path) -> int:
    """How many hook requests the local `belt serve` has answered (lines of its journal)."""
    journal = folder / "serve" / "store" / "logs" / "journal" / "serve.jsonl"
    try:
        return journal.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def kill_and_resume(env: dict[str, str], folder: Path, hook_url: str) -> dict[str, Any]:
    """KILLS SIGKILLs at random moments of one long simulation with webhook hooks, each
    followed by a resume.

    A moment is a random number of hook deliveries into the run (1 to 12 more), and a random
    fraction of a delivery's time after it: so the kills land before, during and after steps.
    """
    import random

    chance = random.Random(7)
    hooks = [
        {"event": event, "type": "webhook", "handler": f"{hook_url}/hooks"}
        for event in ("agent.turn_start", "agent.tool_call", "agent.complete")
    ]

    def moment(proc: subprocess.Popen[bytes]) -> None:
        target = deliveries(folder) + chance.randint(1, 12)
        until = time.monotonic() + 60
        while deliveries(folder) < target and proc.poll() is None and time.monotonic() < until:
            time.sleep(0.001)
        time.sleep(chance.uniform(0, 0.004))

    return killed_again_and_again(env, folder / "long.json", hooks, 40, KILLS, moment)


def kill_anywhere(env: dict[str, str], folder: Path) -> dict[str, Any]:
    """ANYWHERE SIGKILLs of a simulation with no hooks, each at a random time after its process
    started (when it has imported belt and is writing turns as fast as it can), so the kills
    land in any write of any step: between runs, as a turn begins, between a file and its
    listing."""
    import random

    chance = random.Random(11)

    def moment(proc: subprocess.Popen[bytes]) -> None:
        time.sleep(chance.uniform(0.22, 0.34))

    return killed_again_and_again(env, folder / "fast.json", [], 300, ANYWHERE, moment)


def killed_again_and_again(
    env: dict[str, str],
    path: Path,
    hooks: list[dict[str, Any]],
    count: int,
    kills_wanted: int,
    moment: Callable[[subprocess.Popen[bytes]], None],
) -> dict[str, Any]:
    """Run a scenario of ``count`` turns (two tool calls each), SIGKILLing the process at
    ``moment`` and resuming it, ``kills_wanted`` times, then until it has finished."""
    call = {"name": "write_file", "arguments": {}, "result": "ok"}
    turns = [
        {"user": f"task {t}", "model": [{"say": "a", "tool_calls": [call, call]}, {"say": "b"}]}
        for t in range(count)
    ]
    path.write_text(json.dumps({"agent": {"hooks": hooks}, "turns": turns}))
    command = ["sim", "run", str(path)]
    kills = resumed = between = 0
    rows: list[dict[str, Any]] = []
    for _ in range(kills_wanted + 200):
        proc = subprocess.Popen(
            [sys.executable, "-m", "belt", *command],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        if kills < kills_wanted:
            moment(proc)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
        proc.wait(120)
        rows = json.loads(belt_cli(env, "sim", "list", "--json").stdout)
        rows = [r for r in rows if r["scenario"] == str(path)]
        if len(rows) == len(turns) and all(r["state"] == "completed" for r in rows):
            break
        if not rows:  # killed before its first run was written: run it again
            continue
        unfinished = [r for r in rows if r["state"] != "completed"]
        # Killed between two runs, the simulation goes on from its last run.
        command = ["sim", "resume", (unfinished or rows)[-1]["id"]]
        resumed += 1
        between += not unfinished
    report = json.loads(belt_cli(env, "sim", "show", rows[0]["id"], "--json").stdout)
    messages = report["chat"]["chat_messages"]
    tools = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    users = [m["content"][0]["text"] for m in messages if m["role"] == "user"]
    return {
        "kills": kills,
        "resumes": resumed,
        "between_runs": between,
        "finished": sum(1 for r in rows if r["state"] == "completed"),
        "runs": len(turns),
        "tools": len(tools),
        "tools_twice": len(tools) - len(set(tools)),
        "expected_tools": 2 * len(turns),
        "turns_once": users == [f"task {t}" for t in range(count)],
    }


DAMAGE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "field missing": lambda data: data.pop(next(iter(data))),
    "field mistyped": lambda data: data.update({next(iter(data)): [1]}),
    "data not an object": lambda data: None,
}


def damaged_records(env: dict[str, str], folder: Path, hook_url: str) -> dict[str, Any]:
    """Each damage to each record of a held simulation, under resume, stop and show."""
    tried = clean = 0
    for kind in ("run", "chat", "sim", "interrupt", "scenario"):
        for name, damage in {
            **DAMAGE,
            "deep nesting": lambda data: None,
            "not JSON": lambda data: None,
        }.items():
            home = folder / f"damage-{kind}-{len(name)}-{tried}"
            case_env = {**env, "BELT_HOME": str(home)}
            held = json.loads(
                belt_cli(
                    case_env, "sim", "run", str(gated_scenario(folder, hook_url)), "--json"
                ).stdout
            )
            ids = {
                "run": held["runs"][0]["id"],
                "chat": held["chat"]["id"],
                "sim": held["simulation"]["id"],
                "interrupt": held["chat"]["pending_interrupts"][0]["id"],
                "scenario": held["simulation"]["id"],
            }
            target = home / "store" / "objects" / kind / f"{ids[kind]}.json"
            envelope = json.loads(target.read_text())
            if name == "deep nesting":
                target.write_text("[" * 50_000 + "]" * 50_000)
            elif name == "not JSON":
                target.write_text(target.read_text()[:40])
            elif name == "data not an object":
                envelope["data"] = [1]
                target.write_text(json.dumps(envelope))
            else:
                damage(envelope["data"])
                target.write_text(json.dumps(envelope))
            before = target.read_bytes()
            run_id = ids["run"]
            for command in (
                ("sim", "resume", run_id),
                ("sim", "stop", run_id),
                ("sim", "show", run_id),
            ):
                tried += 1
                done = belt_cli(case_env, *command)
                # A command that needs the record ends in a clean error; one that does not
                # (`stop` and `show` never read the scenario) may succeed; none may crash or
                # touch the damaged file.
                failed_cleanly = done.returncode in (3, 4, 5) and done.stderr.count("\n") <= 2
                if (
                    (failed_cleanly or done.returncode == 0)
                    and "Traceback" not in done.stderr
                    and target.read_bytes() == before
                ):
                    clean += 1
    return {"tried": tried, "clean": clean}


def run_engine(verdicts: Verdicts) -> None:
    with tempfile.TemporaryDirectory(prefix="belt-reliability-engine-") as tmp:
        folder = Path(tmp)
        server, url = start_server(str(folder / "serve"))
        try:
            env = {**os.environ, "BELT_HOME": str(folder / "home"), "NO_COLOR": "1"}
            winners = [race_resumers(env, folder, url, 2) for _ in range(10)]
            many = [race_resumers(env, folder, url, 12) for _ in range(3)]
            print(
                f"racing resumers: 10 trials of 2 and 3 trials of 12 released together; winners "
                f"per trial {sorted(set(winners + many))} (exactly one wins every trial: "
                f"{all(w == 1 for w in winners + many)})"
            )
            verdicts.check(
                "racing resumers: trials not won by exactly one",
                figure=sum(1 for w in winners + many if w != 1),
                target=0,
            )
            killed = kill_and_resume({**env, "BELT_HOME": str(folder / "kills")}, folder, url)
            print(
                f"killed simulations: {killed['kills']} SIGKILLs, {killed['resumes']} resumes "
                f"({killed['between_runs']} of them between two runs); "
                f"{killed['finished']} of {killed['runs']} runs completed; {killed['tools']} tool "
                f"results for {killed['expected_tools']} tool calls, {killed['tools_twice']} run "
                "twice"
            )
            verdicts.check(
                "killed simulations: runs not completed",
                figure=killed["runs"] - killed["finished"],
                target=0,
            )
            verdicts.check(
                "killed simulations: tools run twice", figure=killed["tools_twice"], target=0
            )
            anywhere = kill_anywhere({**env, "BELT_HOME": str(folder / "anywhere")}, folder)
            print(
                f"killed anywhere: {anywhere['kills']} SIGKILLs at random times, "
                f"{anywhere['resumes']} resumes ({anywhere['between_runs']} between two runs); "
                f"{anywhere['finished']} of {anywhere['runs']} runs completed, each turn's "
                f"input once: {anywhere['turns_once']}; {anywhere['tools']} tool results for "
                f"{anywhere['expected_tools']} tool calls, {anywhere['tools_twice']} run twice"
            )
            verdicts.check(
                "killed anywhere: runs not completed, or a turn's input not once",
                figure=anywhere["runs"] - anywhere["finished"] + (not anywhere["turns_once"]),
                target=0,
            )
            verdicts.check(
                "killed anywhere: tools run twice", figure=anywhere["tools_twice"], target=0
            )
            damaged = damaged_records(env, folder, url)
            print(
                f"damaged store records: {damaged['clean']} of {damaged['tried']} commands end in "
                "a clean error (or, not needing the record, succeed) and leave the file as it was"
            )
            verdicts.check(
                "damaged store records: commands not clean",
                figure=damaged["tried"] - damaged["clean"],
                target=0,
            )
        finally:
            server.terminate()
            server.wait(10)


# 5. Nothing stranded: killed continuers and workers, and the --forward-to burst ---------------

RESUME_TRIALS = 20
WORKER_TRIALS = 10
FORWARD_BURST = 300
TAIL = """\
import os, sys, time
from pathlib import Path
here = Path(sys.argv[1])
key = __import__("json").loads(sys.stdin.read())["task_key"]
with open(here / "runs", "a") as log:
    log.write(f"start {key}\\n")
time.sleep(0.3)
with open(here / "runs", "a") as log:
    log.write(f"done {key}\\n")
print('{"structured_content": {"continue": false}}')
"""


def start_serve(home: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``belt serve --port 0 ARGS`` over the store at ``home``; the process and its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "BELT_HOME": str(home)},
    )
    assert process.stderr is not None
    banner = process.stderr.readline()
    found = re.search(r"listening on (http://\S+) ", banner)
    if not found:
        raise SystemExit(f"belt serve did not start: {banner}")
    return process, found.group(1)


def record(home: Path, kind: str, id: str) -> dict[str, Any]:
    """A record of the store at ``home`` as belt wrote it (the benchmark only reads)."""
    path = home / "store" / "objects" / kind / f"{id}.json"
    data: dict[str, Any] = json.loads(path.read_text())["data"]
    return data


def wait_until(check: Callable[[], bool], seconds: float) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if check():
            return True
        time.sleep(0.01)
    return False


def kill_a_continuer(home: Path, path: Path, journal: Path, after: float) -> dict[str, int]:
    """Hold the scenario at ``path`` at its gate, resolve it, SIGKILL the `belt serve --resume`
    continuing it ``after`` seconds into the continuation, and let a second one finish it."""
    env = {**os.environ, "BELT_HOME": str(home), "NO_COLOR": "1"}
    held = json.loads(belt_cli(env, "sim", "run", str(path), "--json").stdout)
    run_id, sim_id = held["runs"][0]["id"], held["simulation"]["id"]
    first, _ = start_serve(home, "--resume", "--sweep-interval", "0")
    belt_cli(env, "interrupt", "resolve", held["chat"]["pending_interrupts"][0]["id"], "allow")
    wait_until(lambda: record(home, "run", run_id)["state"] != "input_required", 60)
    time.sleep(after)
    killed = first.poll() is None and record(home, "sim", sim_id)["status"] != "finished"
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    second, _ = start_serve(home, "--resume", "--sweep-interval", "0")
    finished = wait_until(lambda: record(home, "sim", sim_id)["status"] == "finished", 60)
    second.terminate()
    second.wait(30)
    report = json.loads(belt_cli(env, "sim", "show", run_id, "--json").stdout)
    tools = [m["tool_call_id"] for m in report["chat"]["chat_messages"] if m["role"] == "tool"]
    chat = report["chat"]["id"]
    requests = [json.loads(line).get("request") or {} for line in journal.open()]
    sent = [
        (r.get("event"), r.get("run_id"), r.get("turn_count"))
        for r in requests
        if r.get("chat_id") == chat
    ]
    return {
        "killed": int(killed),
        "stranded": int(not finished),
        "tools_twice": len(tools) - len(set(tools)),
        "hooks_twice": len(sent) - len(set(sent)),
    }


def killed_continuers(folder: Path, hook_url: str) -> dict[str, Any]:
    """RESUME_TRIALS times: a run held at a gate, resolved, continued by `belt serve --resume`
    and that server SIGKILLed at a random moment of the continuation (twenty more turns with
    webhook hooks); then a second `belt serve --resume`. Counted: runs stranded (the
    simulation did not finish), tools run twice, hook deliveries made twice."""
    import random

    chance = random.Random(21)
    call = {"name": "write_file", "arguments": {}, "result": "ok"}
    hooks: list[dict[str, Any]] = [
        {"event": event, "type": "webhook", "handler": f"{hook_url}/hooks"}
        for event in ("agent.turn_start", "agent.tool_call", "agent.complete")
    ]
    # The first turn's tool call holds at the gate; the twenty turns after it call no tool.
    first_turn = {"user": "task 0", "model": [{"say": "a", "tool_calls": [call]}, {"say": "b"}]}
    later = [{"user": f"task {t}", "model": [{"say": "b"}]} for t in range(1, 21)]
    gate = {"event": "agent.tool_call", "type": "gate"}
    scenario = {"agent": {"hooks": [*hooks, gate]}, "turns": [first_turn, *later]}
    journal = folder / "serve" / "store" / "logs" / "journal" / "serve.jsonl"
    kills = stranded = tools_twice = hooks_twice = 0
    for trial in range(RESUME_TRIALS):
        path = folder / f"resume-{trial}.json"
        path.write_text(json.dumps(scenario))
        found = kill_a_continuer(folder / f"resume-{trial}", path, journal, chance.uniform(0, 0.6))
        kills += found["killed"]
        stranded += found["stranded"]
        tools_twice += found["tools_twice"]
        hooks_twice += found["hooks_twice"]
    return {
        "trials": RESUME_TRIALS,
        "kills": kills,
        "stranded": stranded,
        "tools_twice": tools_twice,
        "hooks_twice": hooks_twice,
    }


def kill_a_worker(home: Path, path: Path, tool: str, runs: Path, after: float) -> dict[str, int]:
    """Run the Nexus scenario at ``path``; SIGKILL the worker serving its task ``after`` seconds
    into the tool's run, and let a second worker serve it."""
    env = {**os.environ, "BELT_HOME": str(home), "NO_COLOR": "1"}
    runs.write_text("")
    command = [sys.executable, "-m", "belt", "executor", "run", "--tool", tool]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": ROOT}
    sim = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", str(path), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    first = subprocess.Popen(command, env=env, **quiet)  # type: ignore[call-overload]
    wait_until(lambda: "start" in runs.read_text(), 60)
    time.sleep(after)
    killed = "done" not in runs.read_text()
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    second = subprocess.Popen(command, env=env, **quiet)  # type: ignore[call-overload]
    stdout, _ = sim.communicate(timeout=120)
    second.terminate()
    second.wait(30)
    report = json.loads(stdout)
    done = [line for line in runs.read_text().splitlines() if line.startswith("done")]
    twice = len(done) - len(set(done))
    return {
        "killed": int(killed),
        "held": int(report["runs"][0]["state"] != "completed"),
        "twice": twice if killed else 0,
        "late": int(not killed),
        "late_twice": 0 if killed else twice,
    }


def killed_workers(folder: Path) -> dict[str, Any]:
    """WORKER_TRIALS times: a Nexus simulation waiting on a stop task, a `belt executor run`
    SIGKILLed at a random moment while its tool (0.3 s) runs, then a second worker. Counted:
    runs that ended on an attention hold, and tool runs that finished twice (apart for the kills
    that landed after the tool had finished, whose result the dead worker never wrote)."""
    import random

    chance = random.Random(22)
    (folder / "tail.py").write_text(TAIL)
    tool = f"verify=cmd:{sys.executable} {folder / 'tail.py'} {folder}"
    path = folder / "stop.toml"
    path.write_text(
        'dialect = "nexus"\n[profile]\napproval_mode = "auto"\n'
        '[profile.lifecycle_hooks.stop]\ntool = "verify"\ntimeout_ms = 60000\n'
        "max_continuations = 0\n"
        '[[turns]]\nuser = "Fix the test."\n[[turns.model]]\nsay = "Done."\n'
    )
    runs = folder / "runs"
    totals = {"killed": 0, "held": 0, "twice": 0, "late": 0, "late_twice": 0}
    for trial in range(WORKER_TRIALS):
        after = chance.uniform(0, 0.3)
        found = kill_a_worker(folder / f"worker-{trial}", path, tool, runs, after)
        for key, value in found.items():
            totals[key] += value
    return {"trials": WORKER_TRIALS, **totals}


def forward_burst(folder: Path) -> dict[str, Any]:
    """FORWARD_BURST hook requests at once through `belt serve --forward-to` to a handler that
    answers after 50 ms: failures, the burst's time, the server's memory before and after, and
    the most requests the handler held at once."""
    import asyncio

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from belt.wire.samples import sample_payload

    held = {"now": 0, "most": 0}

    async def hook(request: Request) -> Response:
        await request.body()
        held["now"] += 1
        held["most"] = max(held["most"], held["now"])
        await asyncio.sleep(0.05)
        held["now"] -= 1
        return Response('{"decision": "allow"}', media_type="application/json")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        Starlette(routes=[Route("/hooks", hook, methods=["POST"])]),
        log_level="warning",
        access_log=False,
        backlog=1024,
    )
    upstream = uvicorn.Server(config)
    thread = threading.Thread(target=upstream.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not upstream.started:
        time.sleep(0.01)
    server, url = start_serve(
        folder / "forward",
        "--forward-to",
        f"http://127.0.0.1:{port}/hooks",
        "--sweep-interval",
        "0",
    )

    def rss() -> int:
        status = Path(f"/proc/{server.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]

    body = json.dumps(sample_payload("agent.turn_start")).encode()
    host, served_port = url.removeprefix("http://").split(":")
    request = (
        f"POST /hooks HTTP/1.1\r\nHost: {host}:{served_port}\r\ncontent-type: application/json"
        f"\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body

    async def burst() -> list[bytes]:
        connecting = asyncio.Semaphore(16)
        opened: list[int] = []
        all_open = asyncio.Event()

        async def one() -> bytes:
            async with connecting:
                reader, writer = await asyncio.open_connection(host, int(served_port))
            opened.append(1)
            if len(opened) == FORWARD_BURST:
                all_open.set()
            await all_open.wait()
            writer.write(request)
            await writer.drain()
            answer = await reader.read()
            writer.close()
            return answer.partition(b"\r\n")[0]

        return await asyncio.gather(*(one() for _ in range(FORWARD_BURST)))

    try:
        httpx.post(f"{url}/hooks", content=body, headers={"content-type": "application/json"})
        before = rss()
        started = time.perf_counter()
        statuses = asyncio.run(burst())
        seconds = time.perf_counter() - started
        after = rss()
    finally:
        server.terminate()
        server.wait(30)
        upstream.should_exit = True
        thread.join(10)
    return {
        "failed": sum(1 for status in statuses if status != b"HTTP/1.1 200 OK"),
        "seconds": seconds,
        "rss_before_kb": before,
        "rss_after_kb": after,
        "most": held["most"],
    }


def run_stranded(verdicts: Verdicts) -> None:
    with tempfile.TemporaryDirectory(prefix="belt-reliability-stranded-") as tmp:
        folder = Path(tmp)
        hooks, hook_url = start_server(str(folder / "serve"))
        try:
            resumed = killed_continuers(folder, hook_url)
        finally:
            hooks.terminate()
            hooks.wait(10)
        print(
            f"killed belt serve --resume: {resumed['trials']} trials, {resumed['kills']} SIGKILLs "
            f"while continuing a run; runs stranded: {resumed['stranded']}; tools run twice: "
            f"{resumed['tools_twice']}; hook deliveries made twice: {resumed['hooks_twice']}"
        )
        verdicts.check(
            "killed belt serve --resume: runs stranded", figure=resumed["stranded"], target=0
        )
        verdicts.check(
            "killed belt serve --resume: tools run twice", figure=resumed["tools_twice"], target=0
        )
        workers = killed_workers(folder)
        print(
            f"killed belt executor run: {workers['trials']} trials, {workers['killed']} SIGKILLs "
            f"while the tool ran; runs on an attention hold: {workers['held']}; tasks run twice: "
            f"{workers['twice']}; {workers['late']} SIGKILLs after the tool had finished: "
            f"{workers['late_twice']} of those tools ran again (its worker died before it wrote "
            "the result)"
        )
        verdicts.check(
            "killed belt executor run: runs on an attention hold", figure=workers["held"], target=0
        )
        verdicts.check(
            "killed belt executor run: tasks run twice", figure=workers["twice"], target=0
        )
        burst = forward_burst(folder)
        grown = (burst["rss_after_kb"] - burst["rss_before_kb"]) / FORWARD_BURST
        print(
            f"--forward-to burst: {FORWARD_BURST} requests at once, {burst['failed']} failed, "
            f"{burst['seconds']:.2f} s; at most {burst['most']} at the handler at once; server "
            f"memory {burst['rss_before_kb'] / 1024:.0f} -> {burst['rss_after_kb'] / 1024:.0f} MiB "
            f"({grown:.1f} KiB per request)"
        )
        verdicts.check("--forward-to burst: requests failed", figure=burst["failed"], target=0)


# 6. Nothing grows: the inspector's list and search, its history, belt replay of a long journal

SEARCH_PAYLOADS = 500
SEARCH_PAYLOAD_BYTES = 500_000
SEARCHES_AT_ONCE = 100
HISTORY = 300_000
REPLAYED = 200_000


def journal_record(n: int, padding: int = 0) -> dict[str, Any]:
    """A hook request as ``belt serve`` journals it, its payload holding ``needle-<n>/``."""
    request = {
        "event": "agent.tool_call",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "agent_id": "ag_bench",
        "chat_id": f"ch_{n % 50}",
        "run_id": f"ar_{n % 500}",
        "turn_count": n % 40,
        "data": {
            "tool": "delete_file",
            "arguments": {"path": f"/tmp/needle-{n}/old.txt", "pad": "x" * padding},
        },
    }
    return {
        "kind": "hook",
        "at": f"2026-08-11T{n // 3_600_000 % 24:02d}:{n // 60_000 % 60:02d}:"
        f"{n // 1000 % 60:02d}.{n % 1000:03d}Z",
        "route": "/hooks",
        "name": None,
        "headers": {"host": "127.0.0.1:8787", "content-type": "application/json", "x": "y" * 300},
        "event": "agent.tool_call",
        "tool": "delete_file",
        "request": request,
        "status": 200,
        "response": {"decision": "allow", "reason": "temporary files may go"},
        "decision": "allow",
        "reason": "temporary files may go",
        "duration_ms": 0.412,
    }


def write_journal(home: Path, count: int, padding: int = 0) -> int:
    """``count`` journal records in the store at ``home``, written as the store writes them;
    the journal's size in bytes."""
    path = home / "store" / "logs" / "journal" / "serve.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('{"belt":"log","schema":1}\n')
        for n in range(count):
            line = json.dumps(journal_record(n, padding), ensure_ascii=False, separators=(",", ":"))
            handle.write(line + "\n")
    return path.stat().st_size


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB: what it holds now, and the most it ever held."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = [re.search(rf"{name}:\s+(\d+)", status) for name in ("VmRSS", "VmHWM")]
    return int(found[0].group(1)), int(found[1].group(1))  # type: ignore[union-attr]


def search_all(url: str, q: str) -> tuple[int, int]:
    """A text search of the deliveries followed through every ``next``: (pages, hits)."""
    pages = hits = 0
    before: str | None = None
    while True:
        params = {"q": q, "limit": "50", **({"before": before} if before else {})}
        reply = httpx.get(f"{url}/inspector/deliveries", params=params, timeout=600)
        reply.raise_for_status()
        found = reply.json()["data"]
        pages += 1
        hits += len(found["items"])
        before = found["next"]
        if not before:
            return pages, hits


def inspector_search(folder: Path) -> dict[str, Any]:
    """The memory of ``belt serve`` over a journal of SEARCH_PAYLOADS payloads of
    SEARCH_PAYLOAD_BYTES: the largest list, one text search through every page, and
    SEARCHES_AT_ONCE searches at once."""
    home = folder / "search"
    size = write_journal(home, SEARCH_PAYLOADS, SEARCH_PAYLOAD_BYTES)
    server, url = start_serve(home, "--policy", str(ROOT / "examples" / "policy.toml"))
    try:
        started = memory_kb(server.pid)
        listed = httpx.get(f"{url}/inspector/deliveries", params={"limit": "500"}, timeout=600)
        listed.raise_for_status()
        after_list = memory_kb(server.pid)
        began = time.monotonic()
        pages, hits = search_all(url, "needle-0/")
        one_seconds = time.monotonic() - began
        after_one = memory_kb(server.pid)
        failures: list[str] = []

        def search() -> None:
            try:
                reply = httpx.get(
                    f"{url}/inspector/deliveries", params={"q": "needle-0/"}, timeout=600
                )
                reply.raise_for_status()
            except httpx.HTTPError as exc:
                failures.append(str(exc))

        threads = [threading.Thread(target=search) for _ in range(SEARCHES_AT_ONCE)]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        many_seconds = time.monotonic() - began
        after_many = memory_kb(server.pid)
    finally:
        server.terminate()
        server.wait(10)
    return {
        "journal_mb": size / 1e6,
        "started": started,
        "list_bytes": len(listed.content),
        "list_items": len(listed.json()["data"]["items"]),
        "after_list": after_list,
        "pages": pages,
        "hits": hits,
        "one_seconds": one_seconds,
        "after_one": after_one,
        "many_seconds": many_seconds,
        "after_many": after_many,
        "failed": len(failures),
    }


def inspector_history(folder: Path) -> dict[str, Any]:
    """The memory of ``belt serve`` whose journal holds HISTORY deliveries, once the inspector
    has read them all."""
    home = folder / "history"
    size = write_journal(home, HISTORY)
    server, url = start_serve(home, "--policy", str(ROOT / "examples" / "policy.toml"))
    try:
        before = memory_kb(server.pid)
        began = time.monotonic()
        listed = httpx.get(f"{url}/inspector/deliveries", params={"limit": "50"}, timeout=600)
        listed.raise_for_status()
        seconds = time.monotonic() - began
        found = listed.json()["data"]
        oldest = "serve." + str(len('{"belt":"log","schema":1}\n'))
        detail = httpx.get(f"{url}/inspector/deliveries/{oldest}", timeout=60)
        after = memory_kb(server.pid)
    finally:
        server.terminate()
        server.wait(10)
    return {
        "journal_mb": size / 1e6,
        "before": before,
        "after": after,
        "seconds": seconds,
        "total": found["total"],
        "held": found.get("held", found["total"]),
        "oldest_status": detail.status_code,
    }


def replay_memory(folder: Path) -> dict[str, Any]:
    """The most memory ``belt replay journal --json`` takes over a journal of REPLAYED
    records (its VmHWM, read as its rows come), and how long it takes."""
    home = folder / "replay"
    size = write_journal(home, REPLAYED)
    began = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "belt", "replay", "journal", "--json"]
        + ["--policy", str(ROOT / "examples" / "policy.toml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "BELT_HOME": str(home)},
    )
    assert process.stdout is not None
    rows = peak = 0
    for line in process.stdout:
        rows += line.startswith(b'      "number": ')
        if rows % 1000 == 0:
            # The process's own high-water mark (wait4's ru_maxrss would count this process's
            # size when it forked the child).
            try:
                peak = max(peak, memory_kb(process.pid)[1])
            except (OSError, AttributeError):
                pass
    process.wait()
    assert process.stderr is not None
    error = process.stderr.read().decode(errors="replace")
    return {
        "journal_mb": size / 1e6,
        "rows": rows,
        "max_rss_kb": peak,
        "seconds": time.monotonic() - began,
        "exit": process.returncode,
        "stderr": error[-300:],
    }


def run_growth(verdicts: Verdicts) -> None:
    with tempfile.TemporaryDirectory(prefix="belt-reliability-growth-") as tmp:
        folder = Path(tmp)
        found = inspector_search(folder)
        mib = 1024
        listed, started = found["after_list"], found["started"][0] / mib
        print(
            f"inspector over {SEARCH_PAYLOADS} payloads of {SEARCH_PAYLOAD_BYTES // 1000} KB "
            f"({found['journal_mb']:.0f} MB of journal): server at {started:.0f} MiB; the "
            f"largest list ({found['list_items']} rows, {found['list_bytes'] / 1e3:.0f} KB) -> "
            f"{listed[0] / mib:.0f} MiB (peak {listed[1] / mib:.0f} MiB)"
        )
        print(
            f"  one text search through every page ({found['pages']} pages, {found['hits']} hit, "
            f"{found['one_seconds']:.1f} s): {found['after_one'][0] / mib:.0f} MiB (peak "
            f"{found['after_one'][1] / mib:.0f} MiB)"
        )
        print(
            f"  {SEARCHES_AT_ONCE} searches at once ({found['many_seconds']:.1f} s, "
            f"{found['failed']} failed): {found['after_many'][0] / mib:.0f} MiB after (peak "
            f"{found['after_many'][1] / mib:.0f} MiB)"
        )
        history = inspector_history(folder)
        print(
            f"inspector history of {HISTORY:,} deliveries ({history['journal_mb']:.0f} MB of "
            f"journal): {history['held']:,} held of {history['total']:,}, read in "
            f"{history['seconds']:.1f} s; server {history['before'][0] / mib:.0f} -> "
            f"{history['after'][0] / mib:.0f} MiB (peak {history['after'][1] / mib:.0f} MiB); "
            f"the oldest delivery's detail: HTTP {history['oldest_status']}"
        )
        replayed = replay_memory(folder)
        print(
            f"belt replay journal --json over {REPLAYED:,} records ({replayed['journal_mb']:.0f} "
            f"MB): {replayed['rows']:,} rows in {replayed['seconds']:.0f} s, exit "
            f"{replayed['exit']}, peak memory {replayed['max_rss_kb'] / mib:.0f} MiB"
        )
        if replayed["exit"]:
            print(f"  stderr: {replayed['stderr']}")
        for measure, kib, bound in (
            ("inspector, the largest list: server peak", listed[1], 128),
            (
                f"inspector, {SEARCHES_AT_ONCE} searches at once: server peak",
                found["after_many"][1],
                256,
            ),
            (f"inspector history of {HISTORY:,} deliveries: server", history["after"][0], 256),
            (
                f"belt replay journal --json of {REPLAYED:,} records: peak",
                replayed["max_rss_kb"],
                128,
            ),
        ):
            verdicts.check(measure, figure=round(kib / mib), target=bound, unit=" MiB")
        verdicts.check(
            "searches failed, and belt replay journal's exit code",
            figure=found["failed"] + replayed["exit"],
            target=0,
        )


# The guard: every route of belt serve, as another site's page would ask it


def run_guard(verdicts: Verdicts) -> None:
    """Every route of `belt serve` tried from a foreign origin and Host (tests/foreign.py)."""
    from belt.server.app import create_app
    from belt.store import Store
    from tests.foreign import routes_of, try_foreign

    with tempfile.TemporaryDirectory(prefix="belt-reliability-guard-") as tmp:
        home = Path(tmp)
        routes = routes_of(create_app(store=Store(home / "routes"), sweep_interval=0))
        server, url = start_serve(home, "--sweep-interval", "0")
        try:
            tried = try_foreign(url, routes)
        finally:
            server.terminate()
            server.wait(10)
            errors = server.stderr.read() if server.stderr is not None else ""
    refused = [t for t in tried if t.status in (403, 415)]
    every = "all refused" if len(refused) == len(tried) else f"{len(refused)} refused"
    print(
        f"requests tried per route from a foreign origin and Host: {len(routes)} routes, "
        f"{len(tried)} requests (rebound, cross-site, text/plain form), {every}; "
        f"server tracebacks: {errors.count('Traceback')}"
    )
    for t in tried:
        if t.status not in (403, 415):
            print(f"  answered {t.status}: {t.kind} {t.method} {t.path}")
    verdicts.check(
        "foreign requests not refused, and server tracebacks",
        figure=len(tried) - len(refused) + errors.count("Traceback"),
        target=0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=PARTS, metavar="PART", help=", ".join(PARTS))
    parser.add_argument("--load-seconds", type=float, help="load: each drive; default 8 (quick: 3)")
    parser.add_argument("--slow", type=int, help="load: slow clients; default 1100 (quick: 200)")
    add_common_options(parser)
    args = parser.parse_args()
    parts = args.only or (QUICK_PARTS if args.quick else PARTS)
    verdicts = Verdicts("reliability")
    if "inputs" in parts:
        bad = run_bad_inputs()
        print(
            f"bad inputs: {bad['clean']} of {bad['tried']} end in a clean error (exit 2-6, "
            "one line, no traceback)"
        )
        for line in bad["unclean"]:
            print(f"  not clean: {line}")
        verdicts.check(
            "bad inputs not ending in a clean error", figure=len(bad["unclean"]), target=0
        )
    if "answers" in parts:
        answers = run_hostile_answers(args.handicap)
        print(
            f"hostile answers (webhook and --api): {answers['clean']} of {answers['tried']} are "
            f"the handler's failure or a clean error; slowest deadline case "
            f"{answers['slowest']:.2f} s against a {answers['deadline']:g} s deadline "
            "(the servers trickle for 30 s)"
        )
        verdicts.check(
            "hostile answers not the handler's failure or a clean error",
            figure=answers["tried"] - answers["clean"],
            target=0,
        )
        verdicts.check(
            "slowest deadline case / its deadline",
            figure=answers["slowest"] / answers["deadline"],
            target=DEADLINE_TARGET,
        )
    if "load" in parts:
        seconds, slow = (3.0, 200) if args.quick else (LOAD_SECONDS, SLOW)
        seconds, slow = args.load_seconds or seconds, args.slow or slow
        load = run_load(seconds, slow, args.handicap)
        quiet, attacked = load["quiet"], load["attacked"]
        print(f"load, {CLIENTS} keep-alive clients, {seconds:g} s each, uvicorn via belt serve")
        for name, figures in (("quiet", quiet), (f"{slow} slowloris", attacked)):
            print(
                f"  {name:<16} {figures['rps']:7.0f} req/s  p50 {figures['p50']:6.2f} ms  "
                f"p99 {figures['p99']:7.2f} ms  failed {figures['failed']}"
            )
        print(
            f"  slow connections opened: {load['slow_opened']}; /healthz 200 in "
            f"{load['health_ok']} of {load['health_total']} probes; server stderr "
            f"{load['stderr_bytes']} bytes, {load['tracebacks']} tracebacks"
        )
        ratio = attacked["rps"] / quiet["rps"] if quiet["rps"] else 0.0
        verdicts.check(
            f"throughput under {slow} slowloris / quiet",
            figure=ratio,
            target=TARGET,
            higher_is_better=True,
        )
        verdicts.check(
            "requests failed, /healthz probes not answered 200, server tracebacks",
            figure=quiet["failed"]
            + attacked["failed"]
            + load["health_total"]
            - load["health_ok"]
            + load["tracebacks"],
            target=0,
        )
    if "engine" in parts:
        run_engine(verdicts)
    if "stranded" in parts:
        run_stranded(verdicts)
    if "growth" in parts:
        run_growth(verdicts)
    if "guard" in parts:
        run_guard(verdicts)
    verdicts.report()


if __name__ == "__main__":
    main()
