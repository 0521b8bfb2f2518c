"""The agents of ``belt serve``'s emulated chats: ad-hoc configs and template agent files.

An application names its agent as the SDKs do: an ad-hoc ``agent_config``, or a template ref
``ns/name@version`` resolved from agent files (``belt serve --agents DIR``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from belt.declaring.declarations import read_document
from belt.display.text import describe
from belt.engine.scenario import AgentSpec, hooks_from_file, load_hooks, validated
from belt.errors import InvalidInput, NotFound
from belt.wire.platform import GATE_TIMEOUT_MAX, LifecycleHookConfig
from belt.wire.validate import is_int

SEGMENT = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
REF = re.compile(rf"^{SEGMENT}(?:/{SEGMENT})?(?:@{SEGMENT})?$")  # [ns/]name[@version]

NAME_MAX = 200
AGENT_SUFFIXES = (".toml", ".json")


@dataclass(frozen=True)
class ToolSetting:
    """How one of the agent's tools is called: by the application or not, approved first or not."""

    client: bool = False
    require_approval: bool = False
    approval_timeout: int = 0


@dataclass
class AgentDefinition:
    """An agent an emulated chat runs: its name, hooks, tools and context limits."""

    name: str
    spec: AgentSpec
    hooks: list[LifecycleHookConfig] = field(default_factory=list)
    tools: dict[str, ToolSetting] = field(default_factory=dict)
    ref: str | None = None
    record: dict[str, object] = field(default_factory=dict)  # what else its record keeps


class AgentFileSpec(AgentSpec):
    """An agent file: a scenario's ``[agent]`` table, plus the agent's tools and prompt."""

    tools: list[Any] = Field(default_factory=list)
    description: str | None = None


def agent_id_for(label: str) -> str:
    """A stable agent id for the agent named ``label`` (ad-hoc agents are one per name)."""
    return "ag_" + hashlib.sha256(label.encode("utf-8")).hexdigest()[:20]


def check_tools(raw: Any, base: str) -> dict[str, ToolSetting]:
    """The settings of an agent's ``tools`` array; InvalidInput names each bad field."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise InvalidInput(f"{base}: expected an array of tools, got {describe(raw)}")
    problems: list[str] = []
    tools: dict[str, ToolSetting] = {}
    for index, tool in enumerate(raw):
        where = f"{base}[{index}]"
        if tool is None:
            continue
        if not isinstance(tool, dict):
            problems.append(f"{where}: expected an object, got {describe(tool)}")
            continue
        if not isinstance((name := tool.get("name")), str) or not name:
            problems.append(f"{where}.name: expected a tool name, got {describe(name)}")
            continue
        if (kind := tool.get("type")) is not None and not isinstance(kind, str):
            problems.append(f"{where}.type: expected a string, got {describe(kind)}")
        if not isinstance((approval := tool.get("require_approval", False)), bool):
            got = describe(approval)
            problems.append(f"{where}.require_approval: expected a boolean, got {got}")
        timeout = 0 if tool.get("approval_timeout") is None else tool["approval_timeout"]
        if not is_int(timeout) or not 0 <= timeout <= GATE_TIMEOUT_MAX:
            problems.append(
                f"{where}.approval_timeout: expected whole seconds 0 through {GATE_TIMEOUT_MAX}, "
                f"got {describe(timeout)}"
            )
            continue
        tools[name] = ToolSetting(kind == "client", approval is True, int(timeout))
    if problems:
        raise InvalidInput(problems[0], problems=problems[1:])
    return tools


def agent_from_config(config: Any, name: Any) -> AgentDefinition:
    """The agent of an ad-hoc ``agent_config`` named ``agent_name`` (else its ``name``)."""
    if not isinstance(config, dict):
        raise InvalidInput(f"agent_config: expected an object, got {describe(config)}")
    label = next((given for given in (name, config.get("name")) if given is not None), "agent")
    if not isinstance(label, str) or not label.strip() or len(label) > NAME_MAX:
        raise InvalidInput(
            f"agent_name: expected a name of 1 to {NAME_MAX} characters, got {describe(label)}"
        )
    try:
        hooks = load_hooks(config.get("hooks") or [], "agent_config", "agent_config.hooks")
    except InvalidInput as exc:
        # The answer names the first bad hook field (every one is in ``problems``).
        first, *rest = exc.problems or [exc.message.removeprefix("agent_config: ")]
        raise InvalidInput(first, problems=rest, hint=exc.hint) from None
    tools = check_tools(config.get("tools"), "agent_config.tools")
    record = {
        key: config[key]
        for key in ("description", "system_prompt", "core_app", "tools")
        if key in config
    }
    prompt = config.get("system_prompt")
    prompt = prompt if isinstance(prompt, str) else None
    spec = AgentSpec(id=agent_id_for(label), name=label, system_prompt=prompt)
    return AgentDefinition(label, spec, hooks, tools, None, record)


def load_agent_file(path: Path, ref: str) -> AgentDefinition:
    """One agent file, the agent of template ref ``ref``."""
    source = str(path)
    if not isinstance((doc := read_document(path)), dict):
        raise InvalidInput(f"{source}: expected a table/object at the top level")
    if (spec := validated(AgentFileSpec, doc, source)).registry is not None:
        raise InvalidInput(
            f"{source}: registry: an agent file does not load a registry",
            hint="load it into the store with `belt registry add` before `belt serve`",
        )
    hooks = hooks_from_file(path.parent / spec.hooks_file) if spec.hooks_file else []
    hooks += load_hooks(spec.hooks, source, "hooks") if spec.hooks else []
    try:
        tools = check_tools(spec.tools, "tools")
    except InvalidInput as exc:
        raise InvalidInput(f"{source}: {exc.message}", problems=exc.problems) from None
    kept = spec.model_dump(include={"owner", "system_prompt", "context_window", "compact_at"})
    name = spec.name if "name" in doc else ref.rsplit("/", 1)[-1]
    base = AgentSpec.model_validate({"id": spec.id or agent_id_for(ref), "name": name, **kept})
    shown = spec.model_dump(include={"system_prompt", "description"}, exclude_none=True)
    record: dict[str, object] = {"ref": ref, "tools": spec.tools, **shown}
    return AgentDefinition(base.name, base, hooks, tools, ref, record)


@dataclass
class AgentFiles:
    """The template agents of ``--agents DIR``, checked when ``belt serve`` starts."""

    directory: Path | None = None
    agents: dict[str, AgentDefinition] = field(default_factory=dict)

    def resolve(self, ref: Any) -> AgentDefinition:
        """The agent of a template ref: file ``ns/name`` (else ``name``); no version looked at."""
        if not isinstance(ref, str) or not REF.fullmatch(ref):
            raise InvalidInput(
                f"agent: expected a template ref namespace/name@version, got {describe(ref)}"
            )
        key = ref.partition("@")[0]
        if (found := self.agents.get(key) or self.agents.get(key.rsplit("/", 1)[-1])) is not None:
            return found
        if self.directory is None:
            raise NotFound(
                f"no agent {ref}: belt serve was started without agent files",
                hint="start it with --agents DIR (one file per agent), or send agent_config",
            )
        raise NotFound(
            f"no agent {ref} in {self.directory}",
            hint=f"add {self.directory / key}.toml (a scenario's [agent] table as a file)",
        )


def load_agent_files(directory: Path) -> AgentFiles:
    """Every agent file under ``directory`` (``ns/name.toml``, ``name.json``...), checked."""
    if not directory.is_dir():
        raise NotFound(f"{directory}: no such directory of agent files")
    agents: dict[str, AgentDefinition] = {}
    problems: list[str] = []
    for path in sorted(directory.rglob("*")):
        if path.suffix not in AGENT_SUFFIXES or not path.is_file():
            continue
        key = path.relative_to(directory).with_suffix("").as_posix()
        if not REF.fullmatch(key) or "@" in key:
            problems.append(f"{path}: its name is not a template ref (namespace/name)")
            continue
        if key in agents:
            problems.append(f"{path}: agent {key} is defined twice")
            continue
        try:
            agents[key] = load_agent_file(path, key)
        except (InvalidInput, NotFound) as exc:
            problems += [exc.message, *getattr(exc, "problems", [])]
    if problems:
        raise InvalidInput(problems[0], problems=problems[1:])
    return AgentFiles(directory, agents)
