"""Reading what a user names: files, standard input and ``JSON|@FILE`` options, each capped.

A path must name a regular file (a directory, FIFO or device is refused before anything is read)
and is read only up to the cap of its kind (docs/reliability.md), so no input can make belt hang.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from belt.errors import InvalidInput, NotFound
from belt.paths import kind_of

MiB = 1024 * 1024

LIMITS = {
    "declaration": 1 * MiB,
    "policy": 1 * MiB,
    "scenario": 4 * MiB,
    "option": 1 * MiB,
    "payloads": 64 * MiB,
    "registry entry": 256 * 1024,
    "snapshot": 16 * MiB,
}
"""The most bytes read from one input of each kind."""

_CHUNK = 64 * 1024


def read_bytes(path: str | Path, *, kind: str) -> bytes:
    """The bytes of a regular file, at most the cap of ``kind``; anything else is refused."""
    source, limit = str(path), LIMITS[kind]
    if "\x00" in source:
        raise InvalidInput(f"{source}: a path cannot contain a NUL character", where=source)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer before it can be refused.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                is_what = f"is {kind_of(info.st_mode)}, not a regular file"
                raise InvalidInput(f"{source}: {is_what}", where=source)
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = _read_capped(handle, limit) if info.st_size <= limit else None
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise NotFound(f"{source}: no such file", where=source) from None
    except IsADirectoryError:
        raise InvalidInput(f"{source}: is a directory, not a regular file", where=source) from None
    except OSError as exc:
        raise InvalidInput(f"{source}: cannot read ({exc.strerror or exc})", where=source) from None
    if data is None:  # larger than the cap, or it grew while it was read
        raise InvalidInput(
            f"{source}: larger than the {limit // 1024} KiB limit for a {kind} file",
            hint="see docs/reliability.md for the size limits",
            where=source,
        )
    return data


def _read_capped(stream: BinaryIO, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``stream``; None when it holds more."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = stream.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text of ``data`` without its byte order mark; else InvalidInput for ``source``."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})", where=source
        ) from None


def read_text(path: str | Path, *, kind: str) -> str:
    """A regular file's UTF-8 text, at most the cap of ``kind``."""
    return decode_text(read_bytes(path, kind=kind), str(path))


def read_stream(stream: BinaryIO, *, kind: str, source: str) -> str:
    """UTF-8 text from a stream such as standard input, at most the cap of ``kind``."""
    limit = LIMITS[kind]
    if (data := _read_capped(stream, limit)) is None:
        raise InvalidInput(
            f"{source}: more than the {limit // 1024} KiB limit for a {kind}", where=source
        )
    return decode_text(data, source)


def read_json_option(value: str, *, option: str) -> Any:
    """The JSON of an option given as ``JSON`` or ``@FILE`` (a file read with the option cap)."""
    from belt.reading.strictjson import StrictJSONError, decode  # noqa: PLC0415 - start-up: for a JSON option only

    if value.startswith("@"):
        source = value[1:]
        text = read_text(source, kind="option")
    else:
        if len(value.encode("utf-8", "surrogatepass")) > LIMITS["option"]:
            raise InvalidInput(f"{option}: larger than the {LIMITS['option'] // 1024} KiB limit")
        text, source = value, option
    try:
        return decode(text, unique_keys=True)
    except StrictJSONError as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if exc.lineno is not None else ""
        raise InvalidInput(
            f"{source}: not valid JSON ({exc.reason}{where})",
            hint=f"give {option} a JSON value, or @FILE to read one from a file",
        ) from None


def read_json_object_option(value: str, *, option: str) -> dict[str, object]:
    """``read_json_option`` for an option that must be a JSON object."""
    if not isinstance(document := read_json_option(value, option=option), dict):
        kind = "an array" if isinstance(document, list) else "a scalar"
        raise InvalidInput(f"{option}: expected a JSON object, got {kind}")
    return document
