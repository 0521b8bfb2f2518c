"""Budgets as expectations: latency_ms, injected_tokens and context_tokens in [[expect]].

No test here asserts how long anything took: a handler that sleeps first takes at least that
long, so a budget of 0 ms fails against it and one of a minute passes, whatever the machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from belt.cli import app
from belt.testing.expect import percentile_95
from belt.testing.suite import ScenarioResult, run_suite

HANDLER = """
import time

def slow(payload):
    time.sleep(0.002)   # at least 2 ms: a latency this test controls from below
    if payload["event"] == "agent.turn_start":
        return {"inject": {"content": "x" * 80, "ttl_turns": 1}, "system": "y" * 40}
    return None
"""
"""80 characters are 20 tokens of the estimate (length / 4), 40 are 10."""


def scenario(directory: Path, *expectations: dict[str, Any], turns: int = 1) -> Path:
    """A scenario whose py: handler answers every tool call and injects 30 tokens a turn."""
    (directory / "slow.py").write_text(HANDLER, encoding="utf-8")
    handler = f"py:{(directory / 'slow.py').as_posix()}:slow"
    document = {
        "agent": {
            "hooks": [
                {"event": "agent.tool_call", "type": "webhook", "handler": handler},
                {"event": "agent.turn_start", "type": "webhook", "handler": handler},
            ]
        },
        "turns": [
            {
                "user": f"turn {number}",
                "model": [
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "/tmp/a"}}]},
                    {"say": "done"},
                ],
            }
            for number in range(turns)
        ],
        "expect": list(expectations),
    }
    path = directory / "budget.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def run(path: Path) -> ScenarioResult:
    suite = run_suite(paths=[path])
    assert len(suite.results) == 1
    return suite.results[0]


def found(result: ScenarioResult) -> list[str]:
    return [outcome.found for outcome in result.failures]


def test_a_latency_budget_of_zero_fails_against_a_real_delivery_and_a_generous_one_passes(
    tmp_path: Path,
) -> None:
    result = run(
        scenario(
            tmp_path,
            {"latency_ms": 60_000, "event": "agent.tool_call"},
            {"latency_ms": 60_000, "p95": True},
            {"latency_ms": 0, "event": "agent.tool_call"},
            {"latency_ms": 0, "p95": True, "handler": "py:*"},
        )
    )
    assert result.status == "fail"
    assert [o.expectation.index for o in result.failures] == [2, 3]
    slowest, p95 = found(result)
    assert slowest.startswith("the slowest of 1 call(s) took ")
    assert "over the budget of 0 ms" in slowest
    assert "agent.tool_call → py:" in slowest
    assert p95.startswith("the 95th percentile of 3 call(s) took ")


def test_a_latency_budget_on_calls_that_never_happened_fails(tmp_path: Path) -> None:
    result = run(scenario(tmp_path, {"latency_ms": 60_000, "event": "agent.pre_compact"}))
    assert result.status == "fail"
    assert found(result) == ["there is no hook call to time: none matches"]


def test_the_95th_percentile_is_by_nearest_rank() -> None:
    assert percentile_95([3.0]) == 3.0
    assert percentile_95([float(n) for n in range(1, 21)]) == 19.0
    assert percentile_95([float(n) for n in range(100, 0, -1)]) == 95.0
    assert percentile_95([1.0, 50.0]) == 50.0


def test_injected_tokens_are_summed_per_handler_and_model_turn(tmp_path: Path) -> None:
    # Each turn_start injects 20 tokens and a system message of 10: 30 for each model turn.
    result = run(
        scenario(
            tmp_path,
            {"injected_tokens": 30},
            {"injected_tokens": 29, "handler": "py:*slow.py:slow"},
            {"injected_tokens": 0, "handler": "https://elsewhere.example/*"},
            turns=2,
        )
    )
    assert [o.expectation.index for o in result.failures] == [1]
    text = found(result)[0]
    assert text.startswith("30 token(s) injected for one model turn, over the budget of 29:")
    assert "slow.py:slow: 30 token(s) for model turn 1" in text
    assert "for model turn 3" in text  # the second run's first model turn is the chat's third


def test_context_tokens_is_the_most_the_context_reaches_on_a_turn(tmp_path: Path) -> None:
    first = run(scenario(tmp_path, {"context_tokens": 0}))
    assert first.status == "fail"
    text = found(first)[0]
    largest = int(text.split(" ", 1)[0])
    assert text.startswith(f"{largest} token(s) of context on one model turn")
    assert "model turn 2:" in text
    assert first.report is not None
    sizes = [
        m["sim"]["context_tokens"]
        for m in first.report["chat"]["chat_messages"]
        if m["role"] == "assistant"
    ]
    assert largest == max(sizes)
    again = run(scenario(tmp_path, {"context_tokens": largest}))
    assert again.status == "pass"


@pytest.mark.parametrize(
    ("expectation", "problem"),
    [
        ({"latency_ms": -1}, "expect[0].latency_ms: expected a number of milliseconds >= 0"),
        ({"latency_ms": "fast"}, "expect[0].latency_ms: expected a number of milliseconds >= 0"),
        ({"latency_ms": True}, "expect[0].latency_ms: expected a number of milliseconds >= 0"),
        ({"latency_ms": 5, "p95": "yes"}, "expect[0].p95: expected true or false"),
        ({"latency_ms": 5, "tool": "x"}, "expect[0].tool: unknown key here"),
        ({"injected_tokens": 1.5}, "expect[0].injected_tokens: expected a whole number >= 0"),
        ({"context_tokens": -3}, "expect[0].context_tokens: expected a whole number >= 0"),
        ({"context_tokens": 9, "handler": "x"}, "expect[0].handler: unknown key here"),
    ],
)
def test_a_wrong_budget_is_named_by_its_path(
    tmp_path: Path, expectation: dict[str, Any], problem: str
) -> None:
    result = run(scenario(tmp_path, expectation))
    assert result.status == "error" and result.invalid
    assert problem in (result.error or "")


def test_coverage_reports_each_hooks_latency_and_injected_tokens(tmp_path: Path) -> None:
    result = run(scenario(tmp_path, {"run_state": "completed"}))
    tool_call, turn_start = result.coverage
    assert tool_call["latency_ms"]["max"] >= 2.0  # the handler slept 2 ms first
    assert tool_call["latency_ms"]["p95"] <= tool_call["latency_ms"]["max"]
    assert tool_call["injected_tokens"] is None
    assert turn_start["injected_tokens"] == 30
    runner = CliRunner()
    shown = runner.invoke(app, ["test", str(tmp_path / "budget.json"), "--coverage"])
    assert shown.exit_code == 0, shown.output
    header = next(line for line in shown.output.splitlines() if line.startswith("SCENARIO"))
    assert header.split()[-2:] == ["LATENCY", "TOKENS/TURN"]
    row = next(line for line in shown.output.splitlines() if "agent.turn_start" in line)
    assert " max " in row and " p95 " in row and row.rstrip().endswith("30")


def test_a_nexus_scenario_has_no_injections_to_budget(tmp_path: Path) -> None:
    path = tmp_path / "nexus.json"
    path.write_text(
        json.dumps(
            {
                "dialect": "nexus",
                "turns": [{"user": "hi", "model": [{"say": "hello"}]}],
                "expect": [{"injected_tokens": 5}],
            }
        ),
        encoding="utf-8",
    )
    result = run(path)
    assert result.invalid
    assert "expect[0].injected_tokens: injections belong to the platform dialect" in (
        result.error or ""
    )
