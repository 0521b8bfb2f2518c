"""What ``belt sim run`` and ``belt sim resume`` print while a simulation works: live lines on
stderr (hook tasks served, tasks and gates waited on) and, at a gate a ``--wait`` run stays at,
the transcript so far and the earliest expiry counting down."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from belt.display import output, render
from belt.errors import ExitCode

if TYPE_CHECKING:
    from belt.dialects.simreport import SimReport


class SimLive:
    """The live reporter of one simulation command; it remembers the run it last reported, for
    the hint Ctrl-C prints."""

    def __init__(self, *, transcript: bool, verbose: bool = False) -> None:
        self.transcript = transcript
        self.verbose = verbose
        self.printed: list[tuple[str, str]] = []
        self.run_id: str | None = None
        self._countdown: Any = None

    def __call__(self, record: dict[str, Any]) -> None:
        self.close()
        if record.get("run_id"):
            self.run_id = str(record["run_id"])
        if record.get("kind") == "gates" and self.transcript:
            from belt.engine.entrypoints import show_run  # start-up: the engine

            report = show_run(run_id=str(record["run_id"]))
            # The gates are told of below, with the commands for a run that waits (not resume).
            shown: SimReport = {**report, "chat": {**report["chat"], "pending_interrupts": []}}
            lines = render.transcript_lines(shown, verbose=self.verbose)
            output.lines(render.transcript_rest(self.printed, lines))
            self.printed = lines
        if record.get("kind") == "approval" and output.is_terminal(sys.stderr):
            # One line kept current: what it waits for, how to give it, the time left.
            self._keep_current(lambda now: render.approval_waiting_text(record, now))
            return
        output.styled(*render.task_line(record), stderr=True)
        if record.get("kind") == "gates":
            pending = record["pending"]
            self._keep_current(lambda now: render.countdown_text(pending, now))

    def _keep_current(self, text: Callable[[datetime], str]) -> None:
        """A line on stderr kept current (the time left) until the next record or ``close``."""
        self._countdown = output.LiveLine(lambda: text(datetime.now(UTC)))
        self._countdown.start()

    def close(self) -> None:
        """Stop and clear the countdown, if one is shown."""
        if self._countdown is not None:
            self._countdown.stop()
            self._countdown = None


def waiting(
    simulate: Callable[..., tuple[SimReport, list[str]]], live: SimLive, **kwargs: Any
) -> tuple[SimReport, list[str]]:
    """Run ``simulate`` reporting to ``live``; Ctrl-C while it waits at a gate stops waiting,
    leaves the run held, and prints the commands that go on with that run (exit 130)."""

    try:
        result = simulate(report=live, **kwargs)
    except KeyboardInterrupt:
        live.close()
        run = live.run_id
        if run is None:
            hint = "`belt sim list` shows it, `belt sim resume --last` continues it"
        else:
            hint = f"`belt sim show {run}` shows it, `belt sim resume {run} --wait` waits again"
        output.warning(
            "stopped waiting; the run stays where it was (at its gates, or at its last durable "
            f"point): {hint}"
        )
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    finally:
        live.close()
    return result
