"""Running the app under uvicorn: listening checks, the socket, and a clean stop.

At Ctrl-C or SIGTERM the requests still open get ``--grace`` seconds; those uvicorn then cancels
``StopCutOff`` answers 503 on one live line (a hook's journalled), in place of a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from multiprocessing import resource_tracker
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import LOGGING_CONFIG
from uvicorn.supervisors import Multiprocess

from belt.deliveries.effects import url_host
from belt.errors import BeltError, UsageError
from belt.outgoing import tracing
from belt.outgoing.signing import new_secret, secret_key
from belt.records import serves
from belt.records.journal import ServeLine, journal_headers
from belt.records.reports import Reporter, report_api
from belt.server.app import ENV_PREFIX, REPORTERS, create_app_from_settings, env_settings
from belt.server.connections import (
    BACKLOG,
    IDLE_TIMEOUT,
    Connections,
    GuardedConnection,
    SlowClientGuard,
    connection_cap,
    server_stopping,
)
from belt.server.deciders import HANDLER_TIMEOUT
from belt.server.group_commit import append_one
from belt.server.guard import STOPPING, allowed_host_name
from belt.server.guard import is_loopback_name as is_loopback
from belt.server.live import listening
from belt.server.problems import Problem, parse_json
from belt.server.stopping import Terminated
from belt.server.traced import TracedRequests
from belt.store import open_store
from belt.store.clock import timestamp


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    # With the protocol named, asyncio sets TCP_NODELAY on accepted connections (not Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bare, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise BeltError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="choose another --port, or stop what is listening there",
        ) from None
    sock.setblocking(False)
    return sock


MIN_SWEEP_INTERVAL = 0.1
SHUTDOWN_GRACE = 1.0
"""Seconds the requests still open at a stop get to end before they are cut off (``--grace``)."""


def decider_label(policy: Path | None, handler: str | None, forward_to: str | None) -> str:
    """How the ready line names what decides hooks (a forwarding URL by its host only)."""
    if policy is not None:
        return f"policy {policy}"
    if handler is not None:
        return f"handler {handler}"
    if forward_to is not None:
        return f"forwarding to {url_host(forward_to)}"
    return "allow all"


def serve(
    *,
    host: str,
    port: int,
    policy: Path | None = None,
    handler: str | None = None,
    secret: str | None = None,
    token: str | None = None,
    sweep_interval: float = 60.0,
    workers: int = 1,
    handler_timeout: float = HANDLER_TIMEOUT,
    max_connections: int | None = None,
    json_: bool = False,
    resume: bool = False,
    approvals: Path | None = None,
    forward_to: str | None = None,
    model: Path | None = None,
    agents: Path | None = None,
    allow_host: list[str] | None = None,
    clock: datetime | None = None,
    verbose: bool = False,
    grace: float = SHUTDOWN_GRACE,
    otlp: str | None = None,
    trace: Path | None = None,
    open_: bool = False,
) -> None:
    """Check the options, load the decider, listen, and serve until Ctrl-C or SIGTERM."""
    if sum(option is not None for option in (policy, handler, forward_to)) > 1:
        raise UsageError(
            "--policy, --handler and --forward-to each decide hooks: give one, not both"
        )
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port number (0-65535; 0 picks a free one)")
    if token is not None and (
        not token or not token.isascii() or not token.isprintable() or " " in token
    ):
        raise UsageError(
            "--token must be printable ASCII without spaces",
            hint="a client sends it as 'Authorization: Bearer TOKEN'; blanks cannot be sent",
        )
    if not is_loopback(host) and not token:
        raise UsageError(
            f"refusing to listen on {host} without --token",
            hint="a host other than loopback is reachable by others; set --token TOKEN "
            "(or BELT_SERVE_TOKEN)",
        )
    hosts = [allowed_host_name(name) for name in allow_host or []]
    if not (sweep_interval == 0 or MIN_SWEEP_INTERVAL <= sweep_interval < math.inf):
        raise UsageError(
            f"--sweep-interval must be 0 (off) or a number of seconds from {MIN_SWEEP_INTERVAL:g}"
        )
    if workers < 1:
        raise UsageError("--workers must be 1 or more")
    if not math.isfinite(handler_timeout) or not handler_timeout > 0:
        raise UsageError("--handler-timeout must be a number of seconds above 0")
    if max_connections is not None and max_connections < 1:
        raise UsageError("--max-connections must be 1 or more")
    if not math.isfinite(grace) or not grace >= 0:
        raise UsageError("--grace must be a number of seconds from 0")
    if clock is not None and workers > 1:
        raise UsageError(
            "--clock runs one virtual clock in one process: it cannot be shared by --workers",
            hint="serve on a virtual clock with one worker",
        )
    made_secret = new_secret() if secret == "new" else None
    secret = made_secret or secret
    if secret:
        secret_key(secret)
    settings = {
        "POLICY": str(policy or ""),
        "HANDLER": handler or "",
        "SECRET": secret or "",
        "TOKEN": token or "",
        "SWEEP_INTERVAL": repr(sweep_interval),
        "HANDLER_TIMEOUT": repr(handler_timeout),
        "REPORT": "json" if json_ else "lines",
        "RESUME": "1" if resume else "",
        "APPROVALS": str(approvals or ""),
        "FORWARD_TO": forward_to or "",
        "MODEL": str(model or ""),
        "AGENTS": str(agents or ""),
        "ALLOW_HOST": ",".join(hosts),
        "CLOCK": timestamp(clock) if clock is not None else "",
        "VERBOSE": "1" if verbose else "",
        "GRACE": repr(grace),
        "MAX_CONNECTIONS": str(connection_cap(max_connections)),
        "OTLP": otlp or "",
        "TRACE": str(trace or ""),
    }
    app = create_served_app(settings)  # refuses a bad decider, model or agent file before binding
    if workers > 1:  # for the factory each worker runs
        for key, value in settings.items():
            os.environ[ENV_PREFIX + key] = value
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn_config(app, workers=workers, grace=grace)
    url = f"http://{serves.bracketed(host)}:{bound_port}"
    answering = [] if token else hosts  # answered without a token
    extras = [
        decider_label(policy, handler, forward_to),
        secret and "signed requests only",
        token and "bearer token required",
        answering and f"also answering {', '.join(answering)}",
        f"sweep every {sweep_interval:g} s" if sweep_interval else "sweep off",
        config.workers > 1 and f"{config.workers} workers",
        resume and "runs continue when their gates are settled",
        approvals and f"gates settled by {approvals}",
        f"model {model}" if model else "plain model",
        agents and f"agents {agents}",
        clock and f"virtual clock at {settings['CLOCK']}, moved by POST /_belt/clock",
    ]
    shown = ", ".join(str(extra) for extra in extras if extra)
    # Only a secret belt made is printed, never one the user gave.
    told = f"; signing secret {made_secret}" if made_secret else ""
    ready = (
        f"belt serve listening on {url} ({shown}): hooks {url}/hooks, API {url}, "
        f"inspector {url}/{told}; Ctrl-C stops"
    )
    record: serves.ServeFile = {
        "url": url,
        "host": host,
        "port": bound_port,
        "pid": os.getpid(),
        "started_at": timestamp(datetime.now(UTC)),
        "workers": config.workers,
        "signed": bool(secret),
        "token": bool(token),
    }
    try:
        running_file: Path | None = serves.announce(record)
    except BeltError:  # the state directory cannot take it
        running_file = None
    try:
        run_until_stopped(
            config,
            sock,
            lambda: listening(ready, answering, bound_port, f"{url}/" if open_ else None),
        )
    finally:
        if running_file is not None:
            serves.withdraw(running_file)


def create_served_app(settings: dict[str, str]) -> ASGIApp:
    """The app of ``belt serve`` from ``settings``, with the middleware it is served behind."""
    report: Reporter | None = REPORTERS.get(settings.get("REPORT") or "none")
    grace = float(settings.get("GRACE") or SHUTDOWN_GRACE)
    cap = settings.get("MAX_CONNECTIONS")
    app = create_app_from_settings(settings)
    served: ASGIApp = StopCutOff(app, grace=grace, report=report)
    if tracing.on():
        served = TracedRequests(served, app.routes)
    return SlowClientGuard(served, Connections(max_connections=int(cap) if cap else None))


def create_served_app_from_env() -> ASGIApp:
    """``create_served_app`` from ``BELT_SERVE_*``, with tracing: each ``--workers`` process's."""
    settings = env_settings()
    trace_file = settings.get("TRACE")
    tracing.start(otlp=settings.get("OTLP"), trace_file=Path(trace_file) if trace_file else None)
    return create_served_app(settings)


HOOK_ROUTE = "/hooks"
STOP_WRITE = 0.5  # seconds a request cut off at the stop may take to send its 503


class StopCutOff:
    """ASGI middleware: a request marked ``STOPPING`` whose task is cancelled is answered 503,
    told and journalled; any other cancellation goes on."""

    def __init__(self, app: ASGIApp, *, grace: float, report: Reporter | None) -> None:
        self.app = app
        self.grace = grace
        self.report = report

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; answer it 503 if the stop cuts it off."""
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                marking_at_the_stop()
            await self.app(scope, receive, send)
            return
        started = time.time()
        chunks: list[bytes] = []
        ended: list[bool] = []

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    ended.append(True)
            return message

        try:
            await self.app(scope, receiving, send)
        except asyncio.CancelledError:
            if not scope.get(STOPPING):
                raise
            await self._cut(scope, send, b"".join(chunks) if ended else None, started)

    async def _cut(self, scope: Scope, send: Send, body: bytes | None, started: float) -> None:
        """Say and journal that the request was not answered, and answer it 503."""
        path = str(scope.get("path", ""))
        hook = scope.get("method") == "POST" and (
            path == HOOK_ROUTE or path.startswith(HOOK_ROUTE + "/")
        )
        waiting = "while the handler was still deciding" if hook else "before its answer"
        if body is None:
            waiting = "while its body was still arriving"
        detail = f"not answered: the server stopped, and its {self.grace:g} s grace ended {waiting}"
        if hook:
            self._journal(scope, path, body, detail, started)
        else:
            report_api(self.report, "cut off", f"{scope.get('method', '-')} {path}", 503, detail)
        await self._answer(scope, send, detail)

    def _journal(
        self, scope: Scope, path: str, body: bytes | None, detail: str, started: float
    ) -> None:
        name = path[len(HOOK_ROUTE) + 1 :] if path.startswith(HOOK_ROUTE + "/") else None
        record: ServeLine = {
            "kind": "hook",
            "at": timestamp(datetime.fromtimestamp(started, UTC)),
            "route": path,
            "name": name,
            "headers": journal_headers(list(scope.get("headers", []))),
        }
        with contextlib.suppress(Problem):  # not JSON: the journal keeps the route and headers
            if body:
                record["request"] = parse_json(body)
        record["status"] = 503
        record["error"] = detail
        record["duration_ms"] = round((time.time() - started) * 1000, 3)
        if (error := append_one(open_store(), record)) is not None:
            record["journal_error"] = error
        if self.report is not None:
            self.report(dict(record))

    @staticmethod
    async def _answer(scope: Scope, send: Send, detail: str) -> None:
        """Send the 503, or end a response begun; a client gone or not reading is let go."""
        response = Problem(503, detail).response({"connection": "close"})

        async def nothing() -> Message:
            return {"type": "http.disconnect"}

        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(STOP_WRITE):
                try:
                    await response(scope, nothing, send)
                except RuntimeError:  # the response had begun: end it where it is
                    with contextlib.suppress(RuntimeError):
                        await send({"type": "http.response.body", "body": b""})


def marking_at_the_stop() -> None:
    """From now on SIGINT and SIGTERM, after uvicorn's handlers, mark the requests in progress.

    Called at the lifespan's start, once uvicorn has taken both signals (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        stop = signal.getsignal(sig)
        if callable(stop):

            def marking(signum: int, frame: FrameType | None, stop: Any = stop) -> None:
                stop(signum, frame)
                loop.call_soon_threadsafe(server_stopping)

            signal.signal(sig, marking)


class QuietStop(logging.Filter):
    """A filter of ``uvicorn.error``: its lines on the tasks the stop cancels (StopCutOff's, and
    the lifespan's when a second Ctrl-C skips its shutdown: Starlette reports that cancellation
    as a failed shutdown, in a traceback's text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for what the stop's own lines tell."""
        text = str(record.msg)
        if text.startswith("Cancel %s running task(s)") or text.rstrip().endswith(
            "asyncio.exceptions.CancelledError"
        ):
            return False
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError)


def uvicorn_config(app: Any, *, workers: int, grace: float = SHUTDOWN_GRACE) -> Any:
    """uvicorn's configuration of ``app`` (the factory, for workers), on GuardedConnection."""
    log_config = copy.deepcopy(LOGGING_CONFIG)  # with QuietStop on its error logger
    log_config["filters"] = {"quiet_stop": {"()": f"{__name__}.QuietStop"}}
    log_config["loggers"]["uvicorn.error"]["filters"] = ["quiet_stop"]
    config = uvicorn.Config(
        f"{__name__}:create_served_app_from_env" if workers > 1 else app,
        factory=workers > 1,
        workers=workers,
        log_config=log_config,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
        server_header=False,
        http=GuardedConnection,
        timeout_keep_alive=IDLE_TIMEOUT,
        backlog=BACKLOG,
    )
    # uvicorn types it as int; asyncio.timeout takes it as float seconds.
    config.timeout_graceful_shutdown = grace  # type: ignore[assignment]
    return config


def run_until_stopped(config: Any, sock: socket.socket, on_ready: Callable[[], None]) -> None:
    """Serve on ``sock`` until Ctrl-C or SIGTERM, raised again as KeyboardInterrupt or
    Terminated; ``on_ready`` once a signal would stop the server gracefully."""
    try:
        if config.workers > 1:
            supervisor = Supervisor(config, sockets=[sock])  # its signal handlers are set now
            on_ready()
            supervisor.run()
            if supervisor.stopped_by is not None:
                raise KeyboardInterrupt if supervisor.stopped_by == signal.SIGINT else Terminated
        else:
            QuickStopServer(config, on_ready).run(sockets=[sock])
    finally:
        sock.close()


class QuickStopServer(uvicorn.Server):
    """uvicorn's public ``Server``, which stops as soon as a signal asks (not at its next tick)
    and calls ``on_ready`` once started; a single process's (workers run uvicorn's own)."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_ready = on_ready
        self.wake: Callable[[], object] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's start-up, then ``on_ready`` unless a signal already asked it to stop."""
        await super().startup(sockets)
        if not self.should_exit:
            self.on_ready()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's handling of SIGINT and SIGTERM, then its main loop woken."""
        super().handle_exit(sig, frame)
        if self.wake is not None:
            self.wake()

    async def main_loop(self) -> None:
        """uvicorn's main loop of ticks, whose wait between ticks ends when ``wake`` is called."""
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        self.wake = lambda: loop.call_soon_threadsafe(woken.set)  # from a signal handler
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864_000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK):
                    await woken.wait()
            should_exit = await self.on_tick(counter)


TICK = 0.1  # seconds between the ticks of uvicorn's main loop


class Supervisor(Multiprocess):
    """uvicorn's public ``Multiprocess``, which stops at once on Ctrl-C or SIGTERM (a second
    kills the workers) and says which; its workers never see a terminal's Ctrl-C."""

    def __init__(self, config: Any, sockets: list[socket.socket]) -> None:
        super().__init__(config, sockets)
        self.stopped_by: int | None = None
        # uvicorn's own handlers wait for its loop's next look (0.5 s): these wake it at once.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.stop)

    def stop(self, signum: int, frame: FrameType | None) -> None:
        """Stop the workers (gracefully; at once if already stopping)."""
        if self.stopped_by is not None:
            for process in self.processes:
                process.kill()
            return
        self.stopped_by = signum
        self.should_exit.set()

    # A process inherits its starter's signal mask: workers start with Ctrl-C held (not one
    # uvicorn starts in place of one that died: that happens among slow health checks).
    def init_processes(self) -> None:
        """Start the workers, as uvicorn does."""
        with ctrl_c_held():
            super().init_processes()

    def handle_ttin(self) -> None:
        with ctrl_c_held():
            super().handle_ttin()


@contextlib.contextmanager
def ctrl_c_held() -> Iterator[None]:
    """SIGINT blocked in this thread for the block, so the processes it starts never see one."""
    resource_tracker.ensure_running()  # it unblocks SIGINT as it starts: started first
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
