"""Firing one event through an agent's hooks, in declaration order, as the platform does."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from belt.deliveries.effects import (
    Outcome,
    chat_hook_event,
    handler_label,
    is_in_process,
    leaves_row,
    outcome,
    takes_effect,
    url_host,
)
from belt.errors import UsageError
from belt.handlers.inprocess import InProcess, Located, load_handler
from belt.handlers.webhook import deliver
from belt.outgoing import tracing
from belt.records.chats import create_chat
from belt.records.interrupts import create_interrupt
from belt.records.messages import Recorder
from belt.rules.policy import load_policy
from belt.wire.catalogue import EVENTS
from belt.wire.dto import InterruptJSON
from belt.wire.enums import ChatStatus
from belt.wire.platform import (
    HookDecision,
    HookHandlerType,
    LifecycleHookConfig,
    LifecycleHookPayload,
    LifecycleHookResponse,
)
from belt.wire.validate import POLICY_PREFIX, check_webhook_url, in_process_problem

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from belt.handlers.inprocess import Handler, InProcess
    from belt.store import Store


@dataclass(frozen=True)
class Route:
    """``--route URL_PREFIX=TARGET``: a ``py:`` handler, or a URL that takes the prefix's place."""

    prefix: str
    target: str

    def destination(self, url: str) -> str:
        """Where a webhook of ``url`` (which starts with the prefix) is delivered."""
        return self.target if is_in_process(self.target) else self.target + url[len(self.prefix) :]


def parse_route(spec: str) -> Route:
    """Parse ``URL_PREFIX=TARGET``; a malformed one is a usage error (exit 2)."""
    prefix, sep, target = spec.partition("=")
    shape = "URL_PREFIX=TARGET, TARGET being py:MODULE:FUNC or an http(s):// URL"
    if not sep or not prefix or not target:
        raise UsageError(f"--route {spec!r}: expected {shape}")
    if not prefix.startswith(("http://", "https://")):
        raise UsageError(f"--route {spec!r}: the prefix must start with http:// or https://")
    if is_in_process(target):
        if reason := in_process_problem(target, allowed=True):
            raise UsageError(f"--route {spec!r}: {reason}")
    elif reason := check_webhook_url(target):
        raise UsageError(f"--route {spec!r}: the target {reason} (or is py:MODULE:FUNC)")
    return Route(prefix, target)


def parse_routes(specs: list[str]) -> list[Route]:
    """Parse every ``--route``; a prefix given twice is a usage error."""
    routes: list[Route] = []
    for spec in specs:
        route = parse_route(spec)
        if any(known.prefix == route.prefix for known in routes):
            raise UsageError(f"--route: the prefix {route.prefix} is given twice")
        routes.append(route)
    return routes


def load_handlers(
    hooks: list[LifecycleHookConfig],
    routes: list[Route],
    *,
    source: str,
    located: dict[int, Located],
) -> dict[str, Handler]:
    """Import every ``py:`` handler and ``policy:`` file that hooks and routes name, by spec."""
    wanted: list[tuple[Located, str]] = [
        (located.get(index) or Located(str(hook.handler)), f"{source}: {hook.handler}")
        for index, hook in enumerate(hooks)
        if hook.type == HookHandlerType.WEBHOOK and is_in_process(str(hook.handler))
    ]
    wanted += [
        (Located(route.target), f"--route {route.prefix}")
        for route in routes
        if is_in_process(route.target)
    ]
    loaded: dict[str, Handler] = {}
    for place, where in wanted:
        loaded[place.spec] = loaded.get(place.spec) or load_located(place, where=where)
    return loaded


def load_located(place: Located, *, where: str) -> Handler:
    """The handler ``place`` names: a ``py:`` callable, or a ``policy:`` file's decisions."""
    if place.spec.startswith(POLICY_PREFIX):
        policy = load_policy(Path(place.spec[len(POLICY_PREFIX) :]))

        def decide(payload: LifecycleHookPayload) -> LifecycleHookResponse:  # asks for the model
            return policy.decide(payload).response

        return decide
    return load_handler(place.spec, where=where, root=place.root)


def route_for(routes: list[Route], url: str) -> Route | None:
    """The route a webhook URL takes: the one with the longest matching prefix, if any."""
    matching = (route for route in routes if url.startswith(route.prefix))
    return max(matching, key=lambda route: len(route.prefix), default=None)


@dataclass
class HookRun:
    """What one handler did with one event."""

    hook: LifecycleHookConfig
    index: int
    decision: HookDecision | None = None
    reason: str | None = None
    response: LifecycleHookResponse | None = None
    error: str | None = None
    duration_ms: int = 0
    latency_ms: float = 0.0  # to the microsecond (``[[expect]] latency_ms`` reads it)
    interrupt: InterruptJSON | None = None
    task_chat_id: str | None = None
    routed_to: str | None = None  # where ``--route`` delivered it instead of its own URL
    resource_id: str | None = None  # the tool invocation of an ``agent.tool_call``
    review: Any = None  # the ``Review`` a ``belt:extract`` run asks the loop for
    warnings: list[str] = field(default_factory=list)  # the answer's unknown keys, ignored

    @property
    def injected(self) -> bool:
        """True when this run's response injects context (never for async hooks)."""
        return bool(self.response and self.response.injected and not self.hook.runs_async)

    def chat_hook_event(self, event: str) -> dict[str, object]:
        """This run as a ChatHookEvent."""
        return chat_hook_event(
            event=event,
            handler_type=self.hook.type,
            handler=self.hook.handler,
            decision=self.decision,
            reason=self.reason,
            injected=self.injected,
            error=self.error,
            duration_ms=self.duration_ms,
        )


@dataclass
class EventResult:
    """The outcome of one event: every handler run and the decision that took effect."""

    event: str
    payload: Mapping[str, object]
    runs: list[HookRun] = field(default_factory=list)
    decisive: HookRun | None = None

    @property
    def outcome(self) -> Outcome:
        """The effect the decisive decision has on this event."""
        if self.decisive is None:
            return Outcome.CONTINUE
        if self.decisive.decision == HookDecision.SUSPEND and self.decisive.interrupt:
            return Outcome.SUSPEND
        return outcome(self.event, self.decisive.decision)

    @property
    def reason(self) -> str | None:
        """The decisive decision's reason."""
        return self.decisive.reason if self.decisive else None


@dataclass(frozen=True)
class Target:
    """Where a webhook hook's payloads go (found once per hook and run)."""

    destination: str  # the URL or ``py:`` handler, as declared or as ``--route`` sends it
    routed: bool
    spec: str | None  # the in-process handler to call, as loaded; None for an HTTP webhook
    timeout: float


ASYNC_WORKERS = 8  # async hooks run at once; more wait their turn, the loop waits for none

Finished = Callable[[HookRun], None]
Builtin = Callable[[HookRun, Mapping[str, object]], None]


@dataclass
class Dispatcher:
    """Runs handlers of each type for one simulation; ``close`` waits for its async hooks."""

    store: Store
    hooks: list[LifecycleHookConfig]
    fail_closed: bool
    builtin: Builtin
    routes: list[Route]
    handlers: dict[str, Handler]  # imported before the run
    located: dict[int, Located]  # by hook index
    _pool: ThreadPoolExecutor | None = None
    _in_process: InProcess | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _by_event: dict[str, tuple[tuple[int, LifecycleHookConfig], ...]] = field(default_factory=dict)
    _targets: dict[int, Target] = field(default_factory=dict)

    def close(self) -> None:
        """Wait for the async hooks still running, then close the in-process caller."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            in_process, self._in_process = self._in_process, None
        if in_process is not None:
            in_process.close()

    def submit(self, run_one: Callable[[], HookRun], finished: Finished) -> None:
        """Run an async hook in the background; ``finished`` gets its run when it is done."""
        if self._pool is None:
            # Start-up: the pool (and the logging it loads) once an async hook runs.
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - a platform run loads no thread pool

            self._pool = ThreadPoolExecutor(ASYNC_WORKERS, thread_name_prefix="belt-async-hook")
        # On the caller's clock (a simulation's virtual clock is a context variable).
        self._pool.submit(contextvars.copy_context().run, lambda: finished(run_one()))

    def in_process(self) -> InProcess:
        """The caller of ``py:`` handlers, created on first use."""
        with self._lock:
            if self._in_process is None:
                self._in_process = InProcess(self.handlers, load=self.load)
            return self._in_process

    def load(self, spec: str) -> Handler:
        """Load ``spec`` on first use (a resumed run), from where its hook's file located it."""
        place = next((p for p in self.located.values() if p.spec == spec), Located(spec))
        return load_located(place, where=spec)

    def hooks_for(self, event: str) -> tuple[tuple[int, LifecycleHookConfig], ...]:
        """The hooks declared on ``event``, with their declaration index, in order."""
        if (found := self._by_event.get(event)) is None:
            found = self._by_event[event] = tuple(
                (i, h) for i, h in enumerate(self.hooks) if h.event == event
            )
        return found

    def target(self, index: int, hook: LifecycleHookConfig) -> Target:
        """Where the webhook hook at ``index`` delivers (found on its first delivery)."""
        if (found := self._targets.get(index)) is None:
            url = str(hook.handler)
            route = route_for(self.routes, url)
            destination = route.destination(url) if route is not None else url
            spec = None
            if is_in_process(destination):
                place = self.located.get(index) if route is None else None
                spec = place.spec if place is not None else destination
            timeout = float(hook.effective_timeout())
            found = self._targets[index] = Target(destination, route is not None, spec, timeout)
        return found

    def fire(
        self,
        event: str,
        payload: Mapping[str, object],
        *,
        resource_id: str | None = None,
        finished: Finished,
    ) -> EventResult:
        """Run every hook on ``event`` until one denies, stops or suspends (async hooks start
        in the background and take no part)."""
        result = EventResult(event, payload)
        for index, hook in self.hooks_for(event):
            # Gates always hold the loop; builtins answer at once in the platform itself.
            if hook.runs_async and hook.type != HookHandlerType.BUILTIN:
                self.submit(partial(self.run_one, hook, index, payload, resource_id), finished)
                continue
            run = self.run_one(hook, index, payload, resource_id)
            result.runs.append(run)
            if takes_effect(run.decision):
                result.decisive = run
                break
        return result

    def run_one(
        self,
        hook: LifecycleHookConfig,
        index: int,
        payload: Mapping[str, object],
        resource_id: str | None,
    ) -> HookRun:
        """Deliver ``payload`` to one handler and return what it decided."""
        run = HookRun(hook, index, resource_id=resource_id)
        with tracing.span(f"belt.hook {payload['event']}") as span:
            started = time.perf_counter()
            if hook.type == HookHandlerType.WEBHOOK:
                self.run_webhook(run, payload)
            elif hook.type == HookHandlerType.TASK:
                origin = {"hook_event": payload.get("event"), "run_id": payload.get("run_id")}
                chat = create_chat(
                    self.store, agent_id=str(hook.handler), status=ChatStatus.BUSY, origin=origin
                )
                text = json.dumps(payload, ensure_ascii=False)
                Recorder(self.store, chat["id"]).add_message(
                    role="user", run_id=None, content=[{"type": "text", "text": text}]
                )
                run.task_chat_id = str(chat["id"])
            elif hook.type == HookHandlerType.GATE:
                run.interrupt = create_interrupt(
                    store=self.store,
                    run_id=str(payload["run_id"]),
                    chat_id=str(payload["chat_id"]),
                    event=str(payload["event"]),
                    timeout=hook.effective_timeout(),
                    default_resolution=hook.effective_default_resolution().value,
                    meta=payload,
                    resource_id=resource_id,
                )
                run.decision = HookDecision.SUSPEND
            elif hook.type == HookHandlerType.BUILTIN:
                self.builtin(run, dict(payload))
            run.latency_ms = (time.perf_counter() - started) * 1000
            run.duration_ms = run.duration_ms or round(run.latency_ms)
            if span is not None:
                self.trace_hook(span, run, str(payload["event"]))
        return run

    def trace_hook(self, span: Any, run: HookRun, event: str) -> None:
        """A hook's span attributes (docs/tracing.md): never the payload nor the injected text
        (its size), nor more of the reason than ``tracing.REASON_LIMIT``."""
        handler_type, host = run.hook.type.value, None
        if run.hook.type == HookHandlerType.WEBHOOK:
            destination = self.target(run.index, run.hook).destination
            if is_in_process(destination):
                handler_type = "py"
            else:
                host = url_host(destination)
        size = run.response.injection_size if run.injected and run.response else None
        counted = (run.decision or HookDecision.ALLOW).value
        tracing.set_attributes(
            span,
            {
                "belt.hook.event": event,
                "belt.hook.handler_type": handler_type,
                "belt.hook.host": host,
                "belt.hook.async": run.hook.runs_async,
                "belt.hook.decision": counted,
                "belt.hook.reason": tracing.bounded(run.reason),
                "belt.hook.injection_size": size,
                "belt.hook.error": tracing.bounded(run.error),
                "belt.hook.counted_as": counted if run.error else None,
                "belt.dialect": "platform",
            },
            "hook failed" if run.error else None,
        )

    def run_webhook(self, run: HookRun, payload: Mapping[str, object]) -> None:
        """Call a webhook; a failure counts as allow, or deny on gate-able events if fail-closed."""
        target = self.target(run.index, run.hook)
        if target.routed:
            run.routed_to = target.destination
        if target.spec is not None:
            delivered = self.in_process().deliver(
                target.spec, payload, timeout=target.timeout, label=target.destination
            )
        else:
            delivered = deliver(target.destination, payload, timeout=target.timeout)
        run.duration_ms = delivered.duration_ms
        run.warnings = delivered.warnings
        if delivered.error is not None or delivered.response is None:
            run.error = delivered.error or "no response"
            if target.routed and target.spec is None:
                # The hook's own URL was not called: say which one was.
                run.error += f" (routed by --route to {shown_url(target.destination)})"
            if self.fail_closed and EVENTS[str(payload["event"])].can_gate:
                run.decision = HookDecision.DENY
                run.reason = f"hook failed (fail-closed): {run.error}"
            return
        run.response = delivered.response  # an async hook's too: recorded, never acted on
        run.decision = delivered.response.decision
        run.reason = delivered.response.reason


def shown_url(url: str) -> str:
    """A URL as an error may name it: scheme, host, port and path, no credentials or query."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return url_host(url)
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}{parts.path}"


def executed_record(
    event: str, run: HookRun, payload: Mapping[str, object], place: Mapping[str, object]
) -> dict[str, object]:
    """The ``hook.executed`` agent event for one handler run, ending with ``place``; the answer's
    ``override`` is recorded, never acted on (WIRE.md)."""
    response = run.response
    record: dict[str, object] = {
        "type": "hook.executed",
        "hook_event": event,
        "decision": (run.decision or HookDecision.ALLOW).value,
        "reason": run.reason,
        "duration_ms": run.duration_ms,
        "latency_ms": round(run.latency_ms, 3),
        "hook_index": run.index,
        "handler_type": run.hook.type.value,
        "handler": handler_label(run.hook.type, run.hook.handler),
        "async": run.hook.runs_async,
        "error": run.error,
        "injected": run.injected,
    }
    if response is not None and response.injected:
        answered = response.model_dump(mode="json", exclude_none=True)
        if injection := {key: answered[key] for key in ("inject", "system") if answered.get(key)}:
            record["injection"] = injection
    record["interrupt_id"] = run.interrupt["id"] if run.interrupt else None
    record["task_chat_id"] = run.task_chat_id
    optional = {
        "resource_id": run.resource_id or None,
        "routed_to": handler_label(run.hook.type, run.routed_to) if run.routed_to else None,
        "override": response.override if response is not None else None,
        "warnings": run.warnings or None,
    }
    record |= {key: value for key, value in optional.items() if value is not None}
    return {**record, "payload": payload, **place}


def leaves_transcript_row(run: HookRun) -> bool:
    """True when this run leaves a row in the chat (never for async hooks)."""
    return not run.hook.runs_async and leaves_row(
        decision=run.decision, injected=run.injected, error=run.error
    )
