"""A running-serve file (``belt.records.serves``) is read as hostile: bounded, its shape and its
host checked before `belt trigger` sends anywhere or prints it, and never an exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from belt.records.serves import SERVE_FILE_MAX_BYTES, recorded

GOOD: dict[str, Any] = {
    "url": "http://127.0.0.1:8787",
    "host": "127.0.0.1",
    "port": 8787,
    "pid": 4242,
    "started_at": "2026-08-11T14:00:00.000Z",
    "workers": 1,
    "signed": False,
    "token": False,
}


def serves_file(content: bytes) -> Path:
    from belt.records.serves import serves_dir

    directory = serves_dir()
    directory.mkdir(exist_ok=True)
    path = directory / "4242.json"
    path.write_bytes(content)
    return path


def test_a_well_formed_file_is_read() -> None:
    serves_file(json.dumps(GOOD).encode())
    (serve,) = recorded()
    assert serve.address == "127.0.0.1:8787"


def test_a_host_a_port_or_a_pid_no_serve_listens_on_is_passed_over() -> None:
    for change in (
        {"host": "evil.example\x1b[2J"},
        {"host": "http://a/b"},
        {"host": ""},
        {"port": 0},
        {"port": 70000},
        {"pid": -1},
    ):
        serves_file(json.dumps({**GOOD, **change}).encode())
        assert recorded() == [], change


def test_a_file_larger_than_a_serve_writes_is_not_read() -> None:
    padded = {**GOOD, "padding": "x" * SERVE_FILE_MAX_BYTES}
    serves_file(json.dumps(padded).encode())
    assert recorded() == []


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=64),
        st.dictionaries(
            st.sampled_from(sorted(GOOD)),
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40)),
        ).map(lambda changes: json.dumps({**GOOD, **changes}).encode()),
    )
)
def test_any_file_is_read_as_a_serve_only_when_its_host_is_plain(content: bytes) -> None:
    serves_file(content)
    for serve in recorded():
        host = serve.record["host"]
        assert host.isascii() and host.isprintable() and "/" not in host
        assert 0 < serve.record["port"] < 65536
