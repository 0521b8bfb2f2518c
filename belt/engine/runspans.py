"""The spans of the runs a simulation drives (docs/tracing.md): a run's ``invoke_agent``, each
model turn's ``belt.turn``, and the model's and the tools' calls within it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from belt.engine.execution import Execution
from belt.outgoing import tracing
from belt.records.sims import Sim

SCRIPTED_MODEL = "scripted"  # the model the spans name: the scenario scripts its answers


class RunSpans:
    """The spans of one simulation's runs, when tracing is on (each a no-op when it is off)."""

    def __init__(self, sim: Sim, dialect: str) -> None:
        self.agent: dict[str, object] = {  # what every run's span says of its agent
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": str(sim.get("name") or "agent"),
            "gen_ai.agent.id": str(sim["agent_id"]),
            "belt.sim.id": sim["id"],
            "belt.dialect": dialect,
        }
        self.turn = contextlib.ExitStack()  # the span of the model turn being taken

    @contextlib.contextmanager
    def traced(self, execution: Execution) -> Iterator[Any]:
        """The span of a run as this process drives it; a resumed run goes on in its own trace."""
        kept = execution.state.get("trace")
        name = f"invoke_agent {self.agent['gen_ai.agent.name']}"
        run = {"belt.run.id": execution.run_id, "belt.run.resumed": bool(kept) or None}
        parent = kept if isinstance(kept, dict) else None
        with tracing.span(name, {**self.agent, **run}, parent=parent) as span:
            if not kept and (started := tracing.current()) is not None:
                execution.state["trace"] = started
            try:
                yield span
            finally:
                self.turn.close()

    def trace_turn(self, index: int) -> None:
        """A model turn begins: its span (``belt.turn``) is current until the next or the end."""
        self.turn.close()
        self.turn.enter_context(tracing.span("belt.turn", {"belt.turn.index": index}))

    def model_span(self, tokens: int | None) -> AbstractContextManager[Any]:
        """The span of one model call (GenAI ``chat``)."""
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": SCRIPTED_MODEL,
            "gen_ai.usage.output_tokens": tokens,
        }
        return tracing.span(f"chat {SCRIPTED_MODEL}", attributes, kind="client")

    def tool_span(self, name: str, invocation: Mapping[str, Any]) -> AbstractContextManager[Any]:
        """The span of one tool call (GenAI ``execute_tool``): its hooks and its run."""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": str(invocation.get("tool_invocation_id") or invocation["id"]),
        }
        return tracing.span(f"execute_tool {name}", attributes)
