"""The ASGI app of ``belt serve``: hook routes answered by a decider (allow all, a policy, a
Python callable), and the platform's API in its envelope and problem+json (``spec/WIRE.md``)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from belt.deliveries.effects import is_in_process
from belt.display.text import describe, message_of
from belt.emulator.agents import load_agent_files
from belt.emulator.conversation import Emulator
from belt.emulator.modelscript import load_model_script
from belt.errors import BeltError
from belt.outgoing import tracing
from belt.outgoing.signing import TOLERANCE_SECONDS, SignatureError, secret_key, verify
from belt.records.chats import set_chat_settings
from belt.records.interrupts import (
    BATCH_FIELDS,
    BATCH_PATH,
    list_interrupts,
    person,
    resolve_batch,
    resolve_interrupt,
    rule_settlement,
    sweep,
)
from belt.records.journal import ServeLine, journal_headers
from belt.records.reports import Reporter, report_api
from belt.rules.approvals import Rules, load_rules
from belt.rules.policy import Verdict, load_policy
from belt.server.agent_routes import agent_routes, continue_forever
from belt.server.chat_routes import chat_routes
from belt.server.clock_route import clock_routes
from belt.server.connections import LIMITS, Connections, accept_errors
from belt.server.deciders import (
    HANDLER_TIMEOUT,
    Decider,
    HandlerFailed,
    HandlerPool,
    HandlerTimeout,
    PolicyDecider,
    allow_all,
    handler_decider,
    load_handler,
    policy_decider,
)
from belt.server.forward import Forwarder, check_forward_url
from belt.server.group_commit import GroupJournal, stamp_now
from belt.server.guard import RequestGuard, allowed_host_name
from belt.server.inspector import inspector_routes, is_page_shell
from belt.server.live import handler_traceback, loop_error, render_json, render_record
from belt.server.problems import (
    Endpoint,
    Problem,
    answering,
    belt_problem,
    envelope,
    http_problem,
    internal_problem,
    json_bytes,
    parse_json,
    read_json_object,
    receive_body,
)
from belt.server.profile_routes import profile_routes
from belt.server.resume import RESUME_INTERVAL, resume_forever
from belt.server.rule_settling import Settler
from belt.server.traced import decider_kind, served_hook
from belt.store import open_store
from belt.store.clock import VirtualClock, installed, parse_rfc3339, timestamp, utcnow
from belt.store.files import make_dirs
from belt.wire.catalogue import EVENTS
from belt.wire.dto import InterruptJSON
from belt.wire.platform import LifecycleHookPayload
from belt.wire.validate import IN_PROCESS_PREFIX, model_problems

if TYPE_CHECKING:
    from belt.emulator.agents import AgentFiles
    from belt.store import Store

ANSWERS_MAX_BYTES = 16 * 1024 * 1024
"""The most bytes of first answers kept for redeliveries; the oldest are let go, their ids kept,
so a redelivery of one is refused, never decided again."""
IDS_MAX = 100_000
"""The most webhook ids remembered; an unknown id signed before one forgotten is refused."""
ID_KEPT_MAX = 64  # the longest webhook id remembered as it is; a longer one is kept as its digest
FIXED_KEPT = 256
"""How many fixed verdicts (a policy's rules and default) a hook service keeps encoded."""


class Answered(TypedDict, total=False):
    """The fields of a journal line that say what a delivery was answered."""

    event: str
    tool: str
    decision: str
    reason: str
    rule: int
    warnings: list[str]
    injected: bool
    error: str


ANSWER_FIELDS = tuple(Answered.__annotations__)


@dataclass(frozen=True, slots=True)
class Answer:
    """What a signed delivery was answered, given again to its redeliveries."""

    status: int
    media_type: str | None
    body: bytes
    fields: Answered

    @classmethod
    def of(cls, record: ServeLine, response: Response) -> Answer:
        fields = cast(Answered, {key: record[key] for key in ANSWER_FIELDS if key in record})  # type: ignore[literal-required]
        return cls(record["status"], response.media_type, bytes(response.body), fields)

    def again(self, record: ServeLine) -> tuple[dict[str, object], Response]:
        """The answer for a redelivery, its line marked as one (no request: delivered once)."""
        record.update(self.fields)  # type: ignore[typeddict-item]
        record["redelivery"] = True
        response = Response(self.body, status_code=self.status, media_type=self.media_type)
        return json.loads(self.body), response


@dataclass(slots=True, eq=False)
class Delivery:
    """A verified ``webhook-id`` (a long one as its digest), its body's digest, its answer."""

    msg_id: str
    digest: bytes
    expires: float
    signed: int = 0  # its webhook-timestamp
    pending: bool = True
    answer: Answer | None = None
    answered: asyncio.Event | None = None  # made when a redelivery waits for the first answer


class ReplayGuard:
    """Verified webhook ids for the tolerance window, each with its body's digest and first
    answer: a redelivery gets that answer again; the same id with another body is a replay."""

    def __init__(
        self,
        window: int = TOLERANCE_SECONDS,
        answers_max_bytes: int = ANSWERS_MAX_BYTES,
        ids_max: int | None = None,
    ) -> None:
        self.window = window
        self.answers_max_bytes = answers_max_bytes
        self.ids_max = IDS_MAX if ids_max is None else ids_max
        self.forgotten_signed: int | None = None  # the latest timestamp of the ids forgotten
        # Ordered dicts: the oldest entry is found in constant time after many were popped.
        self._seen: OrderedDict[str, Delivery] = OrderedDict()
        self._kept: OrderedDict[str, int] = OrderedDict()  # ids with a kept answer: its size
        self._kept_bytes = 0

    def check(
        self, msg_id: str, digest: bytes, now: float, signed: int
    ) -> tuple[Delivery | None, bool]:
        """The delivery of ``msg_id`` and whether it is new; None: it may have been forgotten."""
        if len(msg_id) > ID_KEPT_MAX:  # 71 characters: no id remembered as it is looks like it
            msg_id = "sha256:" + hashlib.sha256(msg_id.encode()).hexdigest()
        # Ids arrive roughly in time order, so expired ones sit at the front.
        while self._seen and next(iter(self._seen.values())).expires <= now:
            oldest, _ = self._seen.popitem(last=False)
            self._kept_bytes -= self._kept.pop(oldest, 0)
        if (seen := self._seen.get(msg_id)) is not None:
            return seen, False
        if self.forgotten_signed is not None and signed <= self.forgotten_signed:
            return None, False
        if len(self._seen) >= self.ids_max:
            _, let_go = self._seen.popitem(last=False)
            self._kept_bytes -= self._kept.pop(let_go.msg_id, 0)
            self.forgotten_signed = max(self.forgotten_signed or 0, let_go.signed)
        # A signature stays acceptable for the tolerance either side of its timestamp.
        delivery = self._seen[msg_id] = Delivery(msg_id, digest, now + 2 * self.window, signed)
        return delivery, True

    def answered(self, delivery: Delivery, answer: Answer | None) -> None:
        """Keep a new delivery's answer; None forgets the id (a failed handler is asked again)."""
        delivery.pending = False
        if not self.forgotten(delivery):
            if answer is None:
                del self._seen[delivery.msg_id]
            else:
                delivery.answer = answer
                self._kept[delivery.msg_id] = len(answer.body)
                self._kept_bytes += len(answer.body)
                while self._kept_bytes > self.answers_max_bytes:
                    oldest = next(iter(self._kept))
                    self._kept_bytes -= self._kept.pop(oldest)
                    self._seen[oldest].answer = None
        if delivery.answered is not None:
            delivery.answered.set()

    async def first_answer(self, delivery: Delivery) -> Answer | None:
        """The first answer to ``delivery``, once given (None: not kept)."""
        if delivery.pending:
            if delivery.answered is None:
                delivery.answered = asyncio.Event()
            await delivery.answered.wait()
        return delivery.answer

    def forgotten(self, delivery: Delivery) -> bool:
        """Whether ``delivery``'s id was let go, so the message may be answered anew."""
        return self._seen.get(delivery.msg_id) is not delivery

    def seen(self) -> list[str]:
        """The ids remembered, oldest first."""
        return list(self._seen)

    def kept_bytes(self) -> int:
        """The bytes of first answers kept."""
        return self._kept_bytes


class HookService:
    """Handles hook requests: verify, validate, decide, answer, journal, report."""

    def __init__(
        self,
        *,
        decide: Decider,
        journal: Store | None,
        secret: str | None,
        report: Reporter | None,
    ) -> None:
        self.decide = decide
        self._decide_now = decide.now if isinstance(decide, PolicyDecider) else None
        self.journal = GroupJournal(journal, self.coming) if journal is not None else None
        self.deciding = 0  # hook requests between their start and their journal line
        self.connections: Connections | None = None  # belt's own server's, once a request shows
        self.key = secret_key(secret) if secret else None
        self.replays = ReplayGuard()
        self.report = report
        self.kind = decider_kind(decide)
        self._fixed: dict[int, tuple[Verdict, tuple[Answered, dict[str, object], Response]]]
        self._fixed = {}
        self._raw_headers: list[tuple[bytes, bytes]] | None = None  # the last request's,
        self._kept_headers: dict[str, str] = {}  # and as the journal keeps them

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """POST /hooks and POST /hooks/{name}: an ASGI route, which makes no Request."""
        try:
            response = await self.handle(scope, receive)
        except ClientDisconnect:
            raise  # nobody is left to answer (the guard says so in one line)
        except Exception as exc:  # a 500 problem, as for the other routes; raised on for the log
            await (await internal_problem(Request(scope), exc))(scope, receive, send)
            raise
        await response(scope, receive, send)

    def coming(self) -> int | None:
        """How many requests may still hand in a journal line (None: not belt's connections)."""
        return None if self.connections is None else self.deciding + self.connections.arriving

    async def handle(self, scope: Scope, receive: Receive) -> Response:
        """The answer to one hook request, once its journal line is written."""
        started = time.perf_counter()
        if self.connections is None and "state" in scope:
            self.connections = scope["state"].get(LIMITS)
        self.deciding += 1
        traced = time.time_ns() if tracing.on() else None
        record: ServeLine = {
            "kind": "hook",
            "at": stamp_now(),
            "route": scope["path"],
            "name": scope["path_params"].get("name"),
            "headers": self._journal_headers(scope["headers"]),
        }
        delivery: Delivery | Answer | None = None
        try:
            body = await receive_body(scope, receive)
            if self.key is not None:
                delivery = await self._verify(Headers(scope=scope), body, record)
            if isinstance(delivery, Answer):
                response_body, response = delivery.again(record)
                status = delivery.status
            else:
                response_body, response = await self._answer(body, record)
                status = 200
        except Problem as problem:
            response_body, response, status = problem.body(), problem.response(), problem.status
            record["error"] = problem.detail
        except BaseException:
            self.deciding -= 1
            if isinstance(delivery, Delivery):
                self.replays.answered(delivery, None)
            raise
        self.deciding -= 1
        record["status"] = status
        record["response"] = response_body
        if isinstance(delivery, Delivery):
            # A handler that failed (5xx) is asked again when the message comes again.
            kept = Answer.of(record, response) if status < 500 else None
            self.replays.answered(delivery, kept)
        record["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
        if traced is not None:
            served_hook(record, self.kind, traced)
        if self.journal is not None:  # answered once the line is written
            if (error := await self.journal.write(record)) is not None:
                record["journal_error"] = error
        if self.report is not None:
            self.report(record)  # type: ignore[arg-type]  # a ServeLine is a dict of its fields
        return response

    def _journal_headers(self, raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
        """A copy of ``journal_headers``, made anew only when they differ from the last ones."""
        if raw != self._raw_headers:
            self._kept_headers = journal_headers(raw)
            self._raw_headers = list(raw)
        return dict(self._kept_headers)

    async def _verify(self, headers: Headers, body: bytes, record: ServeLine) -> Delivery | Answer:
        """A signed request's new delivery, or a redelivery's first answer; 401, 409 (replay)."""
        assert self.key is not None
        try:
            msg_id = verify(self.key, headers, body)
        except SignatureError as exc:
            raise Problem(401, f"signature check failed: {exc.message}") from None
        record["webhook_id"] = msg_id
        digest = hashlib.sha256(body).digest()
        signed = int(headers.getlist("webhook-timestamp")[-1])  # the one verify read
        while True:
            delivery, new = self.replays.check(msg_id, digest, time.time(), signed)
            if delivery is None:
                raise Problem(
                    409,
                    f"webhook-id {msg_id} is not remembered and was signed no later than an id "
                    f"forgotten past {self.replays.ids_max:,}; it may be a replay (sign it anew)",
                )
            if new:
                return delivery
            if delivery.digest != digest:
                raise Problem(
                    409, f"webhook-id {msg_id} was already delivered with another body (replay)"
                )
            answer = await self.replays.first_answer(delivery)
            if answer is not None:
                return answer
            if not self.replays.forgotten(delivery):
                raise Problem(
                    409, f"webhook-id {msg_id} was already delivered; its answer is no longer kept"
                )
            # The first delivery's handler failed: this one is answered anew.

    async def _answer(self, body: bytes, record: ServeLine) -> tuple[dict[str, object], Response]:
        document = parse_json(body)
        record["request"] = document
        try:
            payload = LifecycleHookPayload.model_validate(document)
        except ValidationError as exc:
            problems = model_problems(exc)
            raise Problem(
                422, "not a LifecycleHookPayload: " + "; ".join(problems), errors=problems
            ) from None
        data = payload.data or {}
        record["event"] = payload.event.value
        if isinstance(data.get("tool"), str):
            record["tool"] = data["tool"]
        try:
            now = self._decide_now
            verdict = now(payload) if now is not None else await self.decide(payload)
        except (HandlerTimeout, HandlerFailed) as exc:
            raise Problem(504 if isinstance(exc, HandlerTimeout) else 500, str(exc)) from None
        except Exception as exc:
            said = message_of(exc)  # a handler's own exception: its message may raise too
            detail = f"the handler raised {type(exc).__name__}" + (f": {said}" if said else "")
            raise Problem(500, detail) from None
        fields, response_body, response = self._encoded(verdict)
        record.update(fields)  # type: ignore[typeddict-item]
        return response_body, response

    def _encoded(self, verdict: Verdict) -> tuple[Answered, dict[str, object], Response]:
        """A verdict's journal fields, response JSON and HTTP response (kept for fixed ones:
        none of the three is changed after, and a response may be sent any number of times)."""
        if verdict.fixed:
            kept = self._fixed.get(id(verdict))
            if kept is not None and kept[0] is verdict:
                return kept[1]
        answer = verdict.response
        fields: Answered = {"decision": answer.effective_decision().value}
        if answer.reason:
            fields["reason"] = answer.reason
        if verdict.rule is not None:
            fields["rule"] = verdict.rule
        if verdict.warnings:
            fields["warnings"] = list(verdict.warnings)
        if answer.injected:
            fields["injected"] = True
        response_body = answer.model_dump(mode="json", exclude_none=True)
        response = Response(json_bytes(response_body), media_type="application/json")
        made = fields, response_body, response
        if verdict.fixed:
            if len(self._fixed) >= FIXED_KEPT:
                self._fixed.clear()
            self._fixed[id(verdict)] = (verdict, made)  # the verdict kept: its id stays its own
        return made


def create_app(
    *,
    decide: Decider | None = None,
    store: Store | None = None,
    secret: str | None = None,
    token: str | None = None,
    sweep_interval: float = 60.0,
    report: Reporter | None = None,
    handler_pool: HandlerPool | None = None,
    on_loop_error: Callable[[str], None] | None = None,
    resume: bool = False,
    approvals: Rules | None = None,
    model: Path | None = None,
    agents: Path | None = None,
    allow_hosts: Iterable[str] = (),
    in_process: Iterable[str] = (),
    clock: datetime | None = None,
) -> Starlette:
    """The ASGI app of ``belt serve``; ``store=None`` uses the state directory's.

    ``in_process`` and the ``agents`` files' ``py:`` handlers are the only code a replay may call
    (no request names code). ``model`` and ``agents`` are checked here, before anything is served.
    """
    names = [allowed_host_name(name) for name in allow_hosts]
    the_store = store if store is not None else open_store()
    agent_files = load_agent_files(agents) if agents is not None else None
    script = load_model_script(model) if model is not None else None
    emulator = Emulator(the_store, model=script, agents=agent_files, report=report)
    hooks = HookService(decide=decide or allow_all, journal=the_store, secret=secret, report=report)
    api = PlatformApi(the_store, report, token=bool(token))
    virtual = VirtualClock(clock) if clock is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        """The virtual clock, a decider's connections and the background loops."""
        if on_loop_error is not None:
            asyncio.get_running_loop().set_exception_handler(accept_errors(on_loop_error))
        async with contextlib.AsyncExitStack() as opened:
            if virtual is not None:
                opened.enter_context(installed(virtual))
            if isinstance(decide, contextlib.AbstractAsyncContextManager):  # --forward-to's client
                await opened.enter_async_context(decide)
            loops = [api.sweep_forever(sweep_interval)] if sweep_interval > 0 else []
            if resume:
                loops.append(resume_forever(the_store, report, RESUME_INTERVAL))
            if approvals is not None:
                loops.append(Settler(the_store, approvals, report).forever())
            loops.append(continue_forever(emulator))
            tasks = [asyncio.create_task(loop) for loop in loops]
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)  # each waited for
                await run_in_threadpool(emulator.close)

    routes = [
        *platform_routes(hooks, api, health_check(the_store, handler_pool)),
        *clock_routes(virtual, api.sweep_once),
        *profile_routes(the_store, report),
        *chat_routes(the_store),
        *inspector_routes(
            the_store,
            decide=hooks.decide,
            in_process=started_handlers(in_process, agent_files),
            report=report,
        ),
        *agent_routes(emulator),
    ]
    return ServeApp(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: http_problem, Exception: internal_problem},
        hooks=hooks,
        guard=partial(
            RequestGuard,
            token=token,
            allow_hosts=names,
            is_open=lambda path: path == "/healthz" or is_page_shell(path),
            report=report,
        ),
    )


class ServeApp(Starlette):
    """Starlette's app with ``RequestGuard`` in front of everything; behind it, hook POSTs skip
    the router (their routes stay there for a 405 and a root path)."""

    def __init__(
        self, *, hooks: HookService, guard: Callable[[ASGIApp], RequestGuard], **options: Any
    ) -> None:
        super().__init__(**options)
        self.hooks = hooks
        self.front = guard(self.behind_guard)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = self
        await self.front(scope, receive, send)

    async def behind_guard(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a hook request; route the rest."""
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            path = scope["path"]
            if path == "/hooks" or path.startswith("/hooks/"):
                scope["path_params"] = {"name": path[len("/hooks/") :]} if path != "/hooks" else {}
                await self.hooks(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def platform_routes(hooks: HookService, api: PlatformApi, health: Endpoint) -> list[Route]:
    """The platform's routes: the hooks, its interrupt and chat API, and ``/healthz``."""
    return [
        Route("/healthz", health, methods=["GET"]),
        Route("/hooks", hooks, methods=["POST"]),
        Route("/hooks/{name:path}", hooks, methods=["POST"]),
        Route("/agent-runs/{run_id}/interrupts", answering(api.list_interrupts), methods=["GET"]),
        Route("/interrupts/{interrupt_id}/resolve", api.resolve, methods=["POST"]),
        Route(
            "/_belt/interrupts/{interrupt_id}/resolve",
            partial(api.resolve, by_rule=True),
            methods=["POST"],
        ),
        Route(BATCH_PATH, api.batch_terms, methods=["GET"]),
        Route(BATCH_PATH, api.resolve_batch, methods=["POST"]),
        Route("/agents/hook-events", api.hook_events, methods=["GET"]),
        Route("/chats/{chat_id}/settings", api.chat_settings, methods=["POST"]),
    ]


def started_handlers(in_process: Iterable[str], agent_files: AgentFiles | None) -> frozenset[str]:
    """The ``py:`` handlers of ``--handler`` and the ``--agents`` files (all a replay may call)."""
    handlers = {spec.strip().removeprefix(IN_PROCESS_PREFIX) for spec in in_process}
    for agent in agent_files.agents.values() if agent_files is not None else ():
        handlers |= {
            str(hook.handler).removeprefix(IN_PROCESS_PREFIX)
            for hook in agent.hooks
            if hook.handler is not None and is_in_process(str(hook.handler))
        }
    return frozenset(handlers)


ENV_PREFIX = "BELT_SERVE_"
REPORTERS: dict[str, Reporter] = {"lines": render_record, "json": render_json}
"""How each ``REPORT`` mode (``--report``) shows a line (``none``: not at all)."""


def create_app_from_env() -> Starlette:
    """The app of ``belt serve`` from ``BELT_SERVE_*`` (docs/serve.md): an ASGI app factory."""
    return create_app_from_settings(env_settings())


def env_settings() -> dict[str, str]:
    """The ``BELT_SERVE_*`` variables that are set, named without the prefix."""
    return {
        key.removeprefix(ENV_PREFIX): value
        for key, value in os.environ.items()
        if key.startswith(ENV_PREFIX) and value
    }


def create_app_from_settings(env: dict[str, str]) -> Starlette:
    """The app of ``belt serve`` from settings named as the variables, without the prefix."""
    env = {key: value for key, value in env.items() if value}
    decide: Decider | None = None
    pool: HandlerPool | None = None
    if env.get("POLICY"):
        decide = policy_decider(load_policy(env["POLICY"]))
    elif env.get("HANDLER"):
        pool = HandlerPool()
        decide = handler_decider(
            load_handler(env["HANDLER"]),
            timeout=float(env.get("HANDLER_TIMEOUT", HANDLER_TIMEOUT)),
            pool=pool,
            on_raise=handler_traceback if env.get("VERBOSE") == "1" else None,
        )
    elif env.get("FORWARD_TO"):
        decide = Forwarder(check_forward_url(env["FORWARD_TO"]), secret=env.get("SECRET"))
    return create_app(
        decide=decide,
        secret=env.get("SECRET"),
        token=env.get("TOKEN"),
        sweep_interval=float(env.get("SWEEP_INTERVAL", "60")),
        report=REPORTERS.get(env.get("REPORT", "none")),
        handler_pool=pool,
        on_loop_error=loop_error,
        resume=env.get("RESUME") == "1",
        approvals=load_rules(env["APPROVALS"]) if env.get("APPROVALS") else None,
        model=Path(env["MODEL"]) if env.get("MODEL") else None,
        agents=Path(env["AGENTS"]) if env.get("AGENTS") else None,
        allow_hosts=[name for name in env.get("ALLOW_HOST", "").split(",") if name.strip()],
        in_process=[env["HANDLER"]] if env.get("HANDLER") else [],
        clock=parse_rfc3339(env["CLOCK"], "CLOCK") if env.get("CLOCK") else None,
    )


def health_check(store: Store, pool: HandlerPool | None) -> Endpoint:
    """GET /healthz: 200, or a 503 saying the handler pool is full or the store unwritable."""

    def store_failure() -> str | None:
        probe = store.root / f".healthz.tmp.{os.getpid()}"
        try:
            make_dirs(store.root)
            probe.write_bytes(b"ok")
            probe.unlink()
        except OSError as exc:
            return f"the store at {store.root} cannot be written ({exc.strerror or exc})"
        return None

    async def check(request: Request) -> Response:
        problems = []
        if pool is not None and pool.saturated():
            problems.append(
                f"the handler pool is saturated ({pool.busy} of {pool.workers} "
                "threads are running handler calls)"
            )
        if failure := await run_in_threadpool(store_failure):
            problems.append(failure)
        if problems:
            return Problem(503, "; ".join(problems)).response()
        return Response('{"status":"ok"}', media_type="application/json")

    return check


class PlatformApi:
    """The platform's interrupt, event-catalogue and chat-settings routes, and belt's batch
    route; ``token``: every request carried the bearer token (a settlement records that)."""

    def __init__(self, store: Store, report: Reporter | None, *, token: bool = False) -> None:
        self.store = store
        self.report = report
        self.token = token

    async def _call(self, func: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return await run_in_threadpool(func, store=self.store, **kwargs)
        except BeltError as exc:
            raise belt_problem(exc) from None

    async def _reported(self, action: str, target: str, work: Awaitable[Any]) -> Response:
        """``work``'s data (with the target and detail of its line) in the envelope, or its
        problem; either told as an API line."""
        try:
            data, done, detail = await work
        except (Problem, BeltError) as exc:
            problem = exc if isinstance(exc, Problem) else belt_problem(exc)
            report_api(self.report, action, target, problem.status, problem.detail)
            return problem.response()
        report_api(self.report, action, done, 200, detail)
        return envelope(data)

    async def list_interrupts(self, request: Request) -> list[InterruptJSON]:
        """GET /agent-runs/{run_id}/interrupts (``?status=pending`` keeps the pending ones)."""
        status = request.query_params.get("status")
        items = await self._call(
            list_interrupts, run_id=request.path_params["run_id"], include_settled=True
        )
        return [item for item in items if not status or item.get("status") == status]

    async def resolve(self, request: Request, by_rule: bool = False) -> Response:
        """POST /interrupts/{id}/resolve with ``{"decision": "allow"|"deny", "data": ...}``
        (``by_rule``: /_belt/..., with ``"by"``, the rule that settled it)."""
        interrupt_id = request.path_params["interrupt_id"]

        async def work() -> tuple[object, str, str]:
            body = await read_json_object(request)
            by = rule_settlement(body, token=self.token) if by_rule else None
            dto = await self._call(
                resolve_interrupt,
                interrupt_id=interrupt_id,
                decision=body.get("decision"),
                data=body.get("data"),
                by=by or person("api", token=self.token),
            )
            return dto, interrupt_id, str(body.get("decision"))

        return await self._reported("resolve", interrupt_id, work())

    async def batch_terms(self, request: Request) -> Response:
        """GET /_belt/interrupts/batch: batches are all or nothing; the fields a digest covers."""
        return envelope({"atomic": True, "fields": list(BATCH_FIELDS)})

    async def resolve_batch(self, request: Request) -> Response:
        """POST /_belt/interrupts/batch with ``{"ids", "digest", "decision", "data"}``: all or
        none (409 naming the gate settled meanwhile, or a digest not theirs)."""

        async def work() -> tuple[object, str, str]:
            body = await read_json_object(request)
            ids, digest = body.get("ids"), body.get("digest")
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
                raise Problem(
                    422, f"ids: expected a non-empty array of interrupt ids, got {describe(ids)}"
                )
            if not isinstance(digest, str) or not digest.startswith("sha256:"):
                raise Problem(
                    422, f"digest: expected sha256:<hex> of the gates shown, got {describe(digest)}"
                )
            result = await self._call(
                resolve_batch,
                interrupt_ids=ids,
                digest=digest,
                decision=body.get("decision"),
                data=body.get("data"),
                by=person("api", token=self.token),
            )
            return result, str(result["batch"]), str(body.get("decision"))

        return await self._reported("batch", "interrupts", work())

    async def hook_events(self, request: Request) -> Response:
        """GET /agents/hook-events: the event catalogue (HookEventDefinition[])."""
        return envelope([e.definition() for e in EVENTS.values()])

    async def chat_settings(self, request: Request) -> Response:
        """POST /chats/{chat_id}/settings with ``{"disable_hooks": bool}``."""
        chat_id = request.path_params["chat_id"]

        async def work() -> tuple[object, str, str]:
            disable = (await read_json_object(request)).get("disable_hooks")
            if not isinstance(disable, bool):
                raise Problem(422, f"disable_hooks: expected a boolean, got {describe(disable)}")
            settings = await self._call(set_chat_settings, chat_id=chat_id, disable_hooks=disable)
            return settings, chat_id, f"disable_hooks={str(disable).lower()}"

        return await self._reported("chat settings", chat_id, work())

    async def sweep_once(self) -> list[InterruptJSON]:
        """Settle overdue gates with their default resolution."""
        settled: list[InterruptJSON] = await self._call(sweep)
        if settled and self.report is not None:
            done = [{"id": i.get("id"), "resolution": i.get("resolution")} for i in settled]
            self.report({"kind": "sweep", "at": timestamp(utcnow()), "settled": done})
        return settled

    async def sweep_forever(self, interval: float) -> None:
        """Sweep now and every ``interval`` seconds until cancelled; a failure is reported."""
        while True:
            try:
                await self.sweep_once()
            except Problem as problem:
                report_api(self.report, "sweep", "-", problem.status, problem.detail)
            except Exception as exc:
                report_api(self.report, "sweep", "-", 500, f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(interval)
