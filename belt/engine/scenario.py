"""Scenario files: what the scripted model does, and the hooks declared on the agent."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from belt.declarations import read_document
from belt.errors import InvalidInput
from belt.wire.platform import HookHandlerType, LifecycleHookConfig
from belt.wire.validate import check_platform_hooks, model_problems

ID_PATTERN = r"^[A-Za-z0-9_-]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ToolCallSpec(_Strict):
    """One tool call the scripted model makes, and what the tool returns."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    status: Literal["completed", "failed"] = "completed"
    async_: bool = Field(default=False, alias="async")


class ModelTurnSpec(_Strict):
    """One model turn: optional text, its size, and the tools it calls."""

    say: str | None = None
    tokens: int | None = Field(default=None, ge=0)
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)


class TurnSpec(_Strict):
    """One user message, which starts one run, and the model turns that answer it."""

    user: str
    model: list[ModelTurnSpec] = Field(default_factory=list)
    error: str | None = None


class AgentSpec(_Strict):
    """The simulated agent: its hooks and its context limits."""

    id: str | None = Field(default=None, pattern=ID_PATTERN)
    name: str = "agent"
    hooks_file: str | None = None
    hooks: list[Any] = Field(default_factory=list)
    context_window: int = Field(default=128_000, gt=0)
    compact_at: float = Field(default=0.8, gt=0, le=1)


class ChatSpec(_Strict):
    """The chat the scenario runs in."""

    id: str | None = Field(default=None, pattern=ID_PATTERN)
    disable_hooks: bool = False


class Scenario(_Strict):
    """A whole scenario file."""

    agent: AgentSpec = Field(default_factory=AgentSpec)
    chat: ChatSpec = Field(default_factory=ChatSpec)
    turns: list[TurnSpec] = Field(min_length=1)


@dataclass
class LoadedScenario:
    """A checked scenario and the hooks its agent declares."""

    source: str
    scenario: Scenario
    hooks: list[LifecycleHookConfig]
    hooks_file: str | None = None


def unreachable_turns(scenario: Scenario) -> list[str]:
    """Model turns scripted after a turn without tool calls, which already ended the run."""
    problems = []
    for t, turn in enumerate(scenario.turns):
        for m, model in enumerate(turn.model[:-1]):
            if not model.tool_calls:
                problems.append(
                    f"turns[{t}].model[{m + 1}]: unreachable, model[{m}] calls no tool and so "
                    "ends the run"
                )
                break
        if turn.error and turn.model and turn.model[-1].tool_calls == []:
            problems.append(
                f"turns[{t}].error: unreachable, the last model turn calls no tool and so ends "
                "the run before the failing model request"
            )
    return problems


def load_hooks(raw: Any, source: str, base: str) -> list[LifecycleHookConfig]:
    """Check a hooks array from a scenario or hooks file; builtins are refused."""
    findings, hooks = check_platform_hooks(raw, base)
    if not findings.ok:
        raise InvalidInput(
            f"{source}: {len(findings.problems)} problem(s) in the hooks",
            problems=findings.problems,
        )
    for index, hook in enumerate(hooks):
        if hook.type == HookHandlerType.BUILTIN:
            raise InvalidInput(
                f"{source}: {base}[{index}]: builtin handlers ({hook.handler}) run inside the "
                "platform and are not simulated",
                hint="remove the builtin hook from the scenario, or test it on the platform",
            )
    return hooks


def hooks_from_file(path: Path) -> list[LifecycleHookConfig]:
    """The hooks of a declaration file (``{"hooks": [...]}``, a bare array, or TOML)."""
    doc = read_document(path)
    raw = doc.get("hooks", doc) if isinstance(doc, dict) else doc
    if isinstance(doc, dict) and set(doc) - {"hooks"}:
        extra = sorted(set(doc) - {"hooks"})
        raise InvalidInput(f"{path}: {extra[0]}: unknown key (a hooks file holds only hooks)")
    return load_hooks(raw, str(path), "hooks")


def load_scenario(path: str | Path, *, hooks_file: str | Path | None = None) -> LoadedScenario:
    """Read and check a scenario; ``hooks_file`` replaces the hooks the scenario declares."""
    source = str(path)
    doc = read_document(path)
    if not isinstance(doc, dict):
        raise InvalidInput(f"{source}: expected a table/object at the top level")
    try:
        scenario = Scenario.model_validate(doc)
    except ValidationError as exc:
        problems = model_problems(exc)
        raise InvalidInput(f"{source}: {problems[0]}", problems=problems[1:]) from None
    problems = unreachable_turns(scenario)
    if problems:
        raise InvalidInput(f"{source}: {problems[0]}", problems=problems[1:])
    if hooks_file is not None:
        hooks = hooks_from_file(Path(hooks_file))
    else:
        hooks = []
        if scenario.agent.hooks_file:
            hooks += hooks_from_file(Path(path).parent / scenario.agent.hooks_file)
        if scenario.agent.hooks:
            hooks += load_hooks(scenario.agent.hooks, source, "agent.hooks")
    return LoadedScenario(source, scenario, hooks, str(hooks_file) if hooks_file else None)


def estimate_tokens(text: str | None) -> int:
    """The default size of a text in tokens: its length / 4, rounded up."""
    return (len(text) + 3) // 4 if text else 0


SAFE_ID = re.compile(ID_PATTERN)
