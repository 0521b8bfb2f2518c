"""Hook traces end to end: real belt processes export OTLP/HTTP to a real receiver
(tests/otlp_receiver.py, decoding with opentelemetry-proto), and the spans received are the trees
docs/tracing.md shows; a webhook delivery carries ``traceparent`` only when tracing is on, and a
handler instrumented with the OpenTelemetry SDK joins the run's trace.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.otlp_receiver import Receiver, Span, receiving

ROOT = Path(__file__).resolve().parent.parent
TRACEPARENT = re.compile(
    rb"^traceparent: 00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\r\n", re.MULTILINE
)


@pytest.fixture
def otlp() -> Iterator[Receiver]:
    """A real OTLP/HTTP receiver on a free port, for the test."""
    with receiving() as receiver:
        yield receiver


def untraced_env() -> dict[str, str]:
    """This process's environment without any OpenTelemetry variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


def traced_env(receiver: Receiver, **more: str) -> dict[str, str]:
    """The environment of a process that exports its spans to ``receiver`` (batches sent every
    50 ms, so a server's spans arrive while it runs)."""
    return {
        **untraced_env(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        **more,
    }


def belt(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``belt ARGS`` as a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "belt", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@contextmanager
def serving(*args: str, env: dict[str, str]) -> Iterator[str]:
    """``belt serve --port 0 ARGS`` as a process of its own; its URL while it runs, stopped with
    Ctrl-C at the end (its spans flushed as it exits)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        found = re.search(r"listening on (http://\S+) ", banner)
        assert found, banner + process.stderr.read()
        yield found.group(1)
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)


def one(spans: list[Span], name: str) -> Span:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, sorted(span.name for span in spans))
    return found[0]


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [span for span in spans if span.parent_id == parent.span_id]


def scenario(path: Path, hooks: list[dict[str, Any]], tools: int = 1) -> Path:
    """A platform scenario of ``tools`` tool calls (one a turn) with ``hooks``."""
    model: list[dict[str, Any]] = [
        {"say": "step", "tool_calls": [{"name": "read_file", "arguments": {"n": i}, "result": "x"}]}
        for i in range(tools)
    ]
    model.append({"say": "done"})
    document = {"agent": {"hooks": hooks}, "turns": [{"user": "go", "model": model}]}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# -- one trace across the boundary: what a delivery sends ----------------------------------------


@contextmanager
def raw_server() -> Iterator[tuple[str, list[bytes]]]:
    """A socket server on a free port that keeps the raw bytes of each request it is sent and
    answers ``{}``: its URL and the requests."""
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                size = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE)[1])  # type: ignore[index]
                while len(body) < size:
                    body += conn.recv(65536)
                got.append(head + b"\r\n\r\n" + body)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hooks", got
    finally:
        listener.close()
        thread.join(timeout=5)


DELIVER = """
import json, sys
from belt import tracing
from belt.handlers.webhook import deliver
tracing.start()
with tracing.span("belt.hook agent.tool_call"):
    result = deliver(sys.argv[1], {"event": "agent.tool_call", "data": {"n": 1}}, timeout=10,
                     secret="whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
assert result.error is None, result.error
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
"""


def test_a_delivery_carries_traceparent_with_tracing_on_and_is_unchanged_with_it_off(
    otlp: Receiver,
) -> None:
    with raw_server() as (url, got):
        off = subprocess.run(
            [sys.executable, "-c", DELIVER, url], env=untraced_env(), capture_output=True, text=True
        )
        assert off.returncode == 0, off.stderr
        assert json.loads(off.stdout) == []  # nothing of OpenTelemetry imported
        on = subprocess.run(
            [sys.executable, "-c", DELIVER, url],
            env=traced_env(otlp),
            capture_output=True,
            text=True,
        )
        assert on.returncode == 0, on.stderr
    sent_off, sent_on = got
    assert b"traceparent" not in sent_off.lower() and b"tracestate" not in sent_off.lower()
    found = TRACEPARENT.search(sent_on)
    assert found, sent_on.decode()
    # The span it carries is the span the delivery was made in, in the trace exported.
    hook = one(otlp.wait(lambda spans: bool(spans)), "belt.hook agent.tool_call")
    assert (found[1].decode(), found[2].decode()) == (hook.trace_id, hook.span_id)

    # Apart from that one line (and the signature's id and time, new for each delivery), the
    # bytes are the same: the same headers in the same order, the same body.
    def plain(raw: bytes) -> bytes:
        raw = TRACEPARENT.sub(b"", raw)
        return re.sub(rb"(webhook-(?:id|timestamp|signature)): [^\r]*", rb"\1: -", raw)

    assert plain(sent_on) == plain(sent_off)
    names = [line.split(b":")[0] for line in sent_off.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]]
    assert names == [
        b"Host", b"accept", b"accept-encoding", b"connection", b"user-agent", b"content-type",
        b"webhook-id", b"webhook-timestamp", b"webhook-signature", b"Content-Length",
    ]  # fmt: skip
