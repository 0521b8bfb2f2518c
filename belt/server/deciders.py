"""What decides a hook request: allow everything, a policy file, or a user's Python callable."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from belt.errors import InvalidInput, NotFound, UsageError
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
    """Import ``MODULE:FUNC`` (a dotted module, or a path to a .py file) and return the callable."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(
            f"--handler {spec!r}: expected MODULE:FUNC (e.g. examples/handler.py:decide)"
        )
    if module_name.endswith(".py") or "/" in module_name:
        module = _import_file(Path(module_name))
    else:
        # Like `python -m`, let a module in the working directory be found.
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise NotFound(f"--handler: no module named {module_name!r}") from exc
            raise InvalidInput(f"--handler: importing {module_name} failed: {exc}") from exc
        except Exception as exc:
            raise InvalidInput(f"--handler: importing {module_name} failed: {exc}") from exc
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise NotFound(f"--handler: {module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise InvalidInput(f"--handler: {spec} is not callable")
    func: Callable[..., Any] = found
    return func


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise NotFound(f"--handler: {path}: no such file")
    name = f"belt_handler_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InvalidInput(f"--handler: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise InvalidInput(f"--handler: importing {path} failed: {exc}") from exc
    return module
