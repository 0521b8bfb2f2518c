"""Any answer at all, in any split into packets, ends a delivery in a result, never an
exception, within the cap."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.handlers.webhook import MAX_ANSWER_BYTES, WebhookResult, deliver
from belt.wire.samples import sample_payload
from tests import hostile


class Scripted:
    """A loopback server answering every connection with ``answer`` sent in pieces, then
    closing it."""

    def __init__(self) -> None:
        self.answer = b""
        self.splits: list[int] = []

    def behave(self, conn: socket.socket, stop: threading.Event) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        whole, cuts = self.answer, [c for c in self.splits if 0 < c < len(self.answer)]
        for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True):
            conn.sendall(whole[a:b])
        conn.shutdown(socket.SHUT_WR)


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[Scripted, str]]:
    server = Scripted()
    with hostile.hostile_server(server.behave) as url:
        yield server, url


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    prefix=st.sampled_from(
        [b"", b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"]
    ),
    junk=st.binary(max_size=400),
    splits=st.lists(st.integers(1, 400), max_size=4),
)
def test_any_answer_is_a_result_within_the_cap(
    scripted: tuple[Scripted, str], prefix: bytes, junk: bytes, splits: list[int]
) -> None:
    server, url = scripted
    server.answer, server.splits = prefix + junk, sorted(set(splits))
    result = deliver(f"{url}/h", sample_payload("agent.tool_call"), timeout=10.0)
    assert isinstance(result, WebhookResult)
    assert (result.error is None) == (result.response is not None)
    assert len(result.body.encode()) <= 4 * MAX_ANSWER_BYTES
    if result.error is None:
        assert result.status is not None and 200 <= result.status < 300
