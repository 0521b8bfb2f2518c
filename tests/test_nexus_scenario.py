"""Nexus scenario files: what they may hold, and the examples that ship with belt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.dialects.nexus.scenarios import LoadedNexusScenario
from belt.engine.scenario import LoadedScenario, read_scenario
from belt.errors import InvalidInput

EXAMPLES = Path(__file__).parent.parent / "examples"
PROFILE = {
    "approval_mode": "ask",
    "lifecycle_hooks": {"stop": {"tool": "v", "timeout_ms": 100, "max_continuations": 1}},
}
USER = {"user": "hi", "model": [{"say": "ok"}]}


def load(tmp_path: Path, doc: dict[str, Any]) -> Any:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc))
    return read_scenario(path)


def problems(tmp_path: Path, doc: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidInput) as info:
        load(tmp_path, doc)
    first = info.value.message.split(": ", 1)[1]
    return [first, *info.value.problems]


def test_a_nexus_scenario_loads_with_its_profile(tmp_path: Path) -> None:
    loaded = load(tmp_path, {"dialect": "nexus", "profile": PROFILE, "turns": [USER]})
    assert isinstance(loaded, LoadedNexusScenario)
    assert loaded.profile == PROFILE
    assert loaded.scenario.turns[0].kind == "input"


def test_a_scenario_without_a_dialect_is_a_platform_scenario(tmp_path: Path) -> None:
    assert isinstance(load(tmp_path, {"turns": [USER]}), LoadedScenario)
    assert isinstance(load(tmp_path, {"dialect": "platform", "turns": [USER]}), LoadedScenario)


def test_an_unknown_dialect_is_refused(tmp_path: Path) -> None:
    assert problems(tmp_path, {"dialect": "rho", "turns": [USER]}) == [
        "dialect: 'rho' is not a dialect (expected 'platform' or 'nexus')"
    ]


def test_nexus_keys_in_a_platform_scenario_say_so(tmp_path: Path) -> None:
    doc = {
        "profile": PROFILE,
        "agent": {"context_bytes": 10},
        "turns": [USER, {"regenerate": True, "model": [{"say": "x"}]}],
    }
    where = 'only in Nexus scenarios; add dialect = "nexus" at the top of the file'
    assert problems(tmp_path, doc) == [
        f"profile: {where}",
        f"agent.context_bytes: {where}",
        f"turns[1].regenerate: {where}",
    ]


def test_platform_keys_in_a_nexus_scenario_say_so(tmp_path: Path) -> None:
    call = {"name": "render", "async": True}
    doc = {
        "dialect": "nexus",
        "agent": {"hooks": []},
        "chat": {"disable_hooks": True},
        "turns": [{"user": "x", "model": [{"say": "a", "tool_calls": [call]}, {"say": "b"}]}],
    }
    found = problems(tmp_path, doc)
    assert found[0].startswith("agent.hooks: platform hooks; a Nexus scenario declares its hooks")
    assert found[1].startswith("chat.disable_hooks: a platform chat setting")
    assert found[2].startswith("turns[0].model[0].tool_calls[0].async: async app tools")


def test_unknown_keys_are_still_errors_in_both_dialects(tmp_path: Path) -> None:
    turn = {**USER, "usr": "typo"}
    typo = "turns[0].usr: unknown key; did you mean 'user'?"
    assert problems(tmp_path, {"dialect": "nexus", "turns": [turn]}) == [typo]
    assert problems(tmp_path, {"turns": [turn]}) == [typo]


def test_profile_problems_name_their_path(tmp_path: Path) -> None:
    bad = {"lifecycle_hooks": {"stop": {"tool": "v", "timeout_ms": 300001}}}
    doc = {"dialect": "nexus", "profile": bad, "turns": [{**USER, "profile": {"x": 1}}]}
    assert problems(tmp_path, doc) == [
        "profile.lifecycle_hooks.stop.timeout_ms: 300001 must be a whole number 1 through 300000",
        "profile.lifecycle_hooks.stop.max_continuations: is required on stop (0 through 20)",
    ]
    hooks_without_mode = {"lifecycle_hooks": PROFILE["lifecycle_hooks"]}
    doc = {"dialect": "nexus", "turns": [{**USER, "profile": hooks_without_mode}]}
    assert problems(tmp_path, doc) == [
        "turns[0].profile.approval_mode: is required when the configuration declares lifecycle "
        "hooks"
    ]


@pytest.mark.parametrize(
    ("turn", "problem"),
    [
        ({"model": [{"say": "x"}]}, "turns[0]: give one of user, mail, regenerate = true"),
        ({"user": "a", "mail": "b", "model": [{"say": "x"}]}, "turns[0]: user and mail are"),
        ({"user": "a"}, "turns[0].model: at least one model round is needed"),
        ({"regenerate": True, "model": [{"say": "x"}]}, "turns[0].regenerate: there is no"),
        ({"tool_only": True}, "turns[0].tool_calls: a tool_only turn needs at least one"),
        (
            {"tool_only": True, "tool_calls": [{"name": "t"}], "model": [{"say": "x"}]},
            "turns[0].model: a tool_only turn makes no model request",
        ),
        (
            {"user": "a", "tool_calls": [{"name": "t"}], "model": [{"say": "x"}]},
            "turns[0].tool_calls: only on a tool_only turn",
        ),
        (
            {"mail": "m", "background": True, "model": [{"say": "x"}]},
            "turns[0].background: a background branch takes user",
        ),
        (
            {"mail": "m", "standalone": True, "model": [{"say": "x"}]},
            "turns[0].standalone: takes user or tool_only",
        ),
    ],
)
def test_turn_rules(tmp_path: Path, turn: dict[str, Any], problem: str) -> None:
    found = problems(tmp_path, {"dialect": "nexus", "turns": [turn]})
    assert found[0].startswith(problem)


def test_a_regeneration_needs_an_earlier_reply_not_a_background_one(tmp_path: Path) -> None:
    background = {**USER, "background": True}
    regenerate = {"regenerate": True, "model": [{"say": "x"}]}
    found = problems(tmp_path, {"dialect": "nexus", "turns": [background, regenerate]})
    assert found == ["turns[1].regenerate: there is no earlier reply to regenerate"]
    assert load(tmp_path, {"dialect": "nexus", "turns": [USER, regenerate]})


def test_a_model_round_may_follow_a_final_answer(tmp_path: Path) -> None:
    # Rounds after a final answer are what the model says when stop asks it to continue.
    turn = {"user": "x", "model": [{"say": "a"}, {"say": "b"}]}
    assert load(tmp_path, {"dialect": "nexus", "turns": [turn]})


def test_hooks_file_replaces_the_profiles_hooks(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps({"turn_start": {"tool": "c", "timeout_ms": 10}}))
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"dialect": "nexus", "profile": PROFILE, "turns": [USER]}))
    loaded = read_scenario(path, hooks_file=hooks)
    assert isinstance(loaded, LoadedNexusScenario)
    assert loaded.profile == {
        "approval_mode": "ask",
        "lifecycle_hooks": {"turn_start": {"tool": "c", "timeout_ms": 10}},
    }
    loaded = read_scenario(path, hooks_file=EXAMPLES / "nexus-profile.json")
    assert isinstance(loaded, LoadedNexusScenario)
    assert loaded.profile == json.loads((EXAMPLES / "nexus-profile.json").read_text())


def test_hooks_file_without_an_approval_mode_to_go_with_it_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"dialect": "nexus", "turns": [USER]}))
    with pytest.raises(InvalidInput) as raised:
        read_scenario(path, hooks_file=EXAMPLES / "nexus-hooks.toml")
    assert raised.value.message == (
        f"{path}: the lifecycle hooks of {EXAMPLES / 'nexus-hooks.toml'} need an approval mode: "
        f'add "approval_mode": "auto" (or "ask") to "profile" in {path}'
    )
    assert raised.value.problems == []
    assert raised.value.hint is None


def test_stored_hooks_are_read_only_when_asked_for_and_the_scenario_declares_none(
    tmp_path: Path, belt_home: Path
) -> None:
    config = belt_home / "rho" / "config.json"
    config.parent.mkdir(parents=True)
    stored = PROFILE["lifecycle_hooks"]
    config.write_text(json.dumps({"plugins": {"rho.lifecycle_hooks": {"configuration": stored}}}))
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps({"dialect": "nexus", "profile": {"approval_mode": "ask"}, "turns": [USER]})
    )
    loaded = read_scenario(path, stored_hooks=True)
    assert isinstance(loaded, LoadedNexusScenario)
    assert loaded.profile == PROFILE
    assert loaded.hooks_from == {
        "source": "rho",
        "extension": "rho.lifecycle_hooks",
        "file": str(config),
    }
    # Without stored_hooks (belt test, the pytest plugin), the scenario is all there is.
    loaded = read_scenario(path)
    assert isinstance(loaded, LoadedNexusScenario)
    assert (loaded.profile, loaded.hooks_from) == ({"approval_mode": "ask"}, None)
    # A turn's profile with lifecycle_hooks is the scenario's own declaration.
    turn = {**USER, "profile": {"lifecycle_hooks": None}}
    path.write_text(json.dumps({"dialect": "nexus", "turns": [USER, turn]}))
    loaded = read_scenario(path, stored_hooks=True)
    assert isinstance(loaded, LoadedNexusScenario)
    assert (loaded.profile, loaded.hooks_from) == (None, None)


SCENARIOS = sorted(p for p in EXAMPLES.glob("nexus-*.toml") if p.name != "nexus-hooks.toml")


def test_there_are_example_scenarios() -> None:
    assert len(SCENARIOS) >= 2


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_the_example_scenarios_load(path: Path) -> None:
    assert isinstance(read_scenario(path), LoadedNexusScenario)
