"""Builtin handlers: ``belt:suggest`` and ``belt:extract``, against the owner's local registry.

They answer the hook the way the platform's builtins do. ``belt:suggest`` searches the owner's
registry for the turn's prompt and answers with an injection for one turn naming what it put in
front of the model (``items``); ``belt:extract`` answers at once and returns the review to do, as
data: the engine runs the review branch (a handler never runs the engine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from belt.store import Store
from belt.wire.platform import ContextInjection, LifecycleHookResponse

if TYPE_CHECKING:
    from belt.records.registry import Match

SUGGEST = "belt:suggest"
EXTRACT = "belt:extract"
QUIET_TURNS = 15
"""A resource suggested at one turn is not suggested again in the same chat for this many turns
after it: suggested at turn t, it is not offered at turns t + 1 to t + 15 and may come back at
turn t + 16."""
PREVIEW_CHARS = 400
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


def quiet_items(suggested: Mapping[str, int], turn: int) -> list[str]:
    """The entries suggested too recently to be offered at ``turn`` (item → turn suggested)."""
    return [item for item, at in suggested.items() if turn - at <= QUIET_TURNS]


def suggestion(
    store: Store,
    *,
    owner: str,
    agent_id: str,
    prompt: str,
    suggested: Mapping[str, int],
    turn: int,
) -> LifecycleHookResponse | None:
    """``belt:suggest``: the owner's entries relevant to ``prompt``, as a one-turn injection.

    At most ``suggest``'s default of 3 entries; None when nothing is relevant (no injection, so
    no transcript row). Never the agent's own extractions, never an entry suggested in this chat
    within ``QUIET_TURNS``.
    """
    # Start-up: the registry (and its search index) only for an agent with a belt:suggest hook.
    from belt.records.registry import suggest  # noqa: PLC0415 - a platform run loads no registry (sqlite3)

    matches = suggest(
        store,
        owner=owner,
        prompt=prompt,
        exclude_ids=quiet_items(suggested, turn),
        exclude_origin_agent=agent_id,
    )
    if not matches:
        return None
    return LifecycleHookResponse(
        inject=ContextInjection(
            content=injection_text(owner, matches),
            ttl_turns=1,
            dedup_key=SUGGEST,
            items=[match.id for match in matches],
        )
    )


def injection_text(owner: str, matches: Sequence[Match]) -> str:
    """What a suggestion puts in front of the model."""
    lines = [f"From the {owner} registry, possibly relevant to this turn:"]
    for match in matches:
        text = " ".join(match.text.split())
        if len(text) > PREVIEW_CHARS:
            text = text[: PREVIEW_CHARS - 1] + "…"
        lines.append(f"- {match.name} ({match.kind}): {text}")
    return "\n".join(lines)


def did_work(message: Mapping[str, Any]) -> bool:
    """True for an assistant turn that did more than call ``finish``."""
    if message.get("role") != "assistant":
        return False
    said = any((c or {}).get("text") for c in message.get("content") or [])
    calls = [i.get("function", {}).get("name") for i in message.get("tool_invocations") or []]
    return said or any(name != FINISH for name in calls)


def extraction(
    *,
    event: str,
    chat: Mapping[str, Any],
    since_last_review: Sequence[Mapping[str, Any]],
    run_id: str | None,
    agent_id: str,
    owner: str,
    user_team: str,
) -> Review | None:
    """``belt:extract``: the review to do, or None.

    Only chats whose user is a member of the owning team are reviewed, and only when the agent
    has done work since the last review.
    """
    if user_team != owner or not since_last_review:
        return None
    if not any(did_work(message) for message in since_last_review):
        return None
    ancestor = str(since_last_review[-1]["id"])
    return Review(event, str(chat["id"]), run_id, ancestor, agent_id, owner)
