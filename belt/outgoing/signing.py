"""Standard Webhooks signatures: signing outgoing hook calls and verifying incoming ones."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping

from belt.errors import InvalidInput

SECRET_PREFIX = "whsec_"
TOLERANCE_SECONDS = 300


class SignatureError(InvalidInput):
    """A request's Standard Webhooks headers are missing, stale or do not match."""


def new_secret() -> str:
    """A fresh ``whsec_`` secret (24 random bytes), as the platform hands one out."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret; a malformed secret is invalid input."""
    if not secret.startswith(SECRET_PREFIX):
        raise InvalidInput("secret: expected whsec_<base64 key>")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("secret: the part after whsec_ is not valid base64") from None
    if not key:
        raise InvalidInput("secret: the key after whsec_ is empty")
    return key


def sign(secret: str | bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``v1,<base64>`` signature of one message, with a ``whsec_`` secret or its decoded key."""
    key = secret_key(secret) if isinstance(secret, str) else secret
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(
    secret: str, body: bytes, *, msg_id: str | None = None, now: int | None = None
) -> dict[str, str]:
    """The ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers for ``body``."""
    msg_id = msg_id or f"msg_{secrets.token_urlsafe(18)}"
    timestamp = int(time.time()) if now is None else now
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }


def verify(
    secret: str | bytes,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: int | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> str:
    """Check a request's signature headers; the message id, else SignatureError saying why."""
    key = secret_key(secret) if isinstance(secret, str) else secret
    lowered = {name.lower(): value for name, value in headers.items()}
    needed = {
        name: lowered.get(name) for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
    }
    msg_id, stamp, signature = needed.values()
    if not msg_id or not stamp or not signature:
        missing = [name for name, value in needed.items() if not value]
        raise SignatureError(f"missing {', '.join(missing)} header(s)")
    # int() would also take "+17_96053860", " 1796053860" or non-ASCII digits.
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 12:
        raise SignatureError("webhook-timestamp is not a Unix time in seconds")
    timestamp = int(stamp)
    age = (int(time.time()) if now is None else now) - timestamp
    if abs(age) > tolerance:
        when = f"{age} s old" if age > 0 else f"{-age} s in the future"
        raise SignatureError(f"webhook-timestamp is {when} (limit {tolerance})")
    expected = sign(key, msg_id, timestamp, body).encode("ascii")
    offered = [entry for entry in signature.split() if entry.startswith("v1,")]
    if not offered:
        raise SignatureError("webhook-signature holds no v1 signature")
    # A sum, not any(): every entry is compared, so the time taken does not say which matched.
    if not sum(hmac.compare_digest(e.encode("ascii", "replace"), expected) for e in offered):
        raise SignatureError("webhook-signature does not match the body (wrong secret?)")
    return msg_id
