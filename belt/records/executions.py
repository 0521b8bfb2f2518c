"""Executions in the store: one entry per input a Nexus simulation executed.

Each input of a Nexus simulation (a message, a mail, a regeneration) is one execution. Its entry
(kind ``execution``, id ``<sim id>-<turn>``) says what kind it was, the run that carried it (if
any), the hooks and profile it captured, and the state it stopped in; the simulation's
``sim-executions`` index lists them in turn order.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from belt.store.shapes import record_shape

EXECUTION = "execution"
SIM_EXECUTIONS = "sim-executions"


class ExecutionEntry(TypedDict):
    """One execution of a Nexus simulation (kind ``execution``)."""

    turn: int
    kind: str
    state: str
    run_id: NotRequired[str | None]
    run_backed: NotRequired[Any]
    conversation_id: NotRequired[Any]
    input_message_id: NotRequired[Any]
    hooks: NotRequired[Any]
    approval_mode: NotRequired[Any]
    profile: NotRequired[Any]


record_shape(EXECUTION, ExecutionEntry)
