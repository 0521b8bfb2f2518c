"""inference.sh's own dialect ("platform"): agent runs whose hooks fire on the agent's events
(spec/hooks.md); the driver's loop is ``agent_loop``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from belt.loader import collector_paused
from belt.wire.catalogue import EVENTS, GATEABLE_EVENTS
from belt.wire.enums import HookDecision


class PlatformDialect:
    """The platform dialect (``belt.dialects.Dialect``)."""

    name = "platform"
    title = "the platform"
    events = tuple(EVENTS)
    gate_events = GATEABLE_EVENTS
    decisions = tuple(d.value for d in HookDecision)
    foreign_subjects = {"continuations": "Nexus stop continuations; this scenario is platform"}

    def loop(self) -> type[Any]:
        """The driver's loop of platform runs."""
        with collector_paused():  # Start-up: the engine, see belt.loader
            from belt.dialects.platform.agent_loop import PlatformLoop  # noqa: PLC0415 - the engine, when a run asks

        return PlatformLoop

    def scenario_problems(self, doc: dict[str, Any]) -> list[str]:
        """Keys of Nexus scenarios in a platform one."""
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
        """A checked platform scenario with its hooks (it never reads stored ones)."""
        from belt.engine.scenario import load_platform_scenario  # noqa: PLC0415 - pydantic, when a scenario is read

        return load_platform_scenario(doc, source, directory, hooks_file=hooks_file, locate=locate)

    def transcript_lines(self, report: dict[str, Any], *, verbose: bool) -> list[tuple[str, str]]:
        """Each run, its messages and hook rows, and the gates that hold it."""
        from belt.render import platform_lines, quiet_deliveries  # noqa: PLC0415 - layer: the renderer is above

        return platform_lines(report, quiet_deliveries(report) if verbose else [])

    def message_lines(self, message: dict[str, Any]) -> list[tuple[str, str]]:
        """A message and its hook rows."""
        from belt.render import message_lines  # noqa: PLC0415 - layer: the renderer is above

        return message_lines(message)


DIALECT = PlatformDialect()
