"""``belt test -j N`` and ``--shard K/N``: a suite's scenarios run in worker processes, and
split deterministically across machines.

With more than one job, the scenarios are handed out a few at a time to N worker processes,
forked from ``belt test`` once its modules are imported, so a worker starts at once; the
handfuls shrink towards the end of the suite (``chunks``), so the workers end together. Each
worker reads every scenario file it is given, runs it in a store of its own (in memory, or
under ``--keep DIR``), and sends back the scenario's result, without the parts of its record
that nothing reads once it passed (``portable``); results are given out in the order of the
serial run, whatever order the workers finish in, so the report and the JUnit file are the
same for any N.
A worker's module state (a ``py:`` handler module's globals) is its own: scenarios that share
state through a module see it only within one worker.

A shard is every N-th scenario of the suite, in the order ``belt test`` runs them (after
``-k``): shard K of N takes the scenarios at positions K-1, K-1+N, K-1+2N, ... (counting from
0). Machines that see the same files and the same arguments agree on it, and the N shards
together run each scenario exactly once.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from belt.errors import UsageError

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")
Step = Callable[..., Any]

_WORK: tuple[Step, Sequence[tuple[Any, ...]], Any] | None = None
"""The step and the scenarios of the running pool, and the flag that stops it (shared
memory), inherited by its forked workers."""


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


def run_all(step: Step, items: Sequence[tuple[Any, ...]], *, jobs: int) -> Iterator[Any]:
    """``step(*item)`` for each item, in order: in this process with one job, else in ``jobs``
    worker processes, handed out a few at a time (``chunks``). Stopping early (closing the
    iterator, as ``-x`` and Ctrl-C do) starts no other item, those already handed out among
    them, and waits for the items under way, so no worker is killed in the middle of a
    write."""
    if jobs <= 1 or len(items) <= 1 or not _can_fork():
        for item in items:
            yield step(*item)
        return
    # Start-up: only a run on more than one job loads the process pool.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _WORK
    context = multiprocessing.get_context("fork")
    stop = context.RawValue("b", 0)
    _WORK = (step, items, stop)
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(items)),
        mp_context=context,
        initializer=_worker_started,
    )
    # Frozen already when belt's imports froze what they made (belt.loader.collector_paused):
    # then it stays so after the pool, as it was (unfreezing is all or nothing).
    frozen = gc.get_freeze_count() > 0
    try:
        # What this process holds now (its modules, the suite) is left out of the workers'
        # garbage collections, which would otherwise write to every page of it and so copy
        # it into each worker; the workers are forked at the first submit.
        gc.freeze()
        futures: list[Future[list[Any]]] = [
            pool.submit(_run, indexes) for indexes in chunks(len(items), jobs)
        ]
        for future in futures:
            yield from future.result()
    finally:
        stop.value = 1  # a worker starts nothing more, even what it was handed already
        pool.shutdown(wait=True, cancel_futures=True)
        _WORK = None
        if not frozen:
            gc.unfreeze()


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


def _can_fork() -> bool:
    import multiprocessing  # Start-up: asked only when more than one job is asked for

    return sys.platform != "win32" and "fork" in multiprocessing.get_all_start_methods()


def _worker_started() -> None:
    # A Ctrl-C reaches every process of the terminal's group: the parent handles it (it stops
    # handing out scenarios); a worker finishes the scenario it is running.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(indexes: range) -> list[Any]:
    """In a worker: run some items of the pool's work, and make their results fit to send
    back."""
    assert _WORK is not None, "a worker runs only inside run_all"
    step, items, stop = _WORK
    results = []
    for index in indexes:
        if stop.value:
            break  # the parent stopped early and reads no more results
        results.append(portable(step(*items[index])))
    return results


def portable(result: Any) -> Any:
    """A scenario's result without what cannot cross to another process, the compiled tests
    of its expectations (their text, place and outcome stay), and, when no expectation
    failed, without the parts of its record that only a failure's transcript excerpt reads
    (``brief``): the report and the JUnit file show the same."""
    if result is None:
        return None
    changes: dict[str, Any] = {}
    outcomes = getattr(result, "outcomes", None)
    if outcomes:
        changes["outcomes"] = [
            dataclasses.replace(
                outcome, expectation=dataclasses.replace(outcome.expectation, conditions=())
            )
            for outcome in outcomes
        ]
    report = getattr(result, "report", None)
    if report is not None and all(outcome.passed for outcome in outcomes or []):
        changes["report"] = brief(report)
    return dataclasses.replace(result, **changes) if changes else result


BRIEF = ("simulation", "hook_summary")
"""What a scenario's result shows of its record when no expectation failed (the
simulation's id and dialect, the hooks' summary)."""


def brief(report: dict[str, Any]) -> dict[str, Any]:
    """The parts of a record that the result of a scenario without a failed expectation
    shows (``BRIEF``)."""
    return {key: report[key] for key in BRIEF if key in report}
