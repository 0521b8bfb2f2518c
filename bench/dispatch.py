"""CPU of one sync hook in the simulator: a ``py:`` hook against a webhook hook, and a webhook
hook against the same call made with a plain httpx client.

Starts this bench's plain webhook handler (``serving.start_handler``: its own process, port 0,
it allows every call here) and counts CPU seconds on both sides of every call: this process's
(``time.process_time``: the simulation, its client and the thread a ``py:`` hook runs in) and
the handler's own (it answers ``GET /cpu``). In paired rounds (each kind once per round, in
turn), on a scenario of ``--calls`` tool calls, with the state on disk (the durable store,
beside the repository) and in memory (``belt sim run --ephemeral``):

- no hook, one sync webhook hook on agent.tool_call, and one ``py:`` hook (``serving.guard``,
  which allows these calls, called in the simulation's process). A hook's CPU is the CPU of
  firing the run's events (``PlatformLoop.fire``: the payload, the delivery, the hook's records
  and the checks around them) with the hook, less the same without it (a small baseline,
  printed), plus the handler's, per call: not a difference between whole runs (about
  0.5 ms of CPU per tool call in memory and 2 to 5 ms on disk, whose noise on a loaded machine
  is larger than a ``py:`` hook). The whole runs' difference is printed beside it: it also holds
  the report's reading of the hook's records, and that noise;
- the floor: the payloads the hook is given in the same scenario (recorded once, before the
  rounds), POSTed to the same handler with one plain httpx client in this process, one after
  another (client and server CPU per call).

Each ratio is taken within a round; its median is the verdict, its range over the rounds is
printed beside it. Targets, on either store: a ``py:`` hook's CPU at most 0.1 times a webhook
hook's, and a webhook hook's CPU at most 1.5 times the plain httpx call's. The events per CPU
second of a run with no hook are printed too (no target).

``--handicap S`` makes belt's hooks burn S CPU seconds per call (the webhook under ``/spin/S/``,
the ``py:`` hook ``serving.slowed``); the floor keeps the plain handler. The tests run it with a
few calls (``--calls 5 --rounds 1``).

``--otel`` measures hook traces instead (docs/tracing.md): the same webhook hook with tracing off
and on, state in memory, each in a worker process of its own (this script with ``--worker``),
in paired rounds (off, on, off, on, …). The traced worker exports every span over OTLP/HTTP to a
real receiver in a third process (``tests/otlp_receiver.py``), through the SDK's batching
processor as ``belt sim`` does; its CPU per run includes flushing the run's spans at its end (the
exporter's thread and its encoding). A hook's CPU is its run's (the worker's and the handler's)
less the run with no hook, with tracing in the same state; the target: at most 1.2 times with
tracing on what it is off. The untraced worker must not have imported any ``opentelemetry``
module (a target of 0). ``--handicap S`` there slows the traced worker's hook only.

    .venv/bin/python bench/dispatch.py [--calls 500] [--rounds 5] [--quick] [--handicap S]
    .venv/bin/python bench/dispatch.py --otel [--calls 500] [--rounds 5] [--quick] [--handicap S]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from serving import HANDICAP, RECORD, HandlerServer, handler, read_record, start_handler
from verdict import Verdicts, add_common_options

PY_TARGET = 0.1
WEBHOOK_TARGET = 1.5
OTEL_TARGET = 1.2
RECEIVER = Path(__file__).resolve().parent.parent / "tests" / "otlp_receiver.py"


def scenario(path: Path, calls: int, handler: str | None) -> Path:
    """A scenario of ``calls`` tool calls, each in a model turn of its own; with ``handler``,
    one sync hook on agent.tool_call."""
    hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": handler}] if handler else []
    model: list[dict[str, Any]] = [
        {
            "say": "step",
            "tool_calls": [{"name": "read_file", "arguments": {"step": i}, "result": "x"}],
        }
        for i in range(calls)
    ]
    model.append({"say": "done"})
    path.write_text(
        json.dumps({"agent": {"hooks": hooks}, "turns": [{"user": "go", "model": model}]})
    )
    return path


@contextmanager
def firing(clock: Callable[[], float] = time.process_time) -> Iterator[list[float]]:
    """Count the CPU seconds this process (or, by ``clock``, this thread) spends firing events
    (``PlatformLoop.fire``: the payload, each hook's delivery and records, the run's checks
    around them) into the list's one item."""
    from belt.dialects.platform.agent_loop import PlatformLoop

    spent = [0.0]
    fire = PlatformLoop.fire

    def counted(self: PlatformLoop, *args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return fire(self, *args, **kwargs)
        finally:
            spent[0] += clock() - started

    PlatformLoop.fire = counted  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        PlatformLoop.fire = fire  # type: ignore[method-assign]


def run_sim(path: Path, server: HandlerServer, *, ephemeral: bool) -> tuple[float, float]:
    """CPU seconds of one simulation of ``path``: the whole run's, and its events' firing;
    this process's and the handler's in both."""
    from belt.engine.entrypoints import run_scenario

    served = server.cpu_seconds()
    cpu = time.process_time()
    with firing() as fired:
        report, _ = run_scenario(scenario=path, ephemeral=ephemeral)
    cpu = time.process_time() - cpu
    run = report["runs"][0]
    assert run["state"] == "completed", run
    served = server.cpu_seconds() - served
    return cpu + served, fired[0] + served


def plain_calls(server: HandlerServer, payloads: list[dict[str, Any]]) -> float:
    """CPU seconds of POSTing each payload with one plain httpx client, client and server."""
    headers = {"content-type": "application/json"}
    bodies = [json.dumps(p, ensure_ascii=False, separators=(",", ":")).encode() for p in payloads]
    url = server.hook_url()
    served = server.cpu_seconds()
    cpu = time.process_time()
    with httpx.Client() as client:
        for body in bodies:
            reply = client.post(url, content=body, headers=headers)
            assert reply.status_code == 200 and reply.json() == {}
    return time.process_time() - cpu + server.cpu_seconds() - served


def spread(values: list[float]) -> str:
    """The median of ``values`` and their range."""
    return f"{statistics.median(values):.3f} (rounds: {min(values):.3f} to {max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, help="tool calls per run; default 500 (quick: 20)")
    parser.add_argument("--rounds", type=int, help="paired rounds of each; default 5 (quick: 2)")
    parser.add_argument(
        "--otel", action="store_true", help="a webhook hook with tracing on against off"
    )
    parser.add_argument("--worker", choices=("on", "off"), help=argparse.SUPPRESS)
    add_common_options(parser)
    args = parser.parse_args()
    if args.worker:
        worker(traced=args.worker == "on")
        return
    args.calls = args.calls or (20 if args.quick else 500)
    args.rounds = args.rounds or (2 if args.quick else 5)
    if args.otel:
        traces(args.calls, args.rounds, args.handicap)
        return
    os.environ[HANDICAP] = str(args.handicap)
    verdicts = Verdicts("dispatch")
    calls = args.calls
    stores = {"on disk": False, "in memory": True}
    # The state lives beside the repository, as it would in a user's data directory; the
    # system temporary directory can be far slower at creating files on some machines.
    with (
        start_handler() as server,
        tempfile.TemporaryDirectory(prefix=".bench-", dir=Path(__file__).parent) as tmp,
    ):
        home = Path(tmp)
        os.environ["BELT_HOME"] = str(home / "state")
        paths = {
            "bare": scenario(home / "bare.json", calls, None),
            "webhook": scenario(home / "webhook.json", calls, server.hook_url(args.handicap)),
            "py": scenario(
                home / "py.json", calls, handler("slowed" if args.handicap else "guard")
            ),
        }
        # Warm up (imports, the handler, the disk caches) and record the payloads a hook is
        # given, which the floor sends.
        record = home / "payloads.jsonl"
        os.environ[RECORD] = str(record)
        run_sim(scenario(home / "record.json", calls, handler("recorded")), server, ephemeral=True)
        payloads = read_record(record)
        assert len(payloads) == calls, len(payloads)
        for path in paths.values():
            run_sim(path, server, ephemeral=True)
        plain_calls(server, payloads[:50])
        whole: dict[str, list[float]] = {}
        fired: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for store, ephemeral in stores.items():
                for kind, path in paths.items():
                    run, fire = run_sim(path, server, ephemeral=ephemeral)
                    whole.setdefault(f"{kind} {store}", []).append(run / calls * 1000)
                    fired.setdefault(f"{kind} {store}", []).append(fire / calls * 1000)
                plain = plain_calls(server, payloads) / calls * 1000
                fired.setdefault(f"plain {store}", []).append(plain)
    print(f"tool calls per run: {calls}, {args.rounds} paired rounds; CPU per tool call in ms,")
    print("this process's and the webhook handler's (medians, and their range over the rounds)")
    events = 3 * calls + 4  # turn_start, turn_complete, tool_call per step; start, complete
    for store in stores:
        hook = {kind: less(fired, kind, store) for kind in ("webhook", "py")}
        py_ratios = [py / web for py, web in zip(hook["py"], hook["webhook"], strict=True)]
        plain = fired[f"plain {store}"]
        web_ratios = [web / floor for web, floor in zip(hook["webhook"], plain, strict=True)]
        bare = statistics.median(whole[f"bare {store}"])
        print(f"state {store}{' (--ephemeral)' if stores[store] else ''}:")
        rate = events / calls / bare * 1000
        print(f"  a tool call, no hook:       {bare:.3f} ({rate:,.0f} events per CPU second)")
        print(f"  its events' firing:         {statistics.median(fired[f'bare {store}']):.3f}")
        print(f"  a webhook hook:             {spread(hook['webhook'])}")
        print(f"  a py: hook:                 {spread(hook['py'])}")
        print(f"  a plain httpx call:         {spread(plain)}")
        print(f"  py: hook / webhook hook:    {spread(py_ratios)}  (target <= {PY_TARGET:g})")
        print(f"  webhook hook / plain httpx: {spread(web_ratios)}  (target <= {WEBHOOK_TARGET:g})")
        print(
            f"  whole runs less no hook's:  webhook {spread(less(whole, 'webhook', store))}, "
            f"py: {spread(less(whole, 'py', store))}"
        )
        verdicts.check(
            f"py: hook / webhook hook, CPU, {store}",
            figure=statistics.median(py_ratios),
            target=PY_TARGET,
        )
        verdicts.check(
            f"webhook hook / plain httpx call, CPU, {store}",
            figure=statistics.median(web_ratios),
            target=WEBHOOK_TARGET,
        )
    verdicts.report()


def less(cpu: dict[str, list[float]], kind: str, store: str) -> list[float]:
    """Per round, the CPU of ``kind``'s run on ``store`` (or with tracing ``on`` or ``off``)
    less that of the run with no hook."""
    bare = cpu[f"bare {store}"]
    return [mine - base for mine, base in zip(cpu[f"{kind} {store}"], bare, strict=True)]


# -- --otel: tracing on against off -----------------------------------------------------------


def worker(*, traced: bool) -> None:
    """A worker of ``--otel``: runs the scenario each line of stdin names (``{"path"}``), state
    in memory, and answers a line of its CPU seconds: ``fired``, what the run's events cost
    (this thread's CPU firing them, as ``firing`` counts it, and all the CPU of the process's
    other threads over the run: the span exporter's), and ``whole``, the whole run's; each with
    the run's spans flushed at its end (by this thread and the exporter's). At end of input,
    the OpenTelemetry modules it imported."""
    from belt.engine.entrypoints import run_scenario
    from belt.outgoing import tracing

    if traced and not tracing.start():
        raise SystemExit("--otel: tracing did not start (is belt[otel] installed?)")
    for line in sys.stdin:
        asked = json.loads(line)
        whole, mine = time.process_time(), time.thread_time()
        with firing(time.thread_time) as fired:
            report, _ = run_scenario(scenario=Path(asked["path"]), ephemeral=True)
        others = time.process_time() - whole - (time.thread_time() - mine)
        flushed = time.process_time()
        if traced:
            tracing.shutdown()  # every span of the run exported before the count ends
        flushed = time.process_time() - flushed
        whole = time.process_time() - whole
        if traced:
            tracing.start()
        assert report["runs"][0]["state"] == "completed", report["runs"][0]
        print(json.dumps({"fired": fired[0] + others + flushed, "whole": whole}), flush=True)
    print(json.dumps({"imported": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))


class Worker:
    """A running ``worker`` process."""

    def __init__(self, env: dict[str, str], traced: bool) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", "on" if traced else "off"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, path: Path, server: HandlerServer) -> tuple[float, float]:
        """CPU seconds of a run of ``path``, the worker's and the handler's: the whole run's,
        and its events' firing (``worker``)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        served = server.cpu_seconds()
        self.process.stdin.write(json.dumps({"path": str(path)}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"--otel: a worker ended (exit {self.process.wait()})")
        served = server.cpu_seconds() - served
        spent = json.loads(line)
        return spent["whole"] + served, spent["fired"] + served

    def imported(self) -> list[str]:
        """End the worker: the OpenTelemetry modules it imported."""
        out, _ = self.process.communicate(timeout=60)
        return list(json.loads(out.splitlines()[-1])["imported"])


def start_receiver() -> tuple[subprocess.Popen[str], str]:
    """The OTLP/HTTP receiver in a process of its own, once it listens: it and its URL."""
    process = subprocess.Popen([sys.executable, str(RECEIVER)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    found = re.search(r"listening on (http://\S+)", process.stdout.readline())
    if not found:
        process.kill()
        raise SystemExit("--otel: the OTLP receiver did not start")
    return process, found.group(1)


def traces(calls: int, rounds: int, handicap: float) -> None:
    """``--otel``: a webhook hook's CPU with tracing on against off, in paired rounds."""
    verdicts = Verdicts("dispatch")
    receiver, url = start_receiver()
    try:
        with (
            start_handler() as server,
            tempfile.TemporaryDirectory(prefix=".bench-", dir=Path(__file__).parent) as tmp,
        ):
            home = Path(tmp)
            plain = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
            plain["BELT_HOME"] = str(home / "state")
            workers = {
                "off": Worker(plain, traced=False),
                "on": Worker({**plain, "OTEL_EXPORTER_OTLP_ENDPOINT": url}, traced=True),
            }
            bare = scenario(home / "bare.json", calls, None)
            paths = {
                "bare off": bare,
                "bare on": bare,
                "webhook off": scenario(home / "off.json", calls, server.hook_url()),
                "webhook on": scenario(home / "on.json", calls, server.hook_url(handicap)),
            }
            for key, path in paths.items():  # warm up
                workers[key.split()[1]].run(path, server)
            whole: dict[str, list[float]] = {key: [] for key in paths}
            fired: dict[str, list[float]] = {key: [] for key in paths}
            for _ in range(rounds):  # off, on, off, on: each kind in turn
                for kind in ("bare", "webhook"):
                    for mode, running in workers.items():
                        key = f"{kind} {mode}"
                        run, fire = running.run(paths[key], server)
                        whole[key].append(run / calls * 1000)
                        fired[key].append(fire / calls * 1000)
            imported = workers["off"].imported()
            workers["on"].imported()
        names = [span["name"] for span in httpx.get(f"{url}/spans", timeout=60).json()]
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    hook = {mode: less(fired, "webhook", mode) for mode in workers}
    ratios = [on / off for on, off in zip(hook["on"], hook["off"], strict=True)]
    runs = len(paths) + rounds * len(paths)
    print(f"tool calls per run: {calls}, {rounds} paired rounds, state in memory; CPU per tool")
    print("call in ms, the worker's and the webhook handler's (medians, and their range)")
    for mode in workers:
        print(f"tracing {mode}:")
        print(f"  a tool call, no hook:       {spread(whole[f'bare {mode}'])}")
        print(f"  its events' firing:         {spread(fired[f'bare {mode}'])}")
        print(f"  a webhook hook:             {spread(hook[mode])}")
        print(f"  whole runs less no hook's:  {spread(less(whole, 'webhook', mode))}")
    hooks = names.count("belt.hook agent.tool_call")
    print(f"spans received: {len(names)} from {runs // 2} traced runs, {hooks} of them hooks")
    if hooks != calls * (rounds + 1):  # the traced webhook runs: the warm-up and one a round
        raise SystemExit(f"--otel: {calls * (rounds + 1) - hooks} hook spans were not received")
    print(f"OpenTelemetry modules imported with tracing off: {', '.join(imported) or 'none'}")
    print(f"webhook hook, on / off: {spread(ratios)}  (target <= {OTEL_TARGET:g})")
    verdicts.check(
        "webhook hook CPU, tracing on / off", figure=statistics.median(ratios), target=OTEL_TARGET
    )
    verdicts.check("OpenTelemetry modules imported, tracing off", figure=len(imported), target=0)
    verdicts.report()


if __name__ == "__main__":
    main()
