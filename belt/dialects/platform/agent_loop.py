"""The inference.sh dialect of the simulation driver: webhook, task and gate hooks on events.

One scenario turn is one run, its events in the order DESIGN.md fixes. A run's steps
(``execution["next"]``): ``start``, ``turn``, ``model``, ``tools`` and ``gate``, where a run held
at its interrupts goes on once every one is settled.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from belt.deliveries.effects import (
    DEFAULT_TOOL_DENY_REASON,
    Outcome,
    chat_hook_event,
    handler_label,
    transcript_content,
)
from belt.dialects.platform.builtins import BUILTINS
from belt.dialects.platform.builtins.suggest import QUIET_TURNS, SUGGEST
from belt.dialects.platform.children import Children, children_of
from belt.dialects.platform.reviews import REVIEW, start_review
from belt.dialects.platform.tasks import TASK, start_task
from belt.engine.dispatch import (
    Dispatcher,
    EventResult,
    HookRun,
    Route,
    executed_record,
    leaves_transcript_row,
)
from belt.engine.scenario import LoadedScenario, ModelTurnSpec, Scenario, ToolCallSpec
from belt.engine.simrecord import reload_hooks, reload_located, stored_hooks
from belt.engine.simulation import End, Execution, SimStatus, record_simulation, refuse_pending
from belt.errors import Conflict, UsageError
from belt.outgoing import tracing
from belt.records.chats import disabled
from belt.records.ids import new_id, now_iso
from belt.records.interrupts import cancel_interrupt, create_interrupt, list_interrupts
from belt.records.messages import Message, NewMessage, active_at
from belt.records.runs import Run, RunRecord, parked
from belt.records.sims import Sim, SimHooks, write_hooks
from belt.wire.dto import InterruptJSON
from belt.wire.enums import (
    AgentRunState,
    ChatStatus,
    InterruptReason,
    InterruptStatus,
    ToolInvocationStatus,
)
from belt.wire.platform import GATE_TIMEOUT_MAX, ContextInjection

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from belt.dialects.simreport import ReportExtras
    from belt.engine.simulation import Simulation
    from belt.store import Store


def rejection(interrupt: InterruptJSON | None) -> str:
    """Why a tool call whose interrupt was denied or expired failed."""
    if interrupt is None:
        return "rejected: denied at gate gate"
    data = interrupt.get("resolved_data")
    given = data.get("reason") if isinstance(data, dict) else None
    if isinstance(given, str) and given.strip():
        return f"rejected: {given}"
    how = "expired" if interrupt["status"] == InterruptStatus.EXPIRED else "denied"
    what = {
        InterruptReason.TOOL_APPROVAL.value: "approval",
        InterruptReason.CLIENT_TOOL.value: "client tool wait",
    }.get(str(interrupt.get("reason")), "gate")
    return f"rejected: {how} at {what} {interrupt['id']}"


def client_result(interrupt: InterruptJSON) -> str:
    """A client tool's posted ``resolved_data.result`` (other data as JSON, none as "")."""
    data = interrupt.get("resolved_data")
    if isinstance(data, dict) and isinstance(data.get("result"), str):
        return str(data["result"])
    return "" if data is None else json.dumps(data, ensure_ascii=False)


def waiting_status(reason: str) -> str:
    """The status of a tool invocation held by an interrupt of ``reason``."""
    if reason == InterruptReason.CLIENT_TOOL:
        return ToolInvocationStatus.AWAITING_INPUT.value
    return ToolInvocationStatus.AWAITING_APPROVAL.value


class PlatformLoop:
    """The inference.sh dialect: what each step of a run does."""

    name: ClassVar[str] = "platform"
    held_state: ClassVar[str] = AgentRunState.INPUT_REQUIRED.value
    held_status: ClassVar[SimStatus] = SimStatus.HELD
    waits_for_gates: ClassVar[bool] = True
    stop_hint: ClassVar[str] = (
        "a simulation process may be running it; `belt sim stop --force` cancels it"
    )

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.scenario = sim.scenario_as(Scenario)
        if isinstance(loaded := sim.options.loaded, LoadedScenario):
            hooks, routes, located = loaded.hooks, sim.options.routes, loaded.located
        else:
            hooks, routes = reload_hooks(sim.store, sim.sim)
            located = reload_located(sim.store, sim.sim)
        self.dispatcher = Dispatcher(
            sim.store,
            hooks,
            bool(sim.sim.get("fail_closed")),
            builtin=self.run_builtin,
            routes=routes,
            handlers=sim.options.handlers,
            located=located,
        )
        self.tasks = Children(sim, type(self))
        # Reviews save to the owner's registry: one at a time, in the order they were asked for.
        self.reviews = Children(sim, type(self), workers=1)
        self.current: Execution | None = None

    @classmethod
    def check_options(cls, *, executors: bool, fail_closed: bool, routes: bool = False) -> None:
        """Executors serve Nexus hook tasks only."""
        if executors:
            raise UsageError(
                "--executor serves Nexus hook tasks; this scenario is in the platform dialect",
                hint='a Nexus scenario starts with dialect = "nexus"',
            )

    @classmethod
    def create(
        cls,
        store: Store,
        loaded: LoadedScenario,
        *,
        fail_closed: bool,
        routes: Sequence[Route] = (),
    ) -> Sim:
        """Record a new platform simulation (full hook URLs and routes go to the private part)."""
        scenario = loaded.scenario
        registry: dict[str, Any] = {}
        if scenario.agent.registry is not None:
            # The owner's registry first: every file is checked before anything is saved.
            owner = scenario.agent.owner
            directory = Path(loaded.source).parent / scenario.agent.registry
            from belt.records.registry import load_directory  # noqa: PLC0415 - search index

            entries = [e.to_json() for e in load_directory(store, directory, owner=owner)]
            registry["registry"] = {"owner": owner, "directory": str(directory), "entries": entries}
        hooks = stored_hooks(loaded.hooks)
        sim = record_simulation(
            store,
            dialect=cls.name,
            loaded=loaded,
            agent={"hooks": hooks},
            disable_hooks=scenario.chat.disable_hooks,
            scenario=scenario.model_dump(mode="json", by_alias=True, exclude={"agent": {"hooks"}}),
            hooks=hooks,
            fail_closed=fail_closed,
            **registry,
        )
        private: SimHooks = {"hooks": [hook.to_wire() for hook in loaded.hooks]}
        if routes:
            private["routes"] = [asdict(route) for route in routes]
        if loaded.located:
            private["located"] = {str(i): place.to_wire() for i, place in loaded.located.items()}
        write_hooks(store, str(sim["id"]), private)
        return sim

    # -- the driver's protocol ---------------------------------------------------------------

    def begin(self, index: int) -> Execution:
        """Record the user's message and start its run."""
        recorder = self.sim.recorder
        runs = int(recorder.chat.get("run_count", 0)) + 1
        # agent.start fires until a model turn happened: a run denied at it leaves it to the next.
        first = int(recorder.chat.get("turn_count", 0)) == 0
        # Ids set now: a caller names the reply to come; a resume writes an input not yet written.
        first_input = self.sim.sim.get("first_input") if index == 0 else None
        input_id = str(first_input) if first_input else new_id("msg")
        state = {"next": "start", "model": 0, "first": first, "input": input_id}
        state["reply"] = new_id("msg")
        run = self.sim.steps.create_run(index, state)
        execution = Execution(index, run, run.execution)
        self.record_input(execution)
        recorder.update_chat(status=ChatStatus.BUSY.value, run_count=runs, active_run_id=run.id)
        return execution

    def record_input(self, execution: Execution) -> None:
        """Write the run's input message unless written (a task chat's first is its payload)."""
        recorder = self.sim.recorder
        message_id = str(execution.state["input"])
        execution.input_message_id = message_id
        if message_id in recorder.by_id:
            message = recorder.message(message_id)
            if message.get("agent_run_id") != execution.run_id:  # a task chat's first message
                message["agent_run_id"] = execution.run_id
                recorder.save_message(message)
            return
        user = self.scenario.turns[execution.turn_index].user
        self.sim.transcript.add_text(execution, "user", user, message_id=message_id)

    def step(self, execution: Execution) -> End | None:
        """Take the run's next step."""
        steps = {"start": self.start, "turn": self.turn, "model": self.model, "tools": self.tools}
        return steps.get(execution.state["next"], self.after_gate)(execution)

    def resumable(self, run: RunRecord, interrupted: bool) -> Execution:
        """A run held at gates, once all are settled, or one a killed process left, goes on."""
        if not interrupted:
            if run.state != AgentRunState.INPUT_REQUIRED and not parked(run.data):
                raise Conflict(f"run {run.id} is {run.state}, not waiting at a gate")
            refuse_pending(self.sim.store, run.id, "has {n} pending interrupt(s)")
        execution = Execution(int(run.data["turn_index"]), run, dict(run.execution))
        self.record_input(execution)  # a killed process may have left it unwritten
        return execution

    def resume_fields(self) -> dict[str, None]:
        """A run going on after its gates is no longer interrupted."""
        return {"interrupt_reason": None}

    def ended(self, execution: Execution, end: End) -> None:
        """Nothing to record beyond the run itself."""

    def close(self) -> None:
        """Wait for the async hooks and the children; record the failed children on the chat."""
        self.dispatcher.close()
        for child, error in [*self.tasks.close(), *self.reviews.close()]:
            row = chat_hook_event(
                event=child.hook_event,
                handler_type=child.handler_type,
                handler=child.handler,
                error=error,
            )
            self.sim.recorder.add_message(
                role="event", run_id=child.parent_run_id, content=[dict(transcript_content(row))]
            )

    @classmethod
    def run_fields(cls) -> tuple[str, ...]:
        """A platform run's DTO has no fields beyond the wire's."""
        return ()

    @classmethod
    def run_tags(cls, run: Run) -> dict[str, object]:
        """Platform messages carry no execution tags."""
        return {}

    @classmethod
    def cancel_pending(
        cls, store: Store, sim: Sim, run: Run, how: str
    ) -> tuple[str, dict[str, object]]:
        """Cancel the stopped run's pending gates."""
        for interrupt in list_interrupts(store=store, run_id=str(run["id"])):
            cancel_interrupt(store=store, interrupt_id=interrupt["id"])
        return f"run {how} by user", {}

    @classmethod
    def mark_ended(cls, store: Store, sim: Sim, run_id: str | None, end: End) -> None:
        """The run record says it all."""

    @classmethod
    def report_extras(cls, store: Store, sim: Sim, runs: list[Run]) -> ReportExtras:
        """The task chats and review branches it started, and the parent of such a child."""
        fired = {str(r["id"]): dict((r.get("execution") or {}).get("fired") or {}) for r in runs}
        extras: ReportExtras = {
            "tasks": children_of(store, sim, TASK),
            "reviews": children_of(store, sim, REVIEW),
            "fired": fired,
        }
        if sim.get("parent"):
            extras["simulation"] = {"parent": sim["parent"]}
        if sim.get("registry"):
            extras.setdefault("simulation", {})["registry"] = sim["registry"]
        return extras

    # -- steps --------------------------------------------------------------------------------

    def models(self, execution: Execution) -> list[ModelTurnSpec]:
        """The scripted model turns of the execution's scenario turn."""
        return self.scenario.turns[execution.turn_index].model

    def start(self, execution: Execution) -> End | None:
        """``agent.start`` on the first run of a chat."""
        execution.state["next"] = "turn"
        if execution.state["first"]:
            return self.held_or_blocked(execution, "start", self.fire(execution, "agent.start"))
        return None

    def turn(self, execution: Execution) -> End | None:
        """Before a model turn: compaction and ``agent.turn_start``; or the end of the run."""
        turn = self.scenario.turns[execution.turn_index]
        if execution.state["model"] >= len(turn.model) and turn.error is None:
            return self.complete(execution)
        self.sim.spans.trace_turn(int(self.sim.recorder.chat.get("turn_count", 0)))
        self.maybe_compact(execution)
        fired = self.fire(execution, "agent.turn_start")
        end = self.held_or_blocked(execution, "turn_start", fired)
        if end is None:
            execution.state["next"] = "model"
        return end

    def held_or_blocked(self, execution: Execution, gate: str, result: EventResult) -> End | None:
        """A turn-level event's outcome: the run holds at its gate, fails blocked, or goes on."""
        if result.outcome == Outcome.SUSPEND:  # the run waits in ``input_required``
            interrupt = result.decisive.interrupt if result.decisive else None
            execution.state.update(next="gate", gate=gate)
            return self.sim.steps.hold(
                execution,
                ChatStatus.AWAITING_INPUT,
                interrupt_reason=InterruptReason.HOOK_GATE.value,
                interrupt_tool_id=None,
                interrupt_meta=interrupt["meta"] if interrupt else None,
            )
        if result.outcome == Outcome.BLOCK_TURN:
            return self.fail(execution, f"turn blocked: {result.reason or ''}")
        return None

    def model(self, execution: Execution) -> End | None:
        """The model's output, ``agent.turn_complete``, then its tool calls (if any)."""
        models = self.models(execution)
        index = int(execution.state["model"])
        if index >= len(models):
            return self.fail(execution, str(self.scenario.turns[execution.turn_index].error))
        spec = models[index]
        # A step interrupted after its answer was written goes on from it (its turn counted).
        message = self.sim.transcript.recovered(execution, "assistant", model_index=index)
        if message is None:
            injections = list(self.sim.ledger.context(execution.scope).injections)
            # A review branch's model turn records what it was asked with.
            review = self.sim.sim.get("review")
            asked = review.get("request") if isinstance(review, dict) else None
            with self.sim.spans.model_span(spec.tokens):
                message = self.sim.transcript.add_answer(
                    execution,
                    say=spec.say,
                    tokens=spec.tokens,
                    calls=spec.tool_calls,
                    message_id=self.sim.transcript.unused_reply(execution.state),
                    model_index=index,
                    injections=injections,
                    **({"request": asked} if isinstance(asked, dict) else {}),
                )
            recorder = self.sim.recorder
            turn = int(recorder.chat.get("turn_count", 0)) + 1
            recorder.update_chat(turn_count=turn)
            self.consume_injections(execution, turn)
        self.fire(execution, "agent.turn_complete")
        if not spec.tool_calls:
            return self.complete(execution)
        execution.state.update(next="tools", message_id=message["id"], tool=0)
        return None

    def tools(self, execution: Execution) -> End | None:
        """Each tool call through ``agent.tool_call``: run, skipped on deny, or held."""
        state = execution.state
        message = self.sim.recorder.message(str(state["message_id"]))
        spec = self.models(execution)[int(state["model"])]
        self.sim.transcript.reconcile_tools(execution, message)
        if execution.recovering:
            self.reconcile_gates(execution, message)
        calls = list(zip(message["tool_invocations"], spec.tool_calls, strict=True))
        for position in range(int(state.get("tool", 0)), len(calls)):
            invocation, call = calls[position]
            if invocation["status"] != ToolInvocationStatus.PENDING:
                continue  # settled before the process that ran it was stopped
            if execution.run is not None:
                execution.run.check_cancelled()
            with self.sim.spans.tool_span(call.name, invocation):
                data = {"tool": call.name, "arguments": call.arguments}
                about = str(invocation["id"])
                result = self.fire(execution, "agent.tool_call", data, resource_id=about)
                if result.outcome == Outcome.SUSPEND:
                    invocation["status"] = ToolInvocationStatus.AWAITING_APPROVAL.value
                elif result.outcome == Outcome.SKIP_TOOL:
                    reason = result.reason or DEFAULT_TOOL_DENY_REASON
                    self.sim.transcript.finish_tool(
                        execution, invocation, ToolInvocationStatus.FAILED, reason
                    )
                else:
                    self.invoke(execution, invocation, call)
            state["tool"] = position + 1
        self.sim.recorder.save_message(message)
        return self.wait_for_tools(execution, message)

    def wait_for_tools(self, execution: Execution, message: Message) -> End | None:
        """Hold while a tool call waits (a client tool's run stays ``working``), else go on."""
        state = execution.state
        calls = message["tool_invocations"]
        approvals = [i for i in calls if i["status"] == ToolInvocationStatus.AWAITING_APPROVAL]
        inputs = [i for i in calls if i["status"] == ToolInvocationStatus.AWAITING_INPUT]
        if not approvals and not inputs:
            state.update(next="turn", model=int(state["model"]) + 1, tool=0, gate=None)
            return None
        state.update(next="gate", gate="tools")
        run_state: str | None = None  # the dialect's held state
        if approvals:
            pending = list_interrupts(store=self.sim.store, run_id=str(execution.run_id))
            first = pending[0] if pending else None
            held = next((i for i in pending if i["resource_id"] == approvals[0]["id"]), first)
            chat, tool_id = ChatStatus.AWAITING_INPUT, approvals[0]["id"]
            reason = held["reason"] if held else InterruptReason.HOOK_GATE.value
            meta = held["meta"] if held else None
        else:
            chat, run_state, tool_id = ChatStatus.BUSY, AgentRunState.WORKING.value, inputs[0]["id"]
            reason, meta = InterruptReason.CLIENT_TOOL.value, None
        held_at = {"interrupt_reason": reason, "interrupt_tool_id": tool_id, "interrupt_meta": meta}
        return self.sim.steps.hold(execution, chat, state=run_state, **held_at)

    def reconcile_gates(self, execution: Execution, message: Message) -> None:
        """After a killed process, an invocation whose interrupt was opened waits at it."""
        gated = {i["resource_id"]: i["reason"] for i in self.interrupts(execution)}
        for invocation in message["tool_invocations"]:
            reason = gated.get(invocation["id"])
            if invocation["status"] == ToolInvocationStatus.PENDING and reason is not None:
                invocation["status"] = waiting_status(reason)

    def after_gate(self, execution: Execution) -> End | None:
        """Every gate of the run is settled: act on the resolutions."""
        state = execution.state
        if state["gate"] in ("tools", "turn_start"):  # the model turn held at them goes on
            turns = int(self.sim.recorder.chat.get("turn_count", 0))
            self.sim.spans.trace_turn(turns - 1 if state["gate"] == "tools" else turns)
        if state["gate"] == "tools":
            message = self.sim.recorder.message(str(state["message_id"]))
            self.settle_tools(execution, message)
            return self.wait_for_tools(execution, message)
        interrupts = self.interrupts(execution)
        if not interrupts:
            return self.fail(execution, "turn blocked: gate interrupt missing")
        latest = interrupts[-1]
        resolution = str(latest.get("resolution") or "deny")
        if resolution != "allow":
            why = f"{resolution} at gate {latest['id']} ({latest['status']})"
            return self.fail(execution, f"turn blocked: {why}")
        state.update(next="turn" if state["gate"] == "start" else "model", gate=None)
        return None

    # -- tools and gates ------------------------------------------------------------------------

    def invoke(
        self,
        execution: Execution,
        invocation: dict[str, Any],
        call: ToolCallSpec,
        *,
        approved: bool = False,
    ) -> None:
        """Hold an allowed tool call for its approval or a client's result, else run it."""
        if not approved and call.require_approval and not self.always_allowed(call.name):
            reason, timeout = InterruptReason.TOOL_APPROVAL, call.approval_timeout
        elif call.client:
            reason, timeout = InterruptReason.CLIENT_TOOL, None
        else:
            self.sim.transcript.finish_tool(execution, invocation, call.status, call.result)
            if call.async_:
                result = {"tool": call.name, "status": call.status, "result": call.result}
                self.fire(
                    execution, "agent.tool_result", result, invocation_id=str(invocation["id"])
                )
            return
        invocation["status"] = waiting_status(reason)
        meta = {"tool_invocation_id": invocation["id"], "tool_name": call.name}
        create_interrupt(
            store=self.sim.store,
            run_id=str(execution.run_id),
            chat_id=self.sim.recorder.chat_id,
            event="agent.tool_call",
            reason=reason.value,
            source=f"tool:{call.name}",
            resource_type="tool_invocation",
            resource_id=str(invocation["id"]),
            timeout=timeout or GATE_TIMEOUT_MAX,
            meta=meta | {"arguments": call.arguments},
        )

    def always_allowed(self, tool: str) -> bool:
        """True when the chat's settings allow ``tool`` without asking."""
        settings = self.sim.recorder.refresh_chat().get("agent_data") or {}
        allowed = settings.get("always_allow") or []
        return settings.get("allow_all_tools") is True or tool in allowed

    def settle_tools(self, execution: Execution, message: Message) -> None:
        """Act on the settled interrupts of the run's tool calls; a denied or expired one fails."""
        spec = self.models(execution)[int(execution.state["model"])]
        latest = {i["resource_id"]: i for i in self.interrupts(execution)}
        waiting = (ToolInvocationStatus.AWAITING_APPROVAL, ToolInvocationStatus.AWAITING_INPUT)
        for invocation, call in zip(message["tool_invocations"], spec.tool_calls, strict=True):
            status = invocation["status"]
            interrupt = latest.get(invocation["id"])
            if status not in waiting or (interrupt and interrupt["status"] == "pending"):
                continue
            finish = partial(self.sim.transcript.finish_tool, execution, invocation)
            if interrupt is None or interrupt.get("resolution") != "allow":
                finish(ToolInvocationStatus.FAILED, rejection(interrupt))
            elif status == ToolInvocationStatus.AWAITING_INPUT:
                finish(ToolInvocationStatus.COMPLETED, client_result(interrupt))
            else:  # approved: invoked; let through its gate: its approval comes next
                approved = interrupt["reason"] == InterruptReason.TOOL_APPROVAL
                with self.sim.spans.tool_span(call.name, invocation):
                    self.invoke(execution, invocation, call, approved=approved)
        self.sim.recorder.save_message(message)

    def interrupts(self, execution: Execution) -> list[InterruptJSON]:
        """Every interrupt of the run, settled ones included, oldest first."""
        return list_interrupts(
            store=self.sim.store, run_id=str(execution.run_id), include_settled=True
        )

    # -- the end of a run --------------------------------------------------------------------

    def fail(self, execution: Execution, error: str) -> End:
        """``agent.error`` fires, then the run fails."""
        self.fire(execution, "agent.error", {"error": error})
        return self.sim.steps.fail(execution, error)

    def complete(self, execution: Execution) -> End:
        """``agent.complete``, then the run completes (a ``finish`` call is the chat's output)."""
        self.fire(execution, "agent.complete")
        if (output := self.finish_output(execution)) is not None:
            self.sim.recorder.update_chat(output=output)
        return self.sim.steps.complete(execution)

    def finish_output(self, execution: Execution) -> Any:
        """The arguments of the run's last completed ``finish`` call (read back to its input)."""
        start = execution.input_message_id
        for message in reversed(self.sim.recorder.messages):
            if message["id"] == start:
                break
            if message.get("agent_run_id") != execution.run_id:
                continue
            for invocation in reversed(message.get("tool_invocations") or []):
                function = invocation.get("function") or {}
                if function.get("name") == "finish" and invocation["status"] == "completed":
                    return function.get("arguments")
        return None

    # -- events, injections and compaction ----------------------------------------------------

    def fire(
        self,
        execution: Execution,
        event: str,
        data: dict[str, Any] | None = None,
        *,
        resource_id: str | None = None,
        invocation_id: str | None = None,
    ) -> EventResult:
        """Fire ``event`` at the agent's hooks and record every handler run where it happened."""
        recorder = self.sim.recorder
        self.current = execution
        # Reached whatever hooks are attached (``fired`` counts it); saved with the step: once.
        fired = execution.state.setdefault("fired", {})
        fired[event] = int(fired.get(event, 0)) + 1
        payload: dict[str, Any] = {  # the envelope every handler receives, in the spec's order
            "event": event,
            "timestamp": now_iso(),
            "agent_id": self.sim.agent_id,
            "chat_id": recorder.chat_id,
            "run_id": execution.run_id,
            "turn_count": int(recorder.chat.get("turn_count", 0)),
        }
        if data is not None:
            payload["data"] = data
        if not self.dispatcher.hooks_for(event) or disabled(recorder.refresh_chat()):
            return EventResult(event, payload)
        run = execution.run
        assert run is not None, "a platform execution always has a run"
        about = invocation_id or resource_id
        place = {"invocation_id": about} if about else {}
        place |= {"after_message": recorder.messages[-1]["id"]} if recorder.messages else {}

        def finished(hook_run: HookRun) -> None:
            # An async hook's record, written whenever it finishes (it leaves no row).
            start_task(self, hook_run, payload)
            run.log(executed_record(event, hook_run, payload, place))

        result = self.dispatcher.fire(event, payload, resource_id=resource_id, finished=finished)
        for hook_run in result.runs:
            start_task(self, hook_run, payload)
        # Every handler run of the event in one write (a task hook's failure to start is on it).
        run.log(*(executed_record(event, hook_run, payload, place) for hook_run in result.runs))
        # The event's rows and injections go in one append (``add_injection`` records them first
        # to replace one of them); an injecting run's row goes in its first injection's file.
        pending: list[NewMessage] = []
        for hook_run in result.runs:
            if hook_run.review is not None:
                start_review(self, hook_run.review)
            row = None
            if leaves_transcript_row(hook_run):
                hook = hook_run.chat_hook_event(event)
                tags: dict[str, Any] = {"invocation_id": about} if about else {}
                if hook_run.routed_to:
                    tags["routed_to"] = handler_label(hook_run.hook.type, hook_run.routed_to)
                row = self.sim.transcript.new_message(
                    execution, role="event", content=[dict(transcript_content(hook))], **tags
                )
            response = hook_run.response if hook_run.injected else None
            injections = [response.inject] if response and response.inject else []
            if response is not None and response.system:
                # Keyed by the whole handler URL (by its digest: the URL is never written).
                key = "system:" + hashlib.sha256(str(hook_run.hook.handler).encode()).hexdigest()
                system = ContextInjection(content=response.system, role="system", dedup_key=key)
                injections.append(system)
            source = handler_label(hook_run.hook.type, hook_run.hook.handler)
            for inject in injections:
                self.add_injection(execution, inject, source=source, pending=pending, row=row)
                row = None
            if row is not None:
                pending.append(row)
        self.sim.transcript.add_messages(pending)
        run.check_cancelled()  # a hook may take its time: a run stopped meanwhile must not go on
        return result

    # -- builtins ---------------------------------------------------------------------------

    def run_builtin(self, hook_run: HookRun, payload: Mapping[str, object]) -> None:
        """Run the builtin the hook names (``belt:suggest``, ``belt:extract``) on the event."""
        BUILTINS[str(hook_run.hook.handler)](self, hook_run, payload)

    def prompt(self) -> str:
        """The prompt of the turn being fired: the text of its run's input message."""
        if self.current is None or self.current.input_message_id is None:
            return ""
        message = self.sim.recorder.message(self.current.input_message_id)
        return " ".join(c.get("text") or "" for c in message.get("content") or [])

    @cached_property
    def suggested(self) -> dict[str, int]:
        """What ``belt:suggest`` injected in this chat, entry → turn (read back once)."""
        suggested: dict[str, int] = {}
        for message in self.sim.recorder.messages:
            info = (message.get("sim") or {}).get("injection") or {}
            if message["role"] == "injection" and info.get("source") == SUGGEST:
                suggested |= dict.fromkeys(info.get("items") or [], int(info.get("turn") or 0))
        return suggested

    def add_injection(
        self,
        execution: Execution,
        inject: ContextInjection,
        *,
        source: str,
        pending: list[NewMessage],
        row: NewMessage | None,
    ) -> None:
        """Add an injection to ``pending`` (``row`` in its file), replacing one of its dedup_key."""
        dedup_key, ttl_turns = inject.dedup_key, inject.ttl_turns or 0
        if dedup_key:
            keys = [(new.sim.get("injection") or {}).get("dedup_key") for new in pending]
            if dedup_key in keys:  # recorded first, so the older one can be replaced
                self.sim.transcript.add_messages(pending)
                pending.clear()
            context = self.sim.ledger.context(execution.scope)
            for message in list(context.injections.values()):
                if message["sim"].get("injection", {}).get("dedup_key") == dedup_key:
                    self.sim.ledger.leave(message, active=False, ended="replaced")
        turn = int(self.sim.recorder.chat.get("turn_count", 0))
        injection: dict[str, object] = {"role": inject.role, "ttl_turns": ttl_turns}
        injection |= {"dedup_key": dedup_key, "items": inject.items, "source": source, "turn": turn}
        kept = {"active": True, "remaining": ttl_turns or None, "injection": injection, "row": row}
        pending.append(
            self.sim.transcript.text_message(execution, "injection", inject.content, **kept)
        )
        if source == SUGGEST:
            # Past its quiet turns an entry is forgotten: what a suggestion leaves out stays small.
            suggested = self.suggested
            for item in [item for item, at in suggested.items() if turn - at > QUIET_TURNS]:
                del suggested[item]
            suggested.update(dict.fromkeys(inject.items or [], turn))

    def consume_injections(self, execution: Execution, turn: int) -> None:
        """The chat reached ``turn``: the injections whose ttl it ends leave the context."""
        context = self.sim.ledger.context(execution.scope)
        for message in list(context.injections.values()):
            if not active_at(message, turn):
                self.sim.ledger.leave(message, remaining=0, active=False, ended="ttl")

    def maybe_compact(self, execution: Execution) -> None:
        """Compact the context before a model turn when it is above the threshold."""
        if self.sim.transcript.over_limit(execution) is None:
            return
        with tracing.span("belt.compaction") as span:
            skipped = self.fire(execution, "agent.pre_compact").outcome == Outcome.SKIP_COMPACTION
            tracing.set_attributes(span, {"belt.compaction.skipped": skipped})
            if skipped:
                return
            self.sim.transcript.compact(execution)
            self.fire(execution, "agent.post_compact")
