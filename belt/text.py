"""Small text helpers shared by records, rendering and messages."""

from __future__ import annotations

import json
from typing import Any


def short(value: Any, limit: int = 80) -> str:
    """A value as one line of at most ``limit`` characters (JSON for anything not a string)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
