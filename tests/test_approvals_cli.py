"""`belt interrupt auto`, `belt serve --approvals` and `belt interrupt what-if`, as people run
them: real processes, a real server on port 0, a real store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from belt.backends.backend import LocalBackend
from belt.records.interrupts import person, read_record, resolve_interrupt, sweep
from belt.rules.approvals import load_rules, settle_as_they_open, store_resolver
from belt.server.app import create_app
from belt.store import Store
from belt.store.clock import parse_timestamp
from tests.cli.runner import belt
from tests.cli.test_interrupt import Lines
from tests.cli.test_serve import serve_process
from tests.servers import running
from tests.test_approvals import EXAMPLE, gate


def settled(store: Store, ids: list[str], timeout: float = 60) -> list[Any]:
    """The records of ``ids`` once none is pending (a deadline, not a measure)."""
    deadline = time.monotonic() + timeout
    while True:
        records = [read_record(store=store, interrupt_id=i) for i in ids]
        if all(r["status"] != "pending" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


@contextmanager
def auto_process(belt_home: Path, *args: str) -> Iterator[tuple[Lines, dict[str, Any]]]:
    """``belt interrupt auto ARGS`` in its own process, stopped with Ctrl-C at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "interrupt", "auto", "--interval", "0.05", *args],
        env={**os.environ, "BELT_HOME": str(belt_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    ended: dict[str, Any] = {}
    try:
        yield Lines(proc), ended
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        ended.update(code=proc.returncode, stderr=err.decode())


def test_auto_settles_gates_another_process_opens_and_leaves_ask_gates(
    belt_home: Path, store: Store
) -> None:
    waiting = gate(store, "read_file", {"path": "/etc/hosts"})  # pending before auto starts
    with auto_process(belt_home, "--rules", str(EXAMPLE), "--json") as (lines, ended):
        first = json.loads(lines.next())
        assert (first["interrupt"], first["decision"], first["rule"]) == (
            waiting["id"],
            "allow",
            "reads",
        )
        opened = subprocess.run(
            [sys.executable, "-c", OPEN_GATES, str(belt_home)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        seen = {}
        for _ in opened:
            line = json.loads(lines.next())
            seen[line["interrupt"]] = line
        records = settled(store, opened[:2])
    assert ended["code"] == 130 and ended["stderr"].endswith("interrupted\n"), ended["stderr"]
    assert "Traceback" not in ended["stderr"]
    denied, allowed, asked = (seen[i] for i in opened)
    assert (denied["decision"], denied["rule"], denied["settled"]) == (
        "deny",
        "other deletes",
        True,
    )
    assert (allowed["decision"], allowed["rule"], allowed["settled"]) == ("allow", "reads", True)
    assert (asked["decision"], asked["settled"]) == ("ask", False)
    assert [(r["status"], r["resolution"]) for r in records] == [
        ("resolved", "deny"),
        ("resolved", "allow"),
    ]
    assert records[0]["resolved_by"]["how"] == "rule"
    assert records[0]["resolved_by"]["rule"] == "other deletes"
    assert read_record(store=store, interrupt_id=opened[2])["status"] == "pending"


OPEN_GATES = """
import os, sys
os.environ["BELT_HOME"] = sys.argv[1]
from belt.records.interrupts import create_interrupt
for tool, path in (("delete_file", "/etc/passwd"), ("read_file", "/srv/a"), ("send_email", "")):
    item = create_interrupt(
        run_id="ar_two", chat_id="ch_two", event="agent.tool_call",
        meta={"data": {"tool": tool, "arguments": {"path": path}}},
    )
    print(item["id"])
"""


def test_auto_once_prints_a_line_per_gate_and_a_summary(store: Store) -> None:
    allowed = gate(store, "read_file")
    left = gate(store, "send_email")
    result = belt("interrupt", "auto", "--rules", str(EXAMPLE), "--once")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{allowed['short_id']}  allow    agent.tool_call read_file(")
    assert lines[0].endswith('rule "reads": reading changes nothing')
    assert lines[1].startswith(f"{left['short_id']}  ask      agent.tool_call send_email(")
    assert "left to a person" in lines[1]
    assert result.stderr.strip().endswith(
        "settled 1, left 1 to a person, skipped 0 settled meanwhile"
    )


def test_a_bad_rules_file_is_refused_before_anything_is_settled(
    store: Store, tmp_path: Path
) -> None:
    item = gate(store, "read_file")
    bad = tmp_path / "rules.toml"
    bad.write_text(EXAMPLE.read_text() + '\n[[rules]]\nname = "late"\ntol = "x"\n')
    for command in (["auto", "--once"], ["what-if"]):
        result = belt("interrupt", *command, "--rules", str(bad))
        assert result.exit_code == 5, result.stderr
        assert f'{bad}: rules[6] "late".tol: unknown field' in result.stderr
    assert read_record(store=store, interrupt_id=item["id"])["status"] == "pending"


def test_auto_against_belt_serve_settles_the_runs_it_is_given(store: Store) -> None:
    allowed = gate(store, "read_file")
    left = gate(store, "send_email")
    elsewhere = gate(store, "read_file", run_id="ar_other")
    with running(create_app(store=store, sweep_interval=0)) as url:
        result = belt(
            "interrupt", "auto", "--rules", str(EXAMPLE), "--api", url, "--run", "ar_one",
            "--once", "--json",
        )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert {line["interrupt"]: line["decision"] for line in lines} == {
        allowed["id"]: "allow",
        left["id"]: "ask",
    }
    record = read_record(store=store, interrupt_id=allowed["id"])
    assert (record["status"], record["resolution"]) == ("resolved", "allow")
    assert record["resolved_data"] == {"reason": "reading changes nothing"}
    assert read_record(store=store, interrupt_id=elsewhere["id"])["status"] == "pending"


def test_auto_with_api_needs_runs(store: Store) -> None:
    result = belt("interrupt", "auto", "--rules", str(EXAMPLE), "--api", "http://127.0.0.1:1")
    assert result.exit_code == 2
    assert "with --api, auto needs --run" in result.stderr


def test_an_idle_look_costs_two_stats(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `belt interrupt auto` does between two gates, while nothing changes: a stat of the
    pending tag's directory and one of the run index's, nothing read."""
    gate(store, "send_email")
    past = time.time() - 60  # the store's directories changed long enough ago to be trusted
    for directory in (store.root / "tags", store.root / "index"):
        for path in [directory, *directory.rglob("*")]:
            os.utime(path, (past, past))
    calls: list[str] = []
    looks = 0

    class Done(Exception):
        pass

    def counted(name: str) -> Any:
        real = getattr(os, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return call

    def sleep(_: float) -> None:
        nonlocal looks
        looks += 1
        if looks == 1:  # from the first look after the start on
            for name in ("stat", "lstat", "scandir", "listdir", "open"):
                monkeypatch.setattr(os, name, counted(name))
        if looks == 3:
            raise Done

    events = LocalBackend(store).watch_interrupts(interval=0, sleep=sleep)
    outcomes = settle_as_they_open(load_rules(EXAMPLE), events, store_resolver(store))
    with pytest.raises(Done):
        assert [o.verdict.decision for o in outcomes if not isinstance(o, str)] == ["ask"]
    monkeypatch.undo()
    assert calls == ["stat", "stat"] * 2  # two looks, two stats each


def test_serve_approvals_with_two_workers_settles_each_gate_once(store: Store) -> None:
    with serve_process(
        "--workers", "2", "--json", "--sweep-interval", "0", "--approvals", str(EXAMPLE)
    ) as (_, output):
        # The gate left to a person opens first: the look that settles the last read has seen
        # it, so its line is written once the reads are settled, whatever the machine's load.
        ids = [gate(store, "send_email")["id"]]
        ids += [gate(store, "read_file", {"path": f"/srv/{n}"})["id"] for n in range(20)]
        records = settled(store, ids[1:])
        time.sleep(1.5)  # both workers look again: neither settles a gate a second time
    assert "gates settled by" in output["stderr"] and "2 workers" in output["stderr"]
    assert [(r["status"], r["resolution"]) for r in records] == [("resolved", "allow")] * 20
    assert all(r["resolved_by"]["rule"] == "reads" for r in records)
    lines = [json.loads(line) for line in output["stdout"].splitlines()]
    approvals = [line for line in lines if line.get("action") == "approvals"]
    assert sorted(line["target"] for line in approvals if line["status"] == 200) == sorted(ids)
    assert [line for line in approvals if line["status"] != 200] == []


def test_serve_refuses_a_bad_rules_file_before_it_listens(tmp_path: Path) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text('[[rules]]\nname = "a"\ndecision = "maybe"\nreason = "r"\n')
    result = belt("serve", "--port", "0", "--approvals", str(bad))
    assert result.exit_code == 5
    assert f'{bad}: rules[0] "a".decision: expected one of allow, deny, ask' in result.stderr


def history(store: Store) -> dict[str, str]:
    """Gates settled by people, a rule and an expiry."""
    opened = parse_timestamp("2026-08-11T10:00:00Z")
    names = {}
    for name, tool, decision, reason in (
        ("denied read", "read_file", "deny", "private"),
        ("allowed read", "read_file", "allow", None),
        ("allowed delete", "delete_file", "allow", "ticket 12"),
    ):
        item = gate(store, tool, {"path": "/srv/x"}, now=opened)
        resolve_interrupt(
            store=store,
            interrupt_id=item["id"],
            decision=decision,
            data={"reason": reason} if reason else None,
            now=opened + timedelta(minutes=30),
            by=person("cli"),
        )
        names[name] = item["id"]
    loaded = load_rules(EXAMPLE)
    by_rule = gate(store, "read_file", now=opened)
    resolve_interrupt(
        store=store,
        interrupt_id=by_rule["id"],
        decision="allow",
        now=opened,
        by=loaded.settlement(loaded.rules[1]),
    )
    gate(store, "send_email", now=opened, timeout=60, default_resolution="deny")
    sweep(store=store, now=opened + timedelta(minutes=2))
    return names


def test_what_if_reports_counts_disagreements_and_time_saved(store: Store) -> None:
    names = history(store)
    result = belt("interrupt", "what-if", "--rules", str(EXAMPLE))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{EXAMPLE} (sha256:")
    assert lines[0].endswith("over 5 settled gate(s): would allow 3, deny 1, leave 1 to a person")
    assert lines[1] == "2 disagreement(s), 1 where a rule would allow what a person denied:"
    assert lines[3].startswith(names["denied read"]) and "private" in lines[3]
    assert lines[4].startswith(names["allowed delete"]) and "ticket 12" in lines[4]
    assert lines[-1] == "person-time saved: 1h 30m over 3 gate(s) a person settled"


def test_what_if_json_and_strict(store: Store) -> None:
    names = history(store)
    result = belt("interrupt", "what-if", "--rules", str(EXAMPLE), "--json", "--strict")
    assert result.exit_code == 1
    document = result.json()
    assert document["would"] == {"allow": 3, "deny": 1, "ask": 1}
    assert document["allows_what_a_person_denied"] == 1
    assert document["disagreements"][0]["interrupt"] == names["denied read"]
    assert document["person_seconds_saved"] == 5400
    since = ["interrupt", "what-if", "--rules", str(EXAMPLE), "--strict", "--json", "--since"]
    later = belt(*since, "2026-08-11T10:01:00Z")  # the rule's settlement (10:00) is left out
    assert (later.exit_code, later.json()["considered"]) == (1, 4)
    after = belt(*since, "2026-08-11T10:31:00Z")  # the person's denial (10:30) too
    assert (after.exit_code, after.json()["considered"]) == (0, 0)


def test_what_if_against_belt_serve_reads_what_the_api_lists(store: Store) -> None:
    history(store)
    with running(create_app(store=store, sweep_interval=0)) as url:
        result = belt(
            "interrupt", "what-if", "--rules", str(EXAMPLE), "--api", url, "--run", "ar_one",
            "--json",
        )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["considered"] == 5
    # The API lists no trail: every settlement but the expiry reads as unknown.
    assert {d["how"] for d in document["disagreements"]} == {"unknown"}


def pending(interrupt_id: str, tool: str) -> dict[str, Any]:
    """A pending gate of run ar_platform holding a call of ``tool``, as the platform lists it."""
    return {
        "id": interrupt_id,
        "short_id": interrupt_id[4:12],
        "created_at": "2026-08-11T10:00:00.000Z",
        "run_id": "ar_platform",
        "chat_id": "ch_platform",
        "reason": "hook_gate",
        "source": "hook:agent.tool_call",
        "status": "pending",
        "meta": {"event": "agent.tool_call", "data": {"tool": tool, "arguments": {}}},
    }


def test_auto_against_a_platform_skips_a_gate_settled_meanwhile_with_a_line() -> None:
    """The platform lists a gate as pending; by the time auto resolves it, someone else has
    (409): a line says so, and auto goes on to the next gate."""
    from tests.fake_platform import FakePlatform, envelope, problem

    with FakePlatform() as platform:
        platform.reply(
            "GET",
            "/agent-runs/ar_platform/interrupts",
            200,
            envelope([pending("int_taken00000", "read_file"), pending("int_free000000", "rm_x")]),
        )
        platform.reply(
            "POST",
            "/interrupts/int_taken00000/resolve",
            409,
            problem(409, "Conflict", "interrupt is not pending"),
        )
        result = belt(
            "interrupt", "auto", "--rules", str(EXAMPLE), "--api", platform.url,
            "--run", "ar_platform", "--once",
        )  # fmt: skip
        sent = [r.json() for r in platform.requests if r.method == "POST"]
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("int_taken00000  skipped  agent.tool_call read_file({})")
    assert "interrupt is not pending (HTTP 409" in lines[0]
    assert lines[1].startswith("int_free000000  ask ")
    assert sent == [{"decision": "allow", "data": {"reason": "reading changes nothing"}}]
    assert "settled 0, left 1 to a person, skipped 1 settled meanwhile" in result.stderr
