"""Simulations in the store: the record that changes every turn (``sim``), its scenario
(``scenario``), its agent (``agent``) and the private ``hooks`` record (full webhook URLs and
``--route`` routes, kept out of the public objects).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from belt.store.shapes import record_shape

if TYPE_CHECKING:
    from belt.store import Store

SIM = "sim"
SCENARIO = "scenario"
AGENT = "agent"
HOOKS = "hooks"
SIM_CHILDREN = "sim-children"


class SimParent(TypedDict):
    """The simulation that started a child (a task chat, a review branch), and why."""

    sim_id: str
    chat_id: str
    run_id: NotRequired[str | None]
    hook_event: NotRequired[str | None]


class Sim(TypedDict):
    """A simulation's changing record (kind ``sim``)."""

    id: str
    chat_id: str
    next_turn: int
    status: str
    dialect: NotRequired[str]
    agent_id: NotRequired[str]
    hooks: NotRequired[list[Any]]
    parent: NotRequired[SimParent]
    last_reply: NotRequired[int | None]
    source: NotRequired[str | None]
    hooks_file: NotRequired[str | None]
    name: NotRequired[str | None]
    created_at: NotRequired[str]
    profile: NotRequired[Any]
    profile_revision: NotRequired[int | None]
    hooks_from: NotRequired[dict[str, str] | None]
    """Where a Nexus profile's lifecycle hooks came from when not from the scenario."""
    kind: NotRequired[str]
    """``chat``, or what started it: a task chat, a review branch."""
    emulated: NotRequired[bool]
    fail_closed: NotRequired[bool]
    tools: NotRequired[dict[str, object]]
    """An emulated chat's tool settings, by tool name."""
    review: NotRequired[dict[str, object]]
    clock: NotRequired[str]
    """The time of the simulation's virtual clock (absent: it runs on wall time)."""
    clock_from_wall: NotRequired[bool]
    """True when that clock started at the wall time (its times differ from run to run)."""
    warnings: NotRequired[list[str]]
    registry: NotRequired[dict[str, object]]
    """What a scenario's registry directory loaded: owner, directory, its entries' to_json."""


class Scenario(TypedDict):
    """The scenario a simulation was started from (kind ``scenario``, the simulation's id)."""

    turns: list[Any]
    agent: NotRequired[dict[str, object]]
    chat: NotRequired[dict[str, object]]
    agents: NotRequired[dict[str, object]]
    executors: NotRequired[dict[str, str]]


class Agent(TypedDict):
    """The agent a scenario declared (kind ``agent``)."""

    id: str
    name: NotRequired[Any]
    context_window: NotRequired[Any]
    compact_at: NotRequired[Any]
    updated_at: NotRequired[Any]


class SimHooks(TypedDict):
    """The private record of a simulation's hooks and routes (private kind ``hooks``)."""

    hooks: list[Any]
    routes: NotRequired[list[Any]]
    located: NotRequired[dict[str, object]]
    """Where each in-process hook's handler is loaded from, by the hook's index."""


record_shape(SIM, Sim)
record_shape(SCENARIO, Scenario)
record_shape(HOOKS, SimHooks)
record_shape(AGENT, Agent)


def write_agent(store: Store, agent: Mapping[str, object]) -> None:
    """Write (or replace) the record of a scenario's agent."""
    store.write(AGENT, str(agent["id"]), agent)


def create_sim(store: Store, sim: Mapping[str, object], scenario: Mapping[str, object]) -> Sim:
    """Write a new simulation, its scenario first; Conflict (exit 4) if its id is taken."""
    sim_id = str(sim["id"])
    store.create(SCENARIO, sim_id, scenario)
    store.create(SIM, sim_id, sim)
    return cast(Sim, sim)


def create_child_sim(
    store: Store, sim: Mapping[str, object], scenario: Mapping[str, object]
) -> Sim:
    """Write a simulation another one started, listed under its parent."""
    created = create_sim(store, sim, scenario)
    write_hooks(store, created["id"], {"hooks": []})
    store.link(SIM_CHILDREN, created["parent"]["sim_id"], created["id"])
    return created


def read_sim(store: Store, sim_id: str) -> Sim:
    """One simulation; NotFound (exit 3) if missing, InvalidInput (exit 5) if damaged."""
    return cast(Sim, store.read(SIM, sim_id))


def get_sim(store: Store, sim_id: str) -> Sim | None:
    """One simulation, or None when there is none."""
    return cast("Sim | None", store.get(SIM, sim_id))


def merge_sim(store: Store, sim_id: str, changes: Mapping[str, object]) -> Sim:
    """Under the simulation's lock: set the fields in ``changes``, keep the rest; return it."""
    return cast(Sim, store.merge(SIM, sim_id, changes))


def change_sim(store: Store, sim_id: str, change: Callable[[Sim], Sim]) -> Sim:
    """Change a simulation under its lock; returns it."""
    return store.update(SIM, sim_id, change)


def set_review_outcomes(store: Store, sim_id: str, outcomes: list[dict[str, object]]) -> None:
    """Record on a review's simulation what saving each of its candidates did."""

    def apply(sim: Sim) -> Sim:
        sim["review"] = {**sim["review"], "outcomes": outcomes}
        return sim

    store.update(SIM, sim_id, apply)


def read_scenario(store: Store, sim_id: str) -> Scenario:
    """The scenario a simulation was started from (checked as a model by its reader)."""
    return cast(Scenario, store.read(SCENARIO, sim_id))


def append_turn(store: Store, sim_id: str, turn: Mapping[str, object]) -> int:
    """Add a turn to a simulation's scenario; returns its index."""

    def apply(scenario: Scenario) -> Scenario:
        scenario["turns"] = [*(scenario.get("turns") or []), turn]
        return scenario

    return len(store.update(SCENARIO, sim_id, apply)["turns"]) - 1


def read_hooks(store: Store, sim_id: str) -> SimHooks:
    """The private record of a simulation's hooks; NotFound (exit 3) when it has none."""
    return cast(SimHooks, store.read_private(HOOKS, sim_id))


def write_hooks(store: Store, sim_id: str, hooks: SimHooks) -> None:
    """Write (or replace) the private record of a simulation's hooks and routes."""
    store.write_private(HOOKS, sim_id, hooks)
