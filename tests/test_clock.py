"""The virtual clock: where a simulation's times come from, and how they move."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.engine.entrypoints import run_scenario
from belt.engine.scenario import read_scenario
from belt.errors import Conflict, InvalidInput
from belt.records.interrupts import sweep
from belt.records.runs import RUN
from belt.records.sims import SIM
from belt.server.app import create_app
from belt.store import Store
from belt.store.clock import (
    VirtualClock,
    format_duration,
    installed,
    now,
    parse_duration,
    parse_rfc3339,
    timestamp,
    using,
    utcnow,
)
from tests.cli.runner import belt
from tests.loopback import CLIENT
from tests.sdk_flow import invocation
from tests.servers import running
from tests.waiting import eventually

START = datetime(2026, 8, 11, 14, 0, tzinfo=UTC)


def scenario_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(text + '\n[[turns]]\nuser = "hi"\n')
    return path


# -- the clock -------------------------------------------------------------------------------


def test_now_is_wall_time_unless_a_virtual_clock_is_in_force() -> None:
    assert abs(now() - utcnow()) < timedelta(minutes=1)
    clock = VirtualClock(START)
    with using(clock):
        assert now() == START
        assert abs(utcnow() - START) > timedelta(seconds=1)  # wall time stays wall time
    assert now() != START


def test_a_context_clock_comes_before_the_process_clock() -> None:
    served = VirtualClock(START)
    simulated = VirtualClock(START + timedelta(hours=1))
    with installed(served):
        assert now() == START
        with using(simulated):
            assert now() == START + timedelta(hours=1)
        assert now() == START
    assert now() != START


def test_a_virtual_clock_moves_only_forward_and_tells_each_move() -> None:
    moves: list[datetime] = []
    clock = VirtualClock(START, on_move=moves.append)
    assert clock.advance(timedelta(minutes=10)) == START + timedelta(minutes=10)
    assert clock.move_to(START + timedelta(hours=1)) == START + timedelta(hours=1)
    with pytest.raises(Conflict, match="time only moves forward"):
        clock.move_to(START)
    with pytest.raises(InvalidInput, match="time only moves forward"):
        clock.advance(timedelta(seconds=-1))
    assert clock.now() == START + timedelta(hours=1)
    assert moves == [START + timedelta(minutes=10), START + timedelta(hours=1)]


def test_a_virtual_clock_refuses_to_leave_its_years() -> None:
    clock = VirtualClock(datetime(8999, 12, 31, tzinfo=UTC))
    with pytest.raises(InvalidInput, match="out of range"):
        clock.advance(timedelta(days=2))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("10m", 600), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("0s", 0)],
)
def test_durations_read_and_spell_back(text: str, seconds: int) -> None:
    assert parse_duration(text, "after") == timedelta(seconds=seconds)
    assert parse_duration(format_duration(timedelta(seconds=seconds)), "x").total_seconds() == (
        seconds
    )


@pytest.mark.parametrize("text", ["", "10", "-1m", "m", "1m1h", "1.5h", "99999d"])
def test_a_bad_duration_names_where(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"^turns\[0\]\.after: "):
        parse_duration(text, "turns[0].after")


@pytest.mark.parametrize(
    "text",
    ["2026-08-11", "2026-08-11T14:00:00", "2026-02-30T00:00:00Z", "1969-12-31T00:00:00Z", "now"],
)
def test_a_bad_timestamp_names_where(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"^--clock: "):
        parse_rfc3339(text, "--clock")


def test_a_timestamp_with_an_offset_is_read_as_utc() -> None:
    assert parse_rfc3339("2026-08-11T16:00:00.5+02:00", "x") == START + timedelta(seconds=0.5)


# -- a scenario's clock ------------------------------------------------------------------------


def test_a_scenario_without_a_clock_has_none(tmp_path: Path) -> None:
    assert read_scenario(scenario_file(tmp_path, "")).scenario.clock is None


@pytest.mark.parametrize("value", ['"2026-08-11T14:00:00Z"', "2026-08-11T16:00:00+02:00"])
def test_a_scenario_clock_is_an_aware_datetime(tmp_path: Path, value: str) -> None:
    clock = read_scenario(scenario_file(tmp_path, f"clock = {value}")).scenario.clock
    assert clock == START
    assert clock is not None and clock.tzinfo is not None


def test_a_nexus_scenario_has_a_clock_too(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, 'dialect = "nexus"\nclock = "2026-08-11T14:00:00Z"')
    path.write_text(path.read_text() + '[[turns.model]]\nsay = "ok"\n')
    assert read_scenario(path).scenario.clock == START


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('"tomorrow"', "is not an RFC 3339 timestamp"),
        ("2026-08-11T14:00:00", "has no UTC offset"),
        ("12", "expected an RFC 3339 timestamp"),
        ('"1900-01-01T00:00:00Z"', "out of range"),
    ],
)
def test_a_bad_scenario_clock_names_the_file_and_key(tmp_path: Path, value: str, says: str) -> None:
    path = scenario_file(tmp_path, f"clock = {value}")
    with pytest.raises(InvalidInput, match=f"^{path}: clock: .*{says}") as caught:
        read_scenario(path)
    assert caught.value.exit_code == 5


def test_a_scenario_clock_is_stored_as_it_reads(tmp_path: Path) -> None:
    loaded = read_scenario(scenario_file(tmp_path, 'clock = "2026-08-11T14:00:00Z"'))
    doc = json.loads(json.dumps(loaded.scenario.model_dump(mode="json", by_alias=True)))
    assert parse_rfc3339(doc["clock"], "clock") == START


# -- time in a simulation ----------------------------------------------------------------------

GATE = {"event": "agent.tool_call", "type": "gate", "timeout": 600, "default_resolution": "deny"}
DELETE = {"name": "delete_file", "arguments": {"path": "/tmp/old.txt"}, "result": "deleted"}


def gated_turn(**extra: Any) -> dict[str, Any]:
    return {
        "user": "delete the temp file",
        "model": [{"say": "deleting", "tool_calls": [DELETE]}, {"say": "done"}],
        **extra,
    }


def simulate(tmp_path: Path, turns: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"agent": {"name": "t", "hooks": [GATE]}, "turns": turns, **top}))
    report, _ = run_scenario(scenario=path)
    return report


def texts(report: dict[str, Any]) -> list[str]:
    return [c.get("text") or "" for m in report["chat"]["chat_messages"] for c in m["content"]]


def test_waiting_until_expiry_settles_the_gate_at_its_deadline(tmp_path: Path) -> None:
    report = simulate(
        tmp_path, [gated_turn(wait=[{"until": "expiry"}])], clock="2026-08-11T14:00:00Z"
    )
    (interrupt,) = report["interrupts"]
    assert interrupt["status"] == "expired"
    assert interrupt["resolution"] == "deny"
    assert interrupt["created_at"] == "2026-08-11T14:00:00.000Z"
    assert interrupt["expires_at"] == interrupt["resolved_at"] == "2026-08-11T14:10:00.000Z"
    assert interrupt["meta"]["timestamp"] == "2026-08-11T14:00:00.000Z"
    assert f"gate {interrupt['id']} expired → deny" in texts(report)
    assert "clock +10m → 2026-08-11T14:10:00.000Z" in texts(report)
    # The run went on as after a real expiry: the tool failed, the model answered.
    (run,) = report["runs"]
    assert run["state"] == "completed"
    assert run["created_at"] == "2026-08-11T14:00:00.000Z"
    tool = [m for m in report["chat"]["chat_messages"] if m["role"] == "tool"]
    assert tool[0]["status"] == "failed"
    assert tool[0]["created_at"] == "2026-08-11T14:10:00.000Z"


def test_a_wait_too_short_leaves_the_gate_to_the_next_wait(tmp_path: Path) -> None:
    report = simulate(
        tmp_path,
        [gated_turn(wait=[{"seconds": 599}, {"seconds": 2}])],
        clock="2026-08-11T14:00:00Z",
    )
    (interrupt,) = report["interrupts"]
    assert interrupt["status"] == "expired"
    assert interrupt["resolved_at"] == "2026-08-11T14:10:01.000Z"
    assert [t for t in texts(report) if t.startswith("clock")] == [
        "clock +9m59s → 2026-08-11T14:09:59.000Z",
        "clock +2s → 2026-08-11T14:10:01.000Z",
    ]


def test_a_run_still_held_after_its_waits_stays_held(tmp_path: Path, store: Store) -> None:
    report = simulate(tmp_path, [gated_turn(wait=[{"seconds": 60}])], clock="2026-08-11T14:00:00Z")
    (interrupt,) = report["interrupts"]
    assert interrupt["status"] == "pending"
    assert report["runs"][0]["state"] == "input_required"
    # A sweep on wall time leaves a gate whose deadline is virtual time.
    assert sweep(store=store) == []
    assert [i["id"] for i in sweep(store=store, now=START + timedelta(minutes=10))] == [
        interrupt["id"]
    ]


def test_a_turn_after_arrives_that_long_after_the_previous_one(tmp_path: Path) -> None:
    done = {"user": "hi", "model": [{"say": "hello"}]}
    report = simulate(
        tmp_path,
        [done, {**done, "after": "2h"}, {**done, "after": "1d"}],
        clock="2026-08-11T14:00:00Z",
    )
    assert [r["created_at"] for r in report["runs"]] == [
        "2026-08-11T14:00:00.000Z",
        "2026-08-11T16:00:00.000Z",
        "2026-08-12T16:00:00.000Z",
    ]


def test_a_scenario_that_moves_time_without_a_clock_starts_at_wall_time(
    tmp_path: Path, store: Store
) -> None:
    before = utcnow()
    report = simulate(tmp_path, [gated_turn(wait=[{"until": "expiry"}])])
    (interrupt,) = report["interrupts"]
    assert interrupt["status"] == "expired"
    created = parse_rfc3339(interrupt["created_at"], "created_at")
    assert before - timedelta(seconds=1) <= created <= utcnow()
    assert parse_rfc3339(interrupt["resolved_at"], "x") == created + timedelta(seconds=600)
    assert report["simulation"]["clock_from_wall"] is True
    # Its times differ from run to run: a snapshot does not keep them.
    from belt.testing.snapshot import on_virtual_clock

    assert on_virtual_clock(report, None) is False


def test_a_scenario_without_clock_or_waits_runs_on_wall_time(tmp_path: Path, store: Store) -> None:
    before = utcnow()
    report = simulate(tmp_path, [gated_turn()])
    created = parse_rfc3339(report["runs"][0]["created_at"], "created_at")
    assert before - timedelta(seconds=1) <= created <= utcnow()
    assert "clock" not in store.read(SIM, report["simulation"]["id"])
    assert "clock" not in report["simulation"]


def test_leases_stay_on_wall_time_under_a_virtual_clock() -> None:
    from belt.records import leases

    with using(VirtualClock(START)):
        lease = leases.mine()
        assert now() == START
    renewed = parse_rfc3339(lease["renewed"], "renewed")
    assert abs(renewed - utcnow()) < timedelta(minutes=1)


def test_a_held_simulation_keeps_its_clocks_time_on_its_record(
    tmp_path: Path, store: Store
) -> None:
    report = simulate(tmp_path, [gated_turn(wait=[{"seconds": 30}])], clock="2026-08-11T14:00:00Z")
    assert report["runs"][0]["state"] == "input_required"
    assert store.read(RUN, report["runs"][0]["id"])["lease"] is None  # held: given up
    assert store.read(SIM, report["simulation"]["id"])["clock"] == "2026-08-11T14:00:30.000Z"
    assert report["simulation"]["clock"] == "2026-08-11T14:00:30.000Z"
    assert "clock_from_wall" not in report["simulation"]


def test_a_gate_resolved_by_hand_is_stamped_with_its_runs_clock(
    tmp_path: Path, store: Store
) -> None:
    report = simulate(tmp_path, [gated_turn(wait=[{"seconds": 30}])], clock="2026-08-11T14:00:00Z")
    (interrupt,) = report["interrupts"]
    # Resolved from another process, on wall time: the run's clock says when it happened.
    resolved = belt("interrupt", "resolve", interrupt["id"], "allow", "--json")
    assert resolved.exit_code == 0, resolved.stderr
    assert resolved.json()["resolved_at"] == "2026-08-11T14:00:30.000Z"
    assert resolved.json()["updated_at"] == "2026-08-11T14:00:30.000Z"
    resumed = belt("sim", "resume", report["runs"][0]["id"], "--json")
    assert resumed.exit_code == 0, resumed.stderr
    tool = [m for m in resumed.json()["chat"]["chat_messages"] if m["role"] == "tool"]
    assert tool[0]["content"] == [{"type": "text", "text": "deleted"}]  # allowed: it ran
    assert tool[0]["created_at"] == "2026-08-11T14:00:30.000Z"


def test_a_held_run_stopped_by_hand_is_stamped_with_its_clock(tmp_path: Path, store: Store) -> None:
    from belt.records.interrupts import read_record

    report = simulate(tmp_path, [gated_turn(wait=[{"seconds": 30}])], clock="2026-08-11T14:00:00Z")
    (interrupt,) = report["interrupts"]
    run_id = report["runs"][0]["id"]
    # Stopped from another process, on wall time: the run's clock says when it happened.
    stopped = belt("sim", "stop", run_id)
    assert stopped.exit_code == 0, stopped.stderr
    run = store.read(RUN, run_id)
    assert (run["state"], run["updated_at"]) == ("canceled", "2026-08-11T14:00:30.000Z")
    cancelled = read_record(store=store, interrupt_id=interrupt["id"])
    assert cancelled["status"] == "cancelled"
    assert cancelled["resolved_at"] == cancelled["updated_at"] == "2026-08-11T14:00:30.000Z"
    shown = belt("sim", "show", run_id, "--json")
    assert shown.exit_code == 0, shown.stderr
    ended = shown.json()["chat"]["chat_messages"][-1]
    assert ended["content"][0]["text"] == "run stopped by user"
    assert ended["created_at"] == "2026-08-11T14:00:30.000Z"


def test_a_gate_on_a_clock_only_its_server_knows_is_stamped_no_earlier_than_it_opened(
    store: Store,
) -> None:
    from belt.records.interrupts import cancel_interrupt, create_interrupt, resolve_interrupt

    with installed(VirtualClock(START)):  # as belt serve --clock opens gates
        opened = create_interrupt(
            store=store, run_id="run_served", chat_id="chat_served", event="agent.tool_call"
        )
    resolved = resolve_interrupt(store=store, interrupt_id=opened["id"], decision="deny")
    assert resolved["resolved_at"] == "2026-08-11T14:00:00.000Z"
    # Cancelled on wall time, the same.
    with installed(VirtualClock(START)):
        held = create_interrupt(
            store=store, run_id="run_served", chat_id="chat_served", event="agent.tool_call"
        )
    cancelled = cancel_interrupt(store=store, interrupt_id=held["id"])
    assert cancelled["resolved_at"] == cancelled["updated_at"] == "2026-08-11T14:00:00.000Z"
    # On wall time, a gate of wall time is stamped with wall time, as before.
    plain = create_interrupt(
        store=store, run_id="run_wall", chat_id="chat_wall", event="agent.tool_call"
    )
    settled = resolve_interrupt(store=store, interrupt_id=plain["id"], decision="allow")
    assert abs(parse_rfc3339(settled["resolved_at"], "x") - utcnow()) < timedelta(minutes=1)


def test_a_simulations_waits_settle_only_its_own_runs_gates(tmp_path: Path, store: Store) -> None:
    from belt.records.interrupts import create_interrupt, read_record

    # Another run's gate, overdue on the simulation's clock (not on wall time).
    other = create_interrupt(
        store=store,
        run_id="ar_other",
        chat_id="ch_other",
        event="agent.tool_call",
        timeout=60,
        now=START - timedelta(days=1),
    )
    report = simulate(
        tmp_path, [gated_turn(wait=[{"until": "expiry"}])], clock="2026-08-11T14:00:00Z"
    )
    assert report["interrupts"][0]["status"] == "expired"
    assert read_record(store=store, interrupt_id=other["id"])["status"] == "pending"


def test_clock_overrides_the_scenario_clock(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(
        json.dumps({"clock": "2026-08-11T14:00:00Z", "turns": [{"user": "hi", "model": []}]})
    )
    report, _ = run_scenario(scenario=path, clock=START + timedelta(days=1))
    assert report["runs"][0]["created_at"] == "2026-08-12T14:00:00.000Z"


# -- the commands ------------------------------------------------------------------------------


def held_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "held.json"
    path.write_text(json.dumps({"agent": {"name": "t", "hooks": [GATE]}, "turns": [gated_turn()]}))
    return path


def test_sim_run_clock_runs_any_scenario_on_a_virtual_clock(tmp_path: Path) -> None:
    result = belt(
        "sim", "run", str(held_scenario(tmp_path)), "--clock", "2026-08-11T14:00:00Z", "--json"
    )
    assert result.exit_code == 0, result.stderr
    (interrupt,) = result.json()["interrupts"]
    assert interrupt["created_at"] == "2026-08-11T14:00:00.000Z"
    assert interrupt["expires_at"] == "2026-08-11T14:10:00.000Z"


@pytest.mark.parametrize("value", ["2026-08-11", "noon", "2026-08-11T14:00:00"])
def test_a_bad_clock_option_is_a_usage_error_naming_it(tmp_path: Path, value: str) -> None:
    result = belt("sim", "run", str(held_scenario(tmp_path)), "--clock", value)
    assert result.exit_code == 2
    assert "--clock: " in result.stderr
    assert "Traceback" not in result.stderr


def test_interrupt_sweep_at_settles_what_would_be_overdue_then(tmp_path: Path) -> None:
    opened = belt(
        "sim", "run", str(held_scenario(tmp_path)), "--clock", "2026-08-11T14:00:00Z", "--json"
    )
    (interrupt,) = opened.json()["interrupts"]
    # On wall time (months later) the virtual gate is not overdue: its deadline is not wall time.
    assert belt("interrupt", "sweep", "--json").json()["settled"] == 0
    assert (
        belt("interrupt", "sweep", "--at", "2026-08-11T14:09:59Z", "--json").json()["settled"] == 0
    )
    result = belt("interrupt", "sweep", "--at", "2026-08-11T14:10:00Z", "--json")
    assert result.exit_code == 0
    (settled,) = result.json()["interrupts"]
    assert settled["id"] == interrupt["id"]
    assert settled["status"] == "expired"
    assert settled["resolution"] == "deny"
    assert settled["resolved_at"] == "2026-08-11T14:10:00.000Z"


def test_interrupt_sweep_at_a_bad_time_is_a_usage_error() -> None:
    result = belt("interrupt", "sweep", "--at", "yesterday")
    assert result.exit_code == 2
    assert "--at: 'yesterday' is not an RFC 3339 timestamp" in result.stderr


# -- belt serve --clock ------------------------------------------------------------------------

ARCHIVE_MODEL = """
[[rules]]
match = "archive*"
  [[rules.model]]
  say = "Archiving."
  tool_calls = [ { name = "archive", arguments = { path = "/tmp/old" }, result = "archived" } ]
  [[rules.model]]
  say = "Done."
"""


@pytest.fixture
def on_clock(tmp_path: Path, store: Store) -> Iterator[str]:
    """`belt serve --clock 2026-08-11T14:00:00Z` with a model script, on a free port."""
    model = tmp_path / "model.toml"
    model.write_text(ARCHIVE_MODEL)
    with running(create_app(store=store, sweep_interval=0, model=model, clock=START)) as url:
        yield url


def move(url: str, body: Any, **headers: str) -> httpx.Response:
    return CLIENT.post(
        url + "/_belt/clock",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json", **headers},
    )


def test_the_server_says_its_virtual_time(on_clock: str) -> None:
    reply = CLIENT.get(on_clock + "/_belt/clock")
    assert reply.status_code == 200
    assert reply.json()["data"] == {"now": "2026-08-11T14:00:00.000Z", "virtual": True}


def test_a_server_on_wall_time_refuses_to_move_its_clock(served: str) -> None:
    reply = move(served, {"advance": "10m"})
    assert reply.status_code == 409
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert "--clock" in reply.json()["detail"]
    assert CLIENT.get(served + "/_belt/clock").json()["data"]["virtual"] is False


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, 'give one of "advance"'),
        ({"advance": "10m", "to": "2026-08-11T15:00:00Z"}, 'give one of "advance"'),
        ({"by": "10m"}, "by: unknown key"),
        ({"advance": 600}, 'advance: expected a span like "10m", got'),
        ({"advance": "-10m"}, "advance: '-10m' is not a duration"),
        ({"to": "tomorrow"}, "to: 'tomorrow' is not an RFC 3339 timestamp"),
        ([], "expected a JSON object"),
    ],
)
def test_a_bad_move_is_a_422_saying_why(on_clock: str, body: Any, says: str) -> None:
    reply = move(on_clock, body)
    assert reply.status_code == 422
    assert says in reply.json()["detail"]
    assert CLIENT.get(on_clock + "/_belt/clock").json()["data"]["now"] == "2026-08-11T14:00:00.000Z"


def test_the_clock_moves_only_forward(on_clock: str) -> None:
    assert move(on_clock, {"to": "2026-08-11T15:00:00Z"}).json()["data"]["now"] == (
        "2026-08-11T15:00:00.000Z"
    )
    reply = move(on_clock, {"to": "2026-08-11T14:30:00Z"})
    assert reply.status_code == 409
    assert "time only moves forward" in reply.json()["detail"]
    assert move(on_clock, {"advance": "1h30m"}).json()["data"]["now"] == "2026-08-11T16:30:00.000Z"


def test_the_clock_route_is_guarded_like_every_route(on_clock: str) -> None:
    assert move(on_clock, {"advance": "1m"}, origin="https://evil.example").status_code == 403
    text = CLIENT.post(
        on_clock + "/_belt/clock",
        content=b'{"advance": "1m"}',
        headers={"content-type": "text/plain"},
    )
    assert text.status_code == 415
    foreign = CLIENT.post(
        on_clock + "/_belt/clock",
        content=b'{"advance": "1m"}',
        headers={"content-type": "application/json", "host": "evil.example"},
    )
    assert foreign.status_code in (400, 403, 421)
    assert CLIENT.get(on_clock + "/_belt/clock").json()["data"]["now"] == "2026-08-11T14:00:00.000Z"


def test_moving_the_clock_sweeps_what_falls_due(on_clock: str, store: Store) -> None:
    from belt.records.interrupts import create_interrupt

    with installed(VirtualClock(START)):  # opened as the server would open it
        opened = create_interrupt(
            store=store,
            run_id="ar_x",
            chat_id="ch_x",
            event="agent.tool_call",
            timeout=600,
            default_resolution="deny",
        )
    assert move(on_clock, {"advance": "9m59s"}).json()["data"]["settled"] == []
    settled = move(on_clock, {"advance": "1s"}).json()["data"]["settled"]
    assert [(i["id"], i["status"], i["resolution"]) for i in settled] == [
        (opened["id"], "expired", "deny")
    ]
    assert settled[0]["resolved_at"] == "2026-08-11T14:10:00.000Z"


def test_the_official_sdk_sees_a_gate_expire_on_the_servers_clock(on_clock: str) -> None:
    inferencesh = pytest.importorskip("inferencesh")
    client = inferencesh.inference(api_key="belt-local", base_url=on_clock)
    agent = client.agent(
        {
            "name": "archiver",
            "core_app": {"ref": "infsh/claude-sonnet-4@latest"},
            "hooks": [
                {
                    "event": "agent.tool_call",
                    "type": "gate",
                    "timeout": 600,
                    "default_resolution": "deny",
                }
            ],
        }
    )
    seen: list[dict[str, Any]] = []
    agent.send_message("archive the old files", on_message=seen.append)
    # The stream ended at the gate.
    chat = agent.get_chat()
    assert chat["active_run"]["state"] == "input_required"
    (gate,) = chat["pending_interrupts"]
    assert gate["created_at"] == "2026-08-11T14:00:00.000Z"
    assert gate["expires_at"] == "2026-08-11T14:10:00.000Z"

    moved = move(on_clock, {"advance": "10m"})
    assert moved.status_code == 200, moved.text
    (settled,) = moved.json()["data"]["settled"]
    assert (settled["id"], settled["status"], settled["resolution"]) == (
        gate["id"],
        "expired",
        "deny",
    )

    # The run goes on in the server as after a real expiry: the tool call failed.
    done = eventually(lambda: (c := agent.get_chat())["status"] == "idle" and c, "the run ended")
    archived = invocation(done, "archive")
    assert archived["status"] == "failed"
    assert done["pending_interrupts"] == []
    assert done["chat_messages"][-1]["content"][0]["text"] == "Done."
    assert done["chat_messages"][-1]["created_at"] == "2026-08-11T14:10:00.000Z"
    interrupts = CLIENT.get(f"{on_clock}/agent-runs/{chat['active_run']['id']}/interrupts").json()
    (record,) = interrupts["data"]
    assert record["resolved_at"] == "2026-08-11T14:10:00.000Z"


def test_serve_clock_cannot_be_shared_by_workers() -> None:
    result = belt("serve", "--clock", "2026-08-11T14:00:00Z", "--workers", "2", "--port", "0")
    assert result.exit_code == 2
    assert "--clock runs one virtual clock in one process" in result.stderr


def test_serve_refuses_a_bad_clock() -> None:
    result = belt("serve", "--clock", "soon", "--port", "0")
    assert result.exit_code == 2
    assert "--clock: 'soon' is not an RFC 3339 timestamp" in result.stderr


# -- the example -------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tests" / "expiry.toml"


def test_the_example_passes_under_belt_test() -> None:
    result = belt("test", str(EXAMPLE))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_the_examples_record_shows_the_expiry_on_the_virtual_clock() -> None:
    report, _ = run_scenario(scenario=EXAMPLE)
    (interrupt,) = report["interrupts"]
    assert (interrupt["status"], interrupt["resolution"]) == ("expired", "deny")
    assert interrupt["resolved_at"] == "2026-08-11T14:10:00.000Z"
    assert f"gate {interrupt['id']} expired → deny" in texts(report)
    assert [run["created_at"] for run in report["runs"]] == [
        "2026-08-11T14:00:00.000Z",
        "2026-08-11T16:10:00.000Z",
    ]


# -- approvals ---------------------------------------------------------------------------------


def test_a_tool_approval_nobody_gives_expires_at_its_deadline(tmp_path: Path) -> None:
    call = {**DELETE, "require_approval": True, "approval_timeout": 3600}
    path = tmp_path / "approval.json"
    path.write_text(
        json.dumps(
            {
                "clock": "2026-08-11T14:00:00Z",
                "turns": [
                    {
                        "user": "delete it",
                        "wait": [{"until": "expiry"}],
                        "model": [{"say": "deleting", "tool_calls": [call]}, {"say": "done"}],
                    }
                ],
            }
        )
    )
    report, _ = run_scenario(scenario=path)
    (interrupt,) = report["interrupts"]
    assert (interrupt["reason"], interrupt["status"]) == ("tool_approval", "expired")
    assert interrupt["resolved_at"] == "2026-08-11T15:00:00.000Z"
    assert f"approval {interrupt['id']} expired → deny" in texts(report)
    assert report["runs"][0]["state"] == "completed"


def test_a_nexus_approval_nobody_gives_expires_at_its_deadline(tmp_path: Path) -> None:
    from belt.engine.entrypoints import start_simulation
    from belt.engine.readback import build_report
    from belt.engine.simulation import Options
    from belt.executor.targets import Target
    from belt.executor.worker import Worker
    from belt.store import open_store

    inputs: list[Any] = []

    def verify(task_input: dict[str, Any]) -> Any:
        inputs.append(task_input)
        return {"structured_content": {"continue": False}}

    path = tmp_path / "nexus.json"
    stop = {"tool": "verify", "timeout_ms": 5000, "max_continuations": 2}
    path.write_text(
        json.dumps(
            {
                "dialect": "nexus",
                "clock": "2026-08-11T14:00:00Z",
                "profile": {"approval_mode": "ask", "lifecycle_hooks": {"stop": stop}},
                "turns": [{"user": "go", "wait": [{"until": "expiry"}], "model": [{"say": "ok"}]}],
            }
        )
    )
    store = open_store()
    worker = Worker(store, {"verify": Target("verify", "py", "verify", verify)})
    sim, _ = start_simulation(store, read_scenario(path), Options(worker=worker))
    report = build_report(store, sim)
    (interrupt,) = report["interrupts"]
    assert (interrupt["reason"], interrupt["status"]) == ("tool_approval", "expired")
    assert interrupt["created_at"] == "2026-08-11T14:00:00.000Z"
    assert interrupt["resolved_at"] == interrupt["expires_at"]
    assert f"approval {interrupt['id']} expired → deny" in texts(report)
    assert inputs == []  # nobody approved: the hook task never ran


def test_a_task_hooks_chat_and_an_async_hooks_record_run_on_the_parents_clock(
    tmp_path: Path, store: Store
) -> None:
    from tests.hookapp import hook_app

    task = {"event": "agent.tool_call", "type": "task", "handler": "my-team/auditor@latest"}
    with hook_app(lambda name, payload: None) as app:
        later = {"event": "agent.tool_call", "type": "webhook", "handler": app.url, "async": True}
        path = tmp_path / "task.json"
        path.write_text(
            json.dumps(
                {
                    "clock": "2026-08-11T14:00:00Z",
                    "agent": {"hooks": [task, later]},
                    "agents": {"my-team/auditor": {}},
                    "turns": [
                        {
                            "user": "go",
                            "model": [{"say": "a", "tool_calls": [DELETE]}, {"say": "b"}],
                        }
                    ],
                }
            )
        )
        report, _ = run_scenario(scenario=path)
    executions = report["hook_executions"]
    assert len(executions) == 2
    chat = store.read("chat", next(e for e in executions if e.get("task_chat_id"))["task_chat_id"])
    assert chat["created_at"] == "2026-08-11T14:00:00.000Z"
    assert [e["at"] for e in executions] == ["2026-08-11T14:00:00.000Z"] * 2


def test_serve_clock_says_so_on_its_ready_line() -> None:
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", "--sweep-interval", "0"]
        + ["--clock", "2026-08-11T14:00:00Z"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert "virtual clock at 2026-08-11T14:00:00.000Z, moved by POST /_belt/clock" in line, line


# -- hostile input -----------------------------------------------------------------------------


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_any_text_is_a_timestamp_or_a_one_line_refusal(text: str) -> None:
    try:
        moment = parse_rfc3339(text, "--clock")
    except InvalidInput as exc:
        assert exc.message.startswith("--clock: ") and "\n" not in exc.message
    else:
        assert moment.tzinfo is not None


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_text_is_a_duration_or_a_one_line_refusal(text: str) -> None:
    try:
        span = parse_duration(text, "after")
    except InvalidInput as exc:
        assert exc.message.startswith("after: ")
    else:
        assert timedelta(0) <= span <= timedelta(days=3650)


@given(st.integers(min_value=0, max_value=10**9))
@settings(max_examples=200, deadline=None)
def test_a_virtual_clock_advances_by_any_span_or_refuses_it(seconds: int) -> None:
    clock = VirtualClock(START)
    try:
        moved = clock.advance(timedelta(seconds=seconds))
    except InvalidInput:
        assert clock.now() == START
    else:
        assert moved == START + timedelta(seconds=seconds)


# -- resuming --------------------------------------------------------------------------------


def test_a_resumed_simulation_goes_on_on_its_own_clock(tmp_path: Path, store: Store) -> None:
    from belt.engine.entrypoints import resume_run
    from belt.records.interrupts import resolve_interrupt

    report = simulate(tmp_path, [gated_turn(wait=[{"seconds": 90}])], clock="2026-08-11T14:00:00Z")
    (interrupt,) = report["interrupts"]
    resolve_interrupt(store=store, interrupt_id=interrupt["id"], decision="allow")
    resumed, _ = resume_run(run_id=report["runs"][0]["id"])
    assert resumed["runs"][0]["state"] == "completed"
    last = resumed["chat"]["chat_messages"][-1]
    assert last["created_at"] == "2026-08-11T14:01:30.000Z"


# -- a run's times never go backwards ----------------------------------------------------------


def stamps_of(store: Store, report: dict[str, Any]) -> list[tuple[str, str]]:
    """Every time a simulation's records hold, in the order they were made: each message's
    creation (in chat order), each run's start and last change, each hook event logged."""
    from belt.records.runs import run_events

    found = [(m["created_at"], f"message {m['order']}") for m in report["chat"]["chat_messages"]]
    for run in report["runs"]:
        found += [(run["created_at"], f"{run['id']} created"), (run["updated_at"], run["id"])]
        found += [(line["at"], f"{run['id']} event") for line in run_events(store, run["id"])]
    return found


def assert_in_order(store: Store, report: dict[str, Any]) -> None:
    """The chat's messages and each run's logged hook events are dated in the order they were
    recorded, and each run's start is no later than its last change and than the start of the
    run after it."""
    from belt.records.runs import run_events

    messages = [m["created_at"] for m in report["chat"]["chat_messages"]]
    assert messages == sorted(messages), messages
    runs = report["runs"]
    for run in runs:
        assert run["created_at"] <= run["updated_at"], run
        logged = [line["at"] for line in run_events(store, run["id"])]
        assert logged == sorted(logged), logged
    starts = [run["created_at"] for run in runs]
    assert starts == sorted(starts), starts


def test_a_run_resumed_after_a_sweep_at_t_goes_on_at_t(tmp_path: Path, store: Store) -> None:
    held = belt(
        "sim", "run", str(held_scenario(tmp_path)), "--clock", "2026-08-11T14:00:00Z", "--json"
    ).json()
    run_id = held["runs"][0]["id"]
    swept = belt("interrupt", "sweep", "--at", "2026-08-11T14:15:00Z", "--json")
    assert swept.exit_code == 0, swept.stderr
    assert swept.json()["interrupts"][0]["resolved_at"] == "2026-08-11T14:15:00.000Z"

    resumed = belt("sim", "resume", run_id, "--json")
    assert resumed.exit_code == 0, resumed.stderr
    report = resumed.json()
    before = {m["id"] for m in held["chat"]["chat_messages"]}
    new = [m for m in report["chat"]["chat_messages"] if m["id"] not in before]
    # The clock went on from the settlement, and says so; the tool's refusal and the reply follow.
    assert [(m["role"], m["created_at"]) for m in new] == [
        ("event", "2026-08-11T14:15:00.000Z"),
        ("tool", "2026-08-11T14:15:00.000Z"),
        ("assistant", "2026-08-11T14:15:00.000Z"),
    ]
    assert new[0]["content"][0]["text"] == "clock +15m → 2026-08-11T14:15:00.000Z"
    assert new[1]["status"] == "failed"
    (run,) = report["runs"]
    assert (run["state"], run["updated_at"]) == ("completed", "2026-08-11T14:15:00.000Z")
    assert report["simulation"]["clock"] == "2026-08-11T14:15:00.000Z"
    assert_in_order(store, report)


def test_a_run_waiting_at_its_gate_goes_on_after_a_sweep_elsewhere_at_t(
    tmp_path: Path, belt_home: Path, store: Store
) -> None:
    import os
    import subprocess
    import sys

    waiting = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", str(held_scenario(tmp_path)), "--clock",
         "2026-08-11T14:00:00Z", "--wait", "--json"],
        env={**os.environ, "BELT_HOME": str(belt_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        eventually(lambda: belt("interrupt", "list", "--json").json(), "the gate opened")
        swept = belt("interrupt", "sweep", "--at", "2026-08-11T14:12:00Z", "--json")
        assert swept.json()["settled"] == 1
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
        waiting.wait()
    assert waiting.returncode == 0, err
    report = json.loads(out)
    tool = [m for m in report["chat"]["chat_messages"] if m["role"] == "tool"]
    assert tool[0]["created_at"] == "2026-08-11T14:12:00.000Z"
    assert report["chat"]["chat_messages"][-1]["created_at"] == "2026-08-11T14:12:00.000Z"
    assert report["runs"][0]["updated_at"] == "2026-08-11T14:12:00.000Z"
    assert_in_order(store, report)


def test_a_gate_on_wall_time_swept_ahead_of_it_is_settled_at_the_sweeps_wall_time(
    tmp_path: Path, store: Store
) -> None:
    from belt.engine.entrypoints import resume_run

    report = simulate(tmp_path, [gated_turn()])  # on wall time
    (interrupt,) = report["interrupts"]
    ahead = utcnow() + timedelta(days=1)
    (settled,) = sweep(store=store, now=ahead)
    # Settled now: on the wall clock its run goes on by, `ahead` has not come.
    assert parse_rfc3339(settled["resolved_at"], "resolved_at") <= utcnow()
    assert settled["resolved_at"] >= interrupt["created_at"]
    resumed, _ = resume_run(run_id=report["runs"][0]["id"])
    assert_in_order(store, resumed)
    stamps = [at for at, _ in stamps_of(store, resumed)]
    assert max(stamps) <= timestamp(utcnow())
    tool = [m for m in resumed["chat"]["chat_messages"] if m["role"] == "tool"]
    assert tool[0]["created_at"] >= settled["resolved_at"]


@given(
    timeout=st.integers(min_value=1, max_value=86400),
    waited=st.integers(min_value=0, max_value=86400),
    late=st.integers(min_value=0, max_value=10 * 86400),
    by_sweep=st.booleans(),
    later_turns=st.lists(st.integers(min_value=0, max_value=86400), max_size=2),
)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_runs_times_never_go_backwards(
    tmp_path: Path,
    store: Store,
    timeout: int,
    waited: int,
    late: int,
    by_sweep: bool,
    later_turns: list[int],
) -> None:
    """Held on a virtual clock (after a wait shorter than its gate's timeout, or none), settled
    by a sweep at T or resolved at T on a server's clock, then resumed: everything the run
    and the turns after it record is dated at T or later, and in the order it was made."""
    from belt.engine.entrypoints import resume_run
    from belt.records.interrupts import resolve_interrupt

    gate = {**GATE, "timeout": timeout}
    waits = [{"seconds": waited}] if waited < timeout else []
    turns = [gated_turn(wait=waits)] + [
        {"user": "and?", "model": [{"say": "more"}], "after": f"{after}s"} for after in later_turns
    ]
    path = tmp_path / "scenario.json"
    scenario = {"agent": {"name": "t", "hooks": [gate]}, "turns": turns, "clock": timestamp(START)}
    path.write_text(json.dumps(scenario))
    held, _ = run_scenario(scenario=path)
    held_stamps = set(stamps_of(store, held))
    (interrupt,) = held["chat"]["pending_interrupts"]
    run_id = held["runs"][0]["id"]
    at = parse_rfc3339(interrupt["expires_at"], "expires_at") + timedelta(seconds=late)
    if by_sweep:
        assert [i["id"] for i in sweep(store=store, now=at, run_id=run_id)] == [interrupt["id"]]
    else:
        with installed(VirtualClock(at)):  # as belt serve --clock resolves it over its API
            resolve_interrupt(store=store, interrupt_id=interrupt["id"], decision="allow")
    resumed, _ = resume_run(run_id=run_id)
    assert [run["state"] for run in resumed["runs"]] == ["completed"] * len(turns)
    assert_in_order(store, resumed)
    settled_at = timestamp(at)
    assert max(stamp for stamp, _ in held_stamps) <= settled_at
    made = [
        (stamp, what)
        for stamp, what in stamps_of(store, resumed)
        if (stamp, what) not in held_stamps
    ]
    assert made and all(stamp >= settled_at for stamp, _ in made), (made, settled_at)
    assert resumed["simulation"]["clock"] >= settled_at
