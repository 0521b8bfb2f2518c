"""The lines the server's parts report as they work (``belt serve`` prints them live)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from belt.records.ids import now_iso

Reporter = Callable[[dict[str, Any]], None]
"""Where a part sends its lines: ``belt serve``'s live output, or nowhere (``None``)."""


def report_api(report: Reporter | None, action: str, target: str, status: int, detail: str) -> None:
    """Report one answer of the server's API: what was done, to what, and how it ended."""
    if report is not None:
        what = {"action": action, "target": target, "status": status, "detail": detail}
        report({"kind": "api", "at": now_iso(), **what})
