"""Policy files: ordered rules that match hook payloads and decide what a hook answers.

The format is documented in ``docs/policy.md``. A policy is checked completely when it is
loaded, so a bad key or pattern is reported with its path before ``belt serve`` starts; matching
then only runs precompiled patterns.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from belt.errors import InvalidInput
from belt.wire.catalogue import EVENTS
from belt.wire.platform import (
    ContextInjection,
    HookDecision,
    LifecycleHookPayload,
    LifecycleHookResponse,
)
from belt.wire.validate import Findings, describe, is_int, model_problems

POLICY_KEYS = ("default", "rules")
RULE_KEYS = (
    "event",
    "tool",
    "chat_id",
    "turn_count",
    "arguments",
    "decision",
    "reason",
    "inject",
    "system",
)
REGEX_PREFIX = "re:"
DECISIONS = tuple(d.value for d in HookDecision)

Matcher = Callable[[Any], bool]


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

    def matches(self, payload: LifecycleHookPayload) -> bool:
        """True when every condition of the rule holds for ``payload``."""
        if self.event is not None and payload.event != self.event:
            return False
        if self.chat_id is not None and not self.chat_id.match(payload.chat_id):
            return False
        if self.turn_min is not None and payload.turn_count < self.turn_min:
            return False
        if self.turn_max is not None and payload.turn_count > self.turn_max:
            return False
        data = payload.data or {}
        if self.tool is not None:
            tool = data.get("tool")
            if not isinstance(tool, str) or not self.tool.match(tool):
                return False
        return not self.arguments or arguments_match(self.arguments, data.get("arguments"))


ArgumentMatchers = tuple[tuple[tuple[str, ...], Matcher], ...]


def arguments_match(matchers: ArgumentMatchers, arguments: Any) -> bool:
    """True when ``arguments`` is an object in which every key path of ``matchers`` is found
    and matches."""
    if not isinstance(arguments, dict):
        return False
    for key_path, matcher in matchers:
        found, value = lookup(arguments, key_path)
        if not found or not matcher(value):
            return False
    return True


@dataclass(frozen=True)
class Verdict:
    """A policy's answer to one payload, and the index of the rule that gave it (None: default)."""

    response: LifecycleHookResponse
    rule: int | None


@dataclass(frozen=True)
class Policy:
    """A loaded policy: rules tried in order, the first match wins, else the default decision."""

    source: str
    default: HookDecision
    rules: tuple[Rule, ...]

    def decide(self, payload: LifecycleHookPayload) -> Verdict:
        """The response for ``payload``."""
        for rule in self.rules:
            if rule.matches(payload):
                return Verdict(rule.response, rule.index)
        return Verdict(LifecycleHookResponse(decision=self.default), None)


def lookup(document: Any, key_path: tuple[str, ...]) -> tuple[bool, Any]:
    """Follow a key path through objects (and arrays, by index); returns (found, value)."""
    current = document
    for part in key_path:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return False, None
    return True, current


def glob(pattern: str) -> re.Pattern[str]:
    """A case-sensitive compiled shell glob (``*``, ``?``, ``[seq]``) matching whole strings."""
    return re.compile(fnmatch.translate(pattern))


def same_value(expected: Any, actual: Any) -> bool:
    """Equality of JSON values where a boolean never equals a number."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(same_value(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def load_policy(path: str | Path) -> Policy:
    """Read and check a policy file; every problem names its path (exit 5)."""
    from belt.declarations import read_document

    return parse_policy(read_document(path, kind="policy"), str(path))


def parse_policy(doc: Any, source: str) -> Policy:
    """Check and compile a decoded policy document."""
    findings = Findings()
    if not isinstance(doc, dict):
        findings.error("(document)", f"expected a table, got {describe(doc)}")
        raise _refused(source, findings)
    for key in doc:
        if key not in POLICY_KEYS:
            findings.error(key, f"unknown key (allowed: {', '.join(POLICY_KEYS)})")
    default = doc.get("default", HookDecision.ALLOW.value)
    if default not in DECISIONS:
        findings.error("default", f"{default!r} is not a decision (one of {', '.join(DECISIONS)})")
    raw_rules = doc.get("rules", [])
    rules: list[Rule] = []
    if not isinstance(raw_rules, list):
        findings.error(
            "rules", f"expected an array of tables ([[rules]]), got {describe(raw_rules)}"
        )
    else:
        for index, raw in enumerate(raw_rules):
            rule = _parse_rule(raw, index, findings)
            if rule is not None:
                rules.append(rule)
    if not findings.ok:
        raise _refused(source, findings)
    return Policy(source, HookDecision(default), tuple(rules))


def _refused(source: str, findings: Findings) -> InvalidInput:
    return InvalidInput(
        f"{source}: {len(findings.problems)} problem(s) in the policy",
        problems=findings.problems,
        hint="see docs/policy.md for the policy format",
    )


def _parse_rule(raw: Any, index: int, findings: Findings) -> Rule | None:
    path = f"rules[{index}]"
    if not isinstance(raw, dict):
        findings.error(path, f"expected a table, got {describe(raw)}")
        return None
    before = len(findings.problems)
    for key in raw:
        if key not in RULE_KEYS:
            findings.error(f"{path}.{key}", f"unknown key (allowed: {', '.join(RULE_KEYS)})")

    event = raw.get("event")
    if event is not None and event not in EVENTS:
        findings.error(
            f"{path}.event",
            f"{event!r} is not a lifecycle event (expected one of {', '.join(EVENTS)})",
        )
    tool = _glob_field(raw, "tool", path, findings)
    chat_id = _glob_field(raw, "chat_id", path, findings)
    turn_min, turn_max = _turn_count(raw.get("turn_count"), f"{path}.turn_count", findings)
    arguments = argument_matchers(raw.get("arguments"), f"{path}.arguments", findings)
    response = _response(raw, path, findings)
    if len(findings.problems) > before or response is None:
        return None
    return Rule(index, response, event, tool, chat_id, turn_min, turn_max, arguments)


def _glob_field(
    raw: dict[str, Any], key: str, path: str, findings: Findings
) -> re.Pattern[str] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        findings.error(f"{path}.{key}", f"expected a glob pattern string, got {describe(value)}")
        return None
    return glob(value)


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
    for key in value:
        if key not in ("min", "max"):
            findings.error(f"{path}.{key}", "unknown key (allowed: min, max)")
    bounds: list[int | None] = []
    for key in ("min", "max"):
        bound = value.get(key)
        if bound is not None and (not is_int(bound) or bound < 0):
            findings.error(f"{path}.{key}", f"expected an integer >= 0, got {bound!r}")
            bound = None
        bounds.append(bound)
    low, high = bounds
    if low is not None and high is not None and low > high:
        findings.error(path, f"min {low} is above max {high}")
    return low, high


def argument_matchers(value: Any, path: str, findings: Findings) -> ArgumentMatchers:
    """Compile a table of key path → pattern (as a rule's ``arguments``); problems go to
    ``findings`` under ``path``."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        findings.error(path, f"expected a table of key path = pattern, got {describe(value)}")
        return ()
    matchers: list[tuple[tuple[str, ...], Matcher]] = []
    for key_path, pattern in _flatten(value):
        where = f"{path}.{'.'.join(key_path)}"
        matcher = value_matcher(pattern, where, findings)
        if matcher is not None:
            matchers.append((key_path, matcher))
    return tuple(matchers)


def _flatten(
    table: dict[str, Any], prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """Dotted keys and nested tables both name key paths: ``"a.b" = 1`` is ``a = { b = 1 }``."""
    pairs: list[tuple[tuple[str, ...], Any]] = []
    for key, value in table.items():
        key_path = prefix + tuple(key.split("."))
        if isinstance(value, dict):
            pairs.extend(_flatten(value, key_path))
        else:
            pairs.append((key_path, value))
    return pairs


def compile_regex(source: str) -> Any:
    """A linear-time (RE2) regex; ValueError says why RE2 cannot run ``source``.

    RE2 never backtracks, so no pattern and no value can make matching take more than time
    proportional to the value; in exchange it has no backreferences or lookaround.
    """
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None


def _found(regex: Any, value: str) -> bool:
    try:
        return regex.search(value) is not None
    except UnicodeEncodeError:
        # RE2 matches UTF-8; a lone surrogate cannot be encoded (strictly parsed payloads never
        # hold one), and a value that is not Unicode text matches no pattern.
        return False


def value_matcher(pattern: Any, path: str, findings: Findings) -> Matcher | None:
    """Compile one pattern: a glob or ``re:<regex>`` (RE2) for strings, else a JSON value to
    equal."""
    if isinstance(pattern, str):
        if pattern.startswith(REGEX_PREFIX):
            source = pattern[len(REGEX_PREFIX) :]
            try:
                regex = compile_regex(source)
            except ValueError as exc:
                findings.error(path, f"bad regex {source!r}: {exc} (RE2 syntax)")
                return None
            return lambda value: isinstance(value, str) and _found(regex, value)
        compiled = glob(pattern)
        return lambda value: isinstance(value, str) and compiled.match(value) is not None
    if isinstance(pattern, bool | int | float | list):
        return lambda value: same_value(pattern, value)
    findings.error(
        path,
        f"expected a glob, a re:<regex>, a number, a boolean or an array, got {describe(pattern)}",
    )
    return None


def _response(raw: dict[str, Any], path: str, findings: Findings) -> LifecycleHookResponse | None:
    ok = True
    decision = raw.get("decision")
    if decision is not None and decision not in DECISIONS:
        findings.error(
            f"{path}.decision", f"{decision!r} is not a decision (one of {', '.join(DECISIONS)})"
        )
        ok = False
    for key in ("reason", "system"):
        if key in raw and not isinstance(raw[key], str):
            findings.error(f"{path}.{key}", f"expected a string, got {describe(raw[key])}")
            ok = False
    inject = raw.get("inject")
    if inject is not None:
        try:
            inject = ContextInjection.model_validate(inject)
        except ValidationError as exc:
            findings.problems.extend(model_problems(exc, f"{path}.inject"))
            ok = False
    if not ok:
        return None
    return LifecycleHookResponse(
        decision=decision, reason=raw.get("reason"), inject=inject, system=raw.get("system")
    )
