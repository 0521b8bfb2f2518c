"""The hook routes of ``belt serve``, over real HTTP on a free loopback port."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from belt.errors import InvalidInput, NotFound, UsageError
from belt.outgoing.signing import signed_headers
from belt.rules.policy import load_policy
from belt.server import app as app_module
from belt.server.app import Answer, Delivery, ReplayGuard, create_app
from belt.server.deciders import handler_decider, load_handler, policy_decider
from belt.store import Store
from belt.wire.platform import LifecycleHookPayload, LifecycleHookResponse
from belt.wire.samples import sample_payload
from tests import pyhooks
from tests.loopback import CLIENT
from tests.servers import running
from tests.vectors import SECRET

EXAMPLES = Path(__file__).parent.parent / "examples"
TOKEN = "tok-3f9a1c77e2"


@dataclass
class Served:
    """A running app, its store and what it reported."""

    url: str
    store: Store
    reported: list[dict[str, Any]] = field(default_factory=list)

    def post(self, path: str = "/hooks", body: Any = None, **kwargs: Any) -> httpx.Response:
        if body is not None and "content" not in kwargs:
            kwargs["content"] = json.dumps(body).encode()
        # As belt's webhook handler and the platform send hooks.
        kwargs["headers"] = {"content-type": "application/json", **kwargs.get("headers", {})}
        return CLIENT.post(self.url + path, **kwargs)

    def journal(self) -> list[dict[str, Any]]:
        return self.store.read_log("journal", "serve")


@contextmanager
def serving(root: Path, **options: Any) -> Iterator[Served]:
    store = Store(root)
    served = Served("", store)
    app = create_app(store=store, sweep_interval=0, report=served.reported.append, **options)
    with running(app) as url:
        served.url = url
        yield served


@pytest.fixture(scope="module")
def policy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    decide = policy_decider(load_policy(EXAMPLES / "policy.toml"))
    with serving(tmp_path_factory.mktemp("policy"), decide=decide) as served:
        yield served


def tool_call(path: str, **overrides: Any) -> dict[str, Any]:
    return sample_payload(
        "agent.tool_call", data={"tool": "delete_file", "arguments": {"path": path}}, **overrides
    )


def test_the_policy_decides_and_the_answer_is_a_response(policy_server: Served) -> None:
    denied = policy_server.post(body=tool_call("/etc/passwd"))
    assert denied.status_code == 200
    assert denied.headers["content-type"] == "application/json"
    assert denied.json() == {"decision": "deny", "reason": "only /tmp deletions allowed"}
    allowed = policy_server.post("/hooks/tool-guard", body=tool_call("/tmp/x"))
    assert allowed.status_code == 200
    assert allowed.json() == {"decision": "allow"}


def test_every_hook_request_and_its_answer_are_journalled(policy_server: Served) -> None:
    payload = tool_call("/srv/db", chat_id="ch_journal1")
    reply = policy_server.post("/hooks/guard", body=payload)
    assert reply.status_code == 200
    [record] = [
        r for r in policy_server.journal() if r.get("request", {}).get("chat_id") == "ch_journal1"
    ]
    assert record["kind"] == "hook"
    assert record["route"] == "/hooks/guard"
    assert record["name"] == "guard"
    assert record["status"] == 200
    assert record["request"] == payload
    assert record["response"] == reply.json()
    assert (record["event"], record["tool"], record["decision"]) == (
        "agent.tool_call",
        "delete_file",
        "deny",
    )
    assert record["reason"] == "only /tmp deletions allowed"
    assert record["rule"] == 1
    assert record["duration_ms"] >= 0
    assert record in policy_server.reported


def test_each_rule_answers_and_journals_its_own_verdict_request_after_request(
    policy_server: Served,
) -> None:
    # The answers of a policy's rules are encoded once: rules taken in turns never mix them up.
    expected: list[tuple[dict[str, Any], int | None]] = [
        ({"decision": "deny", "reason": "only /tmp deletions allowed"}, 1),
        ({"decision": "allow"}, 0),
        (
            {
                "inject": {
                    "content": "Reminder: only files under /tmp/ may be deleted.",
                    "role": "system",
                    "ttl_turns": 1,
                    "dedup_key": "delete-policy",
                }
            },
            2,
        ),
        ({"decision": "allow"}, None),
    ]
    sent = []
    for round_ in range(3):
        for n, body in enumerate(
            [
                tool_call("/srv/db"),
                tool_call("/tmp/x"),
                sample_payload("agent.turn_start"),
                sample_payload("agent.complete"),
            ]
        ):
            chat_id = f"ch_turns{round_}n{n}"
            reply = policy_server.post(body={**body, "chat_id": chat_id})
            assert reply.status_code == 200
            assert reply.headers["content-type"] == "application/json"
            assert reply.json() == expected[n][0]
            sent.append((chat_id, expected[n]))
    journal = {r["request"]["chat_id"]: r for r in policy_server.journal() if "request" in r}
    for chat_id, (answer, rule) in sent:
        record = journal[chat_id]
        assert record["response"] == answer
        assert record.get("rule") == rule
        assert record["decision"] == answer.get("decision", "allow")
        assert record.get("injected", False) == ("inject" in answer)


def test_an_invalid_payload_is_422_problem_json(policy_server: Served) -> None:
    bad = sample_payload("agent.tool_call", turn_count=-1)
    del bad["run_id"]
    reply = policy_server.post(body=bad)
    assert reply.status_code == 422
    assert reply.headers["content-type"] == "application/problem+json"
    problem = reply.json()
    assert problem["status"] == 422
    assert problem["title"] == "Unprocessable Content"
    assert "run_id: Field required" in problem["detail"]
    assert "turn_count: Input should be greater than or equal to 0" in problem["errors"]
    assert policy_server.journal()[-1]["status"] == 422


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{not json", "the body is not JSON"),
        (b"[]", "not a LifecycleHookPayload"),
        (json.dumps(sample_payload("agent.start", event="agent.nope")).encode(), "event: Input"),
    ],
)
def test_bodies_that_are_not_payloads_are_422(
    policy_server: Served, body: bytes, detail: str
) -> None:
    reply = policy_server.post(content=body)
    assert reply.status_code == 422
    assert detail in reply.json()["detail"]


def test_a_body_over_one_mebibyte_is_413(policy_server: Served) -> None:
    payload = tool_call("/tmp/x")
    payload["data"]["arguments"]["blob"] = "x" * (1024 * 1024)
    reply = policy_server.post(body=payload)
    assert reply.status_code == 413
    assert reply.json()["title"] == "Payload Too Large"
    assert policy_server.journal()[-1]["status"] == 413


def test_a_chunked_body_over_the_limit_is_413_too(policy_server: Served) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(17):
            yield b" " * 65536

    reply = policy_server.post(content=chunks())
    assert reply.status_code == 413


def test_unknown_routes_and_methods_are_problem_json(policy_server: Served) -> None:
    missing = CLIENT.get(policy_server.url + "/nowhere")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    wrong = CLIENT.get(policy_server.url + "/hooks")
    assert wrong.status_code == 405
    assert wrong.json()["status"] == 405


def test_hook_paths_are_taken_as_their_routes_take_them(tmp_path: Path) -> None:
    with serving(tmp_path / "store") as served:
        for n, path in enumerate(["/hooks", "/hooks/", "/hooks/team/guard", "/hooks/a%20b"]):
            body = sample_payload("agent.turn_start", chat_id=f"ch_path{n}")
            assert served.post(path, body=body).status_code == 200
        assert CLIENT.put(served.url + "/hooks/x", json={}).status_code == 405
        records = [r for r in served.journal() if "request" in r]
    assert [(r["route"], r["name"]) for r in records] == [
        ("/hooks", None),
        ("/hooks/", ""),
        ("/hooks/team/guard", "team/guard"),
        ("/hooks/a b", "a b"),
    ]


def test_under_a_root_path_the_hook_routes_answer_as_before(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    app = create_app(store=store, sweep_interval=0)

    async def mounted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        # As a server started with a root path gives it: the full path and the root.
        if scope["type"] == "http":
            scope = {**scope, "root_path": "/belt", "path": "/belt" + scope["path"]}
        await app(scope, receive, send)

    with running(mounted) as url:
        body = sample_payload("agent.turn_start")
        reply = CLIENT.post(url + "/hooks/guard", json=body)
        assert reply.status_code == 200, reply.text
    [record] = store.read_log("journal", "serve")
    assert (record["route"], record["name"], record["status"]) == (
        "/belt/hooks/guard",
        "guard",
        200,
    )


def test_healthz_answers(policy_server: Served) -> None:
    reply = CLIENT.get(policy_server.url + "/healthz")
    assert reply.status_code == 200
    assert reply.json() == {"status": "ok"}


def test_without_policy_or_handler_every_hook_is_allowed(tmp_path: Path) -> None:
    with serving(tmp_path) as served:
        reply = served.post(body=tool_call("/etc/passwd"))
    assert reply.status_code == 200
    assert reply.json() == {"decision": "allow"}


# A user's handler


def decide(payload: LifecycleHookPayload) -> Any:
    """A handler used by the tests below: its answer depends on the tool."""
    tool = (payload.data or {}).get("tool")
    if tool == "boom":
        raise RuntimeError("handler exploded")
    if tool == "unsayable":
        raise pyhooks.Unsayable
    if tool == "as_dict":
        return {"decision": "deny", "reason": "from a dict"}
    if tool == "as_model":
        return LifecycleHookResponse(decision="stop", system="note")
    if tool == "bad_dict":
        return {"decision": "perhaps"}
    if tool == "extra_keys":
        return {
            "decision": "deny",
            "reason": "r",
            "colour": "red",
            "inject": {"content": "c", "x": 1},
        }
    if tool == "bad_type":
        return "deny"
    return None


async def decide_async(payload: LifecycleHookPayload) -> dict[str, Any]:
    """An async handler."""
    return {"decision": "deny", "reason": f"async saw {payload.event}"}


@pytest.fixture(scope="module")
def handler_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("handler"), decide=handler_decider(decide)) as served:
        yield served


def call_tool(served: Served, tool: str) -> httpx.Response:
    return served.post(body=sample_payload("agent.tool_call", data={"tool": tool, "arguments": {}}))


@pytest.mark.parametrize(
    ("tool", "answer"),
    [
        ("as_dict", {"decision": "deny", "reason": "from a dict"}),
        ("as_model", {"decision": "stop", "system": "note"}),
        ("anything", {}),
    ],
)
def test_a_handler_answers_with_a_dict_a_response_or_none(
    handler_server: Served, tool: str, answer: dict[str, Any]
) -> None:
    reply = call_tool(handler_server, tool)
    assert reply.status_code == 200
    assert reply.json() == answer


def test_a_handlers_unknown_keys_are_ignored_as_in_a_webhooks_answer(
    handler_server: Served,
) -> None:
    # The same function answers as a py: handler and under belt serve --handler alike.
    reply = call_tool(handler_server, "extra_keys")
    assert reply.status_code == 200
    assert reply.json() == {"decision": "deny", "reason": "r", "inject": {"content": "c"}}
    warnings = handler_server.journal()[-1]["warnings"]
    assert warnings == [
        "colour: unknown key in the answer, ignored",
        "inject.x: unknown key in the answer, ignored",
    ]


def test_a_handler_that_raises_is_500_and_the_server_keeps_serving(handler_server: Served) -> None:
    reply = call_tool(handler_server, "boom")
    assert reply.status_code == 500
    assert reply.headers["content-type"] == "application/problem+json"
    assert reply.json()["detail"] == "the handler raised RuntimeError: handler exploded"
    assert handler_server.journal()[-1]["error"] == reply.json()["detail"]
    assert call_tool(handler_server, "as_dict").status_code == 200
    # An exception whose message raises when read is still the handler's 500, named by its type.
    reply = call_tool(handler_server, "unsayable")
    assert reply.status_code == 500
    assert reply.json()["detail"] == "the handler raised Unsayable"
    assert call_tool(handler_server, "as_dict").status_code == 200


@pytest.mark.parametrize(
    ("tool", "detail"),
    [
        ("bad_dict", "the handler returned an invalid response: decision: Input should be"),
        ("bad_type", "the handler returned str; expected a dict"),
    ],
)
def test_a_handler_returning_something_else_is_500(
    handler_server: Served, tool: str, detail: str
) -> None:
    reply = call_tool(handler_server, tool)
    assert reply.status_code == 500
    assert reply.json()["detail"].startswith(detail)


def test_an_async_handler_is_awaited(tmp_path: Path) -> None:
    with serving(tmp_path, decide=handler_decider(decide_async)) as served:
        reply = served.post(body=sample_payload("agent.turn_start"))
    assert reply.status_code == 200
    assert reply.json() == {"decision": "deny", "reason": "async saw agent.turn_start"}


def test_a_handler_whose_parameter_is_a_dict_gets_the_json_posted(tmp_path: Path) -> None:
    # As a scenario's py: handler reads it: one handler serves both ways.
    with serving(tmp_path, decide=handler_decider(pyhooks.dict_type)) as served:
        reply = call_tool(served, "delete_file")
    assert reply.status_code == 200
    assert reply.json() == {"decision": "deny", "reason": "dict agent.tool_call"}


def test_load_handler_imports_a_file_or_a_module() -> None:
    from_file = load_handler(f"{EXAMPLES / 'handler.py'}:decide")
    assert callable(from_file)
    assert load_handler("tests.test_server_hooks:decide") is decide
    assert load_handler("json:dumps") is json.dumps


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("no_colon", UsageError, "expected MODULE:FUNC"),
        ("no_such_module_xyz:f", NotFound, "no module named 'no_such_module_xyz'"),
        ("json:nope", NotFound, "json has no attribute 'nope'"),
        ("json:__doc__", InvalidInput, "is not callable"),
        ("missing/file.py:f", NotFound, "no such file"),
    ],
)
def test_load_handler_errors(spec: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        load_handler(spec)


def test_a_handler_file_that_fails_to_import_is_invalid_input(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('nope')\n")
    with pytest.raises(InvalidInput, match="importing .*broken.py failed: nope"):
        load_handler(f"{broken}:f")
    assert not any(name.startswith("belt_handler_broken") for name in sys.modules)


# Signatures


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("signed"), secret=SECRET) as served:
        yield served


def signed_post(served: Served, body: bytes, **header_options: Any) -> httpx.Response:
    headers = signed_headers(SECRET, body, **header_options)
    return served.post(content=body, headers=headers)


def test_a_validly_signed_request_is_answered(signed_server: Served) -> None:
    body = json.dumps(sample_payload("agent.start")).encode()
    reply = signed_post(signed_server, body)
    assert reply.status_code == 200
    assert signed_server.journal()[-1]["webhook_id"].startswith("msg_")


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, r"missing webhook-id, webhook-timestamp, webhook-signature header\(s\)"),
        ({"webhook-signature": "v1,AAAA"}, "does not match the body"),
        # The server reads its own clock: a second may pass between the test's and its own.
        ({"webhook-timestamp": "old"}, r"webhook-timestamp is (999|1000|1001) s old"),
        ({"webhook-timestamp": "new"}, r"webhook-timestamp is (999|1000|1001) s in the future"),
    ],
)
def test_a_bad_signature_is_401_with_the_reason(
    signed_server: Served, headers: dict[str, str], reason: str
) -> None:
    body = json.dumps(sample_payload("agent.start")).encode()
    now = int(time.time())
    stamp = {"old": now - 1000, "new": now + 1000}.get(headers.get("webhook-timestamp", ""))
    sent = signed_headers(SECRET, body, now=stamp) if headers else {}
    if "webhook-signature" in headers:
        sent["webhook-signature"] = headers["webhook-signature"]
    reply = signed_server.post(content=body, headers=sent)
    assert reply.status_code == 401
    assert reply.headers["content-type"] == "application/problem+json"
    assert re.search(reason, reply.json()["detail"]), reply.json()["detail"]


class Counting:
    """A handler that numbers its calls in its reason, so an answer shows which call gave it;
    ``hold`` (when set) keeps each call waiting until it is released."""

    def __init__(self, *, hold: bool = False, fail_first: bool = False) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.fail_first = fail_first

    def __call__(self, payload: LifecycleHookPayload) -> dict[str, Any]:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(30)
        if self.fail_first and self.calls == 1:
            raise RuntimeError("not this time")
        return {"decision": "deny", "reason": f"call {self.calls}"}


def test_a_redelivery_gets_the_first_answer_again_and_is_not_decided_twice(
    tmp_path: Path,
) -> None:
    handler = Counting()
    with serving(tmp_path, secret=SECRET, decide=handler_decider(handler)) as served:
        body = json.dumps(tool_call("/etc/passwd")).encode()
        headers = signed_headers(SECRET, body)
        first = served.post(content=body, headers=headers)
        again = served.post(content=body, headers=headers)
        # A sender's retry signs the same id and body again, at its own time.
        retry = served.post(
            content=body,
            headers=signed_headers(
                SECRET, body, msg_id=headers["webhook-id"], now=int(time.time()) + 1
            ),
        )
        lines = served.journal()
    assert handler.calls == 1
    assert first.status_code == again.status_code == retry.status_code == 200
    assert first.json() == again.json() == retry.json() == {"decision": "deny", "reason": "call 1"}
    assert [line.get("redelivery") for line in lines] == [None, True, True]
    for line in lines[1:]:
        assert line["webhook_id"] == headers["webhook-id"]
        assert (line["event"], line["tool"], line["decision"]) == (
            "agent.tool_call",
            "delete_file",
            "deny",
        )
        assert line["response"] == {"decision": "deny", "reason": "call 1"}
        # Not a request of its own: a replay of the journal delivers the message once.
        assert "request" not in line


def test_a_redelivery_while_the_first_is_decided_waits_for_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = Counting(hold=True)
    waiting = threading.Event()
    first_answer = ReplayGuard.first_answer

    async def seen_waiting(guard: ReplayGuard, delivery: Delivery) -> Answer | None:
        waiting.set()
        return await first_answer(guard, delivery)

    monkeypatch.setattr(ReplayGuard, "first_answer", seen_waiting)
    with serving(tmp_path, secret=SECRET, decide=handler_decider(handler)) as served:
        body = json.dumps(tool_call("/tmp/x")).encode()
        headers = signed_headers(SECRET, body)
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(served.post, content=body, headers=headers)
            assert handler.entered.wait(30)
            again = pool.submit(served.post, content=body, headers=headers)
            assert waiting.wait(30)  # the redelivery came while the first is being decided
            handler.release.set()
            answers = [first.result(30), again.result(30)]
    assert handler.calls == 1
    assert [a.json() for a in answers] == [{"decision": "deny", "reason": "call 1"}] * 2


def test_a_redelivery_of_an_invalid_payload_gets_the_same_422(signed_server: Served) -> None:
    body = json.dumps({"event": "agent.start"}).encode()
    headers = signed_headers(SECRET, body)
    first = signed_post_as(signed_server, body, headers)
    again = signed_post_as(signed_server, body, headers)
    assert first.status_code == again.status_code == 422
    assert again.headers["content-type"] == "application/problem+json"
    assert again.json() == first.json()
    assert signed_server.journal()[-1]["redelivery"] is True


def test_after_a_handler_failure_a_redelivery_is_decided_again(tmp_path: Path) -> None:
    handler = Counting(fail_first=True)
    with serving(tmp_path, secret=SECRET, decide=handler_decider(handler)) as served:
        body = json.dumps(tool_call("/tmp/x")).encode()
        headers = signed_headers(SECRET, body)
        failed = served.post(content=body, headers=headers)
        retried = served.post(content=body, headers=headers)
        again = served.post(content=body, headers=headers)
    assert failed.status_code == 500
    assert retried.status_code == again.status_code == 200
    assert retried.json() == again.json() == {"decision": "deny", "reason": "call 2"}
    assert handler.calls == 2


def test_a_repeated_webhook_id_with_another_body_is_409(signed_server: Served) -> None:
    body = json.dumps(sample_payload("agent.start")).encode()
    headers = signed_headers(SECRET, body)
    first = signed_post_as(signed_server, body, headers)
    assert first.status_code == 200
    other = json.dumps(sample_payload("agent.turn_start")).encode()
    replayed = signed_post_as(
        signed_server, other, signed_headers(SECRET, other, msg_id=headers["webhook-id"])
    )
    assert replayed.status_code == 409
    detail = replayed.json()["detail"]
    assert (
        detail
        == f"webhook-id {headers['webhook-id']} was already delivered with another body (replay)"
    )
    assert signed_server.journal()[-1]["status"] == 409


def signed_post_as(served: Served, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return served.post(content=body, headers=headers)


def test_the_replay_guard_keeps_ids_and_answers_bounded() -> None:
    guard = ReplayGuard(window=10, answers_max_bytes=100)

    def deliver(msg_id: str, now: float) -> str:
        delivery, new = guard.check(msg_id, hashlib.sha256(b"{}").digest(), now, int(now))
        assert delivery is not None
        if new:
            guard.answered(delivery, Answer(200, "application/json", b"x" * 40, {}))
            return "new"
        return "answered" if delivery.answer is not None else "let go"

    assert [deliver("a", 0), deliver("b", 1), deliver("a", 2)] == ["new", "new", "answered"]
    # A third answer is over the budget: the oldest answer is let go, its id is kept.
    assert deliver("c", 3) == "new"
    assert [deliver("a", 4), deliver("b", 5), deliver("c", 5)] == [
        "let go",
        "answered",
        "answered",
    ]
    assert guard.kept_bytes() == 80
    # An id is kept for twice the window (a signature's tolerance either way), then let go.
    assert guard.seen() == ["a", "b", "c"]
    assert deliver("d", 20.5) == "new"
    assert guard.seen() == ["b", "c", "d"]
    assert guard.kept_bytes() == 80
    assert deliver("e", 100) == "new"
    assert guard.seen() == ["e"]
    assert guard.kept_bytes() == 40


def test_the_replay_guard_remembers_at_most_its_count_of_ids_and_refuses_what_it_forgot() -> None:
    guard = ReplayGuard(window=300, ids_max=3)
    digest = hashlib.sha256(b"{}").digest()

    def deliver(msg_id: str, signed: int) -> str:
        delivery, new = guard.check(msg_id, digest, 1000.0, signed)
        if delivery is None:
            return "refused"
        if new:
            guard.answered(delivery, Answer(200, "application/json", b"{}", {}))
            return "new"
        return "answered"

    # A flood of distinct ids: the oldest are forgotten first, the count stays at the cap.
    assert [deliver(f"flood_{n}", 900 + n) for n in range(10)] == ["new"] * 10
    assert guard.seen() == ["flood_7", "flood_8", "flood_9"]
    assert guard.kept_bytes() == 6
    # A forgotten id delivered again as it was signed may be a replay: refused, not decided.
    assert deliver("flood_0", 900) == "refused"
    # So is any id it does not know signed no later than the last id forgotten ...
    assert deliver("late", 906) == "refused"
    # ... but not one signed after it, nor a remembered id's redelivery.
    assert deliver("fresh", 907) == "new"
    assert deliver("flood_9", 909) == "answered"
    # A sender's redelivery of a forgotten id, signed anew, is decided again.
    assert deliver("flood_1", 950) == "new"
    assert len(guard.seen()) == 3
    # A long id is remembered by its digest: the memory of an id does not grow with its length.
    long_id = "msg_" + "x" * 10_000
    assert [deliver(long_id, 960), deliver(long_id, 961)] == ["new", "answered"]
    assert [len(msg_id) for msg_id in guard.seen()][-1] == 71
    # The same long id with another body finds the first body's digest: a replay.
    other, new = guard.check(long_id, hashlib.sha256(b"[]").digest(), 1000.0, 962)
    assert other is not None and not new and other.digest == digest


def test_a_signed_server_forgets_the_oldest_ids_past_its_cap_and_refuses_their_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_module, "IDS_MAX", 2)
    handler = Counting()
    now = int(time.time())
    with serving(tmp_path, secret=SECRET, decide=handler_decider(handler)) as served:
        body = json.dumps(tool_call("/tmp/x")).encode()
        sent = [signed_headers(SECRET, body, now=now - 10 + n) for n in range(3)]
        assert [served.post(content=body, headers=h).status_code for h in sent] == [200] * 3
        replayed = served.post(content=body, headers=sent[0])
        # An unsigned later timestamp in front of the signed one does not pass for it.
        smuggled = CLIENT.post(
            served.url + "/hooks",
            content=body,
            headers=[("content-type", "application/json"), ("webhook-timestamp", str(now))]
            + list(sent[0].items()),
        )
        anew = served.post(
            content=body, headers=signed_headers(SECRET, body, msg_id=sent[0]["webhook-id"])
        )
    assert handler.calls == 4
    assert replayed.status_code == smuggled.status_code == 409
    assert "may be a replay (sign it anew)" in replayed.json()["detail"]
    assert anew.status_code == 200


def test_a_malformed_secret_is_refused_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="secret: expected whsec_"):
        create_app(store=Store(tmp_path), secret="plain")


# Token


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("token"), token=TOKEN) as served:
        yield served


@pytest.mark.parametrize(
    ("authorization", "detail"),
    [
        (None, "missing bearer token"),
        (f"Bearer {TOKEN}x", "wrong bearer token"),
        (f"Basic {TOKEN}", "wrong bearer token"),
    ],
)
def test_with_a_token_every_route_needs_it(
    token_server: Served, authorization: str | None, detail: str
) -> None:
    headers = {"authorization": authorization} if authorization else {}
    for method, path in (("POST", "/hooks"), ("GET", "/agents/hook-events")):
        reply = CLIENT.request(method, token_server.url + path, headers=headers, json={})
        assert reply.status_code == 401
        assert reply.headers["www-authenticate"] == "Bearer"
        assert reply.json()["detail"] == detail


def test_with_the_token_requests_pass_and_healthz_never_needs_it(token_server: Served) -> None:
    reply = token_server.post(
        body=sample_payload("agent.start"), headers={"authorization": f"bearer {TOKEN}"}
    )
    assert reply.status_code == 200
    assert CLIENT.get(token_server.url + "/healthz").status_code == 200


# Nothing secret is kept


def test_no_secret_token_or_query_string_reaches_the_store_or_the_reports(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with serving(root, secret=SECRET, token=TOKEN) as served:
        body = json.dumps(sample_payload("agent.start")).encode()
        headers = {**signed_headers(SECRET, body), "authorization": f"Bearer {TOKEN}"}
        ok = served.post("/hooks/guard?key=QUERYSECRET", content=body, headers=headers)
        assert ok.status_code == 200
        refused = served.post(
            "/hooks?key=QUERYSECRET", content=body, headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert refused.status_code == 401
    stored = "".join(p.read_text() for p in root.rglob("*") if p.is_file())
    reported = json.dumps(served.reported)
    assert len(served.journal()) == 2
    for text in (stored, reported):
        assert "QUERYSECRET" not in text
        assert TOKEN not in text
        assert SECRET not in text
        assert SECRET.removeprefix("whsec_") not in text
        assert headers["webhook-signature"] not in text


def test_a_journal_that_cannot_be_written_does_not_stop_hooks(tmp_path: Path) -> None:
    damaged = tmp_path / "logs" / "journal" / "serve.jsonl"
    damaged.parent.mkdir(parents=True)
    damaged.write_text("not a belt log\n")
    with serving(tmp_path) as served:
        reply = served.post(body=sample_payload("agent.start"))
    assert reply.status_code == 200
    [record] = served.reported
    assert "damaged store file" in record["journal_error"]
    assert damaged.read_text() == "not a belt log\n"
