"""The Nexus dialect of the simulation driver (spec/nexus-lifecycle-hooks.txt).

One scenario turn is one execution, its hooks frozen when it starts; each hook is a task in the
executor inbox, and a failed one holds the execution for ``belt sim resume``. Its steps
(``execution["next"]``) are ``tools``, ``request`` and ``stop``; a retried step schedules the
same hook task again, so no boundary runs twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, cast

from belt.dialects.nexus.scenarios import LoadedNexusScenario, NexusScenario, NexusTurnSpec
from belt.engine.ledger import CHAT_SCOPE
from belt.engine.scenario import ModelTurnSpec, ToolCallSpec, utf8_size
from belt.engine.simulation import (
    GATE_POLL,
    End,
    Execution,
    SimStatus,
    record_simulation,
    refuse_pending,
)
from belt.errors import Conflict, UsageError
from belt.executor.inbox import (
    FINISHED,
    TaskStatus,
    abandoned,
    cancel_run_tasks,
    expire_task,
    release_abandoned,
    run_tasks,
    schedule_task,
    settle_approval,
    task_key,
    time_left,
)
from belt.outgoing import tracing
from belt.records.executions import (
    ExecutionEntry,
    execution_recorded,
    read_execution,
    record_execution,
    set_execution_state,
    sim_executions,
)
from belt.records.hooktasks import HookTask, read_task
from belt.records.ids import new_id, now_iso
from belt.records.interrupts import read_record, sweep
from belt.records.messages import Message
from belt.records.profile import read_profile
from belt.records.runs import Cancelled, Run, RunRecord, read_run
from belt.records.sims import Sim
from belt.store import clock
from belt.store.clock import parse_timestamp
from belt.wire.enums import ATTENTION_HOLD, AgentRunState, ChatStatus, ToolInvocationStatus
from belt.wire.nexus import HookTaskInput, LifecycleHooks, NexusEvent, NexusHook

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from belt.dialects.simreport import ReportExtras
    from belt.engine.dispatch import Route
    from belt.engine.simulation import Simulation
    from belt.store import Store

OUTPUT_PREVIEW_MAX_BYTES = 2048


def frozen_hooks(profile: dict[str, Any] | None) -> dict[str, Any]:
    """A profile's lifecycle hooks in wire form, as an execution freezes them."""
    raw = (profile or {}).get("lifecycle_hooks")
    return LifecycleHooks.model_validate(raw or {}).to_wire()


def trace_task(span: Any, event: str, task: HookTask) -> None:
    """A hook task's span (docs/tracing.md): never its input nor feedback text; errors bounded."""
    decision, error = task.get("decision") or {}, task.get("error") or {}
    feedback = decision.get("feedback")
    failed = task["status"] == TaskStatus.FAILED
    answered = "continue" if decision.get("continue") else "acknowledge"
    tracing.set_attributes(
        span,
        {
            "belt.hook.event": event,
            "belt.hook.handler_type": "executor",
            "belt.hook.tool": str(task["tool"]),
            "belt.hook.decision": answered if task["status"] == TaskStatus.COMPLETED else None,
            "belt.hook.status": str(task["status"]),
            "belt.hook.attempt": task.get("attempt"),
            "belt.hook.injection_size": len(str(feedback).encode()) if feedback else None,
            "belt.hook.error": tracing.bounded(error.get("message") or error.get("code")),
            "belt.hook.failure": error.get("code"),
            "belt.hook.counted_as": "attention_hold" if failed else None,
            "belt.dialect": "nexus",
        },
        "hook task failed" if failed else None,
    )


def initial_state(turn: NexusTurnSpec) -> dict[str, Any]:
    """Where a new execution starts."""
    return {
        "next": "tools" if turn.tool_only else "request",
        **dict.fromkeys(("requests", "script", "answers", "continuations", "compactions"), 0),
        "compaction": None,
        "turn_started": False,
        **dict.fromkeys(("candidate", "output", "input")),
    }


def input_text(turn: NexusTurnSpec) -> str | None:
    """The text a turn sends: its mail, else its user message (None for neither)."""
    return turn.mail if turn.mail is not None else turn.user


@dataclass
class NexusExecution(Execution):
    """An execution with what the Nexus loop needs: its kind, frozen hooks and approval mode."""

    turn: NexusTurnSpec = field(default_factory=lambda: NexusTurnSpec(user=""))
    kind: str = "input"
    hooks: dict[NexusEvent, NexusHook] = field(default_factory=dict)
    conversation_id: str | None = None
    approval_mode: str | None = None


class NexusLoop:
    """The Nexus dialect: what each step of an execution does."""

    name: ClassVar[str] = "nexus"
    held_state: ClassVar[str] = ATTENTION_HOLD
    held_status: ClassVar[SimStatus] = SimStatus.ATTENTION
    waits_for_gates: ClassVar[bool] = False
    stop_hint: ClassVar[str] = (
        "a simulation process may be running it; `belt sim stop --force` bypasses stop "
        "and cancels its pending hook tasks"
    )

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.scenario = sim.scenario_as(NexusScenario)

    @classmethod
    def check_options(cls, *, executors: bool, fail_closed: bool, routes: bool = False) -> None:
        """Refuse --fail-closed (a failed hook always holds) and --route (hooks are executors)."""
        if fail_closed:
            raise UsageError(
                "--fail-closed is for platform scenarios; a failed Nexus hook always puts the "
                "execution on an attention hold"
            )
        if routes:
            raise UsageError(
                "--route reroutes webhooks; a Nexus scenario's hooks are executor tools",
                hint="serve them with --executor NAME=TARGET, or [executors] in the scenario",
            )

    @classmethod
    def create(
        cls,
        store: Store,
        loaded: LoadedNexusScenario,
        *,
        fail_closed: bool = False,
        routes: Sequence[Route] = (),
    ) -> Sim:
        """Record a new simulation of a Nexus scenario; no hook runs here."""
        return record_simulation(
            store,
            dialect=cls.name,
            loaded=loaded,
            agent={"dialect": cls.name, "context_bytes": loaded.scenario.agent.context_bytes},
            scenario=loaded.scenario.model_dump(mode="json", by_alias=True, exclude={"profile"}),
            profile=loaded.profile,
            profile_revision=1 if loaded.profile is not None else None,
            hooks_from=loaded.hooks_from,
            last_reply=None,
        )

    # -- the driver's protocol ---------------------------------------------------------------

    def begin(self, index: int) -> NexusExecution:
        """Freeze the hooks, decide whether the reply is run-backed, and record the input."""
        turn = self.scenario.turns[index]
        if turn.profile is not None:
            revision = int(self.sim.sim.get("profile_revision") or 0) + 1
            # A turn's profile replaces the whole declaration, rho's hooks included.
            self.sim.update_sim(profile=turn.profile, profile_revision=revision, hooks_from=None)
        regenerates = None
        state = initial_state(turn)
        # The input's id is kept with the run: one killed before writing it does so on resume.
        if turn.kind == "regeneration":
            previous = self.previous_reply()
            regenerates = previous["run_id"]
            hooks = previous["hooks"]
            if regenerates:
                hooks = read_run(self.sim.store, regenerates).get("hooks") or {}
            approval_mode = previous["approval_mode"]
            origin = {**previous["profile"], "reused_from": regenerates}
            state["input"] = previous["input_message_id"]
        else:
            profile, origin = self.current_profile()
            hooks = frozen_hooks(profile)
            approval_mode = profile.get("approval_mode")
            if input_text(turn) is not None:
                state["input"] = new_id("msg")
        conversation_id = None if turn.standalone else self.sim.recorder.chat_id
        fields: dict[str, Any] = {"kind": turn.kind, "conversation_id": conversation_id}
        fields |= {"hooks": hooks, "approval_mode": approval_mode}
        fields |= {"profile": origin, "regenerates": regenerates, "attention": None}
        run = None
        # Declaring hooks makes even an ordinary reply without tools run-backed.
        if hooks or turn.tool_only or (turn.model and turn.model[0].tool_calls):
            run = self.sim.steps.create_run(
                index, state, standalone=conversation_id is None, dialect=self.name, **fields
            )
            state = run.execution
        execution = self.execution(index, run, state, fields)
        self.enter(execution, fields)
        return execution

    def enter(self, execution: NexusExecution, fields: Mapping[str, Any]) -> None:
        """Record that an execution began: its input (or the redone reply leaves), its entry."""
        index = execution.turn_index
        if execution.kind == "regeneration":
            self.replace_reply(int(self.previous_reply()["turn"]), index)
        else:
            self.record_input(execution)
        recorder = self.sim.recorder
        recorder.update_chat(run_count=int(recorder.chat.get("run_count", 0)) + 1)
        self.sim.steps.claim_chat(execution)
        record_execution(
            self.sim.store,
            str(self.sim.sim["id"]),
            {
                "turn": index,
                "kind": execution.kind,
                "run_id": execution.run_id,
                "run_backed": execution.run is not None,
                "state": AgentRunState.WORKING.value,
                "conversation_id": execution.conversation_id,
                "input_message_id": execution.input_message_id,
                "hooks": fields.get("hooks") or {},
                "approval_mode": execution.approval_mode,
                "profile": fields.get("profile") or {},
            },
        )
        if execution.turn.replies:
            self.sim.update_sim(last_reply=index)

    def step(self, execution: Execution) -> End | None:
        """Take the execution's next step."""
        assert isinstance(execution, NexusExecution)
        steps = {"tools": self.tool_only_step, "request": self.request_step}
        return steps.get(execution.state["next"], self.stop_step)(execution)

    def record_input(self, execution: NexusExecution) -> None:
        """Write the execution's input (its turn's text or mail) under its id, unless written."""
        turn = self.scenario.turns[execution.turn_index]
        text, message_id = input_text(turn), execution.state.get("input")
        if text is None or not isinstance(message_id, str) or message_id in self.sim.recorder.by_id:
            return
        kind = "mail" if turn.mail is not None else "user"
        self.sim.transcript.add_text(execution, "user", text, message_id=message_id, input=kind)

    def resumable(self, run: RunRecord, interrupted: bool) -> NexusExecution:
        """A held execution retries its hook task; a killed one goes on from its last save."""
        if run.state == AgentRunState.INPUT_REQUIRED and not interrupted:
            # Held at a hook task's approval: it goes on once that is settled (or waits, --wait).
            if not self.sim.options.wait:
                refuse_pending(self.sim.store, run.id, "waits for {n} approval(s)")
        elif run.state != ATTENTION_HOLD and not interrupted:
            raise Conflict(
                f"run {run.id} is {run.state}, not on an attention hold or waiting for approval",
                hint="only a run whose hook task failed or awaits approval can be resumed",
            )
        execution = self.execution(int(run.data["turn_index"]), run, dict(run.execution), run.data)
        sim_id = str(self.sim.sim["id"])
        if interrupted and not execution_recorded(self.sim.store, sim_id, execution.turn_index):
            # Killed while it began: enter it again.
            self.enter(execution, run.data)
        return execution

    def execution(
        self, index: int, run: RunRecord | None, state: dict[str, Any], fields: Mapping[str, Any]
    ) -> NexusExecution:
        """The execution of turn ``index`` from its run's ``fields``, its messages tagged."""
        kind, conversation_id = str(fields["kind"]), fields.get("conversation_id")
        tags: dict[str, Any] = {"execution": index, "kind": kind}
        tags |= {"standalone": True} if conversation_id is None else {}
        return NexusExecution(
            index,
            run,
            state,
            scope=f"standalone:{index}" if conversation_id is None else CHAT_SCOPE,
            input_message_id=state.get("input"),
            occupies_chat=conversation_id is not None and kind != "background",
            tags=tags,
            turn=self.scenario.turns[index],
            kind=kind,
            hooks=LifecycleHooks.model_validate(fields.get("hooks") or {}).declared(),
            conversation_id=conversation_id,
            approval_mode=fields.get("approval_mode"),
        )

    def resume_fields(self) -> dict[str, None]:
        """A retried execution is no longer on a hold."""
        return {"attention": None}

    def ended(self, execution: Execution, end: End) -> None:
        """Record on the execution's entry how it stopped (held: the state it holds in)."""
        run = execution.run
        state = run.state if end == End.HELD and run is not None else end.value
        set_execution_state(self.sim.store, str(self.sim.sim["id"]), execution.turn_index, state)

    def close(self) -> None:
        """Nothing to release: hook tasks go through the store."""

    @classmethod
    def run_fields(cls) -> tuple[str, ...]:
        """What an execution adds to its AgentRunDTO."""
        return (
            "kind",
            "conversation_id",
            "hooks",
            "approval_mode",
            "profile",
            "regenerates",
            "attention",
            "execution",
            "stopped",
        )

    @classmethod
    def run_tags(cls, run: Run) -> dict[str, object]:
        """Messages of an execution name its turn and kind."""
        return {"execution": run.get("turn_index"), "kind": run.get("kind")}

    @classmethod
    def cancel_pending(
        cls, store: Store, sim: Sim, run: Run, how: str
    ) -> tuple[str, dict[str, object]]:
        """Cancel the run's pending hook tasks: stop is bypassed."""
        cancelled = cancel_run_tasks(store, str(run["id"]), f"the run was {how} by the user")
        keys = [t["task_key"] for t in cancelled]
        text = f"run {how} by user; stop bypassed"
        if cancelled:
            text += f"; cancelled {len(cancelled)} pending hook task(s): {', '.join(keys)}"
        return text, {"stopped": {"forced": how == "force-stopped", "cancelled_tasks": keys}}

    @classmethod
    def mark_ended(cls, store: Store, sim: Sim, run_id: str | None, end: End) -> None:
        """Record how the execution of ``run_id`` stopped on its entry."""
        if run_id is not None:
            turn = int(read_run(store, run_id)["turn_index"])
            set_execution_state(store, str(sim["id"]), turn, end.value)

    @classmethod
    def report_extras(cls, store: Store, sim: Sim, runs: list[Run]) -> ReportExtras:
        """The profile, every execution, and every hook task of the simulation."""
        return {
            "simulation": {
                "profile": sim.get("profile"),
                "profile_revision": sim.get("profile_revision"),
                "hooks_from": sim.get("hooks_from"),
            },
            "executions": sim_executions(store, str(sim["id"])),
            "hook_tasks": [task for run in runs for task in run_tasks(store, run["id"])],
        }

    # -- executions ----------------------------------------------------------------------------

    def current_profile(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The profile a new input captures, and where it came from."""
        sim = self.sim.sim
        if sim.get("profile") is not None:
            origin: dict[str, Any] = {"source": "scenario", "revision": sim.get("profile_revision")}
            if sim.get("hooks_from"):
                origin["hooks_from"] = sim["hooks_from"]
            return dict(sim["profile"]), origin

        record = read_profile(self.sim.store)
        return dict(record["configuration"]), {"source": "store", "revision": record["revision"]}

    def previous_reply(self) -> ExecutionEntry:
        """The latest execution that replied in the conversation (what a regeneration redoes)."""
        turn = self.sim.sim.get("last_reply")
        if turn is None:
            raise Conflict("there is no earlier reply to regenerate")
        return read_execution(self.sim.store, str(self.sim.sim["id"]), int(turn))

    def replace_reply(self, previous_turn: int, index: int) -> None:
        """Take the regenerated reply out of the context (it stays in the transcript)."""
        roles = ("assistant", "tool", "feedback")
        for message in self.sim.recorder.messages:
            sim = message.get("sim") or {}
            if sim.get("execution") == previous_turn and message["role"] in roles:
                self.sim.transcript.leave_context(message, replaced_by=index)

    # -- steps ---------------------------------------------------------------------------------

    def request_step(self, execution: NexusExecution) -> End | None:
        """Compaction and turn_start when due, then one model request and its tools."""
        state = execution.state
        self.sim.spans.trace_turn(int(state["requests"]))
        if (end := self.before_request(execution)) is not None:
            return end
        chosen = self.next_round(execution)
        if chosen is None:
            return self.sim.steps.fail(execution, str(execution.turn.error))
        spec, repeated = chosen
        # A step interrupted after its answer was written goes on from that answer.
        request = state["requests"] + 1
        message = self.sim.transcript.recovered(execution, "assistant", request=request)
        if message is None:
            marks: dict[str, Any] = {"request": request, **({"repeated": True} if repeated else {})}
            with self.sim.spans.model_span(spec.tokens):
                message = self.sim.transcript.add_answer(
                    execution, say=spec.say, tokens=spec.tokens, calls=spec.tool_calls, **marks
                )
        state["requests"] = request
        if spec.tool_calls:
            self.run_tools(execution, message, spec.tool_calls)
        else:
            answer = {"candidate": message["id"], "output": spec.say or ""}
            state.update(next="stop", answers=state["answers"] + 1, **answer)
        return None

    def tool_only_step(self, execution: NexusExecution) -> End | None:
        """A tool-only execution: its tools run with no model round; their output is the answer."""
        calls = execution.turn.tool_calls
        message = self.sim.transcript.recovered(execution, "assistant", tool_only=True)
        if message is None:
            message = self.sim.transcript.add_answer(
                execution, say=None, tokens=0, calls=calls, tool_only=True
            )
        self.run_tools(execution, message, calls)
        output = "\n".join(call.result for call in calls)
        execution.state.update(next="stop", answers=1, candidate=None, output=output)
        return None

    def stop_step(self, execution: NexusExecution) -> End | None:
        """Pass the candidate answer through stop: deliver it, or run another model round."""
        state = execution.state
        if NexusEvent.STOP not in execution.hooks:
            return self.sim.steps.complete(execution)
        output = str(state["output"] or "")
        source = f"answer-{state['answers']}"
        # The preview is cut on a character boundary.
        cut = output.encode()[:OUTPUT_PREVIEW_MAX_BYTES].decode("utf-8", "ignore")
        extra = {"output_preview": cut, "output_size_bytes": utf8_size(output)}
        decision = self.hook(execution, NexusEvent.STOP, source, extra)
        if isinstance(decision, End):
            return decision
        if decision.get("continue"):
            index = {"belt.continuation.index": state["continuations"] + 1}
            with tracing.span("belt.continuation", index):
                self.mark_candidate(execution, "continued")
                feedback = str(decision["feedback"])
                key = task_key(str(execution.run_id), NexusEvent.STOP, source)
                if self.sim.transcript.recovered(execution, "feedback", task_key=key) is None:
                    self.sim.transcript.add_text(execution, "feedback", feedback, task_key=key)
                state.update(next="request", continuations=state["continuations"] + 1)
            return None
        self.mark_candidate(execution, "accepted")
        return self.sim.steps.complete(execution)

    def before_request(self, execution: NexusExecution) -> End | None:
        """Compaction and its hooks when needed, then turn_start before the first request."""
        state = execution.state
        if state["compaction"] is None and (extra := self.sim.transcript.over_limit(execution)):
            asked = dict(extra) if state["requests"] > 0 else {}
            state["compaction"] = {"n": state["compactions"] + 1, "stage": "pre", "extra": asked}
            self.sim.steps.save(execution)
        compaction = state["compaction"]
        if compaction is not None:
            with tracing.span("belt.compaction", {"belt.compaction.index": compaction["n"]}):
                source = f"compaction-{compaction['n']}"
                if compaction["stage"] == "pre":
                    extra = compaction["extra"]
                    if end := self.boundary(execution, NexusEvent.PRE_COMPACT, source, extra):
                        return end
                    self.sim.transcript.compact(execution)
                    compaction["stage"] = "post"
                    self.sim.steps.save(execution)
                if end := self.boundary(execution, NexusEvent.POST_COMPACT, source, {}):
                    return end
                state.update(compaction=None, compactions=compaction["n"])
                self.sim.steps.save(execution)
        if state["requests"] == 0 and execution.kind != "background" and not state["turn_started"]:
            if end := self.boundary(execution, NexusEvent.TURN_START, "turn", {}):
                return end
            if NexusEvent.TURN_START in execution.hooks:
                state["turn_started"] = True
                self.sim.steps.save(execution)
        return None

    def boundary(
        self, execution: NexusExecution, event: NexusEvent, source: str, extra: dict[str, Any]
    ) -> End | None:
        """Run the boundary's hook when one is declared; how the execution ends, if it does."""
        if event not in execution.hooks:
            return None
        decision = self.hook(execution, event, source, extra)
        return decision if isinstance(decision, End) else None

    def next_round(self, execution: NexusExecution) -> tuple[ModelTurnSpec, bool] | None:
        """The next scripted model round, then the last answer again (None: a scripted error)."""
        state = execution.state
        model = execution.turn.model
        if state["script"] < len(model):
            state["script"] += 1
            return model[state["script"] - 1], False
        if execution.turn.error is not None:
            return None
        last = model[-1]
        return ModelTurnSpec(say=last.say, tokens=last.tokens), True

    def run_tools(
        self, execution: NexusExecution, message: Message, calls: list[ToolCallSpec]
    ) -> None:
        """Run the tools of a message as scripted; each result is a tool message."""
        self.sim.transcript.reconcile_tools(execution, message)
        for invocation, call in zip(message["tool_invocations"], calls, strict=True):
            if invocation["status"] != ToolInvocationStatus.PENDING:
                continue
            if execution.run is not None:
                execution.run.check_cancelled()
            with self.sim.spans.tool_span(call.name, invocation):
                self.sim.transcript.finish_tool(execution, invocation, call.status, call.result)
        self.sim.recorder.save_message(message)

    def mark_candidate(self, execution: NexusExecution, how: str) -> None:
        """Record what stop did with the candidate answer."""
        message = self.sim.recorder.by_id.get(str(execution.state.get("candidate")))
        if message is not None:
            message["sim"]["stop"] = how
            self.sim.recorder.save_message(message)

    # -- hooks ---------------------------------------------------------------------------------

    def hook(
        self, execution: NexusExecution, event: NexusEvent, source: str, extra: dict[str, Any]
    ) -> dict[str, Any] | End:
        """Run one boundary's hook task; its decision, or how the execution ends."""
        with tracing.span(f"belt.hook {event}") as span:
            run_id = execution.run_id
            assert run_id is not None, "an execution with hooks always has a run"
            key = task_key(run_id, event, source)
            ids: dict[str, Any] = {"run_public_id": run_id, "task_key": key}
            ids["conversation_public_id"] = execution.conversation_id
            task_input = HookTaskInput(event=event, **ids, **extra).to_wire()
            task = schedule_task(
                self.sim.store,
                key=key,
                event=event,
                hook=execution.hooks[event],
                task_input=task_input,
                run_id=run_id,
                sim_id=str(self.sim.sim["id"]),
                approval_mode=execution.approval_mode,
                tool_only=execution.kind == "tool_only",
                continuations_used=int(execution.state["continuations"]),
                chat_id=self.sim.recorder.chat_id,
            )
            if task["status"] not in FINISHED:
                task = self.await_task(execution, task)
            trace_task(span, event, task)
            if task["status"] == TaskStatus.AWAITING_APPROVAL:
                # Not approved yet (no --wait): held until resolved, then `belt sim resume`.
                state = AgentRunState.INPUT_REQUIRED.value
                return self.sim.steps.hold(execution, ChatStatus.AWAITING_INPUT, state=state)
            self.record_row(execution, task)
            if task["status"] == TaskStatus.CANCELLED:
                raise Cancelled
            if task["status"] == TaskStatus.FAILED:
                return self.hold(execution, task)
            return cast(dict[str, Any], task["decision"])  # a completed task holds one

    def await_task(self, execution: NexusExecution, task: HookTask) -> HookTask:
        """The task once finished (or awaiting an approval nothing settles, without ``--wait``).

        A pending task (one whose worker died holding it too) is served here when this process
        can."""
        store = self.sim.store
        identity = str(task["id"])
        told: set[str] = set()
        delay = 0.002
        while True:
            current = read_task(store, identity)
            if current["status"] in FINISHED:
                return current
            if current["status"] == TaskStatus.PENDING and self.serve_here(current):
                continue
            if execution.run is not None:
                execution.run.check_cancelled()
            if current["status"] == TaskStatus.AWAITING_APPROVAL:
                if not self.sim.holds.settle_scripted(execution):
                    self.sim.holds.wait_out(execution)
                current = self.await_approval(current, told)
                if current["status"] == TaskStatus.AWAITING_APPROVAL:
                    if not self.sim.options.wait:
                        return current
                    time.sleep(GATE_POLL)
                continue
            if current["status"] == TaskStatus.CLAIMED and abandoned(current.get("claim")):
                if release_abandoned(store, identity) is not None:
                    continue
            if (remaining := time_left(current)) <= 0:
                expire_task(store, identity)
                continue
            if "waiting" not in told and (notify := self.sim.options.notify) is not None:
                notify({"kind": "waiting", **current})
                told.add("waiting")
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.05)

    def serve_here(self, task: HookTask) -> bool:
        """Serve a pending task with the in-process executor, when it serves the tool."""
        if (worker := self.sim.options.worker) is None or task["tool"] not in worker.targets:
            return False
        return worker.serve_task(task["id"]) is not None

    def await_approval(self, task: HookTask, told: set[str]) -> HookTask:
        """One look at a task's approval: act on it when settled, sweep it when it is due."""
        store = self.sim.store
        task = settle_approval(store, str(task["id"]))
        if task["status"] != TaskStatus.AWAITING_APPROVAL:
            return task
        interrupt_id = str((task["approval"] or {})["interrupt_id"])
        interrupt = read_record(store=store, interrupt_id=interrupt_id)
        if parse_timestamp(str(interrupt["expires_at"])) <= clock.now():
            # On a virtual clock, only this run's: others' deadlines may be wall time.
            sweep(store=store, run_id=str(interrupt["run_id"]) if clock.current() else None)
            return settle_approval(store, str(task["id"]))
        options = self.sim.options
        if "approval" not in told and options.wait and (notify := options.notify) is not None:
            ids = {"interrupt_id": interrupt["id"], "interrupt_short_id": interrupt.get("short_id")}
            notify({"kind": "approval", **task, **ids, "expires_at": interrupt["expires_at"]})
            told.add("approval")
        return task

    @cached_property
    def recorded_rows(self) -> set[tuple[str, int]]:
        """The (task, attempt) pairs that already have a transcript row."""
        rows = set()
        for message in self.sim.recorder.messages:
            for content in message.get("content") or []:
                hook = (content.get("event") or {}).get("hook") or {}
                if hook.get("task_id"):
                    rows.add((str(hook["task_id"]), int(hook.get("attempt") or 1)))
        return rows

    def record_row(self, execution: NexusExecution, task: HookTask) -> None:
        """One transcript row per finished attempt of a hook task."""
        seen = (str(task["id"]), int(task["attempt"]))
        if seen in self.recorded_rows:
            return
        decision, error = task.get("decision") or {}, task.get("error") or {}
        row: dict[str, Any] = {"event": task["event"], "handler_type": "executor"}
        row |= {"handler": task["tool"], "status": task["status"], "task_key": task["task_key"]}
        row |= {"task_id": task["id"], "attempt": task["attempt"]}
        row["duration_ms"] = task.get("duration_ms") or 0
        if task["status"] == TaskStatus.COMPLETED:
            row["decision"] = "continue" if decision.get("continue") else "acknowledge"
            if decision.get("feedback"):
                row["reason"] = decision["feedback"]
        row |= {"failure": error.get("code"), "error": error.get("message")} if error else {}
        self.sim.transcript.add_event(
            execution, f"hook {task['event']}: {task['tool']}", type="hook", hook=row
        )
        self.recorded_rows.add(seen)

    def hold(self, execution: NexusExecution, task: HookTask) -> End:
        """A failed hook task: the execution waits on an attention hold, never ends silently."""
        error = task.get("error") or {}
        attention: dict[str, Any] = {"reason": error.get("code"), "event": task["event"]}
        attention |= {"tool": task["tool"], "task_id": task["id"], "task_key": task["task_key"]}
        attention |= {"attempt": task["attempt"], "detail": error.get("message")}
        attention["since"] = now_iso()
        end = self.sim.steps.hold(execution, ChatStatus.WAITING, attention=attention)
        text = (
            f"attention hold: {task['event']} hook task {task['task_key']} failed "
            f"({attention['reason']}): {attention['detail']}"
        )
        self.sim.transcript.add_event(execution, text, type="attention", attention=attention)
        return end
