"""Did you mean: every unknown key, event, tool or field is offered the closest valid name, in
every kind of file belt reads and in ``--event`` values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from belt.check.props import read_props
from belt.declaring.doctor import validate_files
from belt.emulator.agents import load_agent_file
from belt.emulator.modelscript import load_model_script
from belt.engine.scenario import read_scenario
from belt.errors import InvalidInput
from belt.reading.didyoumean import closest, did_you_mean
from belt.records.registry import check_candidate
from belt.rules.policy import load_policy
from belt.testing.expect import read_tested
from belt.wire.validate import check_decision, check_response
from tests.cli.runner import belt

SCENARIO = """\
[agent]
name = "a"

[[turns]]
user = "hi"

  [[turns.model]]
  {line}
"""


def every_problem(error: InvalidInput) -> list[str]:
    return [error.message, *error.problems]


def refused(read: object, path: Path) -> list[str]:
    with pytest.raises(InvalidInput) as caught:
        read(path)  # type: ignore[operator]
    return every_problem(caught.value)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("sai", ["say", "tokens", "tool_calls"], "say"),
        ("evnt", ["event", "type", "handler"], "event"),
        ("agent.tool_cal", ["agent.tool_call", "agent.tool_result"], "agent.tool_call"),
        ("Say", ["say"], "say"),  # another case is still the name
        ("xyz", ["say", "event"], None),  # nothing alike: nothing offered
        ("mine", ["decision", "inject"], None),  # a few letters in common are not enough
        ("say", ["say"], None),  # a valid name is not misspelt
        (3, ["say"], None),  # a key that is not a string
    ],
)
def test_the_closest_name_is_offered_only_when_one_is_close(
    word: object, choices: list[str], expected: str | None
) -> None:
    assert closest(word, choices) == expected
    assert did_you_mean(word, choices) == (f"; did you mean {expected!r}?" if expected else "")


def test_a_scenario_key_pydantic_refuses_is_offered_the_field_of_its_own_model(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "s.toml", SCENARIO.format(line='sai = "hello"'))
    assert refused(read_scenario, path) == [
        f"{path}: turns[0].model[0].sai: unknown key; did you mean 'say'?"
    ]


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (  # a field of a list's items, under another list's
            {"turns": [{"user": "u", "model": [{"tool_calls": [{"name": "x", "argument": {}}]}]}]},
            "turns[0].model[0].tool_calls[0].argument: unknown key; did you mean 'arguments'?",
        ),
        ({"agent": {"hook_file": "h.toml"}, "turns": [{"user": "u"}]}, "agent.hook_file"),
        ({"turns": [{"user": "u", "wait": [{"secs": 1}]}]}, "turns[0].wait[0].secs"),
        ({"agents": {"a/b": {"modl": []}}, "turns": [{"user": "u"}]}, "agents.a/b.modl"),
        ({"expct": [], "turns": [{"user": "u"}]}, "expct"),
        (  # an aliased field is offered as it is written (async, not async_)
            {"turns": [{"user": "u", "model": [{"tool_calls": [{"name": "x", "asyn": True}]}]}]},
            "turns[0].model[0].tool_calls[0].asyn: unknown key; did you mean 'async'?",
        ),
        (  # the Nexus dialect's own models
            {"dialect": "nexus", "turns": [{"usr": "u"}]},
            "turns[0].usr: unknown key; did you mean 'user'?",
        ),
    ],
)
def test_every_level_of_a_scenario_offers_its_own_fields(
    tmp_path: Path, doc: dict[str, object], problem: str
) -> None:
    path = write(tmp_path / "s.json", json.dumps(doc))
    found = refused(read_scenario, path)
    assert any(problem in line and "did you mean" in line for line in found), found


def test_a_declaration_of_either_dialect_offers_its_keys_and_events(tmp_path: Path) -> None:
    platform = write(
        tmp_path / "hooks.toml",
        '[[hooks]]\nevnt = "agent.tool_call"\ntype = "gat"\n'
        '[[hooks]]\nevent = "agent.tool_cal"\ntype = "builtin"\nhandler = "belt:sugest"\n',
    )
    nexus = write(
        tmp_path / "nexus.json",
        json.dumps(
            {
                "approval_mode": "ask",
                "lifecycle_hooks": {"stp": {"tool": "v", "timeout_ms": 5, "max_continuations": 0}},
            }
        ),
    )
    keys = write(tmp_path / "keys.json", json.dumps({"lifecycle_hooks": {"stop": {"tol": "v"}}}))
    top = write(tmp_path / "top.json", json.dumps({"hooks": [], "hoks": []}))
    reports = {r.path: r.findings.problems for r in validate_files([platform, nexus, keys], None)}
    assert (
        "hooks[0].evnt: unknown key (allowed: event, type, handler, async, timeout, "
        "default_resolution); did you mean 'event'?"
    ) in reports[str(platform)]
    assert any(
        "'gat' is not a handler type" in p and "'gate'?" in p for p in reports[str(platform)]
    )
    assert any(
        p.startswith("hooks[1].event: 'agent.tool_cal'") and p.endswith("'agent.tool_call'?")
        for p in reports[str(platform)]
    )
    assert any("'belt:sugest' is not a builtin" in p for p in reports[str(platform)])
    assert any(p.endswith("did you mean 'belt:suggest'?") for p in reports[str(platform)])
    assert any(
        p.startswith("lifecycle_hooks.stp: unknown event") and p.endswith("did you mean 'stop'?")
        for p in reports[str(nexus)]
    )
    assert any(
        p.startswith("lifecycle_hooks.stop.tol: unknown key") and p.endswith("'tool'?")
        for p in reports[str(keys)]
    )
    (report,) = validate_files([top], None)
    assert report.findings.problems == [
        "hoks: unknown key (a declaration file holds only hooks); did you mean 'hooks'?"
    ]


def test_a_policy_offers_its_keys_events_and_decisions(tmp_path: Path) -> None:
    path = write(
        tmp_path / "policy.toml",
        'default = "alow"\n[[rules]]\nevnt = "agent.tool_call"\ndecison = "deny"\n'
        '[[rules]]\nevent = "agent.tool_cal"\ndecision = "deny"\nturn_count = { mn = 1 }\n'
        'inject = { contnt = "x" }\n',
    )
    found = refused(load_policy, path)
    for expected in (
        "default: 'alow' is not a decision",
        "rules[0].evnt: unknown key",
        "rules[0].decison: unknown key",
        "rules[1].event: 'agent.tool_cal' is not a lifecycle event",
        "rules[1].turn_count.mn: unknown key",
        "rules[1].inject.contnt: unknown key",
    ):
        (line,) = [line for line in found if line.startswith(expected)]
        assert "; did you mean '" in line, line
    assert any(line.endswith("did you mean 'content'?") for line in found)


def test_a_props_file_offers_its_keys_and_events(tmp_path: Path) -> None:
    path = write(
        tmp_path / "props.toml",
        '[[property]]\nevent = "agent.tool_cal"\ntol = "delete_file"\ndecision = "deny"\n',
    )
    found = refused(read_props, path)
    assert (
        "property[0].tol: unknown key (expected one of name, event, tool, arguments, " in (found[1])
    )
    assert found[1].endswith("; did you mean 'tool'?")
    assert found[2] == (
        "property[0].event: 'agent.tool_cal' is not a lifecycle event; "
        "did you mean 'agent.tool_call'?"
    )
    top = write(tmp_path / "top.toml", '[[properti]]\nevent = "agent.start"\n')
    assert "did you mean 'property'?" in " ".join(refused(read_props, top))


def test_expectations_offer_their_keys_subjects_row_fields_and_events(tmp_path: Path) -> None:
    expect = [
        {"tool": "delete_file", "decison": "deny"},
        {"tol": "delete_file"},
        {"row": {"rol": "tool"}},
        {"event": "agent.tool_cal"},
    ]
    doc = {"agent": {"name": "a"}, "turns": [{"user": "u"}], "expect": expect}
    with pytest.raises(InvalidInput) as caught:
        read_tested(doc, "s.toml", tmp_path)
    found = every_problem(caught.value)
    text = "\n".join(found)
    assert "expect[0].decison: unknown key here" in text
    assert "did you mean 'decision'?" in text
    assert "expect[1]: says nothing to check" in text
    assert "did you mean 'tool' (not 'tol')?" in text
    assert "expect[2].row.rol: unknown row field" in text
    assert "did you mean 'role'?" in text
    assert "'agent.tool_cal' is not one of" in text
    assert "did you mean 'agent.tool_call'?" in text


def test_a_model_script_and_an_agent_file_offer_their_fields(tmp_path: Path) -> None:
    script = write(
        tmp_path / "model.toml", '[[rules]]\nmatch = "*"\n  [[rules.model]]\n  sai = "hi"\n'
    )
    assert refused(load_model_script, script) == [
        f"{script}: rules[0].model[0].sai: unknown key; did you mean 'say'?"
    ]
    agent = write(tmp_path / "agent.toml", 'name = "a"\nsystem_promt = "be brief"\n')
    with pytest.raises(InvalidInput) as caught:
        load_agent_file(agent, "acme/a")
    assert caught.value.message == (
        f"{agent}: system_promt: unknown key; did you mean 'system_prompt'?"
    )


def test_a_registry_entry_offers_its_keys_and_kinds() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_candidate({"name": "n", "kind": "skil", "txt": "t"}, where="entry.toml")
    text = "\n".join(every_problem(caught.value))
    assert "did you mean 'text'?" in text
    assert "did you mean 'skill'?" in text


def test_answers_and_decisions_offer_their_keys() -> None:
    _, warnings = check_response({"decison": "deny", "inject": {"content": "x", "dedup": "k"}})
    assert warnings == [
        "decison: unknown key in the answer, ignored; did you mean 'decision'?",
        "inject.dedup: unknown key in the answer, ignored; did you mean 'dedup_key'?",
    ]
    findings, _ = check_decision({"continue": False, "feedbak": "x"}, "stop")
    assert findings.problems == [
        "structured_content.feedbak: additional result fields are refused; did you mean 'feedback'?"
    ]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["trigger", "agent.tool_cal", "--to", "py:tests.pyhooks:deny"], 5),
        (["check", "py:tests.pyhooks:deny", "--event", "agent.tool_cal"], 5),
        (
            ["interrupt", "create", "--run", "ar_1", "--chat", "ch_1", "--event", "agent.tool_cal"],
            5,
        ),
        (["interrupt", "resolve", "--all", "allow", "--event", "agent.tool_cal", "--yes"], 2),
        (["replay", "journal", "--event", "agent.tool_cal", "--policy", "examples/policy.toml"], 2),
    ],
)
def test_an_event_option_that_is_misspelt_is_refused_with_the_event_meant(
    args: list[str], code: int
) -> None:
    result = belt(*args)
    assert result.exit_code == code, result.stderr
    assert "did you mean 'agent.tool_call'?" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_misspelt_executor_of_belt_check_is_named(tmp_path: Path) -> None:
    hooks = write(
        tmp_path / "nexus.toml",
        '[lifecycle_hooks.stop]\ntool = "verify"\ntimeout_ms = 5000\nmax_continuations = 1\n',
    )
    result = belt("check", str(hooks), "--executor", "verfy=cmd:true")
    assert result.exit_code == 5
    assert "--executor names 'verfy': did you mean 'verify'?" in result.stderr
