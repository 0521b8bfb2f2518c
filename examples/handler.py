"""A hook handler for `belt serve --handler examples/handler.py:decide`.

It receives the LifecycleHookPayload (its parameter's annotation asks for it; without that
annotation it would get the JSON object as a dict, as every Python handler does) and returns a
dict (or a LifecycleHookResponse, or None for allow). The same function serves a scenario as
`py:examples/handler.py:decide`, and `belt replay --handler` and `belt trigger --to py:` alike.
This one is the spec's policy example in Python: delete_file is denied unless the path is under
/tmp/ once normalised (so /tmp/../etc/passwd and /tmpevil/x are denied), and every turn start is
reminded of the rule once.
"""

from __future__ import annotations

import posixpath
from typing import Any

from belt.wire.platform import LifecycleHookPayload


def decide(payload: LifecycleHookPayload) -> dict[str, Any] | None:
    """Deny deletions outside /tmp/; remind the model of the rule at each turn start."""
    data = payload.data or {}
    if payload.event == "agent.tool_call" and data.get("tool") == "delete_file":
        path = posixpath.normpath(str((data.get("arguments") or {}).get("path", "")))
        # normpath resolves //, . and .. without touching the disk, but keeps a leading //
        # (POSIX leaves its meaning open; Linux reads it as /).
        if not path.startswith(("/tmp/", "//tmp/")):
            return {"decision": "deny", "reason": "only /tmp deletions allowed"}
    if payload.event == "agent.turn_start":
        return {
            "inject": {
                "content": "Reminder: only delete files in /tmp.",
                "role": "system",
                "ttl_turns": 1,
                "dedup_key": "delete-policy",
            }
        }
    return None
