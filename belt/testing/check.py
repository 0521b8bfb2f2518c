"""``belt check`` from a test: ``check_handler(my_hook, events=[...])``, seed 0 so a run repeats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from belt.check.report import CheckReport, failure_lines
from belt.check.run import run_check
from belt.testing.plugin import register, unregister


def check_handler(
    target: str | Callable[..., Any], *, examples: int = 25, seed: int = 0, **options: Any
) -> CheckReport:
    """Run ``belt check`` (``options``: run_check's) on ``target``; AssertionError if one fails."""
    reference = register(target) if callable(target) else None
    try:
        report = run_check(reference or str(target), examples=examples, seed=seed, **options)
    finally:
        if reference is not None:
            unregister(reference)
    if report.exit_code != 0:
        raise AssertionError("\n".join(["belt check failed:", *failure_lines(report)]))
    return report
