"""``belt trigger``: send one sample hook payload to a handler and explain the answer.

The explanation comes from ``belt.effects``, the same code the simulator applies decisions with,
so a trigger and a simulated run say the same thing about the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from belt.effects import chat_hook_event, effect_text, leaves_row, transcript_content, url_host
from belt.errors import InvalidInput, Unreachable
from belt.samples import deep_merge, sample_payload
from belt.wire.platform import (
    WEBHOOK_TIMEOUT_DEFAULT,
    ContextInjection,
    HookHandlerType,
    LifecycleHookPayload,
)
from belt.wire.validate import check_webhook_url, model_problems

if TYPE_CHECKING:
    import httpx


@dataclass
class TriggerReport:
    """One trigger: what was sent, what came back, and what the platform would do with it."""

    event: str
    handler: str
    payload: dict[str, Any]
    signed: bool
    status: int | None
    body: str
    response: dict[str, Any] | None
    error: str | None
    duration_ms: int
    effect: str
    injection: str | None
    system: str | None
    transcript_row: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    """What the platform would ignore in the answer (its unknown keys)."""

    @property
    def ok(self) -> bool:
        """True when the handler answered 2xx with a valid LifecycleHookResponse."""
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON object."""
        return {
            "event": self.event,
            "handler": self.handler,
            "signed": self.signed,
            "payload": self.payload,
            "status": self.status,
            "body": self.body,
            "ok": self.ok,
            "response": self.response,
            "error": self.error,
            "duration_ms": self.duration_ms,
            "effect": self.effect,
            "injection": self.injection,
            "system": self.system,
            "transcript_row": self.transcript_row,
            "warnings": self.warnings,
        }


def read_data(text: str) -> dict[str, Any]:
    """A ``--data`` value: a JSON object given inline or as ``@FILE``."""
    from belt.inputs import read_json_object_option

    return read_json_object_option(text, option="--data")


def build_payload(event: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sample payload of ``event`` with ``data`` deep-merged in, checked as the wire shape."""
    payload = sample_payload(event)
    if data:
        payload = deep_merge(payload, data)
    try:
        LifecycleHookPayload.model_validate(payload)
    except ValidationError as exc:
        raise InvalidInput(
            "--data makes the payload invalid", problems=model_problems(exc, "payload")
        ) from None
    if payload["event"] != event:
        raise InvalidInput(f"--data changes the event to {payload['event']!r}; name it as EVENT")
    return payload


def injection_text(inject: ContextInjection) -> str:
    """What an injection puts in front of the model, and for how long."""
    life = (
        "permanent until replaced"
        if not inject.ttl_turns
        else f"for {inject.ttl_turns} turn{'s' if inject.ttl_turns != 1 else ''}"
    )
    details = [life]
    if inject.role:
        details.insert(0, f"role {inject.role}")
    if inject.dedup_key:
        details.append(f"replaces earlier injections keyed {inject.dedup_key!r}")
    return f"injects {inject.content!r} on the next turn ({', '.join(details)})"


def trigger(
    event: str,
    *,
    to: str,
    data: dict[str, Any] | None = None,
    secret: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> TriggerReport:
    """Send ``event``'s sample payload to the webhook ``to`` and explain the answer."""
    from belt.handlers.webhook import deliver, webhook_client

    problem = check_webhook_url(to)
    if problem:
        raise InvalidInput(f"--to {problem}")
    if secret:
        from belt.signing import secret_key

        secret_key(secret)
    payload = build_payload(event, data)
    with webhook_client(transport) as client:
        result = deliver(client, to, payload, timeout=float(WEBHOOK_TIMEOUT_DEFAULT), secret=secret)
    answer = result.response
    decision = answer.decision if answer else None
    reason = answer.reason if answer else None
    if result.error is not None:
        effect = f"{effect_text(event, None, None)} (a failed call counts as allow)"
    else:
        effect = effect_text(event, decision, reason)
    injected = bool(answer and answer.injected)
    row = None
    if leaves_row(decision=decision, injected=injected, error=result.error):
        row = transcript_content(
            chat_hook_event(
                event=event,
                handler_type=HookHandlerType.WEBHOOK,
                handler=to,
                decision=decision,
                reason=reason,
                injected=injected,
                error=result.error,
                duration_ms=result.duration_ms,
            )
        )
    return TriggerReport(
        event=event,
        handler=url_host(to),
        payload=payload,
        signed=bool(secret),
        status=result.status,
        body=result.body,
        response=answer.model_dump(mode="json", exclude_none=True) if answer else None,
        error=result.error,
        duration_ms=result.duration_ms,
        effect=effect,
        injection=injection_text(answer.inject) if answer and answer.inject else None,
        system=(
            f"adds the permanent system note {answer.system!r} (keyed by this handler)"
            if answer and answer.system
            else None
        ),
        transcript_row=row,
        warnings=result.warnings,
    )


def failure(report: TriggerReport) -> Unreachable:
    """The error (exit 6) for a failed trigger, with what to check."""
    timeout = WEBHOOK_TIMEOUT_DEFAULT
    from belt.handlers.webhook import TIMED_OUT

    if report.status is None and TIMED_OUT in (report.error or ""):
        hint = f"the handler must answer within {timeout} s; check that it does not block"
    elif report.status is None:
        hint = (
            "check that the handler is running and listening at that host and port, and the scheme"
        )
    elif not 200 <= report.status < 300:
        hint = "a hook handler must answer 2xx; check its logs (its body is shown above)"
    else:
        hint = (
            "answer a JSON object whose decision, reason, inject, system and override have "
            "their wire types (other keys are ignored; an empty 2xx body means allow)"
        )
    return Unreachable(report.error or "the handler failed", hint=hint)
