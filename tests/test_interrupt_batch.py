"""Batches bound to what was shown: `belt interrupt resolve --all` settles the gates it showed,
with their digest, all or none, locally and against `belt serve`; a repeat is a no-op; an API
that resolves one gate at a time is used only with --no-atomic."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.errors import BeltError, Conflict, ExitCode
from belt.records.interrupts import (
    batch_digest,
    create_interrupt,
    person,
    read_record,
    resolve_batch,
    resolve_interrupt,
    short_digest,
)
from belt.server.app import create_app
from belt.store import Store
from tests.cli.runner import belt
from tests.fake_platform import FakePlatform, envelope
from tests.loopback import CLIENT
from tests.servers import running
from tests.terminal import on_terminal

ROOT = Path(__file__).parent.parent


def gate(
    store: Store, tool: str = "delete_file", run_id: str = "ar_one", **options: Any
) -> dict[str, Any]:
    """A pending gate holding a call of ``tool`` on ``run_id``."""
    return create_interrupt(
        store=store,
        run_id=run_id,
        chat_id="ch_one",
        event="agent.tool_call",
        meta={"event": "agent.tool_call", "data": {"tool": tool, "arguments": {"n": 1}}},
        **options,
    )


def statuses(store: Store, items: list[dict[str, Any]]) -> list[str]:
    return [read_record(store=store, interrupt_id=i["id"])["status"] for i in items]


# -- the digest ---------------------------------------------------------------------------------


def test_the_digest_covers_the_ids_and_payloads_in_any_order(store: Store) -> None:
    one, two = gate(store), gate(store, "read_file")
    digest = batch_digest([one, two])
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert batch_digest([two, one]) == digest
    settled = {**one, "status": "resolved", "resolution": "allow"}
    assert batch_digest([settled, two]) == digest  # its settling is not its payload
    changed = {**one, "meta": {"data": {"tool": "delete_file", "arguments": {"n": 2}}}}
    assert batch_digest([changed, two]) != digest
    assert batch_digest([one]) != digest


# -- locally ------------------------------------------------------------------------------------


def test_resolve_all_shows_the_gates_and_their_digest_and_settles_them_as_one_batch(
    store: Store,
) -> None:
    items = [gate(store), gate(store, "read_file"), gate(store, run_id="ar_two")]
    digest = batch_digest(items[:2])
    refused = belt("interrupt", "resolve", "--all", "allow", "--run", "ar_one")
    assert refused.exit_code == 2
    assert f"2 gate(s), digest {short_digest(digest)}" in refused.stderr
    assert items[0]["short_id"] in refused.stderr and items[2]["short_id"] not in refused.stderr
    assert f"--yes --digest {short_digest(digest)}" in refused.stderr
    assert statuses(store, items) == ["pending"] * 3

    result = belt(
        "interrupt", "resolve", "--all", "allow", "--run", "ar_one", "--yes",
        "--digest", short_digest(digest), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    outcome = result.json()
    assert (outcome["digest"], outcome["repeated"], outcome["missed"]) == (digest, False, [])
    assert sorted(i["id"] for i in outcome["resolved"]) == sorted(i["id"] for i in items[:2])
    assert statuses(store, items) == ["resolved", "resolved", "pending"]
    recorded = read_record(store=store, interrupt_id=items[0]["id"])["resolved_by"]
    assert recorded == {
        "how": "batch",
        "batch": f"bat_{short_digest(digest)}",
        "digest": digest,
        "user": person("cli")["user"],
        "door": "cli",
    }


def test_repeating_the_same_batch_is_a_no_op_that_says_so(store: Store) -> None:
    earlier = gate(store)  # settled the same way before, by a person: not of the batch
    resolve_interrupt(store=store, interrupt_id=earlier["id"], decision="deny", by=person("cli"))
    items = [gate(store), gate(store, "read_file")]
    shown = short_digest(batch_digest(items))
    args = ("interrupt", "resolve", "--all", "deny", "--yes", "--digest", shown)
    assert belt(*args).exit_code == 0
    settled_at = [read_record(store=store, interrupt_id=i["id"])["resolved_at"] for i in items]

    again = belt(*args)
    assert again.exit_code == 0, again.stderr
    assert "2 gate(s) settled by this batch already" in again.stderr
    assert "nothing to do" in again.stderr
    assert [read_record(store=store, interrupt_id=i["id"])["resolved_at"] for i in items] == (
        settled_at
    )
    # The same gates asked for with the other decision were not settled by that batch.
    other = belt("interrupt", "resolve", "--all", "allow", "--yes", "--digest", shown)
    assert other.exit_code == ExitCode.CONFLICT
    assert "not the ones shown" in other.stderr


def test_the_same_batch_again_finishes_one_cut_short(store: Store) -> None:
    items = [gate(store), gate(store), gate(store)]
    digest = batch_digest(items)
    # A process killed after settling the first of its batch leaves the rest pending.
    by: Any = {"how": "batch", "batch": f"bat_{short_digest(digest)}", "digest": digest}
    resolve_interrupt(store=store, interrupt_id=items[0]["id"], decision="allow", by=by)
    args = ("interrupt", "resolve", "--all", "allow", "--yes", "--digest", short_digest(digest))
    result = belt(*args)
    assert result.exit_code == 0, result.stderr
    assert "resolved 3 of 3 as allow" in result.stderr
    assert statuses(store, items) == ["resolved"] * 3
    assert "nothing to do" in belt(*args).stderr


def test_a_digest_other_than_the_selected_gates_settles_nothing(store: Store) -> None:
    items = [gate(store), gate(store)]
    shown = short_digest(batch_digest(items))
    gate(store)  # a third opens after the two were shown
    result = belt("interrupt", "resolve", "--all", "allow", "--yes", "--digest", shown)
    assert result.exit_code == ExitCode.CONFLICT
    assert f"not {shown}" in result.stderr and "nothing settled" in result.stderr
    assert belt("interrupt", "list", "--json").json() != []
    assert all(i["status"] == "pending" for i in belt("interrupt", "list", "--json").json())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--digest", "abc"], "--digest 'abc': expected the digest shown"),
        (["--digest", "xyzxyzxyzxyzxyz"], "expected the digest shown"),
    ],
)
def test_a_digest_that_is_not_one_is_a_usage_error(
    store: Store, args: list[str], message: str
) -> None:
    gate(store)
    result = belt("interrupt", "resolve", "--all", "allow", "--yes", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_batch_options_have_no_use_with_one_id(store: Store) -> None:
    item = gate(store)
    for option in (["--digest", "0123456789ab"], ["--no-atomic"]):
        result = belt("interrupt", "resolve", item["id"], "allow", *option)
        assert result.exit_code == 2
        assert f"{option[0]} is for --all" in result.stderr


def test_a_batch_that_races_a_settlement_at_the_confirmation_settles_none(store: Store) -> None:
    items = [gate(store), gate(store, "read_file"), gate(store, "send_email")]
    with on_terminal(
        ["interrupt", "resolve", "--all", "allow"],
        env={**os.environ, "TERM": "dumb"},
        cwd=ROOT,
    ) as terminal:
        terminal.wait_for("settle 3 pending gate(s) as allow? [y/N]: ")
        assert f"digest {short_digest(batch_digest(items))}" in terminal.text
        resolve_interrupt(store=store, interrupt_id=items[1]["id"], decision="deny")
        os.write(terminal.primary, b"y\n")
        code = terminal.finish()
    assert code == ExitCode.CONFLICT, terminal.text
    assert f"interrupt {items[1]['id']} is no longer pending" in terminal.text
    assert "none of the 3 settled" in terminal.text
    assert statuses(store, items) == ["pending", "resolved", "pending"]


def test_the_store_refuses_a_batch_one_of_whose_gates_changed(store: Store) -> None:
    items = [gate(store), gate(store)]
    digest = batch_digest(items)
    store.merge("interrupt", items[0]["id"], {"meta": {"data": {"tool": "rm", "arguments": {}}}})
    with pytest.raises(Conflict, match="not the ones shown"):
        resolve_batch(
            store=store,
            interrupt_ids=[i["id"] for i in items],
            digest=digest,
            decision="allow",
            by=person("cli"),
        )
    assert statuses(store, items) == ["pending", "pending"]


# -- against belt serve ---------------------------------------------------------------------------


def test_against_belt_serve_a_batch_is_all_or_none_and_a_repeat_changes_nothing(
    store: Store,
) -> None:
    items = [gate(store), gate(store, "read_file"), gate(store, "send_email")]
    with running(create_app(store=store, sweep_interval=0)) as url:
        result = belt(
            "interrupt", "resolve", "--all", "allow", "--run", "ar_one", "--tool", "delete_file",
            "--yes", "--api", url,
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        assert "resolved 1 of 1 as allow" in result.stderr
        recorded = read_record(store=store, interrupt_id=items[0]["id"])["resolved_by"]
        assert (recorded["how"], recorded["door"], recorded["token"]) == ("batch", "api", False)

        # A batch raced by a settlement: 409 naming the gate, and none of the rest settled.
        rest = items[1:]
        body = {"ids": [i["id"] for i in rest], "digest": batch_digest(rest), "decision": "deny"}
        resolve_interrupt(store=store, interrupt_id=rest[1]["id"], decision="allow")
        reply = CLIENT.post(f"{url}/_belt/interrupts/batch", json=body)
        assert reply.status_code == 409, reply.text
        assert rest[1]["id"] in reply.json()["detail"]
        assert statuses(store, items) == ["resolved", "pending", "resolved"]

        # The same batch sent twice (a retry): settled once, then a no-op.
        body = {"ids": [rest[0]["id"]], "digest": batch_digest(rest[:1]), "decision": "deny"}
        first = CLIENT.post(f"{url}/_belt/interrupts/batch", json=body)
        assert first.status_code == 200 and first.json()["data"]["repeated"] is False
        settled_at = read_record(store=store, interrupt_id=rest[0]["id"])["resolved_at"]
        second = CLIENT.post(f"{url}/_belt/interrupts/batch", json=body)
        assert second.status_code == 200 and second.json()["data"]["repeated"] is True
        assert read_record(store=store, interrupt_id=rest[0]["id"])["resolved_at"] == settled_at

        # The route is behind the guard like every other, and checks what it is sent.
        assert (
            CLIENT.post(
                f"{url}/_belt/interrupts/batch",
                content=b"{}",
                headers={"content-type": "text/plain"},
            ).status_code
            == 415
        )
        assert (
            CLIENT.post(
                f"{url}/_belt/interrupts/batch",
                json=body,
                headers={"origin": "http://evil.example"},
            ).status_code
            == 403
        )
        bad = CLIENT.post(f"{url}/_belt/interrupts/batch", json={"ids": [], "digest": "x"})
        assert bad.status_code == 422 and "ids:" in bad.json()["detail"]


# -- against an API that resolves one gate at a time --------------------------------------------


def one_at_a_time(platform: FakePlatform, items: list[dict[str, Any]]) -> None:
    platform.reply("GET", "/agent-runs/ar_one/interrupts", 200, envelope(items))
    for item in items:
        settled = {**item, "status": "resolved", "resolution": "allow"}
        platform.reply("POST", f"/interrupts/{item['id']}/resolve", 200, envelope(settled))


def test_against_a_one_at_a_time_api_belt_settles_one_by_one_only_with_no_atomic(
    store: Store,
) -> None:
    items = [gate(store), gate(store, "read_file")]
    with FakePlatform() as platform:
        one_at_a_time(platform, items)
        args = ("interrupt", "resolve", "--all", "allow", "--run", "ar_one", "--yes")
        refused = belt(*args, "--api", platform.url)
        assert refused.exit_code == 2, refused.stderr
        assert "cannot promise all or none of the 2 gate(s)" in refused.stderr
        assert "--no-atomic" in refused.stderr
        assert not [r for r in platform.requests if r.method == "POST"]

        result = belt(*args, "--no-atomic", "--api", platform.url, "--json")
        assert result.exit_code == 0, result.stderr
        assert result.json()["atomic"] is False
        posted = [r.path for r in platform.requests if r.method == "POST"]
        assert posted == [f"/interrupts/{i['id']}/resolve" for i in items]


# -- all or none, whatever settles meanwhile ------------------------------------------------------


@settings(max_examples=15)
@given(
    racers=st.lists(st.booleans(), min_size=2, max_size=5),
    decision=st.sampled_from(["allow", "deny"]),
)
def test_a_batch_settles_all_its_gates_or_none_when_some_are_settled_concurrently(
    racers: list[bool], decision: str
) -> None:
    with tempfile.TemporaryDirectory() as root:
        store = Store(Path(root), fsync=False)
        items = [gate(store) for _ in racers]
        digest = batch_digest(items)
        start = threading.Barrier(1 + sum(racers))
        outcomes: dict[str, str] = {}

        def batch() -> None:
            start.wait()
            try:
                resolve_batch(
                    store=store,
                    interrupt_ids=[i["id"] for i in items],
                    digest=digest,
                    decision=decision,
                    by=person("cli"),
                )
                outcomes["batch"] = "settled"
            except Conflict:
                outcomes["batch"] = "refused"

        def race(item: dict[str, Any]) -> None:
            start.wait()
            try:
                resolve_interrupt(store=store, interrupt_id=item["id"], decision="deny")
                outcomes[item["id"]] = "settled"
            except BeltError:
                outcomes[item["id"]] = "refused"

        threads = [threading.Thread(target=batch)]
        threads += [
            threading.Thread(target=race, args=(i,))
            for i, r in zip(items, racers, strict=True)
            if r
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        records = [read_record(store=store, interrupt_id=i["id"]) for i in items]
        by_batch = [(r.get("resolved_by") or {}).get("how") == "batch" for r in records]
        assert all(by_batch) or not any(by_batch), by_batch
        assert all(by_batch) == (outcomes["batch"] == "settled")
        for item, record in zip(items, records, strict=True):
            raced = outcomes.get(item["id"])
            if outcomes["batch"] == "settled":
                assert raced in (None, "refused")
            else:
                # Refused only because a racer got there first; the rest stay pending.
                assert record["status"] == ("resolved" if raced == "settled" else "pending")
        if outcomes["batch"] == "refused":
            assert "settled" in outcomes.values()
