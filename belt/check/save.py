"""``belt check --save DIR``: each failure written as a ``belt test`` scenario, so it stays fixed.

The scenario declares the checked handler as a webhook hook on the failing event and plays one
turn that reaches it; for ``agent.tool_call`` the model calls the shrunk tool with the shrunk
arguments. A failed hook call fails a ``belt test`` scenario by itself (no expectation names its
error), and a property's failure is an expectation of its decision. The envelope (ids, timestamp,
turn count) is the simulation's own, so a defect that only those fields trigger is not saved.
Scenarios are JSON, which holds any generated value exactly.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from belt.check.props import Property
from belt.check.report import CheckResult
from belt.check.subjects import Subject
from belt.text import short

SAVED_CHECKS = ("answers", "body", "property")
"""The checks one simulated delivery can show (a redelivery or a signature case cannot)."""
TURN_EVENTS = ("agent.start", "agent.turn_start", "agent.turn_complete", "agent.complete")


def scenario(subject: Subject, result: CheckResult, prop: Property | None) -> dict[str, Any] | None:
    """The scenario of one failure, or None when a simulated turn cannot send its payload."""
    failure = result.failure
    if failure is None or result.check not in SAVED_CHECKS:
        return None
    payload = failure.payload
    event = subject.event
    if event != "agent.tool_call" and event not in TURN_EVENTS:
        return None
    hook = {
        "event": event,
        "type": "webhook",
        "handler": subject.target,
        "timeout": max(1, math.ceil(subject.timeout)),
    }
    model: list[dict[str, Any]] = []
    expect: dict[str, Any] = {"name": f"belt check {result.title}: {short(failure.detail, 120)}"}
    expect["event"] = event
    if event == "agent.tool_call":
        data = payload.get("data") or {}
        call = {
            "name": data.get("tool"),
            "arguments": data.get("arguments") or {},
            "result": "done",
        }
        model.append({"say": "Calling the tool.", "tool_calls": [call]})
        if prop is not None:
            expect["decision"] = prop.decision
    model.append({"say": "Done."})
    return {
        "agent": {"name": "belt-check", "hooks": [hook]},
        "turns": [{"user": f"belt check: {result.title} on {event}", "model": model}],
        "expect": [expect],
    }


def save_failures(
    directory: Path, subject: Subject, results: list[CheckResult], properties: list[Property]
) -> None:
    """Write each failure of ``results`` that a scenario can show into ``directory``."""
    by_name = {prop.name: prop for prop in properties}
    for result in results:
        prop = by_name.get(result.name) if result.check == "property" else None
        document = scenario(subject, result, prop)
        if document is None:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^a-z0-9]+", "-", f"{subject.event} {result.name or result.check}".lower())
        path = directory / f"check-{stem.strip('-')}.json"
        number = 2
        while path.exists():
            path = directory / f"check-{stem.strip('-')}-{number}.json"
            number += 1
        path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        result.saved = str(path)
