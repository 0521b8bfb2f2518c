import base64
import gzip
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.handlers.webhook import deliver, failure_of, read_answer
from belt.outgoing.signing import verify
from belt.outgoing.transport import using
from belt.wire.samples import sample_payload
from tests import hostile
from tests.hookapp import HookApp, hook_app
from tests.servers import REFUSED
from tests.vectors import SECRET


@pytest.fixture(scope="module")
def shared() -> Iterator[HookApp]:
    with hook_app() as app:
        yield app


@pytest.fixture
def target(shared: HookApp) -> Iterator[HookApp]:
    """A webhook shared by the module's tests; each test sets how it answers."""
    shared.received.clear()
    yield shared


TRANSPORTS: dict[str, Callable[[], httpx.BaseTransport | None]] = {
    # The process's own transport (belt.outgoing.transport).
    "belt": lambda: None,
    "a given transport": httpx.HTTPTransport,
}


@pytest.fixture
def lend() -> Iterator[Callable[[str], None]]:
    """Lends the process the transport of each kind a test asks for
    (``belt.outgoing.transport.using``) for the test, and closes it after."""
    with ExitStack() as stack:

        def make(kind: str) -> None:
            made = TRANSPORTS[kind]()
            if made is not None:
                stack.enter_context(made)
                stack.enter_context(using(made))

        yield make


@pytest.fixture(params=list(TRANSPORTS))
def call(request: pytest.FixtureRequest, lend: Any) -> Callable[..., Any]:
    """Deliver a tool call to a URL, on each transport (each must answer the same)."""
    lend(request.param)

    def deliver_to(url: str, **kwargs: Any) -> Any:
        return deliver(url, sample_payload("agent.tool_call"), timeout=5.0, **kwargs)

    return deliver_to


def test_a_decision_is_parsed_and_the_payload_is_posted_as_json(target: HookApp, call: Any) -> None:
    target.decide = lambda name, payload: {"decision": "deny", "reason": "no"}
    result = call(f"{target.url}/guard")
    assert result.error is None
    assert result.status == 200
    assert result.response is not None
    assert (result.response.decision, result.response.reason) == ("deny", "no")
    assert result.error is None
    assert result.duration_ms >= 0
    [(name, payload)] = target.received
    assert name == "guard"
    assert payload["data"] == {"tool": "delete_file", "arguments": {"path": "/tmp/old.txt"}}


@pytest.mark.parametrize("answer", [None, "", "null", "  \n"])
def test_an_empty_2xx_body_is_allow(target: HookApp, answer: Any, call: Any) -> None:
    target.decide = lambda name, payload: answer
    result = call(f"{target.url}/x")
    assert result.error is None
    assert result.response is not None
    assert result.response.decision is None
    assert result.response.effective_decision() == "allow"


def test_a_non_2xx_answer_fails_with_its_body_and_host_only(target: HookApp, call: Any) -> None:
    target.decide = lambda name, payload: (503, {"oops": True})
    result = call(f"{target.url}/x?token=s3cret")
    assert result.error is not None
    assert result.status == 503
    assert result.body == '{"oops": true}'
    assert result.error == f"{target.url.removeprefix('http://')} answered HTTP 503"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("not json", "invalid JSON at line 1 column 1"),
        ("[1]", "expected a JSON object, got an array"),
        ('{"decision": "maybe"}', "decision: Input should be"),
        ('{"verdict": "deny", "inject": {"content": 3}}', "inject.content: Input should be"),
        ('{"inject": {"role": "system"}}', "inject.content: Field required"),
    ],
)
def test_a_body_that_is_not_a_response_fails_and_says_why(
    target: HookApp, body: str, problem: str, call: Any
) -> None:
    target.decide = lambda name, payload: body
    result = call(f"{target.url}/x")
    assert result.error is not None
    assert result.status == 200
    assert result.response is None
    assert result.error is not None
    assert "answered with a body that is not a LifecycleHookResponse" in result.error
    assert problem in result.error


def test_unknown_keys_of_an_answer_are_ignored_each_with_a_warning(
    target: HookApp, call: Any
) -> None:
    target.decide = lambda name, payload: {
        "decision": "deny",
        "reason": "no",
        "colour": "red",
        "inject": {"content": "hi", "weight\x1b[2J": 3},
    }
    result = call(f"{target.url}/x")
    assert result.error is None
    assert result.response is not None
    assert (result.response.decision, result.response.reason) == ("deny", "no")
    assert result.response.inject is not None and result.response.inject.content == "hi"
    assert result.warnings == [
        "colour: unknown key in the answer, ignored",
        "inject.weight\\x1b[2J: unknown key in the answer, ignored",
    ]
    # Many unknown keys: the first ten are named, the rest counted.
    target.decide = lambda name, payload: {f"k{n}": n for n in range(25)}
    many = call(f"{target.url}/x")
    assert many.error is None and len(many.warnings) == 11
    assert many.warnings[-1] == "… and 15 more unknown keys, ignored"
    # A known key of the wrong shape is still a failed hook.
    target.decide = lambda name, payload: {"decision": "deny", "colour": "red", "reason": 3}
    assert call(f"{target.url}/x").error is not None


def test_a_refused_connection_fails_naming_the_host_only(call: Any) -> None:
    url = f"http://user:pw@{REFUSED}/hooks/s3cret?key=s3cret"
    result = call(url)
    assert result.status is None
    assert result.response is None
    assert result.error is not None
    assert result.error.startswith(f"cannot connect to {REFUSED}")
    assert "s3cret" not in result.error
    assert "pw" not in result.error


def test_a_slow_handler_times_out(target: HookApp) -> None:
    target.delays["slow"] = 0.5
    result = deliver(f"{target.url}/slow", sample_payload("agent.start"), timeout=0.05)
    assert result.status is None
    assert result.error == f"{target.url.removeprefix('http://')} did not answer within 0.05 s"


def test_a_signed_delivery_verifies_with_standard_webhooks(target: HookApp) -> None:
    target.decide = lambda name, payload: None
    captured: list[httpx.Request] = []
    with Capturing(captured) as capturing, using(capturing):
        result = deliver(
            f"{target.url}/x", sample_payload("agent.start"), timeout=5.0, secret=SECRET
        )
    assert result.error is None
    [request] = captured
    verify(SECRET, request.headers, request.content)
    assert target.events() == ["agent.start"]


class Capturing(httpx.HTTPTransport):
    """httpx's transport, keeping each request it sends."""

    def __init__(self, sent: list[httpx.Request]) -> None:
        super().__init__()
        self.sent = sent

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.sent.append(request)
        return super().handle_request(request)


def test_read_answer_keeps_override_without_acting_on_it() -> None:
    answer = read_answer('{"decision": "allow", "override": {"x": 1}}')
    assert answer.problem is None
    assert answer.response is not None
    assert answer.response.override == {"x": 1}


@pytest.mark.parametrize("behaviour", [hostile.slow_head, hostile.slow_body])
def test_a_trickling_webhook_fails_at_its_total_deadline(behaviour: Any) -> None:
    # The server trickles for 30 s, each byte well within any per-read timeout; a deadline of
    # 1 s must end the call long before the server would.
    with hostile.hostile_server(behaviour()) as url:
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=1.0)
    assert result.response is None
    assert result.error == f"{url.removeprefix('http://')} did not answer within 1 s"
    assert result.duration_ms < 20_000


def test_a_trickled_body_fails_at_the_deadline_on_any_transport() -> None:
    with (
        hostile.hostile_server(hostile.slow_body()) as url,
        httpx.HTTPTransport() as lent,
        using(lent),
    ):
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=1.0)
    assert result.error is not None and "did not answer within 1 s" in result.error


def test_an_endless_answer_is_cut_at_the_cap() -> None:
    with hostile.hostile_server(hostile.endless()) as url:
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=30.0)
    assert result.error == f"{url.removeprefix('http://')}: the answer is larger than 1024 KiB"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100 levels"),
        (b'{"decision": "deny", "reason": ' + b"7" * 5000 + b"}", "an integer has 5000 digits"),
        (b'{"decision": "deny", "reason": "\\ud800"}', "lone surrogate \\ud800"),
        (b'{"decision": NaN}', "NaN is not a JSON number"),
        (b'{"decision": "deny", "reason": Infinity}', "Infinity is not a JSON number"),
    ],
)
def test_a_hostile_answer_is_the_handlers_failure(body: bytes, problem: str) -> None:
    with hostile.hostile_server(hostile.answer(body)) as url:
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
    assert result.response is None
    assert result.error is not None
    assert "answered with a body that is not a LifecycleHookResponse" in result.error
    assert problem in result.error


@settings(max_examples=100, deadline=None)
@given(
    st.binary(max_size=300)
    | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_any_answer_body_parses_or_fails_cleanly(body: bytes) -> None:
    answer = read_answer(body.decode("utf-8", errors="replace"))
    assert (answer.response is None) != (answer.problem is None)


def serve_each(answer: Callable[[bytes], bytes]) -> Any:
    """A behaviour for ``hostile.hostile_server`` (which reads each connection's first request
    and drops it) that answers it, then every further request on the connection, with
    ``answer(request head)``; ``heads`` keeps the heads of the further ones and
    ``connections`` counts the connections taken."""
    heads: list[bytes] = []
    connections: list[int] = []

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        connections.append(1)
        conn.sendall(answer(b""))
        while not stop.is_set():
            head = hostile.read_request(conn)
            if head is None:
                return
            heads.append(head)
            conn.sendall(answer(head))

    behave.heads = heads  # type: ignore[attr-defined]
    behave.connections = connections  # type: ignore[attr-defined]
    return behave


def keep_alive(body: bytes, *headers: str) -> bytes:
    extra = "".join(f"{header}\r\n" for header in headers)
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


@pytest.mark.parametrize("kind", list(TRANSPORTS))
def test_a_compressed_or_latin_1_answer_is_read_as_httpx_reads_it(kind: str, lend: Any) -> None:
    squeezed = gzip.compress(b'{"decision": "deny", "reason": "gzipped"}')
    answers = [
        keep_alive(squeezed, "Content-Encoding: gzip", "Content-Type: application/json"),
        keep_alive(
            '{"decision": "deny", "reason": "café"}'.encode("latin-1"),
            "Content-Type: application/json; charset=latin-1",
        ),
    ]
    with hostile.hostile_server(serve_each(lambda head: answers.pop(0))) as url:
        lend(kind)
        first = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
        second = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
    assert first.response is not None and first.response.reason == "gzipped", first.error
    assert second.response is not None and second.response.reason == "café", second.error


def test_a_compressed_answer_is_capped_once_inflated() -> None:
    bomb = gzip.compress(b" " * (3 * 1024 * 1024))
    assert len(bomb) < 1024 * 1024
    answer = keep_alive(bomb, "Content-Encoding: gzip")
    with hostile.hostile_server(lambda conn, stop: conn.sendall(answer)) as url:
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
    assert result.error == f"{url.removeprefix('http://')}: the answer is larger than 1024 KiB"


@pytest.mark.parametrize("kind", list(TRANSPORTS))
def test_deliveries_share_one_connection_and_no_cookies(kind: str, lend: Any) -> None:
    # A webhook that sets a cookie gets none back: each delivery is the platform's own request,
    # not a session. Every delivery goes on the connection the first one opened.
    behave = serve_each(lambda head: keep_alive(b"", "Set-Cookie: session=s3cret; Path=/"))
    lend(kind)
    with hostile.hostile_server(behave) as url:
        for _ in range(3):
            result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
            assert result.error is None and result.response is not None
    assert len(behave.connections) == 1
    assert len(behave.heads) == 2
    assert not any(b"cookie" in head.lower() for head in behave.heads)


@pytest.mark.parametrize("kind", list(TRANSPORTS))
def test_credentials_in_a_webhook_url_are_sent_as_basic_authentication(
    kind: str, lend: Any
) -> None:
    behave = serve_each(lambda head: keep_alive(b""))
    lend(kind)
    with hostile.hostile_server(behave) as url:
        for _ in range(2):
            address = url.replace("http://", "http://user:p%40ss@")
            result = deliver(f"{address}/h", sample_payload("agent.start"), timeout=10.0)
            assert result.error is None
    token = base64.b64encode(b"user:p@ss")
    [head] = behave.heads
    assert b"authorization: basic " + token in head.lower().replace(token.lower(), token)


def test_a_short_answer_is_read_once_and_each_reader_gets_its_own_warnings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from belt.handlers import webhook
    from belt.wire.validate import check_response as check

    checked: list[dict[str, Any]] = []

    def counted(document: dict[str, Any]) -> Any:
        checked.append(document)
        return check(document)

    monkeypatch.setattr("belt.handlers.webhook.check_response", counted)
    webhook._read_kept.cache_clear()
    text = '{"decision": "deny", "reason": "kept", "mine": 1}'
    first, second = webhook.read_answer(text), webhook.read_answer(text)
    assert len(checked) == 1
    assert first.response == second.response and first.response is not None
    assert (first.response.decision, first.response.reason) == ("deny", "kept")
    assert first.warnings == second.warnings == ["mine: unknown key in the answer, ignored"]
    first.warnings.append("changed by its reader")
    assert webhook.read_answer(text).warnings == ["mine: unknown key in the answer, ignored"]
    # A long answer is read every time; a hostile one fails every time.
    long = '{"reason": "' + "x" * webhook.ANSWER_KEPT_MAX + '"}'
    assert webhook.read_answer(long).response is not None
    assert webhook.read_answer(long).response is not None
    assert len(checked) == 3
    for _ in range(2):
        assert webhook.read_answer('{"decision": NaN}').problem is not None


def test_a_delivery_goes_past_a_connection_the_webhook_closed() -> None:
    # A kept connection the webhook closed meanwhile is not used: another is opened.
    done = threading.Event()
    connections: list[int] = []

    def answer_and_close(conn: socket.socket, stop: threading.Event) -> None:
        connections.append(1)
        conn.sendall(keep_alive(b'{"decision": "deny", "reason": "fresh"}'))
        conn.close()
        done.set()

    with hostile.hostile_server(answer_and_close) as url:
        for _ in range(3):
            result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
            assert result.error is None and result.response is not None
            assert result.response.reason == "fresh"
            assert done.wait(10)
            done.clear()
    assert len(connections) == 3


def answered(*answers: bytes) -> Any:
    """A behaviour answering each request of a connection with the next of ``answers``."""
    queue = list(answers)
    return serve_each(lambda head: queue.pop(0) if queue else b"")


@pytest.mark.parametrize(
    ("answer", "again"),
    [
        (keep_alive(b'{"reason": "sized"}'), True),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5;x=y\r\n{"rea\r\n0e\r\nson": "sized"}\r\n0\r\nX-Trailer: t\r\n\r\n',
            True,
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            + keep_alive(b'{"reason": "sized"}'),
            True,
        ),
        (keep_alive(b'{"reason": "sized"}', "Connection: close"), False),
        (b'HTTP/1.0 200 OK\r\nContent-Length: 19\r\n\r\n{"reason": "sized"}', False),
        (b'HTTP/1.1 200 OK\nContent-Length: 19\n\n{"reason": "sized"}', True),
        (
            b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 19\r\n\r\n"
            b'{"reason": "sized"}',
            True,
        ),
    ],
    ids=["length", "chunks", "interim", "close", "http/1.0", "bare line ends", "folded"],
)
def test_an_answer_is_read_by_its_framing_and_its_connection_kept_when_it_can_be(
    answer: bytes, again: bool
) -> None:
    # Each answer is given twice: the second delivery goes on the first's connection only when
    # the first answer said where it ends and that the connection stays open.
    behave = answered(answer, answer)
    with hostile.hostile_server(behave) as url:
        for _ in range(2):
            result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
            assert result.error is None, result.error
            assert result.response is not None and result.response.reason == "sized"
    assert len(behave.connections) == (1 if again else 2)


def test_an_answer_without_a_length_ends_with_its_connection() -> None:
    body = b'{"decision": "deny", "reason": "' + b"y" * 200_000 + b'"}'

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + body[:1000])
        conn.sendall(body[1000:])

    with hostile.hostile_server(behave) as url:
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
    assert result.response is not None and result.response.reason == "y" * 200_000


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}", "received 2 bytes, expected 50"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "Length"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
            "Transfer-Encoding: chunked is supported",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "illegal chunk header"),
        (b"HTTP/2 200 OK\r\n\r\n", "illegal status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "illegal header line"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 200_000, "too long"),
    ],
    ids=[
        "short body",
        "two lengths",
        "gzip coding",
        "bad chunk",
        "http/2",
        "no colon",
        "endless head",
    ],
)
def test_a_malformed_answer_is_a_failed_request(answer: bytes, error: str) -> None:
    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(answer)

    with hostile.hostile_server(behave) as url:
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
    host = url.removeprefix("http://")
    assert result.response is None
    assert result.error is not None and result.error.startswith(f"{host} sent a malformed answer: ")
    assert error in result.error


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_connection_closed_after_the_request_is_the_handlers_failure(reset: bool) -> None:
    def behave(conn: socket.socket, stop: threading.Event) -> None:
        if reset:  # a close that sends RST, as a process that dies with data unread
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    with hostile.hostile_server(behave) as url:
        result = deliver(f"{url}/h", sample_payload("agent.start"), timeout=10.0)
    host = url.removeprefix("http://")
    assert result.status is None and result.response is None
    assert result.error is not None
    assert result.error.startswith(f"{host} closed the connection without answering")
    found = failure_of(result.error)
    assert found is not None and found.kind == "closed" and found.answered


def test_a_refused_connection_says_so_and_what_likely_fixes_it() -> None:
    from belt.handlers.webhook import likely_fix

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    result = deliver(f"http://127.0.0.1:{port}/h", sample_payload("agent.start"), timeout=5.0)
    assert result.error is not None and result.error.startswith(
        f"cannot connect to 127.0.0.1:{port}: "
    )
    assert likely_fix(result.error) == (
        f"nothing listens on 127.0.0.1:{port}: start your handler there, or fix the port in its URL"
    )
    found = failure_of(result.error)
    assert found is not None and found.kind == "not connected" and not found.answered
