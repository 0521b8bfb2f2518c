"""The platform's builtin handlers (``belt:NAME`` in a hook), one module each, registered here.

Each has ``run(loop, hook_run, payload)``, which answers the hook being fired; its events and
description are the wire's (``belt.wire.catalogue.BUILTINS``).
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
