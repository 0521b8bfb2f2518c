"""The ``belt serve`` processes this user runs: ``serves/PID.json`` (0600) in the state
directory, written once a serve listens and removed when it stops; a stale one (process gone, port
closed) is passed over by ``running`` but still named by ``recorded_at``.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypedDict
from urllib.parse import urlsplit

from belt.paths import state_dir, write_private
from belt.records.leases import is_alive
from belt.store.files import UnsafeFile, read_bytes
from belt.store.shapes import derive, fits

DEFAULT_PORT = 8787
CONNECT_TIMEOUT = 1.0
"""Seconds a serve's port has to take a connection before its file is taken as stale."""
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
"""Where a serve listening on every address is reached from this machine."""


class ServeFile(TypedDict):
    """A running-serve file: where a ``belt serve`` answers and which process it is."""

    url: str
    """The base URL (``http://127.0.0.1:8787``); its hooks answer at ``URL/hooks``."""
    host: str
    port: int
    pid: int
    started_at: str
    workers: int
    signed: bool
    """True when hook requests must be signed (``--secret``)."""
    token: bool
    """True when requests need the bearer token (``--token``)."""


@dataclass(frozen=True)
class Serve:
    """A ``belt serve`` of this user, as its file records it."""

    record: ServeFile
    path: Path

    @property
    def pid(self) -> int:
        """The process that started it."""
        return self.record["pid"]

    @property
    def address(self) -> str:
        """``HOST:PORT`` as a delivery's error names it (``127.0.0.1:8787``)."""
        return f"{bracketed(self.record['host'])}:{self.record['port']}"

    @property
    def hooks_url(self) -> str:
        """The URL its hooks answer at, reachable from this machine."""
        host = bracketed(reachable_host(self.record["host"]))
        return f"http://{host}:{self.record['port']}/hooks"

    def describe(self) -> str:
        """How a message names it: ``belt serve on 127.0.0.1:8787 (pid 4242, started 10:32:26)``."""
        try:
            started = datetime.fromisoformat(self.record["started_at"]).astimezone()
            when = f", started {started:%Y-%m-%d %H:%M:%S}"
        except ValueError:
            when = ""
        return f"belt serve on {self.address} (pid {self.pid}{when})"


def bracketed(host: str) -> str:
    """``host`` as a URL names it (an IPv6 address in brackets)."""
    return f"[{host.strip('[]')}]" if ":" in host else host


def reachable_host(host: str) -> str:
    """The address a serve listening on ``host`` is reached at from this machine."""
    bare = host.strip("[]")
    return WILDCARDS.get(bare, bare)


def serves_dir(*, create: bool = True) -> Path:
    """The directory of the running-serve files (made unless not ``create``)."""
    return state_dir(create=create) / "serves"


def announce(record: ServeFile) -> Path:
    """Write the running-serve file of ``record`` (0600), replacing a stale one of its address."""
    path = serves_dir() / f"{record['pid']}.json"
    for old in recorded():
        if old.address == Serve(record, path).address and not is_alive(old.pid):
            withdraw(old.path)
    write_private(path, json.dumps(record, indent=2) + "\n")
    return path


def withdraw(path: Path) -> None:
    """Remove a running-serve file (gone already is fine)."""
    with suppress(OSError):  # a directory that cannot be written to: the file is stale from now on
        path.unlink(missing_ok=True)


def recorded() -> list[Serve]:
    """Every readable running-serve file, the most recently started first."""
    try:
        paths = sorted(serves_dir(create=False).glob("*.json"))
    except OSError:
        return []
    found = [Serve(record, path) for path in paths if (record := _read(path)) is not None]
    found.sort(key=lambda serve: serve.record["started_at"], reverse=True)
    return found


SERVE_FILE_MAX_BYTES = 4096  # serve writes a few hundred


def _read(path: Path) -> ServeFile | None:
    """The record of a running-serve file, or None for one that is not."""
    try:
        data = json.loads(read_bytes(path, limit=SERVE_FILE_MAX_BYTES))
    except (OSError, UnsafeFile, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    required, _ = derive(ServeFile)
    if any(name not in data or not fits(data[name], kinds) for name, kinds in required.items()):
        return None
    if not (_is_address(data["host"]) and 0 < data["port"] < 65536 and data["pid"] > 0):
        return None
    return data  # type: ignore[return-value]  # its shape was checked just now


HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})")


def _is_address(host: str) -> bool:
    """Whether ``host`` is an IP address or a host name (nothing in it acts on a terminal)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return HOST_NAME.fullmatch(host) is not None
    return True


def running() -> list[Serve]:
    """This user's serves whose process lives and whose port takes a connection, newest first."""
    return [serve for serve in recorded() if is_alive(serve.pid) and _answers(serve)]


def _answers(serve: Serve) -> bool:
    address = (reachable_host(serve.record["host"]), serve.record["port"])
    with suppress(OSError), socket.create_connection(address, timeout=CONNECT_TIMEOUT):
        return True
    return False


def recorded_at(address: str) -> Serve | None:
    """The most recent serve recorded at ``HOST:PORT``, running or not (loopback names are one)."""
    wanted = _address_key(address)
    found = (s for s in recorded() if wanted is not None and _address_key(s.address) == wanted)
    return next(found, None)


def _address_key(address: str) -> tuple[str, int] | None:
    """``HOST:PORT`` as a comparable key: a loopback or wildcard host is ``loopback``."""
    try:
        parts = urlsplit(f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if host is None or port is None:
        return None
    with suppress(ValueError):
        host = "loopback" if ipaddress.ip_address(host).is_loopback else host
    return ("loopback" if host in ("localhost", "0.0.0.0", "::") else host, port)
