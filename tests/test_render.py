"""How interrupts read on a terminal, whatever a store or a platform hands over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from belt.display.render import (
    deadline,
    expires_in,
    gate_event,
    gate_holds,
    interrupt_table,
    review_lines,
    watch_line,
)

NOW = datetime(2026, 8, 11, 14, 0, 0, tzinfo=UTC)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
ITEMS = st.fixed_dictionaries(
    {},
    optional={
        "id": JSON,
        "short_id": JSON,
        "status": st.sampled_from(["pending", "resolved", "expired", "cancelled"]) | JSON,
        "resolution": JSON,
        "source": JSON,
        "reason": JSON,
        "run_id": JSON,
        "chat_id": JSON,
        "resource_type": JSON,
        "resource_id": JSON,
        "created_at": JSON,
        "resolved_at": JSON,
        "expires_at": st.sampled_from(["2026-08-11T14:04:12.000Z", "yesterday"]) | JSON,
        "meta": JSON
        | st.fixed_dictionaries(
            {"data": st.fixed_dictionaries({"tool": st.text(max_size=300), "arguments": JSON})}
        ),
    },
)


@given(item=ITEMS, on_expiry=st.sampled_from(["allow", "deny", None]))
def test_any_interrupt_renders_without_failing(item: dict[str, Any], on_expiry: str | None) -> None:
    assert len(gate_holds(item)) <= 30 + 50 + 2
    assert len(gate_event(item)) <= 40
    assert isinstance(gate_event(item), str)
    columns, rows = interrupt_table([(item, on_expiry)], NOW, short_ids=True, statuses=True)
    assert len(rows[0]) == len(columns)
    for kind in ("pending", "opened", "resolved", "expired", "cancelled"):
        text, _ = watch_line(
            {"event": kind, "interrupt": item, "on_expiry": on_expiry}, NOW, short_ids=False
        )
        assert "\n" not in text
    lines = review_lines(item, on_expiry, [], NOW, position="1 of 1", payload_lines=5)
    assert all(isinstance(text, str) for text, _ in lines)


def test_time_left_and_what_happens_then() -> None:
    item = {"status": "pending", "expires_at": "2026-08-11T14:04:12.000Z"}
    assert expires_in(item, NOW) == "4m 12s"
    assert expires_in(item, NOW + timedelta(minutes=10)) == "overdue"
    assert expires_in({**item, "expires_at": "2026-08-11T16:00:00Z"}, NOW) == "2h 0m"
    assert expires_in({**item, "status": "resolved"}, NOW) == "-"
    assert expires_in({**item, "expires_at": "soon"}, NOW) == "?"
    assert deadline(item, NOW, "deny") == "expires in 4m 12s, then deny"
    assert deadline(item, NOW + timedelta(hours=1), None) == (
        "overdue: the next sweep settles it as ?"
    )


def test_what_a_gate_holds() -> None:
    call = {"meta": {"data": {"tool": "delete_file", "arguments": {"path": "/tmp/x"}}}}
    assert gate_holds(call) == 'delete_file({"path": "/tmp/x"})'
    assert gate_holds({"meta": {"turn_count": 2}}) == "turn 2"
    assert gate_holds({"meta": {"turn_count": True}, "resource_type": "turn"}) == "turn"
    assert gate_holds({"resource_type": "tool_invocation", "resource_id": "ti_1"}) == (
        "tool_invocation:ti_1"
    )
    assert gate_event({"source": "hook:agent.start", "reason": "hook_gate"}) == "agent.start"
    assert gate_event({"source": "platform", "reason": "tool_approval"}) == "tool_approval"
