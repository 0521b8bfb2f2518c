"""Cost of belt:suggest's search against the registry's size: 10,000 entries against 100.

Fills two stores, one of SMALL and one of LARGE entries, through ``save_candidates`` (without
fsync, so the fill is quick). Entry texts are drawn from one vocabulary of invented words with a
Zipf-like frequency (a few words are in many entries, most in few), like a team's notes on one
subject; prompts are drawn the same way. Then, alternating between the stores prompt by prompt
(paired), times ``suggest`` (at most 3, what the ``belt:suggest`` hook asks) and ``search`` (the
10 best) for the same prompts, and prints each median and the ratio of the median at LARGE to
the median at SMALL. Target: ``suggest`` at LARGE at most 2 times its median at SMALL.

Then the ranking at LARGE entries, in the shape a large registry once defeated: 60 entries with
one word of a prompt in their name (BM25 ranks them first), the rest sharing one other word
each, and one entry holding every term of the prompt. Targets: ``suggest`` offers that entry
first and ``search`` lists it first; and for every prompt of the timing, what ``suggest`` offers
is what ``search`` lists first, in the same order.

Then the cost of a ``belt:suggest`` hook in the simulator against LARGE entries: the same
scenario of ``--turns`` turns run with the hook and with no hook, in ``--rounds`` alternating
rounds, each in a fresh copy of a filled state directory in memory (``/dev/shm`` where it
exists); the difference in CPU time per turn between the fastest round of each is the hook's
cost, reported against the CPU time of an event that fires no hook. Target: at most 2.5.

``--quick`` times fewer prompts and turns (the sizes stay: the targets are about 10,000
entries); the tests give small sizes (``--large 300 --queries 6 --turns 3 --rounds 1``).
``--handicap S`` (test only) makes the bench's own wrapper of ``suggest`` burn S seconds of CPU
per call against the LARGE registry, in the timing and in the simulator alike: a search that
slows with the registry's size, which every target of time must catch.

    .venv/bin/python bench/registry.py [--small 100] [--large 10000] [--queries 300]
                                       [--turns 100] [--rounds 5] [--quick] [--handicap S]
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
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any

from scale import burn, default_dir
from verdict import Verdicts, add_common_options

from belt.records import registry
from belt.records.registry import (
    KINDS,
    Candidate,
    Origin,
    make_candidate,
    save_candidates,
    search,
)
from belt.store import Store

OWNER = "local"
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

    def prompts(self, count: int) -> list[str]:
        """``count`` prompts of 5 to 12 words."""
        return [" ".join(self.draw(self.chance.randint(5, 12))) for _ in range(count)]


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


def suggest_as_measured(small: Path, handicap: float) -> Callable[..., Any]:
    """``registry.suggest``, slowed by ``handicap`` seconds of CPU per call against any store
    but the one under ``small`` (the LARGE one, and the simulator's copies of it): the bench's
    own wrapper; belt has no such switch."""
    real = registry.suggest

    def measured(store: Store | None, **arguments: Any) -> Any:
        found = real(store, **arguments)
        root = Path(store.root if store is not None else os.environ.get("BELT_HOME", ""))
        if handicap and not root.is_relative_to(small):
            burn(handicap)
        return found

    return measured


def timing(
    stores: dict[str, Store], prompts: list[str], suggest: Callable[..., Any]
) -> tuple[dict[str, dict[str, float]], int]:
    """Median µs of suggest and search per store, paired prompt by prompt; and how many prompts
    had a suggestion that is not what search lists first at LARGE."""
    times: dict[str, dict[str, list[float]]] = {
        op: {name: [] for name in stores} for op in ("suggest", "search")
    }
    disagreements = 0
    for number, prompt in enumerate(prompts):
        for name in ("small", "large") if number % 2 else ("large", "small"):
            store = stores[name]
            started = time.perf_counter()
            offered = suggest(store, owner=OWNER, prompt=prompt)
            times["suggest"][name].append(time.perf_counter() - started)
            started = time.perf_counter()
            listed = search(store, owner=OWNER, query=prompt, limit=10)
            times["search"][name].append(time.perf_counter() - started)
            if name == "large" and [m.id for m in listed[: len(offered)]] != [
                m.id for m in offered
            ]:
                disagreements += 1
    medians = {
        op: {name: statistics.median(values) * 1e6 for name, values in by_store.items()}
        for op, by_store in times.items()
    }
    return medians, disagreements


def ranking(root: Path, size: int, suggest: Callable[..., Any]) -> tuple[bool, bool]:
    """The reported shape at ``size`` entries: does suggest offer, and search list, first the
    entry holding every term of the prompt?"""
    store = Store(root, fsync=False)
    common = ["rotate", "keys", "nightly", "backup"]
    filler = " ".join(f"lorem{number}" for number in range(100))
    shaped = [(f"Filler {n}", f"{filler} {common[n % 4]}") for n in range(size - 61)]
    shaped += [(f"Vault note {n}", f"Short note {n}.") for n in range(60)]
    runbook = "When the nightly backup has finished, rotate the vault keys."
    shaped.append(("Key rotation runbook", f"{runbook} {filler * 3}"))
    origin = Origin.person("bench")
    saved = save_candidates(
        store,
        owner=OWNER,
        candidates=[
            (make_candidate(name=name, kind="rule", text=text), origin) for name, text in shaped
        ],
    )
    prompt = "Rotate the vault keys after the nightly backup"
    listed = search(store, owner=OWNER, query=prompt, limit=1)
    offered = suggest(store, owner=OWNER, prompt=prompt)
    return (
        bool(offered) and offered[0].id == saved[-1].id,
        bool(listed) and listed[0].id == saved[-1].id,
    )


def simulated(template: Path, prompts: list[str], rounds: int) -> tuple[float, int]:
    """A belt:suggest hook's CPU time per turn against an event that fires no hook (the ratio),
    and how many turns of the last hook round injected a suggestion."""
    from belt.engine.entrypoints import run_scenario

    suggest_hook = {"event": "agent.turn_start", "type": "builtin", "handler": "belt:suggest"}
    cpu: dict[str, list[float]] = {"hook": [], "bare": []}
    suggested = 0
    for round_number in range(rounds):
        for kind in ("hook", "bare") if round_number % 2 == 0 else ("bare", "hook"):
            home = Path(tempfile.mkdtemp(prefix=f".bench-registry-{kind}-", dir=default_dir()))
            try:
                shutil.copytree(template, home, dirs_exist_ok=True)
                os.environ["BELT_HOME"] = str(home)
                doc = {
                    "agent": {"name": "bench", "hooks": [suggest_hook] if kind == "hook" else []},
                    "turns": [{"user": prompt, "model": [{"say": "ok"}]} for prompt in prompts],
                }
                path = home / "scenario.json"
                path.write_text(json.dumps(doc))
                started = time.process_time()
                report, _ = run_scenario(scenario=path)
                cpu[kind].append(time.process_time() - started)
                if kind == "hook":
                    messages = report["chat"]["chat_messages"]
                    suggested = sum(1 for m in messages if m["role"] == "injection")
            finally:
                shutil.rmtree(home, ignore_errors=True)
    # The fastest round of each: the work with the least interference from the rest of a
    # shared machine (a difference of medians can be lost in that noise).
    turns = len(prompts)
    hook, bare = min(cpu["hook"]), min(cpu["bare"])
    events = 3 * turns + 1  # turn_start, turn_complete and complete per run; start once
    per_hook, per_event = (hook - bare) / turns, bare / events
    print(f"simulator, {turns} turns, {rounds} rounds (fastest of each, CPU time):")
    print(f"  per turn with no hook: {bare / turns * 1e3:7.3f} ms")
    print(f"  belt:suggest per hook: {per_hook * 1e3:7.3f} ms ({suggested} turns suggested)")
    print(f"  an event with no hook: {per_event * 1e3:7.3f} ms")
    return per_hook / per_event, suggested


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--queries", type=int, help="default 300 (quick: 60)")
    parser.add_argument("--turns", type=int, help="default 100 (quick: 30)")
    parser.add_argument("--rounds", type=int, help="default 5 (quick: 2)")
    add_common_options(parser)
    args = parser.parse_args()
    args.queries = args.queries or (60 if args.quick else 300)
    args.turns = args.turns or (30 if args.quick else 100)
    args.rounds = args.rounds or (2 if args.quick else 5)
    words = Words(random.Random(2026))
    base = Path(tempfile.mkdtemp(prefix="belt-bench-registry-", dir=default_dir()))
    verdicts = Verdicts("registry")
    try:
        homes = {"small": base / "small", "large": base / "large"}
        suggest = suggest_as_measured(homes["small"], args.handicap)
        stores = {}
        for name, size in (("small", args.small), ("large", args.large)):
            started = time.perf_counter()
            stores[name] = Store(homes[name] / "store", fsync=False)
            save_candidates(stores[name], owner=OWNER, candidates=entries(size, words))
            print(f"filled {size:>6} entries in {time.perf_counter() - started:6.1f}s")
        prompts = words.prompts(args.queries)
        for store in stores.values():  # open each search index once, outside the timing
            search(store, owner=OWNER, query=prompts[0])
        medians, disagreements = timing(stores, prompts, suggest)
        print(f"{'operation':<10}{args.small:>10}{args.large:>10}{'ratio':>8}   (median µs)")
        for op, by_store in medians.items():
            small, large = by_store["small"], by_store["large"]
            print(f"{op:<10}{small:>10.0f}{large:>10.0f}{large / small:>8.2f}")
        ratio = medians["suggest"]["large"] / medians["suggest"]["small"]
        verdicts.check(
            f"belt:suggest search at {args.large:,} entries / at {args.small:,}",
            figure=ratio,
            target=2.0,
        )
        verdicts.check(
            f"prompts where suggest and search disagree, at {args.large:,} entries",
            figure=disagreements,
            target=0,
        )
        offered_first, listed_first = ranking(base / "shape", args.large, suggest)
        verdicts.check(
            f"the entry holding every word, offered first by suggest at {args.large:,}",
            figure=int(offered_first),
            target=1,
            higher_is_better=True,
        )
        verdicts.check(
            f"the entry holding every word, listed first by search at {args.large:,}",
            figure=int(listed_first),
            target=1,
            higher_is_better=True,
        )
        registry.suggest = suggest  # type: ignore[assignment]  # the hook's call, handicapped
        hook_ratio, _ = simulated(homes["large"], words.prompts(args.turns), args.rounds)
        verdicts.check(
            f"belt:suggest hook / no-hook event (CPU), {args.large:,} entries",
            figure=hook_ratio,
            target=2.5,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    verdicts.report()


if __name__ == "__main__":
    main()
