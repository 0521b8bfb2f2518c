"""What ``belt check`` holds to the contract: one handler on one event, and how to reach it.

A TARGET is a webhook URL, ``py:MODULE:FUNC``, or a declaration file (each webhook hook a subject,
each Nexus boundary one through the ``--executor`` named by its tool); ``--executor`` alone checks
that tool on every Nexus boundary. A URL not on this machine needs ``--allow-network``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from belt.declaring.declarations import load_declaration
from belt.deliveries.effects import is_in_process, url_host
from belt.engine.dispatch import route_for
from belt.engine.offline import on_this_machine, origin
from belt.errors import InvalidInput, UsageError
from belt.executor.targets import parse_tools
from belt.reading.didyoumean import closest, did_you_mean
from belt.wire.catalogue import EVENTS
from belt.wire.enums import Dialect
from belt.wire.nexus import NexusEvent
from belt.wire.platform import WEBHOOK_TIMEOUT_DEFAULT, HookHandlerType
from belt.wire.validate import check_webhook_url, in_process_problem

if TYPE_CHECKING:
    from belt.engine.dispatch import Route
    from belt.executor.targets import Target

# The events a bare URL or py: target is checked on: every event the platform emits.
PLATFORM_EVENTS = tuple(event for event, info in EVENTS.items() if info.emitted)


@dataclass
class Subject:
    """One handler on one event: a webhook URL, a ``py:`` handler or a Nexus executor tool."""

    event: str
    target: str  # a URL, py:MODULE:FUNC, or the executor's TARGET
    timeout: float
    declared_async: bool = False
    tool: str | None = None  # the executor tool's name (Nexus)
    declared: str | None = None  # the URL a hooks file declares (target: where its route sends it)
    executor: Target | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        """``webhook``, ``py`` or ``executor``."""
        if self.executor is not None:
            return "executor"
        return "py" if is_in_process(self.target) else "webhook"

    @property
    def label(self) -> str:
        """How the subject is shown: a URL by host only."""
        if self.executor is not None:
            return f"{self.event} → executor {self.tool} ({self.executor.label})"
        shown = self.target if self.kind == "py" else url_host(self.target, every_port=True)
        return f"{self.event} → {shown}"


def _events(wanted: list[str], known: tuple[str, ...], what: str) -> list[str]:
    if unknown := [event for event in wanted if event not in known]:
        raise InvalidInput(
            f"--event {unknown[0]!r}: not {what} (expected one of {', '.join(known)})"
            f"{did_you_mean(unknown[0], known)}",
            where="--event",
        )
    return [event for event in known if not wanted or event in wanted]


def subjects_for(
    target: str | None,
    *,
    events: list[str],
    executors: list[str],
    routes: list[Route],
    timeout: float | None,
) -> tuple[list[Subject], list[str]]:
    """The subjects of a check and the notes about what is not checked (gates, tasks, …)."""
    try:
        tools = parse_tools(executors, load=False)  # imported in the worker processes
    except UsageError as exc:  # its messages name `belt executor run`'s --tool
        raise UsageError(exc.message.replace("--tool", "--executor", 1)) from None
    if target is None:
        if not tools:
            raise UsageError("give a TARGET (a URL, py:MODULE:FUNC or a hooks file) or --executor")
        nexus = _events(events, tuple(NexusEvent), "a Nexus boundary")
        seconds = timeout or WEBHOOK_TIMEOUT_DEFAULT
        return [
            Subject(event, tool.spec, seconds, tool=name, executor=tool)
            for name, tool in tools.items()
            for event in nexus
        ], []
    if target.startswith(("http://", "https://", "py:")):
        if is_in_process(target):
            problem, shown = in_process_problem(target, allowed=True), target
        else:
            problem, shown = check_webhook_url(target), url_host(target)
        if problem:
            raise InvalidInput(f"TARGET {shown}: {problem}")
        chosen = _events(events, PLATFORM_EVENTS, "an event belt checks")
        seconds = timeout or float(WEBHOOK_TIMEOUT_DEFAULT)
        return [Subject(event, target, seconds) for event in chosen], []
    return _from_file(Path(target), events=events, tools=tools, routes=routes, timeout=timeout)


def _from_file(
    path: Path,
    *,
    events: list[str],
    tools: dict[str, Target],
    routes: list[Route],
    timeout: float | None,
) -> tuple[list[Subject], list[str]]:
    declaration = load_declaration(path)
    if not declaration.ok:
        problems = declaration.findings.problems
        raise InvalidInput(f"{path}: not a valid hooks file", problems=problems)
    subjects: list[Subject] = []
    notes: list[str] = []
    if declaration.dialect == Dialect.PLATFORM:
        for index, hook in enumerate(declaration.hooks):
            event = str(hook.event)
            if events and event not in events:
                continue
            if hook.type != HookHandlerType.WEBHOOK or not hook.handler:
                notes.append(f"hooks[{index}] ({event}, {hook.type}): not a webhook, not checked")
                continue
            url = str(hook.handler)
            route = route_for(routes, url)
            destination = url if route is None else route.destination(url)
            seconds = timeout or float(hook.effective_timeout())
            subjects.append(Subject(event, destination, seconds, hook.runs_async, declared=url))
        if events and not subjects:
            raise InvalidInput(f"{path}: no webhook hook on {', '.join(events)}")
        return subjects, notes
    declared = declaration.lifecycle_hooks.declared() if declaration.lifecycle_hooks else {}
    for event, boundary in declared.items():
        if events and event.value not in events:
            continue
        if (tool := tools.get(boundary.tool)) is None:
            given = closest(boundary.tool, tools)  # a misspelt --executor NAME
            typo = f"; --executor names {given!r}: did you mean {boundary.tool!r}?"
            raise InvalidInput(
                f"{path}: lifecycle_hooks.{event.value} runs the tool {boundary.tool!r}; give "
                f"--executor {boundary.tool}=TARGET (cmd:COMMAND, py:MODULE:FUNC or a URL)"
                + (typo if given else "")
            )
        seconds = timeout or boundary.timeout_ms / 1000
        subjects.append(Subject(event.value, tool.spec, seconds, tool=boundary.tool, executor=tool))
    if not subjects:
        on = f" on {', '.join(events)}" if events else ""
        raise InvalidInput(f"{path}: declares no hook to check{on}")
    return subjects, notes


def network_problems(subjects: list[Subject]) -> list[str]:
    """Every subject that would be sent to an address not on this machine, one line each."""
    problems = []
    seen: set[str] = set()
    for subject in subjects:
        target = subject.target
        tool = subject.executor is not None and subject.executor.kind != "http"
        if tool or on_this_machine(target) or target in seen:
            continue
        seen.add(target)
        problems.append(
            f"{subject.event}: the webhook {origin(target)} is not on this machine; serve it "
            f"here with --route {origin(target)}=TARGET (py:MODULE:FUNC or a loopback URL), "
            "or give --allow-network"
            if subject.declared == target
            else f"{subject.event}: {origin(target)} is not on this machine; give "
            "--allow-network to check it there (belt check sends only to the targets given)"
        )
    return problems
