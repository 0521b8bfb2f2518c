"""The closing summary of a run's hook calls: how many were made and failed, and how each
failure was counted (allow, or deny when fail-closed), by handler, from ``hook.executed`` records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from belt.deliveries.effects import Outcome, effect_text, outcome
from belt.dialects.simreport import HandlerTally, HookSummary
from belt.display.text import short
from belt.handlers.webhook import likely_fix
from belt.records.runs import run_events

if TYPE_CHECKING:
    from belt.store import Store

FAILURES_SHOWN = 50  # failed calls listed one by one (the counts are always whole)
ERROR_CHARS = 300

HOOK_FAILURE_HINT = (
    'name each with an expectation on its error (event = ..., error = "..."), or put '
    'hook_errors = "allow" at the top of the scenario'
)


def answer_warnings(record: Mapping[str, Any]) -> list[str]:
    """What a handler's answer asked for that was not done: unknown keys, a decision its event
    cannot take (none for a failed call or an async hook)."""
    if record.get("error") or record.get("async"):
        return []
    warnings = [str(w) for w in record.get("warnings") or []]
    decision = record.get("decision")
    event = str(record.get("hook_event") or "")
    # A gate's suspend is how a gate works; only an answer's can be one the event cannot take.
    if (
        record.get("handler_type") == "webhook"
        and decision
        and decision != "allow"
        and outcome(event, decision) == Outcome.IGNORED
    ):
        effect = effect_text(event, decision, None).removeprefix(f"{event}: ")
        warnings.append(f"answered {decision}: {effect}")
    return warnings


COUNTS = ("calls", "failed", "counted_allow", "counted_deny")


def hook_summary(executions: Sequence[Mapping[str, Any]]) -> HookSummary:
    """The summary of ``hook.executed`` records: counts, handlers, first failed and warned calls."""
    handlers: dict[tuple[str, str], HandlerTally] = {}
    failures: list[dict[str, object]] = []
    warned: list[dict[str, object]] = []
    warning_count = 0
    # Only the first FAILURES_SHOWN failed and warned calls are built: a run may have thousands.
    for record in executions:
        key = (str(record.get("handler_type") or ""), str(record.get("handler") or ""))
        fresh = {"handler": key[1], "handler_type": key[0], **dict.fromkeys(COUNTS, 0)}
        entry = handlers.setdefault(
            key, cast(HandlerTally, fresh | {"first_error": None, "fix": None})
        )
        entry["calls"] += 1
        call = {
            "run_id": record.get("run_id"),
            "event": record.get("hook_event"),
            "hook_index": record.get("hook_index"),
            "handler": key[1],
            "handler_type": key[0],
        }
        warnings = answer_warnings(record)
        warning_count += len(warnings)
        room = FAILURES_SHOWN - len(warned)
        warned += [{**call, "warning": short(w, ERROR_CHARS)} for w in warnings[:room]]
        if not (error := record.get("error")):
            continue
        how = "deny" if record.get("decision") == "deny" else "allow"  # fail-closed on a gate
        entry["failed"] += 1
        entry["counted_deny" if how == "deny" else "counted_allow"] += 1
        if entry["first_error"] is None:
            entry["first_error"] = short(str(error), ERROR_CHARS)
            entry["fix"] = likely_fix(str(error))
        if len(failures) < FAILURES_SHOWN:
            data = (record.get("payload") or {}).get("data") or {}
            tool = data.get("tool") if isinstance(data, dict) else None
            failures.append(
                {
                    **call,
                    "tool": tool,
                    "error": short(str(error), ERROR_CHARS),
                    "counted_as": how,
                    "async": bool(record.get("async")),
                }
            )
    totals = {k: sum(e[k] for e in handlers.values()) for k in COUNTS[1:]}  # type: ignore[literal-required]
    summary = {"calls": len(executions), **totals, "handlers": list(handlers.values())}
    summary |= {"failures": failures, "warned": warning_count, "warnings": warned}
    return cast(HookSummary, summary)


def run_hook_summary(store: Store, run_id: str) -> HookSummary:
    """The summary of one run's hook calls, from its event log."""
    return hook_summary([r for r in run_events(store, run_id) if r.get("type") == "hook.executed"])


def summary_text(summary: HookSummary) -> list[tuple[str, bool]]:
    """The summary as plain lines, each with whether it tells of a failure."""
    calls, failed = summary["calls"], summary["failed"]
    if not failed:
        return [(f"hooks: {calls} call(s), none failed", False), *warning_text(summary)]
    counts = {"allow": summary["counted_allow"], "deny": summary["counted_deny"]}
    how = [f"{count} counted as {side}" for side, count in counts.items() if count]
    lines = [(f"hooks: {calls} call(s), {failed} failed ({', '.join(how)})", True)]
    for entry in (entry for entry in summary["handlers"] if entry["failed"]):
        counts = {"allow": entry["counted_allow"], "deny": entry["counted_deny"]}
        sides = " and ".join(side for side, count in counts.items() if count)
        text = f"{entry['failed']} of {entry['calls']} failed, counted as {sides}"
        where = f"{entry['handler']} ({entry['handler_type']})"
        lines.append((f"  {where}: {text}; first: {entry['first_error']}", True))
        if entry["fix"]:
            lines.append((f"    {entry['fix']}", True))
    return [*lines, *warning_text(summary)]


def warning_text(summary: HookSummary) -> list[tuple[str, bool]]:
    """The answers partly ignored: a head line, then one line per warning listed."""
    if not (count := summary["warned"]):
        return []
    lines = [(f"answer warnings: {count} (what a handler answered that was not done)", True)]
    for item in summary["warnings"]:
        where = f"{item['event']} → {item['handler']} ({item['handler_type']})"
        lines.append((f"  {where}: {item['warning']}", True))
    if count > len(summary["warnings"]):
        lines.append((f"  … and {count - len(summary['warnings'])} more", True))
    return lines


def strict_failures(summary: HookSummary) -> str | None:
    """Why ``--strict`` fails these hook calls (failures, answer warnings), or None."""
    counts = {"hook call(s) failed": summary["failed"], "answer warning(s)": summary["warned"]}
    reasons = [f"{count} {what}" for what, count in counts.items() if count]
    return f"--strict: {' and '.join(reasons)}" if reasons else None


def summary_line(summary: HookSummary) -> str:
    """The summary on one line (``belt serve``'s live line): its head and first failure and fix."""
    text = summary_text(summary)[0][0]
    failing = next((entry for entry in summary["handlers"] if entry["failed"]), None)
    if failing is not None:
        text += f"; {failing['handler']}: {failing['first_error']}"
        if failing["fix"]:
            text += f"; {failing['fix']}"
    return text
