"""Executor tools for tests that name one as ``py:tests.nexus_tools:FUNC``."""

from __future__ import annotations

from typing import Any

from belt.wire.nexus import HookTaskInput


def acknowledge(task_input: dict[str, Any]) -> dict[str, Any]:
    """Acknowledge every hook."""
    return {"structured_content": {"continue": False}}


def continue_until_third_answer(task_input: dict[str, Any]) -> dict[str, Any]:
    """Ask stop to continue until the third candidate answer, then accept."""
    if task_input["event"] == "stop" and not task_input["task_key"].endswith("answer-3"):
        return {"structured_content": {"continue": True, "feedback": "Run the tests first."}}
    return {"structured_content": {"continue": False}}


def exits(task_input: dict[str, Any]) -> dict[str, Any]:
    """A tool that calls sys.exit."""
    raise SystemExit(3)


def interrupted(task_input: dict[str, Any]) -> dict[str, Any]:
    """A tool that raises KeyboardInterrupt itself."""
    raise KeyboardInterrupt


class Unsayable(Exception):
    """An exception whose message itself raises."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


def unsayable(task_input: dict[str, Any]) -> dict[str, Any]:
    """A tool that raises an exception whose message cannot be read."""
    raise Unsayable


def not_a_number(task_input: dict[str, Any]) -> dict[str, Any]:
    """A tool that answers NaN, which JSON cannot spell."""
    return {"structured_content": {"continue": False, "score": float("nan")}}


def a_set(task_input: dict[str, Any]) -> Any:
    """A tool that answers a value JSON cannot hold at all."""
    return {"structured_content": {"continue": False}, "seen": {1, 2}}


def hangs(task_input: dict[str, Any]) -> dict[str, Any]:
    """A tool that never answers within any deadline a test gives it."""
    import time

    time.sleep(30)
    return {"structured_content": {"continue": False}}


def reads_the_model(task_input: HookTaskInput) -> dict[str, Any]:
    """A tool that asks for the input as a HookTaskInput (its annotation says so)."""
    if task_input.event == "stop" and not (task_input.output_preview or "").strip():
        return {"structured_content": {"continue": True, "feedback": "Say something."}}
    return {"structured_content": {"continue": False}}


def reads_a_dict(task_input):  # type: ignore[no-untyped-def]
    """An unannotated tool: it gets the input as a dict."""
    return {"structured_content": {"continue": task_input.get("event") == "nope"}}
