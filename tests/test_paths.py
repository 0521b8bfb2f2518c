"""Paths mean the same everywhere: a ``py:`` handler, a ``policy:`` handler and a hooks file
named in a scenario are read from the scenario's directory, whatever the current directory; one
found from the current directory only still runs, with a warning giving the new spelling; one
found nowhere is exit 5 naming its path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from belt.engine.entrypoints import resume_run, run_scenario
from belt.engine.scenario import read_scenario
from belt.errors import InvalidInput
from belt.testing.suite import run_suite
from tests.cli.runner import belt

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"

GUARD = """\
def guard(payload):
    path = (payload.get("data") or {}).get("arguments", {}).get("path", "")
    if payload["event"] == "agent.tool_call" and not path.startswith("/tmp/"):
        return {"decision": "deny", "reason": "only /tmp"}
    return None
"""

POLICY = """\
default = "allow"

[[rules]]
event = "agent.tool_call"
tool = "delete_file"
arguments = { path = "/etc/*" }
decision = "deny"
reason = "not /etc"
"""


def scenario_text(handler: str, *, expect: bool = True, gate: bool = False) -> str:
    """A scenario whose one webhook hook on agent.tool_call is ``handler``: it deletes
    /etc/passwd, and (with ``expect``) expects the deny."""
    text = (
        f'[[agent.hooks]]\nevent = "agent.tool_call"\ntype = "webhook"\nhandler = "{handler}"\n\n'
    )
    if gate:
        text += '[[agent.hooks]]\nevent = "agent.tool_call"\ntype = "gate"\ntimeout = 600\n\n'
    text += (
        '[[turns]]\nuser = "Tidy up"\n'
        "  [[turns.model]]\n"
        '  tool_calls = [ { name = "delete_file", arguments = { path = "/etc/passwd" } } ]\n'
        '  [[turns.model]]\n  say = "Done."\n'
    )
    if expect:
        text += '\n[[expect]]\nevent = "agent.tool_call"\ndecision = "deny"\n'
    return text


def project(tmp_path: Path, handler: str, **options: bool) -> Path:
    """``tmp_path/project/tests/s.toml`` naming ``handler``, with ``tests/guard.py`` and
    ``tests/pol.toml`` beside it; returns the scenario."""
    tests = tmp_path / "project" / "tests"
    tests.mkdir(parents=True)
    (tests / "guard.py").write_text(GUARD, encoding="utf-8")
    (tests / "pol.toml").write_text(POLICY, encoding="utf-8")
    scenario = tests / "s.toml"
    scenario.write_text(scenario_text(handler, **options), encoding="utf-8")
    return scenario


def test_the_examples_pass_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = belt("test", str(EXAMPLES / "tests"))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "5 scenario(s): 5 passed" in result.stdout
    assert "warning" not in result.stderr


@pytest.mark.parametrize(
    "handler", ["py:guard.py:guard", "py:./guard.py:guard", "py:guard:guard", "policy:pol.toml"]
)
def test_a_handler_is_read_from_the_scenarios_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handler: str
) -> None:
    scenario = project(tmp_path, handler)
    monkeypatch.chdir(tmp_path)
    suite = run_suite(paths=[scenario])
    (result,) = suite.results
    assert result.status == "pass", (result.error, [o.found for o in result.failures])
    assert result.warnings == []
    report = result.report
    assert report is not None
    # The record names the handler as the scenario wrote it.
    assert report["hook_executions"][0]["handler"] == handler
    assert report["hook_executions"][0]["decision"] == "deny"


def test_a_hooks_files_handlers_are_read_from_its_own_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = project(tmp_path, "py:guard.py:guard")
    hooks = scenario.parent / "hooks"
    hooks.mkdir()
    (hooks / "deny_all.py").write_text(
        "def deny(payload):\n    return {'decision': 'deny', 'reason': 'all'}\n", encoding="utf-8"
    )
    declaration = {
        "hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": "py:deny_all.py:deny"}]
    }
    (hooks / "hooks.json").write_text(json.dumps(declaration), encoding="utf-8")
    text = scenario_text("py:guard.py:guard", expect=False)
    scenario.write_text('[agent]\nhooks_file = "hooks/hooks.json"\n\n' + text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    loaded = read_scenario(scenario)
    assert [str(hook.handler) for hook in loaded.hooks] == [
        "py:deny_all.py:deny",
        "py:guard.py:guard",
    ]
    report, _ = run_scenario(scenario=scenario)
    assert [e["reason"] for e in report["hook_executions"]] == ["all"]


def test_a_missing_file_is_exit_5_naming_its_path(tmp_path: Path) -> None:
    scenario = project(tmp_path, "py:gone.py:guard")
    expected = f"{scenario}: agent.hooks[0].handler: {scenario.parent / 'gone.py'}: no such file"
    tested = belt("test", str(scenario))
    assert tested.exit_code == 5, tested.stdout + tested.stderr
    assert expected in tested.stdout
    ran = belt("sim", "run", str(scenario))
    assert ran.exit_code == 5
    assert ran.stderr.startswith(f"error: {expected}"), ran.stderr
    assert "Traceback" not in ran.stderr + tested.stdout + tested.stderr

    scenario.write_text(scenario_text("policy:nowhere/pol.toml"), encoding="utf-8")
    tested = belt("test", str(scenario))
    assert tested.exit_code == 5
    assert f"{scenario.parent / 'nowhere' / 'pol.toml'}: no such file" in tested.stdout


def test_a_policy_handler_is_checked_when_the_scenario_is_read(tmp_path: Path) -> None:
    scenario = project(tmp_path, "policy:pol.toml")
    (scenario.parent / "pol.toml").write_text('default = "maybe"\n', encoding="utf-8")
    with pytest.raises(InvalidInput) as raised:
        read_scenario(scenario)
    assert str(scenario.parent / "pol.toml") in raised.value.message
    scenario.write_text(scenario_text("policy:"), encoding="utf-8")
    with pytest.raises(InvalidInput) as empty:
        read_scenario(scenario)
    assert "a policy handler is policy:FILE" in " ".join(
        [empty.value.message, *empty.value.problems]
    )
    # The platform has no such handler: a hooks file for it refuses one.
    declaration = tmp_path / "hooks.json"
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": "policy:pol.toml"}
    declaration.write_text(json.dumps({"hooks": [hook]}), encoding="utf-8")
    validated = belt("hooks", "validate", str(declaration))
    assert validated.exit_code == 5
    assert "a belt extension for scenarios" in validated.stdout + validated.stderr


def test_a_path_found_from_the_current_directory_still_runs_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The spelling of the examples before: the path from the repository's root.
    scenario = project(tmp_path, "py:project/tests/guard.py:guard")
    monkeypatch.chdir(tmp_path)
    tested = belt("test", str(scenario))
    assert tested.exit_code == 0, tested.stdout + tested.stderr
    warning = (
        f"warning: {scenario}: agent.hooks[0].handler: py:project/tests/guard.py:guard was found "
        "from the current directory"
    )
    assert warning in tested.stderr
    assert "write py:guard.py:guard" in tested.stderr
    as_json = belt("test", str(scenario), "--json")
    (line,) = as_json.stdout.splitlines()
    assert "write py:guard.py:guard" in json.loads(line)["warnings"][0]

    ran = belt("sim", "run", str(scenario), "--json")
    assert ran.exit_code == 0, ran.stderr
    assert "write py:guard.py:guard" in ran.stderr
    assert "write py:guard.py:guard" in json.loads(ran.stdout)["simulation"]["warnings"][0]

    # From elsewhere it is found nowhere.
    monkeypatch.chdir(scenario.parent)
    moved = belt("test", str(scenario))
    assert moved.exit_code == 5
    assert "project/tests/guard.py: no such file" in moved.stdout


def test_a_run_resumed_from_another_directory_loads_the_same_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = project(tmp_path, "py:guard.py:guard", expect=False, gate=True)
    # The delete of /tmp passes the guard and waits at the gate; after it, the guard is called
    # again at the next model turn's agent.turn_start, by the process that resumes the run.
    text = scenario.read_text(encoding="utf-8").replace("/etc/passwd", "/tmp/x")
    turn_start = '[[agent.hooks]]\nevent = "agent.turn_start"\ntype = "webhook"\n'
    scenario.write_text(f'{turn_start}handler = "py:guard.py:guard"\n\n{text}', encoding="utf-8")
    monkeypatch.chdir(scenario.parent)
    report, _ = run_scenario(scenario=scenario)
    run_id = report["runs"][0]["id"]
    assert report["runs"][0]["state"] == "input_required"
    interrupt = report["interrupts"][0]["id"]
    assert belt("interrupt", "resolve", interrupt, "allow").exit_code == 0
    (tmp_path / "guard.py").write_text("raise SystemExit('the wrong guard')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    resumed, _ = resume_run(run_id=run_id)
    assert resumed["runs"][0]["state"] == "completed"
    executed = [(e["hook_event"], e["error"]) for e in resumed["hook_executions"]]
    assert executed == [
        ("agent.turn_start", None),
        ("agent.tool_call", None),
        ("agent.tool_call", None),
        ("agent.turn_start", None),
    ]


@pytest.mark.parametrize("handler", ["py:guard.py:guard", "policy:pol.toml"])
def test_the_doctor_loads_a_scenarios_handler_from_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handler: str
) -> None:
    scenario = project(tmp_path, handler)
    monkeypatch.chdir(tmp_path)
    result = belt("hooks", "doctor", str(scenario), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "handler-cannot-be-imported" not in result.stdout


NEXUS_CHECK = """\
def check(task):
    if task["event"] == "stop" and "tests pass" not in (task.get("output_preview") or ""):
        return {"structured_content": {"continue": True, "feedback": "Run the tests."}}
    return {"structured_content": {"continue": False}}
"""

NEXUS_SCENARIO = """\
dialect = "nexus"

[profile]
approval_mode = "auto"

[profile.lifecycle_hooks.stop]
tool = "verify"
timeout_ms = 5000
max_continuations = 2

[executors]
verify = "{target}"

[[turns]]
user = "Fix the failing login test."
  [[turns.model]]
  say = "I changed the session check."
  [[turns.model]]
  say = "Ran the suite: all tests pass."

[[expect]]
event = "stop"
fired = 2
"""


def test_a_nexus_scenarios_py_executor_is_read_from_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tools.py").write_text(NEXUS_CHECK)
    (suite / "stop.toml").write_text(NEXUS_SCENARIO.format(target="py:tools.py:check"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = belt("test", str(suite), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    (outcome,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert (outcome["status"], outcome.get("warnings")) == ("pass", None)


def test_a_nexus_executor_found_from_the_current_directory_only_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (tmp_path / "tools.py").write_text(NEXUS_CHECK)
    (suite / "stop.toml").write_text(NEXUS_SCENARIO.format(target="py:tools.py:check"))
    monkeypatch.chdir(tmp_path)
    result = belt("test", str(suite), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    (outcome,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert outcome["status"] == "pass"
    (warning,) = outcome["warnings"]
    assert "executors.verify" in warning and "write py:../tools.py:check" in warning


def test_a_nexus_executor_file_found_nowhere_is_exit_5(tmp_path: Path) -> None:
    scenario = tmp_path / "stop.toml"
    scenario.write_text(NEXUS_SCENARIO.format(target="py:missing.py:check"))
    result = belt("sim", "run", str(scenario))
    assert result.exit_code == 5
    assert "executors.verify: " in result.stderr and "missing.py: no such file" in result.stderr
    assert "Traceback" not in result.stderr
