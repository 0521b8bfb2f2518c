"""The inspector's page and its JSON API under ``/inspector/`` (docs/inspector.md): every view of
the page is a route, in the platform's envelope and problem+json."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import cache, partial
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio.from_thread
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, Router

from belt.deliveries.replay import payload_model
from belt.display.text import message_of
from belt.engine.entrypoints import resume_if_settled
from belt.errors import BeltError, Conflict, InvalidInput
from belt.handlers.webhook import WebhookResult
from belt.records.changes import ANYTHING, watching
from belt.records.ids import now_iso
from belt.records.interrupts import read_record, settled_by
from belt.records.journal import JOURNAL, SERVE
from belt.records.reports import Reporter, report_api
from belt.server.guard import STOPPING
from belt.server.inspector.deliveries import Deliveries, Signals, check_filters
from belt.server.inspector.resend import REPLAY_MAX, Replayer, parse_target, scenario_file
from belt.server.inspector.timeline import gate_item, gates, list_runs, resolve, run_view
from belt.server.problems import (
    Endpoint,
    Problem,
    answering,
    belt_problem,
    calling,
    read_json_object,
)
from belt.server.stream import line
from belt.store import clock

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from belt.server.deciders import Decider
    from belt.store import Store

STATIC_FILES = {
    "inspector.js": "text/javascript; charset=utf-8",
    "inspector.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
PAGE_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
API_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff"}

TICK = 0.25
"""Seconds at least between two looks at the store while a page is connected to the stream."""
FALLBACK = 1.0
"""Seconds after which the stream looks unwoken (another process's writes send no signal)."""
HEARTBEAT = 15.0  # seconds of quiet after which the stream sends a heartbeat line
STREAM_SECONDS = 600.0  # a stream ends after this long (the page opens another)


@cache
def static_file(name: str) -> bytes:
    """A file of the page, from the package."""
    return (resources.files("belt.server.inspector") / "static" / name).read_bytes()


def problem_of(exc: BeltError) -> Problem:
    """A belt error as the problem the page shows (its problems listed too)."""
    problem = belt_problem(exc)
    if problems := getattr(exc, "problems", None):
        problem.extra["errors"] = list(problems)
    if exc.hint:
        problem.extra["hint"] = exc.hint
    return problem


@dataclass(eq=False)
class Inspector:
    """The routes' handlers, over one store."""

    store: Store
    decide: Decider | None
    report: Reporter | None
    in_process: frozenset[str] = frozenset()
    continuing: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.deliveries = Deliveries(self.store)
        serve_decide = self._serve_decide if self.decide else None
        self.replayer = Replayer(self.store, self.deliveries, serve_decide, self.in_process)

    async def page(self, request: Request) -> Response:
        """GET /: the page."""
        return Response(
            static_file("index.html"), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS
        )

    async def static(self, request: Request) -> Response:
        """GET /inspector/static/{name}: the page's script and styles."""
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return Problem(404, f"no file {name}").response()
        return Response(static_file(name), media_type=STATIC_FILES[name], headers=PAGE_HEADERS)

    async def list_deliveries(self, request: Request) -> Any:
        """GET /inspector/deliveries: the newest deliveries that pass the filters."""
        params = request.query_params
        filters = check_filters(dict(params))
        limit = params.get("limit", "100")
        if not limit.isdigit() or len(limit) > 6:
            raise InvalidInput(f"limit: expected a whole number, got {limit!r}")
        return await run_in_threadpool(
            self.deliveries.query, filters, limit=int(limit), before=params.get("before") or None
        )

    def replay(self, body: dict[str, object]) -> Any:
        """POST /inspector/replay: ``{"ids": [...]}`` or ``{"filter": {...}}`` or ``{"run": id}``,
        ``"target"``, and for one delivery an edited ``"payload"``."""
        target = parse_target(body.get("target"))
        entries = self._selection(body)
        return self.replayer.replay(entries=entries, target=target, payload=body.get("payload"))

    def _selection(self, body: dict[str, object]) -> list[Any]:
        ids, chosen, run = body.get("ids"), body.get("filter"), body.get("run")
        if sum(x is not None for x in (ids, chosen, run)) != 1:
            raise InvalidInput("give one of ids (a list of delivery ids), filter or run")
        if ids is not None:
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise InvalidInput("ids: expected a list of delivery ids")
            if len(ids) > REPLAY_MAX:
                raise InvalidInput(f"ids: at most {REPLAY_MAX} deliveries are replayed at once")
            return list(self.deliveries.summaries(ids))
        if run is not None:
            if not isinstance(run, str):
                raise InvalidInput("run: expected a run id")
            chosen = {"run": run, "source": "sim"}
        if not isinstance(chosen, dict) or not all(isinstance(v, str) for v in chosen.values()):
            raise InvalidInput("filter: expected an object of strings")
        # As `belt replay RUN_ID`: only webhooks have a handler to send a payload to.
        return [
            entry
            for entry in self.deliveries.select(check_filters(chosen), limit=REPLAY_MAX)
            if entry.summary["handler_type"] == "webhook"
        ]

    def _serve_decide(self, payload: dict[str, object]) -> WebhookResult:
        """This server's decider, asked from a worker thread as a handler would be."""
        model, problem = payload_model(payload)
        if model is None:
            return WebhookResult(None, "", None, problem, 0)
        assert self.decide is not None
        started = time.perf_counter()
        try:
            status, response, error = 200, anyio.from_thread.run(self.decide, model).response, None
        except Exception as exc:
            status, response, error = 500, None, f"the handler failed: {message_of(exc)}"
        ms = round((time.perf_counter() - started) * 1000)
        return WebhookResult(status, "", response, error, ms)

    async def scenario(self, request: Request) -> Response:
        """POST /inspector/scenario: a delivery (``id`` or ``payload``) kept as a test scenario."""
        body = await read_json_object(request)
        target = parse_target(body.get("target"))
        base = str(request.base_url)
        name, media, text = await run_in_threadpool(self._scenario, body, target, base)
        return Response(
            text,
            media_type=f"{media}; charset=utf-8",
            headers={**API_HEADERS, "content-disposition": f'attachment; filename="{name}"'},
        )

    def _scenario(self, body: dict[str, object], target: Any, base: str) -> tuple[str, str, str]:
        delivery_id = body.get("id")
        entry = record = None
        if delivery_id is not None:
            if not isinstance(delivery_id, str):
                raise InvalidInput("id: expected a delivery id")
            entry, record = self.deliveries.record(delivery_id)
        payload = body.get("payload")
        if payload is None:
            if record is None:
                raise InvalidInput("give the delivery's id, or a payload")
            payload = record.get("request") if entry and entry.log[0] == JOURNAL else None
            payload = payload if payload is not None else record.get("payload")
        handler, notes = self.replayer.kept_handler(target, entry, record, base.rstrip("/"))
        return scenario_file(
            payload=payload,
            handler=handler,
            expect=body.get("expect"),
            notes=notes,
            delivery_id=delivery_id,
        )

    async def resolve(self, request: Request) -> Any:
        """POST /inspector/gates/{id}/resolve with ``{"decision", "data"}``; 409 saying by whom."""
        interrupt_id = request.path_params["interrupt_id"]
        body = await read_json_object(request)
        try:
            dto, run = await run_in_threadpool(
                resolve,
                self.store,
                interrupt_id=interrupt_id,
                decision=body.get("decision"),
                data=body.get("data"),
            )
        except Conflict as exc:
            problem = problem_of(exc)
            with contextlib.suppress(BeltError):
                record = await run_in_threadpool(
                    read_record, store=self.store, interrupt_id=interrupt_id
                )
                problem.extra["interrupt"] = gate_item(record, clock.now())
                problem.extra["settled_by"] = settled_by(record)
            raise problem from None
        report_api(self.report, "resolve", interrupt_id, 200, f"{body.get('decision')} (inspector)")
        if run["continues"]:
            task = asyncio.get_running_loop().create_task(self._continue(str(run["run_id"])))
            self.continuing.add(task)
            task.add_done_callback(self.continuing.discard)
        return {"interrupt": dto, "run": run}

    async def _continue(self, run_id: str) -> None:
        # As `belt serve --resume`; an emulated chat's run is the agent routes' worker's.
        try:
            tried = await run_in_threadpool(resume_if_settled, self.store, run_id, emulated=False)
        except Exception as exc:  # the server stays up; the line says what went wrong
            tried = {"run_id": run_id, "error": f"{type(exc).__name__}: {exc}"}
        if tried is not None and self.report is not None:
            self.report({"kind": "resume", "at": now_iso(), **tried})

    async def stream(self, request: Request) -> Response:
        """GET /inspector/stream: NDJSON lines saying what changed, until the server stops
        (STOPPING in the scope, or an embedder's ``app.state.stopping``)."""
        embedder = getattr(request.app.state, "stopping", None)

        def stopping() -> bool:
            return bool(request.scope.get(STOPPING)) or (embedder is not None and embedder())

        return StreamingResponse(
            self._changes(stopping),
            media_type="application/x-ndjson",
            headers={**API_HEADERS, "x-accel-buffering": "no"},
        )

    async def _changes(self, stopping: Callable[[], bool]) -> AsyncIterator[bytes]:
        with watching(ANYTHING) as wake:
            areas = watched_areas(self.store)
            yield line({"type": "hello", "areas": list(areas)})
            began = last = time.monotonic()
            while time.monotonic() - began < STREAM_SECONDS:
                await wake.wait_async(FALLBACK)  # then a tick more: a burst is one look
                if stopping():
                    return
                await asyncio.sleep(TICK)
                if stopping():
                    return
                if changed := [area for area, signals in areas.items() if signals.moved()]:
                    yield line({"type": "changed", "areas": changed})
                    last = time.monotonic()
                elif time.monotonic() - last >= HEARTBEAT:
                    yield line({"type": "heartbeat"})
                    last = time.monotonic()


def watched_areas(store: Store) -> dict[str, Signals]:
    """The stream's areas, each told to have changed by the ``stat`` of a few paths."""
    root, objects = store.root, store.root / "objects"
    journal = root / "logs" / JOURNAL / f"{SERVE}.jsonl"
    areas = {
        "deliveries": Signals(
            [journal, root / "logs" / "events", objects / "run", objects / "message"]
        ),
        "runs": Signals([objects / kind for kind in ("run", "message", "sim", "hooktask")]),
        "gates": Signals([root / "tags" / "pending-interrupts", objects / "interrupt"]),
    }
    for signals in areas.values():
        signals.moved()
    return areas


def build(
    *,
    prefix: str,
    store: Store,
    decide: Decider | None,
    in_process: frozenset[str],
    report: Reporter | None,
) -> ASGIApp:
    """The inspector's router over ``store``, its JSON routes under ``prefix``."""
    inspector = Inspector(store, decide=decide, report=report, in_process=in_process)
    api: dict[str, dict[str, Endpoint]] = {
        "GET": {
            "deliveries": inspector.list_deliveries,
            "deliveries/{delivery_id}": calling(inspector.deliveries.detail, "delivery_id"),
            "runs": calling(partial(list_runs, store)),
            "runs/{run_id}": calling(partial(run_view, store), "run_id"),
            "gates": calling(partial(gates, store)),
            "stream": inspector.stream,
        },
        "POST": {
            "replay": calling(inspector.replay, body=True),
            "scenario": inspector.scenario,
            "gates/{interrupt_id}/resolve": inspector.resolve,
        },
    }
    return Router(
        routes=[
            Route("/", inspector.page, methods=["GET", "HEAD"]),
            Route(f"{prefix}/static/{{name}}", inspector.static, methods=["GET", "HEAD"]),
            *(
                Route(
                    f"{prefix}/{path}",
                    answering(handler, headers=API_HEADERS, problem_of=problem_of),
                    methods=[method],
                )
                for method, routes in api.items()
                for path, handler in routes.items()
            ),
        ]
    )
