"""The transcript of `belt sim run|show`: a hook row under the tool call it was for, `-v` with the
hook calls that changed nothing, and a routed handler shown as routed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.runner import belt

GUARD = """
def guard(payload):
    data = payload.get("data") or {}
    path = str((data.get("arguments") or {}).get("path", ""))
    if data.get("tool") == "delete_file" and not path.startswith("/tmp/"):
        return {"decision": "deny", "reason": "only /tmp deletions"}
    return {"decision": "allow"}
"""


def two_calls(tmp_path: Path, handler: str) -> str:
    """A turn of two tool calls, the first denied, then a second turn; a hook on tool calls and
    one on turn starts."""
    (tmp_path / "guard.py").write_text(GUARD)
    hooks = [
        {"event": "agent.tool_call", "type": "webhook", "handler": handler},
        {"event": "agent.turn_start", "type": "webhook", "handler": handler},
    ]
    calls = [
        {"name": "delete_file", "arguments": {"path": "/var/db"}, "result": "deleted"},
        {"name": "delete_file", "arguments": {"path": "/tmp/old"}, "result": "gone"},
    ]
    turn = {"user": "clean up", "model": [{"say": "two calls", "tool_calls": calls}, {"say": "ok"}]}
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"agent": {"name": "t", "hooks": hooks}, "turns": [turn]}))
    return str(path)


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_a_hook_row_sits_under_the_tool_call_it_was_for(tmp_path: Path) -> None:
    result = belt("sim", "run", two_calls(tmp_path, f"py:{tmp_path / 'guard.py'}:guard"))
    assert result.exit_code == 0, result.stderr
    lines = lines_of(result.stdout)
    first = next(i for i, line in enumerate(lines) if '"/var/db"' in line)
    assert lines[first].startswith("tool")
    assert lines[first + 1].startswith("hook   agent.tool_call"), lines
    assert "→ deny (only /tmp deletions)" in lines[first + 1]
    assert '"/tmp/old"' in lines[first + 2]
    # Without -v, a call that changed nothing leaves no line.
    assert "nothing changed" not in result.stdout


def test_verbose_shows_the_calls_that_changed_nothing_where_they_happened(tmp_path: Path) -> None:
    ran = belt("sim", "run", two_calls(tmp_path, f"py:{tmp_path / 'guard.py'}:guard"), "--json")
    assert ran.exit_code == 0, ran.stderr
    run_id = ran.json()["runs"][0]["id"]
    plain = belt("sim", "show", run_id)
    verbose = belt("-v", "sim", "show", run_id)
    assert verbose.exit_code == 0, verbose.stderr
    # The command's own -v says the same.
    assert belt("sim", "show", run_id, "-v").stdout == verbose.stdout
    assert "nothing changed" not in plain.stdout
    lines = lines_of(verbose.stdout)
    quiet = [i for i, line in enumerate(lines) if "nothing changed" in line]
    # Two turn starts and the allowed tool call: three calls that changed nothing.
    assert len(quiet) == 3, lines
    user = next(i for i, line in enumerate(lines) if line.startswith("user"))
    assert "agent.turn_start" in lines[user + 1] and user + 1 in quiet
    allowed = next(i for i, line in enumerate(lines) if '"/tmp/old"' in line)
    assert "agent.tool_call" in lines[allowed + 1] and allowed + 1 in quiet
    second_start = next(i for i in quiet if i > allowed + 1)
    assert "agent.turn_start" in lines[second_start]
    assert lines[second_start + 1].startswith("assistant  ok")


def test_a_routed_handler_is_shown_as_routed(tmp_path: Path) -> None:
    path = two_calls(tmp_path, "https://hooks.example.com/guard")
    route = f"https://hooks.example.com=py:{tmp_path / 'guard.py'}:guard"
    result = belt("sim", "run", path, "--route", route)
    assert result.exit_code == 0, result.stderr
    row = next(line for line in lines_of(result.stdout) if "→ deny" in line)
    assert f"hooks.example.com → py:{tmp_path / 'guard.py'}:guard → deny" in row


def test_the_learning_example_says_which_entries_it_loaded_into_which_registry() -> None:
    example = str(Path(__file__).parent.parent.parent / "examples" / "learning-agent.toml")
    files = sorted((Path(example).parent / "registry").glob("*.toml"))
    first = belt("sim", "run", example)
    assert first.exit_code == 0, first.stderr
    lines = lines_of(first.stdout)
    heading = f"── registry local: {len(files)} entries loaded from "
    assert lines[0].startswith(heading) and lines[0].endswith(f"({len(files)} created)")
    created = [line for line in lines if line.startswith("created")]
    assert len(created) == len(files)
    assert any("Old temp files are safe to remove  (concept, re_" in line for line in created)
    again = belt("sim", "run", example, "--json")
    assert again.exit_code == 0, again.stderr
    registry = again.json()["simulation"]["registry"]
    assert registry["owner"] == "local"
    assert {entry["action"] for entry in registry["entries"]} == {"skipped"}
    assert len(registry["entries"]) == len(files)
    shown = lines_of(belt("sim", "show", again.json()["runs"][0]["id"]).stdout)
    assert shown[0].endswith(f"({len(files)} unchanged)")
    assert not any(line.startswith("created") for line in shown)
