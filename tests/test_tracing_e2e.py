"""Hook traces end to end: belt exports OTLP/HTTP to a real receiver (tests/otlp_receiver.py,
decoding with opentelemetry-proto), from `belt serve` and `belt test` processes and from the
commands run in-process beside them, and the spans received are the trees docs/tracing.md
shows; a webhook delivery carries ``traceparent`` only when tracing is on, and a handler
instrumented with the OpenTelemetry SDK joins the run's trace.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.test_serve import serve_process
from tests.otlp_receiver import Receiver, Span
from tests.servers import REFUSED, turn_start
from tests.test_tracing import belt, in_process, python, untraced_env
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent
TRACEPARENT = re.compile(
    rb"^traceparent: 00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\r\n", re.MULTILINE
)


def traced_env(receiver: Receiver) -> dict[str, str]:
    """The environment of a process that exports its spans to ``receiver``, in batches every
    5 s (the SDK's default): a process that ends sooner sends its spans as it exits."""
    return untraced_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)


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
        with contextlib.suppress(OSError):  # wakes the accept() the thread waits in
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=5)
        assert not thread.is_alive()


DELIVER = """
import json, sys
from belt.outgoing import tracing
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
        off = python("-c", DELIVER, url)
        assert off.returncode == 0, off.stderr
        assert json.loads(off.stdout) == []  # nothing of OpenTelemetry imported
        on = python("-c", DELIVER, url, OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url)
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


# -- a run's tree, across belt serve -------------------------------------------------------------


def test_a_guarded_agent_run_and_the_server_that_guards_it_are_one_trace(
    otlp: Receiver, tmp_path: Path
) -> None:
    # examples/guarded-agent.toml against `belt serve --policy examples/policy.toml`, as
    # `make demo` runs them, on a free port; both processes trace to the receiver.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url}
    policy = str(ROOT / "examples" / "policy.toml")
    # The server exports a batch every 0.2 s (OTEL_BSP_SCHEDULE_DELAY, the SDK's variable)
    # rather than every 5 s: the gate's span it makes is waited for while it runs.
    served_env = {**traced_env(otlp), "OTEL_BSP_SCHEDULE_DELAY": "200"}
    with serve_process("--policy", policy, env=served_env) as (url, _):
        guarded = (ROOT / "examples" / "guarded-agent.toml").read_text(encoding="utf-8")
        path = tmp_path / "guarded.toml"
        path.write_text(guarded.replace("http://127.0.0.1:8787", url), encoding="utf-8")
        held = in_process("sim", "run", str(path), "--json", **env)
        assert held.returncode == 0, held.stderr
        report = json.loads(held.stdout)
        assert report["simulation"]["status"] == "held", held.stdout
        (gate,) = report["chat"]["pending_interrupts"]
        # The gate is settled later, through the server's platform route.
        settled = in_process("interrupt", "resolve", gate["id"], "allow", "--api", url, **env)
        assert settled.returncode == 0, settled.stderr
        resumed = in_process("sim", "resume", report["simulation"]["id"], "--json", **env)
        assert resumed.returncode == 0, resumed.stderr
        spans = otlp.wait(lambda got: any(s.name == "belt.gate" for s in got))
    (run,) = [s for s in spans if s.name == "invoke_agent guarded-agent" and not s.parent_id]
    trace = otlp.trace(run.trace_id)
    # The resumed run goes on in the same trace.
    (resumed_run,) = [s for s in children(trace, run) if s.name == run.name]
    assert resumed_run.attributes["belt.run.resumed"] is True
    # run -> turn -> tool call -> hook delivery, the hook by host only.
    (denied,) = [
        s
        for s in trace
        if s.name == "belt.hook agent.tool_call"
        and s.attributes.get("belt.hook.decision") == "deny"
        and s.attributes["belt.hook.handler_type"] == "webhook"
    ]
    assert denied.attributes["belt.hook.host"] == url.removeprefix("http://")
    assert denied.attributes["belt.hook.reason"] == "only /tmp deletions allowed"
    tool = next(s for s in trace if s.span_id == denied.parent_id)
    assert tool.name == "execute_tool delete_file"
    turn = next(s for s in trace if s.span_id == tool.parent_id)
    assert (turn.name, turn.parent_id) == ("belt.turn", run.span_id)
    # The delivery went on in the server: its request span is the hook span's child, and the
    # policy's answer a served hook span under that.
    (served,) = children(trace, denied)
    assert (served.name, served.kind) == ("POST /hooks/{name}", "server")
    assert served.attributes == {
        "http.request.method": "POST",
        "http.route": "/hooks/{name}",
        "http.response.status_code": 200,
    }
    assert served.resource["service.name"] == "belt"
    (answered,) = children(trace, served)
    assert answered.name == "belt.hook agent.tool_call"
    assert answered.attributes["belt.hook.handler_type"] == "policy"
    assert answered.attributes["belt.hook.decision"] == "deny"
    reminders = [
        s for s in trace if s.name == "belt.hook agent.turn_start" and s.kind == "internal"
    ]
    assert any(s.attributes.get("belt.hook.injection_size") for s in reminders)
    # The gate is a span of the run's trace, linked to the request that settled it.
    gate_span = one(trace, "belt.gate")
    (link,) = gate_span.links
    settling = next(s for s in spans if s.span_id == link.span_id)
    assert settling.name == "POST /interrupts/{interrupt_id}/resolve"
    assert settling.attributes["http.response.status_code"] == 200


def test_a_failed_hook_is_an_error_span_saying_how_it_was_counted(
    otlp: Receiver, tmp_path: Path
) -> None:
    hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": f"http://{REFUSED}/h?k=s"}]
    path = scenario(tmp_path / "failing.json", hooks)
    done = in_process(
        "sim", "run", str(path), "--fail-closed", OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url
    )
    assert done.returncode == 0, done.stderr
    (failed,) = otlp.named("belt.hook agent.tool_call")
    assert failed.status == "error"
    assert failed.attributes["belt.hook.counted_as"] == "deny"
    assert failed.attributes["belt.hook.host"] == REFUSED
    assert "cannot connect" in failed.attributes["belt.hook.error"]
    # The URL's path and query (which can carry credentials) are in no span.
    assert not [s for s in otlp.spans if "k=s" in json.dumps(s.attributes)]


def test_the_standard_variables_name_the_service_its_resource_and_the_export_headers(
    otlp: Receiver, tmp_path: Path
) -> None:
    done = in_process(
        "sim", "run", str(scenario(tmp_path / "s.json", [])),
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        OTEL_SERVICE_NAME="support-agents",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=ci,team=blue",
        OTEL_EXPORTER_OTLP_HEADERS="x-collector-key=k123",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = one(otlp.spans, "invoke_agent agent")
    assert run.resource["service.name"] == "support-agents"
    assert run.resource["deployment.environment"] == "ci"
    assert run.resource["team"] == "blue"
    assert otlp.headers and all(h.get("x-collector-key") == "k123" for h in otlp.headers)


def test_belt_test_is_a_span_with_a_span_per_scenario_over_its_runs(
    otlp: Receiver, tmp_path: Path
) -> None:
    (tmp_path / "hooks.py").write_text(
        "def guard(payload):\n    return {'decision': 'deny', 'reason': 'no'}\n", encoding="utf-8"
    )
    for name in ("first", "second"):
        hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": "py:hooks.py:guard"}]
        path = scenario(tmp_path / f"{name}.json", hooks)
        document = json.loads(path.read_text(encoding="utf-8"))
        document["expect"] = [{"tool": "read_file", "decision": "deny"}]
        path.write_text(json.dumps(document), encoding="utf-8")
    files = [str(tmp_path / "first.json"), str(tmp_path / "second.json")]
    done = belt("test", *files, OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url)
    assert done.returncode == 0, done.stdout + done.stderr
    suite = one(otlp.spans, "belt.test")
    assert suite.parent_id is None
    scenarios = children(otlp.spans, suite)
    assert sorted(s.name.rsplit("/", 1)[-1] for s in scenarios) == ["first.json", "second.json"]
    for each in scenarios:
        assert each.attributes["belt.test.status"] == "pass"
        (run,) = children(otlp.spans, each)
        assert run.name == "invoke_agent agent"
        assert any(s.name == "belt.hook agent.tool_call" for s in otlp.trace(run.trace_id))


# -- belt serve continues a trace ----------------------------------------------------------------

PAYLOAD = {
    **turn_start(),
    "event": "agent.tool_call",
    "data": {"tool": "delete_file", "arguments": {"path": "/etc/secret-name"}},
}


@pytest.mark.parametrize(("workers", "asked_by"), [("1", "env"), ("2", "env"), ("2", "--otlp")])
def test_belt_serve_continues_the_trace_of_each_request_that_carries_one(
    otlp: Receiver, workers: str, asked_by: str
) -> None:
    trace_id, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    carried = {"traceparent": f"00-{trace_id}-{parent}-01", "tracestate": "vendor=1"}
    args = ["--policy", str(ROOT / "examples" / "policy.toml"), "--workers", workers]
    if asked_by == "--otlp":  # each worker process is told, not only the one it starts from
        args += ["--otlp", otlp.url]
    env = traced_env(otlp) if asked_by == "env" else untraced_env()
    # The workers start after the ready line: the first answer waits for one of them.
    with serve_process(*args, env=env) as (url, _), httpx.Client(timeout=30) as client:
        hook = client.post(f"{url}/hooks/tool-call?k=secret", json=PAYLOAD, headers=carried)
        assert hook.status_code == 200, hook.text
        events = client.get(f"{url}/agents/hook-events", headers=carried)
        assert events.status_code == 200
        refused = client.post(
            f"{url}/interrupts/int_1/resolve",
            content=b"body-7f3",
            headers={**carried, "content-type": "text/plain"},
        )
        assert refused.status_code == 415
        untraced = client.get(f"{url}/healthz")
        assert untraced.status_code == 200
    # Sent as the server (each of its workers) stopped, their batch not yet due.
    spans = otlp.spans
    mine = [s for s in spans if s.trace_id == trace_id]
    requests = {s.name: s for s in mine if s.parent_id == parent}
    assert set(requests) == {
        "POST /hooks/{name}",
        "GET /agents/hook-events",
        "POST /interrupts/{interrupt_id}/resolve",
    }
    assert all(s.kind == "server" for s in requests.values())
    assert requests["POST /interrupts/{interrupt_id}/resolve"].attributes == {
        "http.request.method": "POST",
        "http.route": "/interrupts/{interrupt_id}/resolve",
        "http.response.status_code": 415,
    }
    (answered,) = children(mine, requests["POST /hooks/{name}"])
    assert answered.attributes["belt.hook.decision"] == "deny"
    # A request with no traceparent starts a trace of its own.
    (health,) = [s for s in spans if s.name == "GET /healthz"]
    assert health.trace_id != trace_id and health.parent_id is None
    # Neither the query, the path's values nor the body is in a span.
    shown = json.dumps([s.attributes for s in spans])
    assert "secret" not in shown and "int_1" not in shown and "body-7f3" not in shown


# -- a handler instrumented with OpenTelemetry joins the trace ----------------------------------

INSTRUMENTED = """
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

provider = TracerProvider(resource=Resource.create({"service.name": "hook-handler"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
tracer = provider.get_tracer("hook-handler")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        carrier = {name.lower(): value for name, value in self.headers.items()}
        context = TraceContextTextMapPropagator().extract(carrier)
        with tracer.start_as_current_span("POST /hook", context=context, kind=SpanKind.SERVER):
            answer = b'{"decision": "deny", "reason": "not today"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
"""


@contextmanager
def instrumented(receiver: Receiver) -> Iterator[str]:
    """The handler instrumented with OpenTelemetry (``INSTRUMENTED``) as a process of its own,
    exporting to ``receiver``: its hook URL while it runs."""
    handler = subprocess.Popen(
        [sys.executable, "-c", INSTRUMENTED],
        env=traced_env(receiver),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert handler.stdout is not None
        url = re.search(r"listening on (\S+)", handler.stdout.readline())[1]  # type: ignore[index]
        yield f"{url}/hook"
    finally:
        handler.terminate()
        handler.communicate(timeout=10)


def test_a_handler_instrumented_with_opentelemetry_joins_the_runs_trace(
    otlp: Receiver, tmp_path: Path
) -> None:
    with instrumented(otlp) as url:
        hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": url}]
        path = scenario(tmp_path / "s.json", hooks)
        done = in_process("sim", "run", str(path), OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url)
        assert done.returncode == 0, done.stderr
    hook = one(otlp.spans, "belt.hook agent.tool_call")
    assert hook.attributes["belt.hook.decision"] == "deny"
    handled = one(otlp.spans, "POST /hook")
    assert handled.resource["service.name"] == "hook-handler"
    assert (handled.trace_id, handled.parent_id) == (hook.trace_id, hook.span_id)


def test_a_hook_request_forwarded_by_belt_serve_takes_its_trace_to_the_handler(
    otlp: Receiver,
) -> None:
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with instrumented(otlp) as handler:
        with serve_process("--forward-to", handler, env=traced_env(otlp)) as (url, _):
            carried = {"traceparent": f"00-{trace_id}-{parent}-01"}
            answer = httpx.post(f"{url}/hooks", json=PAYLOAD, headers=carried)
            assert answer.status_code == 200, answer.text
    request = one(otlp.spans, "POST /hooks")
    assert (request.trace_id, request.parent_id) == (trace_id, parent)
    handled = one(otlp.spans, "POST /hook")
    assert (handled.trace_id, handled.parent_id) == (trace_id, request.span_id)
    (answered,) = [s for s in children(otlp.spans, request) if s.name.startswith("belt.hook")]
    assert answered.attributes["belt.hook.handler_type"] == "forward"
    assert answered.attributes["belt.hook.decision"] == "deny"


def test_an_emulated_message_runs_under_the_request_that_sent_it(otlp: Receiver) -> None:
    trace_id, parent = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
    carried = {"traceparent": f"00-{trace_id}-{parent}-01"}
    message = {"agent_config": {"name": "helper"}, "chat_id": None, "input": {"text": "hi"}}
    with serve_process(env=traced_env(otlp)) as (url, _):
        sent = httpx.post(f"{url}/agents/run", json=message, headers=carried)
        assert sent.status_code == 200, sent.text
        chat = sent.json()["data"]["user_message"]["chat_id"]
        # The run goes on after the answer, until the chat is idle.
        eventually(
            lambda: httpx.get(f"{url}/chats/{chat}/status").json()["data"]["status"] != "busy",
            "the chat is idle",
        )
    request = one(otlp.spans, "POST /agents/run")
    assert (request.trace_id, request.parent_id) == (trace_id, parent)
    run = one(otlp.spans, "invoke_agent helper")
    assert (run.trace_id, run.parent_id) == (trace_id, request.span_id)
