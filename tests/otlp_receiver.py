"""A real OTLP/HTTP trace receiver, for the tests and ``bench/dispatch.py --otel``.

A standard-library HTTP/1.1 server on a free loopback port (in a thread: ``receiving``; or in a
process of its own: ``python tests/otlp_receiver.py`` prints ``listening on http://127.0.0.1:PORT``).
It takes ``POST /v1/traces`` as an OTLP collector does: an ``ExportTraceServiceRequest`` in
protobuf (``application/x-protobuf``) or in OTLP's JSON (``application/json``), gzip-compressed
or not, decoded with ``opentelemetry-proto``; it answers 200 with an empty
``ExportTraceServiceResponse``. Every span is kept as a ``Span`` (ids in hex, attributes as plain
values, the resource's attributes beside them), and the headers of every export request too.
``GET /spans`` answers the spans so far as JSON (how a test or a bench reads a receiver running
in another process).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from opentelemetry.proto.trace.v1.trace_pb2 import Status

KINDS = {
    SpanProto.SPAN_KIND_UNSPECIFIED: "unspecified",
    SpanProto.SPAN_KIND_INTERNAL: "internal",
    SpanProto.SPAN_KIND_SERVER: "server",
    SpanProto.SPAN_KIND_CLIENT: "client",
    SpanProto.SPAN_KIND_PRODUCER: "producer",
    SpanProto.SPAN_KIND_CONSUMER: "consumer",
}
STATUSES = {
    Status.STATUS_CODE_UNSET: "unset",
    Status.STATUS_CODE_OK: "ok",
    Status.STATUS_CODE_ERROR: "error",
}


@dataclass(frozen=True)
class Link:
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    """One span as a collector received it; ids in lowercase hex, ``parent_id`` None at a root."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: str
    attributes: dict[str, Any]
    status: str
    status_message: str
    start_ns: int
    end_ns: int
    links: list[Link] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def value(any_value: AnyValue) -> Any:
    """An OTLP attribute value as a plain one (a string, int, float, bool, list or dict)."""
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(item) for item in any_value.array_value.values]
    if kind == "kvlist_value":
        return attributes(any_value.kvlist_value.values)
    return getattr(any_value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key-value pairs as a dict."""
    return {pair.key: value(pair.value) for pair in pairs}


def decoded(request: ExportTraceServiceRequest) -> list[Span]:
    """The spans of one export request."""
    found = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    Span(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex() or None,
                        kind=KINDS.get(span.kind, str(span.kind)),
                        attributes=attributes(span.attributes),
                        status=STATUSES.get(span.status.code, str(span.status.code)),
                        status_message=span.status.message,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        links=[link_of(link) for link in span.links],
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    return found


def link_of(link: Any) -> Link:
    return Link(link.trace_id.hex(), link.span_id.hex(), attributes(link.attributes))


def parse(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """An export request's body, protobuf or OTLP JSON (whose ids are hex, not base64)."""
    request = ExportTraceServiceRequest()
    if content_type.startswith("application/json"):
        document = json.loads(body)
        for resource_spans in document.get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for span in scope_spans.get("spans", []):
                    hex_ids_as_base64(span)
                    for link in span.get("links", []):
                        hex_ids_as_base64(link)
        json_format.ParseDict(document, request)
    else:
        request.ParseFromString(body)
    return request


def hex_ids_as_base64(item: dict[str, Any]) -> None:
    """OTLP JSON writes ids in hex where protobuf's JSON mapping of bytes is base64."""
    for key in ("traceId", "spanId", "parentSpanId"):
        if item.get(key):
            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode("ascii")


class Receiver:
    """The spans and export requests' headers a receiver got, safe to read while it runs."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.spans: list[Span] = []
        self.headers: list[dict[str, str]] = []
        self.url = ""

    @property
    def endpoint(self) -> str:
        """The traces endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; the base URL is
        ``OTEL_EXPORTER_OTLP_ENDPOINT``'s)."""
        return f"{self.url}/v1/traces"

    def add(self, spans: list[Span], headers: dict[str, str]) -> None:
        with self.lock:
            self.spans.extend(spans)
            self.headers.append(headers)
            self.lock.notify_all()

    def wait(self, found: Callable[[list[Span]], bool], timeout: float = 20.0) -> list[Span]:
        """The spans, once ``found`` says they hold what is waited for (AssertionError, with
        the names received, if they do not within ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not found(self.spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted({span.name for span in self.spans})
                    raise AssertionError(f"spans not received in {timeout:g} s; got {names}")
                self.lock.wait(left)
            return list(self.spans)

    def named(self, name: str) -> list[Span]:
        """The spans received so far called ``name``."""
        with self.lock:
            return [span for span in self.spans if span.name == name]

    def trace(self, trace_id: str) -> list[Span]:
        """The spans received so far of one trace."""
        with self.lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def clear(self) -> None:
        with self.lock:
            self.spans.clear()
            self.headers.clear()


def handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path != "/v1/traces":
                self.answer(404, b"", "text/plain")
                return
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            content_type = self.headers.get("content-type") or ""
            try:
                request = parse(body, content_type)
            except Exception as exc:  # a malformed export is the sender's bug: say so
                self.answer(400, str(exc).encode(), "text/plain")
                return
            receiver.add(decoded(request), {k.lower(): v for k, v in self.headers.items()})
            if content_type.startswith("application/json"):
                self.answer(200, b"{}", "application/json")
            else:
                answer = ExportTraceServiceResponse().SerializeToString()
                self.answer(200, answer, "application/x-protobuf")

        def do_GET(self) -> None:  # noqa: N802
            with receiver.lock:
                spans = [asdict(span) for span in receiver.spans]
            self.answer(200, json.dumps(spans).encode(), "application/json")

        def answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


def server_for(receiver: Receiver) -> ThreadingHTTPServer:
    """A server for ``receiver`` bound to 127.0.0.1, port 0 (its URL set on ``receiver``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    return server


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1, port 0, in a thread, for the ``with`` block."""
    receiver = Receiver()
    server = server_for(receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def serve() -> None:
    """Serve a receiver on port 0 of loopback until ended."""
    receiver = Receiver()
    server = server_for(receiver)
    print(f"listening on {receiver.url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve()
