"""In-process hooks for the test scenarios here: `py:hooks.py:FUNC` from a scenario beside it.

A `py:` handler stands in for a webhook server: it gets the payload as the JSON object a
webhook receives (a dict) and answers what a webhook would: a dict, or None for allow.
"""

from __future__ import annotations

import posixpath
from typing import Any


def guard(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Deny delete_file outside /tmp/; remind the model of the rule before each turn."""
    data = payload.get("data") or {}
    if payload["event"] == "agent.tool_call" and data.get("tool") == "delete_file":
        path = posixpath.normpath(str((data.get("arguments") or {}).get("path", "")))
        # normpath resolves //, . and .. without touching the disk, but keeps a leading //
        # (POSIX leaves its meaning open; Linux reads it as /).
        if not path.startswith(("/tmp/", "//tmp/")):
            return {"decision": "deny", "reason": "only /tmp deletions allowed"}
    if payload["event"] == "agent.turn_start":
        return {
            "inject": {
                "content": "Reminder: only files under /tmp/ may be deleted.",
                "ttl_turns": 1,
                "dedup_key": "delete-policy",
            }
        }
    return None
