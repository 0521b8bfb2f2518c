"""``belt test -j N`` and ``--shard K/N``: a suite's scenarios run in worker processes, and
split deterministically across machines.

With more than one job, the scenarios are handed out a few at a time to N worker processes,
forked from ``belt test`` once its modules are imported, so a worker starts at once; the
handfuls shrink towards the end of the suite (``chunks``), so the workers end together. Each
worker reads every scenario file it is given, runs it in a store of its own (in memory, or
under ``--keep DIR``), and sends back the scenario's result, without the parts of its record
that nothing reads once it passed (``portable``); results are given out in the order of the
serial run, whatever order the workers finish in, so the report and the JUnit file are the
same for any N. The pool is belt's own, a pipe each way to each worker and nothing else (no
thread in the parent, no multiprocessing): a worker is handed its next handful before it ends
the one it runs, so it never waits for the parent, and the parent, which shares the cores with
the workers, does no more than read results and print them. A worker that ends before it sent
back a handful (a handler that calls ``os._exit``, a crash) is an error naming the scenarios it
held, reported once those before them are.
A worker's module state (a ``py:`` handler module's globals) is its own: scenarios that share
state through a module see it only within one worker.

A shard is every N-th scenario of the suite, in the order ``belt test`` runs them (after
``-k``): shard K of N takes the scenarios at positions K-1, K-1+N, K-1+2N, ... (counting from
0). Machines that see the same files and the same arguments agree on it, and the N shards
together run each scenario exactly once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import signal
import struct
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from belt.errors import BeltError, UsageError
from belt.loader import frozen

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
    yield from _pool(step, items, min(jobs, len(items)))


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
    return sys.platform != "win32" and hasattr(os, "fork")


_TASK = struct.Struct("<III")
"""A handful handed to a worker: its number in ``chunks``, and its first and end index."""
_LENGTH = struct.Struct("<Q")
"""The length of the message that follows, from a worker to the parent."""


@dataclasses.dataclass
class _Worker:
    pid: int
    tasks: int
    """The parent's end of the pipe that hands it handfuls (closed: nothing more to do)."""
    results: int
    """The parent's end of the pipe that brings back each handful's results."""
    held: list[int] = dataclasses.field(default_factory=list)
    """The handfuls handed to it that it has not sent back, in order."""


def _pool(step: Step, items: Sequence[tuple[Any, ...]], jobs: int) -> Iterator[Any]:
    """``run_all`` in ``jobs`` worker processes forked from this one: each is handed two
    handfuls at first and one more for each it sends back, over a pipe of its own, so it
    never waits for the parent between them; results are given out in the items' order."""
    # Start-up: only a run on more than one job needs these (pickle before the fork, so that
    # no worker imports it again).
    import mmap
    import pickle  # noqa: F401
    import select

    handfuls = chunks(len(items), jobs)
    stop = mmap.mmap(-1, 1)  # shared with the workers: 1 once the parent stops
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written again by a worker
        with contextlib.suppress(Exception):
            stream.flush()
    # Frozen already when belt's imports froze what they made (belt.loader.collector_paused):
    # then it stays so after the pool, as it was (unfreezing is all or nothing).
    was_frozen = frozen()
    # What this process holds now (its modules, the suite) is left out of the workers'
    # garbage collections, which would otherwise write to every page of it and so copy it
    # into each worker.
    gc.freeze()
    workers: dict[int, _Worker] = {}
    done: dict[int, tuple[list[Any], BaseException | None]] = {}
    """Handfuls back from their workers and not yet given out: their results, and what
    stopped the handful before its end (an exception), if anything did."""
    given = 0
    try:
        for _ in range(jobs):
            worker = _fork(step, items, stop, workers.values())
            workers[worker.results] = worker
        following = 0
        for _ in range(2):
            for worker in list(workers.values()):
                if following < len(handfuls):
                    _hand(worker, following, handfuls[following])
                    following += 1
        while given < len(handfuls):
            if given in done:
                results, error = done.pop(given)
                given += 1
                yield from results
                if error is not None:
                    raise error
                continue
            if not workers:  # every worker ended: the handfuls left cannot run
                raise _ended(None, items, handfuls[given])
            ready, _, _ = select.select(list(workers), [], [])
            for fd in ready:
                worker = workers[fd]
                message = _receive(fd)
                if message is None:  # it ended without sending back what it held
                    del workers[fd]
                    os.close(worker.tasks)
                    os.close(worker.results)
                    status = _reap(worker.pid)
                    for number in worker.held:
                        done[number] = ([], _ended(status, items, handfuls[number]))
                    continue
                number, results, error = message
                worker.held.remove(number)
                done[number] = (results, error)
                if following < len(handfuls):
                    _hand(worker, following, handfuls[following])
                    following += 1
    finally:
        stop[0] = 1  # a worker starts nothing more, even what it was handed already
        for worker in workers.values():
            os.close(worker.tasks)  # and ends once it has sent back what it holds
        for worker in workers.values():
            while os.read(worker.results, 1 << 16):
                pass
            os.close(worker.results)
            _reap(worker.pid)
        stop.close()
        if not was_frozen:
            gc.unfreeze()


def _fork(
    step: Step, items: Sequence[tuple[Any, ...]], stop: Any, others: Iterable[_Worker]
) -> _Worker:
    """A new worker process, running ``_serve`` until the parent closes its pipe."""
    tasks_in, tasks = os.pipe()
    results, results_out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker
        code = 1
        try:
            # A Ctrl-C reaches every process of the terminal's group: the parent handles it
            # (it stops handing out scenarios); a worker finishes the scenario it is running.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for fd in (tasks, results, *(fd for w in others for fd in (w.tasks, w.results))):
                os.close(fd)
            _without_stdin()
            _serve(step, items, stop, tasks_in, results_out)
            code = 0
        except BaseException:
            with contextlib.suppress(BaseException):
                traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(BaseException):
                    stream.flush()
            os._exit(code)
    os.close(tasks_in)
    os.close(results_out)
    return _Worker(pid, tasks, results)


def _without_stdin() -> None:
    """In a worker: standard input is /dev/null, so that workers and the parent never read
    the terminal's input at once (a handler that reads it reads nothing)."""
    if sys.stdin is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdin.close()
    with contextlib.suppress(OSError, ValueError):
        sys.stdin = open(os.devnull, encoding="utf-8")


def _serve(step: Step, items: Sequence[tuple[Any, ...]], stop: Any, tasks: int, out: int) -> None:
    """In a worker: run each handful the parent hands it and send back its results (made fit
    to send, ``portable``), or the exception that stopped it, until the parent closes the
    pipe; after the parent stopped, start nothing more."""
    while True:
        task = _read(tasks, _TASK.size)
        if task is None:
            return
        number, first, end = _TASK.unpack(task)
        results: list[Any] = []
        error: BaseException | None = None
        try:
            for index in range(first, end):
                if stop[0]:
                    break  # the parent stopped early and reads no more results
                results.append(portable(step(*items[index])))
        except BaseException as exc:
            error = exc
        _send(out, number, results, error)


def _hand(worker: _Worker, number: int, handful: range) -> None:
    os.write(worker.tasks, _TASK.pack(number, handful.start, handful.stop))
    worker.held.append(number)


def _send(fd: int, number: int, results: list[Any], error: BaseException | None) -> None:
    """Send a handful's results and the exception that stopped it, if one did: pickled apart
    from them (the parent may not be able to load it: its class may live in a module only
    the worker imported), with its traceback as text, since a traceback cannot be sent."""
    import pickle  # Start-up: imported before the fork, see _pool

    raised = None
    if error is not None:
        text = "".join(traceback.format_exception(error))
        try:
            blob = pickle.dumps(error, pickle.HIGHEST_PROTOCOL)
        except Exception:  # an exception that cannot be sent: its text alone
            blob = None
        raised = (blob, text)
    data = pickle.dumps((number, results, raised), pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int) -> tuple[int, list[Any], BaseException | None] | None:
    """A handful's number, its results and the exception that stopped it (or None); None
    when the worker ended."""
    import pickle  # Start-up: imported before the fork, see _pool

    head = _read(fd, _LENGTH.size)
    if head is None:
        return None
    data = _read(fd, _LENGTH.unpack(head)[0])
    if data is None:
        return None
    number, results, raised = pickle.loads(data)
    if raised is None:
        return number, results, None
    blob, text = raised
    try:
        exc = pickle.loads(blob) if blob is not None else None
    except Exception:  # its class cannot be found here
        exc = None
    if not isinstance(exc, BaseException):
        exc = RuntimeError(text.strip().splitlines()[-1])
    exc.add_note(f"(in a worker process of belt test -j)\n{text}")
    return number, results, exc


def _read(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``, or None at its end."""
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _reap(pid: int) -> int:
    """Wait for the worker ``pid`` to end; its wait status."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def _ended(status: int | None, items: Sequence[tuple[Any, ...]], handful: range) -> BeltError:
    """The error of a handful whose worker ended before it sent back its results."""
    how = ""
    if status is not None:
        if os.WIFSIGNALED(status):
            how = f" (killed by signal {os.WTERMSIG(status)})"
        elif os.WIFEXITED(status):
            how = f" (exit status {os.WEXITSTATUS(status)})"
    names = [str(items[index][0]) for index in handful]
    held = names[0] if len(names) == 1 else f"{names[0]} to {names[-1]}"
    return BeltError(
        f"a worker process of belt test -j ended{how} before it ran {held}",
        hint="a handler that ends its process (os._exit, a crash) ends its worker; "
        "run those scenarios with -j 1 to see which",
    )


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
            _replaced(outcome, expectation=_replaced(outcome.expectation, conditions=()))
            for outcome in outcomes
        ]
    report = getattr(result, "report", None)
    if report is not None and all(outcome.passed for outcome in outcomes or []):
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


def brief(report: dict[str, Any]) -> dict[str, Any]:
    """The parts of a record that the result of a scenario without a failed expectation
    shows (``BRIEF``)."""
    return {key: report[key] for key in BRIEF if key in report}
