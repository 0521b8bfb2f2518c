"""``belt check --save DIR``: each failure written as a ``belt test`` scenario, so it stays fixed.

The scenario's hook is the checked handler, and one turn delivers the shrunk ``data`` (the
envelope is the simulation's own); a payload a scenario cannot hold is not written, saying why.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from pydantic import ValidationError

from belt.check.props import Property
from belt.check.report import CheckResult
from belt.check.subjects import Subject
from belt.check.writable import cannot_write
from belt.display.text import short
from belt.engine.scenario import Scenario
from belt.wire.validate import IN_PROCESS_PREFIX

SAVED_CHECKS = ("answers", "body", "property")  # what one simulated delivery can show
TURN_EVENTS = ("agent.start", "agent.turn_start", "agent.turn_complete", "agent.complete")
SAVED_EVENTS = ("agent.tool_call", "agent.tool_result", "agent.error", *TURN_EVENTS)


def handler_spelling(target: str, directory: Path) -> str:
    """``target`` as a scenario in ``directory`` names it (a ``py:`` file path made relative)."""
    if not target.startswith(IN_PROCESS_PREFIX):
        return target
    module, _, func = target[len(IN_PROCESS_PREFIX) :].partition(":")
    if not (module.endswith(".py") or "/" in module):
        return target
    relative = os.path.relpath(os.path.abspath(module), os.path.abspath(directory))
    return f"{IN_PROCESS_PREFIX}{Path(relative).as_posix()}:{func}"


def _turn(event: str, data: dict[str, object]) -> dict[str, object]:
    """The user message and model script that make the engine send ``event`` with ``data``."""
    if event == "agent.error":
        return {"error": data.get("error"), "model": []}
    calls: list[dict[str, object]] = []
    if event == "agent.tool_call":
        arguments = data.get("arguments") or {}
        calls = [{"name": data.get("tool"), "arguments": arguments, "result": "done"}]
    elif event == "agent.tool_result":
        ended = {key: data.get(key) for key in ("status", "result")}
        calls = [{"name": data.get("tool"), "async": True, **ended}]
    said = [{"say": "Calling the tool.", "tool_calls": calls}] if calls else []
    return {"model": [*said, {"say": "Done."}]}


def scenario(
    subject: Subject, result: CheckResult, prop: Property | None, directory: Path
) -> dict[str, object] | str:
    """The scenario of one failure, or why a scenario cannot show it."""
    failure = result.failure
    assert failure is not None
    if result.check not in SAVED_CHECKS:
        return "one simulated delivery cannot show it (it takes a repeated or signed request)"
    event = subject.event
    if event not in SAVED_EVENTS:
        return f"a scripted turn does not deliver {event} with a payload of its choosing"
    handler, timeout = (
        handler_spelling(subject.target, directory),
        max(1, math.ceil(subject.timeout)),
    )
    hook = {"event": event, "type": "webhook", "handler": handler, "timeout": timeout}
    name = f"belt check {result.title}: {short(failure.detail, 120)}"
    expect = {"name": name, "event": event} | ({"decision": prop.decision} if prop else {})
    turn = _turn(event, failure.payload.get("data") or {})
    document: dict[str, object] = {
        "agent": {"name": "belt-check", "hooks": [hook]},
        "turns": [{"user": f"belt check: {result.title} on {event}", **turn}],
        "expect": [expect],
    }
    try:
        Scenario.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"a scenario cannot hold this payload ({where}: {first['msg']})"
    return document


def save_failures(
    directory: Path, subject: Subject, results: list[CheckResult], properties: list[Property]
) -> list[str]:
    """Write each failure a scenario can show into ``directory``; returns why each write failed."""
    unwritten: list[str] = []
    by_name = {prop.name: prop for prop in properties}
    for result in results:
        if result.failure is None:
            continue
        prop = by_name.get(result.name) if result.check == "property" else None
        document = scenario(subject, result, prop, directory)
        if isinstance(document, str):
            result.not_saved = document
            continue
        stem = re.sub(r"[^a-z0-9]+", "-", f"{subject.event} {result.name or result.check}".lower())
        path = directory / f"check-{stem.strip('-')}.json"
        number = 2
        while path.exists():  # a second failure of the same name gets -2, and so on
            path = directory / f"check-{stem.strip('-')}-{number}.json"
            number += 1
        text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as file:
                try:
                    file.write(text)
                    file.flush()
                except OSError:
                    path.unlink(missing_ok=True)  # no half-written scenario is left behind
                    raise
        except OSError as exc:
            result.not_saved = cannot_write("--save", path, exc).message
            unwritten.append(result.not_saved)
            continue
        result.saved = str(path)
    return unwritten
