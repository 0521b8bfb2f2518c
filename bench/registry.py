"""Cost of registry search against the registry's size: 10,000 entries against 100.

Fills two stores, one of SMALL and one of LARGE entries, through ``save_candidates`` (without
fsync, so the fill is quick). Entry texts are drawn from one vocabulary of invented
words with a Zipf-like frequency (a few words are in many entries, most in few), like a team's
notes on one subject; prompts are drawn the same way. Then, alternating between the stores,
times ``search`` (the 10 best) and ``suggest`` (at most 3, with the minimum relevance) for the
same prompts, and prints each median and the ratio of the median at LARGE to the median at
SMALL (target: at most 3).

Then the ranking at LARGE entries, in the shape a large registry once defeated: 60 entries
with one word of a prompt in their name (BM25 ranks them first), the rest sharing one other word
each, and one entry holding every term of the prompt. It prints whether ``search`` lists that
entry first and ``suggest`` offers it first (both must: BM25 alone ranks it 61st), and what
that suggestion costs.

Then the cost of a ``belt:suggest`` hook in the simulator: the same scenario of ``--turns``
turns run with the hook (against a registry of SMALL entries of the agent's owner, then one of
LARGE) and with no hook, in ``--rounds`` alternating rounds, each in a fresh state directory in
memory (``/dev/shm`` where it exists, as ``bench/scale.py`` does, so the disk's write-back of one
round does not slow the next); the difference per turn between the fastest round of each is the
hook's cost, reported against the cost of an event that fires no hook (the run with no hook, per
event it fires). Target: at most 2.5. The same ratio is printed from the process's CPU time too,
which the other work of a shared machine disturbs less than the wall clock.

    .venv/bin/python bench/registry.py [--small 100] [--large 10000] [--queries 300] [--turns 100]
                                       [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from itertools import accumulate
from pathlib import Path

from scale import default_dir

from belt.records.registry import (
    KINDS,
    Candidate,
    Origin,
    make_candidate,
    save_candidates,
    search,
    suggest,
)
from belt.store import Store

OWNER = "bench"
VOCABULARY = 20_000
FIRST_RANK = 150
SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]


class Words:
    """Invented words, drawn with Zipf's frequency (the word of rank r has weight 1/r) from rank
    ``FIRST_RANK`` on: in real text the commonest words are the stopwords queries leave out."""

    def __init__(self, chance: random.Random) -> None:
        words: dict[str, None] = {}
        while len(words) < VOCABULARY:
            words["".join(chance.choices(SYLLABLES, k=chance.randint(2, 4)))] = None
        self.words = list(words)
        ranks = range(FIRST_RANK, FIRST_RANK + VOCABULARY)
        self.weights = list(accumulate(1 / rank for rank in ranks))
        self.chance = chance

    def draw(self, count: int) -> list[str]:
        """``count`` words."""
        return self.chance.choices(self.words, cum_weights=self.weights, k=count)


def entries(count: int, words: Words) -> list[tuple[Candidate, Origin]]:
    """``count`` entries of 20 to 60 words, as a person added them."""
    chance = words.chance
    origin = Origin.person("bench")
    return [
        (
            make_candidate(
                name=f"{' '.join(words.draw(3))} {number}",
                kind=chance.choice(KINDS),
                tags=words.draw(2),
                text=" ".join(words.draw(chance.randint(20, 60))),
            ),
            origin,
        )
        for number in range(count)
    ]


def fill(root: Path, count: int, words: Words) -> Store:
    """A store whose owner has ``count`` entries of 20 to 60 words."""
    store = Store(root, fsync=False)
    save_candidates(store, owner=OWNER, candidates=entries(count, words))
    return store


def ranking(root: Path, size: int, queries: int) -> None:
    """The reported shape at ``size`` entries: is the entry holding every term offered first?"""
    store = Store(root, fsync=False)
    common = ["rotate", "keys", "nightly", "backup"]
    filler = " ".join(f"lorem{number}" for number in range(100))
    shaped = [(f"Filler {n}", f"{filler} {common[n % 4]}") for n in range(size - 61)]
    shaped += [(f"Vault note {n}", f"Short note {n}.") for n in range(60)]
    target = (
        "Key rotation runbook",
        "When the nightly backup has finished, rotate the vault keys.",
    )
    shaped.append((target[0], f"{target[1]} {filler * 3}"))
    origin = Origin.person("bench")
    saved = save_candidates(
        store,
        owner=OWNER,
        candidates=[
            (make_candidate(name=name, kind="rule", text=text), origin) for name, text in shaped
        ],
    )
    target_id = saved[-1].id
    prompt = "Rotate the vault keys after the nightly backup"
    listed = search(store, owner=OWNER, query=prompt, limit=1)
    listed_first = bool(listed) and listed[0].id == target_id
    times = []
    for _ in range(queries):
        started = time.perf_counter()
        found = suggest(store, owner=OWNER, prompt=prompt)
        times.append(time.perf_counter() - started)
    first = found[0].id == target_id if found else False
    print(f"ranking at {size} entries (60 share one name word, one holds every term):")
    print(f"  search lists it first: {'yes' if listed_first else 'NO'}")
    print(f"  suggest offers it first: {'yes' if first else 'NO'} ({len(found)} suggested)")
    print(f"  suggest: {statistics.median(times) * 1e6:.0f}µs (median of {queries})")


def simulated(words: Words, size: int, turns: int, rounds: int) -> None:
    """A belt:suggest hook's cost per turn, against an event that fires no hook."""
    from belt.engine.api import run_scenario
    from belt.store import open_store

    prompts = [" ".join(words.draw(words.chance.randint(5, 12))) for _ in range(turns)]
    suggest_hook = {"event": "agent.turn_start", "type": "builtin", "handler": "belt:suggest"}
    timings: dict[str, list[float]] = {"hook": [], "bare": []}
    cpu: dict[str, list[float]] = {"hook": [], "bare": []}
    suggested = 0
    homes: list[Path] = []
    try:
        for round_number in range(rounds):
            for kind in ("hook", "bare") if round_number % 2 == 0 else ("bare", "hook"):
                home = Path(tempfile.mkdtemp(prefix=f".bench-registry-{kind}-", dir=default_dir()))
                homes.append(home)
                os.environ["BELT_HOME"] = str(home)
                store = open_store().without_fsync()
                save_candidates(store, owner="local", candidates=entries(size, words))
                search(store, owner="local", query=prompts[0])
                hooks = [suggest_hook] if kind == "hook" else []
                doc = {
                    "agent": {"name": "bench", "hooks": hooks},
                    "turns": [{"user": prompt, "model": [{"say": "ok"}]} for prompt in prompts],
                }
                path = home / "scenario.json"
                path.write_text(json.dumps(doc))
                started, started_cpu = time.perf_counter(), time.process_time()
                report, _ = run_scenario(scenario=path)
                timings[kind].append(time.perf_counter() - started)
                cpu[kind].append(time.process_time() - started_cpu)
                if kind == "hook":
                    injected = [
                        m for m in report["chat"]["chat_messages"] if m["role"] == "injection"
                    ]
                    suggested = len(injected)
    finally:
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)
    # The fastest round of each: what the work costs with the least interference from the rest
    # of a shared machine (a difference of medians can be lost in that noise).
    hook, bare = min(timings["hook"]), min(timings["bare"])
    events = 3 * turns + 1  # turn_start, turn_complete and complete per run; start once
    per_hook = (hook - bare) / turns
    per_event = bare / events
    print(f"simulator, {turns} turns against {size} entries ({rounds} rounds, fastest of each):")
    print(f"  per turn with no hook: {bare / turns * 1e3:7.3f} ms")
    print(f"  belt:suggest per hook: {per_hook * 1e3:7.3f} ms ({suggested} turns suggested)")
    print(f"  an event with no hook: {per_event * 1e3:7.3f} ms")
    print(f"  ratio suggest hook / no-hook event: {per_hook / per_event:.2f}")
    # The same from this process's CPU time, which other processes on the machine change less
    # than they change wall-clock time (the runs write to memory, so they hardly wait).
    hook_cpu, bare_cpu = min(cpu["hook"]), min(cpu["bare"])
    ratio_cpu = ((hook_cpu - bare_cpu) / turns) / (bare_cpu / events)
    per_hook_cpu = (hook_cpu - bare_cpu) / turns
    print(f"  the same in CPU time: {per_hook_cpu * 1e3:.3f} ms per hook, ratio {ratio_cpu:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    words = Words(random.Random(2026))
    base = Path(tempfile.mkdtemp(prefix="belt-bench-registry-"))
    try:
        stores = {}
        for name, size in (("small", args.small), ("large", args.large)):
            started = time.perf_counter()
            stores[name] = fill(base / name, size, words)
            print(f"filled {size:>6} entries in {time.perf_counter() - started:6.1f}s")
        prompts = [" ".join(words.draw(words.chance.randint(5, 12))) for _ in range(args.queries)]
        for store in stores.values():  # build each search index once, outside the timing
            search(store, owner=OWNER, query=prompts[0])
        times: dict[str, dict[str, list[float]]] = {
            op: {"small": [], "large": []} for op in ("search", "suggest")
        }
        found = {"small": 0, "large": 0}
        for number, prompt in enumerate(prompts):
            for name in ("small", "large") if number % 2 else ("large", "small"):
                store = stores[name]
                started = time.perf_counter()
                search(store, owner=OWNER, query=prompt, limit=10)
                times["search"][name].append(time.perf_counter() - started)
                started = time.perf_counter()
                found[name] += len(suggest(store, owner=OWNER, prompt=prompt))
                times["suggest"][name].append(time.perf_counter() - started)
        print(f"{'operation':<10}{'small':>12}{'large':>12}{'ratio':>8}")
        for op, measured in times.items():
            small = statistics.median(measured["small"])
            large = statistics.median(measured["large"])
            print(f"{op:<10}{small * 1e6:>10.0f}µs{large * 1e6:>10.0f}µs{large / small:>8.2f}")
        print(
            f"suggestions per prompt: {found['small'] / len(prompts):.2f} (small), "
            f"{found['large'] / len(prompts):.2f} (large)"
        )
        ranking(base / "shape", args.large, args.queries)
        for size in (args.small, args.large):
            simulated(words, size, args.turns, args.rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
