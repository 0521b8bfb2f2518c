"""The one strict JSON (and TOML) reader for everything that comes from outside.

It refuses what Python's own parsers accept and belt must not keep: ``NaN`` and infinities,
numbers that overflow, integers too long to print, lone surrogates, nesting deep enough to
exhaust the stack, and (in what a user writes) a key repeated in one object.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 100
"""Arrays and objects nest at most this deep."""

MAX_INT_DIGITS = 4300
"""Integers have at most this many digits (Python's own limit for converting them to text)."""

_MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class StrictJSONError(ValueError):
    """A document was refused; ``reason`` says why, with its line and column when known."""

    def __init__(self, reason: str, lineno: int | None = None, colno: int | None = None) -> None:
        where = f"line {lineno}, column {colno}: " if lineno is not None else ""
        super().__init__(f"{where}{reason}")
        self.reason = reason
        self.lineno = lineno
        self.colno = colno


def _refuse_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON number (refused)")


def _parse_int(text: str) -> int:
    if (digits := len(text.lstrip("-"))) > MAX_INT_DIGITS:
        raise StrictJSONError(f"an integer has {digits} digits (the limit is {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    if not math.isfinite(value := float(text)):
        shown = text if len(text) <= 40 else text[:39] + "…"
        raise StrictJSONError(f"the number {shown} is not finite (refused)")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                shown = json.dumps(key if len(key) <= 40 else key[:39] + "…")
                raise StrictJSONError(f"the key {shown} is repeated in one object (refused)")
            seen.add(key)
    return document


# Made once: json.loads with these hooks makes a decoder per call, and a decoder keeps no state.
_HOOKS: Any = {
    "parse_constant": _refuse_constant,
    "parse_int": _parse_int,
    "parse_float": _parse_float,
}
_DECODER = json.JSONDecoder(**_HOOKS)
_UNIQUE_DECODER = json.JSONDecoder(**_HOOKS, object_pairs_hook=_unique_keys)


def _depth_error() -> StrictJSONError:
    return StrictJSONError(f"nested deeper than {MAX_DEPTH} levels")


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (brackets in strings skipped)."""
    # Counting is at C speed; only a text with many brackets needs the exact walk.
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(1 if char in "[{" else -1 for char in brackets), default=0)


def decode(data: str | bytes, *, unique_keys: bool = False) -> Any:
    """Parse one JSON document strictly; StrictJSONError says why one is refused.
    ``unique_keys`` refuses an object that repeats a key (for files and options a user writes)."""
    if isinstance(data, bytes):
        try:
            # Strict UTF-8 refuses an encoded surrogate, so the text holds none.
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    else:
        text = data
        _refuse_surrogate(text, "holds")
    if nesting_depth(text) > MAX_DEPTH:
        raise _depth_error()
    try:
        document = (_UNIQUE_DECODER if unique_keys else _DECODER).decode(text)
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise _depth_error() from None
    if _SURROGATE_ESCAPE.search(text):
        check_value(document)  # its numbers and depth are checked: it finds a surrogate
    return document


def decode_toml(text: str) -> dict[str, Any]:
    """Parse a TOML document with the same refusals as ``decode``; TOMLDecodeError for syntax."""
    import tomllib  # noqa: PLC0415 - TOML input only

    _refuse_surrogate(text, "holds")
    try:
        document = tomllib.loads(text, parse_float=_parse_float)
    except RecursionError:
        raise _depth_error() from None
    except ValueError as exc:
        # tomllib converts integers with int(), which refuses over 4300 digits.
        if isinstance(exc, StrictJSONError | tomllib.TOMLDecodeError):
            raise
        raise StrictJSONError(f"an integer has more than {MAX_INT_DIGITS} digits") from None
    check_value(document)
    return document


def check_value(value: Any) -> None:
    """Refuse a decoded value that nests too deep or holds NaN, infinity, or a huge integer."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth >= MAX_DEPTH:
                raise _depth_error()
            for key, child in item.items():
                if isinstance(key, str):
                    _refuse_surrogate(key, "a string holds")
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if depth >= MAX_DEPTH:
                raise _depth_error()
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            _refuse_surrogate(item, "a string holds")
        elif isinstance(item, float) and not math.isfinite(item):
            raise StrictJSONError(f"{item!r} is not a JSON number (refused)")
        elif isinstance(item, int) and not isinstance(item, bool):
            if item.bit_length() > _MAX_INT_BITS:
                raise StrictJSONError(f"an integer has more than {MAX_INT_DIGITS} digits")


def unsendable(value: Any) -> str | None:
    """Why ``value`` cannot be sent as strict JSON (``check_value``, then encoded), or None."""
    try:
        check_value(value)
        json.dumps(value, allow_nan=False)
    except (StrictJSONError, TypeError, ValueError, RecursionError) as exc:
        return str(exc)
    return None


def _refuse_surrogate(text: str, holder: str) -> None:
    if (found := _SURROGATE.search(text)) is not None:
        shown = f"\\u{ord(found.group()):04x}"
        raise StrictJSONError(f"{holder} a lone surrogate {shown} (not Unicode text)")
