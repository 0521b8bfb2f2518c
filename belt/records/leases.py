"""Leases: which process continues a run, so that exactly one ever does.

A lease (pid, host, process start time) is taken inside the run's lock, so one of many processes
wins (the others get exit 4); a lease whose holder is gone can be taken over.
"""

from __future__ import annotations

import os
import socket
from contextlib import suppress
from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING, TypedDict

from belt.store.clock import parse_timestamp, timestamp, utcnow
from belt.store.shapes import record_shape

if TYPE_CHECKING:
    from belt.store import Store

LEASE = "lease"
RENEW_AFTER = timedelta(minutes=1)
"""How old a lease of ``hold`` may get before it is written again."""


class Lease(TypedDict):
    """A lease (kind ``lease``, as ``mine`` makes it): one job that one process of many does."""

    pid: int
    host: str
    started: str | None
    at: str
    renewed: str


FOREIGN_TTL = timedelta(minutes=10)
"""How long a lease held on another host counts as live without a renewal."""


@cache
def host() -> str:
    """This machine's name, as leases record it."""
    return socket.gethostname()


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (None where /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields follow the last ")".
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


_own_start = cache(process_start)  # by pid, so a forked child reads its own


def mine() -> Lease:
    """A lease held by this process, renewed now (wall time: it tells whether a process lives)."""
    stamp, pid = timestamp(utcnow()), os.getpid()
    return {"pid": pid, "host": host(), "started": _own_start(pid), "at": stamp, "renewed": stamp}


def is_mine(lease: object) -> bool:
    """True when ``lease`` is held by this very process."""
    pid = os.getpid()
    own = {"pid": pid, "host": host(), "started": _own_start(pid)}  # what ``mine`` writes
    return isinstance(lease, dict) and all(lease.get(key) == value for key, value in own.items())


def holder_alive(lease: object) -> bool:
    """True when the process that holds ``lease`` is still running (or may be, elsewhere)."""
    if not isinstance(lease, dict):
        return False
    pid = lease.get("pid")
    if lease.get("host") != host():
        with suppress(Exception):  # a damaged lease holds nothing
            return utcnow() - parse_timestamp(str(lease.get("renewed"))) < FOREIGN_TTL
        return False
    if not isinstance(pid, int) or isinstance(pid, bool) or not is_alive(pid):
        return False
    started = lease.get("started")
    return started is None or process_start(pid) in (None, started)


def describe(lease: object) -> str:
    """Who holds a lease, for a person."""
    if not isinstance(lease, dict):
        return "nobody"
    return f"process {lease.get('pid')} on {lease.get('host')} (since {lease.get('at')})"


def is_alive(pid: int) -> bool:
    """True while process ``pid`` exists."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # it exists, as another user's process
    except OSError:  # ProcessLookupError among them
        return False
    return True


record_shape(LEASE, Lease)


def hold(store: Store, name: str) -> bool:
    """Take or keep the lease ``name`` for this process; False while another live one holds it."""
    with store.lock(LEASE, name):
        if (lease := store.get(LEASE, name)) is not None and is_mine(lease):
            if utcnow() - parse_timestamp(str(lease["renewed"])) >= RENEW_AFTER:
                store.write(LEASE, name, {**lease, "renewed": timestamp(utcnow())})
            return True
        if lease is not None and holder_alive(lease):
            return False
        store.write(LEASE, name, mine())
        return True
