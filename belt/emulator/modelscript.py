"""Model scripts: what the model of ``belt serve``'s emulated chats answers, chosen by rules.

A model script (``belt serve --model FILE``, docs/emulator.md) gives scenario model turns under
rules matching the user's text and agent name; the first match answers, else the plain model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from belt.declaring.declarations import read_document
from belt.engine.scenario import AgentScript, ModelTurnSpec, refuse, unreachable_models, validated
from belt.errors import InvalidInput
from belt.reading.matching import Matcher, value_matcher
from belt.wire.platform import Strict
from belt.wire.validate import Findings

PLAIN_PREFIX = "You said: "
PLAIN_LIMIT = 200  # characters of the user's text the plain model repeats at most


class ModelRule(Strict):
    """One rule: which messages it answers, and the model turns (or the error) it answers with."""

    match: str | None = None
    agent: str | None = None
    model: list[ModelTurnSpec] = Field(default_factory=list)
    error: str | None = None


class ModelScriptFile(Strict):
    """A whole model script file."""

    rules: list[ModelRule] = Field(default_factory=list)
    agents: dict[str, AgentScript] = Field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What the model does with one message, and the rule that chose it (None: the plain model)."""

    model: list[ModelTurnSpec]
    error: str | None = None
    rule: int | None = None


@dataclass(frozen=True)
class CompiledRule:
    """A rule with its patterns compiled as a policy's (a glob, or ``re:`` with RE2, never slow)."""

    index: int
    text: Matcher | None
    agent: Matcher | None
    rule: ModelRule

    def matches(self, text: str, agent: str) -> bool:
        """True when this rule answers ``text`` sent to the agent named ``agent``."""
        return (self.text is None or self.text(text)) and (self.agent is None or self.agent(agent))


@dataclass
class ModelScript:
    """The rules of a model script, compiled; an empty script is the plain model alone."""

    source: str | None = None
    rules: list[CompiledRule] = field(default_factory=list)
    agents: dict[str, AgentScript] = field(default_factory=dict)

    def reply(self, text: str, agent: str) -> Reply:
        """The reply of the first rule that matches, else the plain model's."""
        for rule in self.rules:
            if rule.matches(text, agent):
                return Reply(list(rule.rule.model), rule.rule.error, rule.index)
        return Reply(plain_reply(text))


def plain_reply(text: str) -> list[ModelTurnSpec]:
    """The plain model: one short reply that repeats the start of the message, and no tool."""
    if len(said := " ".join(text.split())) > PLAIN_LIMIT:
        said = said[:PLAIN_LIMIT] + "…"
    return [ModelTurnSpec(say=PLAIN_PREFIX + said)]


def compile_script(doc: Any, source: str) -> ModelScript:
    """Check a decoded model script and compile its rules; InvalidInput lists every problem."""
    if not isinstance(doc, dict):
        raise InvalidInput(f"{source}: expected a table/object at the top level")
    parsed = validated(ModelScriptFile, doc, source)
    findings = Findings()
    compiled = []
    for index, rule in enumerate(parsed.rules):
        where = f"rules[{index}]"
        if not rule.model and rule.error is None:
            findings.error(where, "give the model turns it answers with (model) or an error")
        text, agent = (
            None if raw is None else value_matcher(raw, f"{where}.{key}", findings)
            for key, raw in (("match", rule.match), ("agent", rule.agent))
        )
        compiled.append(CompiledRule(index, text, agent, rule))
    rules = {f"rules[{i}]": rule for i, rule in enumerate(parsed.rules)}
    refuse(source, findings.problems + unreachable_models(rules, parsed.agents))
    return ModelScript(source, compiled, dict(parsed.agents))


def load_model_script(path: str | Path) -> ModelScript:
    """Read and check a model script file (TOML or JSON)."""
    return compile_script(read_document(path), str(path))
