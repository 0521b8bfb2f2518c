"""Time per case of `belt check`, against the floor of a hand-written Hypothesis test of the same
handler.

For one handler, in the same process and in paired rounds (belt, floor, belt, floor, …), over
``--examples`` cases of agent.tool_call with the same seed:

- belt: ``belt check TARGET --event agent.tool_call --examples N --seed S`` (``run_check``), the
  whole call: its worker processes, the reachability probe of a webhook, Hypothesis's generation
  and every check;
- floor: what a user writes instead, a Hypothesis test over the same strategy
  (``belt.check.generate.payloads``) with the same seed, the same explicit examples first (the
  spec's sample and the path attacks belt sends), that calls the handler twice with each payload
  (belt delivers each case again, as a redelivery) and checks its answer; a webhook gets the same
  probe first and the same bytes in each POST, from one httpx client.

The cases per second of each are the whole call's; the ratio of belt's time per case to the
floor's is taken within each round, and its median is the verdict. Two handlers are measured:

- webhook: the benches' plain handler (``serving.start_handler``, its own process, port 0), the
  target's: belt check at most 1.5 times the floor per case;
- ``py:``: ``serving.guard``, the same decisions as a function, which belt calls in its
  supervised worker processes and the floor calls in-process (no target: the price of the
  workers' isolation, a figure to keep an eye on).

``--handicap S`` gives belt a handler whose every call takes as long as burning S CPU seconds
would (the webhook under ``/nap/S/``, the ``py:`` handler ``serving.napping``: the times per case
are wall-clock, so the handler sleeps most of it, which slows belt alike without taking a core);
the floor keeps the plain one. The tests run it with a few cases (``--examples 5 --rounds 1``).

    .venv/bin/python bench/check.py [--examples 300] [--rounds 3] [--quick] [--handicap S]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import HealthCheck, example, given, seed, settings
from serving import HANDICAP, HandlerServer, guard, handler, start_handler
from verdict import Verdicts, add_common_options

EVENT = "agent.tool_call"
TARGET = 1.5


def belt_round(target: str, examples: int, seeded: int) -> tuple[float, int]:
    """Seconds of one whole `belt check` of agent.tool_call, and its cases."""
    from belt.check.run import run_check

    started = time.perf_counter()
    report = run_check(target, events=[EVENT], examples=examples, seed=seeded)
    seconds = time.perf_counter() - started
    assert report.exit_code == 0, [r.to_json() for r in report.results if r.status == "fail"]
    return seconds, report.cases


def floor_round(
    call: Callable[[dict[str, Any]], None], examples: int, seeded: int
) -> tuple[float, int]:
    """Seconds of one hand-written Hypothesis test calling ``call`` twice per case, and its
    cases: the spec's sample and belt's first explicit examples, then the rest generated."""
    from belt.check.generate import attack_payloads, payloads, spec_sample
    from belt.check.run import BATCH

    explicit = [spec_sample(EVENT), *attack_payloads(EVENT)[: min(BATCH, examples) // 2]]
    cases = [0]

    def test(payload: dict[str, Any]) -> None:
        cases[0] += 1
        call(payload)
        call(payload)

    run = given(payloads(EVENT))(test)
    for payload in reversed(explicit):
        run = example(payload)(run)
    chosen = settings(
        max_examples=examples + 1 - len(explicit),
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    started = time.perf_counter()
    seed(seeded)(chosen(run))()
    return time.perf_counter() - started, cases[0]


def encoded(payload: dict[str, Any]) -> bytes:
    """The bytes belt sends for ``payload``."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def webhook_floor(url: str, examples: int, seeded: int) -> tuple[float, int]:
    """The floor of a webhook: the probe, then the Hypothesis test POSTing with one client."""
    from belt.check.generate import spec_sample

    headers = {"content-type": "application/json"}

    def call(payload: dict[str, Any]) -> None:
        reply = client.post(url, content=encoded(payload), headers=headers, timeout=30)
        assert reply.status_code == 200, reply.status_code
        assert isinstance(reply.json(), dict)

    started = time.perf_counter()
    with httpx.Client() as client:
        call(spec_sample(EVENT))
        _, cases = floor_round(call, examples, seeded)
    return time.perf_counter() - started, cases


def py_floor(examples: int, seeded: int) -> tuple[float, int]:
    """The floor of a ``py:`` handler: the Hypothesis test calling it in this process."""

    def call(payload: dict[str, Any]) -> None:
        answer = guard(payload)
        assert answer is None or answer["decision"] == "deny"

    return floor_round(call, examples, seeded)


def paired(
    belt: Callable[[int], tuple[float, int]],
    floor: Callable[[int], tuple[float, int]],
    rounds: int,
) -> tuple[list[float], list[float]]:
    """Milliseconds per case of belt and of the floor, one of each per round, in turn."""
    belts, floors = [], []
    for number in range(rounds):
        seconds, cases = belt(number)
        belts.append(seconds / cases * 1000)
        seconds, cases = floor(number)
        floors.append(seconds / cases * 1000)
    return belts, floors


def summary(name: str, belts: list[float], floors: list[float]) -> float:
    """Print one handler's figures; return the median of the ratios within a round."""
    ratios = [mine / theirs for mine, theirs in zip(belts, floors, strict=True)]
    belt_ms, floor_ms = statistics.median(belts), statistics.median(floors)
    print(f"{name}:")
    print(f"  belt check, per case:      {belt_ms:7.3f} ms ({1000 / belt_ms:6.0f} cases/s)")
    print(f"  hand-written Hypothesis:   {floor_ms:7.3f} ms ({1000 / floor_ms:6.0f} cases/s)")
    print(
        f"  ratio within a round:      median {statistics.median(ratios):.2f}, "
        f"from {min(ratios):.2f} to {max(ratios):.2f}"
    )
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--examples", type=int, help="cases per run, one more: the sample; default 300 (quick: 30)"
    )
    parser.add_argument("--rounds", type=int, help="paired rounds of each; default 3 (quick: 2)")
    add_common_options(parser)
    args = parser.parse_args()
    args.examples = args.examples or (30 if args.quick else 300)
    args.rounds = args.rounds or (2 if args.quick else 3)
    warm = min(10, args.examples)
    verdicts = Verdicts("check")
    os.environ[HANDICAP] = str(args.handicap)
    in_process = handler("napping" if args.handicap else "guard")
    server: HandlerServer = start_handler()
    with tempfile.TemporaryDirectory(prefix="belt-bench-check-") as home:
        os.environ["BELT_HOME"] = home
        try:
            target = server.hook_url(args.handicap, "nap")
            floor_url = server.hook_url()
            belt_round(target, warm, 0)  # warm the imports, the handler and its connection
            webhook_floor(floor_url, warm, 0)
            belt_round(in_process, warm, 0)
            print(f"cases per run: {args.examples + 1} of {EVENT} (each delivered twice)")
            print(f"{args.rounds} paired rounds (belt, floor, belt, floor, ...), seed = round")
            hooked = paired(
                lambda n: belt_round(target, args.examples, n),
                lambda n: webhook_floor(floor_url, args.examples, n),
                args.rounds,
            )
            local = paired(
                lambda n: belt_round(in_process, args.examples, n),
                lambda n: py_floor(args.examples, n),
                args.rounds,
            )
        finally:
            server.stop()
    webhook_ratio = summary("webhook (a plain handler in its own process)", *hooked)
    py_ratio = summary("py: handler (belt: in its worker processes; floor: in-process)", *local)
    print(f"  (no target for py:; its ratio {py_ratio:.2f} is the price of the workers)")
    print(f"target: belt check per case <= {TARGET:g} x the hand-written Hypothesis test (webhook)")
    verdicts.check(
        "belt check / Hypothesis test per case, webhook", figure=webhook_ratio, target=TARGET
    )
    verdicts.report()


if __name__ == "__main__":
    main()
