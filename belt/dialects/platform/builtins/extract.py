"""The builtin ``belt:extract``, as the platform's does: it answers at once and returns the
review to do, as data; the loop runs the review branch (``belt.dialects.platform.reviews``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from belt.dialects.platform.agent_loop import PlatformLoop
    from belt.engine.dispatch import HookRun

EXTRACT = "belt:extract"
FINISH = "finish"
"""The tool an agent calls to end its work: a turn that only calls it did no work."""


@dataclass(frozen=True)
class Review:
    """A review ``belt:extract`` asks for: of ``chat_id`` up to the message ``ancestor``."""

    event: str
    chat_id: str
    run_id: str | None
    ancestor: str
    agent_id: str
    owner: str


def did_work(message: Mapping[str, Any]) -> bool:
    """True for an assistant turn that did more than call ``finish``."""
    if message.get("role") != "assistant":
        return False
    said = any((c or {}).get("text") for c in message.get("content") or [])
    calls = [i.get("function", {}).get("name") for i in message.get("tool_invocations") or []]
    return said or any(name != FINISH for name in calls)


def run(loop: PlatformLoop, hook_run: HookRun, payload: Mapping[str, object]) -> None:
    """Ask for a review of the chat since the last one (only of the owning team, after work)."""
    recorder, owner = loop.sim.recorder, loop.scenario.agent.owner
    since_last_review = recorder.messages[int(recorder.chat.get("last_review_order", -1)) + 1 :]
    if loop.scenario.user_team != owner or not any(map(did_work, since_last_review)):
        return
    run_id = payload.get("run_id")
    hook_run.review = Review(
        event=str(payload["event"]),
        chat_id=str(recorder.chat["id"]),
        run_id=run_id if isinstance(run_id, str) else None,
        ancestor=str(since_last_review[-1]["id"]),
        agent_id=loop.sim.agent_id,
        owner=owner,
    )
