"""Nexus scenario files (docs/nexus.md): the agent's context limits, the profile and its
lifecycle hooks, each turn's input and execution, and the executor tools that serve hook tasks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Unpack

from pydantic import Field

from belt.declaring.declarations import check_document, read_document
from belt.dialects import ScenarioOptions
from belt.engine.scenario import (
    ID_MAX,
    ID_PATTERN,
    ClockStart,
    Duration,
    ModelTurnSpec,
    ResolveSpec,
    ToolCallSpec,
    WaitSpec,
    _Strict,
    check_resolutions,
    refuse,
    validated,
)
from belt.errors import InvalidInput
from belt.executor.targets import target_problem
from belt.handlers.inprocess import locate_handler
from belt.records.profile import stored_lifecycle_hooks
from belt.wire.enums import Dialect
from belt.wire.validate import IN_PROCESS_PREFIX, Findings, check_nexus_profile


class NexusAgentSpec(_Strict):
    """The simulated Nexus agent's context limits."""

    id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=ID_MAX)
    name: str = "agent"
    context_window: int = Field(default=128_000, gt=0)
    context_bytes: int | None = Field(default=None, gt=0)
    compact_at: float = Field(default=0.8, gt=0, le=1)


class NexusChatSpec(_Strict):
    """The conversation the scenario's executions run in."""

    id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=ID_MAX)


class NexusTurnSpec(_Strict):
    """One input (a user message, a mail, a regeneration, a tool-only run) and its execution."""

    user: str | None = None
    mail: str | None = None
    regenerate: bool = False
    background: bool = False
    standalone: bool = False
    tool_only: bool = False
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    model: list[ModelTurnSpec] = Field(default_factory=list)
    error: str | None = None
    profile: dict[str, object] | None = None
    resolve: list[ResolveSpec] = Field(default_factory=list)
    wait: list[WaitSpec] = Field(default_factory=list)
    after: Duration | None = None
    """How long after the previous turn this one arrives (on the virtual clock)."""

    @property
    def kind(self) -> str:
        """What starts this execution (input, mail, regeneration, background, standalone...)."""
        kinds = (
            ("tool_only", self.tool_only),
            ("regeneration", self.regenerate),
            ("mail", self.mail is not None),
            ("background", self.background),
            ("standalone", self.standalone),
        )
        return next((kind for kind, given in kinds if given), "input")

    @property
    def replies(self) -> bool:
        """True for an execution that answers in the conversation (one a regeneration can redo)."""
        return self.kind in ("input", "mail", "regeneration")


class NexusScenario(_Strict):
    """A whole scenario file of the Nexus dialect."""

    dialect: Literal["nexus"]
    profile: dict[str, object] | None = None
    agent: NexusAgentSpec = Field(default_factory=NexusAgentSpec)
    chat: NexusChatSpec = Field(default_factory=NexusChatSpec)
    turns: list[NexusTurnSpec] = Field(default_factory=list)
    executors: dict[str, str] = Field(default_factory=dict)
    expect: list[Any] = Field(default_factory=list)
    hook_errors: Literal["fail", "allow"] = "fail"
    """``belt test``: whether a failed hook call no expectation names fails the scenario."""
    clock: ClockStart = None
    """The virtual clock's start: the simulation's times come from it (None: wall time)."""


@dataclass
class LoadedNexusScenario:
    """A checked Nexus scenario and the profile it starts with (None: the stored profile);
    ``hooks_from``: where its lifecycle hooks came from when not the scenario (rho's)."""

    source: str
    scenario: NexusScenario
    profile: dict[str, object] | None
    hooks_file: str | None = None
    hooks_from: dict[str, str] | None = None
    warnings: list[str] = field(default_factory=list)
    dialect: ClassVar[str] = "nexus"


def nexus_turn_problems(scenario: NexusScenario) -> list[str]:
    """The rules of Nexus turns that the schema alone does not express."""
    problems: list[str] = []
    replied = False
    for t, turn in enumerate(scenario.turns):
        inputs = [k for k in ("user", "mail") if getattr(turn, k) is not None]
        inputs += ["regenerate"] if turn.regenerate else []
        if turn.tool_only:
            rules = [
                (turn.mail is not None, ".mail: not allowed on a tool_only turn"),
                (turn.regenerate, ".regenerate: not allowed on a tool_only turn"),
                (not turn.tool_calls, ".tool_calls: a tool_only turn needs at least one tool call"),
                (bool(turn.model), ".model: a tool_only turn makes no model request"),
                (turn.error is not None, ".error: a tool_only turn makes no model request to fail"),
                (turn.background, ".background: not allowed on a tool_only turn"),
            ]
        else:
            model_calls = "the model's tool calls go in [[turns.model]]"
            no_round = not turn.model and turn.error is None
            rules = [
                (not inputs, ": give one of user, mail, regenerate = true, or tool_only = true"),
                (len(inputs) > 1, f": {' and '.join(inputs)} are exclusive; give one"),
                (bool(turn.tool_calls), f".tool_calls: only on a tool_only turn; {model_calls}"),
                (no_round, ".model: at least one model round is needed (or an error)"),
            ]
        background = turn.background and (turn.user is None or turn.standalone)
        standalone = turn.standalone and (turn.mail is not None or turn.regenerate)
        orphan = turn.regenerate and not replied
        rules += [
            (background, ".background: a background branch takes user, not standalone"),
            (standalone, ".standalone: takes user or tool_only, not mail or regenerate"),
            (orphan, ".regenerate: there is no earlier reply to regenerate"),
        ]
        problems += [f"turns[{t}]{rule}" for broken, rule in rules if broken]
        if turn.profile is not None:
            problems += check_nexus_profile(turn.profile, f"turns[{t}].profile")[0].problems
        replied = replied or turn.replies
    return problems


def load_nexus_scenario(
    doc: Mapping[str, object], source: str, directory: Path, **kw: Unpack[ScenarioOptions]
) -> LoadedNexusScenario:
    """Check a decoded Nexus scenario; ``hooks_file`` replaces its profile's lifecycle hooks, and
    ``stored_hooks`` fills in rho's; ``directory`` locates its ``py:`` executors (``locate``)."""
    hooks_file = kw["hooks_file"]
    findings = Findings()
    scenario = validated(NexusScenario, doc, source)
    problems = []
    if scenario.profile is not None:
        problems += check_nexus_profile(scenario.profile, "profile")[0].problems
    problems += nexus_turn_problems(scenario)
    check_resolutions([t.resolve for t in scenario.turns], "nexus", findings)
    for name, target in scenario.executors.items():
        problem = target_problem(target) if name.strip() else "a tool name is needed"
        if problem:
            findings.error(f"executors.{name}", problem)
    problems += findings.problems
    refuse(source, problems)
    warnings: list[str] = []
    if kw["locate"]:
        executors = located_executors(scenario.executors, directory, source, warnings)
        scenario = scenario.model_copy(update={"executors": executors})
    profile = scenario.profile
    hooks_from = None
    if hooks_file is not None:
        profile = profile_with_hooks_file(profile, Path(hooks_file), source)
    elif kw["stored_hooks"] and not declares_hooks(scenario):
        stored = stored_lifecycle_hooks()
        if stored.configuration:
            where = f"the lifecycle hooks rho stored ({stored.file})"
            profile = profile_with_hooks(profile, stored.configuration, source, where)
            hooks_from = stored.origin()
    return LoadedNexusScenario(
        source, scenario, profile, str(hooks_file) if hooks_file else None, hooks_from, warnings
    )


def located_executors(
    executors: dict[str, str], directory: Path, source: str, warnings: list[str]
) -> dict[str, str]:
    """A scenario's ``[executors]`` with each ``py:`` file read from ``directory`` (a warning of one
    found from the current directory only goes to ``warnings``)."""
    located: dict[str, str] = {}
    for name, target in executors.items():
        if target.startswith(IN_PROCESS_PREFIX):
            place = locate_handler(target, directory, where=f"{source}: executors.{name}")
            if place.warning:
                warnings.append(place.warning)
            target = target if place.root is not None else place.spec
        located[name] = target
    return located


def declares_hooks(scenario: NexusScenario) -> bool:
    """True when the scenario's or a turn's profile has a ``lifecycle_hooks`` key (even ``{}``)."""
    profiles = [scenario.profile, *(turn.profile for turn in scenario.turns)]
    return any(profile is not None and "lifecycle_hooks" in profile for profile in profiles)


def profile_with_hooks_file(
    profile: Mapping[str, object] | None, path: Path, source: str
) -> dict[str, object]:
    """The profile of scenario ``source`` with a Nexus declaration file's hooks (a whole profile
    file replaces it)."""
    doc = read_document(path)
    declaration = check_document(doc, str(path), Dialect.NEXUS)
    problems = declaration.findings.problems
    if problems or declaration.lifecycle_hooks is None:
        raise InvalidInput(f"{path}: {problems[0]}", problems=problems[1:])
    if declaration.shape == "profile":
        return dict(doc)
    hooks = declaration.lifecycle_hooks.to_wire()
    return profile_with_hooks(profile, hooks, source, f"the lifecycle hooks of {path}")


def profile_with_hooks(
    profile: Mapping[str, object] | None, hooks: object, source: str, where: str
) -> dict[str, object]:
    """The scenario's profile with ``hooks`` (from ``where``) as its lifecycle hooks; InvalidInput
    when the approval mode they require is missing, saying where it goes."""
    merged = {**(profile or {}), "lifecycle_hooks": hooks}
    if hooks and (profile or {}).get("approval_mode") is None:
        if source.endswith(".json"):
            place = f'"approval_mode": "auto" (or "ask") to "profile" in {source}'
        else:
            place = f'approval_mode = "auto" (or "ask") under [profile] in {source}'
        raise InvalidInput(f"{source}: {where} need an approval mode: add {place}")
    findings, _ = check_nexus_profile(merged, "profile")
    if not findings.ok:
        raise InvalidInput(
            f"{source}: with {where}, {findings.problems[0]}", problems=findings.problems[1:]
        )
    return merged
