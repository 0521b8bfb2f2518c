"""Coverage of hooks (``belt.testing.coverage``): each declared hook of a test scenario, how
often it fired and what came of it, counted against deliveries worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.testing.suite import run_suite

ROOT = Path(__file__).resolve().parents[1]

NO_PLATFORM = {"allow": 0, "deny": 0, "stop": 0, "suspend": 0, "injected": 0, "failed": 0}
NO_NEXUS = {"acknowledged": 0, "continued": 0, "failed": 0, "held": 0}


def counts(entry: dict[str, Any]) -> tuple[str, str, str, int, dict[str, int], dict[str, int]]:
    return (
        entry["where"],
        entry["event"],
        entry["handler"],
        entry["fired"],
        {key: count for key, count in entry["outcomes"].items() if count},
        entry["tools"],
    )


def write(directory: Path, name: str, doc: dict[str, Any]) -> Path:
    path = directory / name
    path.write_text(json.dumps(doc))
    return path


def test_the_examples_coverage_is_what_their_turns_deliver(monkeypatch: pytest.MonkeyPatch) -> None:
    # Counted by hand from examples/tests/guarded.toml (its py: handler path is relative to its
    # directory). Its one turn has three model turns, so agent.turn_start fires 3 times, and
    # examples/tests/hooks.py:guard injects the reminder (and allows) on each. Model turn 1
    # deletes /var/lib/app/production.db: hook 0 (the guard) denies it, and a deny ends the
    # event, so hook 2 (the gate) is not called. Model turn 2 deletes /tmp/old.txt: the guard
    # allows it, then the gate suspends it (the scenario's turns.resolve allows it later).
    # Model turn 3 only speaks. So hook 0 saw delete_file twice, hook 2 once.
    monkeypatch.chdir(ROOT)
    suite = run_suite(paths=[Path("examples/tests/guarded.toml")], fail_unfired=True)

    assert suite.exit_code == 0
    guard = "py:hooks.py:guard"
    assert [counts(entry) for entry in suite.coverage] == [
        (
            "agent.hooks[0]",
            "agent.tool_call",
            guard,
            2,
            {"allow": 1, "deny": 1},
            {"delete_file": 2},
        ),
        ("agent.hooks[1]", "agent.turn_start", guard, 3, {"allow": 3, "injected": 3}, {}),
        ("agent.hooks[2]", "agent.tool_call", "gate", 1, {"suspend": 1}, {"delete_file": 1}),
    ]
    assert {entry["scenario"] for entry in suite.coverage} == {"examples/tests/guarded.toml"}
    assert [entry["index"] for entry in suite.coverage] == [0, 1, 2]


def denied_before_the_gate(directory: Path) -> Path:
    """A deny on agent.tool_call ends the event, so the gate declared after it never fires;
    the agent.turn_start hook fails (the handler raises) on both model turns."""
    return write(
        directory,
        "denied.json",
        {
            "hook_errors": "allow",
            "agent": {
                "hooks": [
                    {
                        "event": "agent.tool_call",
                        "type": "webhook",
                        "handler": "py:tests.pyhooks:deny",
                    },
                    {"event": "agent.tool_call", "type": "gate", "timeout": 600},
                    {
                        "event": "agent.turn_start",
                        "type": "webhook",
                        "handler": "py:tests.pyhooks:explode",
                    },
                ]
            },
            "turns": [
                {
                    "user": "clean up",
                    "model": [
                        {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/x"}}]},
                        {"say": "done"},
                    ],
                }
            ],
            "expect": [{"tool": "delete_file", "status": "failed"}],
        },
    )


def test_a_hook_that_never_fired_is_listed_with_nothing_counted(tmp_path: Path) -> None:
    suite = run_suite(paths=[denied_before_the_gate(tmp_path)])

    assert suite.exit_code == 0
    first, gate, failing = suite.coverage
    assert counts(first)[3:] == (1, {"deny": 1}, {"delete_file": 1})
    assert (gate["where"], gate["fired"], gate["outcomes"], gate["tools"]) == (
        "agent.hooks[1]",
        0,
        NO_PLATFORM,
        {},
    )
    assert counts(failing)[3:] == (2, {"failed": 2}, {})
    assert suite.results[0].unfired == []


def test_fail_unfired_fails_a_scenario_that_declares_a_hook_that_never_fired(
    tmp_path: Path,
) -> None:
    suite = run_suite(paths=[denied_before_the_gate(tmp_path)], fail_unfired=True)

    assert suite.exit_code == 1
    result = suite.results[0]
    assert result.status == "fail"
    assert [entry["where"] for entry in result.unfired] == ["agent.hooks[1]"]
    assert result.to_json()["unfired_hooks"][0]["event"] == "agent.tool_call"


def test_a_scenario_stopped_before_it_runs_lists_its_hooks_as_never_fired(
    tmp_path: Path,
) -> None:
    hook = {
        "event": "agent.tool_call",
        "type": "webhook",
        "handler": "https://hooks.example.invalid/x",
    }
    path = write(
        tmp_path,
        "offline.json",
        {
            "agent": {"hooks": [hook]},
            "turns": [{"user": "hi"}],
            "expect": [{"run_state": "completed"}],
        },
    )

    suite = run_suite(paths=[path], fail_unfired=True)

    result = suite.results[0]
    assert result.status == "error"
    assert [(entry["handler"], entry["fired"]) for entry in result.coverage] == [
        ("hooks.example.invalid", 0)
    ]
    assert result.unfired == []


def test_nexus_coverage_is_per_event_and_executor_tool(tmp_path: Path) -> None:
    # By hand: one input with two candidate answers. turn_start runs once, before the first
    # model request (tests.nexus_tools:acknowledge acknowledges). stop runs on each answer:
    # tests.pyhooks:continue_once asks for another round on "Fixed." (a continuation) and
    # acknowledges "Checked: fixed.". No compaction happens, so pre_compact never fires.
    path = write(
        tmp_path,
        "nexus.json",
        {
            "dialect": "nexus",
            "profile": {
                "approval_mode": "auto",
                "lifecycle_hooks": {
                    "turn_start": {"tool": "check", "timeout_ms": 30000},
                    "pre_compact": {"tool": "check", "timeout_ms": 30000},
                    "stop": {"tool": "verify", "timeout_ms": 30000, "max_continuations": 2},
                },
            },
            "executors": {
                "check": "py:tests.nexus_tools:acknowledge",
                "verify": "py:tests.pyhooks:continue_once",
            },
            "turns": [{"user": "fix it", "model": [{"say": "Fixed."}, {"say": "Checked: fixed."}]}],
            "expect": [{"run_state": "completed"}],
        },
    )

    suite = run_suite(paths=[path])

    assert suite.exit_code == 0
    by_event = {entry["event"]: entry for entry in suite.coverage}
    assert set(by_event) == {"turn_start", "pre_compact", "stop"}
    assert counts(by_event["turn_start"])[1:5] == ("turn_start", "check", 1, {"acknowledged": 1})
    assert counts(by_event["stop"])[1:5] == (
        "stop",
        "verify",
        2,
        {"acknowledged": 1, "continued": 1},
    )
    assert (by_event["pre_compact"]["fired"], by_event["pre_compact"]["outcomes"]) == (0, NO_NEXUS)
    assert by_event["stop"]["where"] == "profile.lifecycle_hooks.stop"


def test_a_failed_nexus_hook_counts_a_failure_and_the_hold_it_caused(tmp_path: Path) -> None:
    # By hand: the turn_start tool exits, so its one task fails and the execution goes on an
    # attention hold before any model request; stop is never reached.
    path = write(
        tmp_path,
        "held.json",
        {
            "dialect": "nexus",
            "hook_errors": "allow",
            "profile": {
                "approval_mode": "auto",
                "lifecycle_hooks": {
                    "turn_start": {"tool": "bad", "timeout_ms": 30000},
                    "stop": {"tool": "good", "timeout_ms": 30000, "max_continuations": 1},
                },
            },
            "executors": {
                "bad": "py:tests.nexus_tools:exits",
                "good": "py:tests.nexus_tools:acknowledge",
            },
            "turns": [{"user": "hi", "model": [{"say": "hello"}]}],
            "expect": [{"run_state": "attention_hold"}],
        },
    )

    suite = run_suite(paths=[path], fail_unfired=True)

    by_event = {entry["event"]: entry for entry in suite.coverage}
    assert counts(by_event["turn_start"])[3:5] == (1, {"failed": 1, "held": 1})
    assert by_event["stop"]["fired"] == 0
    assert [entry["event"] for entry in suite.results[0].unfired] == ["stop"]


def test_hooks_from_the_agents_hooks_file_come_first_and_async_ones_are_counted(
    tmp_path: Path,
) -> None:
    # By hand: the hooks file's agent.turn_start hook (async, tests.pyhooks:record) is hook 0
    # and runs before each of the two model turns; the inline agent.tool_call hook (hook 1,
    # tests.pyhooks:allow) sees the one delete_file call.
    hooks = tmp_path / "hooks.json"
    turn_start = {
        "event": "agent.turn_start",
        "type": "webhook",
        "handler": "py:tests.pyhooks:record",
        "async": True,
    }
    hooks.write_text(json.dumps({"hooks": [turn_start]}))
    tool_call = {"event": "agent.tool_call", "type": "webhook", "handler": "py:tests.pyhooks:allow"}
    path = write(
        tmp_path,
        "filed.json",
        {
            "agent": {"hooks_file": "hooks.json", "hooks": [tool_call]},
            "turns": [
                {
                    "user": "clean up",
                    "model": [
                        {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/x"}}]},
                        {"say": "done"},
                    ],
                }
            ],
            "expect": [{"run_state": "completed"}],
        },
    )

    suite = run_suite(paths=[path])

    assert suite.exit_code == 0
    assert [(e["where"], e["event"], e["async"], e["fired"]) for e in suite.coverage] == [
        ("hooks.json hooks[0]", "agent.turn_start", True, 2),
        ("agent.hooks[0]", "agent.tool_call", False, 1),
    ]
    assert suite.coverage[1]["outcomes"] == {**NO_PLATFORM, "allow": 1}


def test_a_hooks_file_that_replaces_the_agents_hooks_names_every_hook_by_it(
    tmp_path: Path,
) -> None:
    from belt.engine.scenario import read_scenario
    from belt.testing.coverage import scenario_coverage

    hooks = tmp_path / "other.json"
    hook = {"event": "agent.turn_start", "type": "webhook", "handler": "py:tests.pyhooks:allow"}
    hooks.write_text(json.dumps({"hooks": [hook, hook]}))
    inline = {"event": "agent.tool_call", "type": "webhook", "handler": "py:tests.pyhooks:allow"}
    path = write(tmp_path, "s.json", {"agent": {"hooks": [inline]}, "turns": [{"user": "hi"}]})

    loaded = read_scenario(path, hooks_file=hooks)

    assert [entry["where"] for entry in scenario_coverage("s", loaded, None)] == [
        f"{hooks} hooks[0]",
        f"{hooks} hooks[1]",
    ]
