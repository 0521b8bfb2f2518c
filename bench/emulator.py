"""Messages per second through the official Python SDK against `belt serve`, and the cost of one
webhook hook as a ratio to the same messages with no hooks.

Starts `belt serve` (the plain model: one short reply, no tool) in its own process, and a second
`belt serve` (every hook allowed) as the webhook handler. Each message is the SDK's own
`send_message` with a streaming callback, so it returns once the run has ended: the request that
appends the message, the run driven in the server, and the NDJSON stream that follows it. The
chats are short (a few messages each, as an application's are), one agent each; in alternating
rounds the agent has no hook, then one webhook hook on agent.turn_start (one delivery per
message). Prints messages per second for each, the hook's cost per message, its ratio to no
hook, and a raw httpx round trip to the webhook server for context. Target: the hooked
messages take at most 1.5 times the messages with no hook, end to end.

``--quick`` sends 3 chats of 3 messages a round (the tests: ``--chats 1 --messages 1 --rounds
1``); the test-only ``--handicap S`` adds S seconds to every hooked message inside this bench's
own timing.

    .venv/bin/python bench/emulator.py [--quick] [--chats 10] [--messages 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from serving import free_port, start_server
from verdict import Verdicts, add_common_options

TARGET = 1.5


def converse(
    base_url: str,
    hooks: list[dict[str, object]],
    chats: int,
    messages: int,
    handicap: float = 0.0,
) -> float:
    """Seconds for ``chats`` chats of ``messages`` messages each, through the SDK (``handicap``
    seconds more for each)."""
    from inferencesh import inference

    client = inference(api_key="bench", base_url=base_url)
    name = "hooked" if hooks else "bare"
    started = time.perf_counter()
    for _ in range(chats):
        agent = client.agent({"name": name, "hooks": hooks})
        for index in range(messages):
            seen: list[dict[str, object]] = []
            agent.send_message(f"message {index}", on_message=seen.append)
            assert any(m["role"] == "assistant" for m in seen), seen
            time.sleep(handicap)
    return time.perf_counter() - started


def run_seconds(home: Path) -> dict[str, float]:
    """The median time of a run in the server, from its creation to its end, by agent name."""
    from belt.records.runs import RUN
    from belt.store import Store
    from belt.store.clock import parse_timestamp

    store = Store(home / "store")
    kinds: dict[str, list[float]] = {}
    for run_id in store.list_ids(RUN):
        run = store.read(RUN, run_id)
        name = str(store.read("sim", str(run["sim_id"])).get("name"))
        took = parse_timestamp(run["updated_at"]) - parse_timestamp(run["created_at"])
        kinds.setdefault(name, []).append(took.total_seconds())
    return {name: statistics.median(times) for name, times in kinds.items()}


def hooks_answered(home: Path) -> int:
    """How many hook requests the webhook server answered (its journal)."""
    journal = home / "store" / "logs" / "journal" / "serve.jsonl"
    return sum(1 for line in journal.read_text().splitlines() if '"kind"' in line)


def raw_round_trip(url: str, calls: int) -> float:
    payload = {
        "event": "agent.turn_start",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "agent_id": "ag_bench",
        "chat_id": "ch_bench",
        "run_id": "ar_bench",
        "turn_count": 1,
    }
    body = json.dumps(payload).encode()
    times = []
    with httpx.Client() as client:
        for _ in range(calls):
            started = time.perf_counter()
            reply = client.post(url, content=body, headers={"content-type": "application/json"})
            times.append(time.perf_counter() - started)
            assert reply.status_code == 200
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=None, help="default 10 (quick: 3)")
    parser.add_argument("--messages", type=int, default=None, help="per chat; default 5 (quick: 3)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each kind")
    add_common_options(parser)
    args = parser.parse_args()
    args.chats = args.chats or (3 if args.quick else 10)
    args.messages = args.messages or (3 if args.quick else 5)
    count = args.chats * args.messages
    warm = min(2, args.chats), min(2, args.messages)
    # The state lives beside the repository, as it would in a user's data directory.
    with tempfile.TemporaryDirectory(prefix=".bench-", dir=Path(__file__).parent) as tmp:
        home = Path(tmp)
        port, hook_port = free_port(), free_port()
        server = start_server(home / "serve", port, "--sweep-interval", "0")
        handler = start_server(home / "hooks", hook_port, "--sweep-interval", "0")
        base_url = f"http://127.0.0.1:{port}"
        hook_url = f"http://127.0.0.1:{hook_port}/hooks/bench"
        hooked = [{"event": "agent.turn_start", "type": "webhook", "handler": hook_url}]
        try:
            converse(base_url, [], *warm)  # warm both servers up
            converse(base_url, hooked, *warm)
            bares, hooks, raws = [], [], []
            # Alternate the kinds so that a slow patch of the shared machine hits both.
            for _ in range(args.rounds):
                bares.append(converse(base_url, [], args.chats, args.messages))
                hooks.append(converse(base_url, hooked, args.chats, args.messages, args.handicap))
                raws.append(raw_round_trip(hook_url, 200))
        finally:
            for process in (server, handler):
                process.terminate()
                process.wait(10)
        runs = run_seconds(home / "serve")
        answered = hooks_answered(home / "hooks") - 200 * args.rounds  # less the raw trips
    assert answered == count * args.rounds + warm[0] * warm[1], answered  # + the warm-up
    bare, hooked_time, raw = (statistics.median(x) for x in (bares, hooks, raws))
    per_hook = (hooked_time - bare) / count
    print(f"messages:                  {args.chats} chats x {args.messages}, {args.rounds} rounds")
    each = bare / count * 1e3
    print(f"no hooks:                  {count / bare:6.1f} messages/s  {each:.2f} ms each")
    print(
        f"one webhook hook:          {count / hooked_time:6.1f} messages/s  "
        f"{hooked_time / count * 1e3:.2f} ms each"
    )
    print(f"hook cost per message:     {per_hook * 1e3:.2f} ms")
    print(f"ratio hooked / no hooks:   {hooked_time / bare:.2f}")
    print(f"raw webhook round trip:    {raw * 1e3:.2f} ms (median, httpx, back to back)")
    print(
        f"a run in the server:       {runs['bare'] * 1e3:.2f} ms with no hook, "
        f"{runs['hooked'] * 1e3:.2f} ms hooked (median, created to ended)"
    )
    print(f"ratio of runs hooked / no hooks: {runs['hooked'] / runs['bare']:.2f}")
    verdicts = Verdicts("emulator")
    verdicts.check(
        "messages with one webhook hook / with none (wall)",
        figure=hooked_time / bare,
        target=TARGET,
    )
    verdicts.report()


if __name__ == "__main__":
    main()
