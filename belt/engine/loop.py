"""The simulated agent loop of the inference.sh dialect.

One scenario turn is one run. Events fire in the order DESIGN.md fixes: ``agent.start`` (first
run of a chat), then per model turn ``agent.turn_start`` → model output → ``agent.turn_complete``
→ per tool call ``agent.tool_call`` → tool runs → ``agent.tool_result`` (async tools only); a run
ends with ``agent.complete`` or ``agent.error``. Compaction is decided before a model turn.
A gate stops the run in ``input_required``; ``resume`` carries on from the recorded cursor.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from belt.effects import DEFAULT_TOOL_DENY_REASON, Outcome, transcript_content, url_host
from belt.engine.dispatch import Dispatcher, EventResult, executed_record, leaves_transcript_row
from belt.engine.record import (
    Recorder,
    RunRecord,
    new_id,
    now_iso,
    record_agent_and_chat,
    run_event,
)
from belt.engine.scenario import (
    LoadedScenario,
    ModelTurnSpec,
    Scenario,
    ToolCallSpec,
    estimate_tokens,
)
from belt.errors import BeltError, Conflict, NotFound
from belt.wire.platform import HookHandlerType, LifecycleHookConfig

if TYPE_CHECKING:
    import httpx

    from belt.store import Store

CONTEXT_ROLES = ("user", "assistant", "tool", "compaction", "injection")


def in_context(message: dict[str, Any]) -> bool:
    """True for a message the model sees: not retired, and for injections, still active."""
    sim = message.get("sim") or {}
    if message["role"] not in CONTEXT_ROLES or sim.get("retired"):
        return False
    return message["role"] != "injection" or bool(sim.get("active"))


class RunEnd(StrEnum):
    """How executing a run stopped."""

    COMPLETED = "completed"
    FAILED = "failed"
    HELD = "input_required"
    CANCELED = "canceled"


@dataclass
class Step:
    """Where a model turn left the run."""

    end: RunEnd | None = None
    called_tools: bool = False


def stored_hooks(hooks: list[LifecycleHookConfig]) -> list[dict[str, Any]]:
    """Hooks as the store keeps them: a webhook by its host only, with a digest of its URL."""
    out = []
    for hook in hooks:
        wire = hook.to_wire()
        if hook.type == HookHandlerType.WEBHOOK and hook.handler:
            wire["handler"] = url_host(hook.handler)
            wire["handler_sha256"] = hashlib.sha256(hook.handler.encode()).hexdigest()
        out.append(wire)
    return out


def create_simulation(
    store: Store, loaded: LoadedScenario, *, fail_closed: bool = False
) -> dict[str, Any]:
    """Record the agent, the chat and the simulation of a scenario; return the simulation."""
    scenario = loaded.scenario
    hooks = stored_hooks(loaded.hooks)
    agent_id, chat_id, sim_id = record_agent_and_chat(
        store,
        agent_id=scenario.agent.id,
        agent={
            "name": scenario.agent.name,
            "hooks": hooks,
            "context_window": scenario.agent.context_window,
            "compact_at": scenario.agent.compact_at,
        },
        chat_id=scenario.chat.id,
        chat={
            "agent_data": {"disable_hooks": scenario.chat.disable_hooks, "allow_all_tools": False},
            "turn_count": 0,
        },
    )
    sim = {
        "id": sim_id,
        "source": str(Path(loaded.source).resolve()),
        "hooks_file": str(Path(loaded.hooks_file).resolve()) if loaded.hooks_file else None,
        "name": scenario.agent.name,
        "agent_id": agent_id,
        "chat_id": chat_id,
        "hooks": hooks,
        "scenario": scenario.model_dump(mode="json", by_alias=True, exclude={"agent": {"hooks"}}),
        "fail_closed": fail_closed,
        "next_turn": 0,
        "status": "running",
        "created_at": now_iso(),
    }
    store.create("sim", sim_id, sim)
    return sim


def reload_hooks(sim: dict[str, Any]) -> list[LifecycleHookConfig]:
    """The simulation's hooks with their full webhook URLs, read again from its files.

    The store keeps webhooks by host only, so a resumed run reads the URLs back from the
    scenario (or ``--hooks`` file) and checks they are the ones the simulation started with.
    """
    stored = sim["hooks"]
    if not any("handler_sha256" in hook for hook in stored):
        return [LifecycleHookConfig.model_validate(hook) for hook in stored]
    from belt.engine.scenario import load_scenario

    hooks_file = sim.get("hooks_file")
    try:
        loaded = load_scenario(sim["source"], hooks_file=hooks_file)
    except BeltError as exc:
        raise Conflict(
            f"cannot read the hooks of this simulation again: {exc.message}",
            hint="the webhook URLs are read from the scenario on resume; restore the file",
        ) from None
    if stored_hooks(loaded.hooks) != stored:
        raise Conflict(
            f"the hooks in {hooks_file or sim['source']} changed since the simulation started",
            hint="restore them, or start a new simulation with `belt sim run`",
        )
    return loaded.hooks


class Simulation:
    """Drives one simulation's runs, writing everything to the store as it happens."""

    def __init__(
        self,
        store: Store,
        sim: dict[str, Any],
        *,
        hooks: list[LifecycleHookConfig] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.store = store
        self.sim = sim
        self.scenario = Scenario.model_validate(sim["scenario"])
        self.hooks = hooks if hooks is not None else reload_hooks(sim)
        self._context_of: list[dict[str, Any]] | None = None
        self._context_seen = 0
        self.context_tokens = 0
        self.in_context_injections: dict[str, dict[str, Any]] = {}
        self.recorder = Recorder(store, sim["chat_id"])
        self.transport = transport
        self.agent_id = str(sim["agent_id"])

    # -- driving -------------------------------------------------------------------------------

    def run(self) -> list[str]:
        """Run the scenario's remaining turns; returns the ids of the runs executed."""
        executed = []
        while int(self.sim["next_turn"]) < len(self.scenario.turns):
            turn_index = int(self.sim["next_turn"])
            run = RunRecord.create(
                self.store,
                sim_id=self.sim["id"],
                agent_id=self.agent_id,
                chat_id=self.recorder.chat_id,
                turn_index=turn_index,
            )
            self.update_sim(next_turn=turn_index + 1)
            executed.append(run.id)
            end = self.execute(run, None)
            if end in (RunEnd.HELD, RunEnd.CANCELED):
                self.update_sim(status="held" if end == RunEnd.HELD else "canceled")
                return executed
        self.update_sim(status="finished")
        return executed

    def resume(self, run_id: str) -> list[str]:
        """Continue a run held at gates once every one of its interrupts is settled."""
        from belt.interrupts import pending_for_run

        run = RunRecord(self.store, self.store.read("run", run_id))
        if run.data["state"] != "input_required":
            raise Conflict(f"run {run_id} is {run.data['state']}, not waiting at a gate")
        pending = pending_for_run(store=self.store, run_id=run_id)
        if pending:
            ids = ", ".join(i["id"] for i in pending)
            raise Conflict(
                f"run {run_id} still has {len(pending)} pending interrupt(s): {ids}",
                hint=f"resolve them first: belt interrupt resolve {pending[0]['id']} allow|deny",
            )
        self.update_sim(status="running")
        end = self.execute(run, dict(run.data["cursor"] or {}))
        if end in (RunEnd.HELD, RunEnd.CANCELED):
            self.update_sim(status="held" if end == RunEnd.HELD else "canceled")
            return [run_id]
        return [run_id, *self.run()]

    def update_sim(self, **changes: Any) -> None:
        """Persist changes to the simulation record."""
        self.sim = self.store.merge("sim", self.sim["id"], changes)

    # -- one run -------------------------------------------------------------------------------

    def execute(self, run: RunRecord, cursor: dict[str, Any] | None) -> RunEnd:
        """Execute one run from its start, or from ``cursor`` after a gate."""
        turn = self.scenario.turns[int(run.data["turn_index"])]
        dispatcher = Dispatcher(
            self.store, self.hooks, bool(self.sim["fail_closed"]), self.transport
        )
        try:
            return self.execute_with(run, dispatcher, turn.model, turn.error, turn.user, cursor)
        finally:
            dispatcher.close()

    def execute_with(
        self,
        run: RunRecord,
        dispatcher: Dispatcher,
        model: list[ModelTurnSpec],
        error: str | None,
        user: str,
        cursor: dict[str, Any] | None,
    ) -> RunEnd:
        """The body of a run: start, model turns, and the end."""
        first_model = 0
        skip_turn_start = False
        if cursor is None:
            self.recorder.add_message(
                role="user",
                run_id=run.id,
                content=[{"type": "text", "text": user}],
                sim={"tokens": estimate_tokens(user)},
            )
            first_run = int(self.recorder.chat.get("run_count", 0)) == 0
            self.recorder.update_chat(
                status="busy",
                run_count=int(self.recorder.chat.get("run_count", 0)) + 1,
                active_run_id=run.id,
            )
            if first_run:
                result = self.fire(run, dispatcher, "agent.start")
                if result.outcome == Outcome.SUSPEND:
                    return self.hold(run, result, {"phase": "start", "model": 0})
                if result.outcome == Outcome.BLOCK_TURN:
                    return self.fail(run, dispatcher, f"turn blocked: {result.reason or ''}")
        else:
            self.recorder.update_chat(status="busy", active_run_id=run.id)
            run.update(state="working", interrupt_reason=None, cursor=None)
            phase = cursor.get("phase")
            first_model = int(cursor.get("model", 0))
            if phase in ("start", "turn_start"):
                resolution, why = self.gate_resolution(run)
                if resolution != "allow":
                    return self.fail(run, dispatcher, f"turn blocked: {why}")
                skip_turn_start = phase == "turn_start"
            elif phase == "tools":
                self.settle_tool_gates(run, dispatcher, str(cursor["message_id"]))
                first_model += 1

        for index in range(first_model, len(model)):
            if self.cancelled(run):
                return RunEnd.CANCELED
            step = self.model_turn(run, dispatcher, index, model[index], skip_turn_start)
            skip_turn_start = False
            if step.end is not None:
                return step.end
            if not step.called_tools:
                return self.complete(run, dispatcher)
        if error is not None:
            if not skip_turn_start:
                self.maybe_compact(run, dispatcher)
                result = self.fire(run, dispatcher, "agent.turn_start")
                if result.outcome == Outcome.SUSPEND:
                    return self.hold(run, result, {"phase": "turn_start", "model": len(model)})
                if result.outcome == Outcome.BLOCK_TURN:
                    return self.fail(run, dispatcher, f"turn blocked: {result.reason or ''}")
            return self.fail(run, dispatcher, error)
        return self.complete(run, dispatcher)

    def model_turn(
        self,
        run: RunRecord,
        dispatcher: Dispatcher,
        index: int,
        spec: ModelTurnSpec,
        skip_turn_start: bool,
    ) -> Step:
        """One model turn: compaction, turn_start, the model's output, and its tool calls."""
        if not skip_turn_start:
            self.maybe_compact(run, dispatcher)
            result = self.fire(run, dispatcher, "agent.turn_start")
            if result.outcome == Outcome.SUSPEND:
                return Step(self.hold(run, result, {"phase": "turn_start", "model": index}))
            if result.outcome == Outcome.BLOCK_TURN:
                return Step(self.fail(run, dispatcher, f"turn blocked: {result.reason or ''}"))

        context = self.context()
        tokens = spec.tokens if spec.tokens is not None else estimate_tokens(spec.say)
        message_id = new_id("msg")
        invocations = [
            {
                "id": new_id("ti"),
                "chat_message_id": message_id,
                "tool_invocation_id": new_id("call"),
                "function": {"name": call.name, "arguments": call.arguments},
                "status": "pending",
                "result": None,
            }
            for call in spec.tool_calls
        ]
        content = [{"type": "text", "text": spec.say}] if spec.say else []
        self.recorder.add_message(
            message_id=message_id,
            role="assistant",
            run_id=run.id,
            content=content,
            tool_invocations=invocations,
            sim={
                "tokens": tokens,
                "model_index": index,
                "context_tokens": context["tokens"] + tokens,
                "injections": context["injections"],
            },
        )
        message = self.recorder.messages[-1]
        self.consume_injections(context["injections"])
        self.recorder.update_chat(turn_count=int(self.recorder.chat.get("turn_count", 0)) + 1)
        self.fire(run, dispatcher, "agent.turn_complete")

        gated = False
        for invocation, call in zip(invocations, spec.tool_calls, strict=True):
            if self.cancelled(run):
                return Step(RunEnd.CANCELED, True)
            result = self.fire(
                run,
                dispatcher,
                "agent.tool_call",
                {"tool": call.name, "arguments": call.arguments},
                resource_id=str(invocation["id"]),
            )
            if result.outcome == Outcome.SUSPEND:
                invocation["status"] = "awaiting_approval"
                self.recorder.save_message(message)
                gated = True
                continue
            if result.outcome == Outcome.SKIP_TOOL:
                self.finish_tool(
                    run,
                    dispatcher,
                    message,
                    invocation,
                    "failed",
                    result.reason or DEFAULT_TOOL_DENY_REASON,
                    fire_result=False,
                )
                continue
            self.run_tool(run, dispatcher, message, invocation, call)
        if gated:
            held = [i for i in invocations if i["status"] == "awaiting_approval"]
            return Step(
                self.hold_tools(run, message, held, {"phase": "tools", "model": index}), True
            )
        return Step(None, bool(spec.tool_calls))

    def run_tool(
        self,
        run: RunRecord,
        dispatcher: Dispatcher,
        message: dict[str, Any],
        invocation: dict[str, Any],
        call: ToolCallSpec,
    ) -> None:
        """Invoke a tool: it completes as scripted; an async one then fires agent.tool_result."""
        self.finish_tool(
            run, dispatcher, message, invocation, call.status, call.result, fire_result=call.async_
        )

    def finish_tool(
        self,
        run: RunRecord,
        dispatcher: Dispatcher,
        message: dict[str, Any],
        invocation: dict[str, Any],
        status: str,
        result: str,
        *,
        fire_result: bool,
    ) -> None:
        """Complete a tool invocation and add its result to the chat."""
        invocation["status"] = status
        invocation["result"] = result
        self.recorder.save_message(message)
        self.recorder.add_message(
            role="tool",
            run_id=run.id,
            content=[{"type": "text", "text": result}],
            tool_call_id=invocation["tool_invocation_id"],
            status="ready" if status == "completed" else "failed",
            sim={"tokens": estimate_tokens(result)},
        )
        if fire_result:
            self.fire(
                run,
                dispatcher,
                "agent.tool_result",
                {"tool": invocation["function"]["name"], "status": status, "result": result},
            )

    def settle_tool_gates(self, run: RunRecord, dispatcher: Dispatcher, message_id: str) -> None:
        """After a tool gate: invoke the allowed tools, reject the denied ones."""
        from belt.interrupts import list_interrupts

        message = next(m for m in self.recorder.messages if m["id"] == message_id)
        turn = self.scenario.turns[int(run.data["turn_index"])]
        spec = turn.model[int(message["sim"]["model_index"])]
        by_resource = {
            i["resource_id"]: i
            for i in list_interrupts(store=self.store, run_id=run.id, include_settled=True)
        }
        for invocation, call in zip(message["tool_invocations"], spec.tool_calls, strict=True):
            if invocation["status"] != "awaiting_approval":
                continue
            interrupt = by_resource.get(invocation["id"])
            resolution = interrupt.get("resolution") if interrupt else None
            if resolution == "allow":
                self.run_tool(run, dispatcher, message, invocation, call)
            else:
                how = "expired" if interrupt and interrupt["status"] == "expired" else "denied"
                gate = interrupt["id"] if interrupt else "gate"
                self.finish_tool(
                    run,
                    dispatcher,
                    message,
                    invocation,
                    "failed",
                    f"rejected: {how} at gate {gate}",
                    fire_result=False,
                )

    def gate_resolution(self, run: RunRecord) -> tuple[str, str]:
        """The resolution of the turn-level gate a run waited at, and why."""
        from belt.interrupts import list_interrupts

        interrupts = list_interrupts(store=self.store, run_id=run.id, include_settled=True)
        latest = interrupts[-1] if interrupts else None
        if latest is None:
            return "deny", "gate interrupt missing"
        how = "expired" if latest["status"] == "expired" else latest["status"]
        resolution = str(latest.get("resolution") or "deny")
        return resolution, f"{resolution} at gate {latest['id']} ({how})"

    # -- ending a run --------------------------------------------------------------------------

    def hold(self, run: RunRecord, result: EventResult, cursor: dict[str, Any]) -> RunEnd:
        """Stop at a turn-level gate: the run waits in ``input_required``."""
        interrupt = result.decisive.interrupt if result.decisive else None
        run.update(
            state="input_required",
            interrupt_reason="hook_gate",
            interrupt_tool_id=None,
            interrupt_meta=interrupt["meta"] if interrupt else None,
            cursor=cursor,
        )
        self.recorder.update_chat(status="awaiting_input")
        return RunEnd.HELD

    def hold_tools(
        self,
        run: RunRecord,
        message: dict[str, Any],
        held: list[dict[str, Any]],
        cursor: dict[str, Any],
    ) -> RunEnd:
        """Stop at tool gates: the invocations wait in ``awaiting_approval``."""
        from belt.interrupts import pending_for_run

        pending = pending_for_run(store=self.store, run_id=run.id)
        run.update(
            state="input_required",
            interrupt_reason="hook_gate",
            interrupt_tool_id=held[0]["id"],
            interrupt_meta=pending[0]["meta"] if pending else None,
            cursor={**cursor, "message_id": message["id"]},
        )
        self.recorder.update_chat(status="awaiting_input")
        return RunEnd.HELD

    def fail(self, run: RunRecord, dispatcher: Dispatcher, error: str) -> RunEnd:
        """End the run as failed: ``agent.error`` fires, and the chat records why."""
        self.fire(run, dispatcher, "agent.error", {"error": error})
        run.update(state="failed", error=error, cursor=None)
        self.recorder.add_message(
            role="event",
            run_id=run.id,
            content=[
                run_event(
                    run.id,
                    kind="run_failed",
                    state="failed",
                    reason=error,
                    text=f"run failed: {error}",
                )
            ],
        )
        self.recorder.update_chat(status="idle", active_run_id=None)
        return RunEnd.FAILED

    def complete(self, run: RunRecord, dispatcher: Dispatcher) -> RunEnd:
        """End the run successfully: ``agent.complete`` fires."""
        self.fire(run, dispatcher, "agent.complete")
        run.update(state="completed", cursor=None)
        self.recorder.update_chat(status="idle", active_run_id=None)
        return RunEnd.COMPLETED

    def cancelled(self, run: RunRecord) -> bool:
        """True when ``belt sim stop`` cancelled the run from another process."""
        current = self.store.read("run", run.id)
        if current["state"] == "canceled":
            run.data = current
            return True
        return False

    # -- events, injections and compaction ----------------------------------------------------

    def fire(
        self,
        run: RunRecord,
        dispatcher: Dispatcher,
        event: str,
        data: dict[str, Any] | None = None,
        *,
        resource_id: str | None = None,
    ) -> EventResult:
        """Fire ``event`` at the agent's hooks and put every handler run on the record."""
        payload: dict[str, Any] = {
            "event": event,
            "timestamp": now_iso(),
            "agent_id": self.agent_id,
            "chat_id": self.recorder.chat_id,
            "run_id": run.id,
            "turn_count": int(self.recorder.chat.get("turn_count", 0)),
        }
        if data is not None:
            payload["data"] = data
        if not dispatcher.hooks_for(event):
            return EventResult(event, payload)
        self.recorder.refresh_chat()
        if self.recorder.hooks_disabled():
            return EventResult(event, payload)
        result = dispatcher.fire(event, payload, resource_id=resource_id)
        for hook_run in result.runs:
            run.log(executed_record(event, hook_run, payload))
            if leaves_transcript_row(hook_run):
                hook = hook_run.chat_hook_event(event)
                self.recorder.add_message(
                    role="event", run_id=run.id, content=[transcript_content(hook)]
                )
            if hook_run.injected and hook_run.response is not None:
                source = url_host(str(hook_run.hook.handler))
                if hook_run.response.inject is not None:
                    inject = hook_run.response.inject
                    self.add_injection(
                        run,
                        inject.content,
                        role=inject.role,
                        ttl_turns=inject.ttl_turns or 0,
                        dedup_key=inject.dedup_key,
                        items=inject.items,
                        source=source,
                    )
                if hook_run.response.system:
                    self.add_injection(
                        run,
                        hook_run.response.system,
                        role="system",
                        ttl_turns=0,
                        dedup_key=f"system:{source}",
                        items=None,
                        source=source,
                    )
        return result

    def add_injection(
        self,
        run: RunRecord,
        content: str,
        *,
        role: str | None,
        ttl_turns: int,
        dedup_key: str | None,
        items: list[str] | None,
        source: str,
    ) -> None:
        """Record an injection; one with the same ``dedup_key`` replaces the older one."""
        if dedup_key:
            self.context()
            for message in list(self.in_context_injections.values()):
                if message["sim"].get("injection", {}).get("dedup_key") == dedup_key:
                    self.leave_context(message, active=False, ended="replaced")
        self.recorder.add_message(
            role="injection",
            run_id=run.id,
            content=[{"type": "text", "text": content}],
            sim={
                "tokens": estimate_tokens(content),
                "active": True,
                "remaining": ttl_turns or None,
                "injection": {
                    "role": role,
                    "ttl_turns": ttl_turns,
                    "dedup_key": dedup_key,
                    "items": items,
                    "source": source,
                },
            },
        )

    def context(self) -> dict[str, Any]:
        """The messages the next model turn sees: their tokens and the active injections.

        Kept up to date incrementally (only messages added since the last call are read), so
        the cost of a model turn does not grow with the length of the chat.
        """
        messages = self.recorder.messages
        if self._context_of is not messages:  # first call, or the recorder read the chat again
            self._context_of, self._context_seen = messages, 0
            self.context_tokens, self.in_context_injections = 0, {}
        for message in messages[self._context_seen :]:
            if in_context(message):
                self.context_tokens += int(message["sim"].get("tokens", 0))
                if message["role"] == "injection":
                    self.in_context_injections[message["id"]] = message
        self._context_seen = len(messages)
        return {"tokens": self.context_tokens, "injections": list(self.in_context_injections)}

    def leave_context(self, message: dict[str, Any], **flags: Any) -> None:
        """Take a message out of the context (retired, or an injection that ended); save it."""
        self.context()
        if in_context(message):
            self.context_tokens -= int(message["sim"].get("tokens", 0))
            self.in_context_injections.pop(message["id"], None)
        message["sim"].update(flags)
        self.recorder.save_message(message)

    def consume_injections(self, ids: list[str]) -> None:
        """Count one model turn against each injection's ``ttl_turns``."""
        for message_id in ids:
            message = self.in_context_injections.get(message_id)
            if message is None or message["sim"].get("remaining") is None:
                continue
            remaining = int(message["sim"]["remaining"]) - 1
            if remaining <= 0:
                self.leave_context(message, remaining=0, active=False, ended="ttl")
            else:
                message["sim"]["remaining"] = remaining
                self.recorder.save_message(message)

    def maybe_compact(self, run: RunRecord, dispatcher: Dispatcher) -> None:
        """Compact the context before a model turn when it is above the threshold."""
        limit = self.scenario.agent.context_window * self.scenario.agent.compact_at
        if self.context()["tokens"] <= limit:
            return
        last_user = max(
            (m["order"] for m in self.recorder.messages if m["role"] == "user"), default=-1
        )
        retire = [
            m
            for m in self.recorder.messages
            if m["role"] in ("user", "assistant", "tool", "compaction")
            and not m["sim"].get("retired")
            and m["order"] != last_user
        ]
        if not retire:
            return
        result = self.fire(run, dispatcher, "agent.pre_compact")
        if result.outcome == Outcome.SKIP_COMPACTION:
            return
        retired_tokens = 0
        for message in retire:
            retired_tokens += int(message["sim"].get("tokens", 0))
            self.leave_context(message, retired=True)
        summary = f"Summary of {len(retire)} earlier messages ({retired_tokens} tokens)."
        self.recorder.add_message(
            role="compaction",
            run_id=run.id,
            content=[{"type": "text", "text": summary}],
            compaction_meta={"compacted_up_to_order": max(m["order"] for m in retire)},
            sim={"tokens": estimate_tokens(summary), "retired_tokens": retired_tokens},
        )
        self.fire(run, dispatcher, "agent.post_compact")


def start(
    store: Store,
    loaded: LoadedScenario,
    *,
    fail_closed: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Create and run a simulation; returns the simulation record and the runs executed."""
    store = store.without_fsync()
    sim = create_simulation(store, loaded, fail_closed=fail_closed)
    simulation = Simulation(store, sim, hooks=loaded.hooks, transport=transport)
    runs = simulation.run()
    return simulation.sim, runs


def resume(
    store: Store, run_id: str, *, transport: httpx.BaseTransport | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Resume the simulation of a run held at gates."""
    store = store.without_fsync()
    run = store.get("run", run_id)
    if run is None:
        raise NotFound(f"no run {run_id}", hint="list simulated runs with `belt sim list`")
    simulation = Simulation(store, store.read("sim", run["sim_id"]), transport=transport)
    runs = simulation.resume(run_id)
    return simulation.sim, runs
