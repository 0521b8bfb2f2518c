"""The one generator of record ids: ``<prefix>_<20 lowercase letters and digits>``."""

from __future__ import annotations

import secrets
import string

from belt.store.clock import timestamp, utcnow

_ALPHABET = string.ascii_lowercase + string.digits
_LENGTH = 20


def new_id(prefix: str) -> str:
    """A fresh random id such as ``int_k2m9x0q4h7c1v8b5n3t6``, safe as a file name."""
    return f"{prefix}_" + "".join(secrets.choice(_ALPHABET) for _ in range(_LENGTH))


def now_iso() -> str:
    """The current UTC time as records spell it (RFC 3339, milliseconds, ``Z``)."""
    return timestamp(utcnow())
