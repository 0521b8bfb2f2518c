"""How an executor runs a tool: ``cmd:COMMAND``, ``py:MODULE:FUNC`` or an http(s) URL.

Each target is given the hook task's input and a deadline, and returns a ToolOutcome; a failure
of the tool is an outcome, never an exception.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from belt.deliveries.effects import url_host
from belt.display.text import message_of, short
from belt.errors import BeltError, UsageError
from belt.executor.inbox import ToolOutcome
from belt.executor.process import run_bounded
from belt.reading.strictjson import StrictJSONError, decode, unsendable
from belt.usercode.loader import asks_for, call_user, in_thread, load_callable
from belt.wire.nexus import HookTaskInput
from belt.wire.validate import check_webhook_url, model_problems

Input = Mapping[str, object]  # a hook task's input
Mark = tuple[str, str] | None  # the environment variable (name, value) a claim marks a run with


@dataclass
class Target:
    """One tool a worker serves: ``cmd:COMMAND``, ``py:MODULE:FUNC`` or an http(s) URL."""

    name: str
    kind: str
    spec: str
    func: Callable[..., Any] | None = None

    @property
    def label(self) -> str:
        """How the target is shown: its kind, and a URL by host only."""
        return f"http {url_host(self.spec)}" if self.kind == "http" else f"{self.kind} {self.spec}"

    def call(self, task_input: Input, timeout: float, *, mark: Mark = None) -> ToolOutcome:
        """Run the tool on ``task_input`` within ``timeout`` seconds; failures are returned."""
        if self.kind == "cmd":
            return run_command(self.spec, task_input, timeout, mark=mark)
        if self.kind == "http":
            return post_input(self.spec, task_input, timeout)
        assert self.func is not None, "a py: target is called once loaded"
        call = functools.partial(called, self.func, task_input)  # in a thread, left behind late
        outcome = in_thread(call, max(timeout, 0.001), name="belt-py-tool")
        if outcome is None:
            return ToolOutcome(timed_out=True)
        returned, value = outcome
        # ``called`` answers every failure of the tool; what still escapes it is one too.
        return value if returned else ToolOutcome(failure=f"raised {type(value).__name__}")


SHAPE = "cmd:COMMAND, py:MODULE:FUNC or an http(s):// URL"
UNKNOWN = f"expected {SHAPE}"


def target_problem(target: str) -> str | None:
    """Why TARGET is not ``SHAPE`` (``UNKNOWN``: none of its kinds), or None; nothing is loaded."""
    if target.startswith("cmd:"):
        return None if target[len("cmd:") :].strip() else "cmd: needs a command"
    if target.startswith("py:"):
        module, sep, func = target[len("py:") :].partition(":")
        return None if sep and module and func else "py: needs MODULE:FUNC"
    if target.startswith(("http://", "https://")):
        return f"the URL {reason}" if (reason := check_webhook_url(target)) else None
    return UNKNOWN


def parse_tool(spec: str, *, load: bool = True) -> Target:
    """Parse ``NAME=TARGET`` (exit 2 if malformed); a ``py:`` function is imported if ``load``."""
    name, sep, target = spec.partition("=")
    name, problem = name.strip(), target_problem(target)
    if not sep or not name or problem == UNKNOWN:
        raise UsageError(f"--tool {spec!r}: expected NAME=TARGET, TARGET being {SHAPE}")
    url = target.startswith("http")
    if problem:  # a URL may hold credentials: its tool is named by its name alone
        raise UsageError(f"--tool {name if url else repr(spec)}: {problem}")
    if target.startswith("cmd:"):
        return Target(name, "cmd", target[len("cmd:") :].strip())
    if url:
        return Target(name, "http", target)
    ref = target[len("py:") :]
    return Target(name, "py", ref, load_callable(ref, option=f"--tool {name}") if load else None)


def parse_tools(specs: Iterable[str], *, load: bool = True) -> dict[str, Target]:
    """Parse every ``--tool NAME=TARGET`` (``load`` as ``parse_tool``); a name twice is exit 2."""
    targets: dict[str, Target] = {}
    for spec in specs:
        target = parse_tool(spec, load=load)
        if target.name in targets:
            raise UsageError(f"--tool {target.name} is given twice")
        targets[target.name] = target
    return targets


OUTPUT_MAX_BYTES = 1024 * 1024
"""The most a tool may answer (stdout, an HTTP body): more is a failure, never read whole."""


def _decode(raw: bytes, where: str) -> ToolOutcome:
    """A tool's answer as its result: strict JSON, else an invalid decision saying why."""
    text = raw.decode("utf-8", "replace")
    if not text.strip():
        return ToolOutcome(invalid=f"{where} is empty; expected the result as JSON")
    try:
        return ToolOutcome(result=decode(raw))
    except StrictJSONError as exc:
        return ToolOutcome(invalid=f"{where} is not JSON ({exc}): {short(text, 120)}")


def run_command(
    command: str, task_input: Input, timeout: float, *, mark: Mark = None
) -> ToolOutcome:
    """Run COMMAND with the input as JSON on stdin; its stdout is the result (``run_bounded``)."""
    try:
        args = shlex.split(command)
    except ValueError as exc:
        return ToolOutcome(failure=f"cannot parse the command: {exc}")
    data = json.dumps(task_input, ensure_ascii=False).encode()
    try:
        done = run_bounded(args, data, timeout=timeout, cap=OUTPUT_MAX_BYTES, mark=mark)
    except OSError as exc:
        return ToolOutcome(failure=f"cannot run {args[0] if args else command!r}: {exc.strerror}")
    if done.timed_out:
        return ToolOutcome(timed_out=True)
    if done.overflowed:
        return ToolOutcome(failure=f"stdout passed {OUTPUT_MAX_BYTES} bytes; the tool was stopped")
    if done.returncode != 0:
        tail = short(done.stderr.decode("utf-8", "replace").strip(), 200) or "no output on stderr"
        return ToolOutcome(failure=f"the command exited with {done.returncode}: {tail}")
    return _decode(done.stdout, "stdout")


def post_input(url: str, task_input: Input, timeout: float) -> ToolOutcome:
    """POST the input to a URL; a 2xx body (up to ``OUTPUT_MAX_BYTES``) is the result."""
    import httpx  # noqa: PLC0415 - loaded when a tool is called over HTTP

    from belt.outgoing.transport import TooLarge, call, read  # noqa: PLC0415 - it loads httpx

    host = url_host(url)
    limit = max(timeout, 0.001)
    try:
        with call("POST", url, json=task_input, timeout=limit) as response:
            raw = read(response, OUTPUT_MAX_BYTES)
    except httpx.TimeoutException:
        return ToolOutcome(timed_out=True)
    except TooLarge:
        return ToolOutcome(failure=f"the body from {host} passed {OUTPUT_MAX_BYTES} bytes")
    except httpx.HTTPError as exc:
        return ToolOutcome(failure=f"cannot reach {host}: {type(exc).__name__}")
    if not response.is_success:
        return ToolOutcome(failure=f"{host} answered HTTP {response.status_code}")
    return _decode(raw, f"the body from {host}")


def called(func: Callable[..., Any], task_input: Input) -> ToolOutcome:
    """Call ``func`` with the input (a dict, or the HookTaskInput it asks for) in this thread."""
    argument: Any = task_input
    if asks_for(func, HookTaskInput):
        try:
            argument = HookTaskInput.model_validate(task_input)
        except ValidationError as exc:
            problems = "; ".join(model_problems(exc))
            return ToolOutcome(failure=f"the input is not a HookTaskInput: {problems}")
    try:
        result = call_user(func, argument)
    except BaseException as exc:  # the tool's failure, whatever it is, is its outcome
        said = message_of(exc)
        return ToolOutcome(failure=f"raised {type(exc).__name__}" + (f": {said}" if said else ""))
    if (problem := unsendable(result)) is not None:
        return ToolOutcome(invalid=f"the function returned what JSON cannot hold: {problem}")
    return ToolOutcome(result=result)


def call_here(reference: str, task_input: Input, *, option: str) -> ToolOutcome:
    """Import the ``py:`` tool ``reference`` and call it here (in a supervisor's worker)."""
    try:
        func = load_callable(reference, option=option)
    except BeltError as exc:
        return ToolOutcome(failure=f"cannot load {reference}: {exc.message}")
    return called(func, task_input)
