"""Expectations (``[[expect]]``): the vocabulary, its checks, and what a failure says."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.engine.scenario import scenario_from_document
from belt.errors import InvalidInput
from belt.testing.expect import (
    KEYS,
    ROW_FIELDS,
    Facts,
    check,
    check_expectations,
    inline,
    read_tested,
)
from belt.testing.suite import ScenarioResult, run_loaded
from belt.wire.validate import Findings

HERE = Path(__file__).parent


def delete(path: str) -> dict[str, Any]:
    return {"name": "delete_file", "arguments": {"path": path}, "result": f"deleted {path}"}


GUARDED: dict[str, Any] = {
    "agent": {
        "hooks": [
            {"event": "agent.tool_call", "type": "webhook", "handler": "py:tests.pyhooks:deny"},
            {"event": "agent.turn_start", "type": "webhook", "handler": "py:tests.pyhooks:remind"},
            {"event": "agent.turn_start", "type": "gate"},
        ]
    },
    "turns": [
        {
            "user": "clean up",
            "resolve": [{"event": "agent.turn_start", "decision": "allow"}],
            "model": [
                {"say": "deleting", "tool_calls": [delete("/etc/passwd")]},
                {"say": "done"},
            ],
        },
        {
            "user": "and again",
            "resolve": [{"decision": "allow"}],
            "error": "model overloaded",
        },
    ],
}


def run(doc: dict[str, Any], expect: list[dict[str, Any]] | None = None) -> ScenarioResult:
    loaded = scenario_from_document({**doc, "expect": expect or []}, "test.json", HERE)
    result = run_loaded("test.json", loaded, routes=[])
    assert result.status != "error", result.error
    return result


@pytest.fixture(scope="module")
def guarded() -> ScenarioResult:
    return run(GUARDED)


def holds(result: ScenarioResult, /, **expectation: Any) -> bool:
    findings = Findings()
    dialect = str(result.report["simulation"]["dialect"]) if result.report else "platform"
    [compiled] = check_expectations([expectation], dialect, findings)
    assert result.report is not None
    return check(compiled, Facts(result.report)).passed


# -- what each kind of expectation checks ----------------------------------------------------------


@pytest.mark.parametrize(
    ("expectation", "passes"),
    [
        ({"tool": "delete_file", "status": "failed"}, True),
        ({"tool": "delete_file", "status": "failed", "decision": "deny"}, True),
        ({"tool": "delete_file", "arguments": {"path": "/etc/*"}, "status": "failed"}, True),
        ({"tool": "delete_file", "arguments": {"path": "/tmp/*"}}, False),
        ({"tool": "delete_file", "reason": "denied by *"}, True),
        ({"tool": "delete_file", "result": "re:^denied"}, True),
        ({"tool": "delete_file", "status": "completed"}, False),
        ({"tool": "delete_*", "count": 1}, True),
        ({"tool": "send_email", "count": 0}, True),
        ({"tool": "delete_file", "gated": True}, False),
        (
            {"event": "agent.tool_call", "decision": "deny", "handler": "py:tests.pyhooks:deny"},
            True,
        ),
        (
            {"event": "agent.tool_call", "tool": "delete_file", "arguments": {"path": "/etc/*"}},
            True,
        ),
        ({"event": "agent.turn_start", "injected": True, "count": 3}, True),
        ({"event": "agent.turn_start", "decision": "suspend", "count": 3}, True),
        ({"event": "agent.complete", "count": 0}, True),
        ({"event": "agent.tool_call", "error": True}, False),
        ({"event": "agent.turn_start", "fired": 3}, True),
        ({"event": "agent.turn_start", "fired": 1, "run": 1}, True),
        ({"event": "agent.turn_start", "fired": 1, "run": 0}, False),
        ({"event": "agent.error", "fired": 1, "run": 1}, True),
        ({"event": "agent.start", "fired": 1}, True),
        ({"event": "agent.pre_compact", "fired": 0}, True),
        ({"injection": "Remember*", "turn": 1}, True),
        ({"dedup_key": "rules", "turn": 2}, True),
        ({"dedup_key": "rules", "turn": 3}, False),
        ({"dedup_key": "rules", "turn": 3, "reached": False}, True),
        ({"injection": "Remember the rules.", "role": "system"}, False),
        ({"row": {"role": "event", "handler": "py:tests.pyhooks:deny", "decision": "deny"}}, True),
        ({"row": {"type": "run_failed", "reason": "model overloaded"}}, True),
        ({"row": {"text": "deleting"}, "exists": False}, False),
        ({"row": {"role": "user"}, "count": 2}, True),
        ({"row": {"role": "user"}, "run": 1, "count": 1}, True),
        ({"interrupt": "agent.turn_start", "resolution": "allow", "count": 3}, True),
        ({"interrupt": "agent.turn_start", "status": "resolved", "run": 0}, True),
        ({"interrupt": "agent.tool_call"}, False),
        ({"run_state": "failed", "error": "model overloaded"}, True),
        ({"run_state": "completed", "run": 0}, True),
        ({"run_state": "completed"}, False),
        ({"hold": False}, True),
        ({"hold": "hook_gate"}, False),
    ],
)
def test_each_kind_of_expectation(
    guarded: ScenarioResult, expectation: dict[str, Any], passes: bool
) -> None:
    assert holds(guarded, **expectation) is passes


def test_fired_counts_boundaries_whatever_hooks_are_attached() -> None:
    doc = {
        "chat": {"disable_hooks": True},
        "turns": [{"user": "go", "model": [{"tool_calls": [delete("/tmp/a")]}, {"say": "ok"}]}],
    }
    result = run(doc)
    assert holds(result, event="agent.turn_start", fired=2)
    assert holds(result, event="agent.tool_call", fired=1)
    assert holds(result, event="agent.complete", fired=1)
    assert holds(result, event="agent.turn_start", count=0)  # no hook ran


def test_fired_and_run_state_look_at_the_scenarios_own_chat() -> None:
    doc = {
        "agent": {"hooks": [{"event": "agent.start", "type": "task", "handler": "team/reviewer"}]},
        "agents": {"team/reviewer": {"error": "reviewer broke"}},
        "turns": [{"user": "go", "model": [{"say": "hello"}]}],
    }
    result = run(doc)
    assert result.report is not None and result.report["tasks"]
    assert holds(result, event="agent.turn_start", fired=1)
    assert holds(result, run_state="completed")


def test_nexus_continuations_and_holds() -> None:
    stop = {"tool": "verify", "timeout_ms": 30000, "max_continuations": 2}
    doc = {
        "dialect": "nexus",
        "profile": {"approval_mode": "auto", "lifecycle_hooks": {"stop": stop}},
        "executors": {"verify": "py:tests.pyhooks:continue_once"},
        "turns": [
            {"user": "fix it", "model": [{"say": "Fixed."}, {"say": "Checked: fixed."}]},
            {"user": "again", "model": [{"say": "Fixed again."}]},
        ],
    }
    result = run(doc)
    assert holds(result, continuations=1, run=0)
    assert holds(result, run_state="completed", run=0)
    assert holds(result, continuations=2)
    assert holds(result, hold="continuation_limit_exceeded")
    assert holds(result, run_state="attention_hold")
    assert holds(result, event="stop", decision="continue", count=3)
    assert holds(result, event="stop", fired=5)
    assert holds(result, row={"handler_type": "executor", "decision": "continue"})
    assert not holds(result, hold=False)


def test_a_nexus_hook_without_an_executor_holds_at_its_timeout() -> None:
    doc = {
        "dialect": "nexus",
        "profile": {
            "approval_mode": "auto",
            "lifecycle_hooks": {"turn_start": {"tool": "nobody", "timeout_ms": 1}},
        },
        "turns": [{"user": "hi", "model": [{"say": "hello"}]}],
    }
    result = run(doc)
    assert holds(result, hold="timeout")
    assert holds(result, event="turn_start", status="failed", error="*")


# -- what a failure says --------------------------------------------------------------------------


def failed(result: ScenarioResult, /, **expectation: Any) -> Any:
    findings = Findings()
    [compiled] = check_expectations([expectation], "platform", findings)
    assert result.report is not None
    outcome = check(compiled, Facts(result.report))
    assert not outcome.passed
    return outcome


def test_a_failure_lists_what_happened_instead(guarded: ScenarioResult) -> None:
    outcome = failed(guarded, tool="delete_file", status="completed")
    assert outcome.found.splitlines() == [
        "no tool call matches every key; the nearest:",
        '  delete_file({"path": "/etc/passwd"}) failed, decision deny (denied by tests.pyhooks)',
    ]
    excerpt = guarded.excerpt(outcome)
    assert any(m["role"] == "assistant" and m["id"] in outcome.anchors for m in excerpt)


def test_a_count_failure_says_how_many(guarded: ScenarioResult) -> None:
    outcome = failed(guarded, event="agent.turn_start", fired=5)
    assert outcome.found == "agent.turn_start was reached 3 time(s), expected 5"
    outcome = failed(guarded, row={"role": "user"}, count=1)
    assert outcome.found.startswith("2 transcript row(s) match, expected 1:")


def test_a_run_failure_names_the_run(guarded: ScenarioResult) -> None:
    outcome = failed(guarded, run_state="completed")
    assert outcome.found.startswith("the last run (ar_")
    assert outcome.found.endswith("is failed (error: model overloaded)")


# -- the vocabulary --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expectation", "problem"),
    [
        ({"tool": "x", "colour": 1}, "expect[0].colour: unknown key here (allowed with tool:"),
        ({"tool": "x", "fired": 1}, "expect[0].tool: unknown key here (allowed with fired:"),
        ({"colour": 1}, "expect[0]: says nothing to check"),
        ({"tool": "x", "status": "done"}, "expect[0].status: 'done' is not one of pending"),
        ({"tool": "x", "count": -1}, "expect[0].count: expected a whole number >= 0"),
        ({"tool": "x", "gated": "yes"}, "expect[0].gated: expected true or false"),
        ({"tool": "x", "arguments": {"p": "re:("}}, "expect[0].arguments.p: bad regex"),
        ({"event": "agent.idle2"}, "expect[0].event: 'agent.idle2' is not one of"),
        ({"event": "agent.start", "decision": "continue"}, "'continue' is not one of allow"),
        ({"row": {"colour": "red"}}, "expect[0].row.colour: unknown row field"),
        ({"row": "x"}, "expect[0].row: expected a table of row fields"),
        ({"continuations": 1}, "expect[0].continuations: Nexus stop continuations"),
        ({"row": {"role": "user"}, "exists": False, "count": 1}, "give count or a negative"),
        ({"run_state": "done"}, "expect[0].run_state: 'done' is not one of"),
        ("tool", "expect[0]: expected a table, got a string"),
    ],
)
def test_a_wrong_expectation_is_named_by_its_path(expectation: Any, problem: str) -> None:
    findings = Findings()
    check_expectations([expectation], "platform", findings)
    assert any(problem in found for found in findings.problems), findings.problems


def test_every_problem_of_a_scenario_is_reported() -> None:
    doc = {
        "turns": [{"usr": "x"}],
        "expect": [{"tool": "x", "colour": 1}, {"event": "agent.start", "fired": "two"}],
    }
    with pytest.raises(InvalidInput) as caught:
        read_tested(doc, "bad.toml", HERE)
    problems = [caught.value.message, *caught.value.problems]
    assert any("turns[0].usr: unknown key" in p for p in problems)
    assert any("expect[0].colour: unknown key here" in p for p in problems)
    assert any("expect[1].fired: expected a whole number" in p for p in problems)


def test_nexus_and_platform_keep_their_own_words() -> None:
    findings = Findings()
    check_expectations([{"injection": "x"}, {"event": "agent.start"}], "nexus", findings)
    assert findings.problems[0].startswith("expect[0].injection: injections belong to the platform")
    assert findings.problems[1].startswith(
        "expect[1].event: 'agent.start' is not one of turn_start"
    )


# -- properties ------------------------------------------------------------------------------------

VALUES = st.recursive(
    st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=8), VALUES, max_size=4))
@settings(max_examples=100, deadline=None)
def test_inline_is_the_toml_of_the_expectation(table: dict[str, Any]) -> None:
    assert tomllib.loads(f"x = {inline(table)}")["x"] == table


ALL_KEYS = sorted({key for keys in KEYS.values() for key in keys} | {"name", "colour"})


@given(
    st.dictionaries(st.sampled_from(ALL_KEYS), VALUES | st.sampled_from(ROW_FIELDS), max_size=4),
    st.sampled_from(["platform", "nexus"]),
)
@settings(max_examples=250, deadline=None)
def test_any_expectation_compiles_or_is_named_and_checks_without_raising(
    guarded: ScenarioResult, expectation: dict[str, Any], dialect: str
) -> None:
    findings = Findings()
    compiled = check_expectations([expectation], dialect, findings)
    if not findings.ok:
        assert all(problem.startswith("expect[0]") for problem in findings.problems)
        return
    assert guarded.report is not None
    check(compiled[0], Facts(guarded.report))


def test_reading_a_scenario_leaves_its_expectations_to_the_test_framework() -> None:
    doc = {"turns": [{"user": "x", "model": [{"say": "ok"}]}], "expect": [{"colour": 1}]}
    loaded = scenario_from_document(doc, "s.toml", HERE)  # a simulation does not check them
    assert loaded.scenario.expect == [{"colour": 1}]
    with pytest.raises(InvalidInput, match="expect"):
        read_tested(doc, "s.toml", HERE)
