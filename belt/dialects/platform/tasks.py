"""Task agents: the chat a task hook starts (its first message the payload), run as a child
simulation as the scenario scripts the agent (``[agents."ns/name"]``; none scripted: it
acknowledges)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from belt.dialects.platform.children import ChildOrigin, unfinished
from belt.engine.scenario import AgentScript, ModelTurnSpec, StoredTurn
from belt.records.messages import MESSAGES
from belt.wire.enums import HookHandlerType

if TYPE_CHECKING:
    from belt.dialects.platform.agent_loop import PlatformLoop
    from belt.engine.dispatch import HookRun

ACKNOWLEDGEMENT = "Acknowledged: the hook payload is recorded."
"""What an agent the scenario names without a script answers to a task."""
TASK = "task"


def task_turn(script: AgentScript, payload: Mapping[str, object]) -> StoredTurn:
    """The one turn of a task chat: the payload in, the agent's script out."""
    no_script = not script.model and script.error is None
    model = [ModelTurnSpec(say=ACKNOWLEDGEMENT)] if no_script else script.model
    return {
        "user": json.dumps(payload, ensure_ascii=False),
        "model": [m.model_dump(mode="json", by_alias=True) for m in model],
        "error": script.error,
    }


def start_task(loop: PlatformLoop, hook_run: HookRun, payload: Mapping[str, object]) -> None:
    """A task hook delivered its payload: run the task's chat (an unknown agent fails it)."""
    if (chat_id := hook_run.task_chat_id) is None:
        return
    agent, store = str(hook_run.hook.handler), loop.sim.store
    if (script := loop.scenario.script_for(agent)) is None:
        hook_run.error = (
            f"unknown agent {agent!r}: the scenario scripts no such agent "
            f'(add [agents."{agent.rsplit("@", 1)[0]}"])'
        )
        return
    first = store.members(MESSAGES, chat_id)[0]
    run_id = payload.get("run_id")
    sim = loop.tasks.record(
        kind=TASK,
        chat_id=chat_id,
        name=agent,
        agent_id=agent,
        turn=task_turn(script, payload),
        link={"run_id": run_id, "hook_event": payload.get("event")},
        first_input=first,
    )
    parent_run = run_id if isinstance(run_id, str) else None
    origin = ChildOrigin(parent_run, str(payload.get("event")), agent, HookHandlerType.TASK.value)
    loop.tasks.start(sim, describe=origin, after=partial(unfinished, what="task"))
