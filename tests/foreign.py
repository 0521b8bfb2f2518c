"""Requests another site's page could make to `belt serve`, one set per route of its app.

Shared by tests/test_server_guard.py and bench/reliability.py: every route of the app (its path
parameters filled in), tried as a browser would send it from elsewhere:

- ``rebound``: a page whose name was rebound to 127.0.0.1 (its own name as ``Host``, its own
  origin as ``Origin``), which without the Host check could read every answer;
- ``cross-site``: a page of another site posting or fetching (loopback ``Host``, its ``Origin``);
- ``form``: for a route that changes something, a ``text/plain`` body with no ``Origin`` (what a
  ``<form enctype="text/plain">`` sends from a browser that leaves the header out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

FOREIGN = "evil.example"
SAFE = ("GET", "HEAD")
FILLED = {"rest": "deliveries", "name": "static.css"}
"""Path parameters whose value matters (the inspector's routes); every other is ``x``."""


@dataclass(frozen=True)
class Tried:
    """One foreign request and what the server answered."""

    kind: str
    method: str
    path: str
    status: int


def routes_of(app: Any) -> list[tuple[str, str]]:
    """Every (method, path) the app routes, path parameters filled in, in route order."""
    found: list[tuple[str, str]] = []
    for route in app.routes:
        path = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: FILLED.get(m.group(1), "x"), str(route.path))
        methods = sorted(route.methods or ("GET", "POST"))
        found += [(method, path) for method in methods if method != "HEAD"]
    return sorted(set(found), key=found.index)


def try_foreign(url: str, routes: list[tuple[str, str]]) -> list[Tried]:
    """Send each route its foreign requests; what each was answered."""
    port = httpx.URL(url).port
    rebound = {"host": f"{FOREIGN}:{port}", "origin": f"http://{FOREIGN}:{port}"}
    cross_site = {"origin": f"http://{FOREIGN}"}
    body = b'{"decision": "allow", "disable_hooks": true}'
    tried: list[Tried] = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for method, path in routes:
            plain = {} if method in SAFE else {"content": body}
            kinds: list[tuple[str, dict[str, str]]] = [
                ("rebound", rebound),
                ("cross-site", cross_site),
            ]
            if method not in SAFE:
                kinds.append(("form", {"content-type": "text/plain"}))
            for kind, headers in kinds:
                sent = {"content-type": "text/plain", **headers} if plain else headers
                # The status is all that counts: a stream let in would never end.
                with client.stream(method, path, headers=sent, **plain) as reply:
                    tried.append(Tried(kind, method, path, reply.status_code))
    return tried
