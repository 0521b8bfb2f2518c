"""The platform API routes of ``belt serve`` over the store, by HTTP and by `belt ... --api`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from belt.records.chats import CHAT, disabled
from belt.records.interrupts import create_interrupt, get_interrupt
from belt.server.app import create_app
from belt.store import Store
from belt.store.clock import utcnow
from belt.wire.catalogue import EVENTS
from tests.cli.runner import belt
from tests.loopback import CLIENT
from tests.servers import running

TOKEN = "tok-api-51d0"


@pytest.fixture
def api(store: Store) -> Iterator[str]:
    with running(create_app(store=store, sweep_interval=0)) as url:
        yield url


def gate(store: Store, run_id: str = "ar_api1", **options: Any) -> dict[str, Any]:
    return create_interrupt(
        store=store, run_id=run_id, chat_id="ch_api1", event="agent.tool_call", **options
    )


def test_list_a_runs_interrupts_in_the_envelope(api: str, store: Store) -> None:
    first = gate(store)
    second = gate(store)
    reply = CLIENT.get(f"{api}/agent-runs/ar_api1/interrupts")
    assert reply.status_code == 200
    body = reply.json()
    assert body["success"] is True and set(body) == {"success", "data", "messages"}
    assert [item["id"] for item in body["data"]] == [first["id"], second["id"]]
    assert body["data"][0] == first
    assert CLIENT.get(f"{api}/agent-runs/ar_none/interrupts").json()["data"] == []


def test_the_list_holds_settled_interrupts_and_can_keep_only_pending(
    api: str, store: Store
) -> None:
    settled = gate(store)
    pending = gate(store)
    resolved = CLIENT.post(f"{api}/interrupts/{settled['id']}/resolve", json={"decision": "deny"})
    assert resolved.status_code == 200
    everything = CLIENT.get(f"{api}/agent-runs/ar_api1/interrupts").json()["data"]
    assert [item["status"] for item in everything] == ["resolved", "pending"]
    only = CLIENT.get(f"{api}/agent-runs/ar_api1/interrupts", params={"status": "pending"})
    assert [item["id"] for item in only.json()["data"]] == [pending["id"]]


def test_resolve_stores_the_decision_and_data(api: str, store: Store) -> None:
    interrupt = gate(store)
    reply = CLIENT.post(
        f"{api}/interrupts/{interrupt['id']}/resolve",
        json={"decision": "allow", "data": {"approved_by": "ana"}},
    )
    assert reply.status_code == 200
    dto = reply.json()["data"]
    assert (dto["status"], dto["resolution"]) == ("resolved", "allow")
    assert dto["resolved_data"] == {"approved_by": "ana"}
    assert get_interrupt(store=store, interrupt_id=interrupt["id"]) == dto


def test_resolving_twice_is_409_and_an_unknown_id_is_404(api: str, store: Store) -> None:
    interrupt = gate(store)
    url = f"{api}/interrupts/{interrupt['id']}/resolve"
    assert CLIENT.post(url, json={"decision": "deny"}).status_code == 200
    again = CLIENT.post(url, json={"decision": "allow"})
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"
    assert "no longer pending" in again.json()["detail"]
    missing = CLIENT.post(f"{api}/interrupts/int_nothere/resolve", json={"decision": "allow"})
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no interrupt int_nothere"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"decision": "maybe"}, "decision 'maybe' must be allow or deny"),
        ({}, "decision None must be allow or deny"),
        ([], "expected a JSON object, got an array"),
    ],
)
def test_a_bad_resolve_body_is_422(api: str, store: Store, body: Any, detail: str) -> None:
    interrupt = gate(store)
    reply = CLIENT.post(f"{api}/interrupts/{interrupt['id']}/resolve", json=body)
    assert reply.status_code == 422
    assert reply.json()["detail"] == detail


def test_hook_events_is_the_catalogue(api: str) -> None:
    reply = CLIENT.get(f"{api}/agents/hook-events")
    assert reply.status_code == 200
    events = reply.json()["data"]
    assert [e["event"] for e in events] == list(EVENTS)
    assert set(events[0]) == {"event", "description", "can_gate"}
    assert {e["event"] for e in events if e["can_gate"]} == {
        "agent.start",
        "agent.turn_start",
        "agent.tool_call",
    }


def test_chat_settings_switch_hooks_off_and_on(api: str, store: Store) -> None:
    missing = CLIENT.post(f"{api}/chats/ch_set1/settings", json={"disable_hooks": True})
    assert missing.status_code == 404  # a chat is not made by its settings
    assert not store.exists(CHAT, "ch_set1")
    store.create(CHAT, "ch_set1", {"id": "ch_set1"})
    reply = CLIENT.post(f"{api}/chats/ch_set1/settings", json={"disable_hooks": True})
    assert reply.status_code == 200
    assert reply.json()["data"]["agent_data"]["disable_hooks"] is True
    assert disabled(store.get(CHAT, "ch_set1"))
    CLIENT.post(f"{api}/chats/ch_set1/settings", json={"disable_hooks": False})
    assert not disabled(store.get(CHAT, "ch_set1"))
    bad = CLIENT.post(f"{api}/chats/ch_set1/settings", json={"disable_hooks": "yes"})
    assert bad.status_code == 422
    assert bad.json()["detail"] == "disable_hooks: expected a boolean, got a string"


def test_the_sweep_settles_overdue_gates(store: Store) -> None:
    overdue = gate(
        store, timeout=60, default_resolution="deny", now=utcnow() - timedelta(minutes=5)
    )
    reported: list[dict[str, Any]] = []
    app = create_app(store=store, sweep_interval=3600, report=reported.append)
    with running(app):
        # The first sweep runs at start-up; wait for it, not for a clock.
        while not reported:
            time.sleep(0.01)
    assert reported == [
        {
            "kind": "sweep",
            "at": reported[0]["at"],
            "settled": [{"id": overdue["id"], "resolution": "deny"}],
        }
    ]
    settled = get_interrupt(store=store, interrupt_id=overdue["id"])
    assert (settled["status"], settled["resolution"]) == ("expired", "deny")


# The interrupt and chat commands pointed at `belt serve` with --api


def test_interrupt_commands_work_against_the_server(api: str, store: Store) -> None:
    interrupt = gate(store, run_id="ar_cli1")
    listed = belt("interrupt", "list", "ar_cli1", "--json", "--api", api)
    assert listed.exit_code == 0, listed.stderr
    assert [item["id"] for item in listed.json()] == [interrupt["id"]]

    resolved = belt("interrupt", "resolve", interrupt["id"], "deny", "--api", api)
    assert resolved.exit_code == 0, resolved.stderr
    assert get_interrupt(store=store, interrupt_id=interrupt["id"])["resolution"] == "deny"

    again = belt("interrupt", "resolve", interrupt["id"], "allow", "--api", api)
    assert again.exit_code == 4
    assert "no longer pending" in again.stderr

    missing = belt("interrupt", "resolve", "int_nothere", "allow", "--api", api)
    assert missing.exit_code == 3

    pending = belt("interrupt", "list", "ar_cli1", "--json", "--api", api)
    assert pending.exit_code == 0
    assert pending.json() == []


def test_chat_settings_command_works_against_the_server(api: str, store: Store) -> None:
    store.create(CHAT, "ch_cli1", {"id": "ch_cli1"})
    result = belt("chat", "settings", "ch_cli1", "--disable-hooks", "--api", api)
    assert result.exit_code == 0, result.stderr
    assert disabled(store.get(CHAT, "ch_cli1"))


def test_the_commands_send_the_token_when_the_server_needs_one(store: Store) -> None:
    interrupt = gate(store, run_id="ar_tok1")
    with running(create_app(store=store, sweep_interval=0, token=TOKEN)) as url:
        refused = belt("interrupt", "list", "ar_tok1", "--api", url)
        accepted = belt("interrupt", "list", "ar_tok1", "--json", "--api", url, "--api-key", TOKEN)
    assert refused.exit_code == 7  # unauthorized (docs/cli.md's table of remote answers)
    assert "missing bearer token (HTTP 401" in refused.stderr
    assert accepted.exit_code == 0, accepted.stderr
    assert [item["id"] for item in accepted.json()] == [interrupt["id"]]


def test_a_simulated_chat_and_its_hook_rows_read_through_the_chat_routes(
    api: str, store: Store, tmp_path: Path
) -> None:
    import json

    from belt.engine.entrypoints import run_scenario

    path = tmp_path / "s.json"
    delete = {"name": "delete_file", "arguments": {"path": "/etc/x"}, "result": "ok"}
    turn = {"user": "go", "model": [{"say": "a", "tool_calls": [delete]}, {"say": "b"}]}
    hooks = [{"event": "agent.tool_call", "type": "gate"}]
    path.write_text(json.dumps({"agent": {"hooks": hooks}, "turns": [turn]}))
    report, (run_id,) = run_scenario(scenario=path)
    chat_id = report["chat"]["id"]

    reply = CLIENT.get(f"{api}/chats/{chat_id}")
    assert reply.status_code == 200
    chat = reply.json()["data"]
    assert (chat["id"], chat["status"]) == (chat_id, "awaiting_input")
    assert chat["active_run"]["id"] == run_id
    assert chat["active_run"]["state"] == "input_required"
    assert [i["id"] for i in chat["pending_interrupts"]] == [
        i["id"] for i in report["chat"]["pending_interrupts"]
    ]
    assert [m["role"] for m in chat["chat_messages"]] == ["user", "assistant", "event"]
    row = chat["chat_messages"][2]["content"][0]["event"]["hook"]
    assert (row["handler_type"], row["decision"]) == ("gate", "suspend")
    assert all("sim" not in m for m in chat["chat_messages"])

    listed = CLIENT.get(f"{api}/chats/{chat_id}/messages").json()["data"]
    assert listed == chat["chat_messages"]
    assert listed[1]["tool_invocations"][0]["status"] == "awaiting_approval"

    missing = CLIENT.get(f"{api}/chats/ch_nope")
    assert missing.status_code == 404
    # The SDKs' agents read this route: its errors are typed as the agent routes' are.
    assert missing.headers["content-type"] == "application/json"
    assert missing.json()["error"] == {"code": "not_found", "message": "no chat ch_nope"}
    assert missing.json()["detail"] == "no chat ch_nope"
    assert CLIENT.get(f"{api}/chats/..%2Fx").status_code in (404, 422)
