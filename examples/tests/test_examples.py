"""Tests of the example policy and handler, written with belt's pytest plugin.

`belt_scenario` runs a scenario in a fresh store and answers questions about it;
`belt_serve` starts `belt serve` on a free port. Nothing here touches belt's state directory.
Run them with `pytest examples/tests`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).parent.parent
GUARDED = EXAMPLES / "guarded-agent.toml"
DEMO_URL = "http://127.0.0.1:8787"
"""Where guarded-agent.toml expects `belt serve`; the tests route it to their own server."""


def test_the_policy_denies_deleting_the_database(belt_serve: Any, belt_scenario: Any) -> None:
    served = belt_serve(policy=EXAMPLES / "policy.toml")
    run = belt_scenario(GUARDED, routes={DEMO_URL: served.url})

    assert run.tool_status("delete_file", path="/var/lib/app/production.db") == "failed"
    assert run.decisions("agent.tool_call", tool="delete_file") == ["deny", "allow", "suspend"]
    # What the policy allows still waits at the gate for a person.
    assert run.state == "input_required"
    assert run.tool_calls("delete_file", path="/tmp/*")[0]["gated"] is True
    assert [i["source"] for i in run.interrupts] == ["hook:agent.tool_call"]


def test_the_policy_reminds_the_model_before_each_turn(belt_serve: Any, belt_scenario: Any) -> None:
    served = belt_serve(policy=EXAMPLES / "policy.toml")
    run = belt_scenario(GUARDED, routes={DEMO_URL: served.url})

    reminder = "Reminder: only files under /tmp/ may be deleted."
    assert run.injections_by_turn() == {1: [reminder], 2: [reminder]}
    # Every hook request reached the policy server, and its journal kept each answer.
    events = [record["event"] for record in served.journal()]
    assert events == ["agent.turn_start", "agent.tool_call", "agent.turn_start", "agent.tool_call"]


def test_the_handler_answers_like_the_policy(belt_serve: Any, belt_scenario: Any) -> None:
    served = belt_serve(handler=f"{EXAMPLES / 'handler.py'}:decide")
    scenario: dict[str, Any] = {
        "agent": {
            "hooks": [
                {"event": "agent.tool_call", "type": "webhook", "handler": served.hooks_url},
                {"event": "agent.turn_start", "type": "webhook", "handler": served.hooks_url},
            ]
        },
        "turns": [
            {
                "user": "Tidy up",
                "model": [
                    {
                        "tool_calls": [
                            {"name": "delete_file", "arguments": {"path": "/etc/passwd"}},
                            {"name": "delete_file", "arguments": {"path": "/tmp/a.txt"}},
                        ]
                    },
                    {"say": "Done."},
                ],
            }
        ],
    }
    run = belt_scenario(scenario)

    run.expect(tool="delete_file", arguments={"path": "/etc/*"}, status="failed", decision="deny")
    run.expect(tool="delete_file", arguments={"path": "/tmp/*"}, status="completed")
    assert run.injections(1) == ["Reminder: only delete files in /tmp."]
    assert run.state == "completed"


def test_a_python_hook_needs_no_server(belt_scenario: Any) -> None:
    seen: list[str] = []

    def audit(payload: dict[str, Any]) -> dict[str, Any] | None:
        seen.append(payload["event"])
        if payload["data"]["tool"] == "send_email":
            return {"decision": "deny", "reason": "no email from tests"}
        return None

    run = belt_scenario(
        {
            "agent": {"hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": audit}]},
            "turns": [
                {
                    "user": "Tell the team",
                    "model": [
                        {"tool_calls": [{"name": "send_email", "arguments": {"to": "team"}}]},
                        {"say": "I could not send it."},
                    ],
                }
            ],
        }
    )

    assert seen == ["agent.tool_call"]
    assert run.tool_status("send_email") == "failed"
    assert run.rows(type="hook", decision="deny")[0]["handler"].startswith("py:")


def test_the_guarded_scenario_holds_its_expectations(belt_scenario: Any) -> None:
    # A scenario file with [[expect]] tables is checked by the fixture as by `belt test`. A
    # relative path is read from this file's directory, as the scenario's own py:hooks.py is
    # read from the scenario's, so the test passes from any directory.
    run = belt_scenario("guarded.toml")
    assert run.fired("agent.tool_call") == 2


def test_a_scenario_on_a_virtual_clock_has_the_same_record_each_run(belt_scenario: Any) -> None:
    # run.snapshot is the record as `belt test --snapshot` stores it: ids as <run:1>, <int:1>,
    # no durations, and (on a virtual clock) the same timestamps each run, so two runs of one
    # scenario give the same text. run.assert_snapshot() compares it with a stored file.
    expiry = "expiry.toml"
    first = belt_scenario(expiry).snapshot
    assert belt_scenario(expiry).snapshot == first
    assert '"expires_at": "2026-08-11T14:10:00.000Z"' in first
