"""``/_belt/clock``: the virtual clock ``belt serve --clock`` runs on, which a test moves.

``POST`` with ``{"advance": "10m"}`` or ``{"to": RFC3339}`` moves it forward, then sweeps at once
(what is overdue is settled before the answer); on wall time, or backwards, it is a 409.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from belt.display.text import describe
from belt.errors import BeltError
from belt.reading.didyoumean import did_you_mean
from belt.server.problems import Problem, answering, envelope, read_json_object
from belt.store.clock import VirtualClock, now, parse_duration, parse_rfc3339, timestamp
from belt.wire.dto import InterruptJSON

PATH = "/_belt/clock"

Sweep = Callable[[], Awaitable[list[InterruptJSON]]]


def clock_routes(clock: VirtualClock | None, sweep: Sweep) -> list[Route]:
    """GET and POST ``/_belt/clock``; ``sweep`` settles what is overdue (the server's own sweep)."""

    async def show(request: Request) -> Response:
        """The server's time, and whether it is a virtual clock's."""
        return envelope({"now": timestamp(now()), "virtual": clock is not None})

    async def move(request: Request) -> Response:
        """Move the virtual clock forward, then settle what is overdue at the new time."""
        body = await read_json_object(request)
        if clock is None:
            raise Problem(
                409,
                "this server runs on wall time, which no request moves: start it with "
                "`belt serve --clock RFC3339` to move its clock",
            )
        moment = moved(body, clock)
        settled = await sweep()
        return envelope({"now": timestamp(moment), "virtual": True, "settled": settled})

    return [Route(PATH, show, methods=["GET"]), Route(PATH, answering(move), methods=["POST"])]


def moved(body: dict[str, object], clock: VirtualClock) -> datetime:
    """``clock`` moved as ``body`` asks (``advance`` or ``to``); a 422 saying why not."""
    keys = set(body)
    if keys not in ({"advance"}, {"to"}):
        extra = sorted(keys - {"advance", "to"})
        why = (
            f"{extra[0]}: unknown key{did_you_mean(extra[0], ('advance', 'to'))}; " if extra else ""
        )
        raise Problem(
            422, f'{why}give one of "advance" (a span like "10m") or "to" (an RFC 3339 time)'
        )
    span = body.get("advance", "")
    if not isinstance(span, str):
        raise Problem(422, f'advance: expected a span like "10m", got {describe(span)}')
    try:  # parse_rfc3339 refuses, by name, a value that is not a string
        if "advance" in body:
            return clock.advance(parse_duration(span, "advance"))
        moment = parse_rfc3339(cast(str, body["to"]), "to")
    except BeltError as exc:
        raise Problem(422, exc.message) from None
    return clock.move_to(moment)  # Conflict (409) when it is before the clock's time
