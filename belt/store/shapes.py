"""The shape of every kind of record in the store, checked whenever one is read.

A record that is not what belt wrote is damaged (reported, never written over). Each kind's shape
is derived from the TypedDict its owner in ``belt.records`` registers with ``record_shape``.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from functools import cache
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

OPTIONAL = None.__class__
ANYTHING = object

Kinds = tuple[type, ...]
Shape = tuple[dict[str, Kinds], dict[str, Kinds]]  # required and optional fields, their types

RECORDS: dict[str, object] = {}  # the TypedDict of each kind of record, as its owner registered it


def record_shape(kind: str, record: object) -> None:
    """Check each ``kind`` record a shape-checking store reads against TypedDict ``record``."""
    if not is_typeddict(record):
        raise TypeError(f"the shape of {kind} records must be a TypedDict, not {record!r}")
    RECORDS[kind] = record


@cache
def derive(record: object) -> Shape:
    """The required and optional fields of a TypedDict and their types (from the hints)."""
    hints = get_type_hints(record, include_extras=True)
    total = bool(getattr(record, "__total__", True))
    required: dict[str, Kinds] = {}
    optional: dict[str, Kinds] = {}
    for name, hint in hints.items():
        origin = get_origin(hint)
        if origin is NotRequired:
            optional[name] = kinds_of(get_args(hint)[0])
        elif origin is Required or total:
            required[name] = kinds_of(get_args(hint)[0] if origin is Required else hint)
        else:
            optional[name] = kinds_of(hint)
    return required, optional


def kinds_of(annotation: Any) -> Kinds:
    """The JSON types a field annotated ``annotation`` may hold."""
    origin = get_origin(annotation)
    if annotation is Any:
        return (ANYTHING,)
    if annotation is None or annotation is OPTIONAL:
        return (OPTIONAL,)
    if annotation in (str, int, float, bool, dict, list):
        return (annotation,)
    if is_typeddict(annotation) or origin in (dict, Mapping):
        return (dict,)
    if origin in (list, Sequence):
        return (list,)
    if origin is Union or origin is types.UnionType:
        return tuple(dict.fromkeys(k for arg in get_args(annotation) for k in kinds_of(arg)))
    if origin is Literal:
        return tuple(dict.fromkeys(type(value) for value in get_args(annotation)))
    raise TypeError(f"a record field cannot be annotated {annotation!r}: it has no JSON shape")


def shape(kind: str) -> Shape | None:
    """The shape of the records of ``kind`` (None when no owner registered one)."""
    record = RECORDS.get(kind)
    return None if record is None else derive(record)


NAMES = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
NAMES |= {dict: "an object", list: "an array"}


def _named(kinds: Kinds) -> str:
    return " or ".join(NAMES.get(k, "null") for k in kinds)


def shape_problem(kind: str, data: Mapping[str, object]) -> str | None:
    """What is wrong with a record of ``kind`` (None when its shape is right, or unknown)."""
    if (found := shape(kind)) is None:
        return None
    required, optional = found
    for name, kinds in required.items():
        if name not in data:
            return f"its {name} is missing"
        if not fits(data[name], kinds):
            return f"its {name} is not {_named(kinds)}"
    for name, kinds in optional.items():
        if name in data and not fits(data[name], kinds):
            return f"its {name} is not {_named(kinds)}"
    return None


def fits(value: Any, kinds: Kinds) -> bool:
    """True when ``value`` is of one of ``kinds`` (a bool is not a whole number)."""
    if ANYTHING in kinds:
        return True
    if isinstance(value, bool):
        return bool in kinds
    return (isinstance(value, int) and float in kinds) or isinstance(value, kinds)
