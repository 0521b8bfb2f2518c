"""``belt serve --forward-to URL``: hook requests passed on to the user's handler, journalled."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from belt.outgoing.signing import signed_headers
from belt.outgoing.transport import MAX_CONNECTIONS, using
from belt.rules.policy import load_policy
from belt.server.app import create_app, create_app_from_settings
from belt.server.deciders import policy_decider
from belt.server.forward import ANSWER_MAX_BYTES, Forwarder
from belt.store import Store
from belt.wire.platform import LifecycleHookPayload
from belt.wire.samples import sample_payload
from tests.cli.runner import belt
from tests.hookapp import hook_app
from tests.servers import REFUSED, running
from tests.vectors import SECRET

EXAMPLES = Path(__file__).parent.parent / "examples"
BURST = 300


@contextmanager
def forwarding(root: Path, url: str, **options: Any) -> Iterator[tuple[str, Store]]:
    store = Store(root)
    secret = options.pop("secret", None)
    decide = Forwarder(url, secret=secret, **options)
    app = create_app(decide=decide, store=store, secret=secret, sweep_interval=0)
    with running(app) as served:
        yield served, store


def payload(tool: str = "delete_file", path: str = "/etc/passwd") -> dict[str, Any]:
    found = sample_payload("agent.tool_call")
    found["data"] = {"tool": tool, "arguments": {"path": path}}
    return found


def test_the_handler_answers_and_both_are_journalled(tmp_path: Path) -> None:
    answer = {"decision": "deny", "reason": "not on my watch"}
    with (
        hook_app(lambda name, body: answer) as upstream,
        forwarding(tmp_path, f"{upstream.url}/mine") as (url, store),
    ):
        sent = payload()
        reply = httpx.post(f"{url}/hooks/tool-guard", json=sent)
    assert reply.status_code == 200
    assert reply.json() == answer
    [(name, received)] = upstream.received
    assert name == "mine"
    assert received == sent
    [record] = store.read_log("journal", "serve")
    assert record["request"] == sent
    assert record["response"] == answer
    assert record["decision"] == "deny"
    assert record["name"] == "tool-guard"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ((503, None), "it answered HTTP 503"),
        ("not json", "the answer is not a LifecycleHookResponse: invalid JSON"),
        ({"decision": "perhaps"}, "the answer is not a LifecycleHookResponse: decision:"),
        ("x" * (ANSWER_MAX_BYTES + 10), "the answer is larger than 1024 KiB"),
    ],
)
def test_a_failing_handler_is_a_handler_failure(tmp_path: Path, answer: Any, message: str) -> None:
    with (
        hook_app(lambda name, body: answer) as upstream,
        forwarding(tmp_path, upstream.url) as (url, store),
    ):
        reply = httpx.post(f"{url}/hooks", json=payload())
    assert reply.status_code == 500
    assert message in reply.json()["detail"]
    [record] = store.read_log("journal", "serve")
    assert message in str(record["error"])


def test_a_slow_handler_meets_a_total_deadline(tmp_path: Path) -> None:
    with (
        hook_app(lambda name, body: {"decision": "allow"}) as upstream,
        forwarding(tmp_path, upstream.url, timeout=0.3) as (url, _),
    ):
        upstream.hold = lambda name, body: True  # it answers only once the test is over
        reply = httpx.post(f"{url}/hooks", json=payload(), timeout=10)
    assert reply.status_code == 500
    assert "no answer within 0.3 s" in reply.json()["detail"]


def test_an_unreachable_handler_is_named_by_its_host(tmp_path: Path) -> None:
    with forwarding(tmp_path, f"http://{REFUSED}/hooks?token=s3cret") as (url, store):
        reply = httpx.post(f"{url}/hooks", json=payload())
    assert reply.status_code == 500
    assert f"forwarding to {REFUSED} failed: ConnectError" in reply.json()["detail"]
    assert "s3cret" not in json.dumps(store.read_log("journal", "serve"))


def test_requests_are_signed_again_for_a_handler_that_checks(tmp_path: Path) -> None:
    upstream_app = create_app(
        decide=policy_decider(load_policy(EXAMPLES / "policy.toml")),
        store=Store(tmp_path / "upstream"),
        secret=SECRET,
        sweep_interval=0,
    )
    with (
        running(upstream_app) as upstream,
        forwarding(tmp_path / "front", f"{upstream}/hooks", secret=SECRET) as (url, _),
    ):
        body = json.dumps(payload()).encode()
        reply = httpx.post(
            f"{url}/hooks",
            content=body,
            headers={"content-type": "application/json", **signed_headers(SECRET, body)},
        )
    assert reply.status_code == 200
    assert reply.json()["decision"] == "deny"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--forward-to", "ftp://x.example"), "--forward-to 'ftp://x.example': the URL must be"),
        (("--forward-to", "http://x.example", "--policy", "p.toml"), "not both"),
    ],
)
def test_wrong_forward_options_are_refused(args: tuple[str, ...], message: str) -> None:
    result = belt("serve", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_one_client_serves_every_request_for_the_servers_life(tmp_path: Path) -> None:
    decide = Forwarder(f"http://{REFUSED}/hooks")
    seen = []
    with hook_app(lambda name, body: {"decision": "allow"}) as upstream:
        decide.url = f"{upstream.url}/mine"
        app = create_app(decide=decide, store=Store(tmp_path), sweep_interval=0)
        with running(app) as url:
            for _ in range(3):
                assert httpx.post(f"{url}/hooks", json=payload()).status_code == 200
                seen.append(decide.client)
    (client,) = set(map(id, seen))
    assert seen[0] is not None and seen[0].is_closed  # closed when the server stopped
    assert decide.client is None


def test_the_deadline_is_the_documented_total_not_httpx_own_read_timeout() -> None:
    timeouts: list[dict[str, float]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"])
        return httpx.Response(200, json={"decision": "allow"})

    async def ask() -> Any:
        with using(httpx.MockTransport(answer)):
            async with Forwarder("http://handler.test/hooks") as decide:
                return await decide(LifecycleHookPayload.model_validate(payload()))

    verdict = asyncio.run(ask())
    assert verdict.response.decision == "allow"
    assert timeouts == [{"connect": 30.0, "read": 30.0, "write": 30.0, "pool": 30.0}]


def test_a_burst_waits_its_turn_in_the_forwarder_not_in_the_clients_pool() -> None:
    # httpx's pool looks at each of its connections for each request it holds waiting, each
    # time a request comes or goes: a burst of 300 cost seconds of CPU there. The forwarder
    # hands the client no more requests at once than the pool has connections.
    now = most = 0

    class Counting(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            nonlocal now, most
            now += 1
            most = max(most, now)
            await asyncio.sleep(0)  # every other request that may come in comes now
            now -= 1
            return httpx.Response(200, json={"decision": "allow"})

    async def ask() -> list[Any]:
        sent = LifecycleHookPayload.model_validate(payload())
        with using(Counting()):
            async with Forwarder("http://handler.test/hooks") as decide:
                return await asyncio.gather(*(decide(sent) for _ in range(BURST)))

    verdicts = asyncio.run(ask())
    assert [verdict.response.decision for verdict in verdicts] == ["allow"] * BURST
    assert most == MAX_CONNECTIONS


class Upstream:
    """A handler that answers allow after a moment, counting the requests it holds at once."""

    def __init__(self) -> None:
        self.now = self.most = self.served = 0

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            await request.body()
            self.now += 1
            self.most = max(self.most, self.now)
            await asyncio.sleep(0.05)
            self.now -= 1
            self.served += 1
            return Response('{"decision": "allow"}', media_type="application/json")

        return Starlette(routes=[Route("/hooks", hook, methods=["POST"])])


async def burst(url: str, count: int) -> list[bytes]:
    """``count`` hook requests in flight at once, one connection each; the status lines.

    The connections are opened a few at a time (belt serve's listen queue is short, and a
    connection the kernel drops from a full queue is retried a second later), then every
    request is sent together once all are open.
    """
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(payload()).encode()
    request = (
        f"POST /hooks HTTP/1.1\r\nHost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body
    connecting = asyncio.Semaphore(16)
    opened: list[int] = []
    all_open = asyncio.Event()

    async def one() -> bytes:
        async with connecting:
            reader, writer = await asyncio.open_connection(host, int(port))
        opened.append(1)
        if len(opened) == count:
            all_open.set()
        try:
            async with asyncio.timeout(60):
                await all_open.wait()
                writer.write(request)
                await writer.drain()
                answer = await reader.read()
        finally:
            writer.close()
        return answer.partition(b"\r\n")[0]

    return await asyncio.gather(*(one() for _ in range(count)))


def test_a_burst_of_300_requests_is_forwarded_without_a_failure() -> None:
    # The app `belt serve --forward-to` builds from its settings, served in-process behind the
    # same slow-client guard and connection cap (its default).
    upstream = Upstream()
    with running(upstream.app()) as handler:
        settings = {"FORWARD_TO": f"{handler}/hooks", "SWEEP_INTERVAL": "0"}
        with running(create_app_from_settings(settings), max_connections=None) as url:
            statuses = asyncio.run(burst(url, BURST))
    assert statuses == [b"HTTP/1.1 200 OK"] * BURST
    assert upstream.served == BURST
    # One bounded client: never more connections to the handler than its pool holds.
    assert upstream.most <= MAX_CONNECTIONS
