"""A simulation's records in the store: written when it begins, found from one of its runs, and
changed when ``belt sim stop`` cancels one of its runs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from belt.deliveries.effects import is_in_process, url_host
from belt.engine.dispatch import Route
from belt.engine.execution import End, SimStatus
from belt.errors import Conflict, NotFound
from belt.handlers.inprocess import Located
from belt.records import leases
from belt.records.chats import CHAT, create_chat
from belt.records.ids import new_id, now_iso
from belt.records.interrupts import list_interrupts
from belt.records.messages import Recorder, run_event
from belt.records.runs import (
    EMULATED_RUNS,
    GATED_RUNS,
    SIM_RUNS,
    TERMINAL_STATES,
    Run,
    RunView,
    cancel_run,
    get_run,
    mark_run,
    merge_run,
    run_dto,
)
from belt.records.sims import (
    HOOKS,
    Sim,
    create_sim,
    merge_sim,
    read_hooks,
    read_sim,
    write_agent,
)
from belt.store import clock
from belt.store.clock import VirtualClock, parse_timestamp
from belt.store.store import damaged
from belt.wire.enums import AgentRunState, ChatStatus, ToolInvocationStatus
from belt.wire.platform import HookHandlerType, LifecycleHookConfig
from belt.wire.validate import model_problems

if TYPE_CHECKING:
    from belt.engine.simulation import Dialect
    from belt.store import Store

OPEN_TOOL_STATES = frozenset({"pending", "in_progress", "awaiting_approval", "awaiting_input"})


def record_simulation(
    store: Store,
    *,
    dialect: str,
    loaded: Any,
    agent: Mapping[str, object],
    scenario: Mapping[str, object],
    disable_hooks: bool = False,
    **fields: Any,
) -> Sim:
    """Write a new simulation of a loaded scenario: its agent, its fresh chat, its scenario."""
    stamp = now_iso()
    spec = loaded.scenario.agent
    agent_id = spec.id or new_id("ag")
    limits = {key: getattr(spec, key) for key in ("name", "context_window", "compact_at")}
    write_agent(store, {"id": agent_id, **limits, **agent, "updated_at": stamp})
    sim_id = new_id("sim")
    chat = create_chat(
        store,
        agent_id=agent_id,
        chat_id=loaded.scenario.chat.id,
        disable_hooks=disable_hooks,
        sim_id=sim_id,
        dialect=dialect,
    )
    return create_sim(  # the scenario apart from the record that changes every turn
        store,
        {
            "id": sim_id,
            "dialect": dialect,
            "source": str(Path(loaded.source).resolve()),
            "hooks_file": str(Path(loaded.hooks_file).resolve()) if loaded.hooks_file else None,
            "name": spec.name,
            "agent_id": agent_id,
            "chat_id": chat["id"],
            "next_turn": 0,
            "status": SimStatus.RUNNING.value,
            "created_at": stamp,
            **({"warnings": list(loaded.warnings)} if getattr(loaded, "warnings", None) else {}),
            **fields,
        },
        scenario,
    )


def refuse_pending(store: Store, run_id: str, waits: str) -> None:
    """Conflict while the run has pending interrupts (``waits``: for what, ``{n}``: how many)."""
    if pending := list_interrupts(store=store, run_id=run_id):
        ids = ", ".join(i["id"] for i in pending)
        raise Conflict(
            f"run {run_id} still {waits.format(n=len(pending))}: {ids}",
            hint=f"resolve them first: `belt interrupt resolve {pending[0]['id']} allow` (or "
            f"deny), or `belt sim resume {run_id} --wait` goes on once they are settled",
        )


def sim_of_run(store: Store, run_id: str) -> Sim:
    """The simulation a run belongs to; an unknown run exits 3."""
    if (run := get_run(store, run_id)) is None or "sim_id" not in run:
        raise NotFound(f"no simulated run {run_id}", hint="list runs with `belt sim list`")
    return read_sim(store, run["sim_id"])


def stranded_at(store: Store, sim: Mapping[str, Any]) -> str | None:
    """The last run of a simulation whose process died between two runs, else None."""
    last = last_run_ended(store, sim)
    return None if last is None or leases.holder_alive(last.get("lease")) else str(last["id"])


def last_run_ended(store: Store, sim: Mapping[str, Any]) -> Run | None:
    """The last run of a ``running`` simulation when it has ended (``stranded_at``)."""
    if sim.get("status") != SimStatus.RUNNING or sim.get("emulated"):
        return None
    last = latest_run(store, sim)
    return last if last is not None and last.get("state") in TERMINAL_STATES else None


def latest_run(store: Store, sim: Mapping[str, Any]) -> Run | None:
    """The last run of a simulation, None before its first."""
    for run_id in reversed(store.members(SIM_RUNS, str(sim["id"]))):
        last = get_run(store, run_id)  # None: listed by a process killed before writing it
        if last is not None:
            return last
    return None


def stop_run(
    store: Store, sim: Sim, dialect: type[Dialect], run_id: str, *, force: bool
) -> RunView:
    """Cancel a run: its pending gates or hook tasks are cancelled and it will not resume."""
    how = "force-stopped" if force else "stopped"
    stamp = sim.get("clock")
    on_clock = VirtualClock(parse_timestamp(stamp)) if isinstance(stamp, str) else None
    # On the simulation's clock; the run's end and the chat's idle state are one step (its lock).
    with clock.using(on_clock), store.lock(CHAT, str(sim["chat_id"])):
        # The run is cancelled before its pending work, so no late result is ever applied.
        run = cancel_run(store, run_id, force=force, how=how, hint=dialect.stop_hint)
        text, kept = dialect.cancel_pending(store, sim, run, how)
        run = merge_run(store, run_id, kept)
        recorder = Recorder(store, str(sim["chat_id"]))
        for message in (m for m in recorder.messages if m.get("agent_run_id") == run_id):
            calls = message.get("tool_invocations") or []
            if open_calls := [call for call in calls if call["status"] in OPEN_TOOL_STATES]:
                for invocation in open_calls:
                    invocation["status"] = ToolInvocationStatus.CANCELLED.value
                recorder.save_message(message)
        reply = (run.get("execution") or {}).get("reply")
        recorder.add_message(
            role="event",
            run_id=run_id,
            message_id=reply if isinstance(reply, str) and reply not in recorder.by_id else None,
            content=[
                run_event(
                    run_id,
                    kind="run_ended",
                    state=AgentRunState.CANCELED.value,
                    reason=f"{how} by user",
                    text=text,
                )
            ],
            sim=dialect.run_tags(run),
        )
        if recorder.chat.get("active_run_id") == run_id:
            recorder.update_chat(status=ChatStatus.IDLE.value, active_run_id=None)
        mark_run(store, EMULATED_RUNS, run_id, on=False)
    mark_run(store, GATED_RUNS, run_id, on=False)
    merge_sim(store, str(sim["id"]), {"status": SimStatus.CANCELED.value})
    dialect.mark_ended(store, sim, run_id, End.CANCELED)
    return run_dto(run, dialect.run_fields())


def stored_hooks(hooks: list[LifecycleHookConfig]) -> list[dict[str, object]]:
    """Hooks as the store keeps them: a webhook by its host only, with a digest of its URL."""
    out = []
    for hook in hooks:
        wire = hook.to_wire()
        url = hook.handler if hook.type == HookHandlerType.WEBHOOK else None
        if url and not is_in_process(url):
            wire["handler"] = url_host(url)
            wire["handler_sha256"] = hashlib.sha256(url.encode()).hexdigest()
        out.append(wire)
    return out


def reload_hooks(store: Store, sim: Sim) -> tuple[list[LifecycleHookConfig], list[Route]]:
    """The hooks (full URLs) and routes stored privately, so any process can continue the run."""
    try:
        private = read_hooks(store, sim["id"])
    except NotFound:
        raise Conflict(
            f"simulation {sim['id']} has no stored hooks to continue with",
            hint="it was made by an older belt; start it again with `belt sim run`",
        ) from None
    where = store.private_path(HOOKS, sim["id"])
    try:
        hooks = [LifecycleHookConfig.model_validate(hook) for hook in private["hooks"]]
    except ValidationError as exc:
        problems = model_problems(exc)
        raise damaged(where, f"a hook is not a hook declaration ({problems[0]})") from None
    try:
        routes = [
            Route(str(item["prefix"]), str(item["target"])) for item in private.get("routes") or []
        ]
    except (KeyError, TypeError):
        raise damaged(where, "a route is not an object with a prefix and a target") from None
    return hooks, routes


def reload_located(store: Store, sim: Sim) -> dict[int, Located]:
    """Where the simulation's in-process hooks load from, by index, as stored privately."""
    try:
        private = read_hooks(store, sim["id"])
    except NotFound:
        return {}
    try:
        return {int(i): Located.from_wire(raw) for i, raw in (private.get("located") or {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise damaged(
            store.private_path(HOOKS, sim["id"]), "a located handler is not a spec and a root"
        ) from None
