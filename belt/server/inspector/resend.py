"""The inspector's replays (``belt.deliveries.replay``, as ``belt replay``) to a delivery's own
handler, a URL, a policy or a ``py:`` handler the server was started with; and kept tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import closing, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from belt.deliveries.effects import is_in_process
from belt.deliveries.keep import kept_scenario, replay_handler
from belt.deliveries.replay import (
    Recorded,
    Replay,
    ReplayReport,
    executed,
    open_target,
    payload_model,
    served,
)
from belt.display.text import describe
from belt.engine.dispatch import load_located, route_for
from belt.engine.simrecord import reload_hooks, reload_located
from belt.errors import BeltError, InvalidInput, UsageError
from belt.handlers.inprocess import InProcess, Located
from belt.handlers.webhook import WebhookResult, deliver
from belt.records.runs import RUN
from belt.records.sims import read_sim
from belt.server.inspector.deliveries import Entry, text
from belt.wire.platform import WEBHOOK_TIMEOUT_DEFAULT, HookHandlerType
from belt.wire.validate import IN_PROCESS_PREFIX, POLICY_PREFIX, check_webhook_url

if TYPE_CHECKING:
    from belt.server.inspector.deliveries import Deliveries
    from belt.store import Store

TARGETS = ("own", "url", "policy", "py")
REPLAY_MAX = 1000
"""The most deliveries one replay sends; a larger selection is refused, not cut short."""
REPLAY_SECONDS = 120.0
"""A replay's total deadline: deliveries whose turn comes after it are reported, not sent."""

ServeDecide = Callable[[dict[str, object]], WebhookResult]


@dataclass(frozen=True)
class Target:
    """Where a replay sends payloads."""

    kind: str
    value: str | None = None

    @property
    def options(self) -> dict[str, Any]:
        """A URL, policy or ``py:`` target as ``belt replay``'s --to, --policy, --handler (a
        policy as a Path, so its label names the path as ``belt replay`` does)."""
        value = Path(str(self.value)) if self.kind == "policy" else self.value
        names = {"url": "to", "policy": "policy", "py": "handler"}
        return {name: value if kind == self.kind else None for kind, name in names.items()}


def parse_target(raw: Any) -> Target:
    """``{"kind": "own"|"url"|"policy"|"py", "value": ...}``; InvalidInput naming what is wrong."""
    if raw is None:
        return Target("own")
    if not isinstance(raw, dict):
        raise InvalidInput(f"target: expected an object, got {describe(raw)}")
    kind = raw.get("kind", "own")
    if kind not in TARGETS:
        raise InvalidInput(f"target.kind: {kind!r} is not one of {', '.join(TARGETS)}")
    if kind == "own":
        return Target("own")
    value = raw.get("value")
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"target.value: a {kind} target needs a value")
    value = value.strip()
    if kind == "url" and (reason := check_webhook_url(value)):
        raise InvalidInput(f"target.value: the URL {reason}")
    if kind == "py":
        value = value.removeprefix("py:")
        if ":" not in value:
            raise InvalidInput("target.value: expected MODULE:FUNC or path/to/file.py:FUNC")
    return Target(kind, value)


@dataclass(eq=False)
class Replayer:
    """Sends recorded deliveries to a target and compares the answers."""

    store: Store
    deliveries: Deliveries
    serve_decide: ServeDecide | None
    in_process: frozenset[str] = frozenset()

    def replay(self, *, entries: list[Entry], target: Target, payload: Any = None) -> ReplayReport:
        """Replay ``entries`` (one may have an edited ``payload``) to ``target``; its report."""
        self.check_target(target)
        if not entries:  # more than REPLAY_MAX are refused as they are selected (the page)
            raise InvalidInput("nothing to replay: no delivery is selected")
        if payload is not None:
            if len(entries) != 1:
                raise InvalidInput("an edited payload replaces the payload of one delivery only")
            model, problem = payload_model(payload)
            if model is None:
                raise InvalidInput(f"payload: {problem.removeprefix('the recorded payload ')}")
        recorded: list[Recorded] = []
        owners: dict[int, Entry] = {}
        for entry in entries:
            record = self.deliveries.read(entry)
            item = served(record) if entry.summary["source"] == "serve" else executed(record)
            if payload is not None:
                item.payload = payload
            recorded.append(item)
            if isinstance(item.payload, dict):
                owners[id(item.payload)] = entry
        label, deliver, close = self._target(target, owners)
        one = len(entries) == 1
        where = f"delivery {entries[0].summary['id']}" if one else f"{len(entries)} deliveries"
        try:
            report = Replay(
                self.store,
                recorded,
                where=f"the inspector: {where}",
                label=label,
                deliver=deliver,
                deadline=time.monotonic() + REPLAY_SECONDS,
            ).report()
        finally:
            close()
        for row, entry, item in zip(report["rows"], entries, recorded, strict=True):
            row["delivery_id"] = entry.summary["id"]
            row["payload"] = item.payload
        return report

    def check_target(self, target: Target) -> None:
        """Refuse a ``py:`` target the server was not started with: no request names code."""
        if target.kind != "py" or target.value in self.in_process:
            return
        known = ", ".join(f"py:{spec}" for spec in sorted(self.in_process))
        raise UsageError(
            f"target.value: py:{target.value} is not a handler this server was started with "
            f"({'it has ' + known if known else 'it has none'}): a request may not name code "
            f"for the server to run; start belt serve with --handler {target.value}, or with "
            "--agents DIR whose hooks name it, to replay to it"
        )

    def _target(
        self, target: Target, owners: dict[int, Entry]
    ) -> tuple[str, Callable[[dict[str, object]], WebhookResult], Callable[[], None]]:
        """The label (in the report and journal), deliverer and closer of ``target``."""
        if target.kind in ("url", "policy"):
            return open_target(**target.options)
        if target.kind == "py":
            return f"py:{target.value}", partial(self._call, f"py:{target.value}"), lambda: None
        return "its own handler", self._own(owners), lambda: None

    def _call(
        self, spec: str, payload: dict[str, object], place: Located | None = None
    ) -> WebhookResult:
        """Call the in-process handler ``spec`` (from ``place`` if its scenario located it)."""
        where = place or Located(spec)
        with closing(InProcess(load=lambda _: load_located(where, where=spec))) as caller:
            return caller.deliver(where.spec, payload, timeout=WEBHOOK_TIMEOUT_DEFAULT, label=spec)

    def _own(self, owners: dict[int, Entry]) -> Callable[[dict[str, object]], WebhookResult]:
        """Each payload to the handler of the delivery it came from (found by the payload)."""

        def send(payload: dict[str, object]) -> WebhookResult:
            entry = owners[id(payload)]
            if entry.summary["source"] == "serve":
                if self.serve_decide is None:
                    return WebhookResult(None, "", None, "this server has no decider", 0)
                return self.serve_decide(payload)
            try:
                destination, timeout, place = self.located_handler(entry)
            except BeltError as exc:
                return WebhookResult(None, "", None, exc.message, 0)
            if is_in_process(destination):
                return self._call(destination, payload, place)
            return deliver(destination, payload, timeout=timeout)

        return send

    def kept_handler(
        self, target: Target, entry: Entry | None, record: dict[str, object] | None, base_url: str
    ) -> tuple[str, list[str]]:
        """``scenario_handler``, with where a simulated delivery's handler was located."""
        place = None
        if target.kind == "own" and entry is not None and entry.summary["source"] != "serve":
            with suppress(BeltError):
                place = self.located_handler(entry)[2]
        return scenario_handler(target, entry, record, base_url, place)

    def located_handler(self, entry: Entry) -> tuple[str, float, Located | None]:
        """A simulated delivery's hook's handler (URL or ``py:``), timeout and located place;
        InvalidInput for a hook that is not a webhook."""
        record = self.deliveries.read(entry)
        run = self.store.read(RUN, entry.key[1])
        sim = read_sim(self.store, str(run.get("sim_id")))
        hooks, routes = reload_hooks(self.store, sim)
        index = record.get("hook_index")
        if not isinstance(index, int) or not 0 <= index < len(hooks):
            raise InvalidInput(f"delivery {entry.summary['id']}: its hook is not recorded")
        hook = hooks[index]
        if hook.type != HookHandlerType.WEBHOOK or not hook.handler:
            raise InvalidInput(
                f"a {hook.type.value} hook has no handler to send a payload to; "
                "replay it to a URL, a policy or a py: handler"
            )
        url = str(hook.handler)
        if (route := route_for(routes, url)) is not None:
            return route.destination(url), float(hook.effective_timeout()), None
        place = reload_located(self.store, sim).get(index)
        return url, float(hook.effective_timeout()), place


def scenario_handler(
    target: Target,
    entry: Entry | None,
    record: dict[str, object] | None,
    base_url: str,
    place: Located | None = None,
) -> tuple[str, list[str]]:
    """The handler a kept scenario's hook names for ``target`` (as ``belt replay --save-tests``
    names it), and notes for its reader."""
    if target.kind != "own":
        handler, notes = replay_handler(**target.options, directory=None)
        return handler, notes + _absolute_note(handler)
    if entry is None or record is None:
        raise InvalidInput("target: 'own' needs the delivery (id) whose handler it is")
    if entry.summary["source"] == "serve":
        route = text(record.get("route")) or "/hooks"
        return f"{base_url}{route}", [
            f"The hook is this belt serve ({base_url}): start it with the same decider",
            "before `belt test`, or point the hook elsewhere with --route.",
        ]
    handler = str(entry.summary["handler"]).split(" → ")[0]
    if is_in_process(handler):
        if place is not None and place.root is None:
            return place.spec, _absolute_note(place.spec)
        return handler, []
    return f"http://{handler}/", [
        "The hook's full URL is kept private; only its host is written here. Put the URL in,",
        f"or run `belt test FILE --route http://{handler}/=TARGET`.",
    ]


def _absolute_note(handler: str) -> list[str]:
    """What a kept scenario says of an absolute path in its handler."""
    if handler.startswith(POLICY_PREFIX):
        path = handler[len(POLICY_PREFIX) :]
    elif handler.startswith(IN_PROCESS_PREFIX):
        path = handler[len(IN_PROCESS_PREFIX) :].rpartition(":")[0]
    else:
        return []
    if not Path(path).is_absolute():
        return []
    return [
        "The hook's path is absolute: once the file is with your tests, write it relative to",
        "the file's directory (a path in a scenario is read from there).",
    ]


def scenario_file(
    *,
    payload: Any,
    handler: str,
    expect: Any,
    notes: list[str],
    delivery_id: str | None,
) -> tuple[str, str, str]:
    """(file name, media type, text) of a scenario kept from one delivery; InvalidInput."""
    header = [
        "A belt test scenario kept from the inspector of belt serve"
        + (f" (delivery {delivery_id})." if delivery_id else "."),
        *notes,
    ]
    return kept_scenario(payload=payload, handler=handler, expect=expect, header=header)
