"""How `belt test` and the pytest plugin show a failure: each expectation and what happened
instead, one transcript excerpt per scenario, and no belt source."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from belt.display.render import merged_excerpt_lines
from tests.cli.runner import belt

HOOK = {"event": "agent.tool_call", "type": "webhook", "handler": "py:tests.pyhooks:deny"}
TURN = {
    "user": "clean up",
    "model": [
        {"say": "deleting", "tool_calls": [{"name": "delete_file", "arguments": {"path": "/x"}}]},
        {"say": "done"},
    ],
}


def scenario(path: Path, *expect: dict[str, Any], hooks: list[Any] | None = None) -> Path:
    doc = {"agent": {"hooks": hooks or [HOOK]}, "turns": [TURN], "expect": list(expect)}
    path.write_text(json.dumps(doc))
    return path


def test_a_scenario_with_several_failures_shows_one_transcript_excerpt(tmp_path: Path) -> None:
    path = scenario(
        tmp_path / "two.json",
        {"run_state": "failed"},
        {"tool": "delete_file", "status": "completed"},
    )
    result = belt("test", str(path))
    assert result.exit_code == 1, result.stderr
    text = result.stdout
    assert "2 of 2 expectation(s) failed" in text
    assert text.count("transcript:") == 1
    assert text.count("user       clean up") == 1
    # Both failures come first, each with what happened instead, then the one excerpt.
    first, second = text.index("expect[0]"), text.index("expect[1]")
    assert first < second < text.index("transcript:")
    assert text.count("found:") == 2


def test_an_error_from_a_routed_url_names_the_url_it_was_routed_to(tmp_path: Path) -> None:
    hook = {
        "event": "agent.tool_call",
        "type": "webhook",
        "handler": "https://hooks.example.com/guard?token=s3cret",
    }
    path = scenario(tmp_path / "routed.json", {"run_state": "failed"}, hooks=[hook])
    with socket.socket() as closed:  # bound, never listening: a connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        route = f"https://hooks.example.com=http://127.0.0.1:{port}/base"
        result = belt("test", str(path), "--route", route)
    assert result.exit_code == 1, result.stderr
    text = result.stdout
    assert "1 hook call(s) failed unnamed" in text
    routed = f"(routed by --route to http://127.0.0.1:{port}/base/guard)"
    # In the transcript row and in the list of failed calls, whole.
    assert text.count(routed) == 2, text
    assert f"hooks.example.com → 127.0.0.1:{port}" in text
    assert "s3cret" not in text


def test_excerpts_of_one_transcript_merge_in_its_order_with_a_gap_marked() -> None:
    def said(order: int) -> dict[str, Any]:
        return {
            "id": f"msg_{order}",
            "order": order,
            "role": "user",
            "content": [{"text": f"m{order}"}],
        }

    lines = merged_excerpt_lines("platform", [[said(5), said(6)], [said(0), said(1)], [said(1)]])
    assert [text for text, _ in lines] == [
        "user       m0",
        "user       m1",
        "…",
        "user       m5",
        "user       m6",
    ]
