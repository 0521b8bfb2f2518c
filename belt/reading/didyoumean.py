""" "Did you mean": the closest valid name to a misspelt key, event, tool or field, which every
message that names something unknown adds to its rule (``did_you_mean(word, valid)``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

CUTOFF = 0.65
"""How alike a name must be to be offered (difflib's ratio): ``sai`` is offered ``say`` (0.67),
``mine`` is not offered ``inject`` (0.6, difflib's own cutoff)."""


def closest(word: Any, choices: Iterable[Any]) -> str | None:
    """The valid name close enough to ``word`` (a string, not itself valid), else None."""
    if not isinstance(word, str) or not word:
        return None
    names = list(dict.fromkeys(str(choice) for choice in choices))
    if word in names:
        return None
    found = difflib.get_close_matches(word, names, n=1, cutoff=CUTOFF)
    if not found:  # a name written in another case (``Say``, ``AGENT.START``) is still close
        lowered = {name.lower(): name for name in names}
        found = [
            lowered[m] for m in difflib.get_close_matches(word.lower(), lowered, n=1, cutoff=CUTOFF)
        ]
    return found[0] if found else None


def did_you_mean(word: Any, choices: Iterable[Any]) -> str:
    """``"; did you mean 'say'?"`` when a valid name is close to ``word``, else ``""``."""
    return f"; did you mean {match!r}?" if (match := closest(word, choices)) is not None else ""
