"""Emulated chats: ``belt serve`` runs an application's agent one message at a time.

An emulated chat is a platform simulation whose turns are appended one per ``POST /agents/run``
and driven in a background thread by ``belt sim``'s driver, so every hook and record is as in a
scenario. A run held at its interrupts goes on here once they are settled, by whatever route.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import asdict, dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from belt.dialects import loop_of
from belt.dialects.platform.agent_loop import PlatformLoop  # the emulator drives platform agents
from belt.display.text import describe
from belt.emulator.agents import AgentDefinition, AgentFiles, ToolSetting, agent_from_config
from belt.emulator.modelscript import ModelScript
from belt.engine.entrypoints import resume_if_settled
from belt.engine.hooksummary import run_hook_summary, summary_line
from belt.engine.scenario import (
    AgentSpec,
    LoadedScenario,
    Scenario,
    ToolCallSpec,
    TurnSpec,
    check_storable,
)
from belt.engine.simrecord import stop_run, stored_hooks
from belt.engine.simulation import Simulation, record_simulation
from belt.errors import Conflict, InvalidInput, NotFound
from belt.records.changes import watching
from belt.records.chats import AgentData, Chat, read_chat, update_chat
from belt.records.ids import now_iso
from belt.records.interrupts import for_resource, list_interrupts, resolve_interrupt
from belt.records.reports import Reporter, report_api
from belt.records.runs import (
    EMULATED_RUNS,
    TERMINAL_STATES,
    get_run,
    interrupted,
    mark_run,
    waiting,
)
from belt.records.sims import Sim, append_turn, get_sim, read_sim, write_hooks
from belt.records.views import chat_state, public_message
from belt.store import check_id
from belt.wire.dto import InterruptJSON
from belt.wire.enums import ChatStatus, InterruptReason, InterruptStatus

if TYPE_CHECKING:
    from belt.store import Store

CHAT_LOCK = "emulated-chat"  # held while a message is appended: two never start two runs
WORKERS = 8  # emulated runs one server drives at once; more wait their turn
TEXT_LIMIT = 256 * 1024  # characters of a message's text
GO_ON_WAIT = 5.0  # seconds a tool route waits for the run it let go on to be working again
GO_ON_FALLBACK = 1.0  # seconds between two looks at it when no write here woke the route


@dataclass(frozen=True)
class RunRequest:
    """A checked ``POST /agents/run`` body."""

    chat_id: str | None
    text: str
    agent: Any
    agent_config: Any
    agent_name: Any
    context: dict[str, str] | None


def parse_run_request(body: dict[str, object]) -> RunRequest:
    """Check a ``POST /agents/run`` body as the SDKs send it; InvalidInput names the field."""
    if (chat_id := body.get("chat_id")) is not None:
        if not isinstance(chat_id, str):
            raise InvalidInput(f"chat_id: expected a chat id or null, got {describe(chat_id)}")
        check_id(chat_id, what="chat_id")
    if not isinstance((message := body.get("input")), dict):
        raise InvalidInput(f"input: expected an object with text, got {describe(message)}")
    text = "" if message.get("text") is None else message["text"]
    if not isinstance(text, str):
        raise InvalidInput(f"input.text: expected a string, got {describe(text)}")
    if len(text) > TEXT_LIMIT:
        raise InvalidInput(f"input.text: longer than {TEXT_LIMIT} characters")
    for key in ("attachments", "images", "files", "context"):
        if (value := message.get(key)) is not None and not isinstance(value, list):
            raise InvalidInput(f"input.{key}: expected an array, got {describe(value)}")
    context = body.get("context")
    if context is not None and (
        not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values())
    ):
        raise InvalidInput(f"context: expected an object of strings, got {describe(context)}")
    for key in ("agent_id", "agent_version_id"):
        if body.get(key) is not None:
            raise InvalidInput(
                f"{key}: belt serve has no stored agents to name by id",
                hint="send agent (a template ref, see --agents) or agent_config",
            )
    if body.get("agent") is not None and body.get("agent_config") is not None:
        raise InvalidInput("agent and agent_config: name the agent once, by ref or by config")
    if chat_id is None and body.get("agent") is None and body.get("agent_config") is None:
        raise InvalidInput(
            "agent: a new chat needs its agent: a template ref (agent) or agent_config"
        )
    check_storable(body, "the request")
    return RunRequest(
        chat_id, text, body.get("agent"), body.get("agent_config"), body.get("agent_name"), context
    )


def emulated_sim(store: Store, chat_id: str) -> Sim:
    """The simulation of an emulated chat; NotFound, or Conflict for a scenario's chat."""
    sim_id = read_chat(store, chat_id).get("sim_id")
    sim = get_sim(store, sim_id) if isinstance(sim_id, str) else None
    if sim is None or not sim.get("emulated"):
        raise Conflict(
            f"chat {chat_id} is not an emulated chat: its turns come from a scenario",
            hint="send chat_id null to start an emulated chat",
        )
    return sim


def build_turn(text: str, agent: AgentDefinition, script: ModelScript) -> dict[str, object]:
    """The scenario turn the model script answers ``text`` with, calls set as the agent's tools."""
    reply = script.reply(text, agent.name)
    models = []
    for model in reply.model:
        calls = []
        for call in model.tool_calls:
            if (setting := agent.tools.get(call.name)) is not None:
                call = ToolCallSpec.model_validate(
                    {
                        **call.model_dump(by_alias=True),
                        "client": call.client or setting.client,
                        "require_approval": call.require_approval or setting.require_approval,
                        "approval_timeout": call.approval_timeout or setting.approval_timeout,
                    }
                )
            calls.append(call)
        models.append(model.model_copy(update={"tool_calls": calls}))
    turn = TurnSpec(user=text, model=models, error=reply.error)
    return turn.model_dump(mode="json", by_alias=True)


def create_emulated(
    store: Store, agent: AgentDefinition, script: ModelScript, context: dict[str, str] | None
) -> Sim:
    """Record a new emulated chat of ``agent``: its simulation, agent, chat and hooks."""
    loaded = LoadedScenario("", Scenario.model_construct(agent=agent.spec, turns=[]), agent.hooks)
    hooks = stored_hooks(agent.hooks)
    doc: dict[str, object] = {
        "dialect": "platform",
        "agent": agent.spec.model_dump(mode="json", exclude={"hooks", "hooks_file"}),
        "chat": {"id": None, "disable_hooks": False},
        "turns": [],
        "agents": {
            ref: a.model_dump(mode="json", by_alias=True) for ref, a in script.agents.items()
        },
    }
    sim = record_simulation(
        store,
        dialect=PlatformLoop.name,
        loaded=loaded,
        agent={"hooks": hooks, **agent.record},
        scenario=doc,
        source=f"belt serve: {agent.ref or agent.name}",
        hooks=hooks,
        fail_closed=False,
        emulated=True,
        tools={name: asdict(setting) for name, setting in agent.tools.items()},
    )
    write_hooks(store, sim["id"], {"hooks": [h.to_wire() for h in agent.hooks]})
    if context:
        update_chat(store, sim["chat_id"], context=context)
    return sim


class SimQueue:
    """Runs the simulations' jobs in a bounded pool, one at a time per simulation."""

    def __init__(self, workers: int, report: Reporter | None) -> None:
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="belt-emulated-run")
        self.report = report
        self._lock = threading.Lock()
        self._jobs: dict[str, deque[Callable[[], None]]] = {}

    def busy(self, sim_id: str) -> bool:
        """True while this server has work queued or running for ``sim_id``."""
        with self._lock:
            return sim_id in self._jobs

    def submit(self, sim_id: str, job: Callable[[], None]) -> None:
        """Run ``job`` after those queued for ``sim_id``, in the context it was submitted in."""
        job = partial(contextvars.copy_context().run, job)
        with self._lock:
            if (queued := self._jobs.get(sim_id)) is not None:
                queued.append(job)
                return
            self._jobs[sim_id] = deque([job])
        self.pool.submit(self._work, sim_id)

    def _work(self, sim_id: str) -> None:
        while True:
            with self._lock:
                if not (queued := self._jobs[sim_id]):
                    del self._jobs[sim_id]
                    return
                job = queued.popleft()
            try:
                job()
            except Exception as exc:  # one failed run is reported; the server goes on
                if self.report is not None:
                    error = f"{type(exc).__name__}: {exc}"
                    failed = {"kind": "resume", "at": now_iso(), "run_id": "-", "sim_id": sim_id}
                    self.report({**failed, "error": error})

    def close(self) -> None:
        """Wait for the runs being driven, drop the queued ones (they go on at the next start)."""
        self.pool.shutdown(wait=True, cancel_futures=True)


class Emulator:
    """The agent routes' core: chats created, messages appended, runs driven and continued."""

    def __init__(
        self,
        store: Store,
        *,
        model: ModelScript | None = None,
        agents: AgentFiles | None = None,
        report: Reporter | None = None,
    ) -> None:
        self.store = store.without_fsync()
        self.model = model or ModelScript()
        self.agents = agents or AgentFiles()
        self.report = report
        self.queue = SimQueue(WORKERS, report)

    def close(self) -> None:
        """Stop driving runs (those left go on when a server starts again)."""
        self.queue.close()

    def send(self, body: dict[str, object]) -> dict[str, object]:
        """``POST /agents/run``: append the message to its chat and drive its run in background."""
        request = parse_run_request(body)
        store = self.store
        sim: Mapping[str, object]
        if request.chat_id is None:
            if request.agent is not None:
                agent = self.agents.resolve(request.agent)
            else:
                agent = agent_from_config(request.agent_config, request.agent_name)
            sim = create_emulated(store, agent, self.model, request.context)
        else:
            sim = emulated_sim(store, request.chat_id)
            agent = self.stored_agent(sim)
        chat_id = str(sim["chat_id"])
        with store.lock(CHAT_LOCK, chat_id):
            if not self.free(chat := read_chat(store, chat_id)):
                raise Conflict(
                    f"chat {chat_id} is {chat.get('status')}: run {chat.get('active_run_id')} "
                    "has not ended",
                    hint="wait until the chat is idle (GET /chats/{id}/status), or stop it "
                    "(POST /chats/{id}/stop)",
                )
            append_turn(store, str(sim["id"]), build_turn(request.text, agent, self.model))
            simulation = Simulation(store, sim, PlatformLoop)  # it reads the turn just appended
            execution = simulation.loop.start_turn()
        run_id = str(execution.run_id)
        mark_run(store, EMULATED_RUNS, run_id)
        self.queue.submit(str(sim["id"]), lambda: self.drive(simulation, execution))
        user = simulation.recorder.message(str(execution.input_message_id))
        reply = {
            "id": execution.state["reply"],
            "chat_id": chat_id,
            "agent_run_id": run_id,
            "status": "pending",
            "role": "assistant",
            "content": [],
            "created_at": user["created_at"],
        }
        self.tell("agents/run", chat_id, f"run {run_id} began")
        return {"user_message": public_message(user), "assistant_message": reply}

    def free(self, chat: Chat) -> bool:
        """True when a chat takes a message: no run occupies it, or the one that does has ended."""
        if (active := chat.get("active_run_id")) is None:
            return chat.get("status") in (None, ChatStatus.IDLE)
        run = get_run(self.store, str(active))
        return run is not None and run.get("state") in TERMINAL_STATES

    def stored_agent(self, sim: Sim) -> AgentDefinition:
        """The agent of an existing emulated chat, as its simulation keeps it."""
        tools = {
            str(name): ToolSetting(
                client=setting.get("client") is True,
                require_approval=setting.get("require_approval") is True,
                approval_timeout=int(setting.get("approval_timeout") or 0),
            )
            for name, setting in (sim.get("tools") or {}).items()
            if isinstance(setting, dict)
        }
        spec = AgentSpec(id=str(sim["agent_id"]), name=str(sim.get("name") or "agent"))
        return AgentDefinition(spec.name, spec, [], tools)

    def drive(self, simulation: Simulation, execution: Any) -> None:
        """Drive a begun run to its end or next hold (in a worker thread); say where it stopped."""
        simulation.drive_started(execution)
        run_id = str(execution.run_id)
        if (run := get_run(self.store, run_id)) is None or self.report is None:
            return
        summary = run_hook_summary(self.store, run_id)
        detail = f"run {run_id} {run.get('state')}"
        if summary["calls"]:
            detail += f"; {summary_line(summary)}"
        self.tell("agents/run", str(run.get("chat_id") or run_id), detail)

    def continue_settled(self, run_ids: list[str] | None = None) -> int:
        """Queue each emulated run whose interrupts are settled or server gone; how many."""
        queued = 0
        for run_id in self.store.tagged(EMULATED_RUNS) if run_ids is None else run_ids:
            if (run := get_run(self.store, run_id)) is None or run.get("state") in TERMINAL_STATES:
                mark_run(self.store, EMULATED_RUNS, run_id, on=False)
                continue
            if self.queue.busy(sim_id := str(run.get("sim_id"))):
                continue
            ready = waiting(run) and not list_interrupts(store=self.store, run_id=run_id)
            if ready or interrupted(run):
                self.queue.submit(sim_id, partial(self.resume, run_id))
                queued += 1
        return queued

    def resume(self, run_id: str) -> None:
        """Continue one run held at settled interrupts, or left by a server that is gone."""
        record = resume_if_settled(self.store, run_id, recover=True)
        if record is not None and self.report is not None:
            self.report({"kind": "resume", "at": now_iso(), **record})

    def status(self, chat_id: str) -> dict[str, object]:
        """``GET /chats/{id}/status``: the chat's status alone (what the JS SDK polls)."""
        chat, _ = chat_state(self.store, chat_id)
        return {"id": chat_id, "status": chat.get("status")}

    def stop(self, chat_id: str) -> dict[str, object]:
        """``POST /chats/{id}/stop``: cancel the chat's active run (nothing to do when idle)."""
        chat = read_chat(self.store, chat_id)
        run_id, sim_id = chat.get("active_run_id"), chat.get("sim_id")
        if not isinstance(run_id, str) or not isinstance(sim_id, str):
            return {"id": chat_id, "status": chat.get("status"), "stopped": None}
        sim = read_sim(self.store, sim_id)
        with suppress(Conflict):  # it ended meanwhile
            stop_run(self.store, sim, loop_of(sim), run_id, force=True)
        self.tell("chat stop", chat_id, f"run {run_id} stopped")
        return {**self.status(chat_id), "stopped": run_id}

    def tool_result(self, tool_id: str, body: dict[str, object]) -> InterruptJSON:
        """``POST /tools/{id}``: the result of a client tool; its run goes on."""
        if not isinstance((result := body.get("result")), str):
            raise InvalidInput(
                f"result: expected a string (objects JSON-encoded), got {describe(result)}"
            )
        attachments = body.get("attachments")
        if attachments is not None and not isinstance(attachments, list):
            raise InvalidInput(f"attachments: expected an array, got {describe(attachments)}")
        check_storable(body, "the request")
        return self.settle(tool_id, "allow", {"result": result}, "POST /tools/{id}", result=True)[0]

    def approve(self, tool_id: str) -> list[InterruptJSON]:
        """``POST /tools/{id}/invoke``: approve the tool call (its approval and gate hook)."""
        return self.settle(tool_id, "allow", None, "POST /tools/{id}/invoke")

    def reject(self, tool_id: str, body: dict[str, object]) -> list[InterruptJSON]:
        """``POST /tools/{id}/reject``: refuse the tool call; it fails with the reason given."""
        if (reason := body.get("reason")) is not None and not isinstance(reason, str):
            raise InvalidInput(f"reason: expected a string, got {describe(reason)}")
        check_storable(body, "the request")
        data = {"reason": reason} if reason else None
        return self.settle(tool_id, "deny", data, "POST /tools/{id}/reject")

    def always_allow(
        self, chat_id: str, tool_id: str, body: dict[str, object]
    ) -> list[InterruptJSON]:
        """``POST /chats/{chat}/tools/{id}/always-allow``: approve it, and the tool from now on."""
        pending = self.pending(tool_id)
        if any(i["chat_id"] != chat_id for i in pending):
            raise NotFound(f"no tool invocation {tool_id} awaiting approval in chat {chat_id}")
        if isinstance((name := tool_name(pending[0]) or body.get("tool_name")), str) and name:
            chat = read_chat(self.store, chat_id)
            agent_data: AgentData = {**(chat.get("agent_data") or {})}
            always = [t for t in agent_data.get("always_allow") or [] if isinstance(t, str)]
            agent_data["always_allow"] = sorted({*always, name})
            update_chat(self.store, chat_id, agent_data=agent_data)
        return self.settle(tool_id, "allow", None, "POST /chats/{chat}/tools/{id}/always-allow")

    def pending(self, tool_id: str, result: bool = False) -> list[InterruptJSON]:
        """A tool call's pending approvals (``result``: client tool waits); NotFound, Conflict."""
        reasons, what = (CLIENT_TOOL, "a result") if result else (APPROVALS, "an approval")
        found = [
            i for i in for_resource(store=self.store, resource_id=tool_id) if i["reason"] in reasons
        ]
        pending = [i for i in found if i["status"] == InterruptStatus.PENDING]
        if not found:
            raise NotFound(f"no tool invocation {tool_id} waiting for {what}")
        if not pending:
            raise Conflict(f"tool invocation {tool_id} is no longer waiting for {what}")
        return pending

    def settle(
        self, tool_id: str, decision: str, data: Any, route: str, result: bool = False
    ) -> list[InterruptJSON]:
        """Resolve a tool invocation's pending interrupts as the API ``route``; its run goes on."""
        settled = [
            resolve_interrupt(
                store=self.store,
                interrupt_id=interrupt["id"],
                decision=decision,
                data=data,
                by={"how": "route", "route": route},
            )
            for interrupt in self.pending(tool_id, result)
        ]
        self.tell("tool", tool_id, f"{decision} ({', '.join(str(i['reason']) for i in settled)})")
        run_id = str(settled[0]["run_id"])
        if not list_interrupts(store=self.store, run_id=run_id):
            self.continue_settled([run_id])
            self.await_going_on(run_id)
        return settled

    def await_going_on(self, run_id: str) -> None:
        """Wait a little for a run just let go on to work, so a client sees it working next."""
        deadline = time.monotonic() + GO_ON_WAIT
        if (run := get_run(self.store, run_id)) is None:
            return
        # Woken by the run's next write here, or a look a second later for another process's.
        with watching(str(run.get("chat_id"))) as wake:
            while (run := get_run(self.store, run_id)) is not None and waiting(run):
                if (left := deadline - time.monotonic()) <= 0:
                    return
                wake.wait(min(GO_ON_FALLBACK, left))

    def tell(self, action: str, target: str, detail: str) -> None:
        """A live line for what the agent routes did."""
        report_api(self.report, action, target, 200, detail)


APPROVALS = (InterruptReason.TOOL_APPROVAL, InterruptReason.HOOK_GATE)  # settled by approving
CLIENT_TOOL = (InterruptReason.CLIENT_TOOL,)  # settled by a client tool's result


def tool_name(interrupt: Mapping[str, object]) -> str | None:
    """The tool an approval (``meta.tool_name``) or a tool gate (``meta.data.tool``) holds."""
    meta = found if isinstance(found := interrupt.get("meta"), dict) else {}
    data = found if isinstance(found := meta.get("data"), dict) else {}
    return next((n for n in (meta.get("tool_name"), data.get("tool")) if isinstance(n, str)), None)
