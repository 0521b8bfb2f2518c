"""Review branches: what ``belt:extract`` asks for, run off the loop in a copy of the chat up to
the reviewed message, hooks off, asked as the agent. With no model offline, the n-th review
returns the scenario's n-th ``[[reviews]]`` candidates, saved to the owner's registry."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from belt.dialects.platform.builtins.extract import EXTRACT, Review
from belt.dialects.platform.children import ChildOrigin, unfinished
from belt.records.chats import create_chat, set_outputs
from belt.records.messages import Recorder
from belt.records.runs import Run
from belt.records.sims import set_review_outcomes
from belt.wire.enums import HookHandlerType

if TYPE_CHECKING:
    from belt.dialects.platform.agent_loop import PlatformLoop

REVIEW = "review"
QUESTION = (
    "Review the conversation above for reusable knowledge: rules, preferences, gotchas, patterns "
    'and references worth keeping. Answer with JSON: {"candidates": [{"name", "kind", "tags", '
    '"text"}]}.'
)
COPIED_ROLES = ("user", "assistant", "tool", "injection", "compaction")
"""What a review branch copies of its chat: what the model saw (never event rows)."""


def review_request(system_prompt: str | None) -> dict[str, object]:
    """What a review is asked with: the agent's system prompt, no tools, a candidates schema."""
    # Start-up: the registry (and its search index) only for a run that starts a review.
    from belt.records.registry import CANDIDATE_SCHEMA  # noqa: PLC0415 - a platform run loads no registry (sqlite3)

    schema = {
        "type": "object",
        "properties": {"candidates": {"type": "array", "items": CANDIDATE_SCHEMA}},
        "required": ["candidates"],
        "additionalProperties": False,
    }
    return {"system_prompt": system_prompt, "tools": [], "answer_schema": schema}


def start_review(loop: PlatformLoop, review: Review) -> None:
    """Start the review branch ``belt:extract`` asked for, off the loop, asked as the agent."""
    store, recorder = loop.sim.store, loop.sim.recorder
    ancestor = int(recorder.message(review.ancestor)["order"])
    number = int(recorder.chat.get("review_count", 0)) + 1
    recorder.update_chat(last_review_order=ancestor, review_count=number)
    scripts, system_prompt = loop.scenario.reviews, loop.scenario.agent.system_prompt
    script = scripts[number - 1] if number <= len(scripts) else None
    graph = {"parent": review.chat_id, "ancestor": review.ancestor, "outputs": []}
    branch = create_chat(
        store, agent_id=review.agent_id, parent_id=review.chat_id, disable_hooks=True, graph=graph
    )
    branch_id = str(branch["id"])
    candidates = script.candidates if script is not None else []
    unscripted = f"no review scripted for review {number} ([[reviews]] has fewer entries)"
    note = None if script is not None else f"{unscripted}: the review returns no candidates"
    record = {"number": number, "chat_id": review.chat_id, "ancestor": review.ancestor}
    record |= {"owner": review.owner, "candidates": candidates, "outcomes": [], "note": note}
    record["request"] = review_request(system_prompt)
    sim = loop.reviews.record(
        kind=REVIEW,
        chat_id=branch_id,
        name=EXTRACT,
        agent_id=review.agent_id,
        turn={"user": QUESTION, "model": [{"say": json.dumps({"candidates": candidates})}]},
        link={"run_id": review.run_id, "hook_event": review.event},
        review=record,
    )

    def save_outcomes(runs: list[Run]) -> str | None:
        """Save the candidates and their outcomes once the branch ended; why not, if it failed."""
        if (reason := unfinished(runs, what="review")) is not None:
            return reason
        # Start-up: the registry only once a review has candidates to save.
        from belt.records.registry import Origin, check_candidate, save_candidate  # noqa: PLC0415 - a platform run loads no registry (sqlite3)

        origin = Origin.extraction(agent=review.agent_id, chat=review.chat_id, branch=branch_id)
        where = f"reviews[{number - 1}].candidates"
        checked = (check_candidate(raw, where=f"{where}[{p}]") for p, raw in enumerate(candidates))
        saved = [
            save_candidate(store, owner=review.owner, candidate=c, origin=origin) for c in checked
        ]
        set_review_outcomes(store, str(sim["id"]), [outcome.to_json() for outcome in saved])
        set_outputs(store, branch_id, [o.id for o in saved if o.action != "skipped"])
        return None

    history = recorder.messages[: ancestor + 1]

    def copy_history() -> None:
        """Give the branch the system prompt it is asked with, then the messages it sees."""
        copied = Recorder(store, branch_id)
        if system_prompt is not None:
            text: list[dict[str, object]] = [{"type": "text", "text": system_prompt}]
            copied.add_message(
                role="system", run_id=None, content=text, sim={"system_prompt": True}
            )
        for message in (m for m in history if m["role"] in COPIED_ROLES):
            fields: dict[str, Any] = {"status": message.get("status", "ready")}
            fields |= {"sim": {"copied_from": message["id"]}}
            fields |= {k: message[k] for k in ("tool_invocations", "tool_call_id") if k in message}
            role, content = message["role"], message["content"]
            copied.add_message(role=role, run_id=None, content=content, **fields)

    started_by = ChildOrigin(review.run_id, review.event, EXTRACT, HookHandlerType.BUILTIN.value)
    loop.reviews.start(sim, describe=started_by, before=copy_history, after=save_outcomes)
