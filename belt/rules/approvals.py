"""Approval rules: a TOML file that settles the routine gates and leaves the rest to a person.

Ordered ``[[rules]]`` (docs/interrupts.md, "Approving at volume"): the first that matches a gate
decides it; a file with any problem settles nothing.
"""

from __future__ import annotations

import hashlib
import operator
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol, cast

from belt.display.text import describe
from belt.errors import Conflict, InvalidInput, NotFound
from belt.reading.didyoumean import did_you_mean
from belt.reading.inputs import decode_text, read_bytes
from belt.reading.matching import ArgumentMatchers, argument_matchers, arguments_match, glob_field
from belt.reading.strictjson import StrictJSONError, decode_toml
from belt.records.interrupts import (
    RULE_LENGTHS,
    Interrupt,
    Settlement,
    inbox,
    resolve_interrupt,
    settled_by,
    trail,
)
from belt.records.names import named_or_given
from belt.records.runs import find_run_id
from belt.store import Store
from belt.store.clock import parse_timestamp
from belt.wire.dto import InterruptJSON, WatchEvent
from belt.wire.enums import HookEvent, InterruptReason, InterruptStatus, NexusEvent
from belt.wire.validate import Findings

DECISIONS = ("allow", "deny", "ask")
RULE_KEYS = tuple("name decision reason event tool arguments run_id chat_id agent hours".split())
GLOB_KEYS = ("tool", "run_id", "chat_id", "agent")
# What rules settle (a client tool waits for its result, not for a decision).
APPROVABLE = (InterruptReason.HOOK_GATE.value, InterruptReason.TOOL_APPROVAL.value)
GATE_EVENTS = tuple(e.value for e in HookEvent) + tuple(e.value for e in NexusEvent)
HOURS = re.compile(r"([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]|24):([0-5]\d)")


@dataclass(frozen=True)
class Gate:
    """What a rule looks at in a gate (``minute``: of the day, UTC, it opened)."""

    event: str | None
    tool: Any
    arguments: Any
    run_id: Any
    chat_id: Any
    agent: Any
    minute: int | None


def gate_of(item: Mapping[str, Any]) -> Gate:
    """The facts of an InterruptDTO rules match."""
    held = item.get("meta")
    meta = held if isinstance(held, dict) else {}
    data = meta["data"] if isinstance(meta.get("data"), dict) else meta
    kind, _, named = str(item.get("source") or "").partition(":")
    if kind in ("hook", "nexus"):  # the wire's interrupt source: hook:EVENT or nexus:EVENT
        event: str | None = named
    elif isinstance(meta.get("event"), str):
        event = meta["event"]
    else:
        event = "agent.tool_call" if item.get("resource_type") == "tool_invocation" else None
    tool = data.get("tool", data.get("tool_name"))
    minute = None
    with suppress(InvalidInput):
        opened = parse_timestamp(str(item.get("created_at")))
        minute = opened.hour * 60 + opened.minute
    run, chat = item.get("run_id"), item.get("chat_id")
    return Gate(event, tool, data.get("arguments"), run, chat, meta.get("agent_id"), minute)


@dataclass(frozen=True)
class Rule:
    """One compiled rule: its conditions, and what it decides."""

    name: str
    decision: str
    reason: str
    event: str | None = None
    globs: tuple[tuple[str, re.Pattern[str]], ...] = ()
    arguments: ArgumentMatchers = ()
    hours: tuple[int, int] | None = None  # minutes of the day (UTC), until excluded; may wrap

    def matches(self, gate: Gate) -> bool:
        """True when every condition of the rule holds for ``gate``."""
        if self.event is not None and gate.event != self.event:
            return False
        for key, pattern in self.globs:
            if not isinstance(value := getattr(gate, key), str) or not pattern.match(value):
                return False
        if self.hours is not None:
            (start, end), at = self.hours, gate.minute
            wraps = end <= start  # "22:00-06:00": after the start or before the end
            inside = at is not None and (at >= start or at < end if wraps else start <= at < end)
            if not inside:
                return False
        return not self.arguments or arguments_match(self.arguments, gate.arguments)


@dataclass(frozen=True)
class Verdict:
    """What the rules decide for one gate: the first matching rule's decision, else ``ask``."""

    decision: str
    rule: Rule | None

    @property
    def reason(self) -> str:
        """The rule's reason, or why the gate is left to a person."""
        return self.rule.reason if self.rule is not None else "no rule matches"

    @property
    def why(self) -> str:
        """The rule that decided and its reason, as a line says them."""
        return f'rule "{self.rule.name}": {self.rule.reason}' if self.rule else self.reason

    @property
    def rule_name(self) -> str | None:
        """The name of the rule that decided, None when none matched."""
        return self.rule.name if self.rule is not None else None


NO_MATCH = Verdict("ask", None)


@dataclass(frozen=True)
class Rules:
    """A loaded rules file: rules tried in order, the first match wins, else ``ask``."""

    file: str
    digest: str  # sha256:<hex> of the file's content, as read
    rules: tuple[Rule, ...]

    def decide(self, item: Mapping[str, Any]) -> Verdict:
        """The verdict for one InterruptDTO (``ask`` for an interrupt rules do not settle)."""
        if item.get("reason") not in APPROVABLE:
            return NO_MATCH
        gate = gate_of(item)
        return next((Verdict(r.decision, r) for r in self.rules if r.matches(gate)), NO_MATCH)

    def settlement(self, rule: Rule) -> Settlement:
        """How a gate ``rule`` settles is recorded in its trail."""
        return {"how": "rule", "file": self.file, "rule": rule.name, "digest": self.digest}


def load_rules(path: str | Path) -> Rules:
    """Read and check a rules file; NotFound (3) when missing, InvalidInput (5) per problem."""
    source, raw = str(path), read_bytes(path, kind="policy")
    return parse_rules(
        decode_text(raw, source), source, "sha256:" + hashlib.sha256(raw).hexdigest()
    )


def parse_rules(text: str, source: str, digest: str) -> Rules:
    """Check and compile the text of a rules file (TOML) read from ``source``."""
    try:
        return rules_of(decode_toml(text), source, digest)
    except (StrictJSONError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"{source}: invalid TOML: {exc}", where=source) from None


def rules_of(doc: Mapping[str, object], source: str, digest: str) -> Rules:
    """Check and compile a decoded rules file; InvalidInput names every problem, the first first."""
    problems = Findings()
    problems.unknown_keys(doc, ("rules",), "", noun="field")
    raw_rules = doc.get("rules")
    rules: list[Rule] = []
    if not isinstance(raw_rules, list) or not raw_rules:
        problems.error(
            "rules",
            "expected one or more [[rules]] tables, got "
            + (describe(raw_rules) if raw_rules is not None else "none"),
        )
    else:
        for index, raw in enumerate(raw_rules):
            rule = _parse_rule(raw, index, problems)
            if rule is not None and any(earlier.name == rule.name for earlier in rules):
                problems.error(f'rules[{index}] "{rule.name}".name', "another rule has this name")
            elif rule is not None:
                rules.append(rule)
    if problems.problems:
        first, more = problems.problems[0], len(problems.problems) - 1
        raise InvalidInput(
            f"{source}: {first}" + (f" (and {more} more problem(s))" if more else ""),
            problems=problems.problems if more else None,
            where=source,
            hint="nothing was settled; see docs/interrupts.md for the rules format",
        )
    return Rules(source, digest, tuple(rules))


def _parse_rule(raw: Any, index: int, problems: Findings) -> Rule | None:
    path = f"rules[{index}]"
    if not isinstance(raw, dict):
        problems.error(path, f"expected a table, got {describe(raw)}")
        return None
    name = raw.get("name")
    most = RULE_LENGTHS["rule"]
    if isinstance(name, str) and name.strip() and name.isprintable() and len(name) <= most:
        path = f'{path} "{name}"'
    else:
        # The trail (and belt serve's route that records a rule) takes no other name.
        problems.error(
            f"{path}.name",
            f"expected a name (printable, 1 to {most} characters), got {describe(name)}",
        )
    before = len(problems.problems)
    problems.unknown_keys(raw, RULE_KEYS, path, noun="field")
    if (decision := raw.get("decision")) not in DECISIONS:
        problems.error(
            f"{path}.decision",
            f"expected one of {', '.join(DECISIONS)}, got {describe(decision)}"
            f"{did_you_mean(decision, DECISIONS)}",
        )
    if not isinstance(reason := raw.get("reason"), str) or not reason.strip():
        problems.error(
            f"{path}.reason", f"expected a reason (a non-empty string), got {describe(reason)}"
        )
    if (event := raw.get("event")) is not None and event not in GATE_EVENTS:
        problems.error(
            f"{path}.event",
            f"{describe(event)} is not an event a gate opens on{did_you_mean(event, GATE_EVENTS)}",
        )
    globs = [(key, found) for key in GLOB_KEYS if (found := glob_field(raw, key, path, problems))]
    arguments = argument_matchers(raw.get("arguments"), f"{path}.arguments", problems)
    hours = _hours(raw.get("hours"), f"{path}.hours", problems)
    if len(problems.problems) > before or not isinstance(name, str) or not name.strip():
        return None
    return Rule(str(name), str(decision), str(reason), event, tuple(globs), arguments, hours)


def _hours(value: Any, path: str, problems: Findings) -> tuple[int, int] | None:
    if value is None:
        return None
    if (found := HOURS.fullmatch(value) if isinstance(value, str) else None) is None:
        problems.error(path, f'expected "HH:MM-HH:MM" (UTC), got {describe(value)}')
        return None
    h1, m1, h2, m2 = map(int, found.groups())
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if end > 24 * 60 or start == end:
        problems.error(
            path, f"{value!r} is not a span of the day (from and until differ, until 24:00 at most)"
        )
        return None
    return start, end


# -- settling gates as they open --------------------------------------------------------------


class Resolve(Protocol):
    """Resolve one gate as ``resolve_interrupt`` does, recording ``by``; its InterruptDTO."""

    def __call__(
        self, *, interrupt_id: str, decision: str, data: Any, by: Settlement
    ) -> InterruptJSON: ...


@dataclass(frozen=True)
class Outcome:
    """What the rules did with one gate: settled it, left it to a person, or ``skipped`` it."""

    item: InterruptJSON
    verdict: Verdict
    settled: InterruptJSON | None = None
    skipped: str | None = None

    def to_json(self) -> dict[str, object]:
        """One line of ``belt interrupt auto --json``."""
        return {
            "interrupt": self.item.get("id"),
            "run_id": self.item.get("run_id"),
            "decision": self.verdict.decision,
            "rule": self.verdict.rule_name,
            "reason": self.verdict.reason,
            "settled": self.settled is not None,
            "skipped": self.skipped,
        }


def store_resolver(store: Store) -> Resolve:
    """Resolve gates in ``store``, recording the settlement in their trail."""
    return partial(resolve_interrupt, store=store)


def settle(rules: Rules, item: InterruptJSON, resolve: Resolve) -> Outcome | None:
    """Decide one pending gate, resolving it on allow or deny (None: not one rules settle)."""
    if item.get("reason") not in APPROVABLE or item.get("status") != InterruptStatus.PENDING:
        return None
    verdict = rules.decide(item)
    if verdict.rule is None or verdict.decision == "ask":
        return Outcome(item, verdict)
    by, data = rules.settlement(verdict.rule), {"reason": verdict.rule.reason}
    try:
        done = resolve(interrupt_id=str(item["id"]), decision=verdict.decision, data=data, by=by)
    except (Conflict, NotFound) as exc:
        return Outcome(item, verdict, skipped=exc.message)
    return Outcome(item, verdict, settled=done)


def settle_as_they_open(
    rules: Rules, events: Iterable[WatchEvent], resolve: Resolve
) -> Iterator[Outcome | str]:
    """Settle each gate a watch reports pending or opened; yields outcomes and warnings."""
    seen: set[str] = set()
    for event in events:
        if event["event"] == "warning":
            yield str(event["message"])
            continue
        item = event["interrupt"]
        if event["event"] not in ("pending", "opened") or item.get("id") in seen:
            continue
        seen.add(str(item.get("id")))
        if (outcome := settle(rules, item, resolve)) is not None:
            yield outcome


# -- what the rules would have done -------------------------------------------------------------

PEOPLE = ("person", "batch", "unknown")  # how a gate a person (perhaps) decided was settled


@dataclass
class WhatIf:
    """The rules tried over settled gates: counts, disagreements and the time saved."""

    file: str
    digest: str
    considered: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DECISIONS, 0))
    disagreements: list[dict[str, object]] = field(default_factory=list)
    saved_seconds: float = 0.0
    saved_gates: int = 0

    @property
    def allowed_denied(self) -> int:
        """How many gates a rule would allow that a person denied."""
        return sum(1 for d in self.disagreements if d["allows_denied"])

    def to_json(self) -> dict[str, object]:
        """The document of ``belt interrupt what-if --json``."""
        return {
            "rules": self.file,
            "digest": self.digest,
            "considered": self.considered,
            "would": dict(self.counts),
            "disagreements": self.disagreements,
            "allows_what_a_person_denied": self.allowed_denied,
            "person_seconds_saved": round(self.saved_seconds, 3),
            "person_gates_saved": self.saved_gates,
        }


def settled_history(store: Store, run_ids: Iterable[str] = ()) -> list[Interrupt]:
    """The stored interrupts what-if reads: all, or those of the runs named."""
    runs: list[str | None] = [named_or_given(find_run_id, store, r) for r in run_ids] or [None]
    return [r for run in runs for r in inbox(store=store, run_id=run, include_settled=True)]


def what_if(
    rules: Rules, records: Iterable[Mapping[str, Any]], since: datetime | None = None
) -> WhatIf:
    """``belt interrupt what-if``: ``rules`` over records settled since ``since``."""
    report = WhatIf(rules.file, rules.digest)
    ended = (InterruptStatus.RESOLVED, InterruptStatus.EXPIRED)
    for record in records:
        if record.get("reason") not in APPROVABLE or (status := record.get("status")) not in ended:
            continue
        try:
            settled_at = parse_timestamp(str(record.get("resolved_at")))
            waited = (settled_at - parse_timestamp(str(record.get("created_at")))).total_seconds()
        except InvalidInput:
            continue
        if since is not None and settled_at < since:
            continue
        report.considered += 1
        verdict = rules.decide(record)
        report.counts[verdict.decision] += 1
        if verdict.decision == "ask":
            continue
        by = trail(cast(Interrupt, record))
        how = str(by.get("how")) if by else "unknown"
        if how in PEOPLE:
            report.saved_seconds += max(waited, 0.0)
            report.saved_gates += 1
        if (actual := record.get("resolution")) == verdict.decision:
            continue
        report.disagreements.append(
            {
                "interrupt": record.get("id"),
                "short_id": record.get("short_id"),
                "rule": verdict.rule_name,
                "would": verdict.decision,
                "actual": actual,
                "status": status,
                "settled_by": settled_by(cast(Interrupt, record)),
                "how": how,
                "their_reason": _given_reason(record.get("resolved_data")),
                "allows_denied": verdict.decision == "allow" and actual == "deny" and how in PEOPLE,
                "resolved_at": record.get("resolved_at"),
            }
        )
    first = operator.itemgetter("allows_denied", "resolved_at")  # then the newest
    report.disagreements.sort(key=first, reverse=True)
    return report


def _given_reason(data: Any) -> str | None:
    """The reason a settler gave: ``resolved_data.reason``, or the data when a string."""
    if isinstance(data, dict) and isinstance(data.get("reason"), str):
        return str(data["reason"])
    return data if isinstance(data, str) else None
