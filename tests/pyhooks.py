"""In-process hook handlers for tests: ``py:tests.pyhooks:NAME`` (each gets the payload dict,
but ``model_type``, which asks for a LifecycleHookPayload)."""

from __future__ import annotations

import threading
from typing import Any

from belt.wire.platform import LifecycleHookPayload

received: list[dict[str, Any]] = []
"""Every payload ``record`` was given, in order (tests clear it)."""

release = threading.Event()
"""Set it to let ``block`` return."""


def allow(payload: dict[str, Any]) -> None:
    """Allow everything (an empty answer)."""


def deny(payload: dict[str, Any]) -> dict[str, Any]:
    """Deny with a reason."""
    return {"decision": "deny", "reason": "denied by tests.pyhooks"}


def record(payload: dict[str, Any]) -> None:
    """Keep the payload, then change it: the simulation must not see the change."""
    received.append(payload)
    payload["event"] = "changed by the handler"
    payload.setdefault("data", {})["tool"] = "changed"


def remind(payload: dict[str, Any]) -> dict[str, Any]:
    """Inject a reminder for one turn."""
    return {"inject": {"content": "Remember the rules.", "ttl_turns": 1, "dedup_key": "rules"}}


def explode(payload: dict[str, Any]) -> None:
    """Fail as a handler with a bug does (the message holds a terminal escape)."""
    raise ValueError("boom \x1b[31mred")


class Unsayable(Exception):
    """An exception whose message raises when it is read."""

    def __str__(self) -> str:
        raise RuntimeError("no words")


def explode_unsayably(payload: dict[str, Any]) -> None:
    """Fail with an exception whose message cannot be read."""
    raise Unsayable


def nonsense(payload: dict[str, Any]) -> Any:
    """Answer what no webhook may answer."""
    return {"decision": "maybe"}


def number(payload: dict[str, Any]) -> int:
    """Answer a number instead of a response."""
    return 42


async def later(payload: dict[str, Any]) -> dict[str, Any]:
    """An async handler that denies."""
    return {"decision": "deny", "reason": "async says no"}


def block(payload: dict[str, Any]) -> None:
    """Answer only once ``release`` is set (or after a minute)."""
    release.wait(60)


def ack(task_input: dict[str, Any]) -> dict[str, Any]:
    """A Nexus executor tool that acknowledges."""
    return {"structured_content": {"continue": False}}


def continue_once(task_input: dict[str, Any]) -> dict[str, Any]:
    """A Nexus stop hook that asks for another round until the answer says it checked."""
    if task_input.get("event") == "stop" and "Checked" not in str(task_input.get("output_preview")):
        return {"structured_content": {"continue": True, "feedback": "Check your work first."}}
    return {"structured_content": {"continue": False}}


def dict_type(payload: dict[str, Any]) -> dict[str, Any]:
    """Deny with the payload's type and event, read as a dict."""
    return {"decision": "deny", "reason": f"{type(payload).__name__} {payload['event']}"}


def model_type(payload: LifecycleHookPayload) -> dict[str, Any]:
    """Deny with the payload's type and event, read as a model."""
    return {"decision": "deny", "reason": f"{type(payload).__name__} {payload.event.value}"}


def reads_with_get(payload):  # type: ignore[no-untyped-def]
    """Unannotated, as most handlers are written: it reads the payload with ``.get``."""
    data = payload.get("data") or {}
    return {"decision": "deny", "reason": f"{type(payload).__name__} {data.get('tool')}"}


LONG_MESSAGE = "the handler failed because " + "this part must not be cut, " * 20 + "end."


def fails_at_length(payload: dict[str, Any]) -> None:
    """Raise with a message longer than any line is cut to."""
    raise RuntimeError(LONG_MESSAGE)


def keep(payload: dict[str, Any]) -> None:
    """Keep the payload as it was given (``received``), and allow."""
    received.append(payload)
