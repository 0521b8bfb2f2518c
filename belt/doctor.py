"""``belt hooks doctor``: the traps a valid declaration file can hold, each with its fix.

``belt hooks validate`` says whether a file is what the platform accepts. A valid file can
still do nothing, or the wrong thing, without a word: an async hook whose deny never acts, a
gate that expires later than it says, a webhook URL that carries its password into every log.
The doctor reads each declaration for those traps, and the store's history (the runs' hook
records and ``belt serve``'s journal) for declared hooks that were never delivered.

What depends on a handler's answers (a deny on an observe-only event, a stop hook that always
continues) is not read here: it takes calling the handler.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from belt.declarations import Declaration, check_document, read_declaration
from belt.effects import handler_label, is_in_process, url_host
from belt.engine.dispatch import load_located
from belt.engine.scenario import LoadedScenario, scenario_from_document
from belt.errors import BeltError
from belt.handlers.inprocess import Located
from belt.records.journal import JOURNAL, SERVE
from belt.records.runs import EVENTS_LOG, RUN
from belt.store import Store
from belt.wire.catalogue import EVENTS
from belt.wire.enums import HookHandlerType, InterruptResolution
from belt.wire.nexus import LifecycleHooks
from belt.wire.platform import LifecycleHookConfig
from belt.wire.validate import Findings

DECIDING = (HookHandlerType.WEBHOOK, HookHandlerType.BUILTIN)
"""The handler types whose answers can decide or inject (a task decides nothing, and async is
not used for a gate)."""
SWEEP_SECONDS = 60
"""How often the platform settles expired gates: a gate's expiry lands up to this much late."""


@dataclass(frozen=True)
class Trap:
    """One trap found in a declaration file."""

    file: str
    where: str
    kind: str
    message: str
    fix: str

    def summary(self) -> dict[str, str]:
        """A JSON-ready form."""
        return {
            "file": self.file,
            "where": self.where,
            "kind": self.kind,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class Examined:
    """What the doctor found in the files it read."""

    files: list[str]
    traps: list[Trap]
    invalid: list[Declaration]
    history: bool
    """Whether the store had any hook delivery on record to compare the declarations with."""

    def summary(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "files": self.files,
            "traps": [trap.summary() for trap in self.traps],
            "invalid": [declaration.summary() for declaration in self.invalid],
            "history": self.history,
        }


@dataclass
class Declared:
    """The hooks one file declares: a declaration file's, or a scenario agent's (``where``
    prefixes their positions)."""

    source: str
    where: str
    hooks: list[LifecycleHookConfig]
    lifecycle_hooks: LifecycleHooks | None
    located: dict[int, Located] = field(default_factory=dict)
    """Where a scenario's in-process hooks are loaded from (by index): from its directory."""


def examine(paths: list[Path], store: Store) -> Examined:
    """Read each declaration or scenario file for traps; an invalid file is reported as
    ``validate`` reports it."""
    traps: list[Trap] = []
    invalid: list[Declaration] = []
    declared: list[tuple[str, str, LifecycleHookConfig]] = []
    for path in paths:
        found = read_declared(path)
        if isinstance(found, Declaration):
            invalid.append(found)
            continue
        positions = [f"{found.where}[{i}]" for i in range(len(found.hooks))]
        traps.extend(
            platform_traps(
                found.source, list(zip(positions, found.hooks, strict=True)), found.located
            )
        )
        if found.lifecycle_hooks is not None:
            traps.extend(nexus_traps(found.source, found.lifecycle_hooks))
        declared.extend(
            (found.source, where, hook) for where, hook in zip(positions, found.hooks, strict=True)
        )
    delivered = Deliveries.read(store)
    if delivered.any:
        traps.extend(never_delivered(declared, delivered))
    return Examined([str(p) for p in paths], traps, invalid, delivered.any)


def read_declared(path: Path) -> Declared | Declaration:
    """The hooks ``path`` declares (a scenario is known by its ``turns``), or the failed report
    of a file that cannot be read or is invalid."""
    source = str(path)
    try:
        doc = read_declaration(path)
        if isinstance(doc, dict) and "turns" in doc:
            loaded = scenario_from_document(doc, source, path.parent)
            if isinstance(loaded, LoadedScenario):
                return Declared(source, "agent.hooks", loaded.hooks, None, loaded.located)
            profile = loaded.profile
            if profile is None:
                return Declared(source, "", [], None)
            doc = profile
        declaration = check_document(doc, source)
    except BeltError as exc:
        findings = Findings()
        prefix = f"{source}:"
        message = exc.message
        findings.problems.append(message.removeprefix(prefix).lstrip())
        return Declaration(source, None, findings, failure=exc.exit_code)
    if not declaration.ok:
        return declaration
    return Declared(source, "hooks", declaration.hooks, declaration.lifecycle_hooks)


def platform_traps(
    source: str,
    hooks: list[tuple[str, LifecycleHookConfig]],
    located: dict[int, Located] | None = None,
) -> Iterator[Trap]:
    """The traps of an inference.sh hooks array (each hook with its position; ``located``: where
    a scenario's in-process hooks are loaded from, by index)."""
    seen: dict[tuple[str, str, str | None], str] = {}
    for index, (where, hook) in enumerate(hooks):
        event = hook.event.value
        if hook.async_ and hook.type in DECIDING and EVENTS[event].can_gate:
            yield Trap(
                source,
                where,
                "async-on-gateable-event",
                f"an async hook on {event}: its decisions and injections can never act "
                "(async hooks never block and never inject)",
                'drop "async" to let it decide, or move it to an observe-only event',
            )
        if hook.type == HookHandlerType.GATE:
            yield from gate_traps(source, where, hook)
        if hook.handler is not None and hook.type == HookHandlerType.WEBHOOK:
            place = (located or {}).get(index)
            yield from handler_traps(source, where, hook.handler, place)
        key = (event, hook.type.value, hook.handler)
        if key in seen:
            yield Trap(
                source,
                where,
                "declared-twice",
                f"the same {hook.type.value} on {event} as {seen[key]}: it runs twice on every "
                "event",
                f"remove one of {seen[key]} and {where}",
            )
        else:
            seen[key] = where


def gate_traps(source: str, where: str, hook: LifecycleHookConfig) -> Iterator[Trap]:
    """A gate that expires late, or whose expiry lets a tool run."""
    timeout = hook.effective_timeout()
    if timeout < SWEEP_SECONDS:
        yield Trap(
            source,
            where,
            "gate-shorter-than-sweep",
            f"a gate of {timeout} s: the platform settles expired gates once a minute, so it "
            f"expires up to {SWEEP_SECONDS} s later than its timeout says",
            f"give it a timeout of at least {SWEEP_SECONDS}",
        )
    resolution = hook.effective_default_resolution()
    if hook.event.value == "agent.tool_call" and resolution == InterruptResolution.ALLOW:
        declared = "" if hook.default_resolution else " (allow is the default)"
        yield Trap(
            source,
            where,
            "tool-runs-on-expiry",
            f"a gate on agent.tool_call that expires as allow{declared}: when nobody answers "
            "in time, the tool runs",
            'set default_resolution = "deny" unless running unapproved is what you mean',
        )


def handler_traps(
    source: str, where: str, handler: str, place: Located | None = None
) -> Iterator[Trap]:
    """A webhook URL that carries credentials, a ``py:`` handler that cannot be imported (or a
    ``policy:`` file that cannot be read), loaded from ``place`` when its scenario located it."""
    if is_in_process(handler):
        try:
            load_located(place or Located(handler), where=f"{where}.handler")
        except BeltError as exc:
            yield Trap(
                source,
                where,
                "handler-cannot-be-imported",
                exc.message,
                "fix the module or the py:MODULE:FUNC reference (a path is read from the "
                "directory of the file that names it)",
            )
        return
    try:
        parts = urlsplit(handler)
        credentials = parts.username is not None or parts.password is not None
    except ValueError:
        return  # validate refuses such a URL; nothing more to say here
    if credentials:
        yield Trap(
            source,
            where,
            "credentials-in-url",
            f"the webhook URL to {url_host(handler)} carries a user name or password: every "
            "copy of the declaration (and of the platform's agent) holds it",
            "take it out of the URL and check a signature (--secret) or a token header instead",
        )


def nexus_traps(source: str, hooks: LifecycleHooks) -> Iterator[Trap]:
    """The traps of a Nexus lifecycle_hooks object."""
    stop = hooks.stop
    if stop is not None and stop.max_continuations == 0:
        yield Trap(
            source,
            "lifecycle_hooks.stop",
            "stop-never-continues",
            "a stop hook with max_continuations = 0: every continuation it asks for exceeds "
            "the limit, and the execution ends on an attention hold",
            "raise max_continuations, or drop the stop hook if it should only observe",
        )


@dataclass
class Deliveries:
    """The hook deliveries on record: (event, handler type, handler label) from the runs' hook
    records, and (event, route) from ``belt serve``'s journal."""

    hooks: set[tuple[str, str, str]]
    routes: set[tuple[str, str]]

    @property
    def any(self) -> bool:
        """True when anything at all was delivered."""
        return bool(self.hooks or self.routes)

    @classmethod
    def read(cls, store: Store) -> Deliveries:
        """Every delivery the store holds (a damaged log is skipped: this is a hint, not a
        check the store must pass)."""
        hooks: set[tuple[str, str, str]] = set()
        for run_id in store.list_ids(RUN):
            for record in _records(store, EVENTS_LOG, run_id):
                if record.get("type") == "hook.executed":
                    hooks.add(
                        (
                            str(record.get("hook_event")),
                            str(record.get("handler_type")),
                            str(record.get("handler")),
                        )
                    )
        routes = {
            (str(record.get("event")), str(record.get("route")))
            for record in _records(store, JOURNAL, SERVE)
            if record.get("kind") == "hook" and record.get("event")
        }
        return cls(hooks, routes)


def _records(store: Store, log: str, id: str) -> Iterable[dict[str, Any]]:
    try:
        return store.read_log(log, id)
    except BeltError:
        return []


def never_delivered(
    declared: list[tuple[str, str, LifecycleHookConfig]], delivered: Deliveries
) -> Iterator[Trap]:
    """The declared hooks no run fired and no ``belt serve`` was sent."""
    for source, where, hook in declared:
        event, kind = hook.event.value, hook.type.value
        if (event, kind, handler_label(hook.type, hook.handler)) in delivered.hooks:
            continue
        if hook.handler and kind == HookHandlerType.WEBHOOK and not is_in_process(hook.handler):
            try:
                route = urlsplit(hook.handler).path or "/"
            except ValueError:
                route = ""
            if (event, route) in delivered.routes:
                continue
        yield Trap(
            source,
            where,
            "never-delivered",
            f"{kind} on {event} was never delivered: no run in the store fired it and no "
            "belt serve journal has it",
            "check that its event happens in your runs (and, for agent.tool_call, that the "
            "tool is called), or remove it",
        )
