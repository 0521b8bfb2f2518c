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
