"""The journals of hook deliveries: ``belt serve``'s (every hook request answered) and
``belt replay``'s (every payload delivered again), logs in the store under one name.

``belt serve`` appends one record per hook request (docs/serve.md, "The journal"); ``belt
replay`` and the inspector's replays append one per payload replayed. Readers take them from
here so the names are spelled once.
"""

from __future__ import annotations

JOURNAL = "journal"
"""The log family of the journals (``logs/journal/<id>.jsonl``)."""

SERVE = "serve"
"""``belt serve``'s journal: one record per hook request and the answer given."""

REPLAY = "replay"
"""The replays' journal: each payload delivered again, what was recorded and what came back."""

HEADERS_KEPT = 40
HEADER_CHARS = 512
MASK = "***"
_SECRET_WORDS = ("auth", "cookie", "signature", "secret", "token", "key", "password")


def journal_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers as the journal keeps them: every value that can carry a secret (an
    authorization, a cookie, a signature, a key or token) masked, each value and their number
    bounded."""
    kept: dict[str, str] = {}
    for name_bytes, value_bytes in raw[:HEADERS_KEPT]:
        name = name_bytes.decode("latin-1").lower()
        if any(word in name for word in _SECRET_WORDS):
            value = MASK
        else:
            value = value_bytes.decode("latin-1")
            if len(value) > HEADER_CHARS:
                value = value[:HEADER_CHARS] + "…"
        kept[name] = f"{kept[name]}, {value}" if name in kept else value
    return kept
