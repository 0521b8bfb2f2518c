"""The platform's builtin handlers (``belt:NAME`` in a hook), one module each, registered here.

Each module has its name and ``run(loop, hook_run, payload)``, which answers the hook being fired
(``hook_run.response``, or what the loop is to do next). What each builtin is, on which events it
runs, is the wire's (``belt.wire.catalogue.BUILTINS``: validation and ``belt hooks builtins``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from belt.dialects.platform.builtins import extract, suggest

if TYPE_CHECKING:
    from belt.dialects.platform.agent_loop import PlatformLoop
    from belt.engine.dispatch import HookRun

BUILTINS: dict[str, Callable[[PlatformLoop, HookRun, Mapping[str, object]], None]] = {
    suggest.SUGGEST: suggest.run,
    extract.EXTRACT: extract.run,
}
"""Each builtin's ``run``, by the handler name a hook gives it."""
