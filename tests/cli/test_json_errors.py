"""With --json, a failure is one JSON object on stdout (error, code, where, hint), with the exit
code it has without --json; the plain line stays on stderr (docs/cli.md, "Errors with --json")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runner import Result, belt
from tests.fake_platform import closed_port

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = """\
[agent]
name = "a"

[[turns]]
user = "hi"

  [[turns.model]]
  sai = "hello"
"""

PASSING = """\
[agent]
name = "a"

[[turns]]
user = "hi"

  [[turns.model]]
  say = "hello"

[[expect]]
run_state = "completed"
"""


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test runs in a directory of its own files, named as a user names them."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def the_error(result: Result) -> dict[str, Any]:
    """The one JSON object a failed --json command printed: stdout is that line and nothing
    else, and stderr still has the plain error line."""
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1, result.stdout
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    assert document["code"] == result.exit_code
    assert set(document) <= {"error", "code", "where", "hint", "problems"}
    assert f"error: {document['error']}" in result.stderr
    assert "Traceback" not in result.stderr
    return document


def test_an_invalid_scenario_is_one_object_naming_the_file_and_the_key_meant() -> None:
    Path("typo.toml").write_text(SCENARIO, encoding="utf-8")
    result = belt("sim", "run", "typo.toml", "--json")
    assert result.exit_code == 5
    assert the_error(result) == {
        "error": "typo.toml: turns[0].model[0].sai: unknown key; did you mean 'say'?",
        "code": 5,
        "where": "typo.toml",
    }


def test_without_json_the_same_failure_prints_nothing_on_stdout() -> None:
    Path("typo.toml").write_text(SCENARIO, encoding="utf-8")
    result = belt("sim", "run", "typo.toml")
    assert result.exit_code == 5
    assert result.stdout == ""
    assert "error: typo.toml: turns[0].model[0].sai: unknown key" in result.stderr


def test_a_missing_file_is_exit_3_where_it_was_looked_for() -> None:
    result = belt("sim", "run", "nope.toml", "--json")
    assert result.exit_code == 3
    assert the_error(result) == {
        "error": "nope.toml: no such file",
        "code": 3,
        "where": "nope.toml",
    }


def test_every_problem_and_the_hint_are_kept() -> None:
    Path("props.toml").write_text(
        '[[property]]\nevent = "agent.tool_cal"\ntol = "x"\ndecision = "deny"\n', encoding="utf-8"
    )
    result = belt("check", "py:tests.pyhooks:deny", "--props", "props.toml", "--json")
    assert result.exit_code == 5
    error = the_error(result)
    assert error["error"] == "props.toml: not a valid check file"
    assert error["where"] == "props.toml"
    assert [problem.rsplit("; ", 1)[1] for problem in error["problems"]] == [
        "did you mean 'tool'?",
        "did you mean 'agent.tool_call'?",
    ]


def test_an_option_value_belt_refuses_names_the_option() -> None:
    result = belt("check", "py:tests.pyhooks:deny", "--event", "agent.tool_cal", "--json")
    assert result.exit_code == 5
    error = the_error(result)
    assert error["where"] == "--event"
    assert error["error"].endswith("did you mean 'agent.tool_call'?")


@pytest.mark.parametrize(
    ("args", "where", "said"),
    [
        (["sim", "run", "--jsn", "s.toml", "--json"], None, "No such option: --jsn"),
        (["sim", "run", "--json"], "scenario", "Missing argument"),
        (["hooks", "validate", "--dialect", "nexsu", "h.toml", "--json"], "--dialect", "'nexsu'"),
        (["interrupt", "list", "--reason", "nope", "--json"], "--reason", "'nope'"),
        (["check", "py:tests.pyhooks:deny", "--timeout", "nan", "--json"], "--timeout", "nan"),
        (["test", ".", "-j", "--json"], None, None),  # -j takes --json as its value: belt's own
        (["registry", "add", "--kind", "skil", "--name", "n", "--json"], "--kind", "'skil'"),
    ],
)
def test_a_mistake_of_the_command_line_is_one_object_with_exit_2(
    args: list[str], where: str | None, said: str | None
) -> None:
    result = belt(*args)
    assert result.exit_code == 2, result.stderr
    if said is None:  # -j read "--json" as its value: the command line holds no --json flag
        assert result.stdout == ""
        return
    error = the_error(result)
    assert said in error["error"]
    assert error.get("where") == where
    assert "╭" not in result.stderr  # the plain line, not a box


def test_a_mistake_of_the_command_line_without_json_is_typers_usual_message() -> None:
    result = belt("sim", "run", "--jsn", "s.toml")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "No such option: --jsn" in result.stderr
    assert "Try 'belt sim run -h' for help." in result.stderr


def test_a_group_without_json_answers_an_unknown_command_as_usual() -> None:
    result = belt("interrupt", "lst", "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "No such command 'lst'" in result.stderr


def test_interrupt_commands_say_what_is_missing_and_how_to_find_it() -> None:
    result = belt("interrupt", "resolve", "in_nope", "allow", "--json")
    assert result.exit_code == 3
    error = the_error(result)
    assert error["error"] == "no interrupt in_nope"
    assert "belt interrupt list" in error["hint"]
    result = belt(
        "interrupt", "resolve", "--all", "allow", "--event", "agent.tool_cal", "--yes", "--json"
    )
    assert result.exit_code == 2
    assert the_error(result)["where"] == "--event"


def test_registry_and_trigger_failures_are_objects() -> None:
    result = belt("registry", "show", "nope", "--json")
    assert result.exit_code == 3
    assert "nope" in the_error(result)["error"]
    result = belt("registry", "add", "--kind", "rule", "--name", "n", "--file", "x.txt", "--json")
    assert result.exit_code == 3
    assert the_error(result)["where"] == "x.txt"
    result = belt("trigger", "agent.tool_cal", "--to", "py:tests.pyhooks:deny", "--json")
    assert result.exit_code == 5
    error = the_error(result)
    assert error["error"].endswith("did you mean 'agent.tool_call'?")
    assert error["hint"] == "`belt hooks events` lists them"


def test_a_report_printed_before_the_failure_stays_the_one_document() -> None:
    # The delivery failed after trigger printed its report: the report says so, and stdout
    # holds it alone (a second object would make stdout two documents).
    result = belt(
        "trigger", "agent.start", "--to", f"http://127.0.0.1:{closed_port()}/hook", "--json"
    )
    assert result.exit_code == 6
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["error"]
    assert "error:" in result.stderr


def test_belt_test_finding_no_scenario_is_an_object() -> None:
    Path("suite").mkdir()
    result = belt("test", "suite", "--json")
    assert result.exit_code == 5
    error = the_error(result)
    assert error["error"] == "no scenario with expectations found in suite"
    assert error["where"] == "suite"
    assert "[[expect]]" in error["hint"]
    result = belt("test", "gone", "--json")
    assert result.exit_code == 3
    assert the_error(result)["where"] == "gone"


def test_a_stream_ends_with_the_error_as_its_last_line() -> None:
    Path("ok.toml").write_text(PASSING, encoding="utf-8")
    result = belt("test", "ok.toml", "--json", "--junit-xml", "missing/dir/report.xml")
    assert result.exit_code != 0
    *results, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert [item["status"] for item in results] == ["pass"]
    assert last["code"] == result.exit_code
    assert last["error"].startswith("--junit-xml missing/dir/report.xml: cannot write it")


def test_the_console_command_prints_the_object_alone_on_stdout() -> None:
    Path("typo.toml").write_text(SCENARIO, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "belt", "hooks", "validate", "--dialect", "x", "a", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert json.loads(done.stdout)["where"] == "--dialect"
    done = subprocess.run(
        [sys.executable, "-m", "belt", "sim", "run", "typo.toml", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 5
    assert json.loads(done.stdout)["error"].endswith("did you mean 'say'?")
    assert done.stderr.startswith("error: typo.toml: ")
