"""What a simulated step writes for its hooks: the records of one event in one write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import run_scenario
from belt.records.runs import run_events
from belt.store import Store, open_store


def test_the_hook_records_of_one_event_go_to_the_run_s_log_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = [
        {"event": "agent.tool_call", "type": "webhook", "handler": handler}
        for handler in (
            "py:tests.pyhooks:allow",
            "py:tests.pyhooks:record",
            "py:tests.pyhooks:allow",
        )
    ]
    call = {"name": "read_file", "arguments": {"path": "/tmp/a"}, "result": "x"}
    turns = [{"user": "go", "model": [{"tool_calls": [call]}, {"say": "done"}]}]
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"agent": {"hooks": hooks}, "turns": turns}))
    # Each call of append_group is one write of its lines (the store's own tests hold that);
    # the hook records must come in one call.
    groups: list[list[str]] = []
    append_group = Store.append_group

    def counted(self: Store, log: str, id: str, records: Any, **options: Any) -> None:
        if log == "events":
            groups.append([str(record["type"]) for record in records])
        append_group(self, log, id, records, **options)

    monkeypatch.setattr(Store, "append_group", counted)
    report, _ = run_scenario(scenario=path)
    run_id = report["runs"][0]["id"]
    executed = [r for r in run_events(open_store(), run_id) if r["type"] == "hook.executed"]
    assert [r["hook_index"] for r in executed] == [0, 1, 2]
    with_hooks = [group for group in groups if "hook.executed" in group]
    assert with_hooks == [["hook.executed"] * 3], groups


ANSWER = """
def answer(payload):
    return {"decision": "deny", "reason": "no", "override": {"x": 1}, "colour": "red",
            "system": "be brief"}
"""


def test_a_hook_executed_record_keeps_its_keys_in_order(tmp_path: Path) -> None:
    # The record on disk, key by key: what belt's own wire names and what it adds, in order.
    (tmp_path / "answers.py").write_text(ANSWER)
    hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": "py:answers.py:answer"}]
    call = {"name": "read_file", "arguments": {"path": "/tmp/a"}, "result": "x"}
    turns = [{"user": "go", "model": [{"tool_calls": [call]}, {"say": "done"}]}]
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"agent": {"hooks": hooks}, "turns": turns}))
    report, _ = run_scenario(scenario=path)
    run_id = report["runs"][0]["id"]
    [record] = [r for r in run_events(open_store(), run_id) if r["type"] == "hook.executed"]
    assert list(record) == [
        "run_id",
        "at",
        "type",
        "hook_event",
        "decision",
        "reason",
        "duration_ms",
        "latency_ms",
        "hook_index",
        "handler_type",
        "handler",
        "async",
        "error",
        "injected",
        "injection",
        "interrupt_id",
        "task_chat_id",
        "resource_id",
        "override",
        "warnings",
        "payload",
        "invocation_id",
        "after_message",
    ]
    assert record["decision"] == "deny" and record["reason"] == "no"
    assert record["handler"] == "py:answers.py:answer"  # as declared
    assert record["injection"] == {"system": "be brief"} and record["injected"] is True
    assert record["override"] == {"x": 1}
    assert record["warnings"] == ["colour: unknown key in the answer, ignored"]
    assert record["payload"]["data"] == {"tool": "read_file", "arguments": {"path": "/tmp/a"}}
    assert record["invocation_id"] == record["resource_id"]
