"""What decides a hook request: allow everything, a policy file, or a user's Python callable."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from belt.loader import load_callable
from belt.policy import Policy, Verdict
from belt.wire.platform import HookDecision, LifecycleHookPayload, LifecycleHookResponse
from belt.wire.validate import model_problems

Decider = Callable[[LifecycleHookPayload], Awaitable[Verdict]]

ALLOW = Verdict(LifecycleHookResponse(decision=HookDecision.ALLOW), None)


class HandlerResponseError(Exception):
    """A user's handler returned something that is not a LifecycleHookResponse."""


def allow_all() -> Decider:
    """A decider that allows every hook."""

    async def decide(payload: LifecycleHookPayload) -> Verdict:
        return ALLOW

    return decide


def policy_decider(policy: Policy) -> Decider:
    """A decider that applies a loaded policy."""

    async def decide(payload: LifecycleHookPayload) -> Verdict:
        return policy.decide(payload)

    return decide


def handler_decider(func: Callable[..., Any]) -> Decider:
    """A decider that calls ``func(payload)``; a sync callable runs in a worker thread."""
    from starlette.concurrency import run_in_threadpool

    is_async = inspect.iscoroutinefunction(func)

    async def decide(payload: LifecycleHookPayload) -> Verdict:
        if is_async:
            result = await func(payload)
        else:
            result = await run_in_threadpool(func, payload)
            # A callable object with an async __call__ hands back a coroutine.
            if inspect.isawaitable(result):
                result = await result
        return Verdict(to_response(result), None)

    return decide


def to_response(result: Any) -> LifecycleHookResponse:
    """A handler's return value as a response: None is allow, a dict is validated."""
    if result is None:
        return LifecycleHookResponse()
    if isinstance(result, LifecycleHookResponse):
        return result
    if isinstance(result, dict):
        try:
            return LifecycleHookResponse.model_validate(result)
        except ValidationError as exc:
            problems = "; ".join(model_problems(exc))
            raise HandlerResponseError(
                f"the handler returned an invalid response: {problems}"
            ) from None
    raise HandlerResponseError(
        "the handler returned "
        f"{type(result).__name__}; expected a dict, a LifecycleHookResponse or None"
    )


def load_handler(spec: str) -> Callable[..., Any]:
    """Import the ``--handler MODULE:FUNC`` callable."""
    return load_callable(spec, option="--handler")
