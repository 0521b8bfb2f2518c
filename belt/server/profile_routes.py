"""The Nexus profile API of ``belt serve``: GET and PUT /agent_api/v1/profile/configuration, the
whole declaration as stored; a bad one is a 422 whose ``errors`` lists every problem."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from belt.errors import BeltError, InvalidInput
from belt.records.profile import PROFILE_PATH, Profile, read_profile, write_profile
from belt.records.reports import Reporter, report_api
from belt.server.problems import Problem, belt_problem, parse_json, receive_body

if TYPE_CHECKING:
    from belt.store import Store


def declaration_response(record: Profile) -> Response:
    """The stored declaration, with its revision in a header."""
    return Response(
        json.dumps(record["configuration"], ensure_ascii=False),
        media_type="application/json",
        headers={"x-belt-profile-revision": str(record["revision"])},
    )


def profile_routes(store: Store, report: Reporter | None = None) -> list[Route]:
    """The routes of the profile API over ``store``."""

    async def get(request: Request) -> Response:
        """GET: the stored declaration (``{}`` until one is PUT)."""
        return declaration_response(await run_in_threadpool(read_profile, store))

    async def put(request: Request) -> Response:
        """PUT: check and store a whole declaration, replacing the previous one."""
        try:
            body = await receive_body(request.scope, request.receive)
            declaration = parse_json(body) if body.strip() else None
            record = await run_in_threadpool(write_profile, store, declaration)
        except (Problem, BeltError) as exc:
            problem = exc if isinstance(exc, Problem) else belt_problem(exc)
            if isinstance(exc, InvalidInput):
                problem.extra["errors"] = [exc.message, *exc.problems]
            report_api(report, "profile", "configuration", problem.status, problem.detail)
            return problem.response()
        report_api(report, "profile", "configuration", 200, f"revision {record['revision']}")
        return declaration_response(record)

    return [
        Route(PROFILE_PATH, get, methods=["GET"]),
        Route(PROFILE_PATH, put, methods=["PUT"]),
    ]
