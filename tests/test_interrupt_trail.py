"""How every gate was settled (``resolved_by``): each door's record, older records read as
"unknown", `belt interrupt log`, and that the record never reaches the wire."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import run_scenario
from belt.records.interrupts import (
    DTO_FIELDS,
    os_user,
    person,
    read_record,
    resolve_interrupt,
    settled_by,
    sweep,
)
from belt.server.app import create_app
from belt.store import Store
from tests.browser import missing
from tests.cli.runner import belt
from tests.cli.test_interrupt import converse
from tests.loopback import CLIENT
from tests.servers import running
from tests.test_interrupt_batch import gate

T0 = datetime(2026, 8, 11, 14, 0, tzinfo=UTC)
ME = os_user()


def trail(store: Store, interrupt_id: str) -> Any:
    return read_record(store=store, interrupt_id=interrupt_id).get("resolved_by")


# -- each door -----------------------------------------------------------------------------------


def test_resolve_records_the_os_user_through_the_cli_and_show_says_so(store: Store) -> None:
    item = gate(store)
    result = belt("interrupt", "resolve", item["short_id"], "allow")
    assert result.exit_code == 0, result.stderr
    assert trail(store, item["id"]) == {"how": "person", "user": ME, "door": "cli"}

    shown = belt("interrupt", "show", item["id"])
    assert shown.exit_code == 0
    assert f"settled by     {ME} via the CLI" in shown.stdout
    document = belt("interrupt", "show", item["id"], "--json").json()
    assert document["settled_by"] == f"{ME} via the CLI"
    assert document["trail"] == {"how": "person", "user": ME, "door": "cli"}


def test_review_records_its_own_door(store: Store) -> None:
    item = gate(store)
    out, code = converse(["interrupt", "review"], ["a", ""])
    assert code == 0, out
    assert trail(store, item["id"]) == {"how": "person", "user": ME, "door": "review"}


def test_the_inspector_records_its_door_and_its_gate_json_carries_the_trail(
    store: Store, served: str
) -> None:
    item = gate(store)
    url = f"{served}/inspector/gates/{item['id']}/resolve"
    reply = CLIENT.post(url, json={"decision": "deny"})
    assert reply.status_code == 200, reply.text
    card = reply.json()["data"]["interrupt"]
    assert card["settled_by"] == f"{ME} via the inspector"
    assert card["trail"] == {"how": "person", "user": ME, "door": "inspector"}
    assert trail(store, item["id"]) == card["trail"]


@pytest.mark.parametrize("token", [None, "s3cret-token"])
def test_the_api_records_whether_a_token_was_used_never_the_token(
    store: Store, token: str | None
) -> None:
    item = gate(store)
    headers = {"authorization": f"Bearer {token}"} if token else {}
    with running(create_app(store=store, token=token, sweep_interval=0)) as url:
        reply = CLIENT.post(
            f"{url}/interrupts/{item['id']}/resolve",
            json={"decision": "allow", "data": {"note": "ok"}},
            headers=headers,
        )
        assert reply.status_code == 200, reply.text
        listed = CLIENT.get(f"{url}/agent-runs/ar_one/interrupts", headers=headers).json()["data"]
    recorded = trail(store, item["id"])
    assert recorded == {"how": "person", "user": ME, "door": "api", "token": bool(token)}
    assert token is None or token not in json.dumps(
        read_record(store=store, interrupt_id=item["id"])
    )
    # The trail stays belt's own: not in the resolution's data, not in the wire's interrupts.
    answered = reply.json()["data"]
    assert list(answered) == list(DTO_FIELDS)
    assert answered["resolved_data"] == {"note": "ok"}
    assert [list(i) for i in listed] == [list(DTO_FIELDS)]


def test_the_local_list_json_is_the_dto_alone(store: Store) -> None:
    item = gate(store)
    resolve_interrupt(store=store, interrupt_id=item["id"], decision="deny", by=person("cli"))
    listed = belt("interrupt", "list", "--all", "--json").json()
    assert [list(i) for i in listed] == [list(DTO_FIELDS)]
    assert "door" not in json.dumps(listed)


def test_the_sweep_records_expiry_with_the_default(store: Store) -> None:
    allowed = gate(store, timeout=60, now=T0)
    denied = gate(store, timeout=60, default_resolution="deny", now=T0)
    sweep(store=store, now=T0 + timedelta(minutes=2))
    assert trail(store, allowed["id"]) == {"how": "expiry", "default": "allow"}
    assert trail(store, denied["id"]) == {"how": "expiry", "default": "deny"}
    assert settled_by(read_record(store=store, interrupt_id=denied["id"])) == (
        "expiry (default deny)"
    )


def test_a_scenarios_scripted_resolution_records_its_simulation(tmp_path: Path) -> None:
    hook = {"event": "agent.turn_start", "type": "gate"}
    turn = {
        "user": "first",
        "resolve": [{"event": "agent.turn_start", "decision": "allow"}],
        "model": [{"say": "hi"}],
    }
    path = tmp_path / "scripted.json"
    path.write_text(json.dumps({"agent": {"hooks": [hook]}, "turns": [turn]}))
    report, _ = run_scenario(scenario=path)
    [settled] = belt("interrupt", "log", "--json").json()
    assert settled["trail"] == {"how": "scenario", "sim": report["simulation"]["id"]}
    assert settled["settled_by"] == f"the scenario of simulation {report['simulation']['id']}"


# -- records written before the trail ------------------------------------------------------------


def test_records_written_before_the_trail_read_unknown(store: Store) -> None:
    named, bare = gate(store), gate(store)
    for item in (named, bare):
        resolve_interrupt(store=store, interrupt_id=item["id"], decision="allow")
    store.merge("interrupt", named["id"], {"resolved_by": "the inspector page"})
    assert settled_by(read_record(store=store, interrupt_id=bare["id"])) == "unknown"
    assert settled_by(read_record(store=store, interrupt_id=named["id"])) == (
        "unknown (recorded as: the inspector page)"
    )
    shown = belt("interrupt", "show", bare["id"], "--json").json()
    assert (shown["settled_by"], shown["trail"]) == ("unknown", {"how": "unknown"})
    logged = {i["id"]: i["trail"] for i in belt("interrupt", "log", "--json").json()}
    assert logged[named["id"]] == {"how": "unknown", "recorded_as": "the inspector page"}


# -- interrupt log ------------------------------------------------------------------------------


def test_log_lists_settlements_newest_first_with_filters(store: Store) -> None:
    first, second = gate(store, now=T0), gate(store, now=T0)
    other = gate(store, run_id="ar_two", now=T0)
    pending = gate(store, now=T0)
    resolve_interrupt(
        store=store,
        interrupt_id=second["id"],
        decision="deny",
        by=person("cli"),
        now=T0 + timedelta(minutes=1),
    )
    resolve_interrupt(
        store=store,
        interrupt_id=first["id"],
        decision="allow",
        by={
            "how": "rule",
            "file": "approvals.toml",
            "rule": "reads",
            "digest": "sha256:" + "ab" * 32,
        },
        now=T0 + timedelta(minutes=2),
    )
    resolve_interrupt(
        store=store,
        interrupt_id=other["id"],
        decision="allow",
        by=person("api", token=True),
        now=T0 + timedelta(minutes=3),
    )

    result = belt("interrupt", "log", "--json")
    assert result.exit_code == 0, result.stderr
    assert [i["id"] for i in result.json()] == [other["id"], first["id"], second["id"]]
    assert pending["id"] not in result.stdout
    assert [i["id"] for i in belt("interrupt", "log", "--run", "ar_one", "--json").json()] == [
        first["id"],
        second["id"],
    ]
    since = (T0 + timedelta(minutes=2)).isoformat()
    assert [i["id"] for i in belt("interrupt", "log", "--since", since, "--json").json()] == [
        other["id"],
        first["id"],
    ]
    assert belt("interrupt", "log", "--since", "1h", "--json").json() == []  # all long ago

    text = belt("interrupt", "log")
    assert text.exit_code == 0
    rows = text.stdout.splitlines()
    assert rows[0].split()[:3] == ["settled", "id", "status"]
    assert rows[1].endswith(f"{ME} via the API (with a token)")
    assert rows[2].endswith("rule reads of approvals.toml (sha256:abababababab)")
    assert rows[3].endswith(f"{ME} via the CLI")


def test_log_refuses_a_since_it_cannot_read_and_says_when_nothing_is_settled(
    store: Store,
) -> None:
    result = belt("interrupt", "log", "--since", "yesterday")
    assert result.exit_code == 2
    assert "--since 'yesterday'" in result.stderr
    result = belt("interrupt", "log")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "no settled gates" in result.stderr


@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_the_inspectors_gate_card_says_how_it_was_settled(
    page: Any, served: str, store: Store
) -> None:
    item = gate(store)
    page.goto(f"{served}/#/gates")
    card = page.locator(f".gate[data-id='{item['id']}']")
    card.locator("button.allow").click()
    settled = page.locator(f".gate.settled[data-id='{item['id']}']")
    settled.locator("dd", has_text="via the inspector").wait_for()
    text = settled.inner_text()
    assert f"settled by\n{ME} via the inspector" in text, text
