"""``belt replay``: recorded payloads delivered again to an edited handler, answers compared."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.deliveries.replay import from_file, replay, since_moment
from belt.engine.entrypoints import run_scenario
from belt.errors import InvalidInput, NotFound, UsageError
from belt.rules.policy import load_policy
from belt.server.app import create_app
from belt.server.deciders import policy_decider
from belt.store import open_store
from tests.cli.runner import belt
from tests.servers import running
from tests.vectors import SECRET

EXAMPLES = Path(__file__).parent.parent / "examples"
START_HANDLER = "start your handler there, or fix the port in its URL"
GUARDED = EXAMPLES / "guarded-agent.toml"
DEMO = "http://127.0.0.1:8787"


@contextmanager
def policy_server(policy: Path = EXAMPLES / "policy.toml", **options: Any) -> Iterator[str]:
    """``belt serve --policy`` over the state directory's store (its journal is the one
    ``belt replay journal`` reads)."""
    app = create_app(decide=policy_decider(load_policy(policy)), sweep_interval=0, **options)
    with running(app) as url:
        yield url


@pytest.fixture
def journalled() -> Iterator[dict[str, Any]]:
    """The guarded agent run once against the example policy, served and journalled."""
    with policy_server() as url:
        report, _ = run_scenario(scenario=GUARDED, routes=[f"{DEMO}={url}"])
    yield report


def edited_policy(tmp_path: Path) -> Path:
    """The example policy with its /tmp rule turned round: /tmp deletes are now denied, and the
    others allowed (exactly the two delete_file decisions change)."""
    text = (EXAMPLES / "policy.toml").read_text()
    text = text.replace('decision = "allow"', 'decision = "@"').replace(
        'decision = "deny"', 'decision = "allow"'
    )
    text = text.replace('decision = "@"', 'decision = "deny"')
    path = tmp_path / "edited.toml"
    path.write_text(text)
    return path


def store_files(root: Path) -> set[str]:
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and "locks" not in path.parts
    }


def test_a_journal_replayed_against_an_edited_policy_reports_exactly_what_changed(
    journalled: dict[str, Any], tmp_path: Path, belt_home: Path
) -> None:
    before = store_files(belt_home)
    report = replay(source="journal", policy=edited_policy(tmp_path))
    rows = report["rows"]
    assert [(r["event"], r["tool"]) for r in rows] == [
        ("agent.turn_start", None),
        ("agent.tool_call", "delete_file"),
        ("agent.turn_start", None),
        ("agent.tool_call", "delete_file"),
    ]
    assert [r["recorded"]["decision"] for r in rows] == ["allow", "deny", "allow", "allow"]
    assert [r["replayed"]["decision"] for r in rows] == ["allow", "allow", "allow", "deny"]
    assert [r["changed"] for r in rows] == [[], ["decision"], [], ["decision"]]
    assert report["summary"] == {
        "replayed": 4,
        "changed": 2,
        "decisions_changed": 2,
        "injections_changed": 0,
        "errors": 0,
    }
    # Nothing was written but the replay's own journal.
    assert store_files(belt_home) - before == {"store/logs/journal/replay.jsonl"}
    records = open_store().read_log("journal", "replay")
    assert [r["replay_id"] for r in records] == [report["replay_id"]] * 4
    assert records[1]["request"]["data"]["tool"] == "delete_file"


def test_check_exits_1_only_when_something_changed(
    journalled: dict[str, Any], tmp_path: Path
) -> None:
    result = belt("replay", "journal", "--policy", str(edited_policy(tmp_path)), "--check")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["#", "event", "tool", "recorded", "now", "changed"]
    assert lines[2].split() == ["2", "agent.tool_call", "delete_file", "deny", "allow", "decision"]
    assert lines[-1].startswith("4 payload(s) from the journal of belt serve replayed to policy")
    same = belt("replay", "journal", "--policy", str(EXAMPLES / "policy.toml"), "--check")
    assert same.exit_code == 0
    assert "0 changed" in same.stdout


def test_filters_by_event_chat_and_time(journalled: dict[str, Any], tmp_path: Path) -> None:
    policy = edited_policy(tmp_path)
    by_event = replay(source="journal", policy=policy, event="agent.tool_call")
    assert [r["event"] for r in by_event["rows"]] == ["agent.tool_call"] * 2
    chat = journalled["chat"]["id"]
    assert len(replay(source="journal", policy=policy, chat=chat)["rows"]) == 4
    assert replay(source="journal", policy=policy, chat="ch_other")["rows"] == []
    assert len(replay(source="journal", policy=policy, since="1h")["rows"]) == 4
    assert replay(source="journal", policy=policy, since="2999-01-01T00:00:00Z")["rows"] == []


def test_a_simulated_run_is_replayed_from_its_hook_records(tmp_path: Path) -> None:
    with policy_server() as url:
        report, _ = run_scenario(scenario=GUARDED, routes=[f"{DEMO}={url}"])
        run_id = report["runs"][0]["id"]
        # Only webhook hooks are delivered again (the gate's record is not).
        result = replay(source=run_id, to=f"{url}/hooks")
    assert [r["recorded"]["decision"] for r in result["rows"]] == [
        "allow",
        "deny",
        "allow",
        "allow",
    ]
    assert result["summary"]["changed"] == 0
    assert result["source"] == f"run {run_id}"


def test_a_replay_to_a_url_is_signed_again_with_the_secret(tmp_path: Path) -> None:
    with policy_server() as url:
        run_scenario(scenario=GUARDED, routes=[f"{DEMO}={url}"])
    with policy_server(secret=SECRET) as signed:
        unsigned = replay(source="journal", to=f"{signed}/hooks", event="agent.tool_call")
        resigned = replay(
            source="journal", to=f"{signed}/hooks", event="agent.tool_call", secret=SECRET
        )
    assert [r["replayed"]["decision"] for r in unsigned["rows"]] == ["error", "error"]
    assert "answered HTTP 401" in unsigned["rows"][0]["replayed"]["error"]
    assert [r["replayed"]["decision"] for r in resigned["rows"]] == ["deny", "allow"]
    assert resigned["summary"]["errors"] == 0


def test_a_handler_is_called_as_belt_serve_calls_it(journalled: dict[str, Any]) -> None:
    report = replay(source="journal", handler=f"{EXAMPLES / 'handler.py'}:decide")
    # The handler decides as the policy does; only its reminder's wording differs.
    assert [r["changed"] for r in report["rows"]] == [["injection"], [], ["injection"], []]
    # A handler whose parameter is a dict gets the payload as recorded, as a py: handler does.
    report = replay(source="journal", handler="tests.pyhooks:dict_type", event="agent.tool_call")
    assert [r["replayed"]["reason"] for r in report["rows"]] == ["dict agent.tool_call"] * 2
    report = replay(source="journal", handler="tests.pyhooks:explode", event="agent.tool_call")
    assert [r["replayed"]["decision"] for r in report["rows"]] == ["error", "error"]
    assert report["rows"][0]["replayed"]["error"].startswith("tests.pyhooks:explode raised")
    assert report["summary"]["changed"] == 2


def test_a_file_of_payloads_and_of_records(tmp_path: Path) -> None:
    payload = {
        "event": "agent.tool_call",
        "timestamp": "2026-08-11T14:00:00.000Z",
        "agent_id": "ag_1",
        "chat_id": "ch_1",
        "run_id": "ar_1",
        "turn_count": 1,
        "data": {"tool": "delete_file", "arguments": {"path": "/etc/passwd"}},
    }
    lines = [
        payload,
        {"request": payload, "status": 200, "decision": "allow", "response": {}},
        {"payload": payload, "decision": "deny"},
        {"event": "not a payload"},
    ]
    path = tmp_path / "payloads.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    report = replay(source=str(path), policy=EXAMPLES / "policy.toml")
    rows = report["rows"]
    assert [r["recorded"]["decision"] for r in rows] == [None, "allow", "deny", None]
    assert [r["replayed"]["decision"] for r in rows] == ["deny", "deny", "deny", "error"]
    assert [r["changed"] for r in rows] == [[], ["decision"], [], []]
    assert rows[3]["replayed"]["error"].startswith(
        "the recorded payload is not a LifecycleHookPayload"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [("{nope\n", "line 1: not JSON"), ('{"a": 1}\n[1]\n', "line 2: expected an object")],
)
def test_a_bad_file_is_invalid_input(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InvalidInput, match=message):
        from_file(path)
    result = belt("replay", str(path), "--policy", str(EXAMPLES / "policy.toml"))
    assert result.exit_code == 5


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), 2, "give one of --to URL, --policy FILE or --handler MODULE:FUNC"),
        (("--to", "http://a.example", "--policy", "p.toml"), 2, "give one of"),
        (("--policy", "p.toml", "--secret", SECRET), 2, "--secret signs requests to --to URL"),
        (("--to", "http://a.example", "--secret", "nope"), 5, "secret: expected whsec_"),
        (("--to", "ftp://a.example"), 2, "--to 'ftp://a.example': the URL must be"),
        (("--policy", "p.toml", "--since", "yesterday"), 2, "--since 'yesterday': expected"),
        (("--handler", "tests.no_such_zz:f"), 3, "no module named 'tests.no_such_zz'"),
    ],
)
def test_wrong_options_are_refused(args: tuple[str, ...], code: int, message: str) -> None:
    result = belt("replay", "journal", *args)
    assert result.exit_code == code
    assert message in result.stderr


def test_an_unknown_source_is_not_found(tmp_path: Path) -> None:
    result = belt("replay", "ar_nothing", "--policy", str(EXAMPLES / "policy.toml"))
    assert result.exit_code == 3
    assert "no run ar_nothing" in result.stderr
    result = belt("replay", str(tmp_path / "x" / "y.jsonl"), "--policy", "p.toml")
    assert result.exit_code == 3
    assert "no such file or simulated run" in result.stderr


def test_a_source_that_is_not_a_regular_file_is_invalid_not_missing(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for source, kind in [(tmp_path, "a directory"), (fifo, "a FIFO"), ("/dev/zero", "a char")]:
        result = belt("replay", str(source), "--policy", str(EXAMPLES / "policy.toml"))
        assert result.exit_code == 5, result.stderr
        assert result.stderr.startswith(f"error: {source}: is {kind}"), result.stderr


def test_an_empty_journal_replays_nothing() -> None:
    result = belt("replay", "journal", "--policy", str(EXAMPLES / "policy.toml"), "--json")
    assert result.exit_code == 0
    assert result.json()["summary"]["replayed"] == 0


@given(st.text(max_size=20))
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_since_is_a_moment_or_a_usage_error(text: str) -> None:
    try:
        since_moment(text)
    except UsageError as exc:
        assert exc.message.startswith("--since ")


@given(st.binary(max_size=200))
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_file_is_read_or_refused_as_invalid(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / f"f{os.getpid()}.jsonl"
    path.write_bytes(content)
    try:
        recorded = from_file(path)
    except InvalidInput as exc:
        assert exc.message.startswith(str(path))
    else:
        assert all(
            isinstance(item.payload, dict | list | str | int | float | bool) or item.payload is None
            for item in recorded
        )


def test_nothing_found_is_distinct_from_a_run(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        replay(source="ar_missing", policy=EXAMPLES / "policy.toml")


@given(amount=st.integers(min_value=0, max_value=10**25), unit=st.sampled_from("smhd"))
@settings(max_examples=200, deadline=None)
def test_any_duration_back_is_a_moment_or_a_usage_error(amount: int, unit: str) -> None:
    try:
        since_moment(f"{amount}{unit}")
    except UsageError as exc:
        assert exc.message.startswith(f"--since '{amount}{unit}': ")


@pytest.mark.parametrize("since", ["99999999d", "9999999999999999999h", "9" * 30 + "s"])
def test_a_since_too_far_back_is_a_usage_error(since: str) -> None:
    result = belt("replay", "journal", "--policy", str(EXAMPLES / "policy.toml"), "--since", since)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"error: --since '{since}': ")
    assert len(result.stderr.splitlines()) <= 2


def test_a_source_too_long_for_a_file_name_is_a_clean_error() -> None:
    source = "a" * 100_000
    result = belt("replay", source, "--policy", str(EXAMPLES / "policy.toml"))
    assert result.exit_code == 5, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: aaaa") and "not a file belt can open" in first
    assert len(result.stderr) < 500


def test_a_journal_line_belt_cannot_read_is_skipped_and_named(
    journalled: dict[str, Any], belt_home: Path
) -> None:
    path = belt_home / "store" / "logs" / "journal" / "serve.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    # The second record gains a field holding NaN, which belt never writes.
    damaged = lines[2].rstrip(b"}\n") + b', "extra": NaN}\n'
    path.write_bytes(b"".join([*lines[:2], damaged, *lines[3:]]))
    offset = sum(len(line) for line in lines[:2])
    result = belt("replay", "journal", "--policy", str(EXAMPLES / "policy.toml"), "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["summary"]["replayed"] == len(lines) - 2
    assert report["skipped"] == 1
    (problem,) = report["problems"]
    assert f"the line at byte {offset} holds NaN" in problem and str(path) in problem
    shown = belt("replay", "journal", "--policy", str(EXAMPLES / "policy.toml"))
    assert shown.exit_code == 0
    assert f"warning: not replayed: {path}" in shown.stderr
    assert len(shown.stdout.splitlines()) == len(lines) - 2 + 2  # the header and the summary


def test_the_streamed_json_is_the_report_and_its_rows_come_one_at_a_time(
    journalled: dict[str, Any], tmp_path: Path
) -> None:
    from belt.deliveries.replay import open_replay

    printed = belt("replay", "journal", "--policy", str(edited_policy(tmp_path)), "--json")
    assert printed.exit_code == 0
    report = printed.json()
    assert set(report) == {
        "replay_id",
        "source",
        "target",
        "rows",
        "summary",
        "first_error",
        "fix",
        "skipped",
        "problems",
    }
    assert [r["changed"] for r in report["rows"]] == [[], ["decision"], [], ["decision"]]
    with open_replay(source="journal", policy=edited_policy(tmp_path)) as run:
        rows = run.rows()
        next(rows)
        # One payload was delivered and journalled; the rest are not read yet.
        assert run.summary["replayed"] == 1
        assert len(open_store().read_log("journal", "replay")) == 4 + 1
        assert len(list(rows)) == 3


def test_a_long_journal_is_replayed_in_bounded_memory(
    journalled: dict[str, Any], belt_home: Path
) -> None:
    import tracemalloc

    store = open_store().without_fsync()
    journal = store.read_log("journal", "serve")
    (record, *_) = [r for r in journal if r.get("event") == "agent.tool_call"]
    record["request"]["data"]["padding"] = "x" * 20_000
    for _ in range(1000):
        store.append("journal", "serve", record, sync=False)
    size = store.log_size("journal", "serve")
    assert size > 20_000_000
    from belt.deliveries.replay import open_replay

    tracemalloc.start()
    try:
        with open_replay(source="journal", policy=EXAMPLES / "policy.toml") as run:
            count = sum(1 for _ in run.rows())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 1004
    # The journal (over 20 MB) is never held: a part of 4 MiB and one record at a time (this
    # measured 10 MB, imports of the policy and its handlers included).
    assert peak < 16 * 1024 * 1024, peak


def test_a_replay_to_a_handler_that_refuses_ends_with_its_first_error_and_the_fix(
    journalled: dict[str, Any],
) -> None:
    import socket

    run_id = journalled["runs"][0]["id"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = int(sock.getsockname()[1])
        result = belt("replay", run_id, "--to", f"http://127.0.0.1:{port}/hooks")
        as_json = belt("replay", run_id, "--to", f"http://127.0.0.1:{port}/hooks", "--json")
    # Nothing answered: exit 6 (docs/cli.md's table), once the whole replay is reported.
    assert result.exit_code == 6, result.stderr
    assert result.stderr.startswith(f"error: cannot connect to 127.0.0.1:{port}: ")
    assert "(4 of 4 deliveries failed)" in result.stderr
    tail = result.stdout.rstrip().splitlines()[-2:]
    assert tail[0].startswith(f"  first error: cannot connect to 127.0.0.1:{port}: ")
    assert tail[1] == f"  nothing listens on 127.0.0.1:{port}: {START_HANDLER}"
    report = as_json.json()
    assert report["summary"]["errors"] == report["summary"]["replayed"] > 0
    assert report["first_error"].startswith(f"cannot connect to 127.0.0.1:{port}")
    assert report["fix"] == f"nothing listens on 127.0.0.1:{port}: {START_HANDLER}"
    answered = belt("replay", run_id, "--policy", str(EXAMPLES / "policy.toml"), "--json").json()
    assert (answered["first_error"], answered["fix"]) == (None, None)


def test_a_run_replay_compares_injections_as_a_journal_replay_does(
    journalled: dict[str, Any],
) -> None:
    # The same deliveries, from the run's hook records and from belt serve's journal, to a
    # handler that decides as the policy does but words its reminder differently.
    run_id = journalled["runs"][0]["id"]
    handler = f"{EXAMPLES / 'handler.py'}:decide"
    from_run = replay(source=run_id, handler=handler)
    from_journal = replay(source="journal", handler=handler)
    assert [r["changed"] for r in from_run["rows"]] == [["injection"], [], ["injection"], []]
    assert [r["changed"] for r in from_run["rows"]] == [r["changed"] for r in from_journal["rows"]]
    assert from_run["summary"]["injections_changed"] == 2
    # What was injected then is the text, not only whether anything was.
    injected = from_run["rows"][0]["recorded"]["injection"]
    assert injected == from_journal["rows"][0]["recorded"]["injection"]
    assert isinstance(injected, dict) and injected["inject"]["content"]
