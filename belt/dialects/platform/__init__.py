"""inference.sh's own dialect ("platform"): agent runs whose hooks fire on the agent's events
(spec/hooks.md); the driver's loop is ``agent_loop``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from belt.deliveries.effects import handler_label
from belt.dialects import Call, Declared, Dialect, HookRun, foreign_keys
from belt.display.text import short
from belt.usercode.loader import collector_paused
from belt.wire.catalogue import EVENTS, GATEABLE_EVENTS
from belt.wire.enums import HookDecision

if TYPE_CHECKING:
    from belt.dialects import InTurn, ScenarioOptions, TurnOf
    from belt.dialects.simreport import ReportRun, SimReport

NEXUS_ONLY = 'only in Nexus scenarios; add dialect = "nexus" at the top of the file'
NEXUS_TOP = dict.fromkeys(("profile", "executors", "agent.context_bytes"), NEXUS_ONLY)
NEXUS_TURN = dict.fromkeys(
    ("regenerate", "mail", "background", "standalone", "tool_only", "tool_calls", "profile"),
    NEXUS_ONLY,
)
"""Keys only Nexus scenarios have: at the top (by path), in a turn."""


class PlatformDialect:
    """The platform dialect (``belt.dialects.Dialect``)."""

    name = "platform"
    title = "the platform"
    events = tuple(EVENTS)
    gate_events = GATEABLE_EVENTS
    decisions = tuple(d.value for d in HookDecision)
    foreign_subjects = {"continuations": "Nexus stop continuations; this scenario is platform"}
    hook_states = ()
    injects = True
    profile_hooks = False
    outcomes = ("allow", "deny", "stop", "suspend", "injected", "failed")
    """A hook call's decision (a failed call counts only as failed), and whether it injected."""

    def loop(self) -> type[Any]:
        """The driver's loop of platform runs."""
        with collector_paused():  # Start-up: the engine, see belt.usercode.loader
            from belt.dialects.platform.agent_loop import PlatformLoop  # noqa: PLC0415 - the engine, when a run asks

        return PlatformLoop

    def scenario_problems(self, doc: Mapping[str, object]) -> list[str]:
        """Keys of Nexus scenarios in a platform one."""
        return foreign_keys(doc, NEXUS_TOP, NEXUS_TURN, {})

    def load_scenario(
        self, doc: Mapping[str, object], source: str, directory: Path, **kw: Unpack[ScenarioOptions]
    ) -> Any:
        """A checked platform scenario with its hooks (it never reads stored ones)."""
        from belt.engine.scenario import load_platform_scenario  # noqa: PLC0415 - pydantic, when a scenario is read

        hooks_file, locate = kw["hooks_file"], kw["locate"]
        return load_platform_scenario(doc, source, directory, hooks_file=hooks_file, locate=locate)

    def turns(self, report: SimReport) -> tuple[dict[str, int], list[ReportRun]]:
        """One run per scenario turn; the own chat's runs are those of its chat."""
        runs = report["runs"]
        turn_of = {str(run["id"]): index for index, run in enumerate(runs)}
        return turn_of, [run for run in runs if run.get("chat_id") == report["chat"]["id"]]

    def run_of_turn(self, report: SimReport, turn: int, turn_of: TurnOf) -> ReportRun | None:
        """The run that answers the turn."""
        runs = report.get("runs") or []
        return next((r for r in runs if turn_of.get(str(r["id"])) == turn), None)

    def hook_runs(self, report: SimReport) -> list[HookRun]:
        """The ``hook.executed`` records of sync hooks."""
        items = []
        for record in report.get("hook_executions") or []:
            if record.get("async"):
                continue
            data = call_data(record)
            fields: dict[str, object] = {"event": record.get("hook_event")}
            fields["handler"] = record.get("handler")
            fields |= {"tool": data.get("tool"), "arguments": data.get("arguments")}
            fields |= {key: record.get(key) for key in ("decision", "reason", "error", "injected")}
            text = f"{fields['event']} → {fields['handler']}: {fields['decision']}"
            if fields["tool"]:
                text += f" on {fields['tool']}({short(fields['arguments'] or {}, 50)})"
            if fields["reason"]:
                text += f" ({short(fields['reason'], 60)})"
            if fields["injected"]:
                text += " + injected"
            if fields["error"]:
                text += f" ! {short(fields['error'], 200)}"
            items.append(HookRun(fields, text, record.get("run_id")))
        return items

    def hook_calls(self, report: SimReport) -> list[tuple[object, object, Mapping[str, object]]]:
        """The ``hook.executed`` records, async ones included."""
        records = report.get("hook_executions") or []
        return [(r.get("hook_event"), r.get("handler"), r) for r in records]

    def fired(self, report: SimReport, event: str, runs: list[ReportRun], in_turn: InTurn) -> int:
        """The driver's count of each run's boundaries."""
        counts: dict[str, dict[str, int]] = report.get("fired") or {}
        ran = [counts.get(str(run["id"])) or {} for run in runs if in_turn(run["id"])]
        return sum(int(count.get(event, 0)) for count in ran)

    def unnamed_failures(self, report: SimReport) -> bool:
        """A hook call that failed fails the test, unless an expectation names it."""
        return True

    def declared(self, loaded: Any, report: SimReport | None) -> list[Declared]:
        """The agent's hooks by their index in its hook list (as the dispatcher numbers them)."""
        hooks = list(loaded.hooks)
        # A --hooks file replaces the agent's hooks; its own hooks_file precedes its inline ones.
        inline = 0 if loaded.hooks_file else len(loaded.scenario.agent.hooks or [])
        from_file = len(hooks) - inline
        file_name = loaded.hooks_file or loaded.scenario.agent.hooks_file
        declared = []
        for index, hook in enumerate(hooks):
            where = f"{file_name} hooks[{index}]"
            where = where if index < from_file else f"agent.hooks[{index - from_file}]"
            label = handler_label(hook.type, hook.handler)
            kind = (hook.event, hook.type.value, label, bool(hook.runs_async))
            declared.append(Declared((index, hook.event), index, where, *kind))
        return declared

    def calls(self, report: SimReport) -> list[Call]:
        """Each ``hook.executed`` record: its decision (or failed), injection and tool."""
        calls = []
        for record in report.get("hook_executions") or []:
            failed, decision = record.get("error"), record.get("decision")
            outcomes = (
                ["failed"] if failed else [str(decision)] if decision in self.outcomes else []
            )
            outcomes += ["injected"] if record.get("injected") else []
            tool = None
            if record.get("hook_event") == "agent.tool_call":
                found = call_data(record).get("tool")
                tool = found if isinstance(found, str) else None
            key = (record.get("hook_index"), record.get("hook_event"))
            calls.append(Call(key, True, record, tuple(outcomes), tool))
        return calls

    def transcript_lines(self, report: SimReport, *, verbose: bool) -> list[tuple[str, str]]:
        """Each run, its messages and hook rows, and the gates that hold it."""
        from belt.dialects.platform.agent_transcript import platform_lines, quiet_deliveries  # noqa: PLC0415 - the renderer, for a transcript

        return platform_lines(report, quiet_deliveries(report) if verbose else [])

    def message_lines(self, message: Mapping[str, object]) -> list[tuple[str, str]]:
        """A message and its hook rows."""
        from belt.display.render import message_lines  # noqa: PLC0415 - layer: the renderer is above

        return message_lines(message)


def call_data(record: Mapping[str, Any]) -> Mapping[str, object]:
    """The ``data`` of a hook call's payload (the tool and its arguments of a tool call)."""
    data = (record.get("payload") or {}).get("data")
    return data if isinstance(data, dict) else {}


DIALECT: Dialect = PlatformDialect()
