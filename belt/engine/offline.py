"""Hermetic runs: hooks delivered only on this machine (loopback, ``py:``, routed there).

``belt test``, the pytest plugin and ``belt sim run --offline`` find a webhook or executor that
would go anywhere else before anything runs, so a test can neither depend on the network nor
pass on a hook that never answered because it was out of reach; ``--allow-network`` lifts it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from belt.deliveries.effects import is_in_process, is_loopback_host, url_host
from belt.engine.dispatch import Route, route_for
from belt.wire.platform import HookHandlerType


def on_this_machine(target: str) -> bool:
    """True for a ``py:`` or ``cmd:`` target and a URL whose host is a loopback address."""
    if is_in_process(target) or target.startswith("cmd:"):
        return True
    try:
        host = urlsplit(target).hostname
    except ValueError:
        return False
    return bool(host) and is_loopback_host(str(host))


def origin(url: str) -> str:
    """A URL's scheme and host (and port): what a message shows, and a ``--route`` prefix."""
    host = url_host(url, every_port=True)
    return "?" if host == "?" else f"{urlsplit(url).scheme}://{host}"


def network_problems(loaded: Any, routes: list[Route], executors: list[str]) -> list[str]:
    """Each delivery of a read scenario that would leave this machine, one line with its fix."""
    problems = []
    for index, hook in enumerate(getattr(loaded, "hooks", None) or []):
        if hook.type != HookHandlerType.WEBHOOK or not hook.handler:
            continue
        url = str(hook.handler)
        route = route_for(routes, url)
        destination = route.destination(url) if route is not None else url
        if on_this_machine(destination):
            continue
        where = f"hook {index} ({hook.event})"
        problems.append(
            f"{where}: the webhook {origin(url)} is not on this machine; serve it here with "
            f"--route {origin(url)}=TARGET (TARGET py:MODULE:FUNC or a loopback URL such as "
            "http://127.0.0.1:8787)"
            if route is None
            else f"{where}: its --route {route.prefix} sends it to {origin(destination)}, which "
            "is not on this machine; route it to py:MODULE:FUNC or a loopback URL"
        )
    for spec in executors:
        name, _, target = spec.partition("=")
        if target and not on_this_machine(target.strip()):
            problems.append(
                f"executor {name.strip()}: {origin(target.strip())} is not on this machine; "
                "give a cmd:, py: or loopback target"
            )
    return problems


OFFLINE_HINT = "give --allow-network to let this run reach the network"
