"""A third dialect, made up in tests/relay_dialect.py, runs through `belt sim run`, `belt test`
and `belt hooks validate`: installed as a package is (an entry point of the ``belt.dialects``
group), or registered in-process with ``belt.dialects.register``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from belt import dialects
from belt.cli import app
from belt.errors import InvalidInput
from tests import relay_dialect

HERE = Path(__file__).parent

HOOKS = """
def start(payload):
    if payload["user"] == "quiet please":
        return {"decision": "skip"}
    return None


def end(payload):
    return {"decision": "shout"}
"""

SCENARIO = """
dialect = "relay"

[hooks]
"turn.start" = "relay_hooks.py:start"
"turn.end" = "relay_hooks.py:end"

[[turns]]
user = "hello"
reply = "hi there"

[[turns]]
user = "quiet please"
reply = "never said"
"""

EXPECT = """
[[expect]]
event = "turn.start"
decision = "skip"
count = 1

[[expect]]
event = "turn.end"
fired = 1

[[expect]]
event = "turn.end"
error = "re:shout"
"""


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A directory holding the relay dialect as pip installs a package: the module, and its
    dist-info with the ``belt.dialects`` entry point."""
    site = tmp_path / "site"
    info = site / "relay_dialect-0.1.dist-info"
    info.mkdir(parents=True)
    shutil.copy(HERE / "relay_dialect.py", site / "relay_dialect.py")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: relay-dialect\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[belt.dialects]\nrelay = relay_dialect:DIALECT\n")
    return site


def belt(*args: str, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "BELT_HOME": str(cwd / "home")}
    env |= {"NO_COLOR": "1", "COLUMNS": "120"}
    command = [sys.executable, "-m", "belt", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def write_scenario(directory: Path, text: str = SCENARIO) -> Path:
    (directory / "relay_hooks.py").write_text(HOOKS)
    path = directory / "relay.toml"
    path.write_text(text)
    return path


def test_belt_sim_run_drives_an_installed_dialect(tmp_path: Path, installed: Path) -> None:
    write_scenario(tmp_path)
    proc = belt("sim", "run", "relay.toml", "--json", site=installed, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["simulation"]["dialect"] == "relay"
    said = [(m["role"], m["content"][0]["text"]) for m in report["chat"]["chat_messages"]]
    assert said == [("user", "hello"), ("assistant", "hi there"), ("user", "quiet please")]
    calls = [(c["event"], c["decision"], bool(c["error"])) for c in report["relay_calls"]]
    assert calls == [
        ("turn.start", None, False),
        ("turn.end", None, True),
        ("turn.start", "skip", False),
    ]

    shown = belt("sim", "run", "relay.toml", site=installed, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "assistant: hi there" in shown.stdout
    assert "hook turn.start → relay_hooks.py:start: skip" in shown.stdout


def test_belt_test_checks_expectations_in_the_dialects_terms(
    tmp_path: Path, installed: Path
) -> None:
    write_scenario(tmp_path, SCENARIO + EXPECT)
    proc = belt("test", "relay.toml", site=installed, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout

    # An expectation the run does not meet fails, and one outside the dialect's terms is refused.
    write_scenario(tmp_path, SCENARIO + EXPECT.replace("count = 1\n", "count = 2\n", 1))
    failed = belt("test", "relay.toml", site=installed, cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "turn.start" in failed.stdout and "1 failed" in failed.stdout
    write_scenario(tmp_path, SCENARIO + EXPECT.replace('decision = "skip"', 'decision = "allow"'))
    refused = belt("test", "relay.toml", site=installed, cwd=tmp_path)
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "'allow' is not one of skip" in refused.stdout + refused.stderr


def test_belt_hooks_validate_reads_the_dialects_scenario(tmp_path: Path, installed: Path) -> None:
    write_scenario(tmp_path)
    proc = belt("hooks", "validate", "relay.toml", site=installed, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ok  relay.toml (relay scenario, 2 hook(s))" in proc.stdout

    write_scenario(tmp_path, SCENARIO.replace('"turn.end" =', '"turn.over" ='))
    bad = belt("hooks", "validate", "relay.toml", site=installed, cwd=tmp_path)
    assert bad.returncode == 5, bad.stderr
    assert "hooks.turn.over: not a relay event (one of turn.start, turn.end)" in bad.stderr


def test_a_dialect_nobody_installed_is_refused_by_name(tmp_path: Path, installed: Path) -> None:
    write_scenario(tmp_path, SCENARIO.replace('"relay"', '"telex"'))
    proc = belt("sim", "run", "relay.toml", site=installed, cwd=tmp_path)
    assert proc.returncode == 5
    assert "dialect: 'telex' is not a dialect (expected 'platform' or 'nexus')" in proc.stderr


@pytest.fixture
def registered() -> Iterator[None]:
    """The relay dialect registered in this process, as a program embedding belt does."""
    dialects.register(relay_dialect.DIALECT)
    yield
    dialects.forget(relay_dialect.DIALECT.name)


def test_register_makes_a_dialect_known_in_process(tmp_path: Path, registered: None) -> None:
    path = write_scenario(tmp_path, SCENARIO + EXPECT)
    assert "relay" in dialects.names()
    result = CliRunner().invoke(app, ["hooks", "validate", str(path)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["sim", "run", str(path), "--ephemeral"])
    assert result.exit_code == 0, result.output
    assert "user: quiet please" in result.output


def test_a_built_in_name_cannot_be_registered_again() -> None:
    class Impostor:
        name = "nexus"

    with pytest.raises(InvalidInput, match="'nexus': the name of a built-in dialect"):
        dialects.register(Impostor())  # type: ignore[arg-type]


def test_the_registry_knows_the_built_in_dialects_and_their_events() -> None:
    assert dialects.names()[:2] == ("platform", "nexus")
    assert dialects.known("nexus") and not dialects.known("telex")
    with pytest.raises(KeyError):
        dialects.get("telex")
    assert dialects.speaking("stop").name == "nexus"
    assert dialects.speaking("agent.tool_call").name == "platform"
    assert dialects.of({}).name == "platform"  # a record that names no dialect
