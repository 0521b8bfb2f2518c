"""The inspector page of ``belt serve``: ``GET /`` and its JSON routes under ``/inspector/``.

Its API (``belt.server.inspector.page``) is imported on the first request to it. With ``--token``
the JSON routes need the token but the page's own files do not (the script reads it from the
URL's fragment, which a browser never sends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from belt.server.deciders import Decider
    from belt.store import Store

PREFIX = "/inspector"
STATIC = f"{PREFIX}/static/"


def is_page_shell(path: str) -> bool:
    """True for the page's own files, served without the token (they hold no data)."""
    return path == "/" or path.startswith(STATIC)


class LazyInspector:
    """An ASGI app that builds the inspector (``build``'s ``options``) on its first request."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Build the inspector if this is its first request, then hand the request to it."""
        if self.app is None:
            from belt.server.inspector.page import build  # noqa: PLC0415 - loaded when first asked

            self.app = build(prefix=PREFIX, **self.options)
        await self.app(scope, receive, send)


def inspector_routes(
    store: Store, *, decide: Decider | None, in_process: frozenset[str], report: Any
) -> list[BaseRoute]:
    """The routes of the page and its API over ``store``; ``in_process``: the ``py:`` handlers a
    replay may call (those the server was started with)."""
    lazy = LazyInspector(store=store, decide=decide, in_process=in_process, report=report)
    return [
        Route("/", lazy, methods=["GET", "HEAD"]),
        Route(PREFIX + "/{rest:path}", lazy),
    ]
