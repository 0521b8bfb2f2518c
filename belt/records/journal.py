"""The journals of hook deliveries: ``belt serve``'s (docs/serve.md) and the replays'."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

from belt.store import Store

JOURNAL = "journal"  # logs/journal/<id>.jsonl
SERVE = "serve"
REPLAY = "replay"


class ServeLine(TypedDict):
    """One line of ``belt serve``'s journal; read back, it is outside input to check."""

    kind: Literal["hook"]
    at: str
    route: str
    name: str | None
    headers: dict[str, str]
    webhook_id: NotRequired[str]
    redelivery: NotRequired[bool]
    """A signed message delivered again, answered as the first time (no ``request``)."""
    request: NotRequired[Any]
    event: NotRequired[str]
    tool: NotRequired[str]
    decision: NotRequired[str]
    reason: NotRequired[str]
    rule: NotRequired[int]
    warnings: NotRequired[list[str]]
    injected: NotRequired[bool]
    error: NotRequired[str]
    status: NotRequired[int]
    response: NotRequired[dict[str, object]]
    duration_ms: NotRequired[float]
    journal_error: NotRequired[str]
    """Set on the line reported (not written) when the journal could not be written."""


class ReplayLine(TypedDict):
    """One line of the replays' journal: a payload delivered again, beside the replay's row."""

    kind: Literal["replay"]
    replay_id: str
    at: str
    source: str
    target: str
    request: Any


def append_serve_lines(store: Store, lines: list[ServeLine]) -> None:
    """Append lines to ``belt serve``'s journal in one write (a group commit; not synced)."""
    store.append_group(JOURNAL, SERVE, lines, sync=False)


def append_replay_line(store: Store, line: ReplayLine, row: Mapping[str, object]) -> None:
    """Append one replayed delivery, with its row's fields, to the replays' journal."""
    store.append(JOURNAL, REPLAY, {**line, **row}, sync=False)


HEADERS_KEPT = 40
HEADER_CHARS = 512
MASK = "***"
_SECRET_WORDS = ("auth", "cookie", "signature", "secret", "token", "key", "password")
_SECRET_NAME = re.compile("|".join(_SECRET_WORDS))
NAMES_KEPT = 256
"""How many header names the journal remembers the spelling and secrecy of."""
_names: dict[bytes, tuple[str, bool]] = {}


def _header_name(raw: bytes) -> tuple[str, bool]:
    """A header's name as the journal spells it (lowercase), and whether its value is masked."""
    if len(_names) >= NAMES_KEPT:
        _names.clear()
    name = raw.decode("latin-1").lower()
    known = _names[raw] = (name, _SECRET_NAME.search(name) is not None)
    return known


def journal_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers as the journal keeps them: secrets masked, values and number bounded."""
    kept: dict[str, str] = {}
    for name_bytes, value_bytes in raw[:HEADERS_KEPT]:
        name, secret = _names.get(name_bytes) or _header_name(name_bytes)
        value = MASK if secret else value_bytes.decode("latin-1")
        if len(value) > HEADER_CHARS:
            value = value[:HEADER_CHARS] + "…"
        kept[name] = f"{kept[name]}, {value}" if name in kept else value
    return kept
