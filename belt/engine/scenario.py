"""Scenario files: what the scripted model does, and the hooks declared on the agent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Required, Self, TypedDict, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from belt import dialects
from belt.declaring.declarations import read_document
from belt.deliveries.effects import is_in_process
from belt.display.text import printable
from belt.errors import InvalidInput
from belt.handlers.inprocess import Located, locate_handler
from belt.reading.didyoumean import did_you_mean
from belt.reading.matching import argument_matchers, arguments_match, value_matcher
from belt.rules.policy import load_policy
from belt.store.clock import DURATION_MAX, check_moment, parse_duration, parse_rfc3339
from belt.wire.dto import InterruptJSON
from belt.wire.platform import GATE_TIMEOUT_MAX, HookHandlerType, LifecycleHookConfig
from belt.wire.validate import POLICY_PREFIX, Findings, check_platform_hooks, model_problems

ModelT = TypeVar("ModelT", bound=BaseModel)
ID_PATTERN = r"^[A-Za-z0-9_-]+$"
ID_MAX = 128  # ids become file names in the store
DEFAULT_OWNER = "local"
"""The registry's ``DEFAULT_OWNER``, spelled here to keep it off a run's imports (test_startup)."""


# Start-up: each model is built on first use (defer_build), so a platform run does not build
# the Nexus scenario's models, nor a Nexus run the platform's.
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


def _clock_start(value: Any) -> datetime | None:
    """A scenario's ``clock``: an RFC 3339 string with its offset (or a TOML offset date-time)."""
    if value is None:
        return None
    if isinstance(value, datetime | str):
        check = check_moment if isinstance(value, datetime) else parse_rfc3339
        return _checked(check, value, "clock", "clock")  # type: ignore[no-any-return]
    raise PydanticCustomError(
        "clock", 'expected an RFC 3339 timestamp with an offset, like "2026-08-11T14:00:00Z"'
    )


ClockStart = Annotated[datetime | None, BeforeValidator(_clock_start)]
"""Where a scenario's virtual clock starts (UTC); None: the simulation runs on wall time."""


def _checked(check: Any, value: Any, where: str, kind: str) -> Any:
    """``check(value, where)``, its InvalidInput a pydantic error of ``kind``."""
    try:
        return check(value, where)
    except InvalidInput as exc:
        reason = exc.message.removeprefix(f"{where}: ")
        raise PydanticCustomError(kind, "{reason}", {"reason": reason}) from None


def _duration(value: str) -> str:
    """A turn's ``after``: a span ``parse_duration`` reads (kept as written)."""
    _checked(parse_duration, value, "after", "duration")
    return value


Duration = Annotated[str, AfterValidator(_duration)]


class WaitSpec(_Strict):
    """Time that passes while a turn's run holds (``[[turns.wait]]``): ``seconds``, or until the
    earliest deadline of its pending gates and approvals (the sweep then settles them)."""

    seconds: StrictInt | None = Field(default=None, ge=0, le=int(DURATION_MAX.total_seconds()))
    until: Literal["expiry"] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.seconds is None) == (self.until is None):
            raise PydanticCustomError("wait", 'give one of seconds = N or until = "expiry"', {})
        return self


class ToolCallSpec(_Strict):
    """One tool call the scripted model makes, and what the tool returns (``approval_timeout``
    in seconds, 0 for the longest a gate may wait)."""

    name: str = Field(min_length=1)
    arguments: dict[str, object] = Field(default_factory=dict)
    result: str = ""
    status: Literal["completed", "failed"] = "completed"
    async_: bool = Field(default=False, alias="async")
    client: bool = False
    require_approval: bool = False
    approval_timeout: int = Field(default=0, ge=0, le=GATE_TIMEOUT_MAX)


class ModelTurnSpec(_Strict):
    """One model turn: optional text, its size, and the tools it calls."""

    say: str | None = None
    tokens: int | None = Field(default=None, ge=0)
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)


class ResolveSpec(_Strict):
    """A gate the scenario settles itself when its turn opens it (the first match resolves it)."""

    event: str | None = None
    tool: str | None = None
    arguments: dict[str, object] | None = None
    decision: Literal["allow", "deny"]
    data: Any = None


class StoredResolve(TypedDict, total=False):
    """A ``[[turns.resolve]]`` as the simulation's scenario stores it (``ResolveSpec``)."""

    event: str | None
    tool: str | None
    arguments: dict[str, object] | None
    decision: Required[str]
    data: object


class StoredWait(TypedDict, total=False):
    """A ``[[turns.wait]]`` as stored (``WaitSpec``)."""

    seconds: int | None
    until: str | None


class StoredTurn(TypedDict, total=False):
    """A scenario turn as the simulation's scenario stores it (``TurnSpec``, ``NexusTurnSpec``)."""

    user: str | None
    model: list[dict[str, object]]
    error: str | None
    resolve: list[StoredResolve]
    wait: list[StoredWait]
    after: str | None


class TurnSpec(_Strict):
    """One user message, which starts one run, and the model turns that answer it."""

    user: str
    model: list[ModelTurnSpec] = Field(default_factory=list)
    error: str | None = None
    resolve: list[ResolveSpec] = Field(default_factory=list)
    wait: list[WaitSpec] = Field(default_factory=list)
    after: Duration | None = None  # after the previous turn, on the virtual clock


class AgentScript(_Strict):
    """An agent task hooks reference: what its model does with a task (no script: acknowledged)."""

    model: list[ModelTurnSpec] = Field(default_factory=list)
    error: str | None = None


class ReviewScript(_Strict):
    """What one review of ``belt:extract`` answers: the candidates it returns, in order."""

    candidates: list[dict[str, object]] = Field(default_factory=list)


class AgentSpec(_Strict):
    """The simulated agent: its hooks, its system prompt and its context limits."""

    id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=ID_MAX)
    name: str = "agent"
    owner: str = Field(default=DEFAULT_OWNER, pattern=ID_PATTERN, max_length=ID_MAX)
    system_prompt: str | None = None  # a review branch is asked with it, as the agent
    registry: str | None = None
    hooks_file: str | None = None
    hooks: list[Any] = Field(default_factory=list)
    context_window: int = Field(default=128_000, gt=0)
    compact_at: float = Field(default=0.8, gt=0, le=1)


class ChatSpec(_Strict):
    """The chat the scenario runs in."""

    id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=ID_MAX)
    disable_hooks: bool = False
    user_team: str | None = Field(default=None, pattern=ID_PATTERN, max_length=ID_MAX)


class Scenario(_Strict):
    """A whole scenario file of the platform dialect."""

    dialect: Literal["platform"] = "platform"
    agent: AgentSpec = Field(default_factory=AgentSpec)
    chat: ChatSpec = Field(default_factory=ChatSpec)
    turns: list[TurnSpec] = Field(min_length=1)
    agents: dict[str, AgentScript] = Field(default_factory=dict)
    reviews: list[ReviewScript] = Field(default_factory=list)
    expect: list[Any] = Field(default_factory=list)
    hook_errors: Literal["fail", "allow"] = "fail"  # belt test: does an unnamed failure fail
    clock: ClockStart = None

    @property
    def user_team(self) -> str:
        """The team of the chat's user: the owner's unless the scenario says otherwise."""
        return self.chat.user_team or self.agent.owner

    def script_for(self, ref: str) -> AgentScript | None:
        """The script of the agent a task hook names (``ns/name@version`` matches ``ns/name``)."""
        return self.agents.get(ref) or self.agents.get(ref.rsplit("@", 1)[0])


@dataclass
class LoadedScenario:
    """A checked scenario, its agent's hooks, and where its in-process hooks load from, by index."""

    source: str
    scenario: Scenario
    hooks: list[LifecycleHookConfig]
    hooks_file: str | None = None
    located: dict[int, Located] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    dialect: ClassVar[str] = "platform"


def unreachable_models(scripts: Mapping[str, Any], agents: Mapping[str, AgentScript]) -> list[str]:
    """The model turns and errors of scripts (by where) and of ``agents`` that no run reaches."""
    problems = []
    for where, script in [*scripts.items(), *((f'agents."{r}"', a) for r, a in agents.items())]:
        models: list[ModelTurnSpec] = script.model
        for m, model in enumerate(models[:-1]):
            if not model.tool_calls:
                problems.append(
                    f"{where}.model[{m + 1}]: unreachable, model[{m}] calls no tool and so "
                    "ends the run"
                )
                break
        if script.error and models and models[-1].tool_calls == []:
            problems.append(
                f"{where}.error: unreachable, the last model turn calls no tool and so ends "
                "the run before the failing model request"
            )
    return problems


def builtin_problems(scenario: Scenario, directory: Path) -> list[str]:
    """The scripted reviews' candidates, and the registry directory the agent loads."""
    problems: list[str] = []
    for r, review in enumerate(scenario.reviews):
        # Start-up: the registry (and its search index) only for a scenario that scripts reviews.
        from belt.records.registry import check_candidate  # noqa: PLC0415 - a platform run loads no registry (sqlite3)

        for c, candidate in enumerate(review.candidates):
            try:
                check_candidate(candidate, where=f"reviews[{r}].candidates[{c}]")
            except InvalidInput as exc:
                problems += [exc.message, *exc.problems]
    if (registry := scenario.agent.registry) is not None and not (directory / registry).is_dir():
        problems.append(f"agent.registry: {directory / registry} is not a directory")
    return problems


def load_hooks(raw: Any, source: str, base: str) -> list[LifecycleHookConfig]:
    """Check a hooks array from a scenario or hooks file (``py:MODULE:FUNC`` webhooks too)."""
    findings, hooks = check_platform_hooks(raw, base, in_process=True)
    if not findings.ok:
        raise InvalidInput(
            f"{source}: {len(findings.problems)} problem(s) in the hooks",
            problems=findings.problems,
        )
    return hooks


def locate_hooks(
    hooks: list[LifecycleHookConfig], directory: Path, source: str, base: str
) -> dict[int, Located]:
    """Where each in-process hook of a file of ``directory`` loads from, by index (a ``policy:``
    file read and checked now); ``source`` and ``base`` name the hooks in errors."""
    found: dict[int, Located] = {}
    for index, hook in enumerate(hooks):
        if hook.type == HookHandlerType.WEBHOOK and is_in_process(handler := str(hook.handler)):
            place = locate_handler(handler, directory, where=f"{source}: {base}[{index}].handler")
            if place.spec.startswith(POLICY_PREFIX):
                load_policy(place.spec[len(POLICY_PREFIX) :])
            found[index] = place
    return found


def hooks_from_file(path: Path) -> list[LifecycleHookConfig]:
    """The hooks of a declaration file (``{"hooks": [...]}``, a bare array, or TOML)."""
    doc = read_document(path)
    raw = doc.get("hooks", doc) if isinstance(doc, dict) else doc
    if isinstance(doc, dict) and (extra := sorted(set(doc) - {"hooks"})):
        raise InvalidInput(
            f"{path}: {extra[0]}: unknown key (a hooks file holds only hooks)"
            + did_you_mean(extra[0], ("hooks",))
        )
    return load_hooks(raw, str(path), "hooks")


def scenario_dialect(doc: Mapping[str, object], source: str) -> str:
    """The dialect a scenario document is written in (``dialect`` at the top; default platform)."""
    dialect = doc.get("dialect", dialects.PLATFORM)
    if not isinstance(dialect, str) or not dialects.known(dialect):
        expected = " or ".join(repr(name) for name in dialects.names())
        raise InvalidInput(f"{source}: dialect: {dialect!r} is not a dialect (expected {expected})")
    return dialect


def read_scenario(
    path: str | Path, *, hooks_file: str | Path | None = None, stored_hooks: bool = False
) -> Any:
    """Read and check a scenario of any dialect (what its dialect's ``load_scenario`` gives)."""
    source = str(path)
    if not source.isprintable() and source.encode("utf-8", "replace").decode("utf-8") != source:
        raise InvalidInput(
            f"{printable(source)}: the file name is not UTF-8; belt records a scenario by its "
            "name, rename it"
        )
    return scenario_from_document(
        read_document(path, kind="scenario"),
        source,
        Path(path).parent,
        hooks_file=hooks_file,
        stored_hooks=stored_hooks,
    )


def refuse(source: object, problems: list[str]) -> None:
    """An InvalidInput naming ``source`` and the first of ``problems``, when there are any."""
    if problems:
        raise InvalidInput(f"{source}: {problems[0]}", problems=problems[1:])


def validated(model: type[ModelT], doc: Any, source: str) -> ModelT:
    """``doc`` checked as ``model``; an InvalidInput naming ``source`` when it is not one."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        problems = model_problems(exc, model=model)
        raise InvalidInput(f"{source}: {problems[0]}", problems=problems[1:]) from None


def scenario_from_document(
    doc: Any,
    source: str,
    directory: Path,
    *,
    hooks_file: str | Path | None = None,
    stored_hooks: bool = False,
    locate: bool = True,
) -> Any:
    """Check a decoded scenario of any dialect (what its dialect's ``load_scenario`` gives)."""
    if not isinstance(doc, dict):
        raise InvalidInput(f"{source}: expected a table/object at the top level")
    dialect = dialects.get(scenario_dialect(doc, source))
    refuse(source, dialect.scenario_problems(doc))
    return dialect.load_scenario(
        doc, source, directory, hooks_file=hooks_file, stored_hooks=stored_hooks, locate=locate
    )


def load_platform_scenario(
    doc: Mapping[str, object],
    source: str,
    directory: Path,
    *,
    hooks_file: str | Path | None = None,
    locate: bool = True,
) -> LoadedScenario:
    """Check a platform scenario and read its hooks (``hooks_file`` replaces them)."""
    findings = Findings()
    scenario = validated(Scenario, doc, source)
    turns = {f"turns[{t}]": turn for t, turn in enumerate(scenario.turns)}
    problems = unreachable_models(turns, scenario.agents) + builtin_problems(scenario, directory)
    check_resolutions([t.resolve for t in scenario.turns], dialects.PLATFORM, findings)
    problems += findings.problems
    refuse(source, problems)
    # Each file's hooks, and the file they are read from (its paths are read from its directory).
    files = [Path(hooks_file)] if hooks_file is not None else []
    if hooks_file is None and scenario.agent.hooks_file:
        files.append(directory / scenario.agent.hooks_file)
    declared = [(hooks_from_file(path), path.parent, str(path), "hooks") for path in files]
    if hooks_file is None and scenario.agent.hooks:
        hooks = load_hooks(scenario.agent.hooks, source, "agent.hooks")
        declared.append((hooks, directory, source, "agent.hooks"))
    loaded = LoadedScenario(source, scenario, [], str(hooks_file) if hooks_file else None)
    for hooks, found_in, named_in, base in declared:
        places = locate_hooks(hooks, found_in, named_in, base) if locate else {}
        loaded.located |= {len(loaded.hooks) + index: place for index, place in places.items()}
        loaded.warnings += [place.warning for place in places.values() if place.warning]
        loaded.hooks += hooks
    return loaded


def check_resolutions(turns: list[list[ResolveSpec]], dialect: str, findings: Findings) -> None:
    """The scripted resolutions of every turn: events of the dialect, valid patterns."""
    events = dialects.get(dialect).gate_events
    for t, specs in enumerate(turns):
        for r, spec in enumerate(specs):
            path = f"turns[{t}].resolve[{r}]"
            if spec.event is not None and spec.event not in events:
                findings.error(
                    f"{path}.event", f"{spec.event!r} opens no gate (one of {', '.join(events)})"
                )
            if spec.tool is not None:
                value_matcher(spec.tool, f"{path}.tool", findings)
            if spec.arguments is not None:
                argument_matchers(spec.arguments, f"{path}.arguments", findings)


def resolution_for(specs: list[StoredResolve], interrupt: InterruptJSON) -> StoredResolve | None:
    """The first of a turn's scripted resolutions (as stored) that matches an open gate."""
    source = str(interrupt.get("source") or "")
    event = source.partition(":")[2]
    meta = interrupt.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    data = meta["data"] if isinstance(meta.get("data"), dict) else {}
    tool = data.get("tool", meta.get("tool_name"))
    arguments = data.get("arguments", meta.get("arguments"))
    findings = Findings()
    for spec in specs:
        if spec.get("event") is not None and spec["event"] != event:
            continue
        if spec.get("tool") is not None:
            matcher = value_matcher(spec["tool"], "tool", findings)
            if matcher is None or not matcher(tool):
                continue
        if spec.get("arguments") is not None:
            matchers = argument_matchers(spec["arguments"], "arguments", findings)
            if not arguments_match(matchers, arguments):
                continue
        return spec
    return None


def check_storable(value: Any, where: str, tail: str = "") -> None:
    """Refuse, before anything is written, what the store cannot hold (it would fail half-way)."""
    try:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json", by_alias=True)
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except RecursionError:
        raise InvalidInput(f"{where}: a value is nested too deeply to be stored") from None
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{where}: text holds a character that is not valid Unicode "
            f"({exc.object[exc.start : exc.end]!r}){tail}"
        ) from None
    except ValueError as exc:
        raise InvalidInput(f"{where}: a value cannot be stored: {exc}") from None


def estimate_tokens(text: str | None) -> int:
    """The default size of a text in tokens: its length / 4, rounded up."""
    return (len(text) + 3) // 4 if text else 0


def utf8_size(text: str | None) -> int:
    """The size of a text in bytes of UTF-8."""
    return len(text.encode("utf-8")) if text else 0
