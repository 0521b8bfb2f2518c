"""Simulations in the store: the simulation record, its scenario, its agent, and the private
record of its hooks.

A simulation (kind ``sim``) is what changes on every turn: the next turn to begin, its status,
the chat it drives. Its scenario (kind ``scenario``, same id) is written once when it starts and
only grows (``belt serve``'s emulated chats add turns). The agent (kind ``agent``) is what the
scenario declared of it. The private ``hooks`` record keeps the simulation's hook declarations
with their full webhook URLs and its ``--route`` routes, out of the public objects.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from belt.store.shapes import record_shape

SIM = "sim"
SCENARIO = "scenario"
AGENT = "agent"
HOOKS = "hooks"
"""The private record of a simulation's hooks (full webhook URLs) and its routes."""


class Simulation(TypedDict):
    """A simulation's changing record (kind ``sim``)."""

    id: str
    chat_id: str
    next_turn: int
    status: str
    dialect: NotRequired[str]
    agent_id: NotRequired[str]
    hooks: NotRequired[list[Any]]
    parent: NotRequired[dict[str, Any]]
    last_reply: NotRequired[int | None]
    source: NotRequired[Any]
    hooks_file: NotRequired[Any]
    name: NotRequired[Any]
    created_at: NotRequired[Any]
    profile: NotRequired[Any]
    profile_revision: NotRequired[Any]


class Scenario(TypedDict):
    """The scenario a simulation was started from (kind ``scenario``, the simulation's id)."""

    turns: list[Any]
    agent: NotRequired[dict[str, Any]]
    chat: NotRequired[dict[str, Any]]
    agents: NotRequired[dict[str, Any]]


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


record_shape(SIM, Simulation)
record_shape(SCENARIO, Scenario)
record_shape(HOOKS, SimHooks)
record_shape(AGENT, Agent)
