"""Executor tools for tests that name one as ``py:tests.nexus_tools:FUNC``."""

from __future__ import annotations

from typing import Any


def acknowledge(task_input: dict[str, Any]) -> dict[str, Any]:
    """Acknowledge every hook."""
    return {"structured_content": {"continue": False}}


def continue_until_third_answer(task_input: dict[str, Any]) -> dict[str, Any]:
    """Ask stop to continue until the third candidate answer, then accept."""
    if task_input["event"] == "stop" and not task_input["task_key"].endswith("answer-3"):
        return {"structured_content": {"continue": True, "feedback": "Run the tests first."}}
    return {"structured_content": {"continue": False}}
