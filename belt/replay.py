"""``belt replay``: recorded hook payloads delivered again to a handler, the answers compared.

What was recorded comes from ``belt serve``'s journal (``journal``), from a simulated run (its
``hook.executed`` records of webhook hooks), or from a JSON lines file (payloads, or records with
a ``request`` or ``payload`` and what was answered). Each payload goes to the handler under test:
a URL (signed again when a secret is given), a policy file, or a Python callable (called as
``belt serve --handler`` calls it). A row says what was decided then and now, and whether the
decision or the injection changed. Nothing is written to the store but the replay's own journal.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from belt.effects import url_host
from belt.errors import InvalidInput, NotFound, UsageError
from belt.records.ids import new_id, now_iso
from belt.records.journal import JOURNAL, REPLAY, SERVE
from belt.store.clock import parse_timestamp, utcnow
from belt.text import printable
from belt.wire.platform import WEBHOOK_TIMEOUT_DEFAULT, LifecycleHookPayload, LifecycleHookResponse
from belt.wire.validate import describe, model_problems

if TYPE_CHECKING:
    import httpx

    from belt.handlers.inprocess import InProcess
    from belt.handlers.webhook import WebhookResult
    from belt.store import Store

REPLAY_JOURNAL = REPLAY
"""The log (in the store's journal) where each replay writes what it delivered and got back."""

RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@dataclass
class Recorded:
    """One delivery as it was recorded: the payload, and what was decided then (when known)."""

    payload: Any
    decision: str | None = None
    reason: str | None = None
    injection: Any = None
    """The ``inject`` and ``system`` answered then, or (when only that is known) whether any."""
    error: str | None = None
    at: str | None = None


@dataclass
class Row:
    """One payload replayed: what was decided then and now, and what changed."""

    number: int
    recorded: Recorded
    decision: str | None = None
    reason: str | None = None
    injection: Any = None
    error: str | None = None
    changed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The row as ``--json`` prints it."""
        payload: dict[str, Any] = (
            self.recorded.payload if isinstance(self.recorded.payload, dict) else {}
        )
        data: dict[str, Any] = payload["data"] if isinstance(payload.get("data"), dict) else {}
        return {
            "number": self.number,
            "event": payload.get("event"),
            "tool": data.get("tool"),
            "chat_id": payload.get("chat_id"),
            "run_id": payload.get("run_id"),
            "recorded": {
                "decision": self.recorded.decision,
                "reason": self.recorded.reason,
                "injection": self.recorded.injection,
                "error": self.recorded.error,
                "at": self.recorded.at,
            },
            "replayed": {
                "decision": self.decision,
                "reason": self.reason,
                "injection": self.injection,
                "error": self.error,
            },
            "changed": self.changed,
        }


Deliver = Callable[[dict[str, Any]], "WebhookResult"]


# -- what was recorded ----------------------------------------------------------------------------


def since_moment(text: str) -> datetime:
    """``--since``: an RFC 3339 timestamp, or a duration back from now (``30m``, ``2h``, ``1d``)."""
    match = _DURATION.match(text.strip())
    if match:
        amount, unit = match.groups()
        return utcnow() - timedelta(**{_UNITS[unit]: int(amount)})
    try:
        return parse_timestamp(text)
    except InvalidInput:
        raise UsageError(
            f"--since {text!r}: expected a timestamp (2026-08-11T14:00:00Z) or a duration "
            "back from now (30s, 15m, 2h, 1d)"
        ) from None


def injection_of(body: Any) -> Any:
    """The ``inject`` and ``system`` of a response body, or None when it has neither."""
    if not isinstance(body, dict):
        return None
    found = {key: body[key] for key in ("inject", "system") if body.get(key)}
    return found or None


def from_journal(store: Store) -> list[Recorded]:
    """Every hook request ``belt serve`` journalled, with the answer it gave."""
    recorded = []
    for record in store.read_log(JOURNAL, SERVE):
        if record.get("kind", "hook") != "hook" or "request" not in record:
            continue
        recorded.append(served(record))
    return recorded


def served(record: dict[str, Any]) -> Recorded:
    """A record of ``belt serve``'s journal as a recorded delivery."""
    ok = record.get("status") == 200
    return Recorded(
        payload=record["request"],
        decision=str(record.get("decision") or "allow") if ok else "error",
        reason=record.get("reason"),
        injection=injection_of(record.get("response")) if ok else None,
        error=None if ok else str(record.get("error") or f"HTTP {record.get('status')}"),
        at=record.get("at"),
    )


def from_run(store: Store, run_id: str) -> list[Recorded]:
    """The payloads a simulated run gave its webhook hooks, with what each decided."""
    from belt.records.runs import RUN, run_events
    from belt.store import check_id

    if store.get(RUN, check_id(run_id, what="run id")) is None:
        raise NotFound(f"no run {run_id}", hint="list runs with `belt sim list`")
    return [
        executed(record)
        for record in run_events(store, run_id)
        if record.get("type") == "hook.executed" and record.get("handler_type") == "webhook"
    ]


def executed(record: dict[str, Any]) -> Recorded:
    """A ``hook.executed`` record of a simulated run as a recorded delivery."""
    return Recorded(
        payload=record.get("payload"),
        decision=str(record.get("decision") or "allow"),
        reason=record.get("reason"),
        injection=bool(record.get("injected")),
        error=record.get("error"),
        at=record.get("at"),
    )


def from_file(path: Path) -> list[Recorded]:
    """A JSON lines file: each line a payload, a journal record (``request``, ``response``), or
    a ``hook.executed`` record (``payload``, ``decision``). Read as strictly as any input."""
    from belt.inputs import read_text
    from belt.strictjson import decode

    text = read_text(path, kind="payloads")
    recorded = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = decode(line)
        except ValueError as exc:
            raise InvalidInput(f"{path}: line {number}: not JSON ({exc})") from None
        if not isinstance(item, dict):
            raise InvalidInput(f"{path}: line {number}: expected an object, got {describe(item)}")
        if "request" in item:
            recorded.append(served(item))
        elif "payload" in item:
            recorded.append(
                Recorded(
                    payload=item["payload"],
                    decision=item.get("decision"),
                    reason=item.get("reason"),
                    injection=item.get("injected"),
                    error=item.get("error"),
                    at=item.get("at"),
                )
            )
        else:
            recorded.append(Recorded(payload=item, at=item.get("timestamp")))
    return recorded


def select(
    recorded: list[Recorded], *, since: str | None, event: str | None, chat: str | None
) -> list[Recorded]:
    """The recorded deliveries ``--since``, ``--event`` and ``--chat`` keep."""
    moment = since_moment(since) if since else None
    kept = []
    for item in recorded:
        payload = item.payload if isinstance(item.payload, dict) else {}
        if event is not None and payload.get("event") != event:
            continue
        if chat is not None and payload.get("chat_id") != chat:
            continue
        if moment is not None:
            stamp = item.at or payload.get("timestamp")
            try:
                if stamp is None or parse_timestamp(str(stamp)) < moment:
                    continue
            except InvalidInput:
                continue
        kept.append(item)
    return kept


# -- where it goes --------------------------------------------------------------------------------


def url_target(
    url: str, secret: str | None, transport: httpx.BaseTransport | None
) -> tuple[str, Deliver, Callable[[], None]]:
    """Deliver to a URL (signed with ``secret`` when given); its label, deliverer and closer."""

    from belt.handlers.webhook import deliver, webhook_client
    from belt.wire.validate import check_webhook_url

    reason = check_webhook_url(url)
    if reason:
        raise UsageError(f"--to {url!r}: the URL {reason}")
    client = webhook_client(transport)

    def send(payload: dict[str, Any]) -> WebhookResult:
        return deliver(client, url, payload, timeout=WEBHOOK_TIMEOUT_DEFAULT, secret=secret)

    return url_host(url), send, client.close


def policy_target(path: Path) -> tuple[str, Deliver, Callable[[], None]]:
    """Decide with a policy file, in-process."""
    from belt.handlers.webhook import WebhookResult
    from belt.policy import load_policy

    policy = load_policy(path)

    def decide(payload: dict[str, Any]) -> WebhookResult:
        model, problem = payload_model(payload)
        if model is None:
            return WebhookResult(None, "", None, problem, 0)
        return WebhookResult(200, "", policy.decide(model).response, None, 0)

    return f"policy {path}", decide, lambda: None


def handler_target(spec: str) -> tuple[str, Deliver, Callable[[], None]]:
    """Decide with a Python callable, given a LifecycleHookPayload (or the payload as a dict, if
    its first parameter is annotated so) as ``belt serve --handler`` gives it, within the
    webhook timeout."""
    from belt.handlers.inprocess import InProcess, wants_model
    from belt.handlers.webhook import WebhookResult
    from belt.loader import load_callable

    func = load_callable(spec, option="--handler")
    caller = InProcess()
    if not wants_model(func, default=True):
        return f"handler {spec}", _called(caller, spec, func), caller.close

    def decide(payload: dict[str, Any]) -> WebhookResult:
        model, problem = payload_model(payload)
        if model is None:
            return WebhookResult(None, "", None, problem, 0)
        return caller.call(spec, func, model, timeout=WEBHOOK_TIMEOUT_DEFAULT)

    return f"handler {spec}", decide, caller.close


def _called(caller: InProcess, spec: str, func: Callable[..., Any]) -> Deliver:
    """Deliver each payload, a dict, to ``func`` as it was recorded."""

    def decide(payload: dict[str, Any]) -> WebhookResult:
        return caller.call(spec, func, payload, timeout=WEBHOOK_TIMEOUT_DEFAULT)

    return decide


def payload_model(payload: Any) -> tuple[LifecycleHookPayload | None, str]:
    if not isinstance(payload, dict):
        return None, f"the recorded payload is {describe(payload)}, not an object"
    try:
        return LifecycleHookPayload.model_validate(payload), ""
    except ValidationError as exc:
        return None, "the recorded payload is not a LifecycleHookPayload: " + "; ".join(
            model_problems(exc)
        )


# -- replaying ------------------------------------------------------------------------------------


def compare(row: Row, response: LifecycleHookResponse | None) -> None:
    """Fill in what the handler decided now and what changed since the recording."""
    recorded = row.recorded
    if response is not None:
        row.decision = response.effective_decision().value
        row.reason = response.reason
        body = response.model_dump(mode="json", exclude_none=True)
        row.injection = injection_of(body)
    else:
        row.decision = "error"
    if recorded.decision is not None and recorded.decision != row.decision:
        row.changed.append("decision")
    if isinstance(recorded.injection, bool):
        if recorded.injection != (row.injection is not None):
            row.changed.append("injection")
    elif recorded.decision is not None and recorded.injection != row.injection:
        row.changed.append("injection")


def replay(
    *,
    source: str,
    to: str | None = None,
    policy: Path | None = None,
    handler: str | None = None,
    since: str | None = None,
    event: str | None = None,
    chat: str | None = None,
    secret: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    """Deliver every recorded payload of ``source`` again to the target and compare answers."""
    from belt.signing import secret_key
    from belt.store import open_store

    targets = [t for t in (to, policy, handler) if t is not None]
    if len(targets) != 1:
        raise UsageError("give one of --to URL, --policy FILE or --handler MODULE:FUNC")
    if secret is not None:
        if to is None:
            raise UsageError("--secret signs requests to --to URL; a policy or handler is local")
        secret_key(secret)
    if since is not None:
        since_moment(since)
    store = open_store()
    if source == "journal":
        recorded, where = from_journal(store), "the journal of belt serve"
    elif Path(source).is_file():
        recorded, where = from_file(Path(source)), str(source)
    elif RUN_ID.match(source):
        recorded, where = from_run(store, source), f"run {source}"
    else:
        raise NotFound(
            f"{source}: no such file or simulated run",
            hint="SOURCE is the word journal, a run id (ar_...) or a JSON lines file",
        )
    recorded = select(recorded, since=since, event=event, chat=chat)
    if to is not None:
        label, deliver, close = url_target(to, secret, transport)
    elif policy is not None:
        label, deliver, close = policy_target(policy)
    else:
        label, deliver, close = handler_target(str(handler))
    try:
        return replay_each(store, recorded, where=where, label=label, deliver=deliver)
    finally:
        close()


def replay_each(
    store: Store,
    recorded: list[Recorded],
    *,
    where: str,
    label: str,
    deliver: Deliver,
    deadline: float | None = None,
) -> dict[str, Any]:
    """Deliver each recorded payload to ``deliver``, compare, journal; the replay's report.

    ``deadline`` (a ``time.monotonic()`` moment) bounds the whole replay: a payload whose turn
    comes after it is not delivered, and its row says so.
    """
    from belt.handlers.webhook import WebhookResult

    replay_id = new_id("rp")
    rows = []
    for number, item in enumerate(recorded, start=1):
        row = Row(number, item)
        if deadline is not None and time.monotonic() >= deadline:
            delivered = WebhookResult(None, "", None, "not replayed: the replay ran out of time", 0)
        elif isinstance(item.payload, dict):
            delivered = deliver(item.payload)
        else:
            _, problem = payload_model(item.payload)
            delivered = WebhookResult(None, "", None, problem, 0)
        row.error = printable(delivered.error) if delivered.error else None
        compare(row, delivered.response if delivered.error is None else None)
        rows.append(row)
        _journal(store, replay_id, where, label, row)
    return {
        "replay_id": replay_id,
        "source": where,
        "target": label,
        "rows": [row.to_json() for row in rows],
        "summary": {
            "replayed": len(rows),
            "changed": sum(1 for row in rows if row.changed),
            "decisions_changed": sum(1 for row in rows if "decision" in row.changed),
            "injections_changed": sum(1 for row in rows if "injection" in row.changed),
            "errors": sum(1 for row in rows if row.error),
        },
    }


def _journal(store: Store, replay_id: str, source: str, target: str, row: Row) -> None:
    """Write one replayed delivery to the replay's own journal."""
    record = {
        "kind": "replay",
        "replay_id": replay_id,
        "at": now_iso(),
        "source": source,
        "target": target,
        **row.to_json(),
        "request": row.recorded.payload,
    }
    store.append(JOURNAL, REPLAY_JOURNAL, record, sync=False)
