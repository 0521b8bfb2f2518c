"""The one generator of record ids: ``<prefix>_<20 lowercase letters and digits>``."""

from __future__ import annotations

import secrets
import string

from belt.store import clock
from belt.store.clock import timestamp

_ALPHABET = string.ascii_lowercase + string.digits
_LENGTH = 20
_SPACE = len(_ALPHABET) ** _LENGTH


def new_id(prefix: str) -> str:
    """A fresh random id such as ``int_k2m9x0q4h7c1v8b5n3t6`` (one draw, written in base 36)."""
    number, base = secrets.randbelow(_SPACE), len(_ALPHABET)
    return f"{prefix}_" + "".join(_ALPHABET[number // base**i % base] for i in range(_LENGTH))


def now_iso() -> str:
    """The time of the simulated world (the virtual clock's, else wall time) as records spell it."""
    return timestamp(clock.now())
