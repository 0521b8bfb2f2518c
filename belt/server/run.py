"""Running the app under uvicorn: listening checks, the socket, and a clean stop on Ctrl-C."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from belt.errors import BeltError, UsageError
from belt.server.app import Reporter

LOOPBACK_NAMES = ("localhost",)


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


def decider_label(policy: Path | None, handler: str | None, forward_to: str | None) -> str:
    """How the start-up line names what decides hooks (a forwarding URL by its host only)."""
    if policy is not None:
        return f"policy {policy}"
    if handler is not None:
        return f"handler {handler}"
    if forward_to is not None:
        from belt.effects import url_host

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
    resume: bool = False,
    forward_to: str | None = None,
    report: Reporter | None = None,
    on_listening: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Check the options, load the decider, listen, and serve until interrupted."""
    import uvicorn

    from belt.server.app import create_app
    from belt.server.deciders import handler_decider, load_handler, policy_decider

    if sum(option is not None for option in (policy, handler, forward_to)) > 1:
        raise UsageError(
            "--policy, --handler and --forward-to each decide hooks: give one, not both"
        )
    if not is_loopback(host) and not token:
        raise UsageError(
            f"refusing to listen on {host} without --token",
            hint="a host other than loopback is reachable by others; set --token TOKEN",
        )
    if sweep_interval < 0:
        raise UsageError("--sweep-interval must be 0 (off) or more seconds")
    if policy is not None:
        from belt.policy import load_policy

        decide = policy_decider(load_policy(policy))
    elif handler is not None:
        decide = handler_decider(load_handler(handler))
    elif forward_to is not None:
        from belt.server.forward import check_forward_url, forward_decider

        decide = forward_decider(check_forward_url(forward_to), secret=secret)
    else:
        decide = None
    app = create_app(
        decide=decide,
        secret=secret,
        token=token,
        sweep_interval=sweep_interval,
        report=report,
        resume=resume,
    )
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", ws="none", server_header=False
    )
    server = uvicorn.Server(config)
    # Open inspector streams end when the server stops, instead of holding its shutdown.
    app.state.stopping = lambda: server.should_exit
    if on_listening is not None:
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        on_listening(
            {
                "url": f"http://{shown}:{bound_port}",
                "host": host,
                "port": bound_port,
                "decider": decider_label(policy, handler, forward_to),
                "signed": bool(secret),
                "token": bool(token),
                "sweep_interval": sweep_interval,
                "resume": resume,
            }
        )
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn stops gracefully on Ctrl-C and then re-raises the signal; that is a clean exit.
        pass
    finally:
        sock.close()
