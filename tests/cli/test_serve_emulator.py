"""`belt serve --model FILE --agents DIR`: checked before anything is served."""

from __future__ import annotations

from pathlib import Path

from tests.cli.runner import belt
from tests.cli.test_serve import serve_process
from tests.loopback import CLIENT


def test_a_bad_model_script_is_refused_before_serving(tmp_path: Path) -> None:
    model = tmp_path / "model.toml"
    model.write_text('[[rules]]\nmatch = "re:("\n[[rules.model]]\nsay = "x"\n')
    result = belt("serve", "--port", "0", "--model", str(model))
    assert result.exit_code == 5
    assert f"{model}: rules[0].match: bad regex" in result.stderr
    assert "listening" not in result.stderr


def test_a_missing_agents_directory_is_refused_before_serving(tmp_path: Path) -> None:
    result = belt("serve", "--port", "0", "--agents", str(tmp_path / "nope"))
    assert result.exit_code == 3
    assert "no such directory of agent files" in result.stderr


def test_the_banner_names_the_model_and_the_agent_routes_answer(tmp_path: Path) -> None:
    model = tmp_path / "model.toml"
    model.write_text('[[rules]]\n[[rules.model]]\nsay = "scripted"\n')
    (tmp_path / "agents").mkdir()
    args = ("--model", str(model), "--agents", str(tmp_path / "agents"), "--json")
    with serve_process(*args) as (url, output):
        body = {"chat_id": None, "agent_config": {}, "input": {"text": "hi"}}
        reply = CLIENT.post(f"{url}/agents/run", json=body)
        assert reply.status_code == 200
    assert output["code"] == "130", output["stderr"]
    assert f"model {model}" in output["stderr"]
    assert "agents " in output["stderr"]
    assert '"action":"agents/run"' in output["stdout"]
