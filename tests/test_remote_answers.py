"""One table maps a remote's answer to an exit code (``REMOTE_ANSWERS``, docs/cli.md), for every
command that talks to a remote: each row against a real server on port 0, for ``--api``, for
``belt trigger --to URL`` and for ``belt replay --to URL``; and ``belt check`` of a URL where
nothing answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from belt.backends.remote import Platform
from belt.errors import BeltError, ExitCode, Unreachable
from tests.cli.runner import belt
from tests.servers import REFUSED, running, turn_start


@dataclass
class Answer:
    """What the server answers every request with."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] | None = None
    delay: float = 0.0


class Remote:
    """A server on port 0 answering every path with ``answer`` (set per test)."""

    def __init__(self) -> None:
        self.answer = Answer()
        self.url = ""

    def app(self) -> Starlette:
        async def reply(request: Request) -> Response:
            await request.body()
            answer = self.answer
            if answer.delay:
                await asyncio.sleep(answer.delay)
            return Response(
                answer.body,
                status_code=answer.status,
                headers=answer.headers or {},
                media_type="application/json",
            )

        return Starlette(routes=[Route("/{path:path}", reply, methods=["GET", "POST", "PUT"])])


@pytest.fixture(scope="module")
def remote() -> Iterator[Remote]:
    server = Remote()
    with running(server.app()) as url:
        server.url = url
        yield server


def problem(status: int, detail: str) -> bytes:
    body = {"type": "about:blank", "title": "t", "status": status, "detail": detail}
    return json.dumps(body).encode()


REDIRECT = Answer(302, b"", {"location": "https://elsewhere.example/api/x?token=t"})
# (id, what the server answers, the exit code, what the error line says besides the URL)
ROWS: list[tuple[str, Answer, int, str]] = [
    ("404", Answer(404, problem(404, "no such interrupt")), 3, "HTTP 404"),
    ("409", Answer(409, problem(409, "already resolved")), 4, "HTTP 409"),
    ("401", Answer(401, problem(401, "who are you")), 7, "HTTP 401"),
    ("403", Answer(403, problem(403, "not yours")), 7, "HTTP 403"),
    ("302", REDIRECT, 1, "HTTP 302"),
    ("418", Answer(418, problem(418, "a teapot")), 1, "HTTP 418"),
    ("422", Answer(422, problem(422, "bad decision")), 1, "HTTP 422"),
    ("500", Answer(500, problem(500, "it broke")), 1, "HTTP 500"),
    ("502", Answer(502, b"<html>bad gateway</html>"), 1, "HTTP 502"),
]


def error_line(stderr: str) -> str:
    [line] = [line for line in stderr.splitlines() if line.startswith("error: ")]
    return line


# -- --api ----------------------------------------------------------------------------------------

API_ONLY: list[tuple[str, Answer, int, str]] = [
    ("200 without the envelope", Answer(200, b'{"id": "int_1"}'), 1, "HTTP 200 without the"),
    ("200 not JSON", Answer(200, b"<html>ok</html>"), 1, "HTTP 200 with a body that is not JSON"),
    ("200 with no interrupt", Answer(200, b'{"data": [1]}'), 1, "HTTP 200 with something other"),
]


@pytest.mark.parametrize(
    ("answer", "code", "says"),
    [r[1:] for r in ROWS + API_ONLY],
    ids=[r[0] for r in ROWS + API_ONLY],
)
def test_api_maps_each_answer_by_the_table(
    remote: Remote, answer: Answer, code: int, says: str
) -> None:
    remote.answer = answer
    result = belt("interrupt", "resolve", "int_1", "allow", "--api", remote.url)
    assert result.exit_code == code, result.stderr
    line = error_line(result.stderr)
    assert f"{remote.url}/interrupts/int_1/resolve" in line  # the URL asked
    assert says in line
    assert "Traceback" not in result.stderr
    if answer is REDIRECT:
        # Where it points, without its query; and belt follows no redirect.
        assert "a redirect to https://elsewhere.example/api/x" in line
        assert "token" not in result.stderr
        assert "hint: belt does not follow redirects" in result.stderr
    if code == ExitCode.UNAUTHORIZED:
        assert "hint: check the API key" in result.stderr


def test_api_nothing_answered_is_6_naming_the_url() -> None:
    result = belt("interrupt", "resolve", "int_1", "allow", "--api", f"http://{REFUSED}")
    assert result.exit_code == 6, result.stderr
    assert error_line(result.stderr).startswith(
        f"error: cannot reach http://{REFUSED}/interrupts/int_1/resolve: "
    )


def test_api_no_status_line_in_time_is_6(remote: Remote) -> None:
    remote.answer = Answer(200, b'{"data": []}', delay=2.0)
    with pytest.raises(Unreachable) as caught:
        with Platform(remote.url, timeout=0.3) as client:
            client.list_interrupts(run_id="run_1")
    assert caught.value.exit_code == ExitCode.UNREACHABLE
    assert caught.value.message == (
        f"{remote.url}/agent-runs/run_1/interrupts did not answer within 0.3s"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["chat", "settings", "ch_1", "--disable-hooks"],
        ["interrupt", "list", "run_1"],
        ["interrupt", "show", "int_1", "--run", "run_1"],
    ],
    ids=["chat settings", "interrupt list", "interrupt show"],
)
@pytest.mark.parametrize(("status", "code"), [(302, 1), (401, 7), (404, 3), (500, 1)])
def test_every_api_command_uses_the_same_table(
    remote: Remote, args: list[str], status: int, code: int
) -> None:
    remote.answer = Answer(
        status, problem(status, "no"), REDIRECT.headers if status == 302 else None
    )
    result = belt(*args, "--api", remote.url)
    assert result.exit_code == code, result.stderr
    assert f"HTTP {status}" in error_line(result.stderr)


def test_rho_configure_api_uses_the_same_table(remote: Remote) -> None:
    remote.answer = Answer(403, problem(403, "read only"))
    from typer.testing import CliRunner

    from belt.cli.rho import app as rho_app

    result = CliRunner().invoke(
        rho_app,
        ["extensions", "configure", "rho.lifecycle_hooks", "--api", remote.url],
        input="{}",
    )
    assert result.exit_code == 7, result.output
    assert f"(HTTP 403 from {remote.url}/agent_api/v1/profile/configuration)" in result.stderr


def test_watch_looks_again_after_a_5xx_and_stops_at_a_401(remote: Remote) -> None:
    naps: list[float] = []
    remote.answer = Answer(503, problem(503, "busy"))
    with Platform(remote.url) as client:
        events = client.watch_interrupts(run_ids=["run_1"], interval=1, sleep=naps.append)
        first = next(events)
        assert first["event"] == "warning" and "HTTP 503" in first["message"]
        remote.answer = Answer(401, problem(401, "who are you"))
        with pytest.raises(BeltError) as caught:
            next(events)
    assert caught.value.exit_code == ExitCode.UNAUTHORIZED


# -- belt trigger --to URL ------------------------------------------------------------------------

TRIGGER_ONLY: list[tuple[str, Answer, int, str]] = [
    (
        "200 not a response",
        Answer(200, b'{"decision": "block"}'),
        1,
        "not a LifecycleHookResponse",
    ),
]


@pytest.mark.parametrize(
    ("answer", "code", "says"),
    [r[1:] for r in ROWS + TRIGGER_ONLY],
    ids=[r[0] for r in ROWS + TRIGGER_ONLY],
)
def test_trigger_maps_each_answer_by_the_table(
    remote: Remote, answer: Answer, code: int, says: str
) -> None:
    remote.answer = answer
    result = belt("trigger", "agent.start", "--to", f"{remote.url}/hook")
    assert result.exit_code == code, result.stderr
    line = error_line(result.stderr)
    assert remote.url.removeprefix("http://") in line  # a webhook is named by its host
    assert says in line
    assert f"HTTP {answer.status}" in line  # the status, always
    assert "Traceback" not in result.stderr
    if code == ExitCode.UNAUTHORIZED:
        assert "refused the request: give --secret" in result.stderr


def test_trigger_nothing_answered_is_6() -> None:
    result = belt("trigger", "agent.start", "--to", f"http://{REFUSED}/hook")
    assert result.exit_code == 6
    assert error_line(result.stderr).startswith(f"error: cannot connect to {REFUSED}")


def test_trigger_no_answer_in_time_is_6(remote: Remote) -> None:
    remote.answer = Answer(200, b"{}", delay=2.0)
    result = belt("trigger", "agent.start", "--to", f"{remote.url}/hook", "--timeout", "0.3")
    assert result.exit_code == 6
    assert "did not answer within 0.3 s" in error_line(result.stderr)


def test_trigger_success_is_0(remote: Remote) -> None:
    remote.answer = Answer(200, b"{}")
    assert belt("trigger", "agent.start", "--to", f"{remote.url}/hook").exit_code == 0


# -- belt replay --to URL -------------------------------------------------------------------------

PAYLOAD = turn_start()


@pytest.fixture
def payloads(tmp_path: Path) -> Path:
    path = tmp_path / "payloads.jsonl"
    path.write_text(json.dumps(PAYLOAD) + "\n" + json.dumps(PAYLOAD) + "\n")
    return path


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (Answer(200, b"{}"), 0),
        (Answer(404, b""), 3),
        (Answer(409, b""), 4),
        (Answer(401, b""), 7),
        (REDIRECT, 1),
        (Answer(500, b""), 1),
        (Answer(200, b'{"decision": "block"}'), 1),
    ],
    ids=["200", "404", "409", "401", "302", "500", "200 not a response"],
)
def test_replay_to_a_url_maps_its_first_failure_by_the_table(
    remote: Remote, payloads: Path, answer: Answer, code: int
) -> None:
    remote.answer = answer
    result = belt("replay", str(payloads), "--to", f"{remote.url}/hook")
    assert result.exit_code == code, result.stdout + result.stderr
    assert "2 payload(s)" in result.stdout  # the whole replay is reported first
    if code:
        line = error_line(result.stderr)
        assert f"HTTP {answer.status}" in line
        assert "(2 of 2 deliveries failed)" in line


def test_replay_to_a_url_where_nothing_answered_is_6(payloads: Path) -> None:
    result = belt("replay", str(payloads), "--to", f"http://{REFUSED}/hook")
    assert result.exit_code == 6
    assert error_line(result.stderr).startswith(f"error: cannot connect to {REFUSED}")


# -- belt check of a URL --------------------------------------------------------------------------


def test_check_of_a_url_where_nothing_answered_is_6() -> None:
    result = belt("check", f"http://{REFUSED}/hook", "--examples", "1")
    assert result.exit_code == 6
    assert error_line(result.stderr).startswith(f"error: cannot connect to {REFUSED}")


def test_check_of_a_url_that_answers_holds_the_answer_to_the_checks(remote: Remote) -> None:
    # An answer that came is not the command's failure but the checks': exit 1, every check
    # reported.
    remote.answer = Answer(500, b"")
    result = belt("check", f"{remote.url}/hook", "--event", "agent.start", "--examples", "1")
    assert result.exit_code == 1, result.stderr
    assert "fail  answers" in result.stdout
