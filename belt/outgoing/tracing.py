"""Hook traces as OpenTelemetry spans (docs/tracing.md).

Off unless an OTLP endpoint (``--otlp``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) or a trace file (``--trace``) is asked for; off, nothing
of OpenTelemetry is imported and every function here is one bool check. OpenTelemetry is the
``otel`` extra and is imported only inside the functions of this module.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from typing import Any

from belt import __version__

INSTALL_HINT = (
    "warning: tracing was asked for but OpenTelemetry is not installed; "
    "install it with: pip install 'belt[otel]' (going on without traces)"
)
REASON_LIMIT = 256
"""The longest answer reason a span carries, in characters."""

_on = False
_tracer: Any = None
_provider: Any = None
_hinted = False
_registered = False
_quiet = False
_threads: set[threading.Thread] = set()
"""The threads tracing started in this process (the SDK's export threads)."""
_NOOP: ContextManager[Any] = contextlib.nullcontext()
_KINDS = ("internal", "server", "client", "producer", "consumer")


def on() -> bool:
    """Whether spans are being recorded."""
    return _on


def start(*, otlp: str | None = None, trace_file: Path | None = None) -> bool:
    """Turn tracing on when an OTLP endpoint (``otlp``, or the standard ``OTEL_EXPORTER_OTLP_*``
    variables) or ``trace_file`` is given; say once on stderr how to install the extra when it is
    missing. Returns whether tracing is on. Spans are flushed at exit (or by :func:`shutdown`)."""
    global _on, _tracer, _provider, _hinted, _registered
    endpoint_set = otlp or any(
        os.environ.get(name)
        for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
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
            sys.stderr.write(INSTALL_HINT + "\n")
            sys.stderr.flush()
        return False

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "belt"}))
    resource = Resource({"service.version": __version__}).merge(resource)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    before = set(threading.enumerate())
    if endpoint_set:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        timed = any(os.environ.get(f"OTEL_EXPORTER_OTLP_{part}TIMEOUT") for part in ("TRACES_", ""))
        exporter = OTLPSpanExporter(
            endpoint=traces_url(otlp) if otlp else None,
            timeout=None if timed else EXPORT_SECONDS,
        )
        provider.add_span_processor(_batched(_gives_up(exporter)))
    if trace_file is not None:
        provider.add_span_processor(_batched(_file_exporter(trace_file)))
    _say_export_problems_once()
    _threads.update(set(threading.enumerate()) - before)
    # A forked child gets the export threads again from the SDK's own handlers, registered as
    # the processors were made: this one runs after them and finds those threads, the only ones
    # a child has then besides its main thread.
    os.register_at_fork(after_in_child=_threads_of_child)
    _provider = provider
    _tracer = provider.get_tracer("belt", __version__)
    _on = True
    if not _registered:
        _registered = True
        atexit.register(shutdown)
    return True


EXPORT_SECONDS = 3.0
"""How long one export to a collector may take, its retries included, unless
``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` or ``OTEL_EXPORTER_OTLP_TIMEOUT`` says otherwise: with
:func:`_gives_up`, what a collector that cannot be reached costs a process, once."""


def threads() -> set[threading.Thread]:
    """The threads tracing runs in this process (the SDK's export threads): belt's own, so a
    ``belt test`` worker that holds them is not one left with a thread of the user's code
    (``belt.usercode.supervisor``), and goes on to its next scenario."""
    return {thread for thread in _threads if thread.is_alive()}


def _threads_of_child() -> None:
    main = threading.main_thread()
    _threads.clear()
    _threads.update(thread for thread in threading.enumerate() if thread is not main)


def _gives_up(exporter: Any) -> Any:
    """``exporter``, which after one failed export drops the spans it is given: a collector that
    cannot be reached (or refuses the spans) is not waited for again by every later batch, nor
    by the flush each worker process makes after its piece of work. The failure is kept in
    memory shared with the processes forked from this one (``belt test``'s workers), so it is
    paid once per command, and the warning says so."""
    import mmap  # noqa: PLC0415 - start-up: when tracing only

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    failed = mmap.mmap(-1, 1)

    class GivesUp(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            if failed[0]:
                return SpanExportResult.FAILURE
            result: SpanExportResult = exporter.export(spans)
            if result is not SpanExportResult.SUCCESS:
                failed[0] = 1
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(exporter.force_flush(timeout_millis))

    return GivesUp()


def _say_export_problems_once() -> None:
    """The SDK logs each failed export (and each retry) as it happens; belt says the first one,
    on one line, and no more."""
    global _quiet
    if _quiet:
        return
    _quiet = True
    import logging  # noqa: PLC0415 - start-up: when tracing only

    class Once(logging.Handler):
        said = False

        def emit(self, record: logging.LogRecord) -> None:
            if not self.said:
                self.said = True
                text = " ".join(record.getMessage().split())[:500]
                sys.stderr.write(
                    f"warning: traces not exported: {text} (this process drops its spans from "
                    "now on)\n"
                )
                sys.stderr.flush()

    logger = logging.getLogger("opentelemetry")
    logger.addHandler(Once(logging.WARNING))
    logger.propagate = False


def traces_url(base: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (``/v1/traces`` appended, as the
    SDK does for ``OTEL_EXPORTER_OTLP_ENDPOINT``), unless it already names that path."""
    return base if base.rstrip("/").endswith("/v1/traces") else base.rstrip("/") + "/v1/traces"


def flush() -> None:
    """Export the spans ended so far (a worker process that ends with ``os._exit`` flushes
    after each piece of work)."""
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
) -> ContextManager[Any]:
    """A span that is current while the block runs (it yields the span; ``None`` when tracing is
    off). An exception leaving the block sets the span's status to ERROR with its type's name
    only: an exception's text may carry a payload. ``links`` are ``{"trace_id", "span_id"}`` in
    hex."""
    if not _on:
        return _NOOP
    return _Current(name, _clean(attributes), kind, start_time_ns, links)


class _Current:
    """:func:`span`'s span, started and made current on entry, ended on exit: the SDK's
    ``start_as_current_span`` without its layers of generators (a hook's span is on every
    delivery's path)."""

    def __init__(
        self,
        name: str,
        attributes: Mapping[str, object],
        kind: str,
        start_time_ns: int | None,
        links: Sequence[Mapping[str, str]],
    ) -> None:
        self.started = (name, attributes, kind, start_time_ns, links)

    def __enter__(self) -> Any:
        from opentelemetry import context, trace

        name, attributes, kind, start_time_ns, links = self.started
        self.span = _tracer.start_span(
            name,
            kind=trace.SpanKind[kind.upper()] if kind in _KINDS else trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start_time_ns,
            links=[_link(link) for link in links if link],
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


def begin(name: str, attributes: Mapping[str, Any] | None = None) -> Any:
    """Start a span that is current until :func:`end` (for a span that outlives the block that
    starts it: a turn, over the steps of a run). Returns a handle; ``None`` when tracing is off.
    Spans begun this way must be ended in the reverse order."""
    if not _on:
        return None
    handle = _Current(name, _clean(attributes), "internal", None, ())
    handle.__enter__()
    return handle


def end(handle: Any) -> None:
    """End a span :func:`begin` started and make its parent current again."""
    if handle is not None:
        handle.__exit__(None, None, None)


def carried() -> dict[str, Any] | None:
    """What a record keeps of a span that starts now under the current span and ends in
    whichever process later settles it (a gate): the trace, the parent span, the start time.
    ``None`` when tracing is off."""
    found = current()
    return None if found is None else {**found, "start_ns": now_ns()}


def settlement(how: str, door: str | None = None) -> ContextManager[Any]:
    """The ``belt.settlement`` span of a command that settles gates: how (``person``, ``rule``,
    ``expiry``, ``batch``, as the trail says) and through which door (``cli``, ``review``,
    ``api``), never who: the OS user the trail keeps is personal, and spans leave the machine.
    The ``belt.gate`` span of each gate settled in it links to it (:func:`end_carried`)."""
    return span("belt.settlement", {"belt.gate.settled_by": how, "belt.gate.door": door})


def end_carried(name: str, kept: Mapping[str, Any] | None, attributes: Mapping[str, Any]) -> None:
    """Record the span ``kept`` (from :func:`carried`, maybe by another process) as ending now,
    in its trace, linked to the span that ends it: the current one, else a ``belt.settlement``
    span made for it beside it. Nothing when tracing is off here or nothing was kept."""
    if not _on or not kept:
        return
    try:
        parent = {"trace_id": str(kept["trace_id"]), "span_id": str(kept["span_id"])}
        start_ns = int(kept["start_ns"])
    except (KeyError, TypeError, ValueError):
        return
    with contextlib.ExitStack() as stack:
        link = current()
        if link is None:
            stack.enter_context(parented(**parent))
            stack.enter_context(span("belt.settlement", attributes))
            link = current()
        with parented(**parent), span(name, attributes, start_time_ns=start_ns, links=[link or {}]):
            pass


def set_attributes(span: Any, attributes: Mapping[str, Any]) -> None:
    """Set attributes on a span from :func:`span` (``None`` values left out); a no-op when the
    span is ``None`` (tracing off)."""
    if span is not None:
        span.set_attributes(_clean(attributes))


def fail(span: Any, description: str) -> None:
    """Mark a span as failed (status ERROR); ``description`` is a short fixed phrase, never
    payload text. A no-op when the span is ``None``."""
    if span is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, description[:REASON_LIMIT]))


def current() -> dict[str, str] | None:
    """The current span's ``{"trace_id", "span_id"}`` in hex, or ``None`` when tracing is off or
    no span is current: what a record keeps to continue a trace in another process."""
    if not _on:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def now_ns() -> int:
    """The clock spans are stamped with, for a span that starts here and ends elsewhere."""
    return time.time_ns()


def bounded(text: str | None) -> str | None:
    """An answer's reason cut to :data:`REASON_LIMIT` characters."""
    return None if text is None else text[:REASON_LIMIT]


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current span's ``traceparent`` (and ``tracestate``) to outgoing headers; a no-op
    when tracing is off."""
    if not _on:
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    TraceContextTextMapPropagator().inject(headers)


def continued(headers: Mapping[str, str]) -> ContextManager[None]:
    """Make an incoming ``traceparent`` the parent of the spans started in the block; nothing
    when tracing is off or the header is absent or malformed."""
    if not _on:
        return _NOOP
    return _continued(headers)


@contextlib.contextmanager
def _continued(headers: Mapping[str, str]) -> Iterator[None]:
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    token = context.attach(TraceContextTextMapPropagator().extract(headers))
    try:
        yield None
    finally:
        context.detach(token)


def parented(trace_id: str, span_id: str) -> ContextManager[None]:
    """Make the span ``span_id`` of trace ``trace_id`` (hex, as :func:`current` gives them) the
    parent of the spans started in the block: a trace continued from a record."""
    return continued({"traceparent": f"00-{trace_id}-{span_id}-01"})


def _clean(attributes: Mapping[str, object] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}


def _link(link: Mapping[str, str]) -> Any:
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    context = SpanContext(
        trace_id=int(link["trace_id"], 16),
        span_id=int(link["span_id"], 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return Link(context)


def _batched(exporter: Any) -> Any:
    """The SDK's BatchSpanProcessor for ``exporter``, queueing a lean copy of each ended span:
    its attributes in a plain dict, its links and events in tuples, rather than the SDK's
    bounded containers (each with its lock and deque). A span waits in the queue while hundreds
    more end, long enough to reach the old generation of the garbage collector, where the
    objects it holds bring on full collections that walk all of a run's state; fewer objects,
    fewer of them (docs/performance.md, dispatch --otel). Exported, the copy is the same (a dict
    counts no dropped attributes, and belt's spans stay far below the SDK's limits)."""
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


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _file_exporter(path: Path) -> Any:
    """A span exporter that appends each batch to ``path`` as one line of OTLP/JSON (an
    ``ExportTraceServiceRequest``, as the OTLP file exporter specification says: ids in hex,
    names in camelCase, 64-bit integers as strings, enums as integers)."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class FileSpanExporter(SpanExporter):
        # One write of a whole line to a file opened for appending, so the worker processes
        # a command forks (``belt test``) append lines of their own to the same file.
        def __init__(self) -> None:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            document = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
            _hex_ids(document)
            line = json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n"
            try:
                os.write(self.fd, line.encode())
            except OSError:
                return SpanExportResult.FAILURE
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            with contextlib.suppress(OSError):
                os.close(self.fd)

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return FileSpanExporter()


def _hex_ids(node: Any) -> None:
    """Protobuf's JSON mapping writes bytes in base64; OTLP/JSON writes trace and span ids in
    hex."""
    import base64  # noqa: PLC0415 - start-up: for a trace file only

    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)
