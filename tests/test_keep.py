"""Recordings become tests: belt replay --save-tests DIR, and the one function that writes a
delivery as a scenario (belt.deliveries.keep.kept_scenario, shared with the inspector's "Keep as a
test")."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from belt.deliveries.keep import kept_scenario
from belt.engine.entrypoints import run_scenario
from belt.errors import InvalidInput
from belt.server.inspector import resend as inspector_replay
from belt.testing.suite import run_suite
from tests.cli.runner import belt
from tests.test_replay import DEMO, EXAMPLES, GUARDED, policy_server

ROOT = EXAMPLES.parent
HANDLER = f"{EXAMPLES / 'handler.py'}:decide"
"""The example handler: it decides as the example policy does."""


@pytest.fixture
def journalled() -> Iterator[dict[str, Any]]:
    """The guarded agent run once against the example policy, served and journalled."""
    with policy_server() as url:
        report, _ = run_scenario(scenario=GUARDED, routes=[f"{DEMO}={url}"])
    yield report


def test_a_journal_becomes_a_suite_that_passes_under_belt_test(
    journalled: dict[str, Any], tmp_path: Path
) -> None:
    saved = tmp_path / "recorded"
    result = belt("replay", "journal", "--handler", HANDLER, "--save-tests", str(saved))
    assert result.exit_code == 0, result.stderr
    names = sorted(path.name for path in saved.iterdir())
    assert names == [
        "0001-replay-turn_start.toml",
        "0002-replay-tool_call-delete_file.toml",
        "0003-replay-turn_start.toml",
        "0004-replay-tool_call-delete_file.toml",
    ]
    assert f"4 test scenario(s) written to {saved}, expecting the recorded answers" in (
        result.stdout
    )
    denied = (saved / "0002-replay-tool_call-delete_file.toml").read_text(encoding="utf-8")
    assert "belt replay --save-tests from the journal of belt serve" in denied
    assert 'decision = "deny"' in denied and "/var/lib/app/production.db" in denied
    # The handler replayed to, by its path from the saved file: it runs from anywhere.
    relative = Path(os.path.relpath(EXAMPLES / "handler.py", saved)).as_posix()
    assert f'handler = "py:{relative}:decide"' in denied

    suite = run_suite(paths=[saved])
    assert suite.exit_code == 0, [(r.name, r.status, r.error, r.failures) for r in suite.results]
    assert len(suite.results) == 4


def test_expect_recorded_pins_the_old_answer_and_replayed_the_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the guarded test scenario names its hook from the repository root
    report, _ = run_scenario(scenario=EXAMPLES / "tests" / "guarded.toml")
    run_id = report["runs"][0]["id"]
    lenient = tmp_path / "lenient.py"
    lenient.write_text(
        "def allow_all(payload):\n"
        "    if payload['event'] == 'agent.turn_start':\n"
        "        return {'inject': {'content': 'Be careful.', 'ttl_turns': 1}}\n"
        "    return None\n",
        encoding="utf-8",
    )
    handler = f"{lenient}:allow_all"
    recorded, replayed = tmp_path / "recorded", tmp_path / "replayed"
    first = belt("replay", run_id, "--handler", handler, "--save-tests", str(recorded))
    assert first.exit_code == 0, first.stderr
    second = belt(
        "replay", run_id, "--handler", handler, "--save-tests", str(replayed),
        "--expect", "replayed", "--json",
    )  # fmt: skip
    assert second.exit_code == 0, second.stderr
    saved = json.loads(second.stdout)["saved_tests"]
    assert saved == {
        "directory": str(replayed),
        "expect": "replayed",
        "per": "delivery",
        "written": 5,
        "not_written": 0,
        "problems": [],
    }

    # The recorded deny is what the lenient handler no longer gives: that test fails.
    old = run_suite(paths=[recorded])
    failed = [Path(r.name).name for r in old.results if r.status != "pass"]
    assert failed == ["0002-replay-tool_call-delete_file.toml"]
    assert old.results[1].failures[0].expectation.raw["decision"] == "deny"
    new = run_suite(paths=[replayed])
    assert new.exit_code == 0
    assert len(new.results) == 5


def test_a_delivery_no_scenario_reaches_is_named_not_written(tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.jsonl"
    base = {"agent_id": "ag_1", "chat_id": "ch_1", "run_id": "ar_1", "turn_count": 0}
    lines = [
        {**base, "event": "agent.idle", "timestamp": "2026-08-11T14:00:00Z"},
        {**base, "event": "agent.start", "timestamp": "2026-08-11T14:00:00Z"},
    ]
    payloads.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    saved = tmp_path / "saved"
    result = belt(
        "replay", str(payloads), "--handler", HANDLER, "--save-tests", str(saved)
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "1 test scenario(s) written" in result.stdout
    assert "1 delivery(ies) not written:" in result.stdout
    assert "delivery 1: payload.event: belt does not simulate agent.idle" in result.stdout
    assert [p.name for p in saved.iterdir()] == ["0002-replay-start.toml"]
    assert run_suite(paths=[saved]).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--expect", "now"), "--expect now: expected one of recorded, replayed"),
        (("--save-tests", "{full}"), "the directory is not empty"),
        (("--save-tests", "{file}"), "not a directory"),
    ],
)
def test_a_wrong_save_option_is_a_usage_error(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "old.toml").write_text("", encoding="utf-8")
    file = tmp_path / "file"
    file.write_text("", encoding="utf-8")
    given = [arg.format(full=full, file=file) for arg in args]
    result = belt("replay", "journal", "--handler", HANDLER, *given)
    assert result.exit_code == 2
    assert message in result.stderr
    assert [p.name for p in full.iterdir()] == ["old.toml"]


def test_the_inspector_keeps_a_delivery_through_the_same_function() -> None:
    payload = {
        "event": "agent.tool_call",
        "timestamp": "2026-08-11T14:00:00Z",
        "agent_id": "ag_1",
        "chat_id": "ch_1",
        "run_id": "ar_1",
        "turn_count": 1,
        "data": {"tool": "delete_file", "arguments": {"path": "/etc/passwd"}},
    }
    expect = {"decision": "deny", "reason": "no"}
    shared = kept_scenario(
        payload=payload,
        handler="py:hooks.py:guard",
        expect=expect,
        header=["A belt test scenario kept from the inspector of belt serve (delivery d1)."],
    )
    kept = inspector_replay.scenario_file(
        payload=payload, handler="py:hooks.py:guard", expect=expect, notes=[], delivery_id="d1"
    )
    assert kept == shared
    assert kept[0] == "replay-tool_call-delete_file.toml"


TWO_RUNS = """
[[agent.hooks]]
event = "agent.tool_call"
type = "webhook"
handler = "py:{hooks}:guard"

[[agent.hooks]]
event = "agent.complete"
type = "webhook"
handler = "py:{hooks}:guard"

[[turns]]
user = "Delete the database"
  [[turns.model]]
  tool_calls = [ { name = "delete_file", arguments = { path = "/var/lib/app/production.db" } } ]
  [[turns.model]]
  say = "Refused."

[[turns]]
user = "Then the temp file"
  [[turns.model]]
  tool_calls = [ { name = "delete_file", arguments = { path = "/tmp/old.txt", force = true } } ]
  [[turns.model]]
  say = "Done."
"""


def test_a_chat_of_two_runs_becomes_one_scenario_of_two_turns(tmp_path: Path) -> None:
    hooks = (EXAMPLES / "tests" / "hooks.py").as_posix()
    scenario = tmp_path / "two.toml"
    scenario.write_text(TWO_RUNS.replace("{hooks}", hooks), encoding="utf-8")
    report, _ = run_scenario(scenario=scenario)
    assert len(report["runs"]) == 2
    # A run id replays one run; the journal of a served chat holds both. Here both runs' records
    # go through a file, as a journal's would.
    records = tmp_path / "records.jsonl"
    records.write_text(
        "".join(
            json.dumps(record) + "\n"
            for record in report["hook_executions"]
            if record["handler_type"] == "webhook"
        ),
        encoding="utf-8",
    )
    saved = tmp_path / "saved"
    handler = f"{hooks}:guard"
    result = belt(
        "replay", str(records), "--handler", handler, "--save-tests", str(saved),
        "--per", "chat", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["saved_tests"]["written"] == 1
    (path,) = saved.iterdir()
    assert path.name == f"0001-chat-{report['chat']['id']}.toml"
    suite = run_suite(paths=[saved])
    assert suite.exit_code == 0, [o.found for r in suite.results for o in r.failures]
    document = suite.results[0].report
    assert document is not None and len(document["runs"]) == 2
    text = path.read_text(encoding="utf-8")
    assert text.count("[[turns]]") == 2 and "force = true" in text

    # The same chat against a guard that allows everything: the recorded deny is what fails.
    lenient = tmp_path / "lenient.py"
    lenient.write_text("def guard(payload):\n    return None\n", encoding="utf-8")
    relative = Path(os.path.relpath(hooks, saved)).as_posix()  # as the saved file names it
    edited = path.read_text(encoding="utf-8").replace(f"py:{relative}", f"py:{lenient}")
    assert edited != path.read_text(encoding="utf-8")
    path.write_text(edited, encoding="utf-8")
    failed = run_suite(paths=[saved]).results[0]
    assert [o.expectation.raw.get("decision") for o in failed.failures] == ["deny"]
    assert failed.failures[0].expectation.raw["run"] == 0


def test_per_chat_leaves_out_what_a_chat_scenario_does_not_reach(tmp_path: Path) -> None:
    base = {"agent_id": "ag_1", "chat_id": "ch_1", "run_id": "ar_1", "turn_count": 0}
    stamp = {"timestamp": "2026-08-11T14:00:00Z"}
    lines = [
        {**base, **stamp, "event": "agent.turn_start"},
        {**base, **stamp, "event": "agent.pre_compact", "data": {}},
    ]
    payloads = tmp_path / "payloads.jsonl"
    payloads.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    saved = tmp_path / "saved"
    result = belt(
        "replay", str(payloads), "--handler", HANDLER, "--save-tests", str(saved),
        "--per", "chat",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "delivery 2: a chat's scenario does not reach agent.pre_compact" in result.stdout
    assert [p.name for p in saved.iterdir()] == ["0001-chat-ch_1.toml"]
    assert run_suite(paths=[saved]).exit_code == 0
    wrong = belt(
        "replay",
        str(payloads),
        "--handler",
        HANDLER,
        "--save-tests",
        str(tmp_path / "x"),
        "--per",
        "run",
    )
    assert wrong.exit_code == 2 and "--per run: expected one of delivery, chat" in wrong.stderr


# -- saved tests that pass on their own ----------------------------------------------------------

POLICY = """
default = "allow"

[[rules]]
event = "agent.tool_call"
tool = "delete_file"
arguments = { path = "path:/tmp/*" }
decision = "allow"

[[rules]]
event = "agent.tool_call"
tool = "delete_file"
decision = "deny"
reason = "only /tmp deletions allowed"
"""


def test_tests_saved_from_a_policy_replay_pass_with_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The flow of a team adopting belt: serve a policy, send it two deliveries, save them as
    # tests, stop the server, run the tests (from another directory, as CI does).
    project = tmp_path / "project"
    project.mkdir()
    (project / "pol.toml").write_text(POLICY, encoding="utf-8")
    monkeypatch.chdir(project)
    with policy_server(Path("pol.toml")) as url:
        for deleted in ("/etc/passwd", "/tmp/old.txt"):
            sent = belt(
                "trigger", "agent.tool_call", "--to", f"{url}/hooks",
                "--set", f"data.arguments.path={json.dumps(deleted)}",
            )  # fmt: skip
            assert sent.exit_code == 0, sent.stdout + sent.stderr
    saved = belt("replay", "journal", "--policy", "pol.toml", "--save-tests", "saved")
    assert saved.exit_code == 0, saved.stdout + saved.stderr
    files = sorted((project / "saved").iterdir())
    assert [path.name for path in files] == [
        "0001-replay-tool_call-delete_file.toml",
        "0002-replay-tool_call-delete_file.toml",
    ]
    for path in files:
        hooks = tomllib.loads(path.read_text(encoding="utf-8"))["agent"]["hooks"]
        assert hooks == [
            {"event": "agent.tool_call", "type": "webhook", "handler": "policy:../pol.toml"}
        ]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    passed = belt("test", str(project / "saved"))
    assert passed.exit_code == 0, passed.stdout + passed.stderr
    assert "2 scenario(s): 2 passed" in passed.stdout
    assert "warning" not in passed.stderr

    # They test the policy: one that allows everything fails the recorded deny.
    (project / "pol.toml").write_text('default = "allow"\n', encoding="utf-8")
    failed = belt("test", str(project / "saved"))
    assert failed.exit_code == 1, failed.stdout + failed.stderr
    assert "FAIL   " in failed.stdout and "0001-replay-tool_call-delete_file.toml" in failed.stdout


@pytest.mark.parametrize("style", ["file", "module"])
def test_tests_saved_from_a_handler_replay_name_it_from_the_saved_file(
    journalled: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(EXAMPLES / "handler.py", project / "my_hook.py")
    monkeypatch.chdir(project)
    handler = "my_hook.py:decide" if style == "file" else "my_hook:decide"
    result = belt("replay", "journal", "--handler", handler, "--save-tests", "out/saved")
    assert result.exit_code == 0, result.stderr
    denied = tomllib.loads(
        (project / "out" / "saved" / "0002-replay-tool_call-delete_file.toml").read_text()
    )
    assert denied["agent"]["hooks"][0]["handler"] == "py:../../my_hook.py:decide"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    passed = belt("test", str(project / "out" / "saved"))
    assert passed.exit_code == 0, passed.stdout + passed.stderr
    assert "4 scenario(s): 4 passed" in passed.stdout


def test_tests_saved_from_a_url_replay_keep_the_url_they_were_sent_to(
    journalled: dict[str, Any], tmp_path: Path
) -> None:
    with policy_server() as url:
        saved = tmp_path / "saved"
        result = belt("replay", "journal", "--to", f"{url}/hooks", "--save-tests", str(saved))
        assert result.exit_code == 0, result.stderr
        for path in saved.iterdir():
            document = tomllib.loads(path.read_text(encoding="utf-8"))
            assert document["agent"]["hooks"][0]["handler"] == f"{url}/hooks"
        assert run_suite(paths=[saved]).exit_code == 0


@pytest.mark.parametrize(
    ("credentials", "what"),
    [("user:secret@", "a user name or password"), ("", "a query")],
)
def test_a_url_with_credentials_is_never_written_into_a_test(
    journalled: dict[str, Any], tmp_path: Path, credentials: str, what: str
) -> None:
    with policy_server() as url:
        host = url.removeprefix("http://")
        query = "" if credentials else "?token=s3cr3t"
        target = f"http://{credentials}{host}/hooks{query}"
        saved = tmp_path / "saved"
        result = belt("replay", "journal", "--to", target, "--save-tests", str(saved))
    assert result.exit_code == 5, result.stdout + result.stderr
    assert f"the URL carries {what}, which can hold credentials" in result.stderr
    assert "secret" not in result.stderr and "s3cr3t" not in result.stderr
    assert not saved.exists()
    assert result.stdout == ""  # refused before anything was replayed


def test_the_inspector_keeps_a_policy_target_as_the_replay_does(tmp_path: Path) -> None:
    from belt.server.inspector.resend import Target, scenario_handler

    policy = tmp_path / "pol.toml"
    policy.write_text(POLICY, encoding="utf-8")
    handler, notes = scenario_handler(Target("policy", str(policy)), None, None, "http://x")
    assert handler == f"policy:{policy.as_posix()}"
    assert "absolute" in notes[0]
    refused = Target("url", "http://user:pw@127.0.0.1:9/hooks")
    with pytest.raises(InvalidInput, match="carries a user name or password"):
        scenario_handler(refused, None, None, "http://x")
