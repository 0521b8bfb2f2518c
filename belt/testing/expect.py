"""Expectations: a scenario's ``[[expect]]`` tables, checked against its report once it ended.

Each looks at one kind of thing, named by its subject key (``SUBJECTS``; docs/testing.md). One on
things that happen many times passes when one matches every key it gives (``count = N``: N do).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from belt import dialects
from belt.display.text import describe, short
from belt.engine.scenario import scenario_dialect, scenario_from_document
from belt.errors import InvalidInput
from belt.reading.didyoumean import closest, did_you_mean
from belt.reading.matching import argument_matchers, arguments_match, value_matcher
from belt.wire.enums import ATTENTION_HOLD, AgentRunState, InterruptStatus, ToolInvocationStatus
from belt.wire.validate import Findings, is_int

if TYPE_CHECKING:
    from belt.dialects.simreport import ReportRun, SimReport
    from belt.records.messages import Message

Test = Callable[[Any], bool]

SUBJECTS = tuple(
    "fired latency_ms injected_tokens context_tokens event interrupt tool injection dedup_key "
    "row run_state continuations hold".split()
)
"""The keys that say what an expectation looks at, in the order they are recognised."""
BUDGETS = ("latency_ms", "injected_tokens", "context_tokens")

KEYS: dict[str, tuple[str, ...]] = {
    subject: tuple(keys.split())
    for subject, keys in {
        "tool": "tool arguments status decision reason result gated resolution run count",
        "event": "event handler tool arguments decision reason error injected status run count",
        "fired": "event fired run",
        "injection": "injection dedup_key role turn reached count",
        "row": "row exists run count",
        "interrupt": "interrupt tool arguments status resolution run count",
        "run_state": "run_state error run",
        "continuations": "continuations run",
        "hold": "hold run",
        "latency_ms": "latency_ms p95 event handler run",
        "injected_tokens": "injected_tokens handler run",
        "context_tokens": "context_tokens run",
    }.items()
}
"""The keys each kind of expectation takes (besides ``name``, a label shown when it fails)."""

ROW_FIELDS = tuple(
    "role text status type event handler_type handler decision reason injected error state tool "
    "task_key attempt failure".split()
)
"""The fields of a transcript row a ``row`` expectation can name (see docs/testing.md)."""

TOOL_STATES = tuple(s.value for s in ToolInvocationStatus)
RESOLUTIONS = ("allow", "deny")
INTERRUPT_STATES = tuple(s.value for s in InterruptStatus)
RUN_STATES = (*(s.value for s in AgentRunState), ATTENTION_HOLD)
NOUNS = {"tool": "tool call", "event": "hook run", "injection": "injection"}
NOUNS |= {"row": "transcript row", "interrupt": "interrupt"}


@dataclass(frozen=True)
class Condition:
    """One key of an expectation, compiled: a test of the item field it names."""

    key: str
    test: Test


@dataclass(frozen=True)
class Expectation:
    """One ``[[expect]]`` table, checked and compiled."""

    index: int
    raw: dict[str, Any]
    subject: str
    conditions: tuple[Condition, ...] = ()
    count: int | None = None
    run: int | None = None

    @property
    def where(self) -> str:
        """Its path in the scenario (``expect[2]``)."""
        return f"expect[{self.index}]"

    @property
    def text(self) -> str:
        """The expectation as it is written (an inline TOML table)."""
        return inline(self.raw)


@dataclass
class Outcome:
    """How one expectation fared: ``found`` says what happened instead; ``anchors`` (message ids)
    and ``runs`` are what it is about."""

    expectation: Expectation
    passed: bool
    found: str = ""
    anchors: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The outcome as ``belt test --json`` prints it."""
        return {
            "expect": self.expectation.where,
            "expectation": self.expectation.raw,
            "text": self.expectation.text,
            "passed": self.passed,
            "found": self.found,
        }


def check_expectations(raw: Any, dialect: str, findings: Findings) -> list[Expectation]:
    """Compile every expectation of ``raw``; problems go to ``findings``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        findings.error("expect", f"expected an array of tables ([[expect]]), got {describe(raw)}")
        return []
    compiled = [_compile(item, index, dialect, findings) for index, item in enumerate(raw)]
    return [expectation for expectation in compiled if expectation is not None]


def expectations_of(loaded: Any) -> list[Expectation]:
    """The compiled ``[[expect]]`` tables of a read scenario; InvalidInput (exit 5) if one fails."""
    findings = Findings()
    compiled = check_expectations(loaded.scenario.expect, loaded.dialect, findings)
    _refuse(loaded.source, findings.problems)
    return compiled


def read_tested(document: Any, source: str, directory: Path) -> tuple[Any, list[Expectation]]:
    """The read scenario and its compiled expectations; InvalidInput (exit 5) lists all problems."""
    findings = Findings()
    raw = document.get("expect") if isinstance(document, dict) else None
    dialect = scenario_dialect(document, source) if isinstance(document, dict) else "platform"
    expectations = check_expectations(raw, dialect, findings)
    try:
        loaded = scenario_from_document(document, source, directory)
    except InvalidInput as exc:
        if not findings.problems:
            raise
        _refuse(
            source, [exc.message.removeprefix(f"{source}: "), *exc.problems, *findings.problems]
        )
    _refuse(source, findings.problems)
    return loaded, expectations


def _refuse(source: str, problems: list[str]) -> None:
    """InvalidInput (exit 5) naming ``source`` and each of ``problems``, when there are any."""
    if problems:
        raise InvalidInput(f"{source}: {problems[0]}", problems=problems[1:]) from None


def _compile(item: Any, index: int, dialect: str, findings: Findings) -> Expectation | None:
    path = f"expect[{index}]"
    if not isinstance(item, dict):
        findings.error(path, f"expected a table, got {describe(item)}")
        return None
    subject = next((key for key in SUBJECTS if key in item), None)
    subject = "injection" if subject == "dedup_key" else subject
    if subject is None:
        near = ((key, match) for key in item if (match := closest(key, SUBJECTS)))
        key, match = next(near, ("", None))
        findings.error(
            path,
            "says nothing to check: give one of tool, event, injection, dedup_key, row, "
            "interrupt, run_state, continuations, hold, latency_ms, injected_tokens, "
            "context_tokens" + (f"; did you mean {match!r} (not {key!r})?" if match else ""),
        )
        return None
    compiler = _Compiler(item, path, dialect, findings)
    before = len(findings.problems)
    compiler.known(item, (*KEYS[subject], "name"), "key here", f"allowed with {subject}")
    if subject in (foreign := compiler.speaks.foreign_subjects):
        compiler.error(subject, foreign[subject])
    conditions = compiler.conditions(subject)
    count, run = compiler.whole("count"), compiler.whole("run")
    if "name" in item and not isinstance(item["name"], str):
        compiler.error("name", f"expected a string, got {describe(item['name'])}")
    if item.get("reached") is False or item.get("exists") is False:
        if count is not None:
            compiler.error("count", "give count or a negative reached/exists, not both")
        count = 0
    if len(findings.problems) > before:
        return None
    return Expectation(index, item, subject, tuple(conditions), count, run)


class _Compiler:
    """Turns the keys of one expectation into conditions, reporting what is wrong."""

    def __init__(self, item: dict[str, Any], path: str, dialect: str, findings: Findings) -> None:
        self.item, self.path, self.findings = item, path, findings
        self.speaks = dialects.get(dialect or dialects.PLATFORM)

    def error(self, key: str, rule: str) -> None:
        self.findings.error(f"{self.path}.{key}", rule)

    def known(
        self,
        keys: dict[str, Any],
        allowed: tuple[str, ...],
        what: str,
        scope: str,
        within: str = "",
    ) -> None:
        """An error at ``within``+key for each key not ``allowed``: "unknown WHAT (SCOPE: ...)"."""
        for key in keys:
            if key not in allowed:
                listed = f"({scope}: {', '.join(allowed)}){did_you_mean(key, allowed)}"
                self.error(f"{within}{key}", f"unknown {what} {listed}")

    def value(self, key: str, ok: Test, expected: str, shown: Callable[[Any], str] = repr) -> Any:
        """The value of ``key``: None when it is not given or ``ok`` refuses it (an error)."""
        if (value := self.item.get(key)) is None or ok(value):
            return value
        self.error(key, f"expected {expected}, got {shown(value)}")
        return None

    def whole(self, key: str) -> Any:
        return self.value(key, lambda value: is_int(value) and value >= 0, "a whole number >= 0")

    def milliseconds(self, key: str) -> Any:
        ok = lambda value: type(value) in (int, float) and value >= 0  # noqa: E731
        return self.value(key, ok, "a number of milliseconds >= 0")

    def flag(self, key: str) -> Any:
        return self.value(key, lambda value: isinstance(value, bool), "true or false", describe)

    def pattern(self, key: str) -> Test | None:
        value = self.item[key]
        if not isinstance(value, str):
            self.error(key, f"expected a string (a glob, or re:<regex>), got {describe(value)}")
            return None
        return value_matcher(value, f"{self.path}.{key}", self.findings)

    def choice(self, key: str, choices: tuple[str, ...]) -> Test | None:
        if (value := self.item[key]) in choices:
            return lambda found: found == value
        self.error(
            key, f"{value!r} is not one of {', '.join(choices)}{did_you_mean(value, choices)}"
        )
        return None

    def optional_text(self, key: str) -> Test | None:
        """A pattern, or true / false for whether there is any."""
        value = self.item[key]
        if isinstance(value, bool):
            return lambda found: (found is not None and found != "") == value
        return self.pattern(key)

    def row(self) -> list[Condition]:
        value = self.item["row"]
        if not isinstance(value, dict) or not value:
            self.error("row", f"expected a table of row fields, got {describe(value)}")
            return []
        self.known(value, ROW_FIELDS, "row field", "allowed", within="row.")
        tests = {
            key: value_matcher(v, f"{self.path}.row.{key}", self.findings)
            for key, v in value.items()
            if key in ROW_FIELDS
        }
        return [Condition(key, test) for key, test in tests.items() if test is not None]

    def conditions(self, subject: str) -> list[Condition]:
        """Every key of the expectation but count, run, name and the switches, as conditions."""
        read: dict[str, Callable[[str], Test | None]] = {
            "arguments": lambda key: partial(
                arguments_match,
                argument_matchers(self.item[key], f"{self.path}.{key}", self.findings),
            ),
            "event": lambda key: self.choice(key, self.speaks.events),
            "interrupt": lambda key: self.choice(key, self.speaks.events),
            "decision": lambda key: self.choice(key, self.speaks.decisions),
            "resolution": lambda key: self.choice(key, RESOLUTIONS),
            "status": lambda key: self.status(subject),
            "run_state": lambda key: self.choice(key, RUN_STATES),
            "error": self.optional_text,
            "hold": self.optional_text,
            "gated": self.switch,
            "injected": self.switch,
        }
        checked: dict[str, Callable[[str], object]] = {"latency_ms": self.milliseconds}
        checked |= dict.fromkeys(("reached", "exists", "p95"), self.flag)
        whole = ("fired", "turn", "continuations", "injected_tokens", "context_tokens")
        checked |= dict.fromkeys(whole, self.whole)
        tests: list[Condition] = []
        for key in self.item:
            if key not in KEYS[subject] or key in ("count", "run"):  # count and run: _compile's
                continue
            if key == "row":
                tests += self.row()
            elif key in checked:
                checked[key](key)
            elif (test := read.get(key, self.pattern)(key)) is not None:
                tests.append(Condition(key, test))
        return tests

    def status(self, subject: str) -> Test | None:
        """The state of a tool call, an interrupt, or a Nexus hook task."""
        if subject == "event" and not self.speaks.hook_states:
            self.error("status", "the status of a hook task is a Nexus notion; use decision")
            return None
        states = {"tool": TOOL_STATES, "interrupt": INTERRUPT_STATES}
        return self.choice("status", states.get(subject, self.speaks.hook_states))  # or event

    def switch(self, key: str) -> Test | None:
        """A true / false key that an item's field must equal."""
        flag = self.flag(key)
        return None if flag is None else (lambda found: bool(found) == flag)


def inline(value: Any) -> str:
    """A value as inline TOML: ``{ tool = "delete_file", status = "failed" }``."""
    if isinstance(value, dict):
        parts = [f"{_key(k)} = {inline(v)}" for k, v in value.items()]
        return "{ " + ", ".join(parts) + " }" if parts else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    return _quoted(value) if isinstance(value, str) else json.dumps(value)  # true, 1, 2.5


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _quoted(key)


def _quoted(text: str) -> str:
    """A TOML basic string: control characters, DEL and lone surrogates as escapes."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + _UNPRINTED.sub(lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'


_UNPRINTED = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


@dataclass
class Item:
    """One thing an expectation can match: its fields, how it reads, where it is."""

    fields: dict[str, Any]
    text: str
    anchor: str | None = None
    run_id: str | None = None


class Facts:
    """What a report holds, in the shapes expectations read (built once per report)."""

    def __init__(self, report: SimReport) -> None:
        self.report = report
        self.speaks = dialects.of(report["simulation"])
        self.messages = report["chat"]["chat_messages"]
        self.answers = [message for message in self.messages if message.get("role") == "assistant"]
        # The scenario turn each run answers, and the runs of the scenario's own chat.
        self.turn_of, self.own_runs = self.speaks.turns(report)
        self._tools: list[Item] | None = None

    def in_run(self, run_id: Any, turn: int | None) -> bool:
        """True when ``turn`` is None or the run ``run_id`` answers scenario turn ``turn``."""
        return turn is None or self.turn_of.get(str(run_id)) == turn

    def tools(self) -> list[Item]:
        """Every tool call of the chat, with the decision of its hooks and its gate."""
        if self._tools is not None:
            return self._tools
        decided: dict[str, Mapping[str, Any]] = {}
        for executed in self.report.get("hook_executions") or []:
            resource = None if executed.get("async") else executed.get("resource_id")  # sync runs'
            if resource and executed.get("decision") != "allow":
                decided.setdefault(str(resource), executed)
        gates = {str(i.get("resource_id")): i for i in self.report.get("interrupts") or [] if i}
        items = []
        for message in self.messages:
            for invocation in message.get("tool_invocations") or []:
                function = invocation.get("function") or {}
                record = decided.get(str(invocation.get("id"))) or {}
                gate = gates.get(str(invocation.get("id")))
                fields = {
                    "tool": function.get("name"),
                    "arguments": function.get("arguments") or {},
                    "status": invocation.get("status"),
                    "decision": record.get("decision", "allow"),
                    "reason": record.get("reason"),
                    "result": invocation.get("result"),
                    "gated": gate is not None,
                    "resolution": gate.get("resolution") if gate else None,
                }
                call = f"{fields['tool']}({short(fields['arguments'], 60)})"
                text = f"{call} {fields['status']}, decision {fields['decision']}"
                if fields["reason"]:
                    text += f" ({short(fields['reason'], 60)})"
                if gate is not None:
                    text += f", gate {gate.get('status')} {gate.get('resolution') or ''}".rstrip()
                items.append(Item(fields, text, message.get("id"), message.get("agent_run_id")))
        self._tools = items
        return items

    def hook_runs(self) -> list[Item]:
        """Every hook run on an event, as the dialect has them."""
        return [Item(h.fields, h.text, None, h.run_id) for h in self.speaks.hook_runs(self.report)]

    def fired(self, event: str, turn: int | None) -> int:
        """How many times the scenario's own chat reached the boundary of ``event``."""
        in_turn = partial(self.in_run, turn=turn)
        return self.speaks.fired(self.report, event, self.own_runs, in_turn)

    def injections(self) -> Iterator[Item]:
        """Every injection of the chat, with the model turns (1, 2, ...) whose context held it."""
        reached: dict[str, list[int]] = {}
        for turn, message in enumerate(self.answers, start=1):
            for injection_id in (message.get("sim") or {}).get("injections") or []:
                reached.setdefault(str(injection_id), []).append(turn)
        for message in self.messages:
            if message.get("role") != "injection":
                continue
            info = (message.get("sim") or {}).get("injection") or {}
            text = _text(message)
            turns = reached.get(str(message.get("id")), [])
            fields = {"injection": text, "dedup_key": info.get("dedup_key")}
            fields |= {"role": info.get("role"), "turns": turns}
            seen = f"reached turn(s) {', '.join(map(str, turns))}" if turns else "reached no turn"
            key = f", key {info['dedup_key']}" if info.get("dedup_key") else ""
            where = (message.get("id"), message.get("agent_run_id"))
            yield Item(fields, f"{short(text, 60)!r}{key}: {seen}", *where)

    def rows(self) -> list[Item]:
        """Every transcript row, flattened to the fields a ``row`` expectation names."""
        return [
            Item(row_fields(m), _row_text(m), m.get("id"), m.get("agent_run_id"))
            for m in self.messages
        ]

    def interrupts(self) -> Iterator[Item]:
        """Every interrupt of the simulation's runs."""
        for interrupt in self.report.get("interrupts") or []:
            meta = found if isinstance(found := interrupt.get("meta"), dict) else {}
            data = meta.get("data") or {}
            tool = data.get("tool") or meta.get("tool_name")
            arguments = data.get("arguments")
            arguments = meta.get("arguments") if arguments is None else arguments
            source = str(interrupt.get("source") or "")
            fields = {"interrupt": source.partition(":")[2] or source, "tool": tool}
            fields |= {"arguments": arguments, "status": interrupt.get("status")}
            fields["resolution"] = interrupt.get("resolution")
            text = f"{interrupt.get('id')} {source}" + (f" {tool}" if tool else "")
            text += f": {fields['status']} {fields['resolution'] or ''}".rstrip()
            yield Item(fields, text, None, interrupt.get("run_id"))

    def run(self, turn: int | None) -> ReportRun | None:
        """The last run of the own chat, or the run of scenario turn ``turn``."""
        if turn is None:
            return self.own_runs[-1] if self.own_runs else None
        return self.speaks.run_of_turn(self.report, turn, self.turn_of)


def _text(message: Message) -> str:
    return " ".join(
        str(c.get("text") or "") for c in message.get("content") or [] if isinstance(c, dict)
    )


def row_fields(message: Message) -> dict[str, Any]:
    """A transcript row as the fields a ``row`` expectation names."""
    fields: dict[str, Any] = {"role": message.get("role"), "text": _text(message)}
    fields["status"] = message.get("status")
    for block in message.get("content") or []:
        event = (block.get("event") if isinstance(block, dict) else None) or {}
        kind = event.get("type")
        if kind == "hook":
            fields["type"] = "hook"
            hook = event.get("hook") or {}
            fields.update({key: hook[key] for key in ROW_FIELDS if key in hook})
        elif kind in ("run_failed", "run_ended"):
            run = event.get("run") or {}
            fields.update(type=kind, state=run.get("state"), reason=run.get("reason"))
        elif kind == "attention":
            attention = event.get("attention") or {}
            shown = ("reason", "event", "tool", "task_key", "attempt")
            fields.update(type=kind, **{key: attention.get(key) for key in shown})
        elif kind:
            fields["type"] = kind
    return fields


def _row_text(message: Message) -> str:
    fields = row_fields(message)
    extra = ", ".join(
        f"{k}={short(v, 40)}" for k in ROW_FIELDS[3:] if (v := fields.get(k)) is not None
    )
    return f"{fields['role']}: {short(fields['text'], 60)!r}" + (f" ({extra})" if extra else "")


def evaluate(expectations: list[Expectation], report: SimReport) -> list[Outcome]:
    """Check every expectation against a simulation's report."""
    facts = Facts(report)
    return [check(expectation, facts) for expectation in expectations]


def check(expectation: Expectation, facts: Facts) -> Outcome:
    """Check one expectation."""
    subject = expectation.subject
    if subject == "fired":
        return _fired(expectation, facts)
    if subject in ("run_state", "continuations", "hold"):
        return _run(expectation, facts)
    if subject in BUDGETS:
        return _budget(expectation, facts)
    found = {"tool": facts.tools, "event": facts.hook_runs, "injection": facts.injections}
    found |= {"row": facts.rows, "interrupt": facts.interrupts}
    items = [item for item in found[subject]() if facts.in_run(item.run_id, expectation.run)]
    if subject == "injection":  # reached: the turn the expectation names, or any turn
        turn = expectation.raw.get("turn")
        for item in items:
            turns = item.fields["turns"]
            item.fields["reached"] = (turn in turns) if turn is not None else bool(turns)
    return _collection(expectation, items)


def _matches(expectation: Expectation, item: Item) -> bool:
    if expectation.subject == "injection" and not item.fields.get("reached"):
        return False
    return all(_holds(condition, item) for condition in expectation.conditions)


def _collection(expectation: Expectation, items: list[Item]) -> Outcome:
    matching = [item for item in items if _matches(expectation, item)]
    noun = NOUNS[expectation.subject]
    if expectation.count is None:
        if matching:
            return Outcome(expectation, True)
        candidates = _candidates(expectation, items)
        if not items:
            found = f"there is no {noun} at all"
        elif candidates:
            found = f"no {noun} matches every key; the nearest:"
        else:
            found = f"no {noun} matches; there are:"
        return _failed(expectation, found, candidates or items)
    if len(matching) == expectation.count:
        return Outcome(expectation, True)
    found = f"{len(matching)} {noun}(s) match, expected {expectation.count}"
    return _failed(expectation, found + (":" if matching else ""), matching or items)


def _candidates(expectation: Expectation, items: list[Item]) -> list[Item]:
    """The items nearest to matching: what it is about (its tool and arguments...), else its
    subject key alone; for rows, those that match the most of its fields."""
    if expectation.subject == "row":
        scored = [(sum(_holds(c, item) for c in expectation.conditions), item) for item in items]
        best = max((score for score, _ in scored), default=0)
        return [item for score, item in scored if best and score == best]
    near = {"tool": ("tool", "arguments", "run"), "injection": ("injection", "dedup_key")}
    near |= {"event": ("event", "handler", "tool", "arguments")}
    near |= {"interrupt": ("interrupt", "tool", "arguments")}
    selectors = near[expectation.subject]
    for keys in (selectors, selectors[:1]):
        keyed = [c for c in expectation.conditions if c.key in keys]
        found = [item for item in items if all(_holds(c, item) for c in keyed)]
        if keyed and found:
            return found
    return []


def _holds(condition: Condition, item: Item) -> bool:
    return condition.key in item.fields and condition.test(item.fields[condition.key])


SHOWN = 6  # how many items a failure lists


def _failed(expectation: Expectation, found: str, items: list[Item]) -> Outcome:
    shown = items[:SHOWN]
    lines = [found if items else found.rstrip(":;"), *(f"  {item.text}" for item in shown)]
    lines += [f"  … and {len(items) - SHOWN} more"] if len(items) > SHOWN else []
    anchors, runs = [i.anchor for i in shown if i.anchor], [i.run_id for i in shown if i.run_id]
    return Outcome(expectation, False, "\n".join(lines), anchors=anchors, runs=runs)


def _fired(expectation: Expectation, facts: Facts) -> Outcome:
    event, wanted = str(expectation.raw["event"]), int(expectation.raw["fired"])
    fired = facts.fired(event, expectation.run)
    found = "" if fired == wanted else f"{event} was reached {fired} time(s), expected {wanted}"
    return Outcome(expectation, fired == wanted, found)


def run_hold(run: ReportRun) -> object:
    """Why a run is held (``hook_gate``, a Nexus hold's ``timeout``...), or None."""
    if run.get("state") == ATTENTION_HOLD:
        attention = run.get("attention")
        return attention.get("reason") if attention else None
    if run.get("state") == AgentRunState.INPUT_REQUIRED:
        return run.get("interrupt_reason")
    return None


def run_continuations(run: ReportRun) -> int:
    """Nexus: the stop continuations of a run's execution."""
    found = (run.get("execution") or {}).get("continuations")
    return found if isinstance(found, int) else 0


def _run(expectation: Expectation, facts: Facts) -> Outcome:
    run = facts.run(expectation.run)
    which = "the last run" if expectation.run is None else f"the run of turns[{expectation.run}]"
    if run is None:
        return Outcome(expectation, False, f"there is no run: {which} never started")
    hold, continuations = run_hold(run), run_continuations(run)
    fields = {"run_state": run.get("state"), "error": run.get("error"), "hold": hold}
    passed = all(c.test(fields[c.key]) for c in expectation.conditions if c.key in fields)
    if expectation.subject == "continuations":
        passed = continuations == int(expectation.raw["continuations"])
    if passed:
        return Outcome(expectation, True)
    text = f"{which} ({run['id']}) is {run.get('state')}"
    if run.get("error"):
        text += f" (error: {short(run['error'], 100)})"
    if expectation.subject == "continuations":
        text += f" after {continuations} continuation(s)"
    if expectation.subject == "hold":
        text += f", held for {hold}" if hold else ", not held"
    return Outcome(expectation, False, text, runs=[str(run["id"])])


class HookFailure(TypedDict):
    """A failed hook call no expectation names, as ``belt test --json`` prints it."""

    run_id: str | None
    event: str | None
    handler: str | None
    tool: str | None
    error: str | None
    counted_as: str
    text: str


def unnamed_failures(expectations: list[Expectation], report: SimReport) -> list[HookFailure]:
    """The failed sync hook calls no expectation on their ``error`` names, and how each counted."""
    facts = Facts(report)
    if not facts.speaks.unnamed_failures(report):
        return []
    failed = [item for item in facts.hook_runs() if item.fields.get("error")]
    on_runs = [e for e in expectations if e.subject == "event" and "error" in e.raw]
    on_rows = [e for e in expectations if e.subject == "row" and "error" in e.raw["row"]]
    rows = [row for row in facts.rows() if row.fields.get("type") == "hook"] if on_rows else []
    unnamed: list[HookFailure] = []
    for item in failed:
        named = any(facts.in_run(item.run_id, e.run) and _matches(e, item) for e in on_runs) or any(
            row.run_id == item.run_id
            and row.fields.get("event") == item.fields["event"]
            and row.fields.get("error") == item.fields["error"]
            and facts.in_run(row.run_id, e.run)
            and _matches(e, row)
            for e in on_rows
            for row in rows
        )
        if not named:
            counted = "deny" if item.fields.get("decision") == "deny" else "allow"
            shown = {key: item.fields.get(key) for key in ("event", "handler", "tool", "error")}
            text = f"{item.text} (counted as {counted})"
            unnamed.append({"run_id": item.run_id, **shown, "counted_as": counted, "text": text})  # type: ignore[typeddict-item]
    return unnamed


def latency_of(record: Mapping[str, object]) -> float:
    """How long one hook call took, in ms: its ``latency_ms``, else its ``duration_ms``."""
    value = record.get("latency_ms")
    value = record.get("duration_ms") if value is None else value
    return float(value) if isinstance(value, int | float) else 0.0


def percentile_95(values: list[float]) -> float:
    """The 95th percentile of ``values`` by the nearest rank (the largest, for fewer than 20)."""
    return sorted(values)[max(1, -(-95 * len(values) // 100)) - 1]


def deliveries(facts: Facts) -> Iterator[Item]:
    """Every hook call of the simulation's runs (async ones included), with how long it took."""
    for event, handler, record in facts.speaks.hook_calls(facts.report):
        ms = latency_of(record)
        fields, text = {"event": event, "handler": handler, "latency": ms}, f"{event} → {handler}"
        yield Item(fields, f"{text}: {_ms(ms)}", None, str(record.get("run_id")))


def injected_per_turn(facts: Facts) -> Iterator[Item]:
    """The tokens each handler injected for each model turn (its injections before it, summed)."""
    sums: Counter[tuple[Any, Any, int]] = Counter()
    for message in facts.messages:
        if message.get("role") == "injection":
            sim = message.get("sim") or {}
            info = sim.get("injection") or {}
            key = (message.get("agent_run_id"), info.get("source"), int(info.get("turn") or 0) + 1)
            sums[key] += int(sim.get("tokens") or 0)
    for (run_id, handler, turn), tokens in sums.items():
        text = f"{handler}: {tokens} token(s) for model turn {turn}"
        yield Item({"handler": handler, "tokens": tokens, "turn": turn}, text, None, run_id)


def context_per_turn(facts: Facts) -> Iterator[Item]:
    """The size of the model's context on each model turn (1, 2, ...), its answer included."""
    for turn, message in enumerate(facts.answers, start=1):
        tokens = int((message.get("sim") or {}).get("context_tokens") or 0)
        text = f"model turn {turn}: {tokens} token(s) of context"
        where = (message.get("id"), message.get("agent_run_id"))
        yield Item({"tokens": tokens, "turn": turn}, text, *where)


def _ms(value: float) -> str:
    return f"{value:.3f} ms"


def _budget(expectation: Expectation, facts: Facts) -> Outcome:
    """A budget: the measure of every matching item must stay within the expectation's number."""
    subject = expectation.subject
    limit, run = expectation.raw[subject], expectation.run
    measure = {"latency_ms": deliveries, "injected_tokens": injected_per_turn}
    measured = measure.get(subject, context_per_turn)(facts)  # or context_tokens
    items = [i for i in measured if facts.in_run(i.run_id, run) and _matches(expectation, i)]
    if subject == "latency_ms":
        if not items:
            return Outcome(expectation, False, "there is no hook call to time: none matches")
        values = [float(item.fields["latency"]) for item in items]
        p95 = bool(expectation.raw.get("p95"))
        value = percentile_95(values) if p95 else max(values)
        if value <= limit:
            return Outcome(expectation, True)
        which = "the 95th percentile" if p95 else "the slowest"
        slow = [item for item in items if item.fields["latency"] > limit]
        over = sorted(slow, key=lambda item: -float(item.fields["latency"]))
        took = f"{which} of {len(items)} call(s) took {_ms(value)}"
        return _failed(expectation, f"{took}, over the budget of {limit:g} ms:", over)
    value = max((int(item.fields["tokens"]) for item in items), default=0)
    if value <= limit:  # a whole number >= 0
        return Outcome(expectation, True)
    over = [item for item in items if item.fields["tokens"] > limit]
    what = "injected for" if subject == "injected_tokens" else "of context on"
    found = f"{value} token(s) {what} one model turn, over the budget of {limit}:"
    return _failed(expectation, found, over)
