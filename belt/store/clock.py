"""Timestamps as stored records and the wire spell them: RFC 3339, UTC, milliseconds, ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from belt.errors import InvalidInput

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """``moment`` as ``2026-08-11T14:00:00.000Z`` (a naive datetime is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> datetime:
    """An RFC 3339 timestamp as an aware datetime; InvalidInput if it is not one."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise InvalidInput(f"{text!r} is not an RFC 3339 timestamp") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the Unix epoch."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)
