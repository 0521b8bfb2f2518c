"""``belt test -j N`` and ``--shard K/N``: a suite's scenarios run in supervised worker
processes, and split deterministically across machines.

At every ``-j`` (1 included) the scenarios run in N worker processes that
``belt.usercode.supervisor`` starts, watches and replaces, forked warm from a template that has
imported belt's engine and the handler modules the suite's files name; belt's own process never runs
a handler. They are handed out in handfuls that shrink towards the end of the suite (``chunks``), so
the workers end together, and a worker is handed its next handful before it ends the one it runs.
Results come back without what nothing reads once a scenario passed (``portable``), in the serial
order whatever order the workers finish in, so the report and the JUnit file are the same for any N.
A scenario whose handler ends or harms its worker is an error saying so, and a new worker runs
the rest. A worker's module state (a ``py:`` module's globals) is its own.

Shard K of N takes the scenarios at positions K-1, K-1+N, K-1+2N, ... of the suite (after
``-k``): machines that see the same files agree on it, and the N shards run each scenario once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

from belt.errors import UsageError
from belt.outgoing import tracing
from belt.usercode.supervisor import Preload, Supervisor, can_fork

T = TypeVar("T")
Step = Callable[..., Any]


def cores() -> int:
    """The number of cores this process may run on (``-j auto``)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def parse_jobs(text: str) -> int:
    """``-j N`` (a whole number, at least 1) or ``-j auto`` (the number of cores)."""
    if text.strip().lower() == "auto":
        return cores()
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise UsageError(f"-j {text!r}: expected a number of worker processes (1 or more) or auto")
    return jobs


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard K/N``: shard K (1 to N) of N."""
    first, sep, second = text.partition("/")
    try:
        shard, count = int(first), int(second)
    except ValueError:
        shard = count = 0
    if not sep or count < 1 or not 1 <= shard <= count:
        raise UsageError(
            f"--shard {text!r}: expected K/N, shard K of N with 1 <= K <= N (e.g. --shard 2/4)"
        )
    return shard, count


def shard_of(items: Sequence[T], shard: tuple[int, int] | None) -> list[T]:
    """The items of shard K of N: those at positions K-1, K-1+N, ... (all without a shard)."""
    if shard is None:
        return list(items)
    number, count = shard
    return list(items[number - 1 :: count])


def run_all(
    step: Step,
    items: Sequence[tuple[Any, ...]],
    *,
    jobs: int,
    lost: Callable[[tuple[Any, ...], str], Any] | None = None,
    preload: Callable[[], list[Preload]] | None = None,
    whole: bool = False,
) -> Iterator[Any]:
    """``step(*item)`` for each item, in order, in ``jobs`` supervised worker processes
    (``belt.usercode.supervisor``; in this process only where none can be forked), each handed a few
    at a time (``chunks``), its result made fit to cross (``portable``, ``whole`` or not). An item
    whose worker ended or that misbehaved is ``lost(item, cause)`` (without ``lost``, an error
    at its place); ``preload`` names the user's modules the workers start with. Stopping early
    (closing the iterator, as ``-x`` and Ctrl-C do) starts no other item and waits for the
    items under way, so no worker is killed in the middle of a write."""
    if not can_fork():
        for item in items:
            yield step(*item)
        return
    if not items:
        return
    from belt.handlers.inprocess import idle_threads  # noqa: PLC0415 - start-up: with the engine

    jobs = max(1, min(jobs, len(items)))
    with Supervisor(
        jobs=jobs,
        step=partial(_portable_step, step, whole),
        items=items,
        preload=preload,
        spare=lambda: idle_threads() | tracing.threads(),
        handful=partial(chunk_size, jobs=jobs),
    ) as supervisor:
        yield from supervisor.run(lost)


def _portable_step(step: Step, whole: bool, *item: Any) -> Any:
    return portable(step(*item), whole=whole)


def chunk_size(count: int, jobs: int) -> int:
    """How many of ``count`` scenarios still to hand out a worker is handed at a time: enough
    that handing them out costs little, few enough (at most 16, and a quarter of a worker's
    share of what is left) that the workers end together."""
    return max(1, min(16, count // (jobs * 4)))


def chunks(count: int, jobs: int) -> list[range]:
    """The handfuls in which ``count`` scenarios are handed out to ``jobs`` workers, in order:
    each ``chunk_size`` of what is left after the ones before, so they shrink to one scenario
    at the end of the suite, and no worker is left with a long handful while the others
    wait."""
    handfuls = []
    start = 0
    while start < count:
        size = chunk_size(count - start, jobs)
        handfuls.append(range(start, start + size))
        start += size
    return handfuls


def portable(result: Any, *, whole: bool = False) -> Any:
    """A scenario's result without what cannot cross to another process, the compiled tests
    of its expectations (their text, place and outcome stay), and, when no expectation
    failed and not ``whole``, without the parts of its record that only a failure's
    transcript excerpt reads (``brief``): the report and the JUnit file show the same."""
    if result is None:
        return None
    changes: dict[str, object] = {}
    outcomes = getattr(result, "outcomes", None)
    if outcomes:
        changes["outcomes"] = [
            _replaced(outcome, expectation=_replaced(outcome.expectation, conditions=()))
            for outcome in outcomes
        ]
    report = getattr(result, "report", None)
    if not whole and report is not None and all(outcome.passed for outcome in outcomes or []):
        changes["report"] = brief(report)
    return _replaced(result, **changes) if changes else result


def _replaced(record: Any, **changes: Any) -> Any:
    """``dataclasses.replace(record, **changes)`` for the plain dataclasses of a result (no
    ``__post_init__``, no slots), without a call of ``__init__``: a copy of its fields with
    ``changes`` made (a worker makes three for each expectation of each scenario)."""
    copy = object.__new__(type(record))
    fields = copy.__dict__
    fields.update(record.__dict__)
    fields.update(changes)
    return copy


BRIEF = ("simulation", "hook_summary")
"""What a scenario's result shows of its record when no expectation failed (the
simulation's id and dialect, the hooks' summary)."""


def brief(report: dict[str, object]) -> dict[str, object]:
    """The parts of a record that the result of a scenario without a failed expectation
    shows (``BRIEF``)."""
    return {key: report[key] for key in BRIEF if key in report}
