"""``belt replay``: recorded hook payloads delivered again to a handler, the answers compared.

From ``belt serve``'s journal, a simulated run or a JSON lines file, to a URL, a policy or a
``py:`` callable. A replay streams (its memory does not grow with what was recorded); a line that
cannot be read is skipped, counted and named in ``problems``."""

from __future__ import annotations

import errno
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from pydantic import ValidationError

from belt import dialects
from belt.deliveries.effects import url_host
from belt.display.text import describe, printable, short
from belt.errors import BeltError, InvalidInput, NotFound, UsageError, remote_error
from belt.handlers.inprocess import InProcess, load_handler, reference
from belt.handlers.webhook import WebhookResult, deliver, failure_of, likely_fix
from belt.outgoing import tracing
from belt.outgoing.signing import secret_key
from belt.reading.didyoumean import did_you_mean
from belt.reading.inputs import read_text
from belt.reading.strictjson import decode
from belt.records.chats import find_chat_id
from belt.records.ids import new_id, now_iso
from belt.records.journal import JOURNAL, SERVE, ReplayLine, append_replay_line
from belt.records.names import named_or_given
from belt.records.runs import EVENTS_LOG, find_run_id
from belt.rules.policy import load_policy
from belt.store import open_store
from belt.store.clock import parse_timestamp, utcnow
from belt.wire.platform import WEBHOOK_TIMEOUT_DEFAULT, LifecycleHookPayload, LifecycleHookResponse
from belt.wire.validate import check_webhook_url, model_problems

if TYPE_CHECKING:
    from belt.store import Store

RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_DURATION = re.compile(r"^(\d{1,20})([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
READ_BYTES = 4 * 1024 * 1024  # how much of a log a replay reads at a time
SUMMARY = ("replayed", "changed", "decisions_changed", "injections_changed", "errors")  # in order
PROBLEMS_KEPT = 20  # a replay names at most this many of the lines it skipped (and counts them all)


@dataclass(kw_only=True)
class Answer:
    """What a handler answered: its decision and reason, what it injected, or its error."""

    decision: str | None = None
    reason: str | None = None
    injection: Any = None  # the inject and system answered, or (older records) whether any
    error: str | None = None


@dataclass(kw_only=True)
class Recorded(Answer):
    """One delivery as it was recorded: the payload, and what was answered then (when known)."""

    payload: Any
    at: str | None = None


class SavedTests(TypedDict):
    """What ``belt replay --save-tests`` wrote (``belt.deliveries.keep.TestWriter``)."""

    directory: str
    expect: str
    per: str
    written: int
    not_written: int
    problems: list[str]


class RowJSON(TypedDict):
    """One payload replayed, as ``--json`` prints it (``Row.to_json``)."""

    number: int
    event: Any
    tool: Any
    chat_id: Any
    run_id: Any
    recorded: dict[str, Any]  # the Answer then, and when
    replayed: dict[str, Any]  # the Answer now
    changed: list[str]
    delivery_id: NotRequired[str]  # the inspector's: the delivery replayed, and the payload sent
    payload: NotRequired[Any]


class ReplayReport(TypedDict, total=False):
    """A replay's report (``belt replay --json``): its head, its rows, then its tail."""

    replay_id: str
    source: str
    target: str
    rows: list[RowJSON]
    summary: dict[str, int]  # each of SUMMARY, in its order
    first_error: str | None
    fix: str | None
    skipped: int
    problems: list[str]
    saved_tests: SavedTests


@dataclass
class Row:
    """One payload replayed: what was answered then and now, and what changed."""

    number: int
    recorded: Recorded
    now: Answer = field(default_factory=Answer)
    changed: list[str] = field(default_factory=list)

    def to_json(self) -> RowJSON:
        """The row as ``--json`` prints it."""
        payload = self.recorded.payload if isinstance(self.recorded.payload, dict) else {}
        data = payload["data"] if isinstance(payload.get("data"), dict) else {}
        return {
            "number": self.number,
            "event": payload.get("event"),
            "tool": data.get("tool"),
            "chat_id": payload.get("chat_id"),
            "run_id": payload.get("run_id"),
            "recorded": {k: v for k, v in vars(self.recorded).items() if k != "payload"},
            "replayed": dict(vars(self.now)),
            "changed": self.changed,
        }


Deliver = Callable[[dict[str, object]], WebhookResult]


@dataclass
class Skipped:
    """The recorded lines a replay could not read: how many, and the first few by name."""

    count: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        """Count one line skipped, and name it while fewer than PROBLEMS_KEPT are."""
        self.count += 1
        if len(self.problems) < PROBLEMS_KEPT:
            self.problems.append(message)


def since_moment(text: str) -> datetime:
    """``--since``: an RFC 3339 timestamp, or a duration back from now (``30m``, ``2h``, ``1d``)."""
    match = _DURATION.match(text.strip())
    if match:
        amount, unit = match.groups()
        try:
            return utcnow() - timedelta(**{_UNITS[unit]: int(amount)})
        except OverflowError:
            raise UsageError(
                f"--since {text!r}: {amount} {_UNITS[unit]} back from now is before the year 1",
                hint="give a shorter duration, or a timestamp (2026-08-11T14:00:00Z)",
            ) from None
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
    return {key: body[key] for key in ("inject", "system") if body.get(key)} or None


def log_records(
    store: Store, log: str, log_id: str, skipped: Skipped
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each record of a log as it was when this began, and its offset; bad lines go to skipped."""
    offset = 0
    size = store.log_size(log, log_id)
    while offset < size:
        chunk = store.log_lines(log, log_id, offset, max_bytes=READ_BYTES)
        if chunk.restarted and offset > 0:
            skipped.add(f"{log}/{log_id}: replaced while it was read; the rest was not replayed")
            return
        for at, line in chunk.lines:
            if at >= size:
                return
            try:
                yield at, store.decode_log_line(log, log_id, line, at, chunk.version)
            except InvalidInput as exc:
                skipped.add(exc.message)
        if not chunk.lines:
            return
        offset = chunk.end


def journal_deliveries(store: Store, skipped: Skipped) -> Iterator[Recorded]:
    """Each hook request ``belt serve`` journalled, with the answer it gave, as it is read."""
    for _, record in log_records(store, JOURNAL, SERVE, skipped):
        if record.get("kind", "hook") == "hook" and "request" in record:
            yield served(record)


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


def run_deliveries(store: Store, run_id: str, skipped: Skipped) -> Iterator[Recorded]:
    """A simulated run's webhook deliveries as they are read (NotFound when there is no run)."""
    return (
        executed(r)
        for _, r in log_records(store, EVENTS_LOG, find_run_id(store, run_id), skipped)
        if r.get("type") == "hook.executed" and r.get("handler_type") == "webhook"
    )


def executed(record: dict[str, Any]) -> Recorded:
    """A ``hook.executed`` record of a simulated run as a recorded delivery."""
    old = record.get("injected")  # an older record says only whether it injected
    injection = old if isinstance(old, bool) else None
    return Recorded(
        payload=record.get("payload"),
        decision=str(record.get("decision") or "allow"),
        reason=record.get("reason"),
        injection=(record["injection"] or None) if "injection" in record else injection,
        error=record.get("error"),
        at=record.get("at"),
    )


def from_file(path: Path) -> list[Recorded]:
    """The recorded deliveries of a JSON lines file."""
    return list(file_deliveries(path, read_text(path, kind="payloads")))


def file_deliveries(path: Path, text: str) -> Iterator[Recorded]:
    """The recorded deliveries of a JSON lines file's ``text``, one line at a time."""
    # One line at a time (``splitlines`` would hold a copy of them all).
    for number, found in enumerate(re.finditer(r"^.*$", text, re.MULTILINE), start=1):
        line = found[0].removesuffix("\r")
        if not line.strip():
            continue
        try:
            item = decode(line, unique_keys=True)
        except ValueError as exc:
            raise InvalidInput(f"{path}: line {number}: not JSON ({exc})") from None
        if not isinstance(item, dict):
            raise InvalidInput(f"{path}: line {number}: expected an object, got {describe(item)}")
        if "request" in item:
            yield served(item)
        elif "payload" in item:  # a hook.executed record; a decision not recorded is not compared
            yield replace(executed(item), decision=item.get("decision"))
        else:
            yield Recorded(payload=item, at=item.get("timestamp"))


def select(
    recorded: Iterable[Recorded], *, since: str | None, event: str | None, chat: str | None
) -> Iterator[Recorded]:
    """The recorded deliveries ``--since``, ``--event`` and ``--chat`` keep, as they come."""
    moment = since_moment(since) if since else None
    for item in recorded:
        payload = item.payload if isinstance(item.payload, dict) else {}
        if event not in (None, payload.get("event")) or chat not in (None, payload.get("chat_id")):
            continue
        stamp = item.at or payload.get("timestamp")
        with suppress(InvalidInput):  # a time that is not one: not since anything
            if moment is None or (stamp is not None and parse_timestamp(str(stamp)) >= moment):
                yield item


MESSAGE_LIMIT = 16_000  # the characters of a handler's exception message a replay keeps and shows


def open_target(
    *,
    to: str | None = None,
    policy: Path | str | None = None,
    handler: str | None = None,
    secret: str | None = None,
) -> tuple[str, Deliver, Callable[[], None]]:
    """A replay's target: a URL (requests signed with ``secret``), a policy file or a ``py:``
    callable, called as every ``py:`` handler is; its label, deliverer and closer."""
    if to is not None:
        if reason := check_webhook_url(to):
            raise UsageError(f"--to {to!r}: the URL {reason}")
        send = partial(deliver, to, timeout=WEBHOOK_TIMEOUT_DEFAULT, secret=secret)
        return url_host(to), send, lambda: None
    if policy is not None:
        loaded = load_policy(policy)

        def decide(payload: dict[str, object]) -> WebhookResult:
            model, problem = payload_model(payload)
            if model is None:
                return WebhookResult(None, "", None, problem, 0)
            return WebhookResult(200, "", loaded.decide(model).response, None, 0)

        return f"policy {policy}", decide, lambda: None
    func = load_handler(str(handler), where="--handler")
    caller, label = InProcess(), reference(str(handler))
    call = partial(
        caller.call, label, func, timeout=WEBHOOK_TIMEOUT_DEFAULT, message_limit=MESSAGE_LIMIT
    )
    return f"handler {label}", call, caller.close


def payload_model(payload: Any) -> tuple[LifecycleHookPayload | None, str]:
    if not isinstance(payload, dict):
        return None, f"the recorded payload is {describe(payload)}, not an object"
    try:
        return LifecycleHookPayload.model_validate(payload), ""
    except ValidationError as exc:
        return None, "the recorded payload is not a LifecycleHookPayload: " + "; ".join(
            model_problems(exc)
        )


def compare(row: Row, response: LifecycleHookResponse | None) -> None:
    """Fill in what the handler decided now and what changed since the recording."""
    then, now = row.recorded, row.now
    now.decision = "error"
    if response is not None:
        now.decision, now.reason = response.effective_decision().value, response.reason
        now.injection = injection_of(response.model_dump(mode="json", exclude_none=True))
    if then.decision is not None and then.decision != now.decision:
        row.changed.append("decision")
    if isinstance(then.injection, bool):
        if then.injection != (now.injection is not None):
            row.changed.append("injection")
    elif then.decision is not None and then.injection != now.injection:
        row.changed.append("injection")


SOURCE_HINT = (
    "SOURCE is the word journal, a simulated run's id, short id or unique prefix "
    "(`belt sim list` lists them), or a JSON lines file"
)


def _names_a_path(source: str) -> bool:
    """Whether ``source`` names something on disk (a directory or FIFO too)."""
    try:
        return Path(source).exists()
    except OSError as exc:  # a name longer than the system takes, for one
        why = "the name is too long" if exc.errno == errno.ENAMETOOLONG else exc.strerror or exc
        raise InvalidInput(
            f"{short(source, 60)}: not a file belt can open ({why})", hint=SOURCE_HINT
        ) from None


@contextmanager
def open_replay(
    *,
    source: str,
    to: str | None = None,
    policy: Path | None = None,
    handler: str | None = None,
    since: str | None = None,
    event: str | None = None,
    chat: str | None = None,
    secret: str | None = None,
) -> Iterator[Replay]:
    """A replay of ``source`` to the target, every option checked before any delivery."""
    if sum(t is not None for t in (to, policy, handler)) != 1:
        raise UsageError("give one of --to URL, --policy FILE or --handler MODULE:FUNC")
    if secret is not None:
        if to is None:
            raise UsageError("--secret signs requests to --to URL; a policy or handler is local")
        secret_key(secret)
    if since is not None:
        since_moment(since)
    known = tuple(e for name in dialects.BUILTIN for e in dialects.get(name).events)
    if event is not None and event not in known:
        raise UsageError(
            f"--event {event!r}: not a lifecycle event of either dialect"
            f"{did_you_mean(event, known)}",
            hint="`belt hooks events` lists them",
            where="--event",
        )
    store = open_store()
    skipped = Skipped()
    recorded: Iterable[Recorded]
    if source == "journal":
        store.log_lines(JOURNAL, SERVE, max_bytes=1)  # its header, checked now
        recorded, where = journal_deliveries(store, skipped), "the journal of belt serve"
    elif _names_a_path(source):
        text = read_text(source, kind="payloads")
        recorded, where = file_deliveries(Path(source), text), str(source)
    elif RUN_ID.match(source):
        recorded, where = run_deliveries(store, source, skipped), f"run {source}"
    else:
        raise NotFound(f"{short(source, 60)}: no such file or simulated run", hint=SOURCE_HINT)
    if chat is not None:
        chat = named_or_given(find_chat_id, store, chat)  # a stored chat's short id or prefix
    kept = select(recorded, since=since, event=event, chat=chat)
    label, send, close = open_target(to=to, policy=policy, handler=handler, secret=secret)
    kind = "webhook" if to is not None else "policy" if policy is not None else "py"
    try:
        run = Replay(store, kept, where=where, label=label, deliver=send, skipped=skipped)
        run.remote = to is not None
        run.traced = {"belt.hook.handler_type": kind, "belt.hook.host": to and url_host(to)}
        with tracing.span("belt.replay", {"belt.replay.id": run.replay_id}) as span:
            yield run
            tracing.set_attributes(span, {f"belt.replay.{k}": v for k, v in run.summary.items()})
    finally:
        close()


def replay(**options: Any) -> ReplayReport:
    """Replay every recorded payload of ``source`` (``open_replay``'s options): the whole report."""
    with open_replay(**options) as run:
        return run.report()


@dataclass(eq=False)
class Replay:
    """One replay: each recorded payload delivered, compared, journalled, handed on as its row."""

    store: Store
    recorded: Iterable[Recorded]
    _: KW_ONLY
    where: str
    label: str
    deliver: Deliver
    deadline: float | None = None
    skipped: Skipped = field(default_factory=Skipped)
    remote: bool = False  # a URL (--to): its failed answers fail the replay
    traced: dict[str, object] = field(default_factory=dict)  # each span's attributes
    on_row: Callable[[Row], None] | None = None  # belt.deliveries.keep's
    on_end: Callable[[], None] | None = None
    saved: SavedTests | None = None  # what --save-tests wrote, for the tail
    replay_id: str = field(default_factory=lambda: new_id("rp"))
    first_error: str | None = None
    fix: str | None = None
    first_failure: WebhookResult | None = None  # the first delivery sent that failed
    summary: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMMARY, 0))

    def head(self) -> ReplayReport:
        """What the report says before its rows."""
        return {"replay_id": self.replay_id, "source": self.where, "target": self.label}

    def tail(self) -> ReplayReport:
        """What the report says after its rows (once they are all made)."""
        tail = ReplayReport(
            summary=self.summary,
            first_error=self.first_error,
            fix=self.fix,
            skipped=self.skipped.count,
            problems=self.skipped.problems,
        )
        if self.saved is not None:
            tail["saved_tests"] = self.saved
        return tail

    def failure(self) -> BeltError | None:
        """For a replay ``--to`` a URL: the error of its first failed delivery, or None."""
        failed = self.first_failure
        if not self.remote or failed is None:
            return None
        count = f"{self.summary['errors']} of {self.summary['replayed']} deliveries failed"
        message = f"{printable(failed.error or 'failed')} ({count})"
        found = failure_of(failed.error)
        if failed.status is None and found is not None and found.answered:
            return BeltError(message, hint=self.fix)  # it took the request and failed: exit 1
        return remote_error(failed.status, message, hint=self.fix)

    def report(self) -> ReplayReport:
        """The whole report, every row in a list (for a replay of a bounded selection)."""
        return {**self.head(), "rows": list(self.rows()), **self.tail()}

    def rows(self) -> Iterator[RowJSON]:
        """Deliver, compare, journal and count each payload (none after ``deadline``); its row."""
        for number, item in enumerate(self.recorded, start=1):
            row = Row(number, item)
            event = item.payload.get("event") if isinstance(item.payload, dict) else None
            with tracing.span(f"belt.hook {event}", self.traced) as span:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    delivered = WebhookResult(
                        None, "", None, "not replayed: the replay ran out of time", 0
                    )
                elif isinstance(item.payload, dict):
                    delivered = self.deliver(item.payload)
                    if delivered.error and self.first_failure is None:
                        self.first_failure = delivered
                else:
                    _, problem = payload_model(item.payload)
                    delivered = WebhookResult(None, "", None, problem, 0)
                row.now.error = printable(delivered.error) if delivered.error else None
                compare(row, delivered.response if delivered.error is None else None)
                if span is not None:
                    trace_row(span, str(event), row, delivered)
            _journal(self.store, self.replay_id, self.where, self.label, row)
            if self.on_row is not None:
                self.on_row(row)
            self.summary["replayed"] += 1
            self.summary["changed"] += bool(row.changed)
            self.summary["decisions_changed"] += "decision" in row.changed
            self.summary["injections_changed"] += "injection" in row.changed
            self.summary["errors"] += bool(error := row.now.error)
            if error and self.first_error is None:
                self.first_error = error  # whole: each source bounds its own
                self.fix = likely_fix(error)
            yield row.to_json()
        if self.on_end is not None:
            self.on_end()


def trace_row(span: Any, event: str, row: Row, delivered: WebhookResult) -> None:
    """What a replayed delivery's span says: never the payload nor the injection's text."""
    response, now = (delivered.response if delivered.error is None else None), row.now
    size = response.injection_size if response is not None and response.injected else None
    attributes = {
        "belt.hook.event": event,
        "belt.hook.decision": now.decision,
        "belt.hook.reason": tracing.bounded(now.reason),
        "belt.hook.injection_size": size,
        "belt.hook.error": tracing.bounded(now.error),
        "belt.hook.counted_as": "allow" if now.error else None,
        "belt.replay.recorded_decision": row.recorded.decision,
        "belt.replay.changed": row.changed or None,
        "belt.dialect": dialects.speaking(event).name,
    }
    tracing.set_attributes(span, attributes, "hook failed" if now.error else None)


def _journal(store: Store, replay_id: str, source: str, target: str, row: Row) -> None:
    line: ReplayLine = {
        "kind": "replay",
        "replay_id": replay_id,
        "at": now_iso(),
        "source": source,
        "target": target,
        "request": row.recorded.payload,
    }
    append_replay_line(store, line, row.to_json())
