"""What decides a hook request: allow everything, a policy file, or a user's Python callable."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from belt.handlers import inprocess
from belt.handlers.inprocess import wants_model
from belt.reading.strictjson import StrictJSONError, check_value
from belt.rules.policy import Policy, Verdict
from belt.wire.platform import HookDecision, LifecycleHookPayload, LifecycleHookResponse
from belt.wire.validate import check_response, model_problems

Decider = Callable[[LifecycleHookPayload], Coroutine[Any, Any, Verdict]]

ALLOW = Verdict(LifecycleHookResponse(decision=HookDecision.ALLOW), None)


HANDLER_TIMEOUT = 10.0  # seconds a ``--handler`` call may take before it is answered with 504

HANDLER_WORKERS = 16
"""Threads that run synchronous handlers (apart from those that serve the API routes)."""


class HandlerFailed(Exception):
    """A user's handler answered no LifecycleHookResponse, or raised SystemExit or Ctrl-C."""


class HandlerTimeout(Exception):
    """A user's handler did not return within its deadline."""


class HandlerPool:
    """The bounded threads synchronous handlers run in, apart from the API routes' threads."""

    def __init__(self, workers: int = HANDLER_WORKERS) -> None:
        self.workers = workers
        self.busy = 0
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="belt-handler")

    def saturated(self) -> bool:
        """True when every thread is running a handler call."""
        return self.busy >= self.workers

    async def run(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run ``func(*args)`` on a pool thread."""

        def call() -> Any:
            with self._lock:
                self.busy += 1
            try:
                return func(*args)
            finally:
                with self._lock:
                    self.busy -= 1

        return await asyncio.wrap_future(self._executor.submit(call))

    def close(self) -> None:
        """Stop taking calls; running ones finish in the background."""
        self._executor.shutdown(wait=False, cancel_futures=True)


async def allow_all(payload: LifecycleHookPayload) -> Verdict:
    """The decider that allows every hook."""
    return ALLOW


class PolicyDecider:
    """A decider that applies a loaded policy; ``now`` decides without a coroutine."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.now = policy.decide

    async def __call__(self, payload: LifecycleHookPayload) -> Verdict:
        return self.policy.decide(payload)


policy_decider: Callable[[Policy], Decider] = PolicyDecider  # a decider applying a policy


def handler_decider(
    func: Callable[..., Any],
    *,
    timeout: float = HANDLER_TIMEOUT,
    pool: HandlerPool | None = None,
    on_raise: Callable[[BaseException], None] | None = None,
) -> Decider:
    """A decider that calls ``func(payload)`` (the posted object, or the model if annotated)
    within ``timeout`` s (HandlerTimeout), a sync one on ``pool``'s threads; SystemExit and
    Ctrl-C become HandlerFailed; another exception goes to ``on_raise`` and on. A sync handler
    that hangs past the deadline holds its thread until it returns."""
    is_async = inspect.iscoroutinefunction(func)
    threads = pool if pool is not None else HandlerPool()
    as_model = wants_model(func)

    async def call(payload: LifecycleHookPayload) -> Any:
        argument: Any = payload if as_model else payload.model_dump(mode="json", exclude_unset=True)
        try:
            if is_async:
                return await func(argument)
            result = await threads.run(func, argument)
            # A callable object with an async __call__ hands back a coroutine.
            return await result if inspect.isawaitable(result) else result
        except (SystemExit, KeyboardInterrupt) as exc:
            raise HandlerFailed(f"the handler raised {type(exc).__name__}") from None
        except Exception as exc:
            if on_raise is not None:
                on_raise(exc)
            raise

    async def decide(payload: LifecycleHookPayload) -> Verdict:
        try:
            async with asyncio.timeout(timeout):
                result = await call(payload)
        except TimeoutError:
            raise HandlerTimeout(f"the handler did not answer within {timeout:g} s") from None
        response, warnings = to_response(result)
        return Verdict(response, None, tuple(warnings))

    return decide


def to_response(result: Any) -> tuple[LifecycleHookResponse, list[str]]:
    """A handler's return value as a response (None: allow; a dict read as a webhook's answer:
    unknown keys ignored, a known key of the wrong shape refused), and a warning per key ignored."""
    if result is None:
        return LifecycleHookResponse(), []
    response, warnings = result, list[str]()
    if isinstance(result, dict):
        try:
            response, warnings = check_response(result)
        except ValidationError as exc:
            problems = "; ".join(model_problems(exc))
            raise HandlerFailed(f"the handler returned an invalid response: {problems}") from None
    if not isinstance(response, LifecycleHookResponse):
        raise HandlerFailed(
            "the handler returned "
            f"{type(result).__name__}; expected a dict, a LifecycleHookResponse or None"
        )
    try:
        check_value(response.model_dump(mode="json", exclude_none=True))
    except StrictJSONError as exc:
        raise HandlerFailed(f"the handler returned an invalid response: {exc}") from None
    return response, warnings


def load_handler(spec: str) -> Callable[..., Any]:
    """Import the ``--handler py:MODULE:FUNC`` (or ``MODULE:FUNC``) callable."""
    return inprocess.load_handler(spec, where="--handler")
