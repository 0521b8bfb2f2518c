"""The inspector's JSON API on `belt serve`: deliveries, detail, replay, kept tests, runs, gates,
the live stream, and the page's token and host rules. Real HTTP to a real server on port 0."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.engine.entrypoints import run_scenario
from belt.outgoing.signing import signed_headers
from belt.records.interrupts import os_user
from belt.records.journal import JOURNAL, SERVE
from belt.server.app import create_app
from belt.server.inspector.deliveries import served_summary
from belt.server.inspector.resend import scenario_file
from belt.store import Store, open_store
from tests.cli.runner import belt
from tests.hookapp import hook_app
from tests.loopback import CLIENT
from tests.servers import REFUSED, running
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "examples" / "policy.toml"
TOKEN = "tok-inspector-7f3a"
SECRET = "whsec_" + "aW5zcGVjdG9yLXRlc3Qtc2VjcmV0LWtleQ=="
JSON = {"content-type": "application/json"}


def payload(tool: str = "delete_file", path: str = "/var/lib/app/production.db", **extra: Any):
    return {
        "event": "agent.tool_call",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "agent_id": "ag_insp",
        "chat_id": "ch_insp",
        "run_id": "ar_insp",
        "turn_count": 1,
        "data": {"tool": tool, "arguments": {"path": path}},
        **extra,
    }


def inspect(url: str, path: str, **params: Any) -> Any:
    reply = CLIENT.get(f"{url}/inspector{path}", params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()["data"]


def gated_scenario(tmp_path: Path, hook_url: str) -> Path:
    """The guarded agent: a policy webhook on tool calls and turns, then a gate."""
    doc = {
        "agent": {
            "name": "guarded",
            "hooks": [
                {"event": "agent.tool_call", "type": "webhook", "handler": f"{hook_url}/hooks/tc"},
                {"event": "agent.turn_start", "type": "webhook", "handler": f"{hook_url}/hooks/ts"},
                {"event": "agent.tool_call", "type": "gate", "timeout": 600},
            ],
        },
        "turns": [
            {
                "user": "Clean up",
                "model": [
                    {
                        "say": "Deleting the database.",
                        "tool_calls": [
                            {"name": "delete_file", "arguments": {"path": "/var/lib/x.db"}}
                        ],
                    },
                    {
                        "say": "Deleting the temp file.",
                        "tool_calls": [
                            {
                                "name": "delete_file",
                                "arguments": {"path": "/tmp/old.txt"},
                                "result": "deleted /tmp/old.txt",
                            }
                        ],
                    },
                    {"say": "Done."},
                ],
            }
        ],
    }
    path = tmp_path / "guarded.json"
    path.write_text(json.dumps(doc))
    return path


# -- the page's rules ------------------------------------------------------------------------


def test_the_page_is_open_but_its_data_needs_the_token(store: Store) -> None:
    with running(create_app(store=store, token=TOKEN, sweep_interval=0)) as url:
        page = CLIENT.get(f"{url}/")
        assert page.status_code == 200
        assert "belt inspector" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        script = CLIENT.get(f"{url}/inspector/static/inspector.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert CLIENT.get(f"{url}/inspector/static/secrets.txt").status_code == 404
        refused = CLIENT.get(f"{url}/inspector/deliveries")
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        auth = {"authorization": f"Bearer {TOKEN}"}
        allowed = CLIENT.get(f"{url}/inspector/deliveries", headers=auth)
        assert allowed.status_code == 200
        assert allowed.json()["data"]["total"] == 0


def test_without_a_token_only_loopback_hosts_and_json_writes_are_answered(served: str) -> None:
    rebound = CLIENT.get(f"{served}/inspector/deliveries", headers={"host": "evil.example:8787"})
    assert rebound.status_code == 403
    assert "loopback" in rebound.json()["detail"]
    for host in ("localhost:8787", "127.0.0.1", "[::1]:8787"):
        assert CLIENT.get(f"{served}/inspector/gates", headers={"host": host}).status_code == 200
    form = CLIENT.post(
        f"{served}/inspector/replay",
        content=b'{"ids": []}',
        headers={"content-type": "text/plain"},
    )
    assert form.status_code == 415


def test_the_inspector_is_imported_only_when_first_asked() -> None:
    code = (
        "import sys\n"
        "from belt.server.app import create_app\n"
        "from belt.store import Store\n"
        "import tempfile\n"
        "create_app(store=Store(tempfile.mkdtemp()))\n"
        "print('belt.server.inspector.page' in sys.modules)\n"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_an_open_stream_ends_when_the_server_stops(store: Store) -> None:
    app = create_app(store=store, sweep_interval=0)
    with running(app) as url, httpx.stream("GET", f"{url}/inspector/stream") as stream:
        lines = stream.iter_lines()
        assert json.loads(next(lines))["type"] == "hello"
    # Leaving `running` stopped the server although the stream was open: it did not hang.


def test_belt_serve_stops_at_once_with_a_page_streaming(belt_home: Path) -> None:
    import os
    import re
    import signal
    import threading

    server = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0"],
        env={**os.environ, "BELT_HOME": str(belt_home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        url = re.search(r"listening on (http://\S+) ", server.stderr.readline())
        assert url, "no start-up line"
        opened = threading.Event()
        lines: list[str] = []

        def watch() -> None:
            with httpx.stream("GET", f"{url.group(1)}/inspector/stream", timeout=60) as stream:
                opened.set()
                lines.extend(stream.iter_lines())

        reader = threading.Thread(target=watch, daemon=True)
        reader.start()
        assert opened.wait(10)
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=10) == 130  # Ctrl-C's exit code
        reader.join(10)
        assert json.loads(lines[0])["type"] == "hello"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stderr is not None:
            server.stderr.close()


# -- deliveries ------------------------------------------------------------------------------


def test_served_and_simulated_deliveries_are_listed_newest_first_with_filters(
    served: str, store: Store, tmp_path: Path
) -> None:
    denied = CLIENT.post(f"{served}/hooks/guard", json=payload())
    assert denied.json()["decision"] == "deny"
    allowed = CLIENT.post(f"{served}/hooks/guard", json=payload(path="/tmp/a"))
    assert allowed.json()["decision"] == "allow"
    broken = CLIENT.post(f"{served}/hooks", json={"event": "agent.tool_call"})
    assert broken.status_code == 422
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]

    every = inspect(served, "/deliveries")
    assert every["total"] == every["matched"] == len(every["items"])
    sources = {item["source"] for item in every["items"]}
    assert sources == {"serve", "sim"}
    stamps = [item["at"] for item in every["items"]]
    assert stamps == sorted(stamps, reverse=True)

    mine = inspect(served, "/deliveries", source="serve", event="agent.tool_call", decision="deny")
    assert [i["id"] for i in mine["items"]][-1].startswith("serve.")
    assert all(i["decision"] == "deny" and i["source"] == "serve" for i in mine["items"])
    assert mine["total"] == every["total"] > mine["matched"]

    invalid = inspect(served, "/deliveries", decision="error")
    assert any(i["status"] == 422 and i["valid"] is False for i in invalid["items"])

    of_run = inspect(served, "/deliveries", run=run_id, source="sim")
    handlers = {i["handler"] for i in of_run["items"]}
    assert "gate" in handlers
    assert all(i["run_id"] == run_id for i in of_run["items"])

    text = inspect(served, "/deliveries", q="/TMP/A")
    assert [i["id"] for i in text["items"]] == [
        i["id"] for i in every["items"] if i["source"] == "serve" and i["decision"] == "allow"
    ][-1:]

    first = inspect(served, "/deliveries", limit=2)
    assert len(first["items"]) == 2 and first["next"] == first["items"][-1]["id"]
    rest = inspect(served, "/deliveries", limit=500, before=first["next"])
    assert [i["id"] for i in first["items"] + rest["items"]] == [i["id"] for i in every["items"]]

    wrong = CLIENT.get(f"{served}/inspector/deliveries", params={"decision": "maybe"})
    assert wrong.status_code == 422
    assert "decision" in wrong.json()["detail"]
    assert CLIENT.get(f"{served}/inspector/deliveries/serve.1").status_code == 404
    assert CLIENT.get(f"{served}/inspector/deliveries/..%2Fetc.9").status_code == 404


def test_history_is_read_from_the_store_so_it_survives_a_restart(store: Store) -> None:
    with running(create_app(store=store, sweep_interval=0)) as first:
        for _ in range(3):
            CLIENT.post(f"{first}/hooks", json=payload())
    with running(create_app(store=store, sweep_interval=0)) as second:
        assert inspect(second, "/deliveries")["total"] == 3


def test_a_damaged_journal_line_is_reported_and_the_rest_listed(served: str, store: Store) -> None:
    CLIENT.post(f"{served}/hooks", json=payload())
    journal = store.root / "logs" / JOURNAL / f"{SERVE}.jsonl"
    with open(journal, "ab") as handle:
        handle.write(b"{not json\n")
    CLIENT.post(f"{served}/hooks", json=payload())
    found = inspect(served, "/deliveries")
    assert found["total"] == 2
    assert any("not valid JSON" in problem for problem in found["problems"])


def test_detail_has_the_bodies_masked_headers_timing_and_the_signature_check(
    store: Store,
) -> None:
    with running(create_app(store=store, secret=SECRET, sweep_interval=0)) as url:
        body = json.dumps(payload()).encode()
        headers = {**JSON, **signed_headers(SECRET, body), "x-api-key": "k-secret-1"}
        assert CLIENT.post(f"{url}/hooks/signed", content=body, headers=headers).status_code == 200
        forged = {**JSON, **signed_headers("whsec_" + "b3RoZXItc2VjcmV0LWtleS0xMjM0NTY=", body)}
        assert CLIENT.post(f"{url}/hooks/signed", content=body, headers=forged).status_code == 401
        items = inspect(url, "/deliveries")["items"]
        assert [i["signature"] for i in items] == ["failed", "verified"]
        detail = inspect(url, f"/deliveries/{items[1]['id']}")
    assert detail["request"] == payload()
    assert detail["response"] == {"decision": "allow"}
    assert detail["signature"]["verified"] is True
    assert detail["signature"]["webhook_id"] == headers["webhook-id"]
    assert detail["headers"]["webhook-signature"] == "***"
    assert detail["headers"]["x-api-key"] == "***"
    assert detail["headers"]["content-type"] == "application/json"
    assert "k-secret-1" not in json.dumps(detail)
    assert detail["timing"]["duration_ms"] >= 0
    assert detail["attempts"] == [items[1]["id"]]
    assert detail["validation"] == {"valid": True, "problems": []}


def test_a_simulated_deliverys_detail_shows_its_override_and_what_was_ignored(
    store: Store, tmp_path: Path
) -> None:
    answer = {"decision": "allow", "override": {"model": "small"}, "colour": "red"}
    with hook_app(lambda name, payload: answer) as app:
        hook = {"event": "agent.turn_start", "type": "webhook", "handler": f"{app.url}/h"}
        doc = {"agent": {"hooks": [hook]}, "turns": [{"user": "hi", "model": [{"say": "yo"}]}]}
        path = tmp_path / "s.json"
        path.write_text(json.dumps(doc))
        run_scenario(scenario=path)
    with running(create_app(store=store, sweep_interval=0)) as url:
        (item,) = inspect(url, "/deliveries", source="sim")["items"]
        detail = inspect(url, f"/deliveries/{item['id']}")
    assert detail["override"] == {"model": "small"}
    assert detail["response"]["override"] == {"model": "small"}
    assert detail["warnings"] == ["colour: unknown key in the answer, ignored"]
    assert "override" in detail["response_note"]


# -- replay ----------------------------------------------------------------------------------


def replay(url: str, body: dict[str, Any]) -> httpx.Response:
    return CLIENT.post(f"{url}/inspector/replay", json=body, timeout=60)


def test_an_edited_replay_sends_the_edited_body_and_compares_the_answers(served: str) -> None:
    CLIENT.post(f"{served}/hooks/guard", json=payload())
    (delivery,) = inspect(served, "/deliveries")["items"]
    edited = payload(path="/tmp/now-allowed")
    with hook_app(lambda name, got: {"decision": "allow", "reason": "edited"}) as hooks:
        reply = replay(
            served,
            {
                "ids": [delivery["id"]],
                "payload": edited,
                "target": {"kind": "url", "value": hooks.url},
            },
        )
        assert reply.status_code == 200, reply.text
        assert hooks.received == [("", edited)]
    (row,) = reply.json()["data"]["rows"]
    assert row["recorded"]["decision"] == "deny"
    assert row["replayed"]["decision"] == "allow"
    assert row["replayed"]["reason"] == "edited"
    assert row["changed"] == ["decision"]
    assert row["payload"] == edited
    journal = open_store().read_log(JOURNAL, "replay")
    assert journal[-1]["request"] == edited


def test_an_edited_payload_is_checked_before_anything_is_sent(served: str) -> None:
    CLIENT.post(f"{served}/hooks/guard", json=payload())
    (delivery,) = inspect(served, "/deliveries")["items"]
    with hook_app() as hooks:
        reply = replay(
            served,
            {
                "ids": [delivery["id"]],
                "payload": {"event": "agent.tool_call", "turn_count": "one"},
                "target": {"kind": "url", "value": hooks.url},
            },
        )
        assert hooks.received == []
    assert reply.status_code == 422
    assert "run_id" in reply.json()["detail"]


def test_a_served_request_replays_to_this_servers_decider_and_a_run_to_its_hooks(
    served: str, tmp_path: Path
) -> None:
    CLIENT.post(f"{served}/hooks/guard", json=payload())
    (delivery,) = inspect(served, "/deliveries")["items"]
    own = replay(served, {"ids": [delivery["id"]], "target": {"kind": "own"}}).json()["data"]
    assert own["rows"][0]["replayed"]["decision"] == "deny"
    assert own["rows"][0]["changed"] == []

    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    whole = replay(served, {"run": run_id, "target": {"kind": "own"}}).json()["data"]
    rows = {(r["event"], r["recorded"]["decision"]) for r in whole["rows"]}
    assert ("agent.tool_call", "deny") in rows
    assert all(r["recorded"]["decision"] != "suspend" for r in whole["rows"])
    assert whole["summary"] == {
        "replayed": 4,
        "changed": 0,
        "decisions_changed": 0,
        "injections_changed": 0,
        "errors": 0,
    }
    gate = inspect(served, "/deliveries", run=run_id, decision="suspend")["items"][0]
    alone = replay(served, {"ids": [gate["id"]], "target": {"kind": "own"}}).json()["data"]
    assert "no handler" in alone["rows"][0]["replayed"]["error"]


def test_a_replay_to_a_policy_names_the_policy_by_its_path(served: str) -> None:
    CLIENT.post(f"{served}/hooks/guard", json=payload())
    (delivery,) = inspect(served, "/deliveries")["items"]
    given = f"{POLICY.parent}/./{POLICY.name}"  # as typed; the report names the path itself
    target = {"kind": "policy", "value": given}
    report = replay(served, {"ids": [delivery["id"]], "target": target}).json()["data"]
    assert report["target"] == f"policy {POLICY}"
    assert report["rows"][0]["replayed"]["decision"] == "deny"


@pytest.fixture
def served_with_a_handler(store: Store) -> Iterator[str]:
    """The example policy's server, started with a py: handler a replay may call."""
    from belt.rules.policy import load_policy
    from belt.server.deciders import policy_decider

    decide = policy_decider(load_policy(POLICY))
    app = create_app(
        store=store, decide=decide, sweep_interval=0, in_process=["tests.pyhooks:allow"]
    )
    with running(app) as url:
        yield url


def test_a_filter_replay_counts_the_changes_and_a_kept_test_runs_under_belt_test(
    served_with_a_handler: str, tmp_path: Path
) -> None:
    served = served_with_a_handler
    for path in ("/var/lib/a.db", "/tmp/b", "/etc/passwd"):
        CLIENT.post(f"{served}/hooks/guard", json=payload(path=path))
    allow_all = {"kind": "py", "value": "tests.pyhooks:allow"}
    body = {"filter": {"event": "agent.tool_call", "source": "serve"}, "target": allow_all}
    report = replay(served, body).json()["data"]
    assert report["summary"]["replayed"] == 3
    assert report["summary"]["decisions_changed"] == 2
    changed = [row for row in report["rows"] if row["changed"]]

    reply = CLIENT.post(
        f"{served}/inspector/scenario",
        json={
            "id": changed[0]["delivery_id"],
            "target": allow_all,
            "expect": {"decision": "allow", "injected": False},
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-disposition"].endswith('.toml"')
    kept = tmp_path / "kept.toml"
    kept.write_text(reply.text)
    document = tomllib.loads(reply.text)
    assert document["agent"]["hooks"][0]["handler"] == "py:tests.pyhooks:allow"
    assert document["turns"][0]["model"][0]["tool_calls"][0]["arguments"] == {
        "path": "/var/lib/a.db"
    }
    passed = belt("test", str(kept))
    assert passed.exit_code == 0, passed.stdout + passed.stderr

    recorded = CLIENT.post(
        f"{served}/inspector/scenario",
        json={
            "id": changed[0]["delivery_id"],
            "target": allow_all,
            "expect": {"decision": "deny", "reason": "only /tmp deletions allowed"},
        },
    )
    kept.write_text(recorded.text)
    failed = belt("test", str(kept))
    assert failed.exit_code == 1, failed.stdout + failed.stderr
    assert "FAIL" in failed.stdout


def test_too_many_or_no_deliveries_are_refused(served: str) -> None:
    nothing = replay(served, {"filter": {"event": "agent.complete"}, "target": {"kind": "own"}})
    assert nothing.status_code == 422
    assert "nothing to replay" in nothing.json()["detail"]
    both = replay(served, {"ids": [], "run": "ar_x"})
    assert both.status_code == 422
    wrong = replay(served, {"ids": ["serve.1"], "target": {"kind": "ftp", "value": "x"}})
    assert wrong.status_code == 422
    assert "target.kind" in wrong.json()["detail"]


# -- runs and gates --------------------------------------------------------------------------


def test_a_run_shows_its_timeline_with_deliveries_under_each_boundary(
    served: str, tmp_path: Path
) -> None:
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    runs = inspect(served, "/runs")
    assert [r["id"] for r in runs["items"]] == [run_id]
    view = inspect(served, f"/runs/{run_id}")
    assert view["run"]["state"] == "input_required"
    kinds = [(item["kind"], item.get("role") or item.get("event")) for item in view["timeline"]]
    assert kinds[0] == ("message", "user")
    assert kinds[1] == ("boundary", "agent.turn_start")
    boundaries = [item for item in view["timeline"] if item["kind"] == "boundary"]
    denied = next(b for b in boundaries if b["arguments"] == {"path": "/var/lib/x.db"})
    assert denied["deliveries"][0]["decision"] == "deny"
    assert denied["deliveries"][0]["effect"] == "tool denied"
    gated = next(b for b in boundaries if b["arguments"] == {"path": "/tmp/old.txt"})
    assert [d["handler"] for d in gated["deliveries"]] == [
        "127.0.0.1:" + served.rsplit(":")[-1],
        "gate",
    ]
    assert gated["deliveries"][1]["effect"].endswith(": pending")
    injected = next(b for b in boundaries if b["event"] == "agent.turn_start")
    assert injected["deliveries"][0]["effect"] == "injected context"
    assert view["gates"][0]["status"] == "pending"
    assert view["gates"][0]["tool"] == "delete_file"
    assert CLIENT.get(f"{served}/inspector/runs/ar_nope").status_code == 404
    # Two model turns: turn_start and the denied call's webhook, then turn_start, the allowed
    # call's webhook and its gate; the policy answered all five, and the summary says so.
    assert (view["hook_summary"]["calls"], view["hook_summary"]["failed"]) == (5, 0)
    assert view["hook_summary_text"] == [{"text": "hooks: 5 call(s), none failed", "failed": False}]


def test_a_runs_view_says_which_hook_calls_failed_and_how_they_counted(
    served: str, tmp_path: Path
) -> None:
    path = tmp_path / "refused.json"
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": f"http://{REFUSED}/guard"}
    turn = {"user": "go", "model": [{"say": "x", "tool_calls": [{"name": "read"}]}, {"say": "ok"}]}
    path.write_text(json.dumps({"agent": {"name": "refused", "hooks": [hook]}, "turns": [turn]}))
    report, _ = run_scenario(scenario=path)
    view = inspect(served, f"/runs/{report['runs'][0]['id']}")
    summary = view["hook_summary"]
    assert (summary["calls"], summary["failed"], summary["counted_allow"]) == (1, 1, 1)
    (head, handler, *_) = view["hook_summary_text"]
    assert head == {"text": "hooks: 1 call(s), 1 failed (1 counted as allow)", "failed": True}
    assert handler["text"].startswith(f"  {REFUSED} (webhook): 1 of 1 failed, counted as allow")


def test_a_gate_allowed_from_the_api_continues_the_run_and_a_second_resolve_says_by_whom(
    served: str, tmp_path: Path, store: Store
) -> None:
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    (gate,) = inspect(served, "/gates")["items"]
    assert gate["tool"] == "delete_file"
    assert gate["on_expiry"] == "allow"
    assert 0 < gate["seconds_left"] <= 600
    url = f"{served}/inspector/gates/{gate['id']}/resolve"
    bad = CLIENT.post(url, json={"decision": "maybe"})
    assert bad.status_code == 422
    reply = CLIENT.post(url, json={"decision": "allow", "data": {"by": "ana", "n": [1, 2]}})
    assert reply.status_code == 200, reply.text
    assert reply.json()["data"]["run"]["continues"] is True
    finished = eventually(
        lambda: inspect(served, f"/runs/{run_id}")["run"]["state"] == "completed",
        "the run completed",
    )
    assert finished
    again = CLIENT.post(url, json={"decision": "deny"})
    assert again.status_code == 409
    problem = again.json()
    assert " via the inspector" in problem["detail"]
    assert problem["settled_by"] == f"{os_user()} via the inspector"
    assert problem["interrupt"]["resolved_data"] == {"by": "ana", "n": [1, 2]}
    assert inspect(served, "/gates")["items"] == []


def test_the_stream_says_what_changed(served: str) -> None:
    with httpx.stream("GET", f"{served}/inspector/stream", timeout=30) as stream:
        lines = stream.iter_lines()
        hello = json.loads(next(lines))
        assert hello == {"type": "hello", "areas": ["deliveries", "runs", "gates"]}
        CLIENT.post(f"{served}/hooks", json=payload())
        changed = json.loads(next(lines))
    assert changed["type"] == "changed"
    assert "deliveries" in changed["areas"]


# -- hostile records and payloads ------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(record=st.dictionaries(st.text(max_size=12), json_values, max_size=8))
def test_any_journal_record_gives_a_row_of_plain_values(record: dict[str, Any]) -> None:
    row = served_summary(7, record)
    assert row["id"] == "serve.7"
    for key in ("event", "tool", "reason", "error", "decision", "chat_id", "run_id"):
        assert row[key] is None or isinstance(row[key], str)
    assert isinstance(row["at"], str) and isinstance(row["handler"], str)


tool_names = st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s)
arguments = st.dictionaries(st.text(max_size=10), json_values, max_size=4)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(tool=tool_names, args=arguments, reason=st.text(max_size=40))
def test_a_kept_scenario_is_always_a_valid_scenario_or_a_clear_error(
    tool: str, args: dict[str, Any], reason: str
) -> None:
    from belt.engine.scenario import scenario_from_document
    from belt.testing.expect import expectations_of

    sent = payload()
    sent["data"] = {"tool": tool, "arguments": args}
    name, media, text = scenario_file(
        payload=sent,
        handler="py:tests.pyhooks:deny",
        expect={"decision": "deny", "reason": reason},
        notes=["a note\nwith [[expect]] on a second line"],
        delivery_id="serve.1",
    )
    document = tomllib.loads(text) if name.endswith(".toml") else json.loads(text)
    loaded = scenario_from_document(document, name, Path("."))
    assert len(expectations_of(loaded)) == 1
    assert document["turns"][0]["model"][0]["tool_calls"][0]["name"] == tool


@pytest.mark.parametrize(
    "event",
    [
        "agent.start",
        "agent.turn_start",
        "agent.turn_complete",
        "agent.tool_result",
        "agent.pre_compact",
        "agent.post_compact",
        "agent.complete",
        "agent.error",
    ],
)
def test_a_kept_scenario_reaches_the_event_it_was_made_from(event: str, tmp_path: Path) -> None:
    from belt.testing.suite import run_suite

    sent = payload()
    sent["event"] = event
    sent["data"] = {"tool": "fetch", "status": "completed", "result": {"ok": 1}, "error": "boom"}
    name, _, text = scenario_file(
        payload=sent,
        handler="py:tests.pyhooks:deny",
        expect={"decision": "deny", "reason": "denied by tests.pyhooks"},
        notes=[],
        delivery_id=None,
    )
    path = tmp_path / name
    path.write_text(text)
    suite = run_suite(paths=[path])
    (result,) = suite.results
    assert result.status == "pass", [o.text for o in result.failures]


def test_an_idle_event_cannot_be_kept() -> None:
    from belt.errors import InvalidInput

    sent = payload()
    sent["event"] = "agent.idle"
    with pytest.raises(InvalidInput, match="does not simulate agent.idle"):
        scenario_file(
            payload=sent, handler="py:x:y", expect={"decision": "allow"}, notes=[], delivery_id=None
        )


bodies = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "ids": st.one_of(json_values, st.lists(st.text(max_size=30), max_size=3)),
            "filter": st.one_of(
                json_values,
                st.dictionaries(
                    st.sampled_from(["event", "decision", "source", "chat", "run", "q", "other"]),
                    st.text(max_size=20),
                ),
            ),
            "run": json_values,
            "target": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {"kind": st.sampled_from(["own", "url", "policy", "py", "x"])},
                    optional={"value": json_values},
                ),
            ),
            "payload": json_values,
            "id": json_values,
            "expect": json_values,
            "decision": json_values,
            "data": json_values,
        },
    ),
)


def test_any_body_to_the_write_routes_is_answered_with_data_or_a_problem(store: Store) -> None:
    """Hostile bodies never crash a route: 200 with data, or a 4xx problem naming what is wrong."""
    with running(create_app(store=store, sweep_interval=0)) as url:
        CLIENT.post(f"{url}/hooks", json=payload())

        @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(body=bodies, route=st.sampled_from(["replay", "scenario", "gates/int_x/resolve"]))
        def check(body: Any, route: str) -> None:
            sent = json.dumps(body).encode()
            reply = CLIENT.post(f"{url}/inspector/{route}", content=sent, headers=JSON, timeout=30)
            assert reply.status_code in (200, 400, 404, 409, 422), reply.text
            if reply.status_code != 200:
                problem = reply.json()
                assert problem["status"] == reply.status_code and problem["detail"]

        check()


def test_a_nexus_run_shows_its_hook_tasks_and_continuations(served: str) -> None:
    report, _ = run_scenario(
        scenario=ROOT / "examples" / "nexus-stop-loop.toml",
        executors=[f"verify=cmd:{ROOT / 'examples' / 'nexus-verify.sh'}"],
    )
    run_id = report["runs"][0]["id"]
    view = inspect(served, f"/runs/{run_id}")
    assert view["run"]["state"] == "completed"
    assert view["continuations"] == 1
    tasks = [item for item in view["timeline"] if item["kind"] == "hook_task"]
    assert [(t["event"], t["outcome"]) for t in tasks] == [
        ("turn_start", "acknowledged"),
        ("stop", "continue"),
        ("stop", "acknowledged"),
    ]
    assert tasks[1]["feedback"] == "Run the tests and report whether they pass."
    assert view["executions"][0]["state"] == "completed"


def test_task_chats_are_linked_both_ways(served: str, tmp_path: Path) -> None:
    doc = {
        "agent": {
            "name": "parent",
            "hooks": [{"event": "agent.tool_call", "type": "task", "handler": "team/reviewer"}],
        },
        "agents": {"team/reviewer": {"model": [{"say": "Reviewed."}]}},
        "turns": [
            {
                "user": "Do it",
                "model": [
                    {"tool_calls": [{"name": "deploy", "arguments": {}, "result": "ok"}]},
                    {"say": "Done."},
                ],
            }
        ],
    }
    path = tmp_path / "task.json"
    path.write_text(json.dumps(doc))
    report, _ = run_scenario(scenario=path)
    run_id = report["runs"][0]["id"]
    view = inspect(served, f"/runs/{run_id}")
    (child,) = view["children"]
    assert child["kind"] == "tasks" and child["agent"] == "team/reviewer"
    (task_run,) = child["runs"]
    boundary = next(i for i in view["timeline"] if i.get("event") == "agent.tool_call")
    assert boundary["deliveries"][0]["effect"] == f"task chat {child['chat_id']}"
    task_view = inspect(served, f"/runs/{task_run['id']}")
    assert task_view["parent"]["run_id"] == run_id
    kinds = {r["id"]: r["kind"] for r in inspect(served, "/runs")["items"]}
    assert kinds == {run_id: "chat", task_run["id"]: "task"}
