"""The builtin ``belt:suggest``: the owner's registry searched for the turn's prompt, answered
with a one-turn injection naming what it put in front of the model (``items``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from belt.display.text import short
from belt.wire.platform import ContextInjection, LifecycleHookResponse

if TYPE_CHECKING:
    from belt.dialects.platform.agent_loop import PlatformLoop
    from belt.engine.dispatch import HookRun

SUGGEST = "belt:suggest"
QUIET_TURNS = 15
"""Suggested at turn t, an entry is not offered again in the chat before turn t + 16."""
PREVIEW_CHARS = 400


def quiet_items(suggested: Mapping[str, int], turn: int) -> list[str]:
    """The entries suggested too recently to be offered at ``turn`` (item → turn suggested)."""
    return [item for item, at in suggested.items() if turn - at <= QUIET_TURNS]


def run(loop: PlatformLoop, hook_run: HookRun, payload: Mapping[str, object]) -> None:
    """Answer the hook: up to 3 entries for the prompt of the turn being fired (not the agent's
    own nor quiet ones) as a one-turn injection, or no answer."""
    from belt.records.registry import suggest  # noqa: PLC0415 - a platform run loads no registry (sqlite3)

    count, owner = payload["turn_count"], loop.scenario.agent.owner
    matches = suggest(
        loop.sim.store,
        owner=owner,
        prompt=loop.prompt(),
        exclude_ids=quiet_items(loop.suggested, count if isinstance(count, int) else 0),
        exclude_origin_agent=loop.sim.agent_id,
    )
    if not matches:
        hook_run.response = None
        return
    lines = [f"- {m.name} ({m.kind}): {short(m.text, PREVIEW_CHARS)}" for m in matches]
    content = "\n".join([f"From the {owner} registry, possibly relevant to this turn:", *lines])
    items = [match.id for match in matches]
    inject = ContextInjection(content=content, ttl_turns=1, dedup_key=SUGGEST, items=items)
    hook_run.response = LifecycleHookResponse(inject=inject)
