"""Model scripts and agent files: how `belt serve` picks a reply and resolves a template ref."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.emulator.agents import agent_from_config, load_agent_files
from belt.emulator.modelscript import (
    PLAIN_LIMIT,
    ModelScript,
    compile_script,
    load_model_script,
    plain_reply,
)
from belt.errors import InvalidInput, NotFound
from belt.server.app import create_app
from tests.hookapp import hook_app
from tests.loopback import CLIENT
from tests.servers import running


def script(*rules: dict[str, object]) -> ModelScript:
    return compile_script({"rules": list(rules)}, "model.toml")


def said(found: ModelScript, text: str, agent: str = "agent") -> str | None:
    reply = found.reply(text, agent)
    return reply.model[0].say if reply.model else reply.error


def test_the_first_matching_rule_answers_else_the_plain_model() -> None:
    found = script(
        {"match": "delete *", "agent": "guarded", "model": [{"say": "guarded delete"}]},
        {"match": "delete *", "model": [{"say": "any delete"}]},
        {"match": "re:^(hi|hello)\\b", "model": [{"say": "greeting"}]},
        {"match": "exactly this", "model": [{"say": "exact"}]},
        {"agent": "re:^ops-", "model": [{"say": "ops agent"}]},
        {"match": "fail", "error": "model overloaded"},
    )
    assert said(found, "delete /tmp/x", "guarded") == "guarded delete"
    assert said(found, "delete /tmp/x", "other") == "any delete"
    assert said(found, "Delete /tmp/x", "other") == "You said: Delete /tmp/x"  # case counts
    assert said(found, "hello there") == "greeting"
    assert said(found, "hellothere") == "You said: hellothere"
    assert said(found, "exactly this") == "exact"
    assert said(found, "exactly this!") == "You said: exactly this!"
    assert said(found, "anything", "ops-bot") == "ops agent"
    assert said(found, "fail") == "model overloaded"
    assert found.reply("hello", "x").rule == 2
    assert found.reply("nothing", "x").rule is None


def test_the_plain_model_is_short_and_deterministic() -> None:
    long = "word " * 200
    (turn,) = plain_reply(long)
    assert turn.tool_calls == []
    assert turn.say is not None and turn.say.endswith("…")
    assert len(turn.say) == len("You said: ") + PLAIN_LIMIT + 1
    assert plain_reply("a\n\tb") == plain_reply("a b")


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ([{"match": "re:("}], "rules[0].match: bad regex '('"),
        ([{"agent": "re:["}], "rules[0].agent: bad regex '['"),
        ([{"match": "x"}], "rules[0]: give the model turns it answers with (model) or an error"),
        ([{"model": [{"say": "a"}, {"say": "b"}]}], "rules[0].model[1]: unreachable"),
        ([{"model": [{"sai": "a"}]}], "rules[0].model[0].sai"),
        ([{"model": [{"tool_calls": [{"name": ""}]}]}], "rules[0].model[0].tool_calls[0].name"),
    ],
)
def test_a_bad_script_names_the_rule(rules: list[object], problem: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        compile_script({"rules": rules}, "model.toml")
    everything = [caught.value.message, *caught.value.problems]
    assert any(problem in found for found in everything), everything
    assert caught.value.message.startswith("model.toml: ")


def test_a_script_file_is_toml_or_json_and_its_task_agents_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "model.toml"
    path.write_text(
        '[[rules]]\nmatch = "x"\n[[rules.model]]\nsay = "y"\n\n'
        '[agents."acme/auditor"]\n[[agents."acme/auditor".model]]\nsay = "audited"\n'
    )
    found = load_model_script(path)
    assert said(found, "x") == "y"
    assert found.agents["acme/auditor"].model[0].say == "audited"
    with pytest.raises(NotFound):
        load_model_script(tmp_path / "missing.toml")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=10))
def test_any_text_gets_a_reply(text: str, agent: str) -> None:
    found = script({"match": "re:a+b", "model": [{"say": "ab"}]}, {"match": "*?*", "error": "e"})
    reply = found.reply(text, agent)
    assert reply.model or reply.error


# -- agent files ----------------------------------------------------------------------------------


def test_agent_files_resolve_template_refs(tmp_path: Path) -> None:
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "guarded.toml").write_text(
        'context_window = 4000\nhooks_file = "../hooks.json"\n'
        '[[tools]]\nname = "delete_file"\nrequire_approval = true\n'
    )
    (tmp_path / "hooks.json").write_text(
        '{"hooks": [{"event": "agent.tool_call", "type": "gate"}]}'
    )
    (tmp_path / "helper.json").write_text('{"name": "Helper", "system_prompt": "Help."}')
    agents = load_agent_files(tmp_path)
    guarded = agents.resolve("acme/guarded@v3")
    assert guarded.name == "guarded" and guarded.spec.context_window == 4000
    assert [h.type.value for h in guarded.hooks] == ["gate"]
    assert guarded.tools["delete_file"].require_approval
    assert agents.resolve("other/helper@1").name == "Helper"
    # The system prompt an agent's review branches are asked with.
    assert agents.resolve("other/helper@1").spec.system_prompt == "Help."
    assert guarded.spec.system_prompt is None
    assert agent_from_config({"system_prompt": "Be brief."}, "x").spec.system_prompt == "Be brief."
    assert agents.resolve("acme/guarded").spec.id == guarded.spec.id
    with pytest.raises(NotFound, match="no agent acme/nope@1 in"):
        agents.resolve("acme/nope@1")
    with pytest.raises(InvalidInput, match="expected a template ref"):
        agents.resolve("acme/../x")


def test_a_bad_agent_file_is_refused_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('hooks = [{ event = "agent.nope", type = "gate" }]\n')
    (tmp_path / "worse.json").write_text('{"context_window": 0, "colour": "red"}')
    with pytest.raises(InvalidInput) as caught:
        load_agent_files(tmp_path)
    everything = " | ".join([caught.value.message, *caught.value.problems])
    assert "bad.toml" in everything and "hooks[0]" in everything
    assert "worse.json" in everything and "colour" in everything
    with pytest.raises(NotFound):
        load_agent_files(tmp_path / "missing")
    (tmp_path / "bad.toml").unlink()
    (tmp_path / "worse.json").write_text('{"registry": "registry/"}')
    with pytest.raises(InvalidInput, match="registry: an agent file does not load a registry"):
        load_agent_files(tmp_path)


def test_an_ad_hoc_agent_is_named_and_deduped_by_name() -> None:
    one = agent_from_config({"name": "x", "hooks": []}, None)
    two = agent_from_config({}, "x")
    assert one.spec.id == two.spec.id and one.name == "x"
    assert agent_from_config({}, None).name == "agent"
    with pytest.raises(InvalidInput, match="agent_name"):
        agent_from_config({}, "")


def test_a_template_agent_runs_with_its_files_hooks_and_tools(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    (agents / "acme").mkdir(parents=True)
    model = tmp_path / "model.toml"
    model.write_text(
        '[[rules]]\nagent = "guarded"\n[[rules.model]]\nsay = "on it"\n'
        'tool_calls = [{ name = "delete_file", arguments = { path = "/x" } }]\n'
        "[[rules.model]]\nsay = 'done'\n"
    )
    with hook_app() as hooks:
        (agents / "acme" / "guarded.toml").write_text(
            "hooks = [{ "
            f'event = "agent.turn_start", type = "webhook", handler = "{hooks.url}"'
            " }]\n"
            '[[tools]]\nname = "delete_file"\ntype = "client"\n'
        )
        with running(create_app(sweep_interval=0, model=model, agents=agents)) as api:
            body = {"chat_id": None, "agent": "acme/guarded@latest", "input": {"text": "go"}}
            reply = CLIENT.post(f"{api}/agents/run", json=body).json()["data"]
            chat_id = reply["assistant_message"]["chat_id"]

            def waiting() -> str | None:
                chat = CLIENT.get(f"{api}/chats/{chat_id}").json()["data"]
                calls = [i for m in chat["chat_messages"] for i in m.get("tool_invocations") or []]
                return calls[0]["id"] if calls and calls[0]["status"] == "awaiting_input" else None

            import time

            deadline = time.monotonic() + 30
            while (tool_id := waiting()) is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert tool_id is not None
            assert hooks.events() == ["agent.turn_start"]
            assert CLIENT.post(f"{api}/tools/{tool_id}", json={"result": "ok"}).status_code == 200
