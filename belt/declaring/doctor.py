"""``belt hooks doctor``: the traps a valid declaration file can hold, each with its fix.

A valid file can still do nothing, or the wrong thing, without a word (an async hook whose deny
never acts, a gate that expires late); the store's history shows declared hooks never delivered.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from belt import dialects
from belt.declaring.declarations import Declaration, check_document, read_declaration
from belt.deliveries.effects import handler_label, is_in_process, is_loopback_host, url_host
from belt.engine.dispatch import load_located
from belt.engine.scenario import LoadedScenario, scenario_from_document
from belt.errors import BeltError, InvalidInput
from belt.handlers.inprocess import Located
from belt.records.journal import JOURNAL, SERVE
from belt.records.runs import EVENTS_LOG, RUN
from belt.records.sims import read_hooks
from belt.store import Store
from belt.wire.catalogue import EVENTS
from belt.wire.enums import Dialect, HookHandlerType, InterruptResolution
from belt.wire.platform import LifecycleHookConfig
from belt.wire.validate import Findings

DECIDING = (HookHandlerType.WEBHOOK, HookHandlerType.BUILTIN)  # whose answers decide or inject
SWEEP_SECONDS = 60  # how often the platform settles expired gates: an expiry lands this late


@dataclass(frozen=True)
class Trap:
    """One trap found in a declaration file."""

    file: str
    where: str
    kind: str
    message: str
    fix: str


@dataclass
class Examined:
    """What the doctor found in the files it read."""

    files: list[str]
    traps: list[Trap]
    invalid: list[Declaration]
    history: bool  # whether the store had any hook delivery to compare the declarations with

    def summary(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "files": self.files,
            "traps": [asdict(trap) for trap in self.traps],
            "invalid": [declaration.summary() for declaration in self.invalid],
            "history": self.history,
        }


SCENARIO = "scenario"  # the ``shape`` of a checked scenario file's report
SCENARIO_COMMANDS = "`belt sim run` runs it, `belt test` checks its expectations"

POLICY_FILE = "`belt serve --policy {file}` reads it, as does a hook whose handler is policy:{file}"
# Files of belt's that declare no hooks, by a key: what each is, and the command that reads it.
OTHER_FILES: tuple[tuple[str, str, str], ...] = (
    ("property", "a props file", "`belt check TARGET --props {file}` reads it"),
    ("match", "a model script", "`belt serve --model {file}` reads it"),
    ("rules", "a policy file", POLICY_FILE),
    ("default", "a policy file", POLICY_FILE),
)
DECLARING_KEYS = ("hooks", "lifecycle_hooks", "plugins", "event")


def other_file(doc: Any, source: str) -> str | None:
    """What a file of belt's that is no hook declaration is and what reads it (None: unknown)."""
    if not isinstance(doc, dict) or any(key in doc for key in DECLARING_KEYS):
        return None
    rules = doc.get("rules")
    keys = set(doc)
    if isinstance(rules, list) and any(isinstance(r, dict) and "match" in r for r in rules):
        keys.add("match")
    for key, what, command in OTHER_FILES:
        if key in keys:
            return f"{what}, not a hook declaration: {command.format(file=source)}"
    return None


def examine(paths: list[Path], store: Store) -> Examined:
    """Read each declaration or scenario file for traps (an invalid one as ``validate`` says)."""
    traps: list[Trap] = []
    invalid: list[Declaration] = []
    declared: list[tuple[str, str, LifecycleHookConfig]] = []
    for found in map(read_declared, paths):
        if not found.ok:
            invalid.append(found)
            continue
        placed = [(f"{found.where}[{i}]", hook) for i, hook in enumerate(found.hooks)]
        traps.extend(platform_traps(found.path, placed, found.located))
        stop = found.lifecycle_hooks.stop if found.lifecycle_hooks is not None else None
        if stop is not None and stop.max_continuations == 0:
            traps.append(trap(found.path, "lifecycle_hooks.stop", "stop-never-continues"))
        declared.extend((found.path, where, hook) for where, hook in placed)
    if delivered := deliveries(store):
        traps.extend(never_delivered(declared, delivered))
    return Examined([str(p) for p in paths], traps, invalid, bool(delivered))


def read_declared(path: Path, dialect: Dialect | None = None) -> Declaration:
    """``path`` as ``belt hooks validate`` reports it (not ok: unreadable, invalid or not one)."""
    source = str(path)
    try:
        doc = read_declaration(path)
        if isinstance(doc, dict) and "turns" in doc:
            return read_scenario(doc, path)
        if dialect is None and (other := other_file(doc, source)) is not None:
            raise InvalidInput(other)
        return check_document(doc, source, dialect)
    except BeltError as exc:  # the file's report says why, as the error would have
        findings = Findings([exc.message.removeprefix(f"{source}:").lstrip(), *exc.problems])
        return Declaration(source, None, findings, failure=exc.exit_code)


def read_scenario(doc: dict[str, object], path: Path) -> Declaration:
    """A scenario's hooks, checked as ``belt sim run`` reads them (its whole scenario too)."""
    source = str(path)
    loaded = scenario_from_document(doc, source, path.parent)
    findings = Findings(warnings=list(getattr(loaded, "warnings", [])))
    if isinstance(loaded, LoadedScenario):
        report = Declaration(source, loaded.dialect, findings, loaded.hooks, shape=SCENARIO)
        report.where, report.located = "agent.hooks", loaded.located
        return report
    speaks = dialects.get(loaded.dialect)
    if not speaks.profile_hooks or loaded.profile is None:
        # A dialect of its own (reading its scenario checked its hooks), or no profile.
        count = None if speaks.profile_hooks else len(speaks.declared(loaded, None))
        return Declaration(source, loaded.dialect, findings, shape=SCENARIO, count=count)
    declaration = check_document(loaded.profile, source)
    declaration.shape = SCENARIO
    declaration.findings.warnings[:0] = loaded.warnings
    return declaration


def validate_files(paths: list[Path], dialect: Dialect | None = None) -> list[Declaration]:
    """``belt hooks validate``: each file checked as what it is (declaration or scenario)."""
    return [read_declared(path, dialect) for path in paths]


# Each kind of trap: what it says, and its fix (``str.format`` templates).
TRAPS = {
    "async-on-gateable-event": (
        "an async hook on {event}: its decisions and injections can never act (async hooks "
        "never block and never inject)",
        'drop "async" to let it decide, or move it to an observe-only event',
    ),
    "declared-twice": (
        "the same {kind} on {event} as {first}: it runs twice on every event",
        "remove one of {first} and {where}",
    ),
    "gate-shorter-than-sweep": (
        "a gate of {timeout} s: the platform settles expired gates once a minute, so it expires "
        "up to {sweep} s later than its timeout says",
        "give it a timeout of at least {sweep}",
    ),
    "tool-runs-on-expiry": (
        "a gate on agent.tool_call that expires as allow{declared}: when nobody answers in time, "
        "the tool runs",
        'set default_resolution = "deny" unless running unapproved is what you mean',
    ),
    "handler-cannot-be-imported": (
        "{message}",
        "fix the module or the py:MODULE:FUNC reference (a path is read from the directory of "
        "the file that names it)",
    ),
    "credentials-in-url": (
        "the webhook URL to {host} carries a user name or password: every copy of the "
        "declaration (and of the platform's agent) holds it",
        "take it out of the URL and check a signature (--secret) or a token header instead",
    ),
    "stop-never-continues": (
        "a stop hook with max_continuations = 0: every continuation it asks for exceeds the "
        "limit, and the execution ends on an attention hold",
        "raise max_continuations, or drop the stop hook if it should only observe",
    ),
    "never-delivered": (
        "{kind} on {event} was never delivered: no run in the store fired it and no belt serve "
        "journal has a request to its URL",
        "check that its event happens in your runs (and, for agent.tool_call, that the tool is "
        "called), or remove it",
    ),
}


def trap(source: str, where: str, kind: str, /, **values: Any) -> Trap:
    """The trap ``kind`` of ``TRAPS`` at ``where``, its text filled in with ``values``."""
    message, fix = TRAPS[kind]
    values |= {"where": where, "sweep": SWEEP_SECONDS}
    return Trap(source, where, kind, message.format(**values), fix.format(**values))


def platform_traps(
    source: str, hooks: list[tuple[str, LifecycleHookConfig]], located: dict[int, Located]
) -> Iterator[Trap]:
    """The traps of an inference.sh hooks array, each hook with its position."""
    seen: dict[tuple[str, str, str | None], str] = {}
    for index, (where, hook) in enumerate(hooks):
        event = hook.event.value
        if hook.async_ and hook.type in DECIDING and EVENTS[event].can_gate:
            yield trap(source, where, "async-on-gateable-event", event=event)
        if hook.type == HookHandlerType.GATE:  # one that expires late, or lets a tool run
            if (timeout := hook.effective_timeout()) < SWEEP_SECONDS:
                yield trap(source, where, "gate-shorter-than-sweep", timeout=timeout)
            resolution = hook.effective_default_resolution()
            if event == "agent.tool_call" and resolution == InterruptResolution.ALLOW:
                declared = "" if hook.default_resolution else " (allow is the default)"
                yield trap(source, where, "tool-runs-on-expiry", declared=declared)
        handler = hook.handler if hook.type == HookHandlerType.WEBHOOK else None
        if handler is not None and is_in_process(handler):  # one that cannot load
            try:
                load_located(located.get(index) or Located(handler), where=f"{where}.handler")
            except BeltError as exc:
                yield trap(source, where, "handler-cannot-be-imported", message=exc.message)
        elif handler is not None:  # a valid declaration's URL: it splits
            url = urlsplit(handler)
            if url.username is not None or url.password is not None:
                yield trap(source, where, "credentials-in-url", host=url_host(handler))
        key = (event, hook.type.value, hook.handler)
        if key in seen:
            yield trap(source, where, "declared-twice", kind=key[1], event=event, first=seen[key])
        else:
            seen[key] = where


# Where a webhook delivery went: host (loopback names as one), port (None: default) and path.
WebhookKey = tuple[str, int | None, str]
# The deliveries on record: (event, type, label), or (event, key) for a webhook.
Delivered = set[tuple[str, str, str] | tuple[str, WebhookKey]]


def deliveries(store: Store) -> Delivered:
    """The hook deliveries on record (a damaged log is skipped: this is only a hint)."""
    found: Delivered = set()
    url_of = _hook_urls(store)
    for run_id in store.list_ids(RUN):
        for record in _records(store, EVENTS_LOG, run_id):
            if record.get("type") != "hook.executed":
                continue
            event, kind = str(record.get("hook_event")), str(record.get("handler_type"))
            label = str(record.get("handler"))
            index = record.get("hook_index")
            url = url_of(run_id).get(index) if type(index) is int else None
            if kind != HookHandlerType.WEBHOOK or is_in_process(label):
                found.add((event, kind, label))
            elif url and handler_label(kind, url) == label and (key := webhook_key(url)):
                found.add((event, key))
    for line in _records(store, JOURNAL, SERVE):
        headers, route = line.get("headers"), line.get("route")
        host = headers.get("host") if isinstance(headers, dict) else None
        if line.get("kind") != "hook" or not line.get("event") or not isinstance(route, str):
            continue
        if isinstance(host, str) and host and (key := webhook_key(f"//{host}", route)):
            found.add((str(line.get("event")), key))
    return found


def webhook_key(url: str, route: str | None = None) -> WebhookKey | None:
    """The ``WebhookKey`` of a URL, or of a journalled request (``//HOST`` and its ``route``)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    defaults = (80, 443) if route is not None else ({"http": 80, "https": 443}.get(parts.scheme),)
    path = parts.path if route is None else route
    name = "loopback" if is_loopback_host(host) else host.lower().strip("[]")
    return (name, None if port in defaults else port, path or "/")


def _hook_urls(store: Store) -> Callable[[str], dict[int, str]]:
    """A run's hook URLs by index, from its simulation's record of its hooks."""

    @functools.cache
    def urls(run_id: str) -> dict[int, str]:
        with suppress(BeltError):
            sim_id = store.read(RUN, run_id).get("sim_id")
            hooks = read_hooks(store, sim_id).get("hooks") if isinstance(sim_id, str) else None
            listed = enumerate(hooks if isinstance(hooks, list) else [])
            pairs = ((i, h.get("handler") if isinstance(h, dict) else None) for i, h in listed)
            return {i: url for i, url in pairs if isinstance(url, str)}
        return {}

    return urls


def _records(store: Store, log: str, id: str) -> Iterable[dict[str, object]]:
    with suppress(BeltError):
        return store.read_log(log, id)
    return []


def never_delivered(
    declared: list[tuple[str, str, LifecycleHookConfig]], delivered: Delivered
) -> Iterator[Trap]:
    """The declared hooks no run fired and no ``belt serve`` was sent (a webhook: to its URL)."""
    for source, where, hook in declared:
        event, kind, handler = hook.event.value, hook.type.value, hook.handler
        if kind == HookHandlerType.WEBHOOK and handler and not is_in_process(handler):
            seen: tuple[object, ...] = (event, webhook_key(handler))  # a None key: never delivered
        else:
            seen = (event, kind, handler_label(hook.type, handler))
        if seen not in delivered:
            yield trap(source, where, "never-delivered", kind=kind, event=event)
