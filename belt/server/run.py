"""Running the app under uvicorn: listening checks, the socket, and a clean stop on Ctrl-C."""

from __future__ import annotations

import ipaddress
import math
import os
import socket
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from belt.effects import url_host
from belt.errors import BeltError, UsageError
from belt.server.app import ENV_PREFIX, create_app_from_settings
from belt.server.deciders import HANDLER_TIMEOUT
from belt.server.guard import (
    BACKLOG,
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    IDLE_TIMEOUT,
    LOOPBACK_NAMES,
    allowed_host_name,
    connection_cap,
)
from belt.signing import secret_key
from belt.store.clock import timestamp


def is_loopback(host: str) -> bool:
    """True for a host that only this machine can reach."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    # With the protocol named, asyncio sets TCP_NODELAY on accepted connections (it skips
    # sockets whose proto is 0), so a response's head and body are not held by Nagle.
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
SHUTDOWN_GRACE = 3
"""Seconds the requests still going at Ctrl-C get to end before they are cut."""


def check_options(
    *,
    host: str,
    port: int,
    policy: Path | None,
    handler: str | None,
    token: str | None,
    sweep_interval: float,
    workers: int,
    handler_timeout: float,
    max_connections: int | None,
    forward_to: str | None = None,
    allow_hosts: list[str] | None = None,
) -> None:
    """Refuse options that could not serve anyone, before anything is loaded or bound."""
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
    for name in allow_hosts or []:
        allowed_host_name(name)
    if not math.isfinite(sweep_interval) or (
        sweep_interval != 0 and not sweep_interval >= MIN_SWEEP_INTERVAL
    ):
        raise UsageError(
            f"--sweep-interval must be 0 (off) or a number of seconds from {MIN_SWEEP_INTERVAL:g}"
        )
    if workers < 1:
        raise UsageError("--workers must be 1 or more")
    if not math.isfinite(handler_timeout) or not handler_timeout > 0:
        raise UsageError("--handler-timeout must be a number of seconds above 0")
    if max_connections is not None and max_connections < 1:
        raise UsageError("--max-connections must be 1 or more")


def decider_label(policy: Path | None, handler: str | None, forward_to: str | None) -> str:
    """How the start-up line names what decides hooks (a forwarding URL by its host only)."""
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
    report_mode: str = "lines",
    resume: bool = False,
    forward_to: str | None = None,
    model: Path | None = None,
    agents: Path | None = None,
    allow_hosts: list[str] | None = None,
    on_listening: Callable[[dict[str, Any]], None] | None = None,
    clock: datetime | None = None,
    verbose: bool = False,
) -> None:
    """Check the options, load the decider, listen, and serve until interrupted.

    ``verbose`` (``belt -v serve``) prints the traceback of each exception a handler raises.

    ``report_mode`` is how each request is shown: ``lines`` (human), ``json`` or ``none``. With
    ``workers`` above 1, uvicorn runs that many processes of ``create_app_from_env`` on one
    socket, each configured from the same ``BELT_SERVE_*`` variables.
    """
    check_options(
        host=host,
        port=port,
        policy=policy,
        handler=handler,
        token=token,
        sweep_interval=sweep_interval,
        workers=workers,
        handler_timeout=handler_timeout,
        max_connections=max_connections,
        forward_to=forward_to,
        allow_hosts=allow_hosts,
    )
    if clock is not None and workers > 1:
        raise UsageError(
            "--clock runs one virtual clock in one process: it cannot be shared by --workers",
            hint="serve on a virtual clock with one worker",
        )
    if secret:
        secret_key(secret)
    settings = {
        "POLICY": str(policy) if policy is not None else "",
        "HANDLER": handler or "",
        "SECRET": secret or "",
        "TOKEN": token or "",
        "SWEEP_INTERVAL": repr(sweep_interval),
        "HANDLER_TIMEOUT": repr(handler_timeout),
        "REPORT": report_mode,
        "RESUME": "1" if resume else "",
        "FORWARD_TO": forward_to or "",
        "MODEL": str(model) if model is not None else "",
        "AGENTS": str(agents) if agents is not None else "",
        "ALLOW_HOST": ",".join(allowed_host_name(name) for name in allow_hosts or []),
        "CLOCK": timestamp(clock) if clock is not None else "",
        "VERBOSE": "1" if verbose else "",
    }
    # Loading here (also when workers will load again) refuses a bad policy, handler, model
    # script or agent file with its message before the port is taken.
    app = create_app_from_settings(settings)
    if workers > 1:
        # Worker processes build the app from the factory, which reads these.
        for key, value in settings.items():
            os.environ[ENV_PREFIX + key] = value
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn_config(app, workers=workers, max_connections=max_connections)
    info = listening_info(settings, host=host, port=bound_port, config=config)
    announce = None if on_listening is None else (lambda: on_listening(info))
    run_until_interrupted(config, sock, workers=workers, on_ready=announce)


def listening_info(
    settings: dict[str, str], *, host: str, port: int, config: Any
) -> dict[str, Any]:
    """What the ready line tells of a server started with ``settings``, listening on ``port``."""
    return {
        **listening_urls(host, port),
        "host": host,
        "port": port,
        "decider": decider_label(
            Path(settings["POLICY"]) if settings["POLICY"] else None,
            settings["HANDLER"] or None,
            settings["FORWARD_TO"] or None,
        ),
        "signed": bool(settings["SECRET"]),
        "token": bool(settings["TOKEN"]),
        "sweep_interval": float(settings["SWEEP_INTERVAL"]),
        "workers": config.workers,
        "max_connections": config.belt_max_connections,
        "resume": bool(settings["RESUME"]),
        "model": settings["MODEL"] or None,
        "agents": settings["AGENTS"] or None,
        "allow_hosts": settings["ALLOW_HOST"].split(",") if settings["ALLOW_HOST"] else [],
        "clock": settings.get("CLOCK") or None,
    }


def listening_urls(host: str, port: int) -> dict[str, str]:
    """Where a server on ``host:port`` answers: its base URL, the hook route, the platform API
    (the base `--api` takes) and the inspector page."""
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    return {"url": url, "hooks_url": f"{url}/hooks", "api_url": url, "inspector_url": f"{url}/"}


def uvicorn_config(app: Any, *, workers: int, max_connections: int | None) -> Any:
    """uvicorn's configuration of ``app`` (of the app factory, with several workers), guarded."""
    config = uvicorn.Config(
        "belt.server.app:create_app_from_env" if workers > 1 else app,
        factory=workers > 1,
        workers=workers,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
        server_header=False,
        http="belt.server.guard:GuardedH11Protocol",
        timeout_keep_alive=IDLE_TIMEOUT,
        backlog=BACKLOG,
        # A chat stream stays open while its client listens (the JS SDK at a gate, a UI); on
        # Ctrl-C the requests still going get this long to end, then they are cut.
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    guard_config(config, max_connections=max_connections)
    return config


def run_until_interrupted(
    config: Any,
    sock: socket.socket,
    *,
    workers: int,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve on ``sock`` until Ctrl-C; the socket is closed however it ends. ``on_ready`` is
    called once it has started, when a Ctrl-C would stop it gracefully (so a ready line is
    true, and a Ctrl-C right after it is not cut short in uvicorn's start).

    uvicorn stops gracefully on Ctrl-C and then raises the signal again: the KeyboardInterrupt
    goes on to belt's one Ctrl-C handler (exit 130, one line).
    """

    class Server(uvicorn.Server):
        """uvicorn's server, which says when it has started."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if on_ready is not None and not self.should_exit:
                on_ready()

    try:
        if workers > 1:

            class Supervisor(Multiprocess):
                """uvicorn's supervisor of worker processes, which tells a Ctrl-C apart."""

                interrupted = False

                def handle_int(self) -> None:
                    self.interrupted = True
                    super().handle_int()

            supervisor = Supervisor(config, sockets=[sock])  # its signal handlers are set now
            if on_ready is not None:
                on_ready()
            supervisor.run()
            if supervisor.interrupted:  # it stops its workers and returns on Ctrl-C
                raise KeyboardInterrupt
        else:
            Server(config).run(sockets=[sock])
    finally:
        sock.close()


def guard_config(
    config: Any,
    *,
    max_connections: int | None = None,
    header_timeout: float = HEADER_TIMEOUT,
    body_timeout: float = BODY_TIMEOUT,
) -> None:
    """Set the limits ``GuardedH11Protocol`` reads from a uvicorn config."""
    config.belt_max_connections = connection_cap(max_connections)
    config.belt_header_timeout = header_timeout
    config.belt_body_timeout = body_timeout
