"""Supervised worker processes that run a user's code for ``belt test``, ``belt check`` and
``--belt-isolate``, so that whatever it does fails only the case that ran it (docs/reliability.md).

A case whose worker ended, that closed fd 0-2 or left a non-daemon thread running fails with that
and its worker is replaced (the other cases it held go to another); a ``call`` past its deadline
ends its worker. Workers read /dev/null, write stdout to stderr and (Linux) die with belt. With a
``preload`` plan workers fork warm from a template process that imported the plan's modules
within their deadlines (one that passes it is refused in every worker).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import mmap
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

from belt.errors import BeltError, Conflict, InvalidInput, NotFound, Unreachable, UsageError
from belt.usercode import loader

GRACE = 1.0  # seconds a worker whose pipe to belt closed has to end on its own before belt ends it
THREAD_GRACE = 0.5  # seconds the threads a case started (not daemons) have to end once it returned
POLL = 1.0  # seconds between looks at the workers for one that was stopped (SIGSTOP)
WORDS = 512  # bytes of each worker's last words (why it ended, when it could say)
MESSAGE_MAX = 1 << 31  # the most bytes of one message from a worker (a longer one is not belt's)

_LENGTH = struct.Struct("<Q")
_SEAT = struct.Struct("<I")
_STANDARD = ((0, "standard input"), (1, "standard output"), (2, "standard error"))
_ERRORS: dict[int, type[BeltError]] = {
    int(kind.exit_code): kind
    for kind in (UsageError, NotFound, Conflict, InvalidInput, Unreachable)
}
Lost = Callable[[tuple[Any, ...], str], Any] | None  # lost(item, cause): what a lost item becomes


def can_fork() -> bool:
    """Whether workers can be forked here (not on Windows)."""
    return sys.platform != "win32" and hasattr(os, "fork")


@dataclass(frozen=True)
class Preload:
    """A module the template imports (``load``) within ``seconds``; ``key`` is its module_key."""

    key: str
    load: Callable[[], Any]
    seconds: float
    where: str


@dataclass(frozen=True)
class Reply:
    """What a call in a worker gave: its value, or why there is none (``problem``)."""

    value: Any = None
    problem: str | None = None
    timed_out: bool = False


class _Raised(RuntimeError):
    """What a step raised in a worker, as its text (for ``run`` without ``lost``)."""


@dataclass
class _Worker:
    """belt's side of one worker process."""

    pid: int
    seat: int
    tasks: int  # the pipe that hands it work (closed: nothing more)
    results: int  # the pipe its replies come back on
    held: deque[list[int]] = field(default_factory=deque)  # handfuls not all answered, in order
    ended: str | None = None  # why belt ended it, when belt did


class Supervisor:
    """Worker processes for ``step(*items[i])`` (``run``) or for calls (``call``)."""

    def __init__(
        self,
        *,
        jobs: int = 1,
        step: Callable[..., Any] | None = None,
        items: Sequence[tuple[Any, ...]] = (),
        preload: Callable[[], list[Preload]] | None = None,
        spare: Callable[[], set[threading.Thread]] | None = None,
        handful: Callable[[int], int] | None = None,
    ) -> None:
        self.jobs = max(1, jobs)
        self.step = step
        self.items = items
        self.preload = preload
        self.spare = spare or set  # belt's own threads a worker may keep between cases
        self.handful = handful or (lambda count: 1)  # items handed at a time, of count left
        self.owner = os.getpid()
        self.workers: dict[int, _Worker] = {}  # by the end of its results pipe
        self.problems: dict[str, tuple[int, str]] = {}  # a preloaded module's (exit code, message)
        self.skip: set[str] = set()  # preloaded modules that ended the template
        self.refused: dict[str, str] = {}  # modules whose import passed its deadline, with why
        self.template: _Template | None = None
        self.stop = mmap.mmap(-1, 1)
        self.words = mmap.mmap(-1, WORDS * self.jobs)
        self._was_frozen = True

    # -- start and end --------------------------------------------------------------------------

    def __enter__(self) -> Supervisor:
        """Get ready to fork workers: with a plan, the template, its modules imported."""
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is written again by a child
            with contextlib.suppress(Exception):
                stream.flush()
        # Frozen, what this process holds is left out of the children's collections, which
        # would copy every page of it into each; it stays frozen if belt's imports froze it.
        self._was_frozen = loader.frozen()
        gc.freeze()
        if self.preload is not None and can_fork():
            self.template = _Template(self)
            self.template.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Start nothing more, let each worker end its item (a call's is ended), wait for all."""
        self.stop[0] = 1
        workers = list(self.workers.values())
        for worker in workers:
            _close(worker.tasks)  # and it ends once it has answered what it runs
            if self.step is None:
                self.end(worker, "belt stopped")
        for worker in workers:
            with contextlib.suppress(OSError):
                while os.read(worker.results, 1 << 16):
                    pass
            self._finish(worker)
        if self.template is not None:
            self.template.close()
            self.template = None
        if not self._was_frozen:
            gc.unfreeze()
            self._was_frozen = True

    # -- workers --------------------------------------------------------------------------------

    def _spawn(self, seat: int) -> _Worker:
        """A new worker in ``seat``, forked from the template, else from this process."""
        tasks_in, tasks = os.pipe()
        results, results_out = os.pipe()
        offset = seat * WORDS
        self.words[offset : offset + WORDS] = bytes(WORDS)
        try:
            if self.template is not None:
                pid = self.template.fork(seat, tasks_in, results_out)
            else:
                pid = _fork()
                if pid == 0:
                    _close(tasks, results)
                    self._leave_owner()
                    _serve(self, tasks_in, results_out, seat, self.owner)
        except BaseException:
            _close(tasks, results)
            raise
        finally:
            _close(tasks_in, results_out)
        worker = _Worker(pid, seat, tasks, results)
        self.workers[results] = worker
        return worker

    def _leave_owner(self) -> None:
        """In a child: close belt's ends of the other workers' pipes (they would never end)."""
        for worker in self.workers.values():
            _close(worker.tasks, worker.results)
        if self.template is not None and self.template.sock is not None:
            self.template.sock.close()

    def _finish(self, worker: _Worker, *, kill: str | None = None) -> str:
        """End ``worker`` (``kill``: saying why) and wait for it; how it ended, as a cause."""
        self.workers.pop(worker.results, None)
        _close(worker.tasks, worker.results)
        if kill is not None:
            worker.ended = kill
            _kill(worker.pid)
        if self.template is not None:
            status = self.template.status(worker)
        else:  # forked here: one that does not end within GRACE (it runs on) is ended
            status = _reaped(worker.pid, functools.partial(self.end, worker, _PIPE_CLOSED))
        return self._how(worker, status)

    def end(self, worker: _Worker, why: str) -> None:
        """Kill ``worker``, which is not answering as it should, saying why."""
        worker.ended = worker.ended or why
        _kill(worker.pid)

    def _how(self, worker: _Worker, status: int | None) -> str:
        offset = worker.seat * WORDS
        if words := bytes(self.words[offset : offset + WORDS]).split(b"\0", 1)[0]:
            return words.decode("utf-8", "replace")
        return worker.ended or f"the worker process running it {_ended_how(status)}"

    def _stopped(self) -> None:
        """End each worker that a signal stopped (SIGSTOP, SIGTSTP...): it would never answer."""
        if self.template is not None:
            self.template.look()
            return
        for worker in list(self.workers.values()):
            try:
                pid, status = os.waitpid(worker.pid, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                continue
            if pid and os.WIFSTOPPED(status):
                self.end(worker, _stopped_by(os.WSTOPSIG(status)))

    def _receive(self, worker: _Worker) -> Any:
        """The next reply of ``worker``, or None when it ended (or sent what is not belt's)."""
        try:
            return _receive(worker.results)
        except Exception:
            self.end(worker, "something in its worker process wrote to the pipe belt reads")
            return None

    # -- items ----------------------------------------------------------------------------------

    def run(self, lost: Lost = None) -> Iterator[Any]:
        """``step(*item)`` of each item in order; a lost one is ``lost(item, cause)``, or raised.

        Stopping early (closing the iterator, as ``-x`` and Ctrl-C do) starts nothing more."""
        count = len(self.items)
        pending: deque[int] = deque(range(count))
        done: dict[int, tuple[bool, Any]] = {}
        given = 0
        seats = list(range(min(self.jobs, count)))
        for seat in seats:
            self._spawn(seat)
        for _ in range(2):
            for worker in list(self.workers.values()):
                self._hand(worker, pending)
        while given < count:
            if given in done:
                ok, value = done.pop(given)
                given += 1
                if not ok:
                    raise value
                yield value
                continue
            if self.stop[0]:  # a worker took a Ctrl-C before this process did: it starts no more
                raise KeyboardInterrupt
            free = sorted(set(seats) - {w.seat for w in self.workers.values()})
            while pending and free:
                worker = self._spawn(free.pop(0))
                self._hand(worker, pending)
                self._hand(worker, pending)
            watched: list[Any] = list(self.workers)
            if self.template is not None and self.template.sock is not None:
                watched.append(self.template.sock)
            ready, _, _ = select.select(watched, [], [], POLL)
            if not ready:
                self._stopped()
                continue
            for fd in ready:
                if self.template is not None and fd is self.template.sock:
                    self.template.look()
                    continue
                if fd not in self.workers:
                    continue
                worker = self.workers[fd]
                reply = self._receive(worker)
                if reply is None:  # it ended: the item it ran fails, the rest go back
                    cause = self._finish(worker)
                    if worker.held and worker.held[0]:
                        index = worker.held[0].pop(0)
                        done[index] = self._outcome("lost", index, cause, lost)
                    self._requeue(worker, pending)
                    continue
                kind, index, value, retiring, refused = reply
                self.refused.update(refused)
                if worker.held and worker.held[0] and worker.held[0][0] == index:
                    worker.held[0].pop(0)
                    if not worker.held[0]:
                        worker.held.popleft()
                        if not retiring:
                            self._hand(worker, pending)
                done[index] = self._outcome(kind, index, value, lost)
                if retiring:
                    self._finish(worker)
                    self._requeue(worker, pending)

    def _outcome(self, kind: str, index: int, value: Any, lost: Lost) -> tuple[bool, Any]:
        if kind == "done":
            return True, value
        if kind == "lost":
            if lost is None:
                name = str(self.items[index][0]) if self.items[index] else f"item {index}"
                return False, BeltError(f"{value} (while running {name})")
            return True, lost(self.items[index], value)
        error = _exception(value)
        if lost is None or isinstance(error, BeltError):  # belt's own error ends the run
            return False, error
        return True, lost(self.items[index], f"its worker process raised {_last_line(value[1])}")

    def _hand(self, worker: _Worker, pending: deque[int]) -> None:
        if not pending or self.step is None:
            return
        size = max(1, min(self.handful(len(pending)), len(pending)))
        indices = [pending.popleft() for _ in range(size)]
        worker.held.append(indices)
        with contextlib.suppress(OSError):  # it ended: its end of the pipe says so
            _send(worker.tasks, ("run", indices, self.refused))

    def _requeue(self, worker: _Worker, pending: deque[int]) -> None:
        """Put back the items ``worker`` held and did not begin, first in line."""
        rest = [index for handful in worker.held for index in handful]
        worker.held.clear()
        pending.extendleft(reversed(rest))

    # -- calls ----------------------------------------------------------------------------------

    def call(self, func: Callable[..., Any], args: tuple[Any, ...], *, seconds: float) -> Reply:
        """``func(*args)`` in a worker, ended past ``seconds`` (in a thread where none can fork)."""
        if not can_fork():
            outcome = loader.in_thread(functools.partial(func, *args), seconds, name="belt-call")
            if outcome is None:
                return Reply(problem=f"it did not finish within {seconds:g} s", timed_out=True)
            ok, value = outcome
            return Reply(value) if ok else Reply(problem=f"raised {type(value).__name__}: {value}")
        worker = next(iter(self.workers.values()), None) or self._spawn(0)
        started = time.monotonic()
        with contextlib.suppress(OSError):  # it ended: its end of the pipe says so
            _send(worker.tasks, ("call", func, args, self.refused))
        while True:
            left = seconds - (time.monotonic() - started)
            ready, _, _ = select.select([worker.results], [], [], max(0.0, min(left, POLL)))
            if ready:
                break
            if left <= 0:
                why = f"it did not finish within {seconds:g} s; belt ended its worker process"
                return Reply(problem=self._finish(worker, kill=why), timed_out=True)
            self._stopped()
        if (reply := self._receive(worker)) is None:
            return Reply(problem=self._finish(worker))
        kind, _, value, retiring, refused = reply
        self.refused.update(refused)
        if retiring:
            self._finish(worker)
        if kind == "done":
            return Reply(value)
        return Reply(problem=value if kind == "lost" else f"raised {_last_line(value[1])}")

    def failed_imports(self) -> list[BeltError]:
        """The preloaded modules' failed imports, as errors with their exit codes."""
        return [_ERRORS.get(code, BeltError)(message) for code, message in self.problems.values()]


# -- the template -----------------------------------------------------------------------------


class _Template:
    """belt's side of the process that imports the plan's modules and forks workers."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.pid = 0
        self.sock: socket.socket | None = None  # None: the template is not running
        self.statuses: dict[int, int] = {}  # wait statuses of reaped workers not yet asked for

    def start(self) -> None:
        """Fork the template until it is ready, without the modules that ended or held it."""
        while not self._started():
            pass

    def _started(self) -> bool:
        supervisor = self.supervisor
        ours, theirs = socket.socketpair()
        pid = _fork()
        if pid == 0:
            ours.close()
            supervisor._leave_owner()
            _template(supervisor, theirs)
        theirs.close()
        self.pid, self.sock = pid, ours
        loading: tuple[str, float, str] | None = None
        until = 0.0
        while True:
            timeout = None if loading is None else max(0.0, until - time.monotonic())
            ready, _, _ = select.select([ours], [], [], timeout)
            if not ready and loading is not None:
                key, seconds, where = loading
                reason = f"did not finish within {seconds:g} s"
                supervisor.refused[key] = reason
                supervisor.problems[key] = (5, f"{where}: importing {key} {reason}")
                self.close(kill=True)
                return False
            if (message := _receive_socket(ours)) is None:
                how = _ended_how(self.close(kill=True))
                if loading is None:
                    raise BeltError(f"the process that starts belt's workers {how}")
                key, _, where = loading
                supervisor.skip.add(key)
                problem = f"{where}: importing {key} ended the process: it {how}"
                supervisor.problems[key] = (5, problem)
                return False
            if message[0] == "loading":
                loading = message[1:]
                until = time.monotonic() + message[2]
            elif message[0] == "loaded":
                loading = None
                if message[2] is not None:
                    supervisor.problems[message[1]] = message[2]
            elif message[0] == "ready":
                return True

    def close(self, *, kill: bool = False) -> int | None:
        """End the template (``kill``: at once, else after ``GRACE``); its wait status."""
        if kill:
            _kill(self.pid)
        self._drop_socket()
        return _reaped(self.pid, functools.partial(_kill, self.pid))

    def fork(self, seat: int, tasks: int, results: int) -> int:
        """A new worker's pid, in ``seat`` on the pipe ends ``tasks`` and ``results``."""
        for again in (True, False):
            with contextlib.suppress(OSError):
                if self.sock is not None:
                    socket.send_fds(self.sock, [_SEAT.pack(seat)], [tasks, results])
                    while (message := self._take()) is not None:
                        if message[0] == "forked":
                            return int(message[1])
            if again:
                self.close(kill=True)
                self.start()
        raise BeltError("cannot start a worker process for the user's code")

    def _drop_socket(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _take(self) -> Any:
        """What the template says next, taken in; None once it ended."""
        message = _receive_socket(self.sock) if self.sock is not None else None
        if message is None:
            self._drop_socket()
        elif message[0] == "ended":
            self.statuses[message[1]] = message[2]
        elif message[0] == "stopped":
            for worker in self.supervisor.workers.values():
                if worker.pid == message[1]:
                    self.supervisor.end(worker, _stopped_by(message[2]))
        return message

    def look(self) -> None:
        """Take in whatever the template has said, without waiting."""
        while self.sock is not None and select.select([self.sock], [], [], 0)[0]:
            self._take()

    def status(self, worker: _Worker) -> int | None:
        """How ``worker`` ended, as the template saw it (ended by belt after ``GRACE``)."""
        deadline = time.monotonic() + GRACE
        killed = worker.ended is not None
        while worker.pid not in self.statuses:
            left = deadline - time.monotonic()
            if left <= 0:
                if killed:
                    return None  # the template is gone, or stuck
                self.supervisor.end(worker, _PIPE_CLOSED)
                killed = True
                deadline = time.monotonic() + 5 * GRACE
                continue
            if self.sock is None:
                return None
            if select.select([self.sock], [], [], left)[0]:
                self._take()
        return self.statuses.pop(worker.pid)


_PIPE_CLOSED = (
    "the worker process running it closed its pipe to belt and did not end; belt ended it"
)


def _template(supervisor: Supervisor, sock: socket.socket) -> NoReturn:
    """The template process: import the plan's modules, then fork a worker for each request."""
    with contextlib.suppress(BaseException):  # belt is gone, or failed here: end quietly
        _become_child(supervisor.owner)
        for item in (supervisor.preload or list)():
            if item.key in supervisor.skip or item.key in supervisor.refused:
                continue
            _send(sock.fileno(), ("loading", item.key, item.seconds, item.where))
            problem: tuple[int, str] | None = None
            try:
                item.load()
            except BeltError as exc:
                problem = (int(exc.exit_code), exc.message)
            except BaseException as exc:  # whatever the user's module does on import
                problem = (5, f"importing {item.key} failed: {type(exc).__name__}: {exc}")
            _send(sock.fileno(), ("loaded", item.key, problem))
        gc.freeze()
        wake, woken = os.pipe()
        os.set_blocking(woken, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
        _send(sock.fileno(), ("ready",))
        me = os.getpid()
        while True:
            ready, _, _ = select.select([sock.fileno(), wake], [], [])
            if wake in ready:
                os.read(wake, 4096)
                _reap_all(sock)
            if sock.fileno() in ready:
                data, fds, _, _ = socket.recv_fds(sock, _SEAT.size, 2)
                if not data or len(fds) != 2:
                    break
                (seat,) = _SEAT.unpack(data)
                pid = _fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _close(wake, woken)
                    sock.close()
                    _serve(supervisor, fds[0], fds[1], seat, me)
                _close(*fds)
                _send(sock.fileno(), ("forked", pid))
    os._exit(0)


def _reap_all(sock: socket.socket) -> None:
    """In the template: say how each worker that ended (or stopped) did."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            return
        if not pid:
            return
        if os.WIFSTOPPED(status):
            _send(sock.fileno(), ("stopped", pid, os.WSTOPSIG(status)))
        else:
            _send(sock.fileno(), ("ended", pid, status))


# -- a worker ---------------------------------------------------------------------------------


class _PipeClosed(Exception):
    """The worker's pipe to belt is closed (or is no longer the pipe)."""


class _Seat:
    """A worker's side: its pipe ends, checked before each use, and what fds 0-2 were."""

    def __init__(self, supervisor: Supervisor, tasks: int, results: int, seat: int) -> None:
        self.supervisor = supervisor
        self.tasks = tasks
        self.results = results
        self.seat = seat
        self.pipes = {fd: loader.fd_identity(fd) for fd in (tasks, results)}
        self.standard = {fd: loader.fd_identity(fd) for fd, _ in _STANDARD}

    def check_pipes(self) -> None:
        for fd, known in self.pipes.items():
            if known is None or loader.fd_identity(fd) != known:
                raise _PipeClosed(
                    f"it closed the pipe between its worker process and belt (fd {fd}), "
                    "which ended the worker process"
                )

    def receive(self) -> Any:
        self.check_pipes()
        try:
            return _receive(self.tasks)
        except OSError:
            self.check_pipes()
            raise

    def send(self, reply: tuple[Any, ...]) -> None:
        self.check_pipes()
        try:
            data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a result that cannot cross to belt
            kind, index = reply[0], reply[1]
            text = f"{type(exc).__name__}: {exc} (its {'result' if kind == 'done' else 'error'})"
            data = pickle.dumps(("raised", index, (None, text), *reply[3:]))
        _write(self.results, _LENGTH.pack(len(data)) + data)

    def misbehaved(self) -> str | None:
        """Why the case just run fails: fds 0-2 closed or replaced, or threads left running."""
        self.check_pipes()
        for fd, name in _STANDARD:
            if loader.fd_identity(fd) != self.standard[fd]:
                return f"it closed or replaced {name} (fd {fd}) of its worker process"
        main = threading.main_thread()
        left = [t for t in threading.enumerate() if t is not main and not t.daemon]
        deadline = time.monotonic() + THREAD_GRACE
        for thread in left:
            thread.join(max(0.0, deadline - time.monotonic()))
        running = [t.name for t in left if t.is_alive()]
        if running:
            more = f" and {len(running) - 3} more" if len(running) > 3 else ""
            names = ", ".join(running[:3]) + more
            return (
                f"it left {len(running)} thread(s) running that are not daemon threads ({names}); "
                "a handler must not leave threads behind"
            )
        return None

    def spent(self) -> bool:
        """Whether the worker should end: it holds a thread belt did not keep."""
        main = threading.main_thread()
        kept = self.supervisor.spare()
        return any(t is not main and t not in kept and t.is_alive() for t in threading.enumerate())

    def one(self, index: int | None, run: Callable[[], Any]) -> bool:
        """Run one item or call and send its reply; whether the worker ends after it."""
        retiring = False
        try:
            reply: tuple[Any, ...] = ("done", index, run())
        except BaseException as exc:  # whatever the user's code raised that reached here
            reply = ("raised", index, _exception_text(exc))
            retiring = not isinstance(exc, Exception)
        if (cause := self.misbehaved()) is not None:
            reply = ("lost", index, cause)
            retiring = True
        retiring = retiring or self.spent()
        self.send((*reply, retiring, loader.refusals() if retiring else {}))
        return retiring

    def say(self, words: str) -> None:
        """Leave ``words`` where belt reads them once this worker ended."""
        data = words.encode("utf-8", "replace")[: WORDS - 1]
        offset = self.seat * WORDS
        with contextlib.suppress(Exception):
            self.supervisor.words[offset : offset + len(data) + 1] = data + b"\0"


def _serve(supervisor: Supervisor, tasks: int, results: int, seat: int, parent: int) -> NoReturn:
    """A worker: run and answer what belt hands it until its pipe ends or a case spoils it."""
    try:
        _become_child(parent)
        # Ctrl-C reaches every process of the group: a worker ends what it runs and tells the
        # others and belt (which may take its own in later) to start nothing more.
        signal.signal(signal.SIGINT, lambda *_: supervisor.stop.__setitem__(0, 1))
        me = _Seat(supervisor, tasks, results, seat)
    except BaseException:
        os._exit(70)
    try:
        while (message := me.receive()) is not None:
            for key, reason in message[-1].items():
                loader.refuse(key, reason)
            if message[0] == "call":
                retiring = me.one(None, functools.partial(message[1], *message[2]))
            else:
                step, retiring = supervisor.step, False
                assert step is not None
                for index in message[1]:
                    if retiring or supervisor.stop[0]:
                        break  # it ends, or belt stopped early and reads nothing more
                    retiring = me.one(index, functools.partial(step, *supervisor.items[index]))
            if retiring:
                break
    except _PipeClosed as closed:
        me.say(str(closed))
    except BaseException as exc:
        if not isinstance(exc, OSError):  # an OSError: belt is gone; nobody listens
            me.say(f"belt's worker process failed: {type(exc).__name__}: {exc}")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(0)


def _become_child(parent: int) -> None:
    """In a child: ignore Ctrl-C, die with ``parent``, read /dev/null, write stdout to stderr."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if (request := dies_with(parent)) is not None:
        request()
    with contextlib.suppress(OSError):
        fd = os.open(os.devnull, os.O_RDONLY)
        if fd != 0:
            os.dup2(fd, 0)
            os.close(fd)
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the process's life
    with contextlib.suppress(OSError):
        os.dup2(2, 1)


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """Linux's prctl(2), found before any fork (a ``preexec_fn`` must not load it); else None."""
    with contextlib.suppress(OSError, AttributeError):
        if sys.platform.startswith("linux"):
            return cast("Callable[..., int]", ctypes.CDLL(None, use_errno=True).prctl)
    return None


def dies_with(parent: int) -> Callable[[], None] | None:
    """What a child runs first: SIGKILL when its parent thread dies, at once if it already has
    (Linux; None elsewhere)."""
    if (prctl := _prctl()) is None:
        return None

    def request() -> None:
        prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return request


# -- small parts ------------------------------------------------------------------------------


def _fork() -> int:
    # Python 3.12 warns of a fork in a process with threads (pytest's, a server's): the child
    # runs belt's code, which takes no lock another thread may hold.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _reaped(pid: int, overrun: Callable[[], None]) -> int | None:
    """Wait for ``pid`` (``overrun()`` ends it past ``GRACE``): its wait status, None if unknown."""
    deadline = time.monotonic() + GRACE
    flags = os.WNOHANG
    while True:
        try:
            done, status = os.waitpid(pid, flags)
        except ChildProcessError:
            return None
        if done:
            return status
        if flags and time.monotonic() > deadline:
            overrun()
            flags = 0  # ended now: wait for it
        else:
            time.sleep(0.0005)


def _ended_how(status: int | None) -> str:
    """How a process ended, from its wait status (None: not known)."""
    if status is None:
        return "ended (how is not known)"
    if os.WIFSIGNALED(status):
        return f"was killed by {_signal(os.WTERMSIG(status))}"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"ended (wait status {status})"


def _stopped_by(number: int) -> str:
    return f"the worker process running it was stopped by {_signal(number)}; belt ended it"


def _signal(number: int) -> str:
    with contextlib.suppress(ValueError):
        return f"signal {number} ({signal.Signals(number).name})"
    return f"signal {number} (unknown)"


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _send(fd: int, message: Any) -> None:
    data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    _write(fd, _LENGTH.pack(len(data)) + data)


def _receive(fd: int) -> Any:
    """The next message on ``fd``, None at its end; ValueError when what comes is not one."""
    if (head := _read(fd, _LENGTH.size)) is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MESSAGE_MAX:
        raise ValueError("not a message")
    data = _read(fd, length)
    return None if data is None else pickle.loads(data)


def _receive_socket(sock: socket.socket) -> Any:
    with contextlib.suppress(OSError, ValueError):
        return _receive(sock.fileno())
    return None


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "an error"


def _exception_text(exc: BaseException) -> tuple[bytes | None, str]:
    """What a step raised, pickled when it can be, and its traceback as text."""
    blob: bytes | None = None
    with contextlib.suppress(Exception):
        blob = pickle.dumps(exc, pickle.HIGHEST_PROTOCOL)
    return blob, "".join(traceback.format_exception(exc))


def _exception(value: tuple[bytes | None, str]) -> BaseException:
    """What a step raised in a worker, in belt's process, its traceback in a note."""
    blob, text = value
    exc: object = None
    with contextlib.suppress(Exception):  # its class cannot be found here
        exc = pickle.loads(blob) if blob is not None else None
    if not isinstance(exc, BaseException):
        exc = _Raised(_last_line(text))
    exc.add_note(f"(in a worker process)\n{text}")
    return exc
