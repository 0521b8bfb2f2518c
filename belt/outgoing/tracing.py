"""Hook traces as OpenTelemetry spans (docs/tracing.md). Off unless an OTLP endpoint or a trace file
is asked for; off, nothing of OpenTelemetry (the ``otel`` extra) is imported and every function
here is one bool check."""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from typing import Any

from belt import __version__

INSTALL_HINT = (
    "warning: tracing was asked for but OpenTelemetry is not installed; "
    "install it with: pip install 'belt[otel]' (going on without traces)"
)
REASON_LIMIT = 256  # characters of an answer's reason a span carries

_on = False
_tracer: Any = None
_provider: Any = None
_hinted = False
_threads: set[threading.Thread] = set()  # the SDK's export threads tracing started here
_NOOP: ContextManager[Any] = contextlib.nullcontext()


def on() -> bool:
    """Whether spans are being recorded."""
    return _on


def start(*, otlp: str | None = None, trace_file: Path | None = None) -> bool:
    """Turn tracing on for an OTLP endpoint or ``trace_file``; whether it is on."""
    global _on, _tracer, _provider, _hinted
    endpoint_set = otlp or any(
        os.environ.get(f"OTEL_EXPORTER_OTLP_{part}ENDPOINT") for part in ("TRACES_", "")
    )
    if not endpoint_set and trace_file is None:
        return _on
    shutdown()
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        if not _hinted:
            _hinted = True
            print(INSTALL_HINT, file=sys.stderr, flush=True)
        return False

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "belt"}))
    resource = Resource({"service.version": __version__}).merge(resource)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    before = set(threading.enumerate())
    if endpoint_set:
        provider.add_span_processor(_batched(_otlp_exporter(otlp)))
    if trace_file is not None:
        provider.add_span_processor(_batched(_file_exporter(trace_file)))
    _once_per_process()
    _threads.update(set(threading.enumerate()) - before)
    # A forked child gets the export threads again from the SDK's own fork handlers; this one
    # runs after them and finds those threads, the only ones it has besides its main thread.
    os.register_at_fork(after_in_child=_threads_of_child)
    _provider = provider
    _tracer = provider.get_tracer("belt", __version__)
    _on = True
    return True


# One export's time, retries included, unless OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT says: with
# GivesUp, what a collector that cannot be reached costs a process, once.
EXPORT_SECONDS = 3.0


def threads() -> set[threading.Thread]:
    """The SDK's export threads in this process (belt's own, not the user's code's)."""
    return {thread for thread in _threads if thread.is_alive()}


def _threads_of_child() -> None:
    main = threading.main_thread()
    _threads.clear()
    _threads.update(thread for thread in threading.enumerate() if thread is not main)


def _otlp_exporter(otlp: str | None) -> Any:
    """The OTLP/HTTP exporter to ``otlp`` (else OTEL_*'s), dropping spans after one failed export
    (a flag shared with forked workers)."""
    import mmap  # noqa: PLC0415 - start-up: when tracing only

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    failed = mmap.mmap(-1, 1)

    class GivesUp(OTLPSpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            if failed[0]:
                return SpanExportResult.FAILURE
            result: SpanExportResult = super().export(spans)
            if result is not SpanExportResult.SUCCESS:
                failed[0] = 1
            return result

    timed = any(os.environ.get(f"OTEL_EXPORTER_OTLP_{part}TIMEOUT") for part in ("TRACES_", ""))
    return GivesUp(
        endpoint=traces_url(otlp) if otlp else None, timeout=None if timed else EXPORT_SECONDS
    )


@functools.cache
def _once_per_process() -> None:
    """Flush spans at exit; say the first failed export the SDK logs, on one line, once."""
    atexit.register(shutdown)
    import logging  # noqa: PLC0415 - start-up: when tracing only

    class Once(logging.Handler):
        said = False

        def emit(self, record: logging.LogRecord) -> None:
            if not self.said:
                self.said = True
                text = " ".join(record.getMessage().split())[:500]
                dropped = "(this process drops its spans from now on)"
                print(
                    f"warning: traces not exported: {text} {dropped}", file=sys.stderr, flush=True
                )

    logger = logging.getLogger("opentelemetry")
    logger.addHandler(Once(logging.WARNING))
    logger.propagate = False


def traces_url(base: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (``/v1/traces`` appended unless there)."""
    return base if base.rstrip("/").endswith("/v1/traces") else base.rstrip("/") + "/v1/traces"


def flush() -> None:
    """Export the spans ended so far."""
    if _provider is not None:
        _provider.force_flush()


def shutdown() -> None:
    """Flush the spans not yet exported and stop recording."""
    global _on, _tracer, _provider
    provider, _provider, _tracer, _on = _provider, None, None, False
    if provider is not None:
        provider.force_flush()
        provider.shutdown()


def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: str = "internal",
    start_time_ns: int | None = None,
    links: Sequence[Mapping[str, str]] = (),
    parent: Mapping[str, str] | None = None,
) -> ContextManager[Any]:
    """A span current while the block runs (``None`` when off), a child of ``parent`` if given
    (what :func:`current` gave, or a request's headers with a ``traceparent``); an exception's
    type name only goes in its ERROR status (its text may carry a payload)."""
    return _Current(name, _clean(attributes), kind, start_time_ns, links, parent) if _on else _NOOP


class _Current:
    """:func:`span`'s span: ``start_as_current_span`` without its generators (on every hook)."""

    def __init__(self, *started: Any) -> None:
        self.started = started

    def __enter__(self) -> Any:
        from opentelemetry import context, trace

        name, attributes, kind, start_time_ns, links, parent = self.started
        self.span = _tracer.start_span(
            name,
            _parent(parent) if parent else None,
            kind=trace.SpanKind[kind.upper()],
            attributes=attributes,
            start_time=start_time_ns,
            links=[trace.Link(_remote(link)) for link in links if link],
        )
        self.token = context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        from opentelemetry import context

        if isinstance(exc, Exception):
            from opentelemetry.trace import Status, StatusCode

            self.span.set_attribute("error.type", type(exc).__qualname__)
            self.span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
        context.detach(self.token)
        self.span.end()


def carried() -> dict[str, Any] | None:
    """What a record keeps of a span that starts now and ends where a gate is settled."""
    found = current()
    return None if found is None else {**found, "start_ns": time.time_ns()}


def settlement(how: str, door: str | None = None) -> ContextManager[Any]:
    """The ``belt.settlement`` span: how and through which door, never who (spans leave)."""
    return span("belt.settlement", {"belt.gate.settled_by": how, "belt.gate.door": door})


def end_carried(name: str, kept: Mapping[str, Any] | None, attributes: Mapping[str, Any]) -> None:
    """End the span ``kept`` (:func:`carried`) now, linked to the current or a settlement span."""
    if not _on or not kept:
        return
    try:
        start_ns, _ = int(kept["start_ns"]), _remote(kept)  # ids in hex, or no span
    except (KeyError, TypeError, ValueError):
        return
    with contextlib.ExitStack() as stack:
        link = current()
        if link is None:
            stack.enter_context(span("belt.settlement", attributes, parent=kept))
            link = current()
        with span(name, attributes, start_time_ns=start_ns, links=[link or {}], parent=kept):
            pass


def set_attributes(span: Any, attributes: Mapping[str, Any], failed: str | None = None) -> None:
    """Set attributes on a span (``None`` values left out) and, when ``failed`` (a short fixed
    phrase, never payload text), its ERROR status; nothing when the span is ``None``."""
    if span is not None:
        span.set_attributes(_clean(attributes))
        if failed:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR, failed[:REASON_LIMIT]))


def current() -> dict[str, str] | None:
    """The current span's ``{"trace_id", "span_id"}`` in hex (what a record keeps), or ``None``."""
    if not _on:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def bounded(text: object) -> str | None:
    """An answer's reason (or error) as text cut to :data:`REASON_LIMIT` characters."""
    return None if text is None else str(text)[:REASON_LIMIT]


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current span's ``traceparent`` (and ``tracestate``) to outgoing headers."""
    if not _on:
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    TraceContextTextMapPropagator().inject(headers)


def _clean(attributes: Mapping[str, object] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


def _parent(parent: Mapping[str, str]) -> Any:
    """The OpenTelemetry context of :func:`span`'s ``parent``; ids that are not valid (a damaged
    record) give none, so the span starts a trace of its own rather than failing."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if "trace_id" in parent:
        parent = {"traceparent": f"00-{parent['trace_id']}-{parent.get('span_id')}-01"}
    return TraceContextTextMapPropagator().extract(parent)


def _remote(ids: Mapping[str, str]) -> Any:
    """The sampled SpanContext of ``{"trace_id", "span_id"}`` in hex, from another process."""
    from opentelemetry.trace import SpanContext, TraceFlags

    trace_id, span_id = int(ids["trace_id"], 16), int(ids["span_id"], 16)
    return SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


def _batched(exporter: Any) -> Any:
    """The SDK's BatchSpanProcessor queueing a lean copy of each span (a dict and tuples): fewer
    objects reach the old GC generation, so fewer full collections (docs/performance.md)."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    class Lean(BatchSpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            lean = ReadableSpan(
                span.name,
                span.context,
                span.parent,
                span.resource,
                dict(span.attributes or {}),
                tuple(span.events),
                tuple(span.links),
                span.kind,
                status=span.status,
                start_time=span.start_time,
                end_time=span.end_time,
                instrumentation_scope=span.instrumentation_scope,
            )
            super().on_end(lean)

    return Lean(exporter)


def _file_exporter(path: Path) -> Any:
    """A span exporter appending each batch to ``path`` as one line of OTLP/JSON, ids in hex."""
    from google.protobuf.json_format import MessageToJson  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class FileSpanExporter(SpanExporter):
        # One write of a whole line, appended: forked workers append lines of their own.
        def __init__(self) -> None:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            text = MessageToJson(encode_spans(spans), use_integers_for_enums=True, indent=None)
            document = json.loads(text, object_hook=_hex_ids)
            line = json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n"
            try:
                os.write(self.fd, line.encode())
            except OSError:
                return SpanExportResult.FAILURE
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    return FileSpanExporter()


def _hex_ids(node: dict[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON object with its ids in hex (protobuf's JSON writes bytes in base64)."""
    import base64  # noqa: PLC0415 - start-up: for a trace file only

    for key in ("traceId", "spanId", "parentSpanId"):
        if isinstance(node.get(key), str):
            node[key] = base64.b64decode(node[key]).hex()
    return node
