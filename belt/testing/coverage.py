"""``belt test --coverage``: for each hook a scenario declares, how often it fired and what came
of it (each dialect matches its calls to its declared hooks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from belt import dialects
from belt.testing.expect import Facts, injected_per_turn, latency_of, percentile_95

if TYPE_CHECKING:
    from belt.dialects.simreport import SimReport


def scenario_coverage(name: str, loaded: Any, report: SimReport | None) -> list[dict[str, Any]]:
    """One entry per hook the scenario ``name`` declares, with its counts from ``report``."""
    dialect = dialects.get(loaded.dialect)
    entries: dict[Any, dict[str, Any]] = {}
    for hook in dialect.declared(loaded, report):
        entry = {"scenario": name, "index": hook.hook_index, "where": hook.where}
        entry |= {"event": hook.event, "handler_type": hook.handler_type, "handler": hook.handler}
        entry |= {"async": hook.runs_async, "fired": 0}
        entries[hook.key] = {**entry, "outcomes": dict.fromkeys(dialect.outcomes, 0), "tools": {}}
    for call in dialect.calls(report) if report is not None else []:
        if (found := entries.get(call.key)) is None:
            continue
        if call.fired:
            found["fired"] += 1
            found.setdefault("latencies", []).append(latency_of(call.record))
        for outcome in call.outcomes:
            found["outcomes"][outcome] += 1
        if call.tool is not None:
            found["tools"][call.tool] = found["tools"].get(call.tool, 0) + 1
    # What the [[expect]] budgets measure: latency_ms, and injected_tokens (the most for a turn).
    most: dict[str, int] = {}
    if report is not None and dialects.of(report["simulation"]).injects:
        for item in injected_per_turn(Facts(report)):
            handler = str(item.fields["handler"])
            most[handler] = max(most.get(handler, 0), int(item.fields["tokens"]))
    for hooked in entries.values():
        latencies = hooked.pop("latencies", [])
        hooked["latency_ms"] = (
            {"max": max(latencies), "p95": percentile_95(latencies)} if latencies else None
        )
        injected = hooked["outcomes"].get("injected")
        hooked["injected_tokens"] = most.get(str(hooked["handler"])) if injected else None
    return list(entries.values())
