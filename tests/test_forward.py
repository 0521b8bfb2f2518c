"""``belt serve --forward-to URL``: hook requests passed on to the user's handler, journalled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from belt.policy import load_policy
from belt.samples import sample_payload
from belt.server.app import create_app
from belt.server.deciders import policy_decider
from belt.server.forward import ANSWER_MAX_BYTES, forward_decider
from belt.signing import signed_headers
from belt.store import Store
from tests.cli.runner import belt
from tests.hookapp import hook_app
from tests.servers import running
from tests.vectors import SECRET

EXAMPLES = Path(__file__).parent.parent / "examples"


@contextmanager
def forwarding(root: Path, url: str, **options: Any) -> Iterator[tuple[str, Store]]:
    store = Store(root)
    secret = options.pop("secret", None)
    decide = forward_decider(url, secret=secret, **options)
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
    assert message in record["error"]


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
    with forwarding(tmp_path, "http://127.0.0.1:9/hooks?token=s3cret") as (url, store):
        reply = httpx.post(f"{url}/hooks", json=payload())
    assert reply.status_code == 500
    assert "forwarding to 127.0.0.1:9 failed: ConnectError" in reply.json()["detail"]
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
