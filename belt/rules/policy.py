"""Policy files: ordered rules that match hook payloads and decide what a hook answers.

The format is in ``docs/policy.md``. A policy is checked whole when loaded, each problem with its
path; matching then only runs precompiled patterns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from belt.declaring.declarations import read_document
from belt.display.text import describe
from belt.errors import InvalidInput
from belt.reading.didyoumean import did_you_mean
from belt.reading.matching import ArgumentMatchers, argument_matchers, arguments_match, glob_field
from belt.wire.catalogue import EVENTS
from belt.wire.platform import (
    ContextInjection,
    HookDecision,
    LifecycleHookPayload,
    LifecycleHookResponse,
)
from belt.wire.validate import Findings, is_int, model_problems

POLICY_KEYS = ("default", "rules")
RULE_KEYS = tuple("event tool chat_id turn_count arguments decision reason inject system".split())
DECISIONS = tuple(d.value for d in HookDecision)


@dataclass(frozen=True)
class Rule:
    """One compiled rule: what it matches and the response it gives."""

    index: int
    response: LifecycleHookResponse
    event: str | None = None
    tool: re.Pattern[str] | None = None
    chat_id: re.Pattern[str] | None = None
    turn_min: int | None = None
    turn_max: int | None = None
    arguments: ArgumentMatchers = ()
    verdict: Verdict = field(init=False, repr=False, compare=False)  # made once

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.response, self.index, fixed=True))

    def matches(self, payload: LifecycleHookPayload) -> bool:
        """True when every condition of the rule holds for ``payload``."""
        data = payload.data or {}
        tool = data.get("tool")
        return (
            (self.event is None or payload.event == self.event)
            and (self.chat_id is None or self.chat_id.match(payload.chat_id) is not None)
            and (self.turn_min is None or payload.turn_count >= self.turn_min)
            and (self.turn_max is None or payload.turn_count <= self.turn_max)
            and (self.tool is None or (isinstance(tool, str) and self.tool.match(tool) is not None))
            and (not self.arguments or arguments_match(self.arguments, data.get("arguments")))
        )


@dataclass(frozen=True)
class Verdict:
    """A policy's answer to one payload and its rule's index (None: default), or a handler's."""

    response: LifecycleHookResponse
    rule: int | None
    warnings: tuple[str, ...] = ()
    fixed: bool = False  # a policy's own, the same object for every payload: its encoding kept


@dataclass(frozen=True)
class Policy:
    """A loaded policy: rules tried in order, the first match wins, else the default decision."""

    source: str
    default: HookDecision
    rules: tuple[Rule, ...]
    # Made once: the default's verdict, the rules that can match each event a rule names, and
    # those that name none (all that can match an event none names).
    otherwise: Verdict = field(init=False, repr=False, compare=False)
    by_event: dict[str, tuple[Rule, ...]] = field(init=False, repr=False, compare=False)
    any_event: tuple[Rule, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        response = LifecycleHookResponse(decision=self.default)
        object.__setattr__(self, "otherwise", Verdict(response, None, fixed=True))
        named = {rule.event for rule in self.rules if rule.event is not None}
        by_event = {
            event: tuple(rule for rule in self.rules if rule.event in (None, event))
            for event in named
        }
        object.__setattr__(self, "by_event", by_event)
        object.__setattr__(self, "any_event", tuple(r for r in self.rules if r.event is None))

    def decide(self, payload: LifecycleHookPayload) -> Verdict:
        """The response for ``payload``: the first rule that matches it, of those that can."""
        for rule in self.by_event.get(payload.event, self.any_event):
            if rule.matches(payload):
                return rule.verdict
        return self.otherwise


def load_policy(path: str | Path) -> Policy:
    """Read and check a policy file; every problem names its path (exit 5)."""
    return parse_policy(read_document(path, kind="policy"), str(path))


def parse_policy(doc: Any, source: str) -> Policy:
    """Check and compile a decoded policy document."""
    findings = Findings()
    if not isinstance(doc, dict):
        findings.error("(document)", f"expected a table, got {describe(doc)}")
        raise _refused(source, findings)
    findings.unknown_keys(doc, POLICY_KEYS, "")
    default = doc.get("default", HookDecision.ALLOW.value)
    _decision(default, "default", findings)
    if not isinstance(raw_rules := doc.get("rules", []), list):
        findings.error(
            "rules", f"expected an array of tables ([[rules]]), got {describe(raw_rules)}"
        )
        raw_rules = []
    rules = [rule for i, raw in enumerate(raw_rules) if (rule := _parse_rule(raw, i, findings))]
    if not findings.ok:
        raise _refused(source, findings)
    return Policy(source, HookDecision(default), tuple(rules))


def _refused(source: str, findings: Findings) -> InvalidInput:
    return InvalidInput(
        f"{source}: {len(findings.problems)} problem(s) in the policy",
        problems=findings.problems,
        hint="see docs/policy.md for the policy format",
    )


def _decision(value: Any, path: str, findings: Findings) -> None:
    """Name the problem when ``value`` is not a decision."""
    if value not in DECISIONS:
        choices = f"(one of {', '.join(DECISIONS)}){did_you_mean(value, DECISIONS)}"
        findings.error(path, f"{value!r} is not a decision {choices}")


def _parse_rule(raw: Any, index: int, findings: Findings) -> Rule | None:
    path = f"rules[{index}]"
    if not isinstance(raw, dict):
        findings.error(path, f"expected a table, got {describe(raw)}")
        return None
    before = len(findings.problems)
    findings.unknown_keys(raw, RULE_KEYS, path)
    if (event := raw.get("event")) is not None and event not in EVENTS:
        findings.error(
            f"{path}.event",
            f"{event!r} is not a lifecycle event (expected one of {', '.join(EVENTS)})"
            f"{did_you_mean(event, EVENTS)}",
        )
    tool = glob_field(raw, "tool", path, findings)
    chat_id = glob_field(raw, "chat_id", path, findings)
    turn_min, turn_max = _turn_count(raw.get("turn_count"), f"{path}.turn_count", findings)
    arguments = argument_matchers(raw.get("arguments"), f"{path}.arguments", findings)
    response = _response(raw, path, findings)
    if len(findings.problems) > before or response is None:
        return None
    return Rule(index, response, event, tool, chat_id, turn_min, turn_max, arguments)


def _turn_count(value: Any, path: str, findings: Findings) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if is_int(value):
        return value, value
    if not isinstance(value, dict):
        findings.error(
            path, f"expected {{ min = N, max = N }} or an integer, got {describe(value)}"
        )
        return None, None
    findings.unknown_keys(value, ("min", "max"), path)
    bounds: list[int | None] = []
    for key in ("min", "max"):
        if (bound := value.get(key)) is not None and (not is_int(bound) or bound < 0):
            findings.error(f"{path}.{key}", f"expected an integer >= 0, got {bound!r}")
            bound = None
        bounds.append(bound)
    low, high = bounds
    if low is not None and high is not None and low > high:
        findings.error(path, f"min {low} is above max {high}")
    return low, high


def _response(
    raw: Mapping[str, object], path: str, findings: Findings
) -> LifecycleHookResponse | None:
    before = len(findings.problems)
    if (decision := raw.get("decision")) is not None:
        _decision(decision, f"{path}.decision", findings)
    for key in ("reason", "system"):
        if key in raw and not isinstance(raw[key], str):
            findings.error(f"{path}.{key}", f"expected a string, got {describe(raw[key])}")
    if (inject := raw.get("inject")) is not None:
        try:
            inject = ContextInjection.model_validate(inject)
        except ValidationError as exc:
            findings.problems.extend(model_problems(exc, f"{path}.inject", model=ContextInjection))
    if len(findings.problems) > before:
        return None
    return LifecycleHookResponse(
        decision=decision, reason=raw.get("reason"), inject=inject, system=raw.get("system")
    )
