"""The guard in front of every route of `belt serve` (issue 21): a web page cannot run code,
resolve a gate, overwrite the profile or read a chat, while the SDKs, belt itself and curl go on.

Each refusal is tested with the request a browser would send: a page of another site (its
``Origin``; a ``no-cors`` fetch, ``sendBeacon`` or a ``<form enctype="text/plain">``, whose
bodies are ``text/plain``), and a page whose name was rebound to 127.0.0.1 (its own name as
``Host``). Real HTTP to real servers on port 0; the properties of the header parsing are
checked with hypothesis.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.provisional import domains

from belt.engine.entrypoints import run_scenario
from belt.records.interrupts import create_interrupt, get_interrupt
from belt.records.profile import PROFILE_PATH, read_profile
from belt.server.app import create_app
from belt.server.guard import (
    RequestGuard,
    host_allowed,
    is_json_type,
    is_loopback_name,
    same_origin,
    split_host,
)
from belt.store import Store
from tests.cli.runner import belt
from tests.foreign import FOREIGN, routes_of, try_foreign
from tests.servers import running
from tests.waiting import eventually

JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain;charset=UTF-8"}
"""What a ``no-cors`` fetch of a string and ``navigator.sendBeacon`` send."""
EVIL = {"origin": f"http://{FOREIGN}"}
TOKEN = "tok-guard-5e1d"
HTTP = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
"""The client of every request here: one, since a client made per request (``httpx.get``)
loads the CA bundle each time; it keeps no connection between requests, as those did."""

MARKER_MODULE = """
from pathlib import Path

Path(__file__).with_name("MARKER").write_text("imported in the server's process")


def decide(payload):
    return None
"""


@pytest.fixture
def reported() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def served(store: Store, reported: list[dict[str, Any]]) -> Iterator[str]:
    """`belt serve`'s app without a token, over the test's store, its lines kept."""
    with running(create_app(store=store, sweep_interval=0, report=reported.append)) as url:
        yield url


@pytest.fixture
def marker_hook(tmp_path: Path) -> tuple[str, Path]:
    """A ``py:`` handler whose module writes a file when it is imported, and that file."""
    module = tmp_path / "marker_hook.py"
    module.write_text(MARKER_MODULE)
    return f"py:{module}:decide", tmp_path / "MARKER"


def rebound(url: str) -> dict[str, str]:
    """The headers of a page whose name was rebound to 127.0.0.1, asking its own origin."""
    port = httpx.URL(url).port
    return {"host": f"{FOREIGN}:{port}", "origin": f"http://{FOREIGN}:{port}"}


def refusals(reported: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in reported if r.get("kind") == "api" and r.get("action") == "refused"]


def agent_run(hooks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "chat_id": None,
        "input": {"text": "hello"},
        "agent_config": {"name": "guarded", "hooks": hooks or []},
        "agent_name": "guarded",
    }


def store_files(store: Store) -> dict[str, int]:
    root = store.root
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


# -- every route -------------------------------------------------------------------------------


def test_every_route_refuses_a_foreign_host_and_origin_and_nothing_changes(store: Store) -> None:
    reported: list[dict[str, Any]] = []
    app = create_app(store=store, sweep_interval=0, report=reported.append)
    routes = routes_of(app)
    assert len(routes) > 60  # the hook, platform, agent, inspector and 501 routes
    with running(app) as url:
        HTTP.post(f"{url}/hooks", json={"event": "agent.start"})  # something in the store
        before = store_files(store)
        tried = try_foreign(url, routes)
        after = store_files(store)
    answered = [t for t in tried if t.status not in (403, 415)]
    assert answered == []
    assert {t.status for t in tried if t.kind != "form"} == {403}
    assert {t.status for t in tried if t.kind == "form"} == {415}
    assert after == before
    assert len(refusals(reported)) == len(tried)


# -- gates, the profile, chats ---------------------------------------------------------------


def test_a_gate_is_not_resolved_from_another_site(served: str, store: Store) -> None:
    gate = create_interrupt(store=store, run_id="ar_guard", chat_id="ch_guard", event="agent.start")
    body = json.dumps({"decision": "allow"})
    for route in (f"/interrupts/{gate['id']}/resolve", f"/inspector/gates/{gate['id']}/resolve"):
        form = HTTP.post(served + route, content=body, headers={**TEXT, **EVIL})
        assert form.status_code == 403, form.text
        assert "Origin 'http://evil.example' is not this server's own" in form.json()["detail"]
        no_origin = HTTP.post(served + route, content=body, headers=TEXT)
        assert no_origin.status_code == 415
        assert "send the body as application/json" in no_origin.json()["detail"]
        through_rebinding = HTTP.post(served + route, content=body, headers=rebound(served))
        assert through_rebinding.status_code == 403
        assert through_rebinding.headers["content-type"] == "application/problem+json"
    assert get_interrupt(store=store, interrupt_id=gate["id"])["status"] == "pending"
    # The same resolution, sent as a client sends it, resolves it.
    mine = HTTP.post(f"{served}/interrupts/{gate['id']}/resolve", content=body, headers=JSON)
    assert mine.status_code == 200
    resolved = get_interrupt(store=store, interrupt_id=gate["id"])
    assert (resolved["status"], resolved["resolution"]) == ("resolved", "allow")


def test_the_profile_is_not_overwritten_from_another_site(served: str, store: Store) -> None:
    declaration = json.dumps({"approval_mode": "auto"})
    url = served + PROFILE_PATH
    assert HTTP.put(url, content=declaration, headers={**JSON, **EVIL}).status_code == 403
    assert HTTP.put(url, content=declaration, headers=TEXT).status_code == 415
    assert HTTP.put(url, content=declaration, headers=rebound(served)).status_code == 403
    assert read_profile(store)["revision"] == 0
    assert HTTP.put(url, content=declaration, headers=JSON).status_code == 200
    assert read_profile(store)["revision"] == 1


def test_a_chat_is_not_read_through_a_rebound_host(served: str) -> None:
    started = HTTP.post(f"{served}/agents/run", json=agent_run(), timeout=30)
    assert started.status_code == 200, started.text
    chat_id = started.json()["data"]["assistant_message"]["chat_id"]
    run_id = started.json()["data"]["assistant_message"]["agent_run_id"]
    reads = [
        f"/chats/{chat_id}",
        f"/chats/{chat_id}/messages",
        f"/chats/{chat_id}/status",
        f"/chats/{chat_id}/stream",
        f"/agent-runs/{run_id}/interrupts",
        "/inspector/runs",
        f"/inspector/runs/{run_id}",
        "/inspector/deliveries",
    ]
    port = httpx.URL(served).port
    names = [FOREIGN, f"127.0.0.1.{FOREIGN}", f"localhost.{FOREIGN}", "0.0.0.0", "127.1"]
    for path in reads:
        for name in names:
            reply = HTTP.get(served + path, headers={"host": f"{name}:{port}"}, timeout=30)
            assert reply.status_code == 403, (path, name, reply.text)
            assert chat_id not in reply.text
            assert "loopback" in reply.json()["detail"]
    eventually(
        lambda: HTTP.get(f"{served}/chats/{chat_id}").json()["data"]["status"] == "idle",
        "the chat, read from this machine, went idle",
    )


# -- code is never named over HTTP -----------------------------------------------------------


def test_a_no_cors_agent_run_naming_py_code_runs_nothing(
    served: str, store: Store, marker_hook: tuple[str, Path]
) -> None:
    handler, marker = marker_hook
    hooks = [{"event": "agent.start", "type": "webhook", "handler": handler}]
    body = json.dumps(agent_run(hooks))
    for route in ("/agents/run", "/agents/message", "/agents/messages"):
        no_cors = HTTP.post(served + route, content=body, headers={**TEXT, **EVIL})
        assert no_cors.status_code == 403
        without_origin = HTTP.post(served + route, content=body, headers=TEXT)
        assert without_origin.status_code == 415
        # Sent as a client would, it is still refused: no request names code to run.
        as_json = HTTP.post(served + route, content=body, headers=JSON)
        assert as_json.status_code == 400
        assert as_json.headers["content-type"] == "application/json"
        detail = as_json.json()["detail"]
        assert detail.startswith("agent_config.hooks[0].handler: ")
        assert "belt serve --agents DIR" in detail
    for spelled in (" py:x:y", "PY:x:y", "py:hooks.py:decide"):
        odd = agent_run([{"event": "agent.start", "type": "webhook", "handler": spelled}])
        assert HTTP.post(f"{served}/agents/run", json=odd).status_code == 400
    # A run the server did take has ended: anything the refused ones set going would have too.
    allowed = HTTP.post(f"{served}/agents/run", json=agent_run(), timeout=30)
    chat_id = allowed.json()["data"]["assistant_message"]["chat_id"]
    eventually(
        lambda: HTTP.get(f"{served}/chats/{chat_id}").json()["data"]["status"] == "idle",
        "the allowed run ended",
    )
    assert not marker.exists()
    assert len(store.list_ids("sim")) == 1


def test_an_agents_file_may_name_py_handlers_and_the_replay_may_call_them(
    store: Store, tmp_path: Path, marker_hook: tuple[str, Path]
) -> None:
    handler, marker = marker_hook
    other = tmp_path / "other_hook.py"
    other.write_text(MARKER_MODULE.replace('"MARKER"', '"OTHER-MARKER"'))
    agents = tmp_path / "agents" / "acme"
    agents.mkdir(parents=True)
    hook = {"event": "agent.start", "type": "webhook", "handler": handler}
    (agents / "guarded.json").write_text(json.dumps({"name": "guarded", "hooks": [hook]}))
    app = create_app(store=store, sweep_interval=0, agents=tmp_path / "agents")
    with running(app) as url:
        reply = HTTP.post(
            f"{url}/agents/run",
            json={"chat_id": None, "input": {"text": "hi"}, "agent": "acme/guarded@1"},
        )
        assert reply.status_code == 200, reply.text
        eventually(marker.exists, "the agent file's py: handler ran")
        HTTP.post(f"{url}/hooks", json={"event": "agent.start", "run_id": "ar_1"})
        served_id = HTTP.get(f"{url}/inspector/deliveries", params={"source": "serve"}).json()
        delivery = served_id["data"]["items"][0]["id"]

        def replay(value: str) -> httpx.Response:
            target = {"kind": "py", "value": value}
            return HTTP.post(
                f"{url}/inspector/replay", json={"ids": [delivery], "target": target}, timeout=30
            )

        refused = replay(f"{other}:decide")
        assert refused.status_code == 400, refused.text
        detail = refused.json()["detail"]
        assert "is not a handler this server was started with (it has py:" in detail
        assert "--handler" in detail and "--agents DIR" in detail
        assert replay(handler).status_code == 200
    assert not (tmp_path / "OTHER-MARKER").exists()


def test_a_replay_names_only_the_servers_handler(
    store: Store, marker_hook: tuple[str, Path]
) -> None:
    handler, marker = marker_hook
    with running(create_app(store=store, sweep_interval=0)) as url:
        HTTP.post(f"{url}/hooks", json={"event": "agent.start"})
        items = HTTP.get(f"{url}/inspector/deliveries").json()["data"]["items"]
        body = {"ids": [items[0]["id"]], "target": {"kind": "py", "value": handler}}
        refused = HTTP.post(f"{url}/inspector/replay", json=body, timeout=30)
        assert refused.status_code == 400
        assert "(it has none)" in refused.json()["detail"]
    assert not marker.exists()
    with running(create_app(store=store, sweep_interval=0, in_process=[handler])) as url:
        assert HTTP.post(f"{url}/inspector/replay", json=body, timeout=30).status_code == 200
    assert marker.exists()


# -- browser requests that carry no body, and beacons ------------------------------------------


def test_beacons_and_bodyless_posts_from_another_site_are_refused_once_each(
    served: str, store: Store, reported: list[dict[str, Any]]
) -> None:
    started = HTTP.post(f"{served}/agents/run", json=agent_run(), timeout=30)
    chat_id = started.json()["data"]["assistant_message"]["chat_id"]
    settings_body = "disable_hooks=true"
    tries = [
        # navigator.sendBeacon(url, string): text/plain, with the page's Origin.
        ("POST", "/agents/run", {**TEXT, **EVIL}, json.dumps(agent_run())),
        ("POST", "/interrupts/int_x/resolve", {**TEXT, **EVIL}, '{"decision": "allow"}'),
        # fetch(url, {method: "POST", mode: "no-cors"}) with no body.
        ("POST", f"/chats/{chat_id}/stop", EVIL, None),
        ("POST", "/tools/tool_x/invoke", EVIL, None),
        # A sandboxed frame's Origin is "null".
        ("POST", f"/chats/{chat_id}/stop", {"origin": "null"}, None),
        # <form method=post> (urlencoded) from another site.
        (
            "POST",
            f"/chats/{chat_id}/settings",
            {"content-type": "application/x-www-form-urlencoded", **EVIL},
            settings_body,
        ),
    ]
    for method, path, headers, content in tries:
        reply = HTTP.request(method, served + path, headers=headers, content=content)
        assert reply.status_code == 403, (path, reply.text)
        assert reply.headers["content-type"] == "application/problem+json"
        assert "does not answer other sites' pages" in reply.json()["detail"]
    lines = refusals(reported)
    assert [(r["target"], r["status"]) for r in lines] == [
        (f"{method} {path}", 403) for method, path, _, _ in tries
    ]
    assert len(store.list_ids("sim")) == 1
    chat = HTTP.get(f"{served}/chats/{chat_id}").json()["data"]
    assert chat.get("agent_data", {}).get("disable_hooks") is not True


# -- names, tokens ---------------------------------------------------------------------------


def test_allow_host_adds_a_name_and_the_token_opens_every_host(store: Store) -> None:
    with running(create_app(store=store, sweep_interval=0)) as url:
        port = httpx.URL(url).port
        named = {"host": f"belt.internal:{port}"}
        assert HTTP.get(f"{url}/agents/hook-events", headers=named).status_code == 403
        assert HTTP.get(f"{url}/healthz", headers=named).status_code == 403
        for host in ("localhost", f"LOCALHOST:{port}", "127.0.0.2:9", f"[::1]:{port}"):
            assert HTTP.get(f"{url}/healthz", headers={"host": host}).status_code == 200
    app = create_app(store=store, sweep_interval=0, allow_hosts=["Belt.Internal"])
    with running(app) as url:
        port = httpx.URL(url).port
        for host in (f"belt.internal:{port}", "BELT.INTERNAL", "belt.internal:443"):
            reply = HTTP.get(f"{url}/agents/hook-events", headers={"host": host})
            assert reply.status_code == 200
        for host in (f"x.belt.internal:{port}", f"belt.internal.{FOREIGN}", "belt.internal:"):
            assert HTTP.get(f"{url}/healthz", headers={"host": host}).status_code == 403
        own = {"host": f"belt.internal:{port}", "origin": f"http://belt.internal:{port}"}
        assert HTTP.post(f"{url}/hooks", json={}, headers=own).status_code == 422
    app = create_app(store=store, sweep_interval=0, token=TOKEN)
    with running(app) as url:
        anywhere = {**rebound(url), "authorization": f"Bearer {TOKEN}"}
        assert HTTP.get(f"{url}/agents/hook-events", headers=anywhere).status_code == 200
        assert HTTP.get(f"{url}/agents/hook-events", headers=rebound(url)).status_code == 401
        # The page's files and /healthz hold no data: open to every host, as the page needs.
        assert HTTP.get(f"{url}/healthz", headers={"host": "team.example"}).status_code == 200
        assert HTTP.get(f"{url}/", headers={"host": "team.example"}).status_code == 200
        plain = {**anywhere, "content-type": "text/plain"}
        assert HTTP.post(f"{url}/hooks", content=b"{}", headers=plain).status_code == 415


def test_allow_host_and_the_token_variable_on_the_command_line(belt_home: Path) -> None:
    for bad in ("bad name", "belt.internal:8787", "http://belt.internal", "*"):
        result = belt("serve", "--port", "0", "--allow-host", bad)
        assert result.exit_code == 2, result.stderr
        assert f"--allow-host {bad!r} is not a host name" in result.stderr
        assert "Traceback" not in result.stderr
    server = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", "--sweep-interval", "0"],
        env={**os.environ, "BELT_SERVE_TOKEN": TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "bearer token required" in line, line
        url = re.search(r"listening on (http://\S+) ", line)
        assert url
        events = f"{url.group(1)}/agents/hook-events"
        assert HTTP.get(events).status_code == 401
        headers = {"authorization": f"Bearer {TOKEN}", "host": "anywhere.example"}
        assert HTTP.get(events, headers=headers).status_code == 200
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()


# -- the clients that must keep working ------------------------------------------------------


def test_belts_own_webhooks_reach_the_hook_route_signed_or_not(
    store: Store, tmp_path: Path
) -> None:
    from belt.handlers.webhook import deliver
    from belt.wire.samples import sample_payload

    secret = "whsec_" + "Z3VhcmQtdGVzdC1zZWNyZXQta2V5LTAx"
    with running(create_app(store=store, sweep_interval=0)) as url:
        scenario = tmp_path / "hooked.json"
        hook = {"event": "agent.turn_start", "type": "webhook", "handler": f"{url}/hooks/turn"}
        document = {
            "agent": {"name": "hooked", "hooks": [hook]},
            "turns": [{"user": "hi", "model": [{"say": "Done."}]}],
        }
        scenario.write_text(json.dumps(document))
        run_scenario(scenario=scenario)
    with running(create_app(store=store, sweep_interval=0, secret=secret)) as url:
        signed = deliver(
            f"{url}/hooks/signed", sample_payload("agent.start"), timeout=30, secret=secret
        )
    assert (signed.status, signed.error) == (200, None)
    journal = store.read_log("journal", "serve")
    assert [(r["route"], r["status"]) for r in journal] == [
        ("/hooks/turn", 200),
        ("/hooks/signed", 200),
    ]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not on this machine")
def test_curl_keeps_working(served: str) -> None:
    def curl(*args: str) -> tuple[int, str]:
        done = subprocess.run(
            ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        body, _, status = done.stdout.rpartition("\n")
        return int(status), body

    status, body = curl(f"{served}/healthz")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    hook = json.dumps({"event": "agent.start", "run_id": "ar_1", "chat_id": "ch_1"})
    status, body = curl("-H", "content-type: application/json", "-d", hook, f"{served}/hooks")
    assert status in (200, 422), body
    assert json.loads(body) is not None
    status, body = curl("-H", "Content-Type: application/json", f"{served}/agents/hook-events")
    assert status == 200
    # curl -d alone sends a form type: the answer says what to send instead.
    status, body = curl("-d", hook, f"{served}/hooks")
    assert status == 415
    assert "send the body as application/json" in json.loads(body)["detail"]


def test_the_python_sdk_works_with_the_token(store: Store) -> None:
    inferencesh = pytest.importorskip("inferencesh")
    with running(create_app(store=store, sweep_interval=0, token=TOKEN)) as url:
        client = inferencesh.inference(
            api_key=TOKEN, base_url=url.replace("127.0.0.1", "localhost")
        )
        agent = client.agent({"name": "tokened", "core_app": {"ref": "infsh/x@latest"}})
        reply = agent.send_message("hello")
        assert reply["chat_id"] == agent.chat_id
        eventually(lambda: agent.get_chat()["status"] == "idle", "the SDK's run ended")
        stranger = inferencesh.inference(api_key="not-the-token", base_url=url)
        with pytest.raises(Exception, match="bearer token"):
            stranger.agent({"name": "x", "core_app": {"ref": "infsh/x@latest"}}).send_message("hi")


# -- a body cut short --------------------------------------------------------------------------


def test_a_body_cut_short_is_one_line_not_a_traceback(belt_home: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", "--sweep-interval", "0"],
        env={**os.environ, "BELT_HOME": str(belt_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    try:
        assert server.stderr is not None and server.stdout is not None
        url = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", server.stderr.readline())
        assert url, "no start-up line"
        port = int(url.group(1))
        reader = threading.Thread(target=lambda: out.extend(server.stdout or []), daemon=True)
        reader.start()
        routes = ("/hooks", "/agents/run", "/interrupts/int_x/resolve")
        for path in routes:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                    '{"event":'.encode()
                )
        eventually(lambda: sum("cut short" in line for line in out) == len(routes), "3 lines")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
        errors = server.stderr.read() if server.stderr is not None else ""
        for stream in (server.stdout, server.stderr):
            if stream is not None:
                stream.close()
    cut = [line for line in out if "cut short" in line]
    # (The three may be reported in any order: each is its own connection.)
    assert sorted(line.split("  ")[1] for line in cut) == sorted(
        f"cut short POST {path}" for path in routes
    )
    assert all(
        "the client closed the connection before sending its whole body" in line for line in cut
    )
    assert "Traceback" not in errors and "ClientDisconnect" not in errors, errors
    assert len(out) == len(routes), out


# -- the parsing, under hostile values ---------------------------------------------------------

HOSTILE = st.text(max_size=80) | st.binary(max_size=80).map(lambda b: b.decode("latin-1"))
LOOPBACK_SPELLINGS = ["127.0.0.1", "localhost", "[::1]", "127.9.9.9", "LocalHost", "[0::1]"]


def foreign_spellings(name: str) -> list[str]:
    """Ways a foreign name can be dressed up as this machine's."""
    return [
        name,
        f"{name}:8787",
        f"127.0.0.1.{name}",
        f"localhost.{name}",
        f"{name}@127.0.0.1",
        f"127.0.0.1@{name}",
        f"{name}#127.0.0.1",
        f"{name}/127.0.0.1",
        f"{name}\x00127.0.0.1",
        f"{name} 127.0.0.1",
        f"127.0.0.1:8787.{name}",
        f"localhost:{name}",
        f"[::1].{name}",
        f"[::1]{name}",
        f"{name}:8787:127.0.0.1",
        f"127.0.0.1, {name}",
    ]


@settings(max_examples=300, deadline=None)
@given(HOSTILE, st.lists(st.sampled_from(["belt.internal", "tunnel.example"]), max_size=2))
def test_hostile_host_values_never_crash_and_what_passes_is_named(value: str, allowed: list[str]):
    accepted = host_allowed(value, allowed)
    parsed = split_host(value)
    if accepted:
        assert parsed is not None
        assert is_loopback_name(parsed[0]) or parsed[0] in allowed


@settings(max_examples=100, deadline=None)
@given(domains())
def test_a_foreign_name_is_never_accepted_however_it_is_dressed(name: str) -> None:
    for value in foreign_spellings(name):
        assert not host_allowed(value, ["belt.internal"]), value
        assert not same_origin(f"http://{value}", "127.0.0.1:8787")
    assert not same_origin(f"http://{name}", "127.0.0.1:8787")
    for own in LOOPBACK_SPELLINGS:
        assert host_allowed(own) and host_allowed(f"{own}:8787")


@settings(max_examples=300, deadline=None)
@given(HOSTILE, HOSTILE)
def test_hostile_origins_never_crash_and_only_the_hosts_own_passes(origin: str, host: str):
    if same_origin(origin, host):
        theirs = split_host(origin.lower().partition("://")[2])
        ours = split_host(host)
        assert theirs is not None and ours is not None and theirs[0] == ours[0]


SAFELISTED = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""]
"""The types a page of another site may send without asking (and none at all)."""


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SAFELISTED), HOSTILE)
def test_no_type_a_page_may_send_unasked_passes(essence: str, parameters: str) -> None:
    assert not is_json_type(f"{essence};{parameters}")
    if essence:
        # With no essence, the space form is the parameters alone (whitespace around a
        # header's value is not part of it): " application/json" is JSON, and a page must
        # ask before it sends that.
        assert not is_json_type(f"{essence} {parameters}")


def test_json_with_whitespace_around_it_is_json() -> None:
    assert is_json_type(" APPLICATION/JSON")
    assert is_json_type("application/json ; charset=utf-8 ")


def test_json_with_a_utf8_charset_passes() -> None:
    for value in (
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        'application/json;charset="UTF-8"',
        "application/json;",
    ):
        assert is_json_type(value), value
    for value in ("application/json; charset=latin-1", "application/json, text/plain"):
        assert not is_json_type(value), value


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [b"host", b"origin", b"content-type", b"content-length", b"authorization"]
            ),
            st.binary(max_size=60),
        ),
        max_size=6,
    ),
    st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    st.booleans(),
)
def test_the_guard_answers_any_headers_and_lets_in_only_named_hosts(
    headers: list[tuple[bytes, bytes]], method: str, with_token: bool
) -> None:
    passed: list[dict[str, Any]] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        passed.append(scope)

    guard = RequestGuard(inner, token=TOKEN if with_token else None, allow_hosts=["belt.internal"])
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": method, "path": "/agents/run", "headers": headers}
    asyncio.run(guard(scope, receive, send))
    if passed:
        offered = [v.partition(b" ") for n, v in headers if n == b"authorization"][:1]
        carried = [o.strip() for scheme, _, o in offered if scheme.lower() == b"bearer"]
        if not (with_token and carried == [TOKEN.encode()]):
            (host,) = [v for n, v in headers if n == b"host"]
            assert host_allowed(host.decode("latin-1"), ["belt.internal"])
    else:
        assert sent[0]["status"] in (401, 403, 415)
        assert json.loads(sent[1]["body"])["detail"]


def _guard_headers(*values: bytes | None) -> list[tuple[bytes, bytes]]:
    names = (b"host", b"origin", b"content-type", b"authorization")
    given = [(name, value) for name, value in zip(names, values, strict=True) if value]
    return [*given, (b"content-length", b"2")]


GUARD_HEADERS = st.builds(
    _guard_headers,
    st.sampled_from([b"127.0.0.1:8787", b"evil.example", None]),
    st.sampled_from([None, b"http://127.0.0.1:8787", b"http://evil.example"]),
    st.sampled_from([None, b"application/json", b"text/plain"]),
    st.sampled_from([None, b"Bearer " + TOKEN.encode(), b"Bearer wrong"]),
)
"""The headers of a request a guard lets in or refuses for each of its reasons."""


@settings(max_examples=200, deadline=None)
@given(
    # A few headers, paths and methods, so that requests repeat the last one's in part or whole.
    st.lists(GUARD_HEADERS, min_size=1, max_size=3).flatmap(
        lambda pool: st.lists(
            st.tuples(
                st.sampled_from(["GET", "POST"]),
                st.sampled_from(["/agents/run", "/healthz"]),
                st.sampled_from(pool),
            ),
            min_size=2,
            max_size=8,
        )
    ),
    st.booleans(),
)
def test_a_guard_answers_each_request_as_a_guard_that_saw_no_other(
    requests: list[tuple[str, str, list[tuple[bytes, bytes]]]], with_token: bool
) -> None:
    """The guard lets a request with the last one's method, path and headers in without
    reading them again: whatever came before, each gets the answer a new guard gives it."""

    def guard() -> RequestGuard:
        return RequestGuard(
            inner,
            token=TOKEN if with_token else None,
            is_open=lambda path: path == "/healthz",
        )

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def status(answering: RequestGuard, method: str, path: str, headers: Any) -> int:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        scope = {"type": "http", "method": method, "path": path, "headers": list(headers)}
        await answering(scope, receive, send)
        return int(sent[0]["status"])

    async def both() -> tuple[list[int], list[int]]:
        kept = guard()
        seen = [await status(kept, *request) for request in requests]
        fresh = [await status(guard(), *request) for request in requests]
        return seen, fresh

    seen, fresh = asyncio.run(both())
    assert seen == fresh


def test_a_refusal_quotes_a_huge_header_cut_short(store: Store) -> None:
    huge = "h" * 10_000
    with running(create_app(store=store, sweep_interval=0, token=TOKEN)) as url:
        # /healthz is open to every host with a token; the Origin is still another site's.
        reply = HTTP.get(f"{url}/healthz", headers={"host": huge, "origin": "http://" + huge})
    assert reply.status_code == 403
    detail = reply.json()["detail"]
    assert len(detail) < 400
    assert detail.startswith("Origin 'http://hhh") and "…" in detail
