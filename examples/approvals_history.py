"""A recorded history of gates for trying approval rules on (docs/interrupts.md, "Approving at
volume"): fills the store of $BELT_HOME with 300 gates an agent's tool calls opened over a week,
settled by people (through the CLI and the review), by a rule and by expiry, and leaves the last
few pending. The same history every time.

    BELT_HOME=/tmp/approvals-demo python examples/approvals_history.py
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from belt.records.interrupts import create_interrupt, person, resolve_interrupt, sweep
from belt.store import open_store

START = datetime(2026, 8, 3, 8, 0, tzinfo=UTC)
CALLS = [
    ("read_file", {"path": "/srv/app/config.yaml"}, "allow", None),
    ("read_file", {"path": "/srv/app/logs/today.log"}, "allow", None),
    ("run_shell", {"command": "ls -la /srv/app"}, "allow", None),
    ("run_shell", {"command": "grep -r TODO /srv/app"}, "allow", None),
    ("delete_file", {"path": "/tmp/build/cache.bin"}, "allow", None),
    ("delete_file", {"path": "/srv/app/data.db"}, "deny", "the database stays"),
    ("send_email", {"to": "team@example.com"}, "allow", None),
    ("run_shell", {"command": "rm -rf /srv/app/logs"}, "deny", "logs are kept 30 days"),
]
SECRET = ("read_file", {"path": "/home/ana/.ssh/id_ed25519"}, "deny", "a private key never leaves")


def main() -> None:
    store = open_store()
    chance = random.Random(42)
    rule = {"how": "rule", "file": "examples/approvals.toml", "rule": "reads", "digest": "sha256:0"}
    for number in range(300):
        tool, arguments, decision, reason = SECRET if number in (57, 211) else chance.choice(CALLS)
        opened = START + timedelta(minutes=33 * number)
        item = create_interrupt(
            store=store,
            run_id=f"ar_week{number // 6:03d}",
            chat_id=f"ch_week{number // 30:02d}",
            event="agent.tool_call",
            meta={
                "event": "agent.tool_call",
                "agent_id": "ag_ops",
                "data": {"tool": tool, "arguments": arguments},
            },
            timeout=900,
            default_resolution="deny",
            now=opened,
        )
        if number >= 296:
            continue  # still pending
        if number % 25 == 24:
            continue  # nobody came: it expires
        by = rule if number > 250 and tool == "read_file" and decision == "allow" else None
        resolve_interrupt(
            store=store,
            interrupt_id=item["id"],
            decision=decision,
            data={"reason": reason} if reason else None,
            now=opened + timedelta(seconds=chance.randint(20, 600)),
            by=by or person("review" if number % 3 else "cli"),
        )
    sweep(store=store, now=START + timedelta(minutes=33 * 296 - 1))
    print(f"300 gates in {store.root}")


if __name__ == "__main__":
    main()
