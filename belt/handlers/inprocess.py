"""In-process handlers: ``py:MODULE:FUNC``, called as a webhook is POSTed.

The one convention for every caller of a user's Python handler: it gets the JSON payload as a
dict (or a LifecycleHookPayload when its first parameter is annotated so) and answers as a
webhook's body does (``None``, a dict or a LifecycleHookResponse), in a worker thread under a
total deadline. An overrun fails as a webhook's timeout does (the thread is never waited for);
an exception, or an answer that is not a response, as a webhook's HTTP 500 does.
``belt serve --handler`` runs the same convention on its own threads: change both together.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from belt.display.text import describe, message_of, printable, short
from belt.errors import BeltError, InvalidInput
from belt.handlers.webhook import TIMED_OUT, Answer, WebhookResult, checked_answer, encode_payload
from belt.reading.strictjson import unsendable
from belt.usercode.loader import (
    asks_for,
    call_user,
    fd_identity,
    find_named_file,
    is_file_reference,
    load_callable,
    locate_module,
)
from belt.wire.platform import LifecycleHookPayload, LifecycleHookResponse
from belt.wire.validate import (
    IN_PROCESS_PREFIX,
    POLICY_PREFIX,
    model_problems,
)

Handler = Callable[..., Any]

ERROR_MESSAGE_LIMIT = 200  # characters of a handler's exception message a row keeps


def reference(spec: str) -> str:
    """The ``MODULE:FUNC`` of a ``py:MODULE:FUNC`` handler (``MODULE:FUNC`` as it is)."""
    return spec.removeprefix(IN_PROCESS_PREFIX)


def load_handler(spec: str, *, where: str, root: str | None = None) -> Handler:
    """Import the callable of ``py:MODULE:FUNC`` (or ``MODULE:FUNC``) ``where`` names."""
    if spec.startswith(POLICY_PREFIX):
        raise InvalidInput(
            f"{where}: {spec} is a policy file, which only a scenario's hook runs as a handler; "
            "give --policy FILE here"
        )
    return load_callable(reference(spec), option=where, root=root)


@dataclass(frozen=True)
class Located:
    """Where an in-process handler a file names is loaded from (``root``: a dotted module's
    directory; ``warning``: a path found from the current directory only)."""

    spec: str
    root: str | None = None
    warning: str | None = None

    def to_wire(self) -> dict[str, str]:
        """As the store's private part keeps it (without the warning)."""
        return {"spec": self.spec, **({"root": self.root} if self.root else {})}

    @classmethod
    def from_wire(cls, raw: Any) -> Located:
        """From the store's private part (KeyError or TypeError when it is not one)."""
        root = raw.get("root")
        return cls(str(raw["spec"]), str(root) if root else None)


def locate_handler(spec: str, directory: Path, *, where: str) -> Located:
    """Where the handler ``spec`` a file of ``directory`` names loads from (InvalidInput: none)."""
    if spec.startswith(POLICY_PREFIX):
        prefix, written, suffix = POLICY_PREFIX, spec.removeprefix(POLICY_PREFIX), ""
    else:
        module, _, func = reference(spec).partition(":")
        if not is_file_reference(module):
            file, root = locate_module(module, directory)
            if file is not None:
                return Located(f"{IN_PROCESS_PREFIX}{file}:{func}")
            return Located(spec, root=root)
        prefix, written, suffix = IN_PROCESS_PREFIX, module, f":{func}"
    found = find_named_file(
        written, directory, where=where, spell=lambda path: f"{prefix}{path}{suffix}"
    )
    return Located(f"{prefix}{found.path}{suffix}", warning=found.warning)


def wants_model(func: Handler) -> bool:
    """Whether ``func``'s first parameter asks for a LifecycleHookPayload, not the JSON object."""
    return asks_for(func, LifecycleHookPayload)


ALLOW = LifecycleHookResponse()
"""The response of a handler that answers None: one, never changed."""


def read_value(value: Any) -> Answer:
    """A handler's return value read as a webhook's body is; unknown keys are warnings."""
    if value is None:
        return Answer(ALLOW)
    if isinstance(value, LifecycleHookResponse):
        try:
            value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        except Exception as exc:  # an override pydantic cannot serialise
            return Answer(None, f"the response cannot be sent as JSON: {type(exc).__name__}")
    if not isinstance(value, dict):
        return Answer(
            None, f"expected a dict, a LifecycleHookResponse or None, got {describe(value)}"
        )
    if (problem := unsendable(value)) is not None:
        return Answer(
            None, f"it is not JSON a webhook could send: {short(printable(problem), 120)}"
        )
    return checked_answer(value)


@dataclass(slots=True)
class _Call:
    """One call of a handler: what it returned or raised."""

    func: Handler
    argument: Any
    value: Any = None
    error: BaseException | None = None

    def run(self) -> None:
        """Call the handler; keep what it returned or raised."""
        try:
            self.value = call_user(self.func, self.argument)
        except BaseException as exc:  # a handler's failure, whatever it is, is its answer
            self.error = exc


_GO = b"c"  # hands a worker its ``call``, and answers it; any other byte stops the worker


class _Worker:
    """A daemon thread that runs calls one at a time, each handed over and answered by a byte on
    a pipe: ``os.write`` lets go of the GIL before it wakes the other thread (a lock or a queue
    wakes it with the GIL held). The caller writes ``go``, reads ``back``; the thread closes all.

    A handler can close any of the four ends, and the next file opened (a new worker's pipe, say)
    takes its number: so after each call the thread checks that every end is still its pipe, as
    the caller does after an import and before it reuses an idle worker. If one is not, the
    worker is ``broken``: it answers if it still can, ends, and never touches an end again (the
    caller takes a new worker)."""

    def __init__(self) -> None:
        self.call: _Call | None = None
        self.busy = False
        self.broken = False
        self.ends = os.pipe() + os.pipe()
        self.go, self.back = self.ends[1], self.ends[2]
        self.pipes = [fd_identity(fd) for fd in self.ends]
        self.answered = select.poll()
        self.answered.register(self.back, select.POLLIN)
        self.thread = threading.Thread(target=self._loop, name="belt-py-handler", daemon=True)
        self.thread.start()

    def _owned(self) -> list[bool]:
        """Whether each end is still this worker's pipe."""
        return [fd_identity(fd) == pipe for fd, pipe in zip(self.ends, self.pipes, strict=True)]

    def check(self) -> bool:
        """After user code ran outside its calls (an import): whether every end is still this
        worker's pipe (if not, it is ``broken`` from now on)."""
        self.broken = self.broken or not all(self._owned())
        return not self.broken

    def _loop(self) -> None:
        given, answer = self.ends[0], self.ends[3]
        try:
            while os.read(given, 1) == _GO:
                self.busy = True
                self.call.run()  # type: ignore[union-attr]  # it raises nothing
                self.busy = False
                if not all(owned := self._owned()):
                    self.broken = True  # before the answer: the caller reads it after
                    if owned[3]:
                        os.write(answer, _GO)
                    return
                os.write(answer, _GO)
        except OSError:  # an end closed by a handler in another thread, or no one reads back
            return
        self.close()

    def stop(self) -> None:
        """Let the thread end once its current call (if any) returns."""
        if not self.broken:
            with contextlib.suppress(OSError):
                os.write(self.go, b"\0")

    def close(self) -> None:
        """Close the ends that are still this worker's pipes: a number another file took is not
        belt's to close."""
        for fd, owned in zip(self.ends, self._owned(), strict=True):
            if owned:
                with contextlib.suppress(OSError):
                    os.close(fd)


IDLE_WORKERS = 8  # idle worker threads kept for the process's next simulation (belt test)

_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _forget_idle() -> None:
    """In a process just forked: the idle workers' threads are not in it; their pipes go."""
    for worker in _idle:
        worker.close()
    _idle.clear()


os.register_at_fork(after_in_child=_forget_idle)


class InProcess:
    """Calls ``py:`` handlers for one simulation: a worker per calling thread, each handler
    imported once (``preloaded`` ones not again)."""

    def __init__(
        self,
        preloaded: dict[str, Handler] | None = None,
        *,
        load: Callable[[str], Handler] | None = None,
    ) -> None:
        self.handlers: dict[str, Handler] = dict(preloaded or {})
        self.load = load or _load
        self._workers: dict[int, _Worker] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Give the worker threads back, idle, for the next simulation (stop those not kept)."""
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        with _idle_lock:
            kept = [w for w in workers if not (w.busy or w.broken)][: IDLE_WORKERS - len(_idle)]
            _idle.extend(kept)
        for worker in workers:
            if worker not in kept:
                worker.stop()

    def handler(self, spec: str) -> Handler:
        """The callable of ``spec``, imported on first use (a BeltError when it cannot be)."""
        func = self.handlers.get(spec)  # one read of a dict: no lock for what is loaded
        if func is None:
            func = self.load(spec)  # a module's import is user code: it may close a pipe end
            with self._lock:
                self.handlers[spec] = func
                workers = list(self._workers.values())
            for worker in workers:
                worker.check()
        return func

    def _worker(self) -> _Worker:
        key = threading.get_ident()
        worker = self._workers.get(key)  # only this thread sets its own
        if worker is None:  # an idle one of an earlier simulation, else a new one
            with _idle_lock:
                idle = _idle.pop() if _idle else None
            if idle is not None and not idle.check():  # user code ran since its last call
                idle = None
            with self._lock:
                worker = self._workers[key] = idle or _Worker()
        return worker

    def _abandon(self, worker: _Worker) -> None:
        """Give up a worker stuck in a call: the next call gets a new one."""
        with self._lock:
            self._workers = {key: kept for key, kept in self._workers.items() if kept is not worker}
        worker.stop()

    def deliver(
        self, spec: str, payload: Mapping[str, object], *, timeout: float, label: str | None = None
    ) -> WebhookResult:
        """Call the handler of ``spec`` within ``timeout`` seconds; a failure is returned as a
        webhook's would be, naming it ``label`` (by default ``spec``)."""
        label = label or spec
        func = _loaded(self.handler, spec, label)
        if isinstance(func, WebhookResult):
            return func
        return self.call(label, func, payload, timeout=timeout)

    def call(
        self,
        label: str,
        func: Handler,
        payload: Mapping[str, object],
        *,
        timeout: float,
        message_limit: int | None = ERROR_MESSAGE_LIMIT,
    ) -> WebhookResult:
        """Call ``func`` in this thread's worker within ``timeout`` seconds, as ``deliver`` does
        (an exception's message cut to ``message_limit`` characters, None: whole)."""
        if isinstance(call := _prepared(label, func, payload), WebhookResult):
            return call
        started = time.perf_counter()
        worker = self._hand(call)
        try:
            returned = bool(worker.answered.poll(max(timeout, 0.0) * 1000))
            lost = returned and os.read(worker.back, 1) != _GO
        except OSError:
            returned = lost = True
        elapsed = round((time.perf_counter() - started) * 1000)
        if not returned or lost:
            self._abandon(worker)
            error = f"{label} {TIMED_OUT} {timeout:g} s"
            error = f"{label} closed the pipe belt reads its answer from" if lost else error
            return WebhookResult(None, "", None, error, elapsed)
        return _answered(label, call, elapsed, message_limit)

    def _hand(self, call: _Call) -> _Worker:
        """Hand ``call`` to this thread's worker; one whose pipe a handler closed is replaced."""
        while True:
            worker = self._worker()
            worker.call = call
            if not worker.broken:
                with contextlib.suppress(OSError):
                    os.write(worker.go, _GO)
                    return worker
            self._abandon(worker)


def _prepared(label: str, func: Handler, payload: Mapping[str, object]) -> _Call | WebhookResult:
    """The call of ``func`` on ``payload``, or the failed result."""
    # The exact JSON a webhook would be sent, decoded afresh: the handler cannot change the
    # payload the caller keeps.
    try:
        decoded = from_json(encode_payload(payload))
        return _Call(
            func, LifecycleHookPayload.model_validate(decoded) if wants_model(func) else decoded
        )
    except ValidationError as exc:
        problem = "; ".join(model_problems(exc))
        error = f"{label} wants a LifecycleHookPayload and the payload is not one: {problem}"
    except (TypeError, ValueError) as exc:  # a lone surrogate, a value JSON cannot hold
        error = f"the payload cannot be sent as JSON: {type(exc).__name__}"
    return WebhookResult(None, "", None, error, 0)


def _answered(label: str, call: _Call, duration: int, message_limit: int | None) -> WebhookResult:
    """The result of a returned call: its answer read as a webhook's body, or what it raised."""
    if call.error is not None:
        kind = type(call.error).__name__
        detail = printable(message_of(call.error))
        if message_limit is not None:
            detail = short(detail, message_limit)
        error = f"{label} raised {kind}: {detail}" if detail else f"{label} raised {kind}"
        return WebhookResult(500, "", None, error, duration, exception=call.error)
    if call.value is None:  # allow, the most common answer: nothing to read
        return WebhookResult(200, "", ALLOW, None, duration)
    answer = read_value(call.value)
    if answer.problem is not None:
        problem = answer.problem
        error = f"{label} answered with a body that is not a LifecycleHookResponse: {problem}"
        return WebhookResult(500, "", None, error, duration)
    return WebhookResult(200, "", answer.response, None, duration, answer.warnings)


def deliver_here(spec: str, payload: Mapping[str, object]) -> WebhookResult:
    """:meth:`InProcess.deliver` in a supervised worker: in this thread, with no deadline of its
    own and no exception object kept (the result crosses to belt)."""
    func = _loaded(_load, spec, spec)
    call = func if isinstance(func, WebhookResult) else _prepared(spec, func, payload)
    if isinstance(call, WebhookResult):
        return call
    started = time.perf_counter()
    call.run()
    duration = round((time.perf_counter() - started) * 1000)
    return replace(_answered(spec, call, duration, ERROR_MESSAGE_LIMIT), exception=None)


def _load(spec: str) -> Handler:
    return load_handler(spec, where=spec)


def _loaded(load: Callable[[str], Handler], spec: str, label: str) -> Handler | WebhookResult:
    """The handler of ``spec``, or the failed result naming ``label``."""
    started = time.perf_counter()
    try:
        return load(spec)
    except BeltError as exc:
        duration = round((time.perf_counter() - started) * 1000)
        return WebhookResult(None, "", None, f"cannot load {label}: {exc.message}", duration)


def idle_threads() -> set[threading.Thread]:
    """The threads kept idle for the next simulation (``IDLE_WORKERS``), waiting for a call."""
    with _idle_lock:
        return {worker.thread for worker in _idle}
