"""``belt trigger``: send one hook payload to a webhook URL or a ``py:`` handler, and explain the
answer with ``belt.deliveries.effects``, as the simulator applies it."""

from __future__ import annotations

import copy
import traceback
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field, fields
from typing import Any, cast

from pydantic import ValidationError

from belt.deliveries.effects import (
    chat_hook_event,
    effect_text,
    is_in_process,
    leaves_row,
    transcript_content,
    url_host,
)
from belt.display.text import printable, short
from belt.errors import BeltError, InvalidInput, Unreachable, UsageError, remote_error
from belt.handlers.inprocess import InProcess, load_handler
from belt.handlers.webhook import TIMED_OUT, deliver, failure_of, likely_fix
from belt.outgoing.signing import secret_key
from belt.reading.inputs import read_json_option
from belt.records import serves
from belt.records.serves import Serve
from belt.wire.platform import (
    WEBHOOK_TIMEOUT_DEFAULT,
    WEBHOOK_TIMEOUT_MAX,
    ContextInjection,
    HookHandlerType,
    LifecycleHookPayload,
)
from belt.wire.samples import deep_merge, sample_payload
from belt.wire.validate import check_webhook_url, model_problems


@dataclass(kw_only=True)
class TriggerReport:
    """One trigger: what was sent, what came back, and what the platform would do with it."""

    event: str
    handler: str
    in_process: bool = False  # a py: function, called rather than POSTed to
    signed: bool
    payload: dict[str, object]
    status: int | None
    body: str
    ok: bool = field(init=False)  # 2xx with a valid LifecycleHookResponse
    response: dict[str, object] | None
    error: str | None
    duration_ms: int
    effect: str
    injection: str | None
    system: str | None
    transcript_row: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)  # unknown keys the platform ignores
    traceback: str | None = None  # what a py: handler raised (shown with -v)
    timeout: float = WEBHOOK_TIMEOUT_DEFAULT  # the seconds the handler had to answer, in all

    def __post_init__(self) -> None:
        self.ok = self.error is None

    def to_json(self) -> dict[str, object]:
        """The report as one JSON object."""
        return {f.name: getattr(self, f.name) for f in fields(self)[:-2]}


def _shown(text: str) -> str:
    """A path or value as an error message shows it: escaped, and cut when long."""
    return short(printable(text), 80)


def _steps(path: str, option: str) -> list[str]:
    """The keys of a dotted ``PATH`` (``data.arguments.path``); an empty key is a usage error."""
    steps = path.split(".")
    if not path or any(not step for step in steps):
        raise UsageError(
            f"{option} {_shown(path)!r}: expected a dotted path into the payload, "
            "e.g. data.arguments.path"
        )
    return steps


def _walk(
    payload: dict[str, object], steps: list[str], option: str, *, make: bool
) -> tuple[Any, str | int]:
    """The container and key a dotted path names (``make``: objects made on the way)."""
    path, node = ".".join(steps), cast(Any, payload)
    for number, key in enumerate(steps, start=1):
        where = ".".join(steps[:number])
        index: str | int = key
        if isinstance(node, list):
            if not (key.isascii() and key.isdigit() and int(key) < len(node)):
                raise InvalidInput(f"{option} {_shown(where)}: the list has no item {_shown(key)}")
            index = int(key)
        elif not isinstance(node, dict):
            raise InvalidInput(
                f"{option} {_shown(where)}: the value there is not an object or a list"
            )
        elif not make and key not in node:
            raise InvalidInput(f"{option} {_shown(path)}: the payload has no {_shown(where)}")
        if number == len(steps):
            break
        if make and isinstance(node, dict) and not isinstance(node.get(key), (dict, list)):
            if node.get(key) is not None:  # null (a sample's absent data) is made anew
                raise InvalidInput(
                    f"{option} {_shown(path)}: {_shown(where)} is not an object or a list"
                )
            node[key] = {}
        node = node[index]
    return node, index


def set_value(payload: dict[str, object], assignment: str) -> None:
    """Apply one ``--set PATH=JSON`` (objects on the way are made when missing)."""
    path, sep, text = assignment.partition("=")
    if not sep:
        raise UsageError(
            f"--set {_shown(assignment)!r}: expected PATH=JSON, e.g. data.tool='\"read_file\"'"
        )
    steps = _steps(path, "--set")
    if text.startswith("@"):  # a value is given inline: an '@' starts a string, not a file
        raise InvalidInput(
            f"--set {_shown(path)}: {_shown(text[:20])!r} is not JSON",
            hint="quote a string: --set 'PATH=\"…\"'",
        )
    try:
        value = read_json_option(text, option=f"--set {_shown(path)}")
    except InvalidInput as exc:
        exc.hint = f"the value is JSON: a string is quoted, --set '{_shown(path)}=\"text\"'"
        raise
    container, index = _walk(payload, steps, "--set", make=True)
    container[index] = value


def unset_value(payload: dict[str, object], path: str) -> None:
    """Apply one ``--unset PATH``: the key at the dotted PATH is removed (it must be there)."""
    container, index = _walk(payload, _steps(path, "--unset"), "--unset", make=False)
    del container[index]


def build_payload(
    event: str,
    data: dict[str, object] | None = None,
    *,
    payload: dict[str, object] | None = None,
    sets: Sequence[str] = (),
    unsets: Sequence[str] = (),
) -> dict[str, object]:
    """The payload to send: ``payload`` or ``event``'s sample with ``data``, then unsets, sets."""
    if payload is not None and data is not None:
        raise UsageError(
            "--payload is the whole payload and --data merges into the sample: give one"
        )
    built, what = sample_payload(event), "the sample"  # refuses what is not an event
    if payload is not None:
        built, what = copy.deepcopy(payload), "--payload"
    elif data:
        built, what = deep_merge(built, data), "--data"
    for path in unsets:
        unset_value(built, path)
    for assignment in sets:
        set_value(built, assignment)
    if sets or unsets:
        what = f"{what} with --set/--unset"
    try:
        LifecycleHookPayload.model_validate(built)
    except ValidationError as exc:
        wrong = "is not a LifecycleHookPayload" if what == "--payload" else "makes it invalid"
        raise InvalidInput(f"{what} {wrong}", problems=model_problems(exc, "payload")) from None
    if built.get("event") != event:
        raise InvalidInput(f"{what} changes the event to {built['event']!r}; name it as EVENT")
    return built


def injection_text(inject: ContextInjection) -> str:
    """What an injection puts in front of the model, and for how long."""
    turns = inject.ttl_turns
    life = f"for {turns} turn{'s' if turns != 1 else ''}" if turns else "permanent until replaced"
    details = [f"role {inject.role}", life] if inject.role else [life]
    if inject.dedup_key:
        details.append(f"replaces earlier injections keyed {inject.dedup_key!r}")
    return f"injects {inject.content!r} on the next turn ({', '.join(details)})"


def trigger(
    event: str,
    *,
    to: str,
    data: dict[str, object] | None = None,
    payload: dict[str, object] | None = None,
    sets: Sequence[str] = (),
    unsets: Sequence[str] = (),
    secret: str | None = None,
    timeout: float = WEBHOOK_TIMEOUT_DEFAULT,
) -> TriggerReport:
    """Send a payload of ``event`` to ``to`` (a URL or a ``py:`` handler) and explain the answer."""
    if not 0 < timeout <= WEBHOOK_TIMEOUT_MAX:
        raise InvalidInput(
            f"--timeout {timeout:g}: expected more than 0 and at most {WEBHOOK_TIMEOUT_MAX} seconds"
        )
    in_process = is_in_process(to)
    if in_process and secret:
        raise UsageError(
            "--secret signs an HTTP request; a py: handler is called in-process, unsigned"
        )
    if not in_process and (problem := check_webhook_url(to)):
        raise InvalidInput(f"--to {problem}", hint="--to takes an http(s) URL or py:MODULE:FUNC")
    if secret:
        secret_key(secret)
    sent = build_payload(event, data, payload=payload, sets=sets, unsets=unsets)
    if not in_process:
        result = deliver(to, sent, timeout=timeout, secret=secret)
    else:
        with closing(InProcess()) as caller:
            func = load_handler(to, where="--to")
            result = caller.call(to, func, sent, timeout=timeout, message_limit=None)
    answer, error, raised = result.response, result.error, result.exception
    trace = None if raised is None else "".join(traceback.format_exception(raised)).rstrip("\n")
    decision, reason = (answer.decision, answer.reason) if answer else (None, None)
    note = answer.system if answer else None
    effect = effect_text(event, decision, reason)
    if error is not None:
        effect = f"{effect_text(event, None, None)} (a failed call counts as allow)"
    injected = bool(answer and answer.injected)
    hook = chat_hook_event(
        event=event,
        handler_type=HookHandlerType.WEBHOOK,
        handler=to,
        decision=decision,
        reason=reason,
        injected=injected,
        error=error,
        duration_ms=result.duration_ms,
    )
    shown = leaves_row(decision=decision, injected=injected, error=error)
    return TriggerReport(
        event=event,
        handler=to if in_process else url_host(to),
        payload=sent,
        signed=bool(secret),
        status=result.status,
        body=result.body,
        response=answer.model_dump(mode="json", exclude_none=True) if answer else None,
        error=error,
        duration_ms=result.duration_ms,
        effect=effect,
        injection=injection_text(answer.inject) if answer and answer.inject else None,
        system=f"adds the permanent system note {note!r} (keyed by this handler)" if note else None,
        transcript_row=transcript_content(hook) if shown else None,
        warnings=result.warnings,
        in_process=in_process,
        traceback=trace,
        timeout=timeout,
    )


def failure(report: TriggerReport) -> BeltError:
    """The error of a failed trigger, with a hint: exit 6 only when nothing answered, else 1."""
    error, status, timeout = report.error or "", report.status, report.timeout
    fix = likely_fix(report.error, timeout=timeout)
    if status is None and TIMED_OUT in error:
        hint = fix or f"the handler must answer within {timeout:g} s; check that it does not block"
    elif not report.in_process:
        hint = fix or (
            "check that the handler is running and listening at that host and port, and the scheme"
        )
    elif status is None:
        hint = "check that the function can be imported and takes the payload"
    elif "raised" in error:
        hint = "the function raised: a py: handler that raises fails as a webhook's HTTP 500 does"
    else:
        hint = (
            "return a dict (or a LifecycleHookResponse) whose decision, reason, inject, system "
            "and override have their wire types, or None for allow"
        )
    failed, took = failure_of(report.error), report.in_process and status is not None
    if took or (status is None and failed is not None and failed.answered):
        return BeltError(error or "the handler failed", hint=hint)  # it took the request: exit 1
    return remote_error(status, error or "the handler failed", hint=hint)


def running_serve() -> tuple[Serve, int]:
    """The running ``belt serve`` started last, and how many others run; else Unreachable."""
    if not (found := serves.running()):
        raise Unreachable(
            "no belt serve of yours is running, and --to does not name a handler",
            hint="start one in another terminal (belt serve, or belt serve --policy FILE), "
            "or give --to URL|py:MODULE:FUNC",
        )
    return found[0], len(found) - 1
