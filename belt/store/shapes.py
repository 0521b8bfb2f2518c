"""The shape of every kind of record in the store, checked whenever one is read.

A file that is valid JSON but not the record belt wrote (a field missing, a number where a
string belongs) is as damaged as one that is not JSON: it is reported with its path and left as
it is, before anything acts on it, and never written over (``Store.write`` reads what is there
first). Only the fields belt relies on are checked; a record may carry more.
"""

from __future__ import annotations

from typing import Any

OPTIONAL = None.__class__

STR = (str,)
INT = (int,)
OBJ = (dict,)
LIST = (list,)
MAYBE_STR = (str, OPTIONAL)
MAYBE_OBJ = (dict, OPTIONAL)
MAYBE_INT = (int, OPTIONAL)

Shape = dict[str, tuple[type, ...]]
"""Required fields and the types each may have."""

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # kind: (required fields, optional fields)
    "run": (
        {"id": STR, "state": STR},
        {
            "sim_id": STR,
            "chat_id": MAYBE_STR,
            "turn_index": INT,
            "execution": MAYBE_OBJ,
            "lease": MAYBE_OBJ,
            "error": MAYBE_STR,
            "hooks": MAYBE_OBJ,
            "attention": MAYBE_OBJ,
        },
    ),
    "chat": (
        {"id": STR},
        {
            "status": MAYBE_STR,
            "agent_data": MAYBE_OBJ,
            "turn_count": INT,
            "run_count": INT,
            "active_run_id": MAYBE_STR,
            "sim_id": STR,
        },
    ),
    "message": (
        {"id": STR, "chat_id": STR, "order": INT, "role": STR, "content": LIST},
        {"sim": OBJ, "tool_invocations": LIST, "agent_run_id": MAYBE_STR, "status": STR},
    ),
    "interrupt": (
        {"id": STR, "status": STR, "run_id": STR},
        {"expires_at": MAYBE_STR, "resolution": MAYBE_STR, "default_resolution": MAYBE_STR},
    ),
    "sim": (
        {"id": STR, "chat_id": STR, "next_turn": INT, "status": STR},
        {"dialect": STR, "agent_id": STR, "hooks": LIST, "parent": OBJ, "last_reply": MAYBE_INT},
    ),
    "scenario": ({"turns": LIST}, {"agent": OBJ, "chat": OBJ, "agents": OBJ}),
    "hooktask": (
        {
            "id": STR,
            "task_key": STR,
            "event": STR,
            "tool": STR,
            "status": STR,
            "attempt": INT,
            "run_id": STR,
            "timeout_ms": INT,
        },
        {"deadline": MAYBE_STR, "decision": MAYBE_OBJ, "error": MAYBE_OBJ, "approval": MAYBE_OBJ},
    ),
    "execution": ({"turn": INT, "kind": STR, "state": STR}, {"run_id": MAYBE_STR}),
    "profile": ({"configuration": OBJ, "revision": INT}, {}),
    # The private record of a simulation's hooks (full webhook URLs) and its --route routes.
    "hooks": ({"hooks": LIST}, {"routes": LIST}),
}


def _named(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", int: "a whole number", dict: "an object", list: "an array"}
    return " or ".join(names.get(k, "null") for k in kinds)


def shape_problem(kind: str, data: dict[str, Any]) -> str | None:
    """What is wrong with a record of ``kind`` (None when its shape is right, or unknown)."""
    found = SHAPES.get(kind)
    if found is None:
        return None
    required, optional = found
    for name, kinds in required.items():
        if name not in data:
            return f"its {name} is missing"
        if not _fits(data[name], kinds):
            return f"its {name} is not {_named(kinds)}"
    for name, kinds in optional.items():
        if name in data and not _fits(data[name], kinds):
            return f"its {name} is not {_named(kinds)}"
    return None


def _fits(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)
