"""A made-up platform, "relay": a third dialect of belt (docs/dialects.md).

A relay agent answers each user turn with the reply its scenario scripts. Its hooks are Python
functions, one per event, named as ``FILE.py:FUNCTION`` from the scenario's directory:

- ``turn.start`` fires before the agent answers, with ``{"event", "user"}``; it may answer
  ``{"decision": "skip"}``, and the agent does not answer that turn;
- ``turn.end`` fires after the reply is in the chat, with ``{"event", "reply"}``.

A hook that raises, or answers a decision that is not ``skip``, is a failed call; the turn goes
on. Installed, it is found through the ``belt.dialects`` entry point group::

    [project.entry-points."belt.dialects"]
    relay = "relay_dialect:DIALECT"
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from belt.dialects import Call, Declared, Dialect, HookRun
from belt.engine.simulation import End, Execution, SimStatus, record_simulation
from belt.errors import InvalidInput, UsageError
from belt.records.runs import Run
from belt.records.sims import Sim

NAME = "relay"
EVENTS = ("turn.start", "turn.end")
DECISIONS = ("skip",)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Agent(Strict):
    name: str = "relay"
    id: str | None = None
    context_window: int = 128_000
    compact_at: float = 0.8


class Chat(Strict):
    id: str | None = None


class Turn(Strict):
    user: str
    reply: str
    after: None = None  # the driver's clock reads these; a relay turn never moves time
    wait: list[Any] = Field(default_factory=list)


class RelayScenario(Strict):
    dialect: str = NAME
    name: str = ""
    clock: None = None
    agent: Agent = Field(default_factory=Agent)
    chat: Chat = Field(default_factory=Chat)
    hooks: dict[str, str] = Field(default_factory=dict)
    """Each event's hook, ``FILE.py:FUNCTION`` (read as an absolute path once loaded)."""
    turns: list[Turn]
    expect: list[Any] | None = None


class LoadedRelay:
    """A read relay scenario."""

    dialect = NAME
    hooks_file = None

    def __init__(self, source: str, scenario: RelayScenario) -> None:
        self.source = source
        self.scenario = scenario
        self.warnings: list[str] = []


def call_hook(spec: str, payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """(decision, error) of calling the hook ``spec`` with ``payload``."""
    path, _, function = spec.rpartition(":")
    try:
        found = importlib.util.spec_from_file_location(Path(path).stem, path)
        assert found is not None and found.loader is not None
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
        answer = getattr(module, function)(payload) or {}
    except Exception as exc:  # a hook's failure is recorded on its call
        return None, f"{type(exc).__name__}: {exc}"
    decision = answer.get("decision")
    if decision is not None and decision not in DECISIONS:
        return None, f"decision {decision!r} is not one of {', '.join(DECISIONS)}"
    return decision, None


class RelayLoop:
    """The driver's loop of relay runs (``belt.engine.simulation.Dialect``)."""

    name: ClassVar[str] = NAME
    held_state: ClassVar[str] = "input_required"
    held_status: ClassVar[SimStatus] = SimStatus.HELD
    stop_hint: ClassVar[str] = "a relay run never holds"
    waits_for_gates: ClassVar[bool] = False

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.scenario = sim.scenario_as(RelayScenario)

    @classmethod
    def check_options(cls, *, executors: bool, fail_closed: bool, routes: bool = False) -> None:
        if executors or fail_closed or routes:
            raise UsageError("a relay scenario's hooks are FILE.py:FUNCTION; nothing to route")

    @classmethod
    def create(
        cls, store: Any, loaded: Any, *, fail_closed: bool = False, routes: Sequence[Any] = ()
    ) -> Sim:
        scenario = loaded.scenario.model_dump(mode="json")
        return record_simulation(
            store, dialect=cls.name, loaded=loaded, agent={"dialect": cls.name}, scenario=scenario
        )

    def begin(self, index: int) -> Execution:
        run = self.sim.steps.create_run(index, {"next": "start", "calls": []}, dialect=self.name)
        execution = Execution(index, run, run.execution)
        self.sim.steps.claim_chat(execution)
        self.sim.transcript.add_text(execution, "user", self.scenario.turns[index].user)
        return execution

    def step(self, execution: Execution) -> End | None:
        turn = self.scenario.turns[execution.turn_index]
        if execution.state["next"] == "start":
            decision = self.fire(execution, "turn.start", {"user": turn.user})
            if decision == "skip":
                return self.sim.steps.complete(execution)  # type: ignore[no-any-return]
            self.sim.transcript.add_text(execution, "assistant", turn.reply)
            execution.state["next"] = "end"
            return None
        self.fire(execution, "turn.end", {"reply": turn.reply})
        return self.sim.steps.complete(execution)  # type: ignore[no-any-return]

    def fire(self, execution: Execution, event: str, data: dict[str, Any]) -> str | None:
        """Call the hook of ``event``, if any, and keep the call on the run."""
        spec = self.scenario.hooks.get(event)
        if spec is None:
            return None
        started = time.perf_counter()
        decision, error = call_hook(spec, {"event": event, **data})
        execution.state["calls"].append(
            {
                "event": event,
                "handler": spec.rpartition("/")[2],
                "decision": decision,
                "error": error,
                "run_id": execution.run_id,
                "duration_ms": (time.perf_counter() - started) * 1000,
            }
        )
        return decision

    def resumable(self, run: Any, interrupted: bool) -> Execution:
        return Execution(int(run.data["turn_index"]), run, dict(run.execution))

    def resume_fields(self) -> dict[str, None]:
        return {}

    def ended(self, execution: Execution, end: End) -> None:
        pass

    def close(self) -> None:
        pass

    @classmethod
    def run_fields(cls) -> tuple[str, ...]:
        return ()

    @classmethod
    def run_tags(cls, run: Run) -> dict[str, object]:
        return {}

    @classmethod
    def cancel_pending(
        cls, store: Any, sim: Sim, run: Run, how: str
    ) -> tuple[str, dict[str, object]]:
        return f"run {how} by user", {}

    @classmethod
    def mark_ended(cls, store: Any, sim: Sim, run_id: str | None, end: End) -> None:
        pass

    @classmethod
    def report_extras(cls, store: Any, sim: Sim, runs: list[Any]) -> dict[str, object]:
        # Keys of its own, beyond those of the built-in dialects (ReportExtras).
        calls = [call for run in runs for call in (run.get("execution") or {}).get("calls", [])]
        return {"relay_calls": calls}


class RelayDialect:
    """The relay dialect (``belt.dialects.Dialect``)."""

    name = NAME
    title = "Relay"
    events = EVENTS
    gate_events: tuple[str, ...] = ()
    decisions = DECISIONS
    foreign_subjects = dict.fromkeys(
        ("continuations", "injection", "injected_tokens", "interrupt"), "not a relay notion"
    )
    hook_states: tuple[str, ...] = ()
    injects = False
    profile_hooks = False
    outcomes = ("skip", "none", "failed")

    def loop(self) -> type[Any]:
        return RelayLoop

    def scenario_problems(self, doc: Mapping[str, object]) -> list[str]:
        return []

    def load_scenario(
        self,
        doc: Mapping[str, object],
        source: str,
        directory: Path,
        *,
        hooks_file: str | Path | None,
        stored_hooks: bool,
        locate: bool,
    ) -> Any:
        try:
            scenario = RelayScenario.model_validate(doc)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise InvalidInput(f"{source}: {where}: {error['msg']}") from None
        for event, spec in scenario.hooks.items():
            if event not in EVENTS:
                raise InvalidInput(
                    f"{source}: hooks.{event}: not a relay event (one of {', '.join(EVENTS)})"
                )
            path, _, function = spec.rpartition(":")
            if not path.endswith(".py") or not function:
                raise InvalidInput(f"{source}: hooks.{event}: expected FILE.py:FUNCTION")
            if locate:
                scenario.hooks[event] = f"{(directory / path).resolve()}:{function}"
        return LoadedRelay(source, scenario)

    def turns(self, report: dict[str, Any]) -> tuple[dict[str, int], list[dict[str, Any]]]:
        runs: list[dict[str, Any]] = list(report.get("runs") or [])
        return {str(run["id"]): index for index, run in enumerate(runs)}, runs

    def run_of_turn(
        self, report: dict[str, Any], turn: int, turn_of: Mapping[str, int]
    ) -> dict[str, Any] | None:
        return next((r for r in report["runs"] if turn_of.get(str(r["id"])) == turn), None)

    def hook_runs(self, report: dict[str, Any]) -> list[HookRun]:
        return [
            HookRun(
                dict(call),
                f"{call['event']} → {call['handler']}: {call['decision']}",
                call["run_id"],
            )
            for call in report.get("relay_calls") or []
        ]

    def hook_calls(self, report: dict[str, Any]) -> list[tuple[Any, Any, dict[str, Any]]]:
        return [(c["event"], c["handler"], c) for c in report.get("relay_calls") or []]

    def fired(
        self,
        report: dict[str, Any],
        event: str,
        runs: list[dict[str, Any]],
        in_turn: Callable[[Any], bool],
    ) -> int:
        calls = report.get("relay_calls") or []
        return sum(1 for c in calls if c["event"] == event and in_turn(c["run_id"]))

    def unnamed_failures(self, report: dict[str, Any]) -> bool:
        return True

    def declared(self, loaded: Any, report: dict[str, Any] | None) -> list[Declared]:
        return [
            Declared(event, None, f"hooks.{event}", event, "py", spec.rpartition("/")[2], False)
            for event, spec in loaded.scenario.hooks.items()
        ]

    def calls(self, report: dict[str, Any]) -> list[Call]:
        return [
            Call(c["event"], True, c, ("failed" if c["error"] else c["decision"] or "none",))
            for c in report.get("relay_calls") or []
        ]

    def transcript_lines(self, report: dict[str, Any], *, verbose: bool) -> list[tuple[str, str]]:
        lines = []
        for message in report["chat"]["chat_messages"]:
            lines += self.message_lines(message)
        for call in report.get("relay_calls") or []:
            outcome = call["error"] or call["decision"] or "no decision"
            lines.append((f"  hook {call['event']} → {call['handler']}: {outcome}", "dim"))
        return lines

    def message_lines(self, message: Mapping[str, object]) -> list[tuple[str, str]]:
        parts = message.get("content")
        texts = (
            [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        )
        text = " ".join(str(t or "") for t in texts)
        return [(f"{message.get('role')}: {text}", "")]


DIALECT: Dialect = RelayDialect()
