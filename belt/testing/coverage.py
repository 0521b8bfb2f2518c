"""Coverage of hooks: for each hook a test scenario declares, how often it fired and what came of
it, so ``belt test --coverage`` can answer "did my hook ever run?".

A platform hook is matched to the ``hook.executed`` records of the scenario's runs by its index
in the agent's hook list and its event (as the dispatcher numbers them); a Nexus hook, declared
per event with one executor tool, to the hook tasks of the scenario's runs and the attention
holds their failures caused. The runs of task chats and review branches a scenario starts are
other agents' hooks and are not counted here.
"""

from __future__ import annotations

from typing import Any

from belt.effects import handler_label
from belt.testing.expect import Facts, injected_per_turn, latency_of, percentile_95

PLATFORM_OUTCOMES = ("allow", "deny", "stop", "suspend", "injected", "failed")
"""What a platform hook's calls produced: its decision (a failed call counts only as failed),
and whether it injected a message."""
NEXUS_OUTCOMES = ("acknowledged", "continued", "failed", "held")
"""What a Nexus hook's task attempts produced: an acknowledgement, a continuation, a failure,
and the attention holds those failures put the execution on."""


def scenario_coverage(
    name: str, loaded: Any, report: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """One entry per hook the scenario ``name`` declares, with its counts from ``report`` (no
    report: the scenario did not run, and nothing fired)."""
    nexus = getattr(loaded, "dialect", "platform") == "nexus"
    return with_budgets(
        (nexus_coverage if nexus else platform_coverage)(name, loaded, report), report
    )


def _entry(name: str, index: int | None, where: str, *kind: Any) -> dict[str, Any]:
    """A hook's entry before its calls are counted; ``kind``: its event, handler type, handler,
    whether it is async, and the outcomes it can have."""
    event, handler_type, handler, runs_async, outcomes = kind
    entry = {"scenario": name, "index": index, "where": where, "event": event}
    entry |= {"handler_type": handler_type, "handler": handler, "async": runs_async, "fired": 0}
    return {**entry, "outcomes": dict.fromkeys(outcomes, 0), "tools": {}}


def with_budgets(
    entries: list[dict[str, Any]], report: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Add what ``[[expect]]`` budgets measure to each hook's entry: ``latency_ms`` (``max`` and
    ``p95`` of its calls, None when it never fired) and ``injected_tokens`` (the most its handler
    injected for one model turn, None when it injected nothing)."""
    most: dict[str, int] = {}
    if report is not None and report["simulation"].get("dialect") != "nexus":
        for item in injected_per_turn(Facts(report)):
            handler = str(item.fields["handler"])
            most[handler] = max(most.get(handler, 0), int(item.fields["tokens"]))
    for entry in entries:
        latencies = entry.pop("latencies", [])
        entry["latency_ms"] = (
            {"max": max(latencies), "p95": percentile_95(latencies)} if latencies else None
        )
        injected = entry["outcomes"].get("injected")
        entry["injected_tokens"] = most.get(str(entry["handler"])) if injected else None
    return entries


def platform_coverage(
    name: str, loaded: Any, report: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The platform hooks of ``loaded`` (a LoadedScenario) and what their calls produced."""
    hooks = list(loaded.hooks)
    # A hooks file given to the command replaces the agent's hooks; the agent's own
    # hooks_file comes before its inline hooks (belt.engine.scenario.scenario_from_document).
    inline = 0 if loaded.hooks_file else len(loaded.scenario.agent.hooks or [])
    from_file = len(hooks) - inline
    file_name = loaded.hooks_file or loaded.scenario.agent.hooks_file
    entries: list[dict[str, Any]] = []
    for index, hook in enumerate(hooks):
        where = (
            f"{file_name} hooks[{index}]"
            if index < from_file
            else f"agent.hooks[{index - from_file}]"
        )
        label = handler_label(hook.type, hook.handler)
        kind = (hook.event, hook.type.value, label, bool(hook.runs_async), PLATFORM_OUTCOMES)
        entries.append(_entry(name, index, where, *kind))
    by_key = {(entry["index"], entry["event"]): entry for entry in entries}
    for record in (report or {}).get("hook_executions") or []:
        entry = by_key.get((record.get("hook_index"), record.get("hook_event")))
        if entry is None:
            continue
        entry["fired"] += 1
        entry.setdefault("latencies", []).append(latency_of(record))
        outcomes = entry["outcomes"]
        if record.get("error"):
            outcomes["failed"] += 1
        elif record.get("decision") in outcomes:
            outcomes[str(record["decision"])] += 1
        if record.get("injected"):
            outcomes["injected"] += 1
        if entry["event"] == "agent.tool_call":
            data = (record.get("payload") or {}).get("data") or {}
            tool = data.get("tool") if isinstance(data, dict) else None
            if isinstance(tool, str):
                entry["tools"][tool] = entry["tools"].get(tool, 0) + 1
    return entries


def nexus_coverage(name: str, loaded: Any, report: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The Nexus hooks of ``loaded`` (a LoadedNexusScenario), one per event and executor tool,
    with what their task attempts produced."""
    # Start-up: a suite of platform scenarios never loads the Nexus engine.
    from belt.dialects.nexus.execution_loop import frozen_hooks

    declared: list[tuple[str, dict[str, Any]]] = [("profile", frozen_hooks(loaded.profile))]
    for t, turn in enumerate(loaded.scenario.turns):
        if turn.profile is not None:
            declared.append((f"turns[{t}].profile", frozen_hooks(turn.profile)))
    for execution in (report or {}).get("executions") or []:
        declared.append((f"execution {execution.get('turn')}", dict(execution.get("hooks") or {})))
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    for where, hooks in declared:
        for event, hook in hooks.items():
            if not isinstance(hook, dict) or not hook.get("tool"):
                continue
            key = (str(event), str(hook["tool"]))
            if key not in entries:
                kind = (key[0], "executor", key[1], False, NEXUS_OUTCOMES)
                entries[key] = _entry(name, None, f"{where}.lifecycle_hooks.{event}", *kind)
    for task in (report or {}).get("hook_tasks") or []:
        entry = entries.get((str(task.get("event")), str(task.get("tool"))))
        if entry is None:
            continue
        outcomes = entry["outcomes"]
        for attempt in [*(task.get("history") or []), task]:
            status = attempt.get("status")
            # an earlier attempt in the history with an error was re-armed after failing
            failed = status == "failed" or (attempt is not task and attempt.get("error"))
            if status != "completed" and not failed:
                continue
            entry["fired"] += 1
            entry.setdefault("latencies", []).append(latency_of(attempt))
            continued = bool((task.get("decision") or {}).get("continue"))
            outcome = "continued" if continued else "acknowledged"
            outcomes["failed" if status != "completed" else outcome] += 1
    for message in ((report or {}).get("chat") or {}).get("chat_messages") or []:
        for content in message.get("content") or []:
            row = content.get("event") if isinstance(content, dict) else None
            if not isinstance(row, dict) or row.get("type") != "attention":
                continue
            attention = row.get("attention") or {}
            entry = entries.get((str(attention.get("event")), str(attention.get("tool"))))
            if entry is not None:
                entry["outcomes"]["held"] += 1
    return list(entries.values())


def never_fired(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of hooks that never fired."""
    return [entry for entry in entries if not entry["fired"]]
