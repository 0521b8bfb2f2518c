"""The closing summary of a run's hook calls lists the first failed and warned calls only."""

from __future__ import annotations

from belt.engine.hooksummary import FAILURES_SHOWN, hook_summary


def test_a_summary_counts_every_failure_and_lists_the_first_ones() -> None:
    failed = [
        {
            "handler_type": "webhook",
            "handler": "h",
            "hook_event": "agent.turn_start",
            "error": f"request to h failed: {n}",
            "decision": "allow",
            "run_id": "r",
        }
        for n in range(FAILURES_SHOWN + 10)
    ]
    warned = [
        {
            "handler_type": "webhook",
            "handler": "h",
            "hook_event": "agent.turn_start",
            "warnings": ["unknown key 'x'", "unknown key 'y'"],
            "run_id": "r",
        }
        for _ in range(FAILURES_SHOWN)
    ]
    summary = hook_summary(failed + warned)
    assert summary["calls"] == 2 * FAILURES_SHOWN + 10
    assert summary["failed"] == summary["counted_allow"] == FAILURES_SHOWN + 10
    assert [f["error"] for f in summary["failures"]] == [
        f"request to h failed: {n}" for n in range(FAILURES_SHOWN)
    ]
    assert summary["warned"] == 2 * FAILURES_SHOWN
    assert len(summary["warnings"]) == FAILURES_SHOWN
    assert summary["handlers"][0]["first_error"] == "request to h failed: 0"
