"""Small text helpers shared by records, rendering and messages."""

from __future__ import annotations

import json
from typing import Any


def short(value: Any, limit: int = 80) -> str:
    """A value as one line of at most ``limit`` characters (JSON for anything not a string)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def printable(text: str) -> str:
    """``text`` with control characters written as escapes, so it cannot drive a terminal."""
    if text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


def describe(value: Any) -> str:
    """A short description of a JSON value's type, for messages."""
    kinds: list[tuple[type, str]] = [(bool, "a boolean"), (int, "an integer"), (float, "a number")]
    kinds += [(str, "a string"), (list, "an array"), (dict, "an object"), (type(None), "null")]
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def message_of(exc: BaseException) -> str:
    """``str(exc)``, or "" when the exception's own ``__str__`` raises (user code's may)."""
    try:
        return str(exc)
    except Exception:
        return ""
