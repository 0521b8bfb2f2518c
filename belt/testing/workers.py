"""``belt test -j N`` and ``--shard K/N``: a suite's scenarios in supervised worker processes
(at every ``-j``, 1 included: belt's own process never runs a handler), split deterministically
across machines; results come back in the serial order, so the report is the same for any N.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
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
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def parse_jobs(text: str) -> int:
    """``-j N`` (a whole number, at least 1) or ``-j auto`` (the number of cores)."""
    if text.strip().lower() == "auto":
        return cores()
    jobs = 0
    with suppress(ValueError):
        jobs = int(text)
    if jobs < 1:
        raise UsageError(f"-j {text!r}: expected a number of worker processes (1 or more) or auto")
    return jobs


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard K/N``: shard K (1 to N) of N."""
    first, sep, second = text.partition("/")
    shard = count = 0
    with suppress(ValueError):
        shard, count = int(first), int(second)
    if not sep or count < 1 or not 1 <= shard <= count:
        raise UsageError(
            f"--shard {text!r}: expected K/N, shard K of N with 1 <= K <= N (e.g. --shard 2/4)"
        )
    return shard, count


def shard_of(items: Sequence[T], shard: tuple[int, int] | None) -> list[T]:
    """The items of shard K of N: those at positions K-1, K-1+N, ... (all without a shard)."""
    return list(items if shard is None else items[shard[0] - 1 :: shard[1]])


def run_all(
    step: Step,
    items: Sequence[tuple[Any, ...]],
    *,
    jobs: int,
    lost: Callable[[tuple[Any, ...], str], Any] | None = None,
    preload: Callable[[], list[Preload]] | None = None,
    whole: bool = False,
) -> Iterator[Any]:
    """``step(*item)`` for each item, in order, in ``jobs`` supervised worker processes (here where
    none can be forked); an item whose worker ended or misbehaved is ``lost(item, cause)``."""
    if not can_fork() or not items:
        yield from (step(*item) for item in items)
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
    """How many of ``count`` scenarios left a worker is handed at a time (workers end together)."""
    return max(1, min(16, count // (jobs * 4)))


def portable(result: Any, *, whole: bool = False) -> Any:
    """A result without its expectations' compiled tests (they cannot cross processes), and when
    all passed and not ``whole``, only the ``BRIEF`` parts of its record."""
    changes: dict[str, object] = {}
    outcomes = getattr(result, "outcomes", None)
    if outcomes:
        changes["outcomes"] = [
            _replaced(outcome, expectation=_replaced(outcome.expectation, conditions=()))
            for outcome in outcomes
        ]
    report = getattr(result, "report", None)
    if not whole and report is not None and all(outcome.passed for outcome in outcomes or []):
        changes["report"] = {key: report[key] for key in BRIEF if key in report}
    return _replaced(result, **changes) if changes else result


def _replaced(record: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` without a call of ``__init__`` (three per expectation, each dear)."""
    copy = object.__new__(type(record))
    copy.__dict__.update(record.__dict__, **changes)
    return copy


BRIEF = ("simulation", "hook_summary")  # a result's record when no expectation failed
