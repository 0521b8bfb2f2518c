"""The Nexus dialect (spec/nexus-lifecycle-hooks.txt): executions whose lifecycle hooks are tasks
in the executor inbox; the driver's loop is ``execution_loop``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from belt.dialects import Call, Declared, Dialect, HookRun, foreign_keys
from belt.display.text import short
from belt.usercode.loader import collector_paused
from belt.wire.nexus import NexusEvent

if TYPE_CHECKING:
    from belt.dialects import InTurn, ScenarioOptions, TurnOf
    from belt.dialects.simreport import ReportRun, SimReport
    from belt.records.executions import ExecutionEntry

PLATFORM_HOOKS = "platform hooks; a Nexus scenario declares its hooks in [profile] lifecycle_hooks"
PLATFORM_TOP = {
    "agents": "the agents task hooks reference belong to the platform dialect",
    "reviews": "reviews of belt:extract belong to the platform dialect",
    "agent.hooks": PLATFORM_HOOKS,
    "agent.hooks_file": f"{PLATFORM_HOOKS} (or give a Nexus declaration with --hooks FILE)",
    "chat.disable_hooks": "a platform chat setting; Nexus has no per-conversation hook switch",
}
PLATFORM_TOOL = {
    "async": "async app tools (agent.tool_result) belong to the platform dialect",
    "client": "client tools belong to the platform dialect",
    **dict.fromkeys(
        ("require_approval", "approval_timeout"),
        "per-tool approval belongs to the platform dialect",
    ),
}
"""Keys only platform scenarios have: at the top (by path), in a tool call."""


class NexusDialect:
    """The Nexus dialect (``belt.dialects.Dialect``)."""

    name = "nexus"
    title = "Nexus"
    events = tuple(e.value for e in NexusEvent)
    gate_events = events
    decisions = ("continue", "acknowledge")
    foreign_subjects = dict.fromkeys(
        ("injection", "injected_tokens"), "injections belong to the platform dialect"
    )

    hook_states = ("completed", "failed", "cancelled", "pending", "claimed", "awaiting_approval")
    """The states of a hook task."""
    injects = False
    profile_hooks = True
    outcomes = ("acknowledged", "continued", "failed", "held")
    """What a hook's task attempts produced, and the attention holds their failures made."""

    def loop(self) -> type[Any]:
        """The driver's loop of Nexus executions."""
        with collector_paused():  # Start-up: the engine, see belt.usercode.loader
            from belt.dialects.nexus.execution_loop import NexusLoop  # noqa: PLC0415 - the engine, when a run asks

        return NexusLoop

    def scenario_problems(self, doc: Mapping[str, object]) -> list[str]:
        """Keys of platform scenarios in a Nexus one."""
        return foreign_keys(doc, PLATFORM_TOP, {}, PLATFORM_TOOL)

    def load_scenario(
        self, doc: Mapping[str, object], source: str, directory: Path, **kw: Unpack[ScenarioOptions]
    ) -> Any:
        """A checked Nexus scenario with its profile (``stored_hooks``: rho's when it has none)."""
        from belt.dialects.nexus.scenarios import load_nexus_scenario  # noqa: PLC0415 - pydantic, when a scenario is read

        return load_nexus_scenario(doc, source, directory, **kw)

    def turns(self, report: SimReport) -> tuple[dict[str, int], list[ReportRun]]:
        """Each turn's run, and every execution of the conversation, run-backed or not."""
        executions = report.get("executions") or []
        turn_of = {str(e["run_id"]): int(e["turn"]) for e in executions if e.get("run_id")}
        chat_id = report["chat"]["id"]
        mine = [e for e in executions if e.get("conversation_id") == chat_id]
        return turn_of, [_execution_run(report, entry) for entry in mine]

    def run_of_turn(self, report: SimReport, turn: int, turn_of: TurnOf) -> ReportRun | None:
        """The execution of the turn, as a run."""
        entries = report.get("executions") or []
        entry = next((e for e in entries if e.get("turn") == turn), None)
        return _execution_run(report, entry) if entry is not None else None

    def hook_runs(self, report: SimReport) -> list[HookRun]:
        """The hook tasks."""
        items = []
        for task in report.get("hook_tasks") or []:
            decision, error = task.get("decision") or {}, task.get("error") or {}
            answer = "continue" if decision.get("continue") else "acknowledge"
            fields: dict[str, object] = {"event": task.get("event"), "handler": task.get("tool")}
            fields["decision"] = answer if task.get("status") == "completed" else None
            fields |= {"reason": decision.get("feedback"), "error": error.get("message")}
            fields["status"] = task.get("status")
            text = f"{fields['event']} → {fields['handler']}: {fields['status']}"
            if fields["decision"]:
                text += f", {fields['decision']}"
            if error:
                text += f" ! {error.get('code')}: {short(error.get('message') or '', 80)}"
            items.append(HookRun(fields, text, task.get("run_id")))
        return items

    def hook_calls(self, report: SimReport) -> list[tuple[object, object, Mapping[str, object]]]:
        """The hook tasks."""
        return [(t.get("event"), t.get("tool"), t) for t in report.get("hook_tasks") or []]

    def fired(self, report: SimReport, event: str, runs: list[ReportRun], in_turn: InTurn) -> int:
        """The hook tasks on ``event`` (a retried task once)."""
        tasks = [t for t in report.get("hook_tasks") or [] if t.get("event") == event]
        return len({str(t.get("task_key")) for t in tasks if in_turn(t.get("run_id"))})

    def unnamed_failures(self, report: SimReport) -> bool:
        """A failed hook task holds its execution (``run_state``, ``hold``) instead."""
        return False

    def declared(self, loaded: Any, report: SimReport | None) -> list[Declared]:
        """One hook per event and tool: the profile's, each turn's, each execution's frozen."""
        # The engine's reading of a profile, only when a Nexus suite asks for coverage.
        from belt.dialects.nexus.execution_loop import frozen_hooks  # noqa: PLC0415 - the engine, for coverage only

        turns = enumerate(loaded.scenario.turns)
        hooks = [("profile", frozen_hooks(loaded.profile))]
        hooks += [(f"turns[{t}].profile", frozen_hooks(u.profile)) for t, u in turns if u.profile]
        for execution in (report.get("executions") or []) if report else []:
            hooks.append((f"execution {execution.get('turn')}", dict(execution.get("hooks") or {})))
        declared: dict[tuple[str, str], Declared] = {}
        for where, table in hooks:
            for event, hook in table.items():
                if not isinstance(hook, dict) or not hook.get("tool"):
                    continue
                key, at = (str(event), str(hook["tool"])), f"{where}.lifecycle_hooks.{event}"
                declared.setdefault(key, Declared(key, None, at, key[0], "executor", key[1], False))
        return list(declared.values())

    def calls(self, report: SimReport) -> list[Call]:
        """Each attempt of a hook task that completed or failed, and each attention hold."""
        calls = []
        for task in report.get("hook_tasks") or []:
            key = (str(task.get("event")), str(task.get("tool")))
            done = "continued" if (task.get("decision") or {}).get("continue") else "acknowledged"
            for attempt in [*(task.get("history") or []), task]:
                status = attempt.get("status")
                # an earlier attempt in the history with an error was re-armed after failing
                failed = status == "failed" or (attempt is not task and attempt.get("error"))
                if status == "completed" or failed:
                    outcome = done if status == "completed" else "failed"
                    calls.append(Call(key, True, attempt, (outcome,)))
        for message in (report.get("chat") or {}).get("chat_messages") or []:
            for content in message.get("content") or []:
                row = content.get("event") if isinstance(content, dict) else None
                if not isinstance(row, dict) or row.get("type") != "attention":
                    continue
                attention = row.get("attention") or {}
                key = (str(attention.get("event")), str(attention.get("tool")))
                calls.append(Call(key, False, row, ("held",)))
        return calls

    def transcript_lines(self, report: SimReport, *, verbose: bool) -> list[tuple[str, str]]:
        """Each execution, its messages and hook tasks, and what holds it."""
        from belt.dialects.nexus.execution_transcript import nexus_transcript_lines  # noqa: PLC0415 - the renderer, for a transcript

        return nexus_transcript_lines(report)

    def message_lines(self, message: Mapping[str, object]) -> list[tuple[str, str]]:
        """A message and the hook tasks on it."""
        from belt.dialects.nexus.execution_transcript import nexus_message_lines  # noqa: PLC0415 - the renderer, for a transcript

        return nexus_message_lines(message)


def _execution_run(report: SimReport, entry: ExecutionEntry) -> ReportRun:
    """A Nexus execution as a run: its run's record, or (not run-backed) its entry's state."""
    runs: list[ReportRun] = report.get("runs") or []
    stand_in: ReportRun = {"id": f"execution {entry.get('turn')}", "state": entry.get("state")}
    return next((r for r in runs if r["id"] == entry.get("run_id")), stand_in)


DIALECT: Dialect = NexusDialect()
