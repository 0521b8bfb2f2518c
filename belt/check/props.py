"""``belt check --props FILE``: properties of a policy, each a decision every matching payload gets.

A check file holds ``[[property]]`` tables (docs/check.md) with the patterns of expectations and
policies; a wrong key or a bad pattern is named by its path and exits 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from belt.declaring.declarations import read_document
from belt.display.text import describe
from belt.errors import InvalidInput
from belt.reading.didyoumean import did_you_mean
from belt.reading.matching import (
    ArgumentMatchers,
    Matcher,
    argument_matchers,
    arguments_match,
    key_paths,
    value_matcher,
)
from belt.wire.catalogue import EVENTS
from belt.wire.enums import HookDecision
from belt.wire.validate import Findings

KEYS = ("name", "event", "tool", "arguments", "unless", "decision")


@dataclass(frozen=True)
class Property:
    """One ``[[property]]``, checked and compiled."""

    name: str
    event: str
    decision: str
    tool: str | None
    tool_matcher: Matcher | None
    arguments: dict[tuple[str, ...], Any]
    argument_matchers: ArgumentMatchers
    unless: dict[tuple[str, ...], Any]
    unless_matchers: ArgumentMatchers

    def applies(self, payload: dict[str, object]) -> bool:
        """True when ``payload`` is one the property speaks of."""
        data = cast(dict[str, object], payload.get("data") or {})
        found = data.get("arguments")
        return (
            payload.get("event") == self.event
            and (self.tool_matcher is None or self.tool_matcher(data.get("tool")))
            and (not self.argument_matchers or arguments_match(self.argument_matchers, found))
            and not (self.unless_matchers and arguments_match(self.unless_matchers, found))
        )


def read_props(path: str | Path) -> list[Property]:
    """Read and compile a check file; every problem is named by its path (exit 5)."""
    document = read_document(path, kind="policy")
    findings = Findings()
    raw = document.get("property") if isinstance(document, dict) else None
    for key in document if isinstance(document, dict) else ():
        if key != "property":
            hint = did_you_mean(key, ("property",))
            findings.error(key, f"unknown key (a check file holds [[property]] tables){hint}")
    if not isinstance(raw, list) or not raw:
        findings.error("property", f"expected [[property]] tables, got {describe(raw)}")
        raise InvalidInput(f"{path}: not a check file", problems=findings.problems)
    properties = [p for i, item in enumerate(raw) if (p := _compile(i, item, findings))]
    if not findings.ok:
        raise InvalidInput(f"{path}: not a valid check file", problems=findings.problems)
    return properties


def _compile(index: int, item: Any, findings: Findings) -> Property | None:
    base = f"property[{index}]"
    if not isinstance(item, dict):
        findings.error(base, f"expected a table, got {describe(item)}")
        return None
    for key in item:
        if key not in KEYS:
            findings.error(
                f"{base}.{key}",
                f"unknown key (expected one of {', '.join(KEYS)}){did_you_mean(key, KEYS)}",
            )
    event = item.get("event", "agent.tool_call")
    if event not in EVENTS:
        findings.error(
            f"{base}.event", f"{event!r} is not a lifecycle event{did_you_mean(event, EVENTS)}"
        )
    decision = item.get("decision")
    decisions = tuple(d.value for d in HookDecision)
    if decision not in decisions:
        findings.error(f"{base}.decision", f"is required: one of {', '.join(decisions)}")
    tool = item.get("tool")
    tool_matcher = value_matcher(tool, f"{base}.tool", findings) if isinstance(tool, str) else None
    if tool is not None and not isinstance(tool, str):
        findings.error(f"{base}.tool", f"expected a glob or re:<regex>, got {describe(tool)}")
    if event != "agent.tool_call" and (tool is not None or "arguments" in item or "unless" in item):
        findings.error(base, "tool, arguments and unless are for agent.tool_call properties")
    wanted = argument_matchers(item.get("arguments"), f"{base}.arguments", findings)
    unless = argument_matchers(item.get("unless"), f"{base}.unless", findings)
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        findings.error(f"{base}.name", f"expected a string, got {describe(name)}")
    if not findings.ok:
        return None
    return Property(
        name=name or base,
        event=str(event),
        decision=str(decision),
        tool=tool,
        tool_matcher=tool_matcher,
        arguments=dict(key_paths(item.get("arguments") or {})),
        argument_matchers=wanted,
        unless=dict(key_paths(item.get("unless") or {})),
        unless_matchers=unless,
    )
