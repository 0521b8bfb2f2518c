"""The remote client against a real HTTP server on port 0, and the commands that use it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from belt.backends.remote import Platform
from belt.deliveries.effects import url_host
from belt.errors import (
    BeltError,
    Conflict,
    ExitCode,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unreachable,
)
from belt.outgoing.transport import using
from tests import hostile
from tests.cli.runner import belt
from tests.fake_platform import FakePlatform, closed_port, envelope, problem

KEY = "inf_secret_k3y_do_not_print"

PENDING = {
    "id": "int_1",
    "short_id": "1",
    "created_at": "2026-08-11T14:00:00Z",
    "updated_at": "2026-08-11T14:00:00Z",
    "run_id": "run_1",
    "chat_id": "ch_1",
    "reason": "hook_gate",
    "source": "hook:agent.tool_call",
    "resource_id": "ti_1",
    "resource_type": "tool_invocation",
    "status": "pending",
    "resolution": None,
    "resolved_at": None,
    "resolved_data": None,
    "expires_at": "2999-01-01T00:00:00Z",
    "meta": {"event": "agent.tool_call"},
}
SETTLED = PENDING | {
    "id": "int_2",
    "status": "resolved",
    "resolution": "deny",
    "resolved_at": "2026-08-11T14:01:00Z",
}


@pytest.fixture
def platform() -> Iterator[FakePlatform]:
    with FakePlatform() as server:
        yield server


def test_list_sends_the_key_and_unwraps_the_envelope(platform: FakePlatform) -> None:
    platform.reply("GET", "/agent-runs/run_1/interrupts", 200, envelope([PENDING, SETTLED]))
    with Platform(platform.url, api_key=KEY) as client:
        assert client.list_interrupts(run_id="run_1") == [PENDING]
        assert client.list_interrupts(run_id="run_1", include_settled=True) == [PENDING, SETTLED]
    seen = platform.requests[0]
    assert (seen.method, seen.path) == ("GET", "/agent-runs/run_1/interrupts")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["accept"] == "application/json"


def test_the_base_url_may_carry_a_path(platform: FakePlatform) -> None:
    platform.reply("GET", "/v1/agent-runs/run_1/interrupts", 200, envelope([]))
    with Platform(f"{platform.url}/v1/") as client:
        assert client.list_interrupts(run_id="run_1") == []
    assert "authorization" not in platform.requests[0].headers


def test_the_key_comes_from_the_environment(
    platform: FakePlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform.reply("GET", "/agent-runs/r/interrupts", 200, envelope([]))
    monkeypatch.setenv("INFERENCE_API_KEY", "second")
    with Platform(platform.url) as client:
        client.list_interrupts(run_id="r")
    monkeypatch.setenv("INFSH_API_KEY", "first")
    with Platform(platform.url) as client:
        client.list_interrupts(run_id="r")
    with Platform(platform.url, api_key="given") as client:
        client.list_interrupts(run_id="r")
    sent = [seen.headers["authorization"] for seen in platform.requests]
    assert sent == ["Bearer second", "Bearer first", "Bearer given"]


def test_resolve_posts_the_decision_and_data(platform: FakePlatform) -> None:
    resolved = PENDING | {"status": "resolved", "resolution": "allow", "resolved_data": {"a": 1}}
    platform.reply("POST", "/interrupts/int_1/resolve", 200, envelope(resolved))
    with Platform(platform.url, api_key=KEY) as client:
        assert client.resolve_interrupt(interrupt_id="int_1", decision="allow", data={"a": 1}) == (
            resolved
        )
        client.resolve_interrupt(interrupt_id="int_1", decision="deny")
    assert platform.requests[0].json() == {"decision": "allow", "data": {"a": 1}}
    assert platform.requests[1].json() == {"decision": "deny"}
    assert platform.requests[0].headers["content-type"] == "application/json"


def test_show_finds_the_interrupt_in_its_runs_list(platform: FakePlatform) -> None:
    platform.reply("GET", "/agent-runs/run_1/interrupts", 200, envelope([PENDING, SETTLED]))
    with Platform(platform.url) as client:
        assert client.get_interrupt(interrupt_id="int_2", run_id="run_1") == SETTLED
        with pytest.raises(NotFound, match="no interrupt int_9 on run run_1"):
            client.get_interrupt(interrupt_id="int_9", run_id="run_1")


def test_chat_settings(platform: FakePlatform) -> None:
    platform.reply("POST", "/chats/ch_1/settings", 200, envelope({"id": "ch_1", "ok": True}))
    platform.reply("POST", "/chats/ch_2/settings", 204)
    with Platform(platform.url) as client:
        assert client.set_chat_settings(chat_id="ch_1", disable_hooks=True) == {
            "id": "ch_1",
            "ok": True,
        }
        assert client.set_chat_settings(chat_id="ch_2", disable_hooks=False) == {
            "id": "ch_2",
            "agent_data": {"disable_hooks": False},
        }
    assert [seen.json() for seen in platform.requests] == [
        {"disable_hooks": True},
        {"disable_hooks": False},
    ]


ERRORS = [
    (
        404,
        problem(404, "Not Found", "interrupt int_1 not found"),
        NotFound,
        "interrupt int_1 not found",
    ),
    (409, problem(409, "Conflict", "interrupt already resolved"), Conflict, "already resolved"),
    (401, problem(401, "Unauthorized"), Unauthorized, "Unauthorized"),
    (403, problem(403, "Forbidden", "missing scope agents:write"), Unauthorized, "agents:write"),
    (
        422,
        problem(422, "Unprocessable", "decision must be allow or deny"),
        BeltError,
        "decision",
    ),
    (400, problem(400, "Bad Request", "bad json"), BeltError, "bad json"),
    (500, problem(500, "Internal Server Error"), BeltError, "Internal Server Error"),
    (502, b"<html>bad gateway</html>", BeltError, "Bad Gateway"),
    (418, problem(418, "Teapot", "short and stout"), BeltError, "short and stout"),
]


@pytest.mark.parametrize(("status", "body", "error", "text"), ERRORS, ids=[e[0] for e in ERRORS])
def test_problems_become_one_line_errors(
    platform: FakePlatform, status: int, body: object, error: type, text: str
) -> None:
    platform.reply("POST", "/interrupts/int_1/resolve", status, body)
    with pytest.raises(BeltError) as caught, Platform(platform.url, api_key=KEY) as client:
        client.resolve_interrupt(interrupt_id="int_1", decision="allow")
    assert type(caught.value) is error
    assert text in caught.value.message
    assert f"HTTP {status} from {platform.url}/interrupts/int_1/resolve" in caught.value.message
    assert "\n" not in caught.value.message
    assert KEY not in caught.value.message


def test_a_problem_that_echoes_the_key_is_redacted(platform: FakePlatform) -> None:
    platform.reply("GET", "/agent-runs/r/interrupts", 401, problem(401, "Bad", f"bad key {KEY}"))
    with pytest.raises(BeltError) as caught:
        with Platform(platform.url, api_key=KEY) as client:
            client.list_interrupts(run_id="r")
    assert KEY not in caught.value.message
    assert "bad key ***" in caught.value.message


@pytest.mark.parametrize(
    "body",
    [b'{"id": "int_1"}', b"[1, 2]"],
    ids=["no envelope", "a bare list"],
)
def test_a_success_body_without_the_envelope_is_a_failure_naming_the_status(
    platform: FakePlatform, body: bytes
) -> None:
    platform.reply("POST", "/interrupts/int_1/resolve", 200, body)
    with pytest.raises(BeltError) as caught:
        with Platform(platform.url) as client:
            client.resolve_interrupt(interrupt_id="int_1", decision="allow")
    assert caught.value.exit_code == ExitCode.FAILURE
    assert caught.value.message == (
        f"{platform.url}/interrupts/int_1/resolve answered HTTP 200 without the "
        '{"data": ...} envelope of the platform API'
    )


def test_a_list_that_is_not_a_list_is_a_failure(platform: FakePlatform) -> None:
    platform.reply("GET", "/agent-runs/r/interrupts", 200, envelope({"id": "int_1"}))
    with pytest.raises(BeltError, match="something other than a list of interrupts") as caught:
        with Platform(platform.url) as client:
            client.list_interrupts(run_id="r")
    assert caught.value.exit_code == ExitCode.FAILURE
    assert f"{platform.url}/agent-runs/r/interrupts answered HTTP 200" in caught.value.message


def test_connection_refused_names_the_url_without_credentials_or_query() -> None:
    port = closed_port()
    with pytest.raises(Unreachable) as caught:
        with Platform(f"http://user:pw@127.0.0.1:{port}/x?token=t", api_key=KEY) as client:
            client.list_interrupts(run_id="r")
    assert caught.value.exit_code == ExitCode.UNREACHABLE
    assert f"cannot reach http://127.0.0.1:{port}/x/agent-runs/r/interrupts: " in (
        caught.value.message
    )
    for secret in (KEY, "pw", "token"):
        assert secret not in caught.value.message


def test_a_server_that_does_not_answer_in_time(platform: FakePlatform) -> None:
    platform.reply("GET", "/agent-runs/r/interrupts", 200, envelope([]), delay=1.0)
    url = f"{platform.url}/agent-runs/r/interrupts"
    with pytest.raises(Unreachable, match=f"{url} did not answer within 0.2s"):
        with Platform(platform.url, api_key=KEY, timeout=0.2) as client:
            client.list_interrupts(run_id="r")


def test_an_injected_transport_carries_the_requests() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=envelope([PENDING]))

    with using(httpx.MockTransport(handler)):
        client = Platform("https://api.example.test")
        assert client.list_interrupts(run_id="run_1") == [PENDING]
    assert str(seen[0].url) == "https://api.example.test/agent-runs/run_1/interrupts"


@pytest.mark.parametrize("url", ["api.example.com", "ftp://h/", "http://", ""])
def test_an_api_url_must_be_http(url: str) -> None:
    with pytest.raises(InvalidInput, match="--api must be an http"):
        Platform(url)


def test_hostile_ids_never_reach_the_server(platform: FakePlatform) -> None:
    with Platform(platform.url) as client:
        for bad in ("../admin", "a/b", "..", "x?y", "a#b"):
            with pytest.raises(InvalidInput):
                client.resolve_interrupt(interrupt_id=bad, decision="allow")
            with pytest.raises(InvalidInput):
                client.list_interrupts(run_id=bad)
    assert platform.requests == []


def test_hosts_are_shown_without_credentials_path_or_query() -> None:
    assert url_host("https://user:pw@api.example.com/v1?k=1") == "api.example.com"
    assert url_host("http://127.0.0.1:8787") == "127.0.0.1:8787"
    assert url_host("http://[::1]:9/") == "[::1]:9"


# The commands with --api


def test_cli_list_show_and_resolve_over_the_api(
    platform: FakePlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFSH_API_KEY", KEY)
    platform.reply("GET", "/agent-runs/run_1/interrupts", 200, envelope([PENDING, SETTLED]))
    platform.reply(
        "POST", "/interrupts/int_1/resolve", 200, envelope(PENDING | {"status": "resolved"})
    )

    result = belt("interrupt", "list", "run_1", "--api", platform.url, "--json")
    assert result.exit_code == 0
    assert result.json() == [PENDING]
    result = belt("interrupt", "list", "run_1", "--all", "--api", platform.url)
    assert result.exit_code == 0
    assert "int_1" in result.stdout and "resolved (deny)" in result.stdout

    result = belt("interrupt", "show", "int_2", "--run", "run_1", "--api", platform.url, "--json")
    assert result.exit_code == 0
    assert result.json() == SETTLED

    result = belt(
        "interrupt", "resolve", "int_1", "allow", "--data", '{"by": "ana"}', "--api", platform.url
    )
    assert result.exit_code == 0
    assert platform.requests[-1].json() == {"decision": "allow", "data": {"by": "ana"}}
    assert all(seen.headers["authorization"] == f"Bearer {KEY}" for seen in platform.requests)
    assert KEY not in result.stdout + result.stderr


def test_cli_takes_the_api_from_the_environment(
    platform: FakePlatform, monkeypatch: pytest.MonkeyPatch, belt_home: Path
) -> None:
    platform.reply("GET", "/agent-runs/run_1/interrupts", 200, envelope([PENDING]))
    monkeypatch.setenv("BELT_API_URL", platform.url)
    result = belt("interrupt", "list", "run_1", "--json", "--api-key", KEY)
    assert result.exit_code == 0
    assert result.json() == [PENDING]
    assert platform.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert not (belt_home / "store").exists()


def test_cli_show_over_the_api_needs_the_run(platform: FakePlatform) -> None:
    result = belt("interrupt", "show", "int_1", "--api", platform.url)
    assert result.exit_code == 2
    assert "with --api, show needs --run and the whole id" in result.stderr
    assert platform.requests == []


def test_cli_chat_settings_over_the_api(platform: FakePlatform) -> None:
    platform.reply("POST", "/chats/ch_1/settings", 200, envelope({"disable_hooks": True}))
    result = belt("chat", "settings", "ch_1", "--disable-hooks", "--api", platform.url)
    assert result.exit_code == 0
    assert result.stdout == "hooks disabled for chat ch_1\n"
    assert platform.requests[0].json() == {"disable_hooks": True}


CLI_ERRORS = [
    (404, problem(404, "Not Found", "no such interrupt"), 3, "no such interrupt", None),
    (409, problem(409, "Conflict", "interrupt is not pending"), 4, "not pending", None),
    (401, problem(401, "Unauthorized"), 7, "Unauthorized", "check the API key"),
    (403, problem(403, "Forbidden", "scope agents:write needed"), 7, "agents:write", "check the"),
    (422, problem(422, "Unprocessable Entity", "decision is invalid"), 1, "decision is", None),
    (500, problem(500, "Internal Server Error"), 1, "Internal Server Error", None),
]


@pytest.mark.parametrize(
    ("status", "body", "code", "text", "hint"), CLI_ERRORS, ids=[e[0] for e in CLI_ERRORS]
)
@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_cli_maps_statuses_to_exit_codes_without_showing_the_key(
    platform: FakePlatform,
    belt_home: Path,
    status: int,
    body: dict,
    code: int,
    text: str,
    hint: str | None,
    verbose: bool,
) -> None:
    platform.reply("POST", "/interrupts/int_1/resolve", status, body)
    platform.reply("POST", "/chats/ch_1/settings", status, body)
    flags = ["-v"] if verbose else []
    for args in (
        ["interrupt", "resolve", "int_1", "deny"],
        ["chat", "settings", "ch_1", "--enable-hooks"],
    ):
        result = belt(*flags, *args, "--api", platform.url, "--api-key", KEY)
        assert result.exit_code == code
        [line] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert text in line
        path = "/interrupts/int_1/resolve" if args[0] == "interrupt" else "/chats/ch_1/settings"
        assert line.endswith(f"(HTTP {status} from {platform.url}{path})")
        expected = hint
        if status == 404 and args[0] == "interrupt":  # the platform takes full ids only
            expected = "with --api give the whole interrupt id"
        if expected:
            assert f"hint: {expected}" in result.stderr
        else:
            assert "hint:" not in result.stderr
        assert KEY not in result.stdout + result.stderr
    assert not belt_home.exists() or not any(
        KEY.encode() in path.read_bytes() for path in belt_home.rglob("*") if path.is_file()
    )


def test_cli_connection_refused_exits_6_naming_the_host() -> None:
    port = closed_port()
    for verbose in ([], ["-v"]):
        result = belt(
            *verbose, "interrupt", "list", "run_1", "--api", f"http://127.0.0.1:{port}",
            "--api-key", KEY,
        )  # fmt: skip
        assert result.exit_code == 6
        assert f"cannot reach http://127.0.0.1:{port}/agent-runs/run_1/interrupts" in result.stderr
        assert KEY not in result.stdout + result.stderr


# Listing, naming and watching: what the platform can and cannot do


def test_the_platform_lists_per_run_only(platform: FakePlatform) -> None:
    platform.reply("GET", "/agent-runs/run_1/interrupts", 200, envelope([PENDING, SETTLED]))
    with Platform(platform.url) as client:
        with pytest.raises(BeltError, match="with --api, list needs a run.s id") as caught:
            client.find_interrupts()
        assert caught.value.exit_code == ExitCode.USAGE
        assert platform.requests == []
        assert client.find_interrupts(run_id="run_1") == [(PENDING, None)]
        assert client.find_interrupts(run_id="run_1", include_settled=True, chat_id="ch_2") == []
        assert client.find_interrupts(run_id="run_1", reason="hook_gate") == [(PENDING, None)]


def test_the_platform_takes_whole_ids_and_the_error_says_so(platform: FakePlatform) -> None:
    platform.reply("GET", "/agent-runs/run_1/interrupts", 200, envelope([PENDING, SETTLED]))
    result = belt("interrupt", "show", "int", "--run", "run_1", "--api", platform.url)
    assert result.exit_code == 3
    assert "with --api give the whole interrupt id" in result.stderr
    assert "did you mean int_1, int_2?" in result.stderr
    result = belt("interrupt", "resolve", "k2m9", "allow", "--api", platform.url)
    assert result.exit_code == 3
    assert "the platform takes full ids only" in result.stderr


def test_watch_polls_each_run_and_reports_what_changed(platform: FakePlatform) -> None:
    route = "/agent-runs/run_1/interrupts"
    opened = PENDING | {"id": "int_3"}
    answers = iter(
        [
            [PENDING, SETTLED],  # at the start: int_1 waits, int_2 is history
            [PENDING, SETTLED, opened],
            [PENDING | {"status": "expired", "resolution": "allow"}, SETTLED, opened],
            [PENDING, SETTLED, opened | {"status": "weird"}],  # hostile: nothing belt knows
        ]
    )

    def sleep(seconds: float) -> None:
        assert seconds == 0.5
        platform.reply("GET", route, 200, envelope(next(answers)))

    sleep(0.5)
    with Platform(platform.url) as client:
        with pytest.raises(BeltError, match="watch needs --run and a run.s whole id"):
            next(client.watch_interrupts(run_ids=[], interval=0.5))
        events = client.watch_interrupts(run_ids=["run_1"], interval=0.5, sleep=sleep)
        seen = [(e["event"], e["interrupt"]["id"]) for e, _ in zip(events, range(3), strict=False)]
    assert seen == [("pending", "int_1"), ("opened", "int_3"), ("expired", "int_1")]


def test_watch_warns_while_the_platform_is_unreachable() -> None:
    naps: list[float] = []
    with Platform(f"http://127.0.0.1:{closed_port()}") as client:
        events = client.watch_interrupts(run_ids=["run_1"], interval=2, sleep=naps.append)
        first, second = next(events), next(events)
    assert first["event"] == second["event"] == "warning"
    assert "cannot reach http://127.0.0.1" in first["message"]
    assert naps == [2]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json at all", "invalid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100 levels"),
        (b'{"data": ' + b"1" * 5000 + b"}", "an integer has 5000 digits"),
        (b'{"data": "\\udc00"}', "lone surrogate \\udc00"),
        (b'{"data": NaN}', "NaN is not a JSON number"),
    ],
)
def test_a_hostile_answer_is_a_clear_remote_failure(
    platform: FakePlatform, body: bytes, reason: str
) -> None:
    platform.reply("POST", "/interrupts/int_1/resolve", 200, body)
    with pytest.raises(BeltError) as caught:
        with Platform(platform.url) as client:
            client.resolve_interrupt(interrupt_id="int_1", decision="allow")
    assert caught.value.exit_code == ExitCode.FAILURE  # it answered: not exit 6
    assert caught.value.message.startswith(
        f"{platform.url}/interrupts/int_1/resolve answered HTTP 200 with a body that"
    )
    assert reason in caught.value.message


def test_an_api_trickling_its_head_fails_at_the_total_deadline_as_no_answer() -> None:
    with hostile.hostile_server(hostile.slow_head()) as url:
        with pytest.raises(Unreachable, match="did not answer within 1s"):
            with Platform(url, timeout=1.0) as client:
                client.list_interrupts(run_id="run_1")


def test_an_api_trickling_its_body_fails_at_the_total_deadline_naming_the_status() -> None:
    with hostile.hostile_server(hostile.slow_body()) as url:
        with pytest.raises(BeltError) as caught:
            with Platform(url, timeout=1.0) as client:
                client.list_interrupts(run_id="run_1")
    assert caught.value.exit_code == ExitCode.FAILURE  # it answered, then too slowly
    assert caught.value.message == (
        f"{url}/agent-runs/run_1/interrupts answered HTTP 200, but its body did not all arrive "
        "within 1s"
    )


def test_an_endless_api_answer_is_cut_at_the_cap() -> None:
    with hostile.hostile_server(hostile.endless()) as url:
        with pytest.raises(BeltError, match="the answer is larger than 16384 KiB") as caught:
            with Platform(url, timeout=30.0) as client:
                client.list_interrupts(run_id="run_1")
    assert caught.value.exit_code == ExitCode.FAILURE
    assert "answered HTTP 200" in caught.value.message


def test_a_broken_api_url_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match=r"--api is not a valid URL \(Invalid IPv6 URL\)"):
        Platform("http://[::1/x")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://xn--/", "has a host that is not a valid domain name"),
        ("http://\udcff/", "must be a URL without spaces, control characters or lone surrogates"),
        ("http://h:99999/", "port 99999 is out of range (1-65535)"),
    ],
)
def test_urls_the_client_cannot_use_are_invalid_input(url: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(f"--api {reason}")):
        Platform(url)
