"""`belt interrupt auto --api`: against `belt serve` the rule that settled a gate is in the
server's trail, through belt's own route; against another API only the spec's resolve is sent.
`belt serve`'s app on a real HTTP server on port 0, a real store."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.errors import InvalidInput
from belt.records.interrupts import read_record, rule_settlement
from belt.rules.approvals import load_rules
from belt.server.app import create_app
from belt.store import Store
from tests.cli.runner import Result, belt
from tests.fake_platform import FakePlatform, envelope
from tests.loopback import CLIENT
from tests.servers import running
from tests.test_approvals import EXAMPLE, gate
from tests.test_approvals_cli import pending

TOKEN = "tok_approvals_api"
DIGEST = load_rules(EXAMPLE).digest


def auto(url: str, *extra: str) -> Result:
    """``belt interrupt auto --once --json`` against ``url`` for run ar_one."""
    return belt(
        "interrupt", "auto", "--rules", str(EXAMPLE), "--api", url, "--run", "ar_one", "--once",
        "--json", *extra,
    )  # fmt: skip


@pytest.mark.parametrize("token", [True, False], ids=["with a token", "without a token"])
def test_auto_against_belt_serve_records_the_rule_through_the_api(
    store: Store, token: bool
) -> None:
    allowed = gate(store, "read_file", {"path": "/srv/a"})
    denied = gate(store, "delete_file", {"path": "/etc/passwd"})
    left = gate(store, "send_email")
    with running(create_app(store=store, token=TOKEN if token else None, sweep_interval=0)) as url:
        result = auto(url, *(("--api-key", TOKEN) if token else ()))
    assert result.exit_code == 0, result.stderr
    lines = {line["interrupt"]: line for line in map(json.loads, result.stdout.splitlines())}
    assert {i: line["decision"] for i, line in lines.items()} == {
        allowed["id"]: "allow",
        denied["id"]: "deny",
        left["id"]: "ask",
    }
    logged = belt("interrupt", "log", "--json")
    assert logged.exit_code == 0, logged.stderr
    trails = {item["id"]: item for item in logged.json()}
    assert set(trails) == {allowed["id"], denied["id"]}
    assert trails[allowed["id"]]["trail"] == {
        "how": "rule",
        "file": str(EXAMPLE),
        "rule": "reads",
        "digest": DIGEST,
        "door": "api",
        "token": token,
    }
    assert trails[denied["id"]]["trail"]["rule"] == "other deletes"
    with_token = "with a token" if token else "without a token"
    assert trails[allowed["id"]]["settled_by"] == (
        f"rule reads of {EXAMPLE} ({DIGEST[:19]}) via the API ({with_token})"
    )
    shown = belt("interrupt", "show", allowed["id"])
    assert shown.exit_code == 0, shown.stderr
    assert f"rule reads of {EXAMPLE} ({DIGEST[:19]}) via the API ({with_token})" in shown.stdout
    # The trail stays belt's own: the resolution's data is the rule's reason, nothing more.
    record = read_record(store=store, interrupt_id=allowed["id"])
    assert record["resolved_data"] == {"reason": "reading changes nothing"}


def rule_form(**changes: Any) -> dict[str, Any]:
    """A well-formed body of ``POST /_belt/interrupts/{id}/resolve``, with ``changes`` made to
    its ``by`` (a value of None drops the key)."""
    by = {"how": "rule", "file": "rules.toml", "rule": "reads", "digest": DIGEST}
    by.update(changes)
    return {"decision": "allow", "by": {k: v for k, v in by.items() if v is not None}}


MALFORMED = [
    ({"decision": "allow"}, 'by: expected {"how": "rule", "file", "rule", "digest"}, got null'),
    (
        {"decision": "allow", "by": "reads"},
        "by: expected {",
    ),
    ({**rule_form(), "token": True}, "token: unknown field"),
    (rule_form(how="person"), 'by.how: expected "rule", got person'),
    (rule_form(door="cli"), "by.door: unknown field"),
    (rule_form(digest=None), "by.digest: missing"),
    (rule_form(file="x" * 4097), "by.file: 4097 characters, more than 4096"),
    (rule_form(rule="r" * 1025), "by.rule: 1025 characters, more than 1024"),
    (rule_form(rule=12), "by.rule: expected a printable string, got an integer"),
    (rule_form(rule="reads\x1b[2J"), "by.rule: expected a printable string, got a string"),
    (rule_form(file=" "), "by.file: expected a printable string, got a string"),
    (rule_form(digest="sha256:abc"), "by.digest: expected sha256: and 64 lowercase hex digits"),
    (rule_form(digest="sha256:" + "A" * 64), "by.digest: expected sha256: and 64 lowercase hex"),
    (rule_form(digest="md5:" + "a" * 64), "by.digest: expected sha256: and 64 lowercase hex"),
]


def test_a_malformed_rule_form_is_refused_naming_the_field_and_nothing_is_settled(
    store: Store,
) -> None:
    item = gate(store, "read_file")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with running(create_app(store=store, token=TOKEN, sweep_interval=0)) as url:
        route = f"{url}/_belt/interrupts/{item['id']}/resolve"
        with httpx.Client(headers=auth) as client:
            answers = [client.post(route, json=body) for body, _ in MALFORMED]
            unauthorized = CLIENT.post(route, json=rule_form())
            not_json = client.post(route, content=json.dumps(rule_form()))
            assert read_record(store=store, interrupt_id=item["id"])["status"] == "pending"
            accepted = client.post(route, json=rule_form())
            again = client.post(route, json=rule_form())
    for (body, detail), answer in zip(MALFORMED, answers, strict=True):
        assert answer.status_code == 422, (body, answer.text)
        assert answer.json()["detail"].startswith(detail), answer.json()["detail"]
    assert unauthorized.status_code == 401
    assert not_json.status_code == 415
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["data"]["status"] == "resolved"
    assert "by" not in accepted.json()["data"] and "resolved_by" not in accepted.json()["data"]
    assert again.status_code == 409
    record = read_record(store=store, interrupt_id=item["id"])
    assert record["resolved_by"] == {**rule_form()["by"], "door": "api", "token": True}


def test_auto_against_another_api_sends_nothing_of_the_trail() -> None:
    """A platform without belt's routes gets the spec's resolve, no rule, file or digest; the
    only belt route asked is the look that tells belt serve from it (a GET, answered 404)."""
    ids = ["int_read000001", "int_read000002"]
    with FakePlatform() as platform:
        platform.reply(
            "GET",
            "/agent-runs/ar_platform/interrupts",
            200,
            envelope([pending(i, "read_file") for i in ids]),
        )
        for i in ids:
            resolved = {**pending(i, "read_file"), "status": "resolved", "resolution": "allow"}
            platform.reply("POST", f"/interrupts/{i}/resolve", 200, envelope(resolved))
        result = belt(
            "interrupt", "auto", "--rules", str(EXAMPLE), "--api", platform.url,
            "--run", "ar_platform", "--once",
        )  # fmt: skip
        asked = [(r.method, r.path) for r in platform.requests]
        sent = [r.json() for r in platform.requests if r.method == "POST"]
    assert result.exit_code == 0, result.stderr
    assert asked == [
        ("GET", "/agent-runs/ar_platform/interrupts"),
        ("GET", "/_belt/interrupts/batch"),
        ("POST", f"/interrupts/{ids[0]}/resolve"),
        ("POST", f"/interrupts/{ids[1]}/resolve"),
    ]
    assert sent == [{"decision": "allow", "data": {"reason": "reading changes nothing"}}] * 2
    lines = result.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [[i, "allow"] for i in ids]
    assert all(line.endswith('rule "reads": reading changes nothing') for line in lines)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FORM_KEYS = st.sampled_from(["how", "file", "rule", "digest", "door", "x"])
FORMS = st.fixed_dictionaries(
    {
        "how": st.just("rule"),
        "file": st.text(min_size=1, max_size=30),
        "rule": st.text(min_size=1, max_size=30),
        "digest": st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True) | st.text(max_size=10),
    }
)


@settings(max_examples=200, deadline=None)
@given(
    by=FORMS | JSON | st.dictionaries(FORM_KEYS, JSON | st.just("rule"), max_size=5),
    extra=st.dictionaries(st.sampled_from(["decision", "data", "x"]), JSON, max_size=2),
)
def test_any_body_is_a_rule_settlement_or_refused_by_name(by: Any, extra: dict[str, Any]) -> None:
    # What belt serve's own resolve route takes from a caller: a checked rule form, or a clean
    # refusal (exit 5, a 422) naming the field, with nothing unprintable in its words.
    try:
        settled = rule_settlement({**extra, "by": by}, token=True)
    except InvalidInput as refused:
        assert refused.exit_code == 5
        assert refused.message.isprintable()
        return
    assert set(settled) == {"how", "file", "rule", "digest", "door", "token"}
    assert all(settled[key].isprintable() for key in ("file", "rule"))
    assert (settled["how"], settled["door"], settled["token"]) == ("rule", "api", True)
