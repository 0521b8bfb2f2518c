from pathlib import Path
from typing import Any

import pytest

from belt.errors import InvalidInput, NotFound
from belt.rules.policy import Policy, load_policy, parse_policy
from belt.wire.platform import LifecycleHookPayload
from belt.wire.samples import sample_payload

EXAMPLE = Path(__file__).parent.parent / "examples" / "policy.toml"


def payload(event: str = "agent.tool_call", **overrides: Any) -> LifecycleHookPayload:
    return LifecycleHookPayload.model_validate(sample_payload(event, **overrides))


def tool_call(tool: str = "delete_file", **arguments: Any) -> LifecycleHookPayload:
    return payload(data={"tool": tool, "arguments": arguments})


def policy(*rules: dict[str, Any], default: str = "allow") -> Policy:
    return parse_policy({"default": default, "rules": list(rules)}, "test.toml")


def decision(chosen: Policy, hook: LifecycleHookPayload) -> str:
    return chosen.decide(hook).response.effective_decision().value


def refusal(doc: Any) -> list[str]:
    with pytest.raises(InvalidInput) as caught:
        parse_policy(doc, "p.toml")
    assert caught.value.message.startswith("p.toml: ")
    return caught.value.problems


def test_example_policy_denies_delete_file_unless_under_tmp() -> None:
    example = load_policy(EXAMPLE)
    assert decision(example, tool_call(path="/tmp/old.txt")) == "allow"
    denied = example.decide(tool_call(path="/var/lib/app/production.db"))
    assert denied.response.decision == "deny"
    assert denied.response.reason == "only /tmp deletions allowed"
    assert denied.rule == 1
    assert decision(example, tool_call("read_file", path="/etc/passwd")) == "allow"
    reminder = example.decide(payload("agent.turn_start"))
    assert reminder.rule == 2
    assert reminder.response.decision is None
    assert reminder.response.inject is not None
    assert reminder.response.inject.ttl_turns == 1
    assert example.decide(payload("agent.complete")).rule is None


@pytest.mark.parametrize(
    "path", ["/tmp/../etc/passwd", "/tmp/a/../../etc/passwd", "/tmpevil/x", "/tmp", "tmp/x"]
)
def test_example_policy_denies_a_delete_that_leaves_tmp_once_normalised(path: str) -> None:
    denied = load_policy(EXAMPLE).decide(tool_call(path=path))
    assert (denied.rule, denied.response.decision) == (1, "deny")


@pytest.mark.parametrize("path", ["/tmp/old.txt", "/tmp//old.txt", "/tmp/./a/../old.txt"])
def test_example_policy_allows_a_delete_under_tmp_however_spelled(path: str) -> None:
    allowed = load_policy(EXAMPLE).decide(tool_call(path=path))
    assert (allowed.rule, allowed.response.decision) == (0, "allow")


def test_a_path_pattern_normalises_before_matching_and_a_glob_does_not() -> None:
    as_path = policy({"arguments": {"path": "path:/etc/*"}, "decision": "deny"})
    as_glob = policy({"arguments": {"path": "/etc/*"}, "decision": "deny"})
    for sneaky in ("/tmp/../etc/passwd", "//etc/passwd", "/etc/./passwd"):
        assert decision(as_path, tool_call(path=sneaky)) == "deny", sneaky
    assert decision(as_glob, tool_call(path="/tmp/../etc/passwd")) == "allow"
    assert decision(as_path, tool_call(path=["/etc/passwd"])) == "allow"


def test_a_path_pattern_not_in_normal_form_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('[[rules]]\narguments = { path = "path:/tmp/" }\ndecision = "allow"\n')
    with pytest.raises(InvalidInput) as caught:
        load_policy(path)
    assert caught.value.message == f"{path}: 1 problem(s) in the policy"
    assert caught.value.problems == [
        "rules[0].arguments.path: path pattern '/tmp/' is not written in normal form "
        "(no //, . or .. segments, no trailing /), as the values it is matched against are: "
        "write path:/tmp"
    ]


def test_no_rule_matching_gives_the_default() -> None:
    assert decision(policy(default="deny"), tool_call()) == "deny"
    assert decision(policy(), tool_call()) == "allow"


def test_a_rule_and_the_default_give_one_verdict_made_at_load() -> None:
    example = load_policy(EXAMPLE)
    denied = example.decide(tool_call(path="/srv/a"))
    assert example.decide(tool_call(path="/srv/b")) is denied
    assert denied.fixed and denied.rule == 1
    fallback = example.decide(payload("agent.complete"))
    assert example.decide(payload("agent.complete", chat_id="ch_other")) is fallback
    assert fallback.fixed and fallback.rule is None
    assert fallback.response.decision == "allow"


def test_first_matching_rule_wins() -> None:
    chosen = policy({"tool": "delete_*", "decision": "deny"}, {"decision": "stop"})
    assert decision(chosen, tool_call("delete_dir")) == "deny"
    assert decision(chosen, tool_call("read_file")) == "stop"


def test_rules_naming_an_event_and_rules_naming_none_are_tried_in_the_files_order() -> None:
    chosen = policy(
        {"event": "agent.tool_call", "tool": "read_*", "decision": "allow"},
        {"tool": "read_file", "decision": "deny"},
        {"event": "agent.tool_call", "decision": "stop"},
        {"event": "agent.turn_start", "decision": "suspend"},
        {"decision": "deny"},
    )
    assert chosen.decide(tool_call("read_file")).rule == 0
    assert chosen.decide(tool_call("write_file")).rule == 2
    assert chosen.decide(payload("agent.turn_start")).rule == 3
    # An event no rule names: only the rules that name none can match.
    assert chosen.decide(payload("agent.complete")).rule == 4
    assert policy({"event": "agent.start", "decision": "deny"}).decide(tool_call()).rule is None


def test_event_matches_exactly() -> None:
    chosen = policy({"event": "agent.turn_start", "decision": "deny"})
    assert decision(chosen, payload("agent.turn_start")) == "deny"
    assert decision(chosen, payload("agent.start")) == "allow"


def test_tool_is_a_case_sensitive_glob_and_needs_a_tool() -> None:
    chosen = policy({"tool": "delete_?ile", "decision": "deny"})
    assert decision(chosen, tool_call("delete_file")) == "deny"
    assert decision(chosen, tool_call("Delete_file")) == "allow"
    assert decision(chosen, tool_call("delete_files")) == "allow"
    assert decision(chosen, payload("agent.turn_start")) == "allow"


def test_chat_id_is_a_glob() -> None:
    chosen = policy({"chat_id": "ch_prod_*", "decision": "deny"})
    assert decision(chosen, payload(chat_id="ch_prod_1")) == "deny"
    assert decision(chosen, payload(chat_id="ch_dev_1")) == "allow"


def test_turn_count_bounds_are_inclusive_and_an_integer_is_exact() -> None:
    ranged = policy({"turn_count": {"min": 1, "max": 10}, "decision": "deny"})
    assert [decision(ranged, payload(turn_count=n)) for n in (0, 1, 10, 11)] == [
        "allow",
        "deny",
        "deny",
        "allow",
    ]
    open_ended = policy({"turn_count": {"min": 5}, "decision": "deny"})
    assert decision(open_ended, payload(turn_count=500)) == "deny"
    exact = policy({"turn_count": 0, "decision": "deny"})
    assert decision(exact, payload(turn_count=0)) == "deny"
    assert decision(exact, payload(turn_count=1)) == "allow"


def test_arguments_glob_regex_and_exact_values() -> None:
    chosen = policy(
        {
            "arguments": {"path": "/tmp/*", "mode": "re:^(r|rw)$", "options.force": True},
            "decision": "deny",
        }
    )
    matching = {"path": "/tmp/a", "mode": "rw", "options": {"force": True}}
    assert decision(chosen, tool_call(**matching)) == "deny"
    assert decision(chosen, tool_call(**{**matching, "path": "/etc/a"})) == "allow"
    assert decision(chosen, tool_call(**{**matching, "mode": "rwx"})) == "allow"
    assert decision(chosen, tool_call(**{**matching, "options": {"force": 1}})) == "allow"
    assert decision(chosen, tool_call(**{**matching, "options": {}})) == "allow"


def test_regex_searches_and_a_glob_never_matches_a_non_string() -> None:
    chosen = policy({"arguments": {"cmd": "re:rm -rf", "n": "*"}, "decision": "deny"})
    assert decision(chosen, tool_call("shell", cmd="sudo rm -rf /", n="3")) == "deny"
    assert decision(chosen, tool_call("shell", cmd="sudo rm -rf /", n=3)) == "allow"


def test_nested_tables_and_array_indexes_are_key_paths() -> None:
    chosen = policy(
        {"arguments": {"options": {"force": True}, "files.0": "*.db"}, "decision": "deny"}
    )
    assert decision(chosen, tool_call(options={"force": True}, files=["a.db", "b"])) == "deny"
    assert decision(chosen, tool_call(options={"force": True}, files=["b", "a.db"])) == "allow"
    assert decision(chosen, tool_call(options={"force": True}, files=[])) == "allow"


def test_exact_numbers_and_arrays() -> None:
    chosen = policy({"arguments": {"limit": 10, "tags": ["a", "b"]}, "decision": "deny"})
    assert decision(chosen, tool_call(limit=10, tags=["a", "b"])) == "deny"
    assert decision(chosen, tool_call(limit=10.0, tags=["a", "b"])) == "deny"
    assert decision(chosen, tool_call(limit=10, tags=["b", "a"])) == "allow"
    assert decision(chosen, tool_call(limit=True, tags=["a", "b"])) == "allow"


def test_arguments_need_arguments() -> None:
    chosen = policy({"arguments": {"path": "*"}, "decision": "deny"})
    assert decision(chosen, payload(data={"tool": "x"})) == "allow"


def test_a_rule_gives_its_reason_injection_and_system_note() -> None:
    chosen = policy(
        {
            "tool": "search",
            "reason": "searched",
            "inject": {
                "content": "Cite sources.",
                "role": "system",
                "ttl_turns": 2,
                "dedup_key": "policy",
                "items": ["cite"],
            },
            "system": "Be brief.",
        }
    )
    response = chosen.decide(tool_call("search")).response
    assert response.decision is None
    assert response.effective_decision() == "allow"
    assert response.reason == "searched"
    assert response.inject is not None
    assert (response.inject.content, response.inject.ttl_turns) == ("Cite sources.", 2)
    assert response.inject.items == ["cite"]
    assert response.system == "Be brief."


def test_every_decision_can_be_given() -> None:
    for chosen in ("allow", "deny", "stop", "suspend"):
        assert decision(policy({"decision": chosen}), tool_call()) == chosen


def test_problems_name_their_path() -> None:
    problems = refusal(
        {
            "default": "maybe",
            "colour": "red",
            "rules": [
                {"tool": "x", "decision": "deny"},
                {
                    "event": "agent.nope",
                    "tool": 3,
                    "arguments": {"path": "re:(", "when": {"at": None}},
                    "turn_count": {"min": 5, "max": 2, "step": 1},
                    "decision": "block",
                    "reason": 1,
                    "inject": {"content": "x", "ttl_turns": -1, "colour": "red"},
                    "extra": 1,
                },
            ],
        }
    )
    text = "\n".join(problems)
    assert "colour: unknown key" in text
    assert "default: 'maybe' is not a decision" in text
    assert "rules[1].extra: unknown key" in text
    assert "rules[1].event: 'agent.nope' is not a lifecycle event" in text
    assert "rules[1].tool: expected a glob pattern string, got an integer" in text
    assert "rules[1].arguments.path: bad regex '('" in text
    assert "rules[1].arguments.when.at: expected a glob" in text
    assert "rules[1].turn_count.step: unknown key" in text
    assert "rules[1].turn_count: min 5 is above max 2" in text
    assert "rules[1].decision: 'block' is not a decision" in text
    assert "rules[1].reason: expected a string, got an integer" in text
    assert "rules[1].inject.ttl_turns:" in text
    assert "rules[1].inject.colour: unknown key" in text
    assert not any(p.startswith("rules[0]") for p in problems)


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ([], "(document): expected a table, got an array"),
        ({"rules": {"tool": "x"}}, "rules: expected an array of tables"),
        ({"rules": ["x"]}, "rules[0]: expected a table, got a string"),
        ({"rules": [{"turn_count": "3"}]}, "rules[0].turn_count: expected"),
        ({"rules": [{"turn_count": {"min": -1}}]}, "rules[0].turn_count.min: expected an integer"),
        ({"rules": [{"arguments": "path"}]}, "rules[0].arguments: expected a table"),
    ],
)
def test_malformed_shapes_are_refused(doc: Any, problem: str) -> None:
    assert any(p.startswith(problem) for p in refusal(doc))


def test_policy_file_problems_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('[[rules]]\narguments = { path = "re:[" }\n')
    with pytest.raises(InvalidInput) as caught:
        load_policy(path)
    assert str(path) in caught.value.message
    assert caught.value.problems[0].startswith("rules[0].arguments.path: bad regex")


def test_broken_toml_and_missing_files_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("default = \n")
    with pytest.raises(InvalidInput, match="invalid TOML"):
        load_policy(path)
    with pytest.raises(NotFound):
        load_policy(tmp_path / "missing.toml")


def test_regexes_run_in_linear_time_so_a_catastrophic_pattern_cannot_stall() -> None:
    # With a backtracking engine, ^(a+)+$ against "a"*34 + "!" takes hours.
    chosen = policy({"arguments": {"cmd": "re:^(a+)+$"}, "decision": "deny"})
    assert decision(chosen, tool_call(cmd="a" * 34 + "!")) == "allow"
    assert decision(chosen, tool_call(cmd="a" * 34)) == "deny"
    assert decision(chosen, tool_call(cmd="a" * 100_000 + "!")) == "allow"


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("re:(a)\\1", "invalid escape sequence: \\1"),
        ("re:(?=a)b", "invalid perl operator: (?="),
        ("re:(?<!a)b", "invalid perl operator: (?<!"),
        ("re:a{1001}", "invalid repetition size: {1001}"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_at_load_with_the_rules_path(
    pattern: str, reason: str
) -> None:
    problems = refusal({"rules": [{"tool": "x"}, {"arguments": {"cmd": pattern}}]})
    assert problems == [f"rules[1].arguments.cmd: bad regex {pattern[3:]!r}: {reason} (RE2 syntax)"]


@pytest.mark.parametrize(
    "text",
    [
        "default = nan\n",
        "[[rules]]\nturn_count = inf\n",
        "rules = " + "[" * 500 + "]" * 500 + "\n",
        "[[rules]]\narguments." + ".".join(["k"] * 150) + " = 1\n",
        "[[rules]]\nturn_count = " + "9" * 5000 + "\n",
    ],
)
def test_hostile_policy_files_are_refused_by_name(tmp_path: Path, text: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as caught:
        load_policy(path)
    assert caught.value.message.startswith(f"{path}: ")
