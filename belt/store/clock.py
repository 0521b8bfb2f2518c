"""Timestamps as records and the wire spell them (RFC 3339, UTC, milliseconds, ``Z``).

``utcnow()`` is wall time (leases, deadlines, signatures); ``now()`` is the simulated world's:
wall time unless a virtual clock is in force (``using``, ``installed``), which only moves forward.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta

from belt.errors import Conflict, InvalidInput

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
_YEARS = (1970, 9000)  # a virtual clock's years: room for the longest deadline after it
_DURATION = re.compile(r"(?:(\d{1,7})d)?(?:(\d{1,8})h)?(?:(\d{1,9})m)?(?:(\d{1,10})s)?", re.ASCII)
DURATION_MAX = timedelta(days=3650)  # the most one move of a virtual clock may span (ten years)


def utcnow() -> datetime:
    """Wall time, timezone-aware UTC (a virtual clock never changes it)."""
    return datetime.now(UTC)


class VirtualClock:
    """A thread-safe clock that moves only when told, only forward (``on_move`` is told)."""

    def __init__(
        self, start: datetime, *, on_move: Callable[[datetime], None] | None = None
    ) -> None:
        self._now = check_moment(start, "the clock's start")
        self._lock = threading.Lock()
        self.on_move = on_move

    def now(self) -> datetime:
        """The clock's time."""
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock ``delta`` forward; returns the new time."""
        if delta < timedelta(0):
            raise InvalidInput(f"{format_duration(delta)}: time only moves forward")
        with self._lock:
            return self._move(self._now + delta)

    def move_to(self, moment: datetime) -> datetime:
        """Move the clock to ``moment``, which may not be before its time (Conflict if it is)."""
        moment = check_moment(moment, "the new time")
        with self._lock:
            if moment < self._now:
                raise Conflict(
                    f"{timestamp(moment)} is before the clock's time, {timestamp(self._now)}: "
                    "time only moves forward"
                )
            return self._move(moment)

    def _move(self, moment: datetime) -> datetime:
        moment = check_moment(moment, "the new time")
        self._now = moment
        if self.on_move is not None:
            self.on_move(moment)
        return moment


_active: ContextVar[VirtualClock | None] = ContextVar("belt_clock", default=None)
_installed: list[VirtualClock] = []


def now() -> datetime:
    """The time of the simulated world: the virtual clock in force, else wall time."""
    clock = current()
    return clock.now() if clock is not None else utcnow()


def current() -> VirtualClock | None:
    """The virtual clock in force here (this context's, else the process's), or None."""
    return _active.get() or (_installed[-1] if _installed else None)


@contextmanager
def using(clock: VirtualClock | None) -> Iterator[VirtualClock | None]:
    """Run the block on ``clock`` (None: on whatever clock is in force already)."""
    if clock is None:
        yield current()
        return
    token = _active.set(clock)
    try:
        yield clock
    finally:
        _active.reset(token)


@contextmanager
def installed(clock: VirtualClock) -> Iterator[VirtualClock]:
    """Run every thread of the process on ``clock`` for the block (``belt serve --clock``)."""
    _installed.append(clock)
    try:
        yield clock
    finally:
        _installed.remove(clock)


def check_moment(moment: datetime, what: str) -> datetime:
    """``moment`` in UTC, if a virtual clock may show it; InvalidInput if not."""
    if moment.tzinfo is None:
        raise InvalidInput(f"{what}: {moment.isoformat()} has no UTC offset")
    moment = moment.astimezone(UTC)
    if not _YEARS[0] <= moment.year < _YEARS[1]:
        raise InvalidInput(
            f"{what}: {timestamp(moment)} is out of range (years {_YEARS[0]} to {_YEARS[1] - 1})"
        )
    return moment


def parse_rfc3339(text: str, what: str) -> datetime:
    """An RFC 3339 timestamp with its offset, in UTC, in a virtual clock's years."""
    if not isinstance(text, str) or _RFC3339.fullmatch(text) is None:
        raise InvalidInput(
            f"{what}: {text!r} is not an RFC 3339 timestamp with an offset "
            "(like 2026-08-11T14:00:00Z)"
        )
    digits = re.sub(r"(\.\d{6})\d+", r"\1", text.upper().replace(" ", "T"))
    try:
        moment = datetime.fromisoformat(digits)
    except ValueError:
        raise InvalidInput(f"{what}: {text!r} is not a date and time that exists") from None
    return check_moment(moment, what)


def parse_duration(text: str, what: str) -> timedelta:
    """A span like ``90s``, ``10m``, ``2h``, ``1d`` or ``1h30m``; InvalidInput naming ``what``."""
    match = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if not text or match is None:
        raise InvalidInput(
            f"{what}: {text!r} is not a duration (a number with d, h, m or s, like 90s, 10m, "
            "2h or 1h30m)"
        )
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    span = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if span > DURATION_MAX:
        raise InvalidInput(f"{what}: {text!r} is longer than ten years")
    return span


def format_duration(delta: timedelta) -> str:
    """A span as ``parse_duration`` reads it (``1h30m``; ``0s`` for none)."""
    total = int(delta.total_seconds())
    sign, total = ("-", -total) if total < 0 else ("", total)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if total >= size:
            parts.append(f"{total // size}{unit}")
            total %= size
    return sign + ("".join(parts) or "0s")


def timestamp(moment: datetime) -> str:
    """``moment`` as ``2026-08-11T14:00:00.000Z`` (a naive datetime is taken as UTC)."""
    if moment.tzinfo is not None:
        if moment.tzinfo is not UTC:
            moment = moment.astimezone(UTC)
        moment = moment.replace(tzinfo=None)
    # Not strftime, which is most of the cost of a stamp (every record written has one or
    # two): isoformat cuts the microseconds to milliseconds as the stamp does.
    return moment.isoformat(timespec="milliseconds") + "Z"


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
