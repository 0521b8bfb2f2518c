"""Firing one event through an agent's hooks, in declaration order, as the platform does."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from belt.effects import Outcome, chat_hook_event, handler_label, leaves_row, outcome, takes_effect
from belt.wire.catalogue import EVENTS
from belt.wire.platform import (
    HookDecision,
    HookExecutedPayload,
    HookHandlerType,
    LifecycleHookConfig,
    LifecycleHookResponse,
)

if TYPE_CHECKING:
    import httpx

    from belt.store import Store


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
    interrupt: dict[str, Any] | None = None
    task_chat_id: str | None = None

    @property
    def injected(self) -> bool:
        """True when this run's response injects context (never for async hooks)."""
        return bool(self.response and self.response.injected and not self.hook.async_)

    def chat_hook_event(self, event: str) -> dict[str, Any]:
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
    payload: dict[str, Any]
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


@dataclass
class Dispatcher:
    """Runs handlers of each type for one run; one pooled HTTP client per run."""

    store: Store
    hooks: list[LifecycleHookConfig]
    fail_closed: bool = False
    transport: httpx.BaseTransport | None = None
    _client: httpx.Client | None = None

    def close(self) -> None:
        """Close the run's HTTP client."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def client(self) -> httpx.Client:
        """The run's pooled HTTP client, created on first use."""
        if self._client is None:
            import httpx

            self._client = httpx.Client(transport=self.transport, follow_redirects=False)
        return self._client

    def hooks_for(self, event: str) -> list[tuple[int, LifecycleHookConfig]]:
        """The hooks declared on ``event``, with their declaration index, in order."""
        return [(i, h) for i, h in enumerate(self.hooks) if h.event == event]

    def fire(
        self, event: str, payload: dict[str, Any], *, resource_id: str | None = None
    ) -> EventResult:
        """Run every hook on ``event`` until one denies, stops or suspends."""
        result = EventResult(event, payload)
        for index, hook in self.hooks_for(event):
            run = self.run_one(hook, index, payload, resource_id)
            result.runs.append(run)
            if not hook.async_ and takes_effect(run.decision):
                result.decisive = run
                break
        return result

    def run_one(
        self,
        hook: LifecycleHookConfig,
        index: int,
        payload: dict[str, Any],
        resource_id: str | None,
    ) -> HookRun:
        """Deliver ``payload`` to one handler and return what it decided."""
        run = HookRun(hook, index)
        started = time.perf_counter()
        if hook.type == HookHandlerType.WEBHOOK:
            self.run_webhook(run, payload)
        elif hook.type == HookHandlerType.TASK:
            from belt.handlers.task import start_task

            run.task_chat_id = start_task(self.store, agent_ref=str(hook.handler), payload=payload)
        elif hook.type == HookHandlerType.GATE:
            from belt.handlers.gate import open_gate

            run.interrupt = open_gate(
                self.store, hook=hook, payload=payload, resource_id=resource_id
            )
            run.decision = HookDecision.SUSPEND
        if not run.duration_ms:
            run.duration_ms = round((time.perf_counter() - started) * 1000)
        return run

    def run_webhook(self, run: HookRun, payload: dict[str, Any]) -> None:
        """Call a webhook; a failure counts as allow, or deny on gate-able events if fail-closed."""
        from belt.handlers.webhook import deliver

        delivered = deliver(
            self.client(),
            str(run.hook.handler),
            payload,
            timeout=float(run.hook.effective_timeout()),
        )
        run.duration_ms = delivered.duration_ms
        if delivered.error is not None or delivered.response is None:
            run.error = delivered.error or "no response"
            if self.fail_closed and EVENTS[str(payload["event"])].can_gate:
                run.decision = HookDecision.DENY
                run.reason = f"hook failed (fail-closed): {run.error}"
            return
        run.response = delivered.response
        if run.hook.async_:
            return
        run.decision = delivered.response.decision
        run.reason = delivered.response.reason


def executed_record(event: str, run: HookRun, payload: dict[str, Any]) -> dict[str, Any]:
    """The ``hook.executed`` agent event for one handler run (with the payload it was given).

    The HookExecutedPayload of the wire, and what belt adds to it: which hook, how it ran.
    """
    executed = HookExecutedPayload(
        hook_event=event,
        decision=(run.decision or HookDecision.ALLOW).value,
        reason=run.reason,
        duration_ms=run.duration_ms,
    )
    return {
        "type": "hook.executed",
        **executed.model_dump(),
        "hook_index": run.index,
        "handler_type": run.hook.type.value,
        "handler": handler_label(run.hook.type, run.hook.handler),
        "async": run.hook.async_,
        "error": run.error,
        "injected": run.injected,
        "interrupt_id": run.interrupt["id"] if run.interrupt else None,
        "task_chat_id": run.task_chat_id,
        "payload": payload,
    }


def leaves_transcript_row(run: HookRun) -> bool:
    """True when this run leaves a row in the chat (never for async hooks)."""
    if run.hook.async_:
        return False
    return leaves_row(decision=run.decision, injected=run.injected, error=run.error)
