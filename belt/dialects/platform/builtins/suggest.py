"""The builtin ``belt:suggest``: the owner's registry searched for the turn's prompt, answered
with a one-turn injection naming what it put in front of the model (``items``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from belt.display.text import short
from belt.store import Store
from belt.wire.platform import ContextInjection, LifecycleHookResponse

if TYPE_CHECKING:
    from belt.dialects.platform.agent_loop import PlatformLoop
    from belt.engine.dispatch import HookRun
    from belt.records.registry import Match

SUGGEST = "belt:suggest"
QUIET_TURNS = 15
"""Suggested at turn t, an entry is not offered again in the chat before turn t + 16."""
PREVIEW_CHARS = 400


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
    """Up to 3 entries for ``prompt`` (not the agent's own nor quiet ones) as injection, or None."""
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
    lines = [
        f"- {match.name} ({match.kind}): {short(match.text, PREVIEW_CHARS)}" for match in matches
    ]
    return "\n".join([f"From the {owner} registry, possibly relevant to this turn:", *lines])


def run(loop: PlatformLoop, hook_run: HookRun, payload: Mapping[str, object]) -> None:
    """Answer the hook: a suggestion for the prompt of the turn being fired."""
    count = payload["turn_count"]
    hook_run.response = suggestion(
        loop.sim.store,
        owner=loop.scenario.agent.owner,
        agent_id=loop.sim.agent_id,
        prompt=loop.prompt(),
        suggested=loop.suggested(),
        turn=count if isinstance(count, int) else 0,
    )
