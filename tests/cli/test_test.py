"""``belt test``: scenarios with expectations as a test suite."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.testing import suite as suite_module
from belt.testing.expect import Facts, check, check_expectations
from belt.testing.suite import ScenarioResult, SuiteResult, junit_document
from belt.wire.validate import Findings
from tests.cli.runner import belt

HOOK = {"event": "agent.tool_call", "type": "webhook", "handler": "py:tests.pyhooks:deny"}
TURN = {
    "user": "clean up",
    "model": [
        {"say": "deleting", "tool_calls": [{"name": "delete_file", "arguments": {"path": "/x"}}]},
        {"say": "done"},
    ],
}


def scenario(directory: Path, name: str, *expect: dict[str, Any], **extra: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    doc = {"agent": {"hooks": [HOOK]}, "turns": [TURN], "expect": list(expect), **extra}
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A directory with a passing, a failing and an invalid scenario, and files that are no
    tests (a hooks file, a scenario without expectations)."""
    directory = tmp_path / "suite"
    scenario(directory, "a_pass.json", {"tool": "delete_file", "status": "failed"})
    scenario(
        directory,
        "b_fail.json",
        {"run_state": "completed"},
        {"tool": "delete_file", "status": "completed", "name": "the delete goes through"},
    )
    (directory / "c_invalid.toml").write_text('[[turns]]\nusr = "x"\n[[expect]]\ntool = "x"\n')
    (directory / "hooks.json").write_text(json.dumps({"hooks": [HOOK]}))
    (directory / "plain.json").write_text(json.dumps({"turns": [TURN]}))
    return directory


def test_one_line_per_scenario_then_the_failures(suite: Path, belt_home: Path) -> None:
    result = belt("test", str(suite))
    assert result.exit_code == 5  # an invalid file; the valid ones still ran
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"PASS   {suite}/a_pass.json  (")
    assert lines[1].startswith(f"FAIL   {suite}/b_fail.json  (")
    assert lines[1].endswith("1 of 2 expectation(s) failed")
    assert lines[2].startswith(f"ERROR  {suite}/c_invalid.toml  (")
    assert len([line for line in lines if line.startswith(("PASS", "FAIL", "ERROR"))]) == 3
    text = result.stdout
    assert (
        'expect[1] { tool = "delete_file", status = "completed", name = "the delete goes '
        'through" }  (the delete goes through)' in text
    )
    assert "  found: no tool call matches every key; the nearest:" in text
    assert 'delete_file({"path": "/x"}) failed, decision deny (denied by tests.pyhooks)' in text
    assert "  transcript:" in text
    assert "hook   agent.tool_call: py:tests.pyhooks:deny (webhook) → deny" in text
    assert "turns[0].user: Field required" in text
    assert "turns[0].usr: unknown key" in text
    # Each file counted once: the invalid one is not an error besides.
    assert lines[-1].startswith("3 scenario(s): 1 passed, 1 failed, 1 invalid in ")
    # Each scenario ran in a store of its own: the state directory was never made.
    assert not belt_home.exists()


def test_exit_1_on_a_failure_and_0_when_all_pass(suite: Path) -> None:
    assert belt("test", str(suite / "b_fail.json")).exit_code == 1
    assert belt("test", str(suite / "a_pass.json")).exit_code == 0
    assert belt("test", str(suite), "-k", "A_PASS").exit_code == 0


def test_a_scenario_that_errors_exits_1(tmp_path: Path) -> None:
    path = scenario(tmp_path, "t.json", {"run_state": "completed"})
    doc = json.loads(path.read_text())
    doc["agent"]["hooks"][0]["handler"] = "py:tests.no_such_module:f"
    path.write_text(json.dumps(doc))
    result = belt("test", str(path))
    assert result.exit_code == 1
    assert "no module named 'tests.no_such_module'" in result.stdout


def test_k_selects_and_x_stops_at_the_first_failure(suite: Path) -> None:
    result = belt("test", str(suite), "-k", "fail")
    assert result.exit_code == 1
    assert [
        line.split()[0] for line in result.stdout.splitlines() if line[:4] in ("PASS", "FAIL")
    ] == ["FAIL"]
    result = belt("test", str(suite), "-x")
    assert result.exit_code == 1
    assert "c_invalid" not in result.stdout
    assert "(stopped at the first failure: -x)" in result.stdout


def test_nothing_found_exits_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tests").mkdir()
    scenario(tmp_path / "tests", "no_expect.json")
    monkeypatch.chdir(tmp_path)
    result = belt("test")
    assert result.exit_code == 5
    assert "no scenario with expectations found in tests/" in result.stderr


def test_the_default_directory_is_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario(tmp_path / "tests" / "deep", "t.json", {"tool": "delete_file"})
    monkeypatch.chdir(tmp_path)
    result = belt("test")
    assert result.exit_code == 0
    assert result.stdout.startswith("PASS   tests/deep/t.json")


def test_a_missing_path_exits_3(tmp_path: Path) -> None:
    result = belt("test", str(tmp_path / "nope"))
    assert result.exit_code == 3
    assert "no such file or directory" in result.stderr


def test_json_gives_one_object_per_scenario(suite: Path) -> None:
    result = belt("test", str(suite), "--json")
    assert result.exit_code == 5
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(o["scenario"].rsplit("/", 1)[1], o["status"]) for o in objects] == [
        ("a_pass.json", "pass"),
        ("b_fail.json", "fail"),
        ("c_invalid.toml", "error"),
    ]
    [failure] = objects[1]["failures"]
    assert failure["expect"] == "expect[1]"
    assert failure["expectation"]["status"] == "completed"
    assert any(m["role"] == "assistant" for m in failure["excerpt"])
    assert objects[2]["invalid"] is True


def test_junit_xml_is_read_by_a_junit_parser(suite: Path, tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    result = belt("test", str(suite), "--junit-xml", str(report))
    assert result.exit_code == 5
    root = ElementTree.parse(report).getroot()
    [testsuite] = root.findall("testsuite")
    assert (testsuite.get("tests"), testsuite.get("failures"), testsuite.get("errors")) == (
        "3",
        "1",
        "1",
    )
    cases = {case.get("name"): case for case in testsuite.findall("testcase")}
    assert set(cases) == {"a_pass.json", "b_fail.json", "c_invalid.toml"}
    failure = cases["b_fail.json"].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith('expect[1] { tool = "delete_file"')
    assert "transcript:" in (failure.text or "")
    error = cases["c_invalid.toml"].find("error")
    assert error is not None and "turns[0].usr: unknown key" in (error.text or "")


def test_a_junit_file_that_cannot_be_written_is_an_error(suite: Path, tmp_path: Path) -> None:
    result = belt("test", str(suite / "a_pass.json"), "--junit-xml", str(tmp_path / "no" / "j.xml"))
    assert result.exit_code == 5  # as belt check's: the path given cannot be written
    assert "cannot write it" in result.stderr


def test_routes_apply_to_every_scenario(tmp_path: Path) -> None:
    path = scenario(tmp_path, "t.json", {"tool": "delete_file", "status": "completed"})
    doc = json.loads(path.read_text())
    doc["agent"]["hooks"][0]["handler"] = "https://policy.example.com/hooks"
    path.write_text(json.dumps(doc))
    result = belt("test", str(path), "--route", "https://policy.example.com=py:tests.pyhooks:deny")
    assert result.exit_code == 1


@given(st.text(max_size=40))
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_text_makes_a_junit_file_a_parser_reads(text: str) -> None:
    findings = Findings()
    [compiled] = check_expectations([{"tool": text or "x", "name": text}], "platform", findings)
    report = {
        "simulation": {"id": "sim_x", "dialect": "platform"},
        "chat": {
            "id": "ch_x",
            "chat_messages": [
                {"id": "m1", "role": "user", "content": [{"type": "text", "text": text}]}
            ],
        },
        "runs": [],
    }
    outcome = check(compiled, Facts(report))
    result = ScenarioResult(f"tests/{text}.toml", "fail", 0.1, [outcome], error=text, report=report)
    xml = junit_document(SuiteResult([result], 0.1), lambda dialect, messages: [text])
    root = ElementTree.fromstring(xml)
    assert root.find("testsuite/testcase/failure") is not None


def test_nothing_reaches_the_state_directory(tmp_path: Path, belt_home: Path) -> None:
    # Task chats, Nexus hook tasks served in-process and their approvals all go to the
    # scenario's own store, never to the state directory's.
    tasks = {
        "agent": {"hooks": [{"event": "agent.start", "type": "task", "handler": "team/helper"}]},
        "agents": {"team/helper": {"model": [{"say": "on it"}]}},
        "turns": [{"user": "go", "model": [{"say": "hello"}]}],
        "expect": [{"run_state": "completed"}, {"event": "agent.start", "count": 1}],
    }
    nexus = {
        "dialect": "nexus",
        "profile": {
            "approval_mode": "ask",
            "lifecycle_hooks": {"turn_start": {"tool": "check", "timeout_ms": 30000}},
        },
        "executors": {"check": "py:tests.pyhooks:ack"},
        "turns": [{"user": "hi", "resolve": [{"decision": "allow"}], "model": [{"say": "hello"}]}],
        "expect": [{"run_state": "completed"}, {"interrupt": "turn_start", "resolution": "allow"}],
    }
    (tmp_path / "tasks.json").write_text(json.dumps(tasks))
    (tmp_path / "nexus.json").write_text(json.dumps(nexus))
    result = belt("test", str(tmp_path))
    assert result.exit_code == 0, result.stdout
    assert result.stdout.count("PASS") == 2
    assert not belt_home.exists()


PLAIN = {
    "turns": [{"user": "hi", "model": [{"say": "hello"}]}],
    "expect": [{"run_state": "completed"}],
}


def calling(directory: Path, name: str, module: str, body: str) -> Path:
    """A scenario whose hook is ``py:MODULE.py:allow``, that module's top-level code ``body``."""
    (directory / f"{module}.py").write_text(body + "\ndef allow(payload):\n    return None\n")
    hook = {**HOOK, "handler": f"py:{directory / module}.py:allow"}
    path = directory / name
    doc = {"agent": {"hooks": [hook]}, "turns": [TURN], "expect": [{"run_state": "completed"}]}
    path.write_text(json.dumps(doc))
    return path


def test_a_module_that_exits_or_is_interrupted_on_import_is_that_scenarios_error(
    tmp_path: Path,
) -> None:
    calling(tmp_path, "a_exits.json", "exits_on_import", "import sys\nsys.exit(3)")
    calling(tmp_path, "b_raises.json", "raises_on_import", "raise SystemExit('no')")
    calling(tmp_path, "c_interrupts.json", "interrupts_on_import", "raise KeyboardInterrupt")
    (tmp_path / "d_pass.json").write_text(json.dumps(PLAIN))
    result = belt("test", str(tmp_path))
    assert result.exit_code == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:4]] == ["ERROR", "ERROR", "ERROR", "PASS"]
    for module, how in [
        ("exits_on_import", "it called sys.exit(3)"),
        ("raises_on_import", "it called sys.exit('no')"),
        ("interrupts_on_import", "it raised KeyboardInterrupt"),
    ]:
        assert f"importing {tmp_path / module}.py failed: {how}" in result.stdout
    assert lines[-1].startswith("4 scenario(s): 1 passed, 3 error(s)")


def test_a_module_whose_import_hangs_is_that_scenarios_error_and_the_suite_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(suite_module, "IMPORT_TIMEOUT", 0.3)
    release = tmp_path / "release"
    waits = "import os, time\nuntil = time.monotonic() + 30\n"
    waits += f"while not os.path.exists({str(release)!r}) and time.monotonic() < until:\n"
    waits += "    time.sleep(0.01)"
    calling(tmp_path, "a_hangs.json", "hangs_on_import", waits)
    (tmp_path / "b_pass.json").write_text(json.dumps(PLAIN))
    again = tmp_path / "c_hangs_again.json"
    again.write_text((tmp_path / "a_hangs.json").read_text())
    try:
        result = belt("test", str(tmp_path), "--json")
    finally:
        release.touch()  # the import left behind in its thread ends
    assert result.exit_code == 1, result.stdout + result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["status"] for row in rows] == ["error", "pass", "error"]
    module = tmp_path / "hangs_on_import.py"
    # Tried once, by the process the workers are forked from: each scenario naming the module
    # is refused at once.
    for row in (rows[0], rows[2]):
        assert f"importing {module} did not finish within 0.3 s" in row["error"]
        assert "earlier in this run; it is not tried again" in row["error"]


def test_a_scenario_whose_file_name_is_not_utf8_is_its_error(tmp_path: Path) -> None:
    bad = os.fsencode(tmp_path) + b"/b_\xff\x1b.json"
    with open(bad, "wb") as handle:
        handle.write(json.dumps(PLAIN).encode())
    (tmp_path / "a_pass.json").write_text(json.dumps(PLAIN))
    (tmp_path / "c_pass.json").write_text(json.dumps(PLAIN))
    result = belt("test", str(tmp_path))
    assert result.exit_code == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["PASS", "ERROR", "PASS"]
    assert lines[1].startswith(f"ERROR  {tmp_path}/b_\\xff\\x1b.json  (")
    assert "b_\\xff\\x1b.json: the file name is not UTF-8" in result.stdout
    assert "\x1b" not in result.stdout
    rows = [json.loads(line) for line in belt("test", str(tmp_path), "--json").stdout.splitlines()]
    assert [row["status"] for row in rows] == ["pass", "error", "pass"]
    assert rows[1]["scenario"] == f"{tmp_path}/b_\\xff\x1b.json"  # JSON escapes the ESC


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port bound but not listening while the block runs: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def failing(directory: Path, port: int, *expect: dict[str, Any], **extra: Any) -> Path:
    """A scenario whose tool-call webhook is a refused loopback port (the call fails)."""
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": f"http://127.0.0.1:{port}/"}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "failing.json"
    doc = {"agent": {"hooks": [hook]}, "turns": [TURN], "expect": list(expect), **extra}
    path.write_text(json.dumps(doc))
    return path


def test_a_hook_failure_no_expectation_names_fails_the_scenario(tmp_path: Path) -> None:
    with refused_port() as port:
        path = failing(tmp_path, port, {"run_state": "completed"})
        result = belt("test", str(path))
        as_json = belt("test", str(path), "--json")
        junit = tmp_path / "junit.xml"
        belt("test", str(path), "--junit-xml", str(junit))
    assert result.exit_code == 1, result.stdout
    lines = result.stdout.splitlines()
    assert lines[0].startswith("FAIL ") and lines[0].endswith(" 1 hook call(s) failed unnamed")
    assert "1 hook call(s) failed, and no expectation names them:" in result.stdout
    call = next(line for line in lines if line.startswith("  agent.tool_call → "))
    assert f"127.0.0.1:{port}: allow on delete_file" in call
    assert f"! cannot connect to 127.0.0.1:{port}" in call
    assert call.endswith("(counted as allow)")
    assert 'hook_errors = "allow"' in result.stdout
    [line] = as_json.stdout.splitlines()
    reported = json.loads(line)
    assert reported["status"] == "fail" and reported["failures"] == []
    [failure] = reported["hook_failures"]
    assert (failure["event"], failure["tool"], failure["counted_as"]) == (
        "agent.tool_call",
        "delete_file",
        "allow",
    )
    assert failure["error"].startswith(f"cannot connect to 127.0.0.1:{port}")
    assert (reported["hooks"]["calls"], reported["hooks"]["failed"]) == (1, 1)
    [case] = ElementTree.parse(junit).getroot().iter("testcase")
    [element] = case.iter("failure")
    assert element.get("type") == "hook"
    assert "cannot connect to" in (element.text or "")


def test_hook_errors_allow_at_the_top_lets_a_scenario_mean_to_test_failure(
    tmp_path: Path,
) -> None:
    with refused_port() as port:
        path = failing(tmp_path, port, {"run_state": "completed"}, hook_errors="allow")
        result = belt("test", str(path))
    assert result.exit_code == 0, result.stdout
    # A passing scenario's line still says its hook calls failed, and how they counted.
    assert "hooks: 1 call(s), 1 failed (1 counted as allow)" in result.stdout.splitlines()[0]
    bad = failing(tmp_path, 1, {"run_state": "completed"}, hook_errors="ignore")
    invalid = belt("test", str(bad))
    assert invalid.exit_code == 5
    assert "hook_errors" in invalid.stdout


@pytest.mark.parametrize(
    ("expectation", "code"),
    [
        ({"event": "agent.tool_call", "error": "cannot connect to *"}, 0),
        ({"event": "agent.tool_call", "error": True}, 0),
        ({"row": {"type": "hook", "error": "re:^cannot connect"}}, 0),
        ({"event": "agent.turn_start", "error": True, "count": 0}, 1),
        ({"event": "agent.tool_call", "decision": "allow"}, 1),
        ({"row": {"type": "hook", "event": "agent.tool_call"}}, 1),
    ],
)
def test_an_expectation_on_the_error_names_the_failure(
    tmp_path: Path, expectation: dict[str, Any], code: int
) -> None:
    with refused_port() as port:
        result = belt("test", str(failing(tmp_path, port, expectation)))
    assert result.exit_code == code, result.stdout
    assert ("failed unnamed" in result.stdout) == bool(code)


RECORDER = """
import os
import socket

_log = os.environ["BELT_TEST_LOOKUPS"]


def _record(line):
    with open(_log, "a", encoding="utf-8") as file:
        file.write(line + "\\n")


_record("started")


def getaddrinfo(host, *args, **kwargs):
    _record(f"lookup {host}")
    raise socket.gaierror(socket.EAI_NONAME, "lookups are recorded, never made, here")


_connect = socket.socket.connect


def connect(self, address):
    _record(f"connect {address!r}")
    return _connect(self, address)


socket.getaddrinfo = getaddrinfo
socket.socket.connect = connect
"""
"""A ``sitecustomize`` that records every name lookup and connection of the process (and
answers no lookup, so nothing reaches a resolver even when it records one)."""

GUARD = "https://hooks.example.invalid/guard"


def recorded_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``belt ARGS`` in a process whose name lookups and connections are recorded: its result
    and what it looked up or connected to (after the recorder's own "started")."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(RECORDER)
    log = tmp_path / "lookups.log"
    log.unlink(missing_ok=True)
    root = Path(__file__).parents[2]
    env = {
        **os.environ,
        "BELT_HOME": str(tmp_path / "home"),
        "NO_COLOR": "1",
        "BELT_TEST_LOOKUPS": str(log),
        "PYTHONPATH": os.pathsep.join([str(site), str(root)]),
    }
    result = subprocess.run(
        [sys.executable, "-m", "belt", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    return result, log.read_text(encoding="utf-8").splitlines()


def off_the_machine(directory: Path) -> Path:
    """The scenario of issue 23: its only hook is a URL elsewhere, its only expectation that
    the run completes (which it would, the unreachable hook counting as allow)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "remote.json"
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": GUARD}
    doc = {"agent": {"hooks": [hook]}, "turns": [TURN], "expect": [{"run_state": "completed"}]}
    path.write_text(json.dumps(doc))
    return path


def test_a_webhook_off_this_machine_is_an_error_before_any_lookup(tmp_path: Path) -> None:
    path = off_the_machine(tmp_path / "tests")
    result, seen = recorded_run(tmp_path, "test", str(path))
    assert seen == ["started"], seen  # the recorder ran, and saw no lookup and no connection
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ERROR" in result.stdout
    assert "the webhook https://hooks.example.invalid is not on this machine" in result.stdout
    assert "--route https://hooks.example.invalid=TARGET" in result.stdout
    assert "--allow-network" in result.stdout
    assert "/guard" not in result.stdout  # a webhook is shown by its origin only
    # --allow-network lifts it: the delivery is attempted (the recorder answers the lookup with
    # "no such name"), and the failed call fails the scenario, as no expectation names it.
    allowed, seen = recorded_run(tmp_path, "test", str(path), "--allow-network")
    assert "lookup hooks.example.invalid" in seen, seen
    assert allowed.returncode == 1
    assert "1 hook call(s) failed unnamed" in allowed.stdout


def test_sim_run_offline_applies_the_same_rule(tmp_path: Path) -> None:
    path = off_the_machine(tmp_path / "tests")
    result, seen = recorded_run(tmp_path, "sim", "run", str(path), "--offline")
    assert seen == ["started"], seen
    assert result.returncode == 2, result.stderr
    assert "--route https://hooks.example.invalid=TARGET" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "home").exists() or not list((tmp_path / "home").rglob("ar_*"))
    routed = belt(
        "sim",
        "run",
        str(path),
        "--offline",
        "--route",
        "https://hooks.example.invalid=py:tests.pyhooks:deny",
    )
    assert routed.exit_code == 0, routed.stderr
    assert "→ deny (denied by tests.pyhooks)" in routed.stdout


def test_a_routed_webhook_runs_offline_and_a_route_off_the_machine_does_not(
    tmp_path: Path,
) -> None:
    path = off_the_machine(tmp_path / "tests")
    routed = belt(
        "test", str(path), "--route", "https://hooks.example.invalid=py:tests.pyhooks:deny"
    )
    assert routed.exit_code == 0, routed.stdout
    elsewhere = belt(
        "test", str(path), "--route", "https://hooks.example.invalid=https://other.example.invalid"
    )
    assert elsewhere.exit_code == 1
    assert (
        "its --route https://hooks.example.invalid sends it to https://other.example.invalid"
        in elsewhere.stdout
    )


@pytest.mark.parametrize(
    ("target", "here"),
    [
        ("http://127.0.0.1:9/x", True),
        ("http://127.8.9.10:9/", True),
        ("http://localhost:9/", True),
        ("http://[::1]:9/", True),
        ("py:tests.pyhooks:deny", True),
        ("http://128.0.0.1:9/", False),
        ("http://local.host:9/", False),
        ("http://[::2]:9/", False),
        ("https://localhost.example.com/", False),
        ("http://10.0.0.1/", False),
    ],
)
def test_what_is_on_this_machine(target: str, here: bool) -> None:
    from belt.engine.offline import on_this_machine

    assert on_this_machine(target) == here


# -- coverage of hooks ----------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def test_coverage_lists_every_hook_of_the_examples_with_its_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Counted by hand from examples/tests/guarded.toml: three model turns, so agent.turn_start
    # fires 3 times and the guard injects its reminder each time; the database delete is denied
    # by hook 0, which ends the event before the gate; the /tmp delete is allowed by hook 0,
    # then suspended by the gate (hook 2). Its py: handler path is relative to the scenario.
    monkeypatch.chdir(ROOT)
    result = belt("test", "examples/tests/guarded.toml", "--coverage")

    assert result.exit_code == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if "agent.hooks[" in line]
    guard = "py:hooks.py:guard"
    scenario_file = "examples/tests/guarded.toml"
    expected = [
        [scenario_file, "agent.hooks[0]", "agent.tool_call", guard, "2"]
        + ["allow", "1,", "deny", "1", "delete_file", "2"],
        [scenario_file, "agent.hooks[1]", "agent.turn_start", guard, "3"]
        + ["allow", "3,", "injected", "3", "-"],
        [scenario_file, "agent.hooks[2]", "agent.tool_call", "gate", "1", "suspend", "1"]
        + ["delete_file", "1"],
    ]
    assert [row[: len(want)] for row, want in zip(rows, expected, strict=True)] == expected
    # Then how long its calls took (max and p95, whatever they were) and the most it injected
    # for one model turn: the reminder is 12 tokens.
    latencies = [row[len(want) :] for row, want in zip(rows, expected, strict=True)]
    assert [(cells[0], cells[3], cells[-1]) for cells in latencies] == [
        ("max", "p95", "-"),
        ("max", "p95", "12"),
        ("max", "p95", "-"),
    ]
    assert "every one of 3 declared hook(s) fired" in result.stdout


def gated_after_a_deny(directory: Path) -> Path:
    """The gate after the denying hook never fires: a deny ends agent.tool_call."""
    gate = {"event": "agent.tool_call", "type": "gate", "timeout": 600}
    return scenario(
        directory,
        "gated.json",
        {"tool": "delete_file", "status": "failed"},
        agent={"hooks": [HOOK, gate]},
    )


def test_coverage_names_the_hooks_that_never_fired_and_passes_without_the_flag(
    tmp_path: Path,
) -> None:
    result = belt("test", str(gated_after_a_deny(tmp_path)), "--coverage")

    assert result.exit_code == 0
    assert "1 of 2 declared hook(s) never fired:" in result.stdout
    assert "hook agent.hooks[1] (agent.tool_call, gate) never fired" in result.stdout


def test_fail_under_hooks_fails_on_a_hook_that_never_fired(tmp_path: Path) -> None:
    path = gated_after_a_deny(tmp_path)
    report = tmp_path / "junit.xml"

    result = belt("test", str(path), "--fail-under-hooks", "--junit-xml", str(report))
    assert result.exit_code == 1
    assert "1 hook(s) never fired" in result.stdout
    assert "hook agent.hooks[1] (agent.tool_call, gate) never fired" in result.stdout
    [case] = ElementTree.parse(report).getroot().iter("testcase")
    [failure] = case.findall("failure")
    assert failure.get("type") == "coverage"
    assert case.find("properties") is None

    assert belt("test", str(path)).exit_code == 0


def test_coverage_in_json_and_as_junit_properties(tmp_path: Path) -> None:
    path = gated_after_a_deny(tmp_path)
    report = tmp_path / "junit.xml"

    result = belt("test", str(path), "--coverage", "--json", "--junit-xml", str(report))
    assert result.exit_code == 0
    [line] = result.stdout.splitlines()
    coverage = json.loads(line)["coverage"]
    assert [(c["where"], c["fired"], c["outcomes"]["deny"], c["tools"]) for c in coverage] == [
        ("agent.hooks[0]", 1, 1, {"delete_file": 1}),
        ("agent.hooks[1]", 0, 0, {}),
    ]
    [case] = ElementTree.parse(report).getroot().iter("testcase")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties == {
        "hook agent.hooks[0]": "event=agent.tool_call handler=py:tests.pyhooks:deny fired=1 "
        "deny=1 tools=delete_file:1",
        "hook agent.hooks[1]": "event=agent.tool_call handler=gate fired=0",
    }
    assert "coverage" not in json.loads(belt("test", str(path), "--json").stdout)
