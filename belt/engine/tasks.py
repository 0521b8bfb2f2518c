"""Task agents: the chats that task hooks start, run as chats of the simulation.

A task hook's handler creates a chat of the agent it names, whose first message is the hook
payload (``belt.handlers.task``); the engine then runs that chat: the scenario scripts the agent
(``[agents."ns/name"]``, its own model turns and tool calls; an agent without a script
acknowledges the task), and its run is a real run of a child simulation, with its own record,
linked to the parent chat and run. The loop that fired the hook does not wait for the task's run;
the simulation waits for every task run it started before it ends.

A task whose agent the scenario does not know, or whose run fails, leaves an error row on the
parent chat: the first as the hook's own row, the second when the simulation ends (in the order
the tasks started, so the transcript stays the same from run to run).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from belt.effects import chat_hook_event, transcript_content
from belt.engine.scenario import AgentScript, ModelTurnSpec
from belt.engine.simulation import SCENARIO, SIM, Options, SimStatus, Simulation
from belt.errors import BeltError
from belt.records.ids import new_id, now_iso
from belt.records.runs import RUN, sim_runs
from belt.wire.enums import AgentRunState, HookHandlerType

if TYPE_CHECKING:
    from belt.engine.simulation import Dialect
    from belt.store import Store

ACKNOWLEDGEMENT = "Acknowledged: the hook payload is recorded."
"""What an agent the scenario names without a script answers to a task."""
TASK_WORKERS = 4
SIM_TASKS = "sim-tasks"
"""Index of the child simulations (task chats) a simulation started."""


@dataclass
class TaskFailure:
    """A task run that failed, to be recorded on the parent chat."""

    order: int
    parent_run_id: str | None
    hook_event: str
    agent: str
    error: str


def record_task_simulation(
    store: Store,
    *,
    parent: dict[str, Any],
    chat: dict[str, Any],
    agent: str,
    script: AgentScript,
    payload: dict[str, Any],
    input_message_id: str,
) -> dict[str, Any]:
    """The child simulation that runs a task chat: one turn, the payload as its input."""
    no_script = not script.model and script.error is None
    model = [ModelTurnSpec(say=ACKNOWLEDGEMENT)] if no_script else script.model
    turn = {
        "user": json.dumps(payload, ensure_ascii=False),
        "model": [m.model_dump(mode="json", by_alias=True) for m in model],
        "error": script.error,
    }
    sim_id = new_id("sim")
    store.create(
        SCENARIO,
        sim_id,
        {"dialect": "platform", "agent": {"name": agent}, "chat": {}, "turns": [turn]},
    )
    sim = {
        "id": sim_id,
        "dialect": "platform",
        "source": parent.get("source"),
        "hooks_file": None,
        "name": agent,
        "agent_id": agent,
        "chat_id": chat["id"],
        "next_turn": 0,
        "status": SimStatus.RUNNING.value,
        "created_at": now_iso(),
        "hooks": [],
        "fail_closed": False,
        "first_input": input_message_id,
        "parent": {
            "sim_id": parent["id"],
            "chat_id": parent["chat_id"],
            "run_id": payload.get("run_id"),
            "hook_event": payload.get("event"),
        },
    }
    store.create(SIM, sim_id, sim)
    store.write_private("hooks", sim_id, {"hooks": []})
    store.link(SIM_TASKS, str(parent["id"]), sim_id)
    return sim


class TaskRunner:
    """Runs the task chats of one simulation in the background and collects their failures."""

    def __init__(self, simulation: Simulation, dialect: type[Dialect]) -> None:
        self.simulation = simulation
        self.dialect = dialect
        self.failures: list[TaskFailure] = []
        self._lock = threading.Lock()
        self._count = 0
        self._pool: ThreadPoolExecutor | None = None

    def start(
        self, *, agent: str, chat_id: str, payload: dict[str, Any], script: AgentScript | None
    ) -> str | None:
        """Start the run of a task chat; an error (the agent is unknown) when it cannot."""
        if script is None:
            return (
                f"unknown agent {agent!r}: the scenario scripts no such agent "
                f'(add [agents."{agent.rsplit("@", 1)[0]}"])'
            )
        store = self.simulation.store
        chat = store.read("chat", chat_id)
        first = store.members("chat-messages", chat_id)[0]
        sim = record_task_simulation(
            store,
            parent=self.simulation.sim,
            chat=chat,
            agent=agent,
            script=script,
            payload=payload,
            input_message_id=first,
        )
        with self._lock:
            order = self._count
            self._count += 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(TASK_WORKERS, thread_name_prefix="belt-task-run")
        self._pool.submit(self._run, order, sim, payload, agent)
        return None

    def _run(self, order: int, sim: dict[str, Any], payload: dict[str, Any], agent: str) -> None:
        error: str | None = None
        try:
            child = Simulation(self.simulation.store, sim, self.dialect, Options())
            for run_id in child.run():
                run = self.simulation.store.read(RUN, run_id)
                if run["state"] != AgentRunState.COMPLETED:
                    error = f"task run {run_id} ended {run['state']}: {run.get('error')}"
        except BeltError as exc:
            error = f"task run could not go on: {exc.message}"
        except Exception as exc:  # a worker thread must not lose its failure
            error = f"task run crashed: {type(exc).__name__}: {exc}"
        if error is not None:
            with self._lock:
                self.failures.append(
                    TaskFailure(
                        order, payload.get("run_id"), str(payload.get("event")), agent, error
                    )
                )

    def close(self) -> list[TaskFailure]:
        """Wait for every task run started; their failures, in the order the tasks started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            failures, self.failures = sorted(self.failures, key=lambda f: f.order), []
        return failures


def failure_row(failure: TaskFailure) -> dict[str, Any]:
    """The error row a failed task run leaves on its parent chat."""
    return transcript_content(
        chat_hook_event(
            event=failure.hook_event,
            handler_type=HookHandlerType.TASK,
            handler=failure.agent,
            error=failure.error,
        )
    )


def task_chats(store: Store, sim: dict[str, Any]) -> list[dict[str, Any]]:
    """The task chats a simulation started, each with its runs: what a report shows."""
    tasks = []
    for sim_id in store.members(SIM_TASKS, str(sim["id"])):
        child = store.read(SIM, sim_id)
        runs = sim_runs(store, sim_id)
        tasks.append(
            {
                "sim_id": sim_id,
                "chat_id": child["chat_id"],
                "agent": child["name"],
                "parent": child["parent"],
                "status": child["status"],
                "runs": [
                    {key: run.get(key) for key in ("id", "state", "error", "created_at")}
                    for run in runs
                ],
            }
        )
    return tasks
