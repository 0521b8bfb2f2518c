"""Cost of one sync webhook hook in the simulator, against a raw httpx round trip.

Starts `belt serve` (every hook allowed) in its own process, then in the same run measures:

- raw: the median of N httpx POSTs of an agent.tool_call payload to its /hooks route, back to
  back, and (for context) the same after 1 ms idle, which is what a round trip costs when the
  client did other work in between and both processes went idle, as in a simulation;
- the simulator on a scenario of N tool calls, once with one sync webhook on agent.tool_call
  and once with no hooks; the per-hook cost is the difference divided by N;
- the same with the webhook async: the run's own loop (it never waits for a delivery, but the
  deliveries run beside it, in its process and on the machine's cores) and the whole run, async
  deliveries included (the simulation waits for them at its end), each against the run with no
  hooks, with the sync hook's ratio beside them;
- the same scenario with an in-process handler (``py:bench/dispatch.py:allow``, a function that
  allows everything) in place of the webhook.

Prints the per-hook cost, its ratio to the raw round trip (target: at most 1.5), the CPU time
a hook costs this process beside the client CPU of a raw round trip (the wall-clock figures
also hold the time a process waits for a CPU, which on a loaded machine is most of a hook), the
events per second the simulator fires with no hooks (on the durable store, and on the store in
memory of ``belt sim run --ephemeral``), and the per-hook cost of the ``py:`` handler divided
by the webhook's (target: at most 0.2).

    .venv/bin/python bench/dispatch.py [--calls 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from serving import free_port, start_server


def allow(payload: dict[str, object]) -> None:
    """The in-process handler measured: it allows everything, as `belt serve` does."""


IN_PROCESS = f"py:{Path(__file__).resolve()}:allow"


def scenario(path: Path, calls: int, url: str | None, *, background: bool = False) -> Path:
    hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": url}] if url else []
    if background:
        hooks = [{**hook, "async": True} for hook in hooks]
    model = [
        {
            "say": "step",
            "tool_calls": [{"name": "read_file", "arguments": {"n": i}, "result": "x"}],
        }
        for i in range(calls)
    ]
    model.append({"say": "done"})
    path.write_text(
        json.dumps({"agent": {"hooks": hooks}, "turns": [{"user": "go", "model": model}]})
    )
    return path


def run_sim(path: Path, *, ephemeral: bool = False) -> tuple[float, int, float, float]:
    """Seconds for the whole simulation, hooks recorded, seconds of the run's own loop (from
    its start to its end, before the simulation waits for async hooks), and CPU seconds of this
    process over the simulation; with ``ephemeral``, on the store in memory (``belt sim run
    --ephemeral``)."""
    from belt.engine.api import run_scenario
    from belt.store.clock import parse_timestamp

    started = time.perf_counter()
    cpu = time.process_time()
    report, _ = run_scenario(scenario=path, ephemeral=ephemeral)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    run = report["runs"][0]
    assert run["state"] == "completed", run
    loop = parse_timestamp(run["updated_at"]) - parse_timestamp(run["created_at"])
    return elapsed, len(report["hook_executions"]), loop.total_seconds(), cpu


def raw_round_trips(url: str, calls: int, *, idle: float = 0.0) -> float:
    """The median seconds of a raw round trip (``raw_round_trips_cpu`` gives its CPU too)."""
    return raw_round_trips_cpu(url, calls, idle=idle)[0]


def raw_round_trips_cpu(url: str, calls: int, *, idle: float = 0.0) -> tuple[float, float]:
    """The median seconds of a raw round trip, and the mean CPU seconds of this process
    (the client's side) per round trip."""
    payload = {
        "event": "agent.tool_call",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "agent_id": "ag_bench",
        "chat_id": "ch_bench",
        "run_id": "ar_bench",
        "turn_count": 1,
        "data": {"tool": "read_file", "arguments": {"n": 1}},
    }
    body = json.dumps(payload).encode()
    times = []
    cpu = 0.0
    with httpx.Client() as client:
        for _ in range(calls):
            if idle:
                time.sleep(idle)
            started = time.perf_counter()
            before = time.process_time()
            reply = client.post(url, content=body, headers={"content-type": "application/json"})
            reply.read()
            cpu += time.process_time() - before
            times.append(time.perf_counter() - started)
            assert reply.status_code == 200
    return statistics.median(times), cpu / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each kind")
    args = parser.parse_args()
    # The state lives beside the repository, as it would in a user's data directory; the
    # system temporary directory can be far slower at creating files on some machines.
    with tempfile.TemporaryDirectory(prefix=".bench-", dir=Path(__file__).parent) as tmp:
        home = Path(tmp)
        os.environ["BELT_HOME"] = str(home / "sim")
        port = free_port()
        server = start_server(home / "serve", port)
        url = f"http://127.0.0.1:{port}/hooks"
        try:
            raw_round_trips(url, 200)  # warm up the server
            bare_path = scenario(home / "bare.json", args.calls, None)
            hooked_path = scenario(home / "hooked.json", args.calls, url)
            async_path = scenario(home / "async.json", args.calls, url, background=True)
            py_path = scenario(home / "py.json", args.calls, IN_PROCESS)
            raws, idles, bares, memories, hookeds, asyncs, pys = (
                [],
                [],
                [],
                [],
                [],
                [],
                [],
            )
            bare_loops, async_loops = [], []
            raw_cpus, bare_cpus, hooked_cpus = [], [], []
            # Alternate the kinds so that a slow patch of the shared machine hits all of them.
            for _ in range(args.rounds):
                raw, raw_cpu = raw_round_trips_cpu(url, args.calls)
                raws.append(raw)
                raw_cpus.append(raw_cpu)
                idles.append(raw_round_trips(url, args.calls // 4, idle=0.001))
                elapsed, _, loop, cpu = run_sim(bare_path)
                bares.append(elapsed)
                bare_loops.append(loop)
                bare_cpus.append(cpu)
                memories.append(run_sim(bare_path, ephemeral=True)[0])
                elapsed, executed, _, cpu = run_sim(hooked_path)
                hookeds.append(elapsed)
                hooked_cpus.append(cpu)
                assert executed == args.calls
                elapsed, executed, loop, _ = run_sim(async_path)
                asyncs.append(elapsed)
                async_loops.append(loop)
                assert executed == args.calls
                elapsed, executed, _, _ = run_sim(py_path)
                pys.append(elapsed)
                assert executed == args.calls
            raw = statistics.median(raws)
            idle = statistics.median(idles)
            bare = statistics.median(bares)
            memory = statistics.median(memories)
            hooked = statistics.median(hookeds)
            background = statistics.median(asyncs)
            bare_loop = statistics.median(bare_loops)
            async_loop = statistics.median(async_loops)
            in_process = statistics.median(pys)
            raw_cpu = statistics.median(raw_cpus)
            cpu_per_hook = (
                statistics.median(hooked_cpus) - statistics.median(bare_cpus)
            ) / args.calls
        finally:
            server.terminate()
            server.wait(10)
    per_hook = (hooked - bare) / args.calls
    per_py_hook = (in_process - bare) / args.calls
    events = 3 * args.calls + 4  # turn_start, turn_complete, tool_call per step; start/complete
    print(f"tool calls:                 {args.calls} per run, {args.rounds} rounds (medians)")
    print(f"raw httpx round trip:       {raw * 1e3:.3f} ms (median, back to back)")
    print(f"  the same, 1 ms idle before: {idle * 1e3:.3f} ms (both processes had gone idle)")
    print(f"sim per tool call, no hook: {bare / args.calls * 1e3:.3f} ms")
    print(f"sim per tool call, hooked:  {hooked / args.calls * 1e3:.3f} ms")
    print(f"per-hook cost:              {per_hook * 1e3:.3f} ms")
    print(f"ratio per-hook / raw:       {per_hook / raw:.2f}  (target <= 1.5)")
    print(f"ratio per-hook / idle raw:  {per_hook / idle:.2f}")
    print(f"CPU per hook, this process: {cpu_per_hook * 1e3:.3f} ms against {raw_cpu * 1e3:.3f} ms")
    print("                            of a raw round trip's client (under load the wall time of")
    print("                            a hook also waits for the loaded CPUs; this does not)")
    print(f"events/s with no hooks:     {events / bare:,.0f}")
    print(f"  the same, in memory:      {events / memory:,.0f} (belt sim run --ephemeral)")
    print(f"sim per tool call, async:   {background / args.calls * 1e3:.3f} ms (async deliveries")
    print("                            included: the simulation waits for them at its end)")
    print(f"ratio sync hooked / no hook: {hooked / bare:.2f}")
    print(f"ratio async loop / no hook: {async_loop / bare_loop:.2f}  (the run's own loop, start")
    print("                            to end: it never waits for a delivery, but shares the")
    print("                            process and the machine's cores with those running)")
    print(f"ratio async whole / no hook: {background / bare:.2f}")
    print(f"per-hook cost, py: handler: {per_py_hook * 1e3:.3f} ms")
    print(f"ratio py: / webhook:        {per_py_hook / per_hook:.2f}  (target <= 0.2)")


if __name__ == "__main__":
    main()
