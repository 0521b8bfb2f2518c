"""Cases per second of `belt check`, against the floor of posting the same payloads directly.

Starts `belt serve` (every hook allowed) in its own process, then, in the same run and over the
same payloads:

- belt: `belt check URL --event agent.tool_call --examples N` (run_check), its time per case
  counted from the sending of a case to the end of its checks (the payload, its redelivery with
  the same webhook-id, and every check on both answers); Hypothesis's generation and engine
  around the cases are measured apart and reported beside it;
- floor: the very requests belt sent (every payload, as many times as belt sent it), posted back
  to back with the same HTTP client belt delivers with, and nothing else done with the answers.

belt generates a batch of payloads before sending them back to back (belt/check/run.py,
``Explorer.explore``): a round trip right after the client spent milliseconds generating costs
more than one straight after another.

Prints belt's time per case, the floor's, their ratio (target: at most 1.5), belt's own work per
case outside its HTTP posts (the part of a case that is not a round trip), the generation's time
per case, and the cases per second of the same check against an in-process `py:` handler (no
target: a figure to keep an eye on).

    .venv/bin/python bench/check.py [--examples 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from serving import free_port, start_server


def allow(payload: dict[str, Any]) -> None:
    """The in-process handler measured: it allows everything."""


IN_PROCESS = f"py:{Path(__file__).resolve()}:allow"


def belt_round(target: str, examples: int, seed: int) -> tuple[Any, list[bytes], float]:
    """One `belt check` of agent.tool_call: its report, every body it sent (in order) and the
    seconds spent in its HTTP posts."""
    from belt.check import run as check_run
    from belt.handlers.webhook import encode_payload

    sent: list[bytes] = []
    deliver = check_run.Sender.deliver
    post_body = check_run.post_body  # the sender's own name for it
    posting = [0.0]

    def recording(self: Any, subject: Any, payload: dict[str, Any], msg_id: str) -> Any:
        sent.append(encode_payload(payload))
        return deliver(self, subject, payload, msg_id)

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return post_body(*args, **kwargs)
        finally:
            posting[0] += time.perf_counter() - started

    check_run.Sender.deliver = recording  # type: ignore[method-assign]
    check_run.post_body = timed
    try:
        report = check_run.run_check(
            target, events=["agent.tool_call"], examples=examples, seed=seed
        )
    finally:
        check_run.Sender.deliver = deliver  # type: ignore[method-assign]
        check_run.post_body = post_body
    assert report.exit_code == 0, [r.to_json() for r in report.results if r.status == "fail"]
    return report, sent, posting[0]


def floor_round(url: str, bodies: list[bytes]) -> float:
    """Seconds to post ``bodies`` back to back with belt's delivery client."""
    from belt.handlers.webhook import webhook_client

    headers = {"content-type": "application/json"}
    with webhook_client() as client:
        started = time.perf_counter()
        for body in bodies:
            client.post(url, content=body, headers=headers, timeout=30).read()
        return time.perf_counter() - started


def main() -> None:
    """Measure ROUNDS rounds of each, interleaved; print medians and the ratio."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="belt-bench-check-"))
    port = free_port()
    server = start_server(home / "serve", port)
    url = f"http://127.0.0.1:{port}/hooks"
    try:
        belt_case, floor_case, generation, py_rate, own = [], [], [], [], []
        belt_round(url, 20, 0)  # warm the imports, the server and the connection
        for seed in range(args.rounds):
            report, bodies, posting = belt_round(url, args.examples, seed)
            # The reachability probe is one of the bodies and no case: the floor posts the
            # cases' bodies only.
            cases = bodies[1:]
            belt_case.append(report.case_seconds / report.cases)
            # The probe is posted outside the cases: its share is a rounding error here.
            own.append((report.case_seconds - posting) / report.cases)
            floor_case.append(floor_round(url, cases) / report.cases)
            generation.append((report.seconds - report.case_seconds) / report.cases)
            local, _, _ = belt_round(IN_PROCESS, args.examples, seed)
            py_rate.append(local.cases / local.case_seconds)
        belt_ms = statistics.median(belt_case) * 1000
        floor_ms = statistics.median(floor_case) * 1000
        ratio = belt_ms / floor_ms
        verdict = "within" if ratio <= 1.5 else "ABOVE"
        print(f"cases per round: {report.cases} (agent.tool_call, each delivered twice)")
        print(f"belt check, per case:        {belt_ms:7.3f} ms  ({1000 / belt_ms:7.0f} cases/s)")
        print(f"floor (same posts), per case: {floor_ms:6.3f} ms  ({1000 / floor_ms:7.0f} cases/s)")
        print(f"ratio {ratio:.2f} ({verdict} the target of 1.5)")
        own_ms = statistics.median(own) * 1000
        print(
            f"belt's own work per case, outside its HTTP posts: {own_ms:.3f} ms "
            f"({own_ms / belt_ms:.0%} of a case)"
        )
        gen_ms = statistics.median(generation) * 1000
        print(f"generation and engine, per case (left out above): {gen_ms:.3f} ms")
        print(f"against py:allow (no target): {statistics.median(py_rate):.0f} cases/s")
        print(f"(median of {args.rounds} rounds)")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
