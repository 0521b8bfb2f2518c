"""The Nexus dialect (spec/nexus-lifecycle-hooks.txt): executions whose lifecycle hooks are tasks
in the executor inbox; the driver's loop is ``execution_loop``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from belt.loader import collector_paused
from belt.wire.nexus import NexusEvent


class NexusDialect:
    """The Nexus dialect (``belt.dialects.Dialect``)."""

    name = "nexus"
    title = "Nexus"
    events = tuple(e.value for e in NexusEvent)
    gate_events = events
    decisions = ("continue", "acknowledge")
    foreign_subjects = {
        "injection": "injections belong to the platform dialect",
        "injected_tokens": "injections belong to the platform dialect",
    }

    def loop(self) -> type[Any]:
        """The driver's loop of Nexus executions."""
        with collector_paused():  # Start-up: the engine, see belt.loader
            from belt.dialects.nexus.execution_loop import NexusLoop  # noqa: PLC0415 - the engine, when a run asks

        return NexusLoop

    def scenario_problems(self, doc: dict[str, Any]) -> list[str]:
        """Keys of platform scenarios in a Nexus one."""
        from belt.engine.scenario import dialect_problems  # noqa: PLC0415 - pydantic, when a scenario is read

        return dialect_problems(doc, self.name)

    def load_scenario(
        self,
        doc: dict[str, Any],
        source: str,
        directory: Path,
        *,
        hooks_file: str | Path | None,
        stored_hooks: bool,
        locate: bool,
    ) -> Any:
        """A checked Nexus scenario with its profile (``stored_hooks``: rho's when it has none)."""
        from belt.engine.scenario import load_nexus_scenario  # noqa: PLC0415 - pydantic, when a scenario is read

        return load_nexus_scenario(
            doc,
            source,
            hooks_file=hooks_file,
            stored_hooks=stored_hooks,
            directory=directory if locate else None,
        )

    def transcript_lines(self, report: dict[str, Any], *, verbose: bool) -> list[tuple[str, str]]:
        """Each execution, its messages and hook tasks, and what holds it."""
        from belt.render import nexus_transcript_lines  # noqa: PLC0415 - layer: the renderer is above

        return nexus_transcript_lines(report)

    def message_lines(self, message: dict[str, Any]) -> list[tuple[str, str]]:
        """A message and the hook tasks on it."""
        from belt.render import nexus_message_lines  # noqa: PLC0415 - layer: the renderer is above

        return nexus_message_lines(message)


DIALECT = NexusDialect()
