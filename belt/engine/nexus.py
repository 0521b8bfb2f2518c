"""The simulated execution loop of the Nexus dialect (spec/nexus-lifecycle-hooks.txt).

One scenario turn is one execution. Its hook selection is frozen when it starts: a new input
captures the current profile, a regeneration reuses the hooks of the run it regenerates. Before
each model request the context is checked and, when compaction actually happens, ``pre_compact``
and ``post_compact`` run around it; ``turn_start`` runs before the execution's first foreground
model request; ``stop`` runs whenever a final answer is ready, and may ask for another model round
in the same execution. Every hook is a task in the executor inbox (``belt.executor``); a failed
task puts the execution on an attention hold, which ``belt sim resume`` retries and
``belt sim stop`` ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from belt.engine.record import (
    Recorder,
    RunRecord,
    new_id,
    now_iso,
    record_agent_and_chat,
    run_event,
)
from belt.engine.scenario import (
    LoadedNexusScenario,
    ModelTurnSpec,
    NexusScenario,
    NexusTurnSpec,
    ToolCallSpec,
    estimate_tokens,
)
from belt.errors import Conflict, NotFound
from belt.executor import (
    FINISHED,
    HOOKTASK,
    TaskStatus,
    Worker,
    cancel_run_tasks,
    expire_task,
    schedule_task,
    task_key,
)
from belt.store.clock import parse_timestamp, utcnow
from belt.wire.nexus import HookTaskInput, LifecycleHooks, NexusEvent, NexusHook

if TYPE_CHECKING:
    from belt.store import Store

OUTPUT_PREVIEW_MAX_BYTES = 2048
CONTEXT_ROLES = ("user", "assistant", "tool", "compaction", "feedback")
RETIRABLE_ROLES = CONTEXT_ROLES
ATTENTION_HOLD = "attention_hold"
TERMINAL_STATES = ("completed", "failed", "canceled")

Notify = Callable[[dict[str, Any]], None]


class End(StrEnum):
    """How executing a run stopped."""

    COMPLETED = "completed"
    FAILED = "failed"
    HELD = ATTENTION_HOLD
    CANCELED = "canceled"


class Cancelled(Exception):
    """The run was stopped from outside (``belt sim stop``) while it executed."""


def frozen_hooks(profile: dict[str, Any] | None) -> dict[str, Any]:
    """A profile's lifecycle hooks in wire form, as an execution freezes them."""
    raw = (profile or {}).get("lifecycle_hooks")
    return LifecycleHooks.model_validate(raw or {}).to_wire()


def declared(hooks: dict[str, Any]) -> dict[NexusEvent, NexusHook]:
    """Frozen wire hooks as models, by event."""
    return LifecycleHooks.model_validate(hooks or {}).declared()


def utf8_size(text: str) -> int:
    """The size of ``text`` in bytes of UTF-8."""
    return len(text.encode("utf-8"))


def preview(text: str, limit: int = OUTPUT_PREVIEW_MAX_BYTES) -> str:
    """The first ``limit`` bytes of ``text``, cut on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


def create_simulation(store: Store, loaded: LoadedNexusScenario) -> dict[str, Any]:
    """Record the agent, the (empty) conversation and the simulation; no hook runs here."""
    scenario = loaded.scenario
    stamp = now_iso()
    agent_id, chat_id, sim_id = record_agent_and_chat(
        store,
        agent_id=scenario.agent.id,
        agent={
            "name": scenario.agent.name,
            "dialect": "nexus",
            "context_window": scenario.agent.context_window,
            "context_bytes": scenario.agent.context_bytes,
            "compact_at": scenario.agent.compact_at,
        },
        chat_id=scenario.chat.id,
        chat={"dialect": "nexus", "agent_data": {}},
    )
    sim: dict[str, Any] = {
        "id": sim_id,
        "dialect": "nexus",
        "source": str(Path(loaded.source).resolve()),
        "hooks_file": str(Path(loaded.hooks_file).resolve()) if loaded.hooks_file else None,
        "name": scenario.agent.name,
        "agent_id": agent_id,
        "chat_id": chat_id,
        "scenario": scenario.model_dump(mode="json", by_alias=True, exclude={"profile"}),
        "profile": loaded.profile,
        "profile_revision": 1 if loaded.profile is not None else None,
        "executions": [],
        "next_turn": 0,
        "status": "running",
        "created_at": stamp,
    }
    store.create("sim", sim_id, sim)
    return sim


@dataclass
class Execution:
    """One turn's execution: its frozen hooks, its run (if run-backed) and where it is."""

    turn_index: int
    turn: NexusTurnSpec
    kind: str
    run: RunRecord | None
    hooks: dict[NexusEvent, NexusHook]
    conversation_id: str | None
    input_message_id: str | None
    approval_mode: str | None
    state: dict[str, Any]

    @property
    def standalone(self) -> bool:
        """True for an execution outside any conversation."""
        return self.conversation_id is None

    @property
    def foreground(self) -> bool:
        """False for a parallel or background branch."""
        return self.kind != "background"


def initial_state(turn: NexusTurnSpec) -> dict[str, Any]:
    """Where a new execution starts."""
    return {
        "next": "tools" if turn.tool_only else "request",
        "requests": 0,
        "script": 0,
        "answers": 0,
        "continuations": 0,
        "compactions": 0,
        "compaction": None,
        "turn_started": False,
        "candidate": None,
        "output": None,
    }


class NexusSimulation:
    """Drives one Nexus simulation's executions, writing everything to the store as it happens."""

    def __init__(
        self,
        store: Store,
        sim: dict[str, Any],
        *,
        worker: Worker | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.store = store
        self.sim = sim
        self.scenario = NexusScenario.model_validate(sim["scenario"])
        self.recorder = Recorder(store, sim["chat_id"])
        self.worker = worker
        self.notify = notify
        self.agent_id = str(sim["agent_id"])

    # -- driving -------------------------------------------------------------------------------

    def run(self) -> list[str]:
        """Run the scenario's remaining turns; returns the ids of the runs executed."""
        executed = []
        while int(self.sim["next_turn"]) < len(self.scenario.turns):
            index = int(self.sim["next_turn"])
            turn = self.scenario.turns[index]
            changes: dict[str, Any] = {"next_turn": index + 1}
            if turn.profile is not None:
                revision = int(self.sim.get("profile_revision") or 0) + 1
                changes.update(profile=turn.profile, profile_revision=revision)
            self.update_sim(**changes)
            execution = self.begin(index, turn)
            if execution.run is not None:
                executed.append(execution.run.id)
            end = self.drive_to_end(execution)
            if end in (End.HELD, End.CANCELED):
                self.update_sim(status="attention" if end == End.HELD else "canceled")
                return executed
        self.update_sim(status="finished")
        return executed

    def resume(self, run_id: str) -> list[str]:
        """Retry the failed hook task of a run on an attention hold, then go on."""
        run = RunRecord(self.store, self.store.read("run", run_id))
        if run.data["state"] != ATTENTION_HOLD:
            raise Conflict(
                f"run {run_id} is {run.data['state']}, not on an attention hold",
                hint="only a run whose hook task failed can be resumed",
            )
        execution = self.rebuild(run)
        try:
            self.transition(execution, state="working", attention=None)
        except Cancelled:
            raise Conflict(f"run {run_id} was stopped") from None
        self.update_sim(status="running")
        if execution.foreground and not execution.standalone:
            self.recorder.update_chat(status="busy", active_run_id=run_id)
        end = self.drive_to_end(execution)
        if end in (End.HELD, End.CANCELED):
            self.update_sim(status="attention" if end == End.HELD else "canceled")
            return [run_id]
        return [run_id, *self.run()]

    def update_sim(self, **changes: Any) -> None:
        """Persist changes to the simulation record."""
        self.sim = self.store.merge("sim", self.sim["id"], changes)

    def current_profile(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The profile a new input captures, and where it came from."""
        if self.sim.get("profile") is not None:
            revision = self.sim.get("profile_revision")
            return dict(self.sim["profile"]), {"source": "scenario", "revision": revision}
        from belt.engine.profile import read_profile

        record = read_profile(self.store)
        return dict(record["configuration"]), {"source": "store", "revision": record["revision"]}

    # -- starting an execution -----------------------------------------------------------------

    def previous_reply(self) -> dict[str, Any]:
        """The latest execution that replied in the conversation (what a regeneration redoes)."""
        for entry in reversed(self.sim.get("executions") or []):
            if entry["kind"] in ("input", "mail", "regeneration"):
                return dict(entry)
        raise Conflict("there is no earlier reply to regenerate")

    def begin(self, index: int, turn: NexusTurnSpec) -> Execution:
        """Freeze the hooks, decide whether the reply is run-backed, and record the input."""
        kind = turn.kind
        regenerates = None
        if kind == "regeneration":
            previous = self.previous_reply()
            regenerates = previous["run_id"]
            hooks = previous["hooks"]
            if regenerates:
                hooks = self.store.read("run", regenerates).get("hooks") or {}
            approval_mode = previous["approval_mode"]
            origin = {**previous["profile"], "reused_from": regenerates}
            input_message_id = previous["input_message_id"]
        else:
            profile, origin = self.current_profile()
            hooks = frozen_hooks(profile)
            approval_mode = profile.get("approval_mode")
            input_message_id = None
        conversation_id = None if turn.standalone else self.recorder.chat_id
        uses_tools = turn.tool_only or bool(turn.model and turn.model[0].tool_calls)
        # Declaring hooks makes even an ordinary reply without tools run-backed.
        run = None
        state = initial_state(turn)
        if hooks or uses_tools:
            run = RunRecord.create(
                self.store,
                sim_id=self.sim["id"],
                agent_id=self.agent_id,
                chat_id=self.recorder.chat_id,
                turn_index=index,
            )
            run.update(
                chat_id=conversation_id,
                dialect="nexus",
                kind=kind,
                conversation_id=conversation_id,
                hooks=hooks,
                approval_mode=approval_mode,
                profile=origin,
                regenerates=regenerates,
                attention=None,
                execution=state,
            )
        execution = Execution(
            index,
            turn,
            kind,
            run,
            declared(hooks),
            conversation_id,
            input_message_id,
            approval_mode,
            state,
        )
        if kind == "regeneration":
            self.replace_reply(int(previous["turn"]), index)
        else:
            text = turn.mail if turn.mail is not None else turn.user
            if text is not None:
                message = self.add(
                    execution,
                    role="user",
                    content=[{"type": "text", "text": text}],
                    input="mail" if turn.mail is not None else "user",
                    tokens=estimate_tokens(text),
                    bytes=utf8_size(text),
                )
                execution.input_message_id = message["id"]
        chat_changes: dict[str, Any] = {
            "run_count": int(self.recorder.chat.get("run_count", 0)) + 1
        }
        if conversation_id is not None and execution.foreground:
            chat_changes.update(status="busy", active_run_id=run.id if run else None)
        self.recorder.update_chat(**chat_changes)
        entry = {
            "turn": index,
            "kind": kind,
            "run_id": run.id if run else None,
            "run_backed": run is not None,
            "state": "working",
            "conversation_id": conversation_id,
            "input_message_id": execution.input_message_id,
            "hooks": hooks,
            "approval_mode": approval_mode,
            "profile": origin,
        }
        self.update_sim(executions=[*(self.sim.get("executions") or []), entry])
        return execution

    def rebuild(self, run: RunRecord) -> Execution:
        """The execution of a stored run, to go on from where it stopped."""
        index = int(run.data["turn_index"])
        entry = next(e for e in self.sim["executions"] if e["turn"] == index)
        return Execution(
            index,
            self.scenario.turns[index],
            str(run.data["kind"]),
            run,
            declared(run.data.get("hooks") or {}),
            run.data.get("conversation_id"),
            entry.get("input_message_id"),
            run.data.get("approval_mode"),
            dict(run.data["execution"]),
        )

    def replace_reply(self, previous_turn: int, index: int) -> None:
        """Take the regenerated reply out of the context (it stays in the transcript)."""
        for message in self.recorder.messages:
            sim = message.get("sim") or {}
            if sim.get("execution") == previous_turn and message["role"] in (
                "assistant",
                "tool",
                "feedback",
            ):
                sim["replaced_by"] = index
                self.recorder.save_message(message)

    # -- the loop ------------------------------------------------------------------------------

    def drive_to_end(self, execution: Execution) -> End:
        """Drive an execution until it ends or holds, and record how it stopped."""
        try:
            end = self.drive(execution)
        except Cancelled:
            end = End.CANCELED
        entries = [
            {**e, "state": end.value} if e["turn"] == execution.turn_index else e
            for e in self.sim.get("executions") or []
        ]
        self.update_sim(executions=entries)
        return end

    def drive(self, execution: Execution) -> End:
        """The body of an execution: tools or model requests, and stop for each answer."""
        state = execution.state
        while True:
            self.check_cancelled(execution)
            step = state["next"]
            if step == "tools":
                self.tool_only_step(execution)
            elif step == "request":
                end = self.before_request(execution)
                if end is not None:
                    return end
                chosen = self.next_round(execution)
                if chosen is None:
                    return self.fail(execution, str(execution.turn.error))
                spec, repeated = chosen
                message = self.add_answer(execution, spec, repeated)
                state["requests"] += 1
                if spec.tool_calls:
                    self.run_tools(execution, message, spec.tool_calls)
                else:
                    state.update(
                        next="stop",
                        answers=state["answers"] + 1,
                        candidate=message["id"],
                        output=spec.say or "",
                    )
                self.save(execution)
            else:
                end = self.stop_step(execution)
                if end is not None:
                    return end

    def tool_only_step(self, execution: Execution) -> None:
        """A tool-only execution: its tools run with no model round; their output is the answer."""
        calls = execution.turn.tool_calls
        message = self.add(
            execution,
            role="assistant",
            content=[],
            tool_invocations=self.invocations(calls),
            tool_only=True,
            tokens=0,
            bytes=0,
        )
        self.run_tools(execution, message, calls)
        output = "\n".join(call.result for call in calls)
        execution.state.update(next="stop", answers=1, candidate=None, output=output)
        self.save(execution)

    def stop_step(self, execution: Execution) -> End | None:
        """Pass the candidate answer through stop: deliver it, or run another model round."""
        state = execution.state
        if NexusEvent.STOP not in execution.hooks:
            return self.deliver(execution)
        output = str(state["output"] or "")
        decision = self.hook(
            execution,
            NexusEvent.STOP,
            f"answer-{state['answers']}",
            {"output_preview": preview(output), "output_size_bytes": utf8_size(output)},
        )
        if isinstance(decision, End):
            return decision
        if decision.get("continue"):
            self.mark_candidate(execution, "continued")
            key = task_key(self.run_id(execution), NexusEvent.STOP, f"answer-{state['answers']}")
            feedback = str(decision["feedback"])
            self.add(
                execution,
                role="feedback",
                content=[{"type": "text", "text": feedback}],
                task_key=key,
                tokens=estimate_tokens(feedback),
                bytes=utf8_size(feedback),
            )
            state.update(next="request", continuations=state["continuations"] + 1)
            self.save(execution)
            return None
        self.mark_candidate(execution, "accepted")
        return self.deliver(execution)

    def before_request(self, execution: Execution) -> End | None:
        """Compaction and its hooks when needed, then turn_start before the first request."""
        state = execution.state
        if state["compaction"] is None:
            extra = self.compaction_plan(execution, mid_turn=state["requests"] > 0)
            if extra is not None:
                state["compaction"] = {
                    "n": state["compactions"] + 1,
                    "stage": "pre",
                    "extra": extra,
                }
                self.save(execution)
        compaction = state["compaction"]
        if compaction is not None:
            source = f"compaction-{compaction['n']}"
            if compaction["stage"] == "pre":
                if NexusEvent.PRE_COMPACT in execution.hooks:
                    decision = self.hook(
                        execution, NexusEvent.PRE_COMPACT, source, compaction["extra"]
                    )
                    if isinstance(decision, End):
                        return decision
                self.compact(execution)
                compaction["stage"] = "post"
                self.save(execution)
            if NexusEvent.POST_COMPACT in execution.hooks:
                decision = self.hook(execution, NexusEvent.POST_COMPACT, source, {})
                if isinstance(decision, End):
                    return decision
            state.update(compaction=None, compactions=compaction["n"])
            self.save(execution)
        if (
            state["requests"] == 0
            and execution.foreground
            and not state["turn_started"]
            and NexusEvent.TURN_START in execution.hooks
        ):
            decision = self.hook(execution, NexusEvent.TURN_START, "turn", {})
            if isinstance(decision, End):
                return decision
            state["turn_started"] = True
            self.save(execution)
        return None

    def next_round(self, execution: Execution) -> tuple[ModelTurnSpec, bool] | None:
        """The next scripted model round; once they are used up, the last answer again.

        None when the scenario scripts an error for the request after its rounds.
        """
        state = execution.state
        model = execution.turn.model
        if state["script"] < len(model):
            state["script"] += 1
            return model[state["script"] - 1], False
        if execution.turn.error is not None:
            return None
        last = model[-1]
        return ModelTurnSpec(say=last.say, tokens=last.tokens), True

    # -- hooks ---------------------------------------------------------------------------------

    def run_id(self, execution: Execution) -> str:
        """The run of an execution that has hooks (declaring hooks makes it run-backed)."""
        if execution.run is None:
            raise AssertionError("an execution with hooks always has a run")
        return execution.run.id

    def hook(
        self, execution: Execution, event: NexusEvent, source: str, extra: dict[str, Any]
    ) -> dict[str, Any] | End:
        """Run one boundary's hook task; its decision, or how the execution ends."""
        hook = execution.hooks[event]
        run_id = self.run_id(execution)
        key = task_key(run_id, event, source)
        task_input = HookTaskInput(
            event=event,
            task_key=key,
            run_public_id=run_id,
            conversation_public_id=execution.conversation_id,
            **extra,
        ).to_wire()
        task = schedule_task(
            self.store,
            key=key,
            event=event,
            hook=hook,
            task_input=task_input,
            run_id=run_id,
            sim_id=str(self.sim["id"]),
            approval_mode=execution.approval_mode,
            tool_only=execution.kind == "tool_only",
            continuations_used=int(execution.state["continuations"]),
        )
        if task["status"] not in FINISHED:
            if self.worker is not None and self.worker.serves(hook.tool):
                self.worker.serve_task(str(task["id"]))
            task = self.await_task(execution, task)
        self.record_row(execution, task)
        if task["status"] == TaskStatus.CANCELLED:
            raise Cancelled
        if task["status"] == TaskStatus.FAILED:
            return self.hold(execution, task)
        decision: dict[str, Any] = task["decision"]
        return decision

    def await_task(self, execution: Execution, task: dict[str, Any]) -> dict[str, Any]:
        """Wait for a worker to finish the task, up to its deadline."""
        identity = str(task["id"])
        deadline = parse_timestamp(str(task["deadline"]))
        told = False
        delay = 0.002
        while True:
            current = self.store.read(HOOKTASK, identity)
            if current["status"] in FINISHED:
                return current
            self.check_cancelled(execution)
            remaining = (deadline - utcnow()).total_seconds()
            if remaining <= 0:
                expire_task(self.store, identity)
                continue
            if not told and self.notify is not None:
                self.notify({"kind": "waiting", **current})
                told = True
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.05)

    def record_row(self, execution: Execution, task: dict[str, Any]) -> None:
        """One transcript row per finished attempt of a hook task."""
        for message in self.recorder.messages:
            for content in message.get("content") or []:
                hook = (content.get("event") or {}).get("hook") or {}
                if hook.get("task_id") == task["id"] and hook.get("attempt") == task["attempt"]:
                    return
        decision = task.get("decision") or {}
        error = task.get("error") or {}
        row: dict[str, Any] = {
            "event": task["event"],
            "handler_type": "executor",
            "handler": task["tool"],
            "status": task["status"],
            "task_key": task["task_key"],
            "task_id": task["id"],
            "attempt": task["attempt"],
            "duration_ms": task.get("duration_ms") or 0,
        }
        if task["status"] == TaskStatus.COMPLETED:
            row["decision"] = "continue" if decision.get("continue") else "acknowledge"
            if decision.get("feedback"):
                row["reason"] = decision["feedback"]
        if error:
            row["failure"] = error.get("code")
            row["error"] = error.get("message")
        self.add(
            execution,
            role="event",
            content=[
                {
                    "type": "event",
                    "text": f"hook {task['event']}: {task['tool']}",
                    "event": {"type": "hook", "hook": row},
                }
            ],
        )

    # -- ending --------------------------------------------------------------------------------

    def hold(self, execution: Execution, task: dict[str, Any]) -> End:
        """A failed hook task: the execution waits on an attention hold, never ends silently."""
        error = task.get("error") or {}
        attention = {
            "reason": error.get("code"),
            "event": task["event"],
            "tool": task["tool"],
            "task_id": task["id"],
            "task_key": task["task_key"],
            "attempt": task["attempt"],
            "detail": error.get("message"),
            "since": now_iso(),
        }
        self.transition(
            execution, state=ATTENTION_HOLD, attention=attention, execution=execution.state
        )
        text = (
            f"attention hold: {task['event']} hook task {task['task_key']} failed "
            f"({attention['reason']}): {attention['detail']}"
        )
        self.add(
            execution,
            role="event",
            content=[
                {
                    "type": "event",
                    "text": text,
                    "event": {"type": "attention", "attention": attention},
                }
            ],
        )
        if not execution.standalone and execution.foreground:
            self.recorder.update_chat(status="waiting")
        return End.HELD

    def deliver(self, execution: Execution) -> End:
        """The answer is delivered: the execution completes."""
        self.transition(execution, state="completed", execution=execution.state)
        self.release_chat(execution)
        return End.COMPLETED

    def fail(self, execution: Execution, error: str) -> End:
        """The model request failed: the execution fails (it never reaches stop)."""
        run_id = execution.run.id if execution.run else None
        self.add(
            execution,
            role="event",
            content=[
                run_event(
                    run_id,
                    kind="run_failed",
                    state="failed",
                    reason=error,
                    text=f"run failed: {error}",
                )
            ],
        )
        self.transition(execution, state="failed", error=error, execution=execution.state)
        self.release_chat(execution)
        return End.FAILED

    def release_chat(self, execution: Execution) -> None:
        """The conversation is idle again once its foreground execution ends."""
        if execution.standalone or not execution.foreground:
            return
        self.recorder.update_chat(status="idle", active_run_id=None)

    def transition(self, target: Execution, /, **changes: Any) -> None:
        """Change the run, unless it was stopped meanwhile (then Cancelled)."""
        if target.run is None:
            return
        changes["updated_at"] = now_iso()

        def apply(run: dict[str, Any]) -> dict[str, Any]:
            if run["state"] == "canceled":
                raise Cancelled
            run.update(changes)
            return run

        target.run.data = self.store.update("run", target.run.id, apply)

    def save(self, execution: Execution) -> None:
        """Persist where the execution is, so a retry goes on from there."""
        self.transition(execution, execution=execution.state)

    def check_cancelled(self, execution: Execution) -> None:
        """Raise Cancelled when ``belt sim stop`` stopped the run from another process."""
        if execution.run is None:
            return
        current = self.store.read("run", execution.run.id)
        if current["state"] == "canceled":
            execution.run.data = current
            raise Cancelled

    # -- messages, tools and context -----------------------------------------------------------

    def add(
        self,
        execution: Execution,
        *,
        role: str,
        content: list[dict[str, Any]],
        tool_invocations: list[dict[str, Any]] | None = None,
        message_id: str | None = None,
        **sim: Any,
    ) -> dict[str, Any]:
        """Record a message of this execution."""
        fields: dict[str, Any] = {}
        if tool_invocations is not None:
            fields["tool_invocations"] = tool_invocations
        sim = {"execution": execution.turn_index, "kind": execution.kind, **sim}
        if execution.standalone:
            sim["standalone"] = True
        return self.recorder.add_message(
            role=role,
            run_id=execution.run.id if execution.run else None,
            content=content,
            sim=sim,
            message_id=message_id,
            **fields,
        )

    def invocations(self, calls: list[ToolCallSpec], message_id: str = "") -> list[dict[str, Any]]:
        """Pending ToolInvocationDTOs for ``calls``."""
        return [
            {
                "id": new_id("ti"),
                "chat_message_id": message_id or None,
                "tool_invocation_id": new_id("call"),
                "function": {"name": call.name, "arguments": call.arguments},
                "status": "pending",
                "result": None,
            }
            for call in calls
        ]

    def add_answer(
        self, execution: Execution, spec: ModelTurnSpec, repeated: bool
    ) -> dict[str, Any]:
        """The model's output for one request."""
        tokens, size = self.context(execution)
        message_id = new_id("msg")
        say = spec.say or ""
        own_tokens = spec.tokens if spec.tokens is not None else estimate_tokens(say)
        extra: dict[str, Any] = {"repeated": True} if repeated else {}
        return self.add(
            execution,
            role="assistant",
            message_id=message_id,
            content=[{"type": "text", "text": say}] if say else [],
            tool_invocations=self.invocations(spec.tool_calls, message_id),
            request=execution.state["requests"] + 1,
            tokens=own_tokens,
            bytes=utf8_size(say),
            context_tokens=tokens + own_tokens,
            context_bytes=size + utf8_size(say),
            **extra,
        )

    def run_tools(
        self, execution: Execution, message: dict[str, Any], calls: list[ToolCallSpec]
    ) -> None:
        """Run the tools of a message; each result is a tool message."""
        for invocation, call in zip(message["tool_invocations"], calls, strict=True):
            self.check_cancelled(execution)
            invocation["chat_message_id"] = message["id"]
            invocation["status"] = call.status
            invocation["result"] = call.result
            self.recorder.save_message(message)
            self.add(
                execution,
                role="tool",
                content=[{"type": "text", "text": call.result}],
                tool_call_id=invocation["tool_invocation_id"],
                tokens=estimate_tokens(call.result),
                bytes=utf8_size(call.result),
            )

    def mark_candidate(self, execution: Execution, how: str) -> None:
        """Record what stop did with the candidate answer."""
        candidate = execution.state.get("candidate")
        for message in self.recorder.messages:
            if message["id"] == candidate:
                message["sim"]["stop"] = how
                self.recorder.save_message(message)

    def in_context(self, message: dict[str, Any], execution: Execution) -> bool:
        """True when the message is part of what the execution's next request sees."""
        sim = message.get("sim") or {}
        if message["role"] not in CONTEXT_ROLES or sim.get("retired") or "replaced_by" in sim:
            return False
        if execution.standalone:
            return bool(sim.get("execution") == execution.turn_index)
        return not sim.get("standalone")

    def context(self, execution: Execution) -> tuple[int, int]:
        """The size of the context the next request sees: (tokens, bytes)."""
        tokens = size = 0
        for message in self.recorder.messages:
            if self.in_context(message, execution):
                tokens += int(message["sim"].get("tokens", 0))
                size += int(message["sim"].get("bytes", 0))
        return tokens, size

    def retirable(self, execution: Execution) -> list[dict[str, Any]]:
        """What a compaction would retire: the context but the execution's input."""
        return [
            m
            for m in self.recorder.messages
            if self.in_context(m, execution) and m["id"] != execution.input_message_id
        ]

    def compaction_plan(self, execution: Execution, *, mid_turn: bool) -> dict[str, Any] | None:
        """The pre_compact fields when a compaction will actually happen, else None."""
        agent = self.scenario.agent
        tokens, size = self.context(execution)
        token_limit = int(agent.context_window * agent.compact_at)
        byte_limit = int(agent.context_bytes * agent.compact_at) if agent.context_bytes else None
        over_tokens = tokens > token_limit
        over_bytes = byte_limit is not None and size > byte_limit
        if not (over_tokens or over_bytes) or not self.retirable(execution):
            return None
        if not mid_turn:
            return {}
        extra: dict[str, Any] = {
            "compaction_trigger": "token_limit" if over_tokens else "byte_limit",
            "overshoot_bytes": max(0, size - byte_limit) if byte_limit is not None else 0,
        }
        if over_tokens:
            extra["overshoot_tokens"] = tokens - token_limit
        return extra

    def compact(self, execution: Execution) -> None:
        """Retire the context but the input, and put a compaction marker in its place."""
        retire = self.retirable(execution)
        if not retire:
            return
        tokens = size = 0
        for message in retire:
            message["sim"]["retired"] = True
            tokens += int(message["sim"].get("tokens", 0))
            size += int(message["sim"].get("bytes", 0))
            self.recorder.save_message(message)
        summary = f"Summary of {len(retire)} earlier messages ({tokens} tokens, {size} bytes)."
        self.add(
            execution,
            role="compaction",
            content=[{"type": "text", "text": summary}],
            compaction_meta={"compacted_up_to_order": max(m["order"] for m in retire)},
            tokens=estimate_tokens(summary),
            bytes=utf8_size(summary),
            retired_tokens=tokens,
            retired_bytes=size,
        )


def start(
    store: Store,
    loaded: LoadedNexusScenario,
    *,
    worker: Worker | None = None,
    notify: Notify | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Create and run a Nexus simulation; returns the simulation record and the runs executed."""
    store = store.without_fsync()
    sim = create_simulation(store, loaded)
    simulation = NexusSimulation(store, sim, worker=worker, notify=notify)
    runs = simulation.run()
    return simulation.sim, runs


def resume(
    store: Store,
    run_id: str,
    *,
    worker: Worker | None = None,
    notify: Notify | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Retry the failed hook task of a run on an attention hold, and go on."""
    store = store.without_fsync()
    run = store.get("run", run_id)
    if run is None:
        raise NotFound(f"no run {run_id}", hint="list simulated runs with `belt sim list`")
    simulation = NexusSimulation(
        store, store.read("sim", run["sim_id"]), worker=worker, notify=notify
    )
    runs = simulation.resume(run_id)
    return simulation.sim, runs


def stop_run(store: Store, run_id: str, *, force: bool = False) -> dict[str, Any]:
    """End a Nexus run without stop: its pending hook tasks are cancelled; it never resumes."""
    run = store.read("run", run_id)
    state = run["state"]
    if state in TERMINAL_STATES:
        raise Conflict(f"run {run_id} is already {state}")
    if state == "working" and not force:
        raise Conflict(
            f"run {run_id} is working",
            hint="a simulation process may be running it; `belt sim stop --force` bypasses stop "
            "and cancels its pending hook tasks",
        )
    how = "force-stopped" if force else "stopped"

    # The run is cancelled before its tasks, so a simulation waiting on one of them stops
    # without ever applying a late result.
    run = store.merge(
        "run", run_id, {"state": "canceled", "error": f"{how} by user", "updated_at": now_iso()}
    )
    cancelled = cancel_run_tasks(store, run_id, f"the run was {how} by the user")
    keys = [t["task_key"] for t in cancelled]

    run = store.merge("run", run_id, {"stopped": {"forced": force, "cancelled_tasks": keys}})
    text = f"run {how} by user; stop bypassed"
    if cancelled:
        text += f"; cancelled {len(cancelled)} pending hook task(s): {', '.join(keys)}"
    chat_id = str(store.read("sim", run["sim_id"])["chat_id"])
    recorder = Recorder(store, chat_id)
    recorder.add_message(
        role="event",
        run_id=run_id,
        content=[
            run_event(
                run_id, kind="run_ended", state="canceled", reason=f"{how} by user", text=text
            )
        ],
        sim={"execution": run.get("turn_index"), "kind": run.get("kind")},
    )
    if recorder.chat.get("active_run_id") == run_id:
        recorder.update_chat(status="idle", active_run_id=None)

    def mark(sim: dict[str, Any]) -> dict[str, Any]:
        sim["status"] = "canceled"
        for entry in sim.get("executions") or []:
            if entry.get("run_id") == run_id:
                entry["state"] = "canceled"
        return sim

    store.update("sim", str(run["sim_id"]), mark)
    return run
