"""Executions in the store: one entry per input a Nexus simulation executed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from belt.store.shapes import record_shape

if TYPE_CHECKING:
    from belt.store import Store

EXECUTION = "execution"
SIM_EXECUTIONS = "sim-executions"


class ExecutionEntry(TypedDict):
    """One execution of a Nexus simulation (kind ``execution``)."""

    turn: int
    kind: str
    state: str
    run_id: NotRequired[str | None]
    run_backed: NotRequired[bool]
    conversation_id: NotRequired[str | None]
    input_message_id: NotRequired[str | None]
    hooks: NotRequired[Any]
    approval_mode: NotRequired[str | None]
    profile: NotRequired[Any]
    """Where its hooks came from (a profile's revision, the scenario, a run it regenerates)."""


record_shape(EXECUTION, ExecutionEntry)


def execution_id(sim_id: str, turn: int) -> str:
    """The store id of one execution's entry on its simulation."""
    return f"{sim_id}-{turn}"


def sim_executions(store: Store, sim_id: str) -> list[ExecutionEntry]:
    """A simulation's execution entries, in turn order."""
    return [
        cast(ExecutionEntry, store.read(EXECUTION, identity))
        for identity in store.members(SIM_EXECUTIONS, sim_id)
    ]


def read_execution(store: Store, sim_id: str, turn: int) -> ExecutionEntry:
    """One execution's entry; NotFound (exit 3) if missing, InvalidInput (exit 5) if damaged."""
    return cast(ExecutionEntry, store.read(EXECUTION, execution_id(sim_id, turn)))


def execution_recorded(store: Store, sim_id: str, turn: int) -> bool:
    """True once a simulation's execution has its entry."""
    return store.get(EXECUTION, execution_id(sim_id, turn)) is not None


def record_execution(store: Store, sim_id: str, entry: ExecutionEntry) -> None:
    """Write one execution's entry and list it on its simulation."""
    identity = execution_id(sim_id, entry["turn"])
    store.write(EXECUTION, identity, dict(entry))
    store.link(SIM_EXECUTIONS, sim_id, identity)


def set_execution_state(store: Store, sim_id: str, turn: int, state: str) -> None:
    """Write the state an execution stopped in onto its entry."""
    store.merge(EXECUTION, execution_id(sim_id, turn), {"state": state})
