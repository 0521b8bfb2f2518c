"""The Nexus dialect's execution loop, one test (or more) per sentence of the spec.

Hook tools are real Python functions served by a real worker through the store's inbox.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from belt.dialects.nexus import execution_loop as nexus
from belt.dialects.nexus.scenarios import LoadedNexusScenario
from belt.display.render import transcript_lines
from belt.engine.entrypoints import (
    resume_run,
    resume_simulation,
    show_run,
    start_simulation,
    stop_run,
)
from belt.engine.readback import build_report
from belt.engine.scenario import read_scenario
from belt.engine.simulation import Options
from belt.errors import Conflict
from belt.executor.targets import Target
from belt.executor.worker import Worker
from belt.records.hooktasks import PENDING_TAG
from belt.store import open_store

DATA = Path(__file__).parent / "data" / "nexus"
SPEC_HOOKS = json.loads((DATA / "lifecycle-hooks.json").read_text())
ACK = {"structured_content": {"continue": False}}
FEEDBACK = "Run the pending verification before finishing."


def cont(feedback: str = FEEDBACK) -> dict[str, Any]:
    return {"structured_content": {"continue": True, "feedback": feedback}}


class Tool:
    """An executor tool: answers in order (the last answer repeats) and records its inputs."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers) or [ACK]
        self.inputs: list[dict[str, Any]] = []

    def __call__(self, task_input: dict[str, Any]) -> Any:
        self.inputs.append(task_input)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(task_input)
        return answer

    def events(self) -> list[str]:
        return [i["event"] for i in self.inputs]


def hook(tool: str = "check", timeout_ms: int = 5000, **extra: Any) -> dict[str, Any]:
    return {"tool": tool, "timeout_ms": timeout_ms, **extra}


def stop_hook(tool: str = "verify", max_continuations: int = 2, **extra: Any) -> dict[str, Any]:
    return hook(tool, max_continuations=max_continuations, **extra)


def profile(**hooks: Any) -> dict[str, Any]:
    return {"approval_mode": "auto", "lifecycle_hooks": hooks}


def write(tmp_path: Path, doc: dict[str, Any], name: str = "scenario.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"dialect": "nexus", **doc}))
    return path


def simulate(
    tmp_path: Path, doc: dict[str, Any], **tools: Callable[[dict[str, Any]], Any]
) -> tuple[dict[str, Any], list[str]]:
    """Run a Nexus scenario with these tools served in-process; return the report and runs."""
    loaded = read_scenario(write(tmp_path, doc))
    assert isinstance(loaded, LoadedNexusScenario)
    store = open_store()
    sim, executed = start_simulation(store, loaded, Options(worker=worker(tools)))
    return build_report(store, sim), executed


def worker(tools: dict[str, Callable[[dict[str, Any]], Any]]) -> Worker:
    targets = {name: Target(name, "py", name, func) for name, func in tools.items()}
    return Worker(open_store(), targets)


def resume(run_id: str, **tools: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    store = open_store()
    sim, _ = resume_simulation(store, run_id, Options(worker=worker(tools)))
    return build_report(store, sim)


def say(*texts: str) -> list[dict[str, Any]]:
    return [{"say": text} for text in texts]


def tasks(report: dict[str, Any], event: str | None = None) -> list[dict[str, Any]]:
    return [t for t in report["hook_tasks"] if event is None or t["event"] == event]


def messages(report: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [m for m in report["chat"]["chat_messages"] if m["role"] == role]


def texts(report: dict[str, Any], role: str) -> list[str]:
    return [" ".join(c["text"] for c in m["content"]) for m in messages(report, role)]


def only_run(report: dict[str, Any]) -> dict[str, Any]:
    (run,) = report["runs"]
    return run


# -- Declare ----------------------------------------------------------------------------------


def test_the_spec_declaration_runs_its_hooks_at_their_boundaries(tmp_path: Path) -> None:
    check = Tool()
    doc = {
        "profile": {"approval_mode": "auto", "lifecycle_hooks": SPEC_HOOKS},
        "agent": {"context_window": 100, "compact_at": 0.5},
        "turns": [
            {"user": "first", "model": [{"say": "a", "tokens": 60}]},
            {"user": "second", "model": [{"say": "b", "tokens": 5}]},
        ],
    }
    report, executed = simulate(tmp_path, doc, execution_check=check)
    assert [r["state"] for r in report["runs"]] == ["completed", "completed"]
    assert check.events() == [
        "turn_start",
        "stop",
        "pre_compact",
        "post_compact",
        "turn_start",
        "stop",
    ]
    assert [t["tool"] for t in tasks(report)] == ["execution_check"] * 6
    assert len(executed) == 2


@pytest.mark.parametrize("hooks", [None, {}])
def test_null_or_empty_hooks_enable_none(tmp_path: Path, hooks: Any) -> None:
    doc = {"profile": {"lifecycle_hooks": hooks}, "turns": [{"user": "hi", "model": say("hello")}]}
    report, executed = simulate(tmp_path, doc)
    assert report["hook_tasks"] == []
    assert executed == []
    assert texts(report, "assistant") == ["hello"]


def test_omitted_events_run_no_task(tmp_path: Path) -> None:
    verify = Tool()
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "hi", "model": say("ok")}]}
    report, _ = simulate(tmp_path, doc, verify=verify)
    assert verify.events() == ["stop"]


def test_the_hook_tool_need_not_be_visible_to_the_model(tmp_path: Path) -> None:
    verify = Tool()
    read = {"name": "read_file", "arguments": {"path": "a"}, "result": "text"}
    doc = {
        "profile": profile(stop=stop_hook()),
        "turns": [
            {"user": "go", "model": [{"say": "reading", "tool_calls": [read]}, {"say": "ok"}]}
        ],
    }
    report, _ = simulate(tmp_path, doc, verify=verify)
    calls = [
        i["function"]["name"] for m in messages(report, "assistant") for i in m["tool_invocations"]
    ]
    assert calls == ["read_file"]
    assert verify.events() == ["stop"]
    assert only_run(report)["state"] == "completed"


def test_hooks_make_an_ordinary_reply_without_tools_run_backed(tmp_path: Path) -> None:
    turns = [{"user": "hi", "model": say("hello")}]
    plain, plain_runs = simulate(tmp_path, {"profile": profile(), "turns": turns})
    assert plain_runs == [] and plain["runs"] == []
    (reply,) = messages(plain, "assistant")
    assert reply["agent_run_id"] is None
    assert plain["executions"][0]["run_backed"] is False

    hooked, hooked_runs = simulate(
        tmp_path, {"profile": profile(stop=stop_hook()), "turns": turns}, verify=Tool()
    )
    (run_id,) = hooked_runs
    (reply,) = messages(hooked, "assistant")
    assert reply["agent_run_id"] == run_id


def test_a_reply_with_tools_is_run_backed_without_hooks(tmp_path: Path) -> None:
    call = {"name": "read_file", "result": "x"}
    doc = {"turns": [{"user": "go", "model": [{"say": "r", "tool_calls": [call]}, {"say": "ok"}]}]}
    report, executed = simulate(tmp_path, {"profile": {}, **doc})
    assert len(executed) == 1
    assert only_run(report)["hooks"] == {}


def test_the_approval_mode_is_frozen_with_the_hooks_and_on_every_task(tmp_path: Path) -> None:
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "hi", "model": say("ok")}]}
    report, _ = simulate(tmp_path, doc, verify=Tool())
    assert only_run(report)["approval_mode"] == "auto"
    assert tasks(report)[0]["approval_mode"] == "auto"


# -- Frozen selection -------------------------------------------------------------------------


def test_regeneration_reuses_the_runs_hooks_after_the_profile_changed(tmp_path: Path) -> None:
    v1, v2 = Tool(), Tool()
    changed = profile(turn_start=hook("v2"), stop=stop_hook("v2"))
    doc = {
        "profile": profile(turn_start=hook("v1"), stop=stop_hook("v1")),
        "turns": [
            {"user": "write it", "model": say("draft one")},
            {"regenerate": True, "profile": changed, "model": say("draft two")},
            {"user": "again", "model": say("three")},
        ],
    }
    report, executed = simulate(tmp_path, doc, v1=v1, v2=v2)
    first, regenerated, fresh = report["runs"]
    assert regenerated["kind"] == "regeneration"
    assert regenerated["regenerates"] == first["id"]
    assert regenerated["hooks"] == first["hooks"]
    assert regenerated["profile"]["reused_from"] == first["id"]
    assert fresh["hooks"]["stop"]["tool"] == "v2"
    assert fresh["profile"] == {"source": "scenario", "revision": 2}
    assert v1.events() == ["turn_start", "stop", "turn_start", "stop"]
    assert v2.events() == ["turn_start", "stop"]
    # The regenerated reply leaves the context; the user message is not repeated.
    assert texts(report, "user") == ["write it", "again"]
    replaced = [m for m in messages(report, "assistant") if "replaced_by" in m["sim"]]
    assert [m["sim"]["replaced_by"] for m in replaced] == [1]


def test_a_new_input_captures_the_stored_profile_when_it_starts(tmp_path: Path) -> None:
    from belt.records.profile import write_profile

    store = open_store()
    write_profile(store, profile(stop=stop_hook("old")))
    doc = {"turns": [{"user": "hi", "model": say("ok")}, {"user": "more", "model": say("ok")}]}
    # The hold comes from a failing tool, not a timeout, so that the retry below never races a
    # short deadline on a slow machine.
    report, (run_id,) = simulate(tmp_path, doc, old=Tool(RuntimeError("not yet")))
    run = only_run(report)
    assert run["state"] == "attention_hold"
    assert run["profile"] == {"source": "store", "revision": 1}
    # The profile changes while the execution is held: its retry keeps the frozen hooks, and the
    # next input captures the new profile.
    write_profile(store, profile(stop=stop_hook("new")))
    old, new = Tool(), Tool()
    report = resume(run_id, old=old, new=new)
    assert [r["state"] for r in report["runs"]] == ["completed", "completed"]
    assert old.events() == ["stop"]
    assert new.events() == ["stop"]
    assert report["runs"][1]["profile"] == {"source": "store", "revision": 2}


# -- Boundaries -------------------------------------------------------------------------------


def test_turn_start_runs_once_before_the_first_foreground_request(tmp_path: Path) -> None:
    check, verify = Tool(), Tool(cont(), ACK)
    call = {"name": "read_file", "result": "x"}
    doc = {
        "profile": profile(turn_start=hook("check"), stop=stop_hook()),
        "turns": [
            {
                "user": "go",
                "model": [{"say": "r", "tool_calls": [call]}, {"say": "a"}, {"say": "b"}],
            }
        ],
    }
    report, _ = simulate(tmp_path, doc, check=check, verify=verify)
    assert check.events() == ["turn_start"]
    order = [m["role"] for m in report["chat"]["chat_messages"] if m["role"] != "tool"]
    assert order[:3] == ["user", "event", "assistant"]
    assert only_run(report)["execution"]["requests"] == 3


def test_turn_start_runs_for_regeneration_and_for_an_automatic_mail_reply(tmp_path: Path) -> None:
    check = Tool()
    doc = {
        "profile": profile(turn_start=hook()),
        "turns": [
            {"mail": "Invoice 42 is overdue.", "model": say("Paid.")},
            {"regenerate": True, "model": say("Paid today.")},
        ],
    }
    report, _ = simulate(tmp_path, doc, check=check)
    assert [r["kind"] for r in report["runs"]] == ["mail", "regeneration"]
    assert check.events() == ["turn_start", "turn_start"]
    assert messages(report, "user")[0]["sim"]["input"] == "mail"
    assert "mail       Invoice 42 is overdue." in [line for line, _ in transcript_lines(report)]


def test_creating_an_empty_conversation_invokes_no_hook(tmp_path: Path) -> None:
    check = Tool()
    doc = {"profile": profile(turn_start=hook(), stop=stop_hook("check")), "turns": []}
    report, executed = simulate(tmp_path, doc, check=check)
    assert report["chat"]["id"]
    assert report["chat"]["chat_messages"] == []
    assert executed == [] and check.inputs == []
    assert report["simulation"]["status"] == "finished"


def test_background_branches_do_not_trigger_turn_start(tmp_path: Path) -> None:
    check, verify = Tool(), Tool()
    doc = {
        "profile": profile(turn_start=hook(), stop=stop_hook()),
        "turns": [
            {"user": "summarise the inbox", "background": True, "model": say("3 new mails")},
            {"user": "hi", "model": say("hello")},
        ],
    }
    report, _ = simulate(tmp_path, doc, check=check, verify=verify)
    background, foreground = report["runs"]
    assert background["kind"] == "background"
    assert [t["run_id"] for t in tasks(report, "turn_start")] == [foreground["id"]]
    assert verify.events() == ["stop", "stop"]


def write_ok(size: int) -> dict[str, Any]:
    return {"name": "fetch", "result": "x" * size}


def test_a_mid_turn_compaction_by_bytes_runs_pre_and_post_compact(tmp_path: Path) -> None:
    check = Tool()
    doc = {
        "profile": profile(pre_compact=hook(), post_compact=hook()),
        "agent": {"context_bytes": 1000, "compact_at": 0.5},
        "turns": [
            {
                "user": "fetch it",
                "model": [{"say": "fetching", "tool_calls": [write_ok(800)]}, {"say": "done"}],
            }
        ],
    }
    report, _ = simulate(tmp_path, doc, check=check)
    assert check.events() == ["pre_compact", "post_compact"]
    pre, post = check.inputs
    assert pre["compaction_trigger"] == "byte_limit"
    context = len("fetch it") + len("fetching") + 800
    assert pre["overshoot_bytes"] == context - 500
    assert "overshoot_tokens" not in pre
    assert "compaction_trigger" not in post
    roles = [m["role"] for m in report["chat"]["chat_messages"]]
    marker = roles.index("compaction")
    rows = [i for i, r in enumerate(roles) if r == "event"]
    assert rows[0] < marker < rows[1] < roles.index("assistant", marker)
    assert only_run(report)["execution"]["compactions"] == 1


def test_a_token_limit_adds_overshoot_tokens(tmp_path: Path) -> None:
    check = Tool()
    doc = {
        "profile": profile(pre_compact=hook()),
        "agent": {"context_window": 100, "compact_at": 0.5},
        "turns": [
            {
                "user": "go",
                "model": [{"say": "s", "tokens": 70, "tool_calls": [write_ok(4)]}, {"say": "ok"}],
            }
        ],
    }
    simulate(tmp_path, doc, check=check)
    (pre,) = check.inputs
    assert pre["compaction_trigger"] == "token_limit"
    assert pre["overshoot_tokens"] == 1 + 70 + 1 - 50
    assert pre["overshoot_bytes"] == 0


def test_a_compaction_before_the_first_request_is_not_mid_turn(tmp_path: Path) -> None:
    check = Tool()
    doc = {
        "profile": profile(pre_compact=hook(), turn_start=hook()),
        "agent": {"context_window": 100, "compact_at": 0.5},
        "turns": [
            {"user": "one", "model": [{"say": "a", "tokens": 60}]},
            {"user": "two", "model": say("b")},
        ],
    }
    simulate(tmp_path, doc, check=check)
    assert check.events() == ["turn_start", "pre_compact", "turn_start"]
    pre = check.inputs[1]
    assert set(pre) == {"event", "task_key", "run_public_id", "conversation_public_id"}


def test_compaction_hooks_follow_compactions_not_size_checks(tmp_path: Path) -> None:
    check = Tool()
    # The input alone is over the limit: every check finds the context too big, but there is
    # nothing to retire, so no compaction happens and no hook runs.
    doc = {
        "profile": profile(pre_compact=hook(), post_compact=hook()),
        "agent": {"context_bytes": 10, "compact_at": 1},
        "turns": [{"user": "a long request over the limit", "model": say("ok")}],
    }
    report, _ = simulate(tmp_path, doc, check=check)
    assert check.inputs == []
    assert messages(report, "compaction") == []


def test_stop_gets_a_bounded_preview_and_the_size_of_the_answer(tmp_path: Path) -> None:
    verify = Tool()
    answer = "é" * 3000
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "go", "model": say(answer)}]}
    simulate(tmp_path, doc, verify=verify)
    (stop,) = verify.inputs
    assert stop["output_size_bytes"] == 6000
    assert len(stop["output_preview"].encode()) == nexus.OUTPUT_PREVIEW_MAX_BYTES
    assert answer.startswith(stop["output_preview"])


def test_a_failed_request_never_reaches_stop(tmp_path: Path) -> None:
    verify = Tool()
    doc = {
        "profile": profile(stop=stop_hook()),
        "turns": [{"user": "go", "error": "model overloaded"}],
    }
    report, _ = simulate(tmp_path, doc, verify=verify)
    run = only_run(report)
    assert (run["state"], run["error"]) == ("failed", "model overloaded")
    assert verify.inputs == []


# -- Handle the task --------------------------------------------------------------------------


def test_task_input_carries_the_event_key_run_and_conversation(tmp_path: Path) -> None:
    check = Tool()
    doc = {"profile": profile(turn_start=hook()), "turns": [{"user": "hi", "model": say("ok")}]}
    report, (run_id,) = simulate(tmp_path, doc, check=check)
    (task_input,) = check.inputs
    assert task_input == {
        "event": "turn_start",
        "task_key": f"{run_id}:turn_start:turn",
        "run_public_id": run_id,
        "conversation_public_id": report["chat"]["id"],
    }


def test_a_standalone_execution_has_no_conversation(tmp_path: Path) -> None:
    check = Tool()
    doc = {
        "profile": profile(turn_start=hook(), stop=stop_hook("check")),
        "turns": [{"user": "nightly report", "standalone": True, "model": say("done")}],
    }
    report, _ = simulate(tmp_path, doc, check=check)
    assert [i["conversation_public_id"] for i in check.inputs] == [None, None]
    assert "conversation_public_id" in check.inputs[0]
    assert only_run(report)["conversation_id"] is None


def test_acknowledging_stop_delivers_the_answer(tmp_path: Path) -> None:
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "hi", "model": say("ok")}]}
    report, _ = simulate(tmp_path, doc, verify=Tool(ACK))
    (answer,) = messages(report, "assistant")
    assert answer["sim"]["stop"] == "accepted"
    assert only_run(report)["state"] == "completed"
    assert tasks(report)[0]["decision"] == {"continue": False}


def test_a_model_tool_returning_a_decision_has_no_lifecycle_meaning(tmp_path: Path) -> None:
    decision = json.dumps(cont()["structured_content"])
    call = {"name": "execution_check", "result": decision}
    doc = {
        "profile": profile(stop=stop_hook()),
        "turns": [{"user": "go", "model": [{"say": "c", "tool_calls": [call]}, {"say": "ok"}]}],
    }
    report, _ = simulate(tmp_path, doc, verify=Tool())
    assert messages(report, "feedback") == []
    assert len(tasks(report, "stop")) == 1
    assert only_run(report)["state"] == "completed"


# -- Stop continuation ------------------------------------------------------------------------


def test_stop_continues_twice_under_max_two_then_accepts(tmp_path: Path) -> None:
    verify = Tool(cont("Run the tests."), cont("Now the linter."), ACK)
    doc = {
        "profile": profile(stop=stop_hook(max_continuations=2)),
        "turns": [{"user": "fix it", "model": say("Fixed.", "Tests pass.")}],
    }
    report, executed = simulate(tmp_path, doc, verify=verify)
    run = only_run(report)
    assert run["state"] == "completed"
    assert executed == [run["id"]]
    assert run["execution"]["continuations"] == 2
    assert texts(report, "assistant") == ["Fixed.", "Tests pass.", "Tests pass."]
    assert texts(report, "feedback") == ["Run the tests.", "Now the linter."]
    assert [m["sim"]["stop"] for m in messages(report, "assistant")] == [
        "continued",
        "continued",
        "accepted",
    ]
    assert messages(report, "assistant")[2]["sim"]["repeated"] is True
    assert {m["agent_run_id"] for m in report["chat"]["chat_messages"]} == {run["id"]}
    keys = [t["task_key"] for t in tasks(report, "stop")]
    assert keys == [f"{run['id']}:stop:answer-{n}" for n in (1, 2, 3)]
    # The next candidate answer passes through stop again, with its own preview.
    assert [i["output_preview"] for i in verify.inputs] == ["Fixed.", "Tests pass.", "Tests pass."]


def test_a_third_continuation_under_max_two_holds_the_execution(tmp_path: Path) -> None:
    verify = Tool(cont())
    doc = {
        "profile": profile(stop=stop_hook(max_continuations=2)),
        "turns": [{"user": "fix it", "model": say("Fixed.")}],
    }
    report, _ = simulate(tmp_path, doc, verify=verify)
    run = only_run(report)
    assert run["state"] == "attention_hold"
    assert run["attention"]["reason"] == "continuation_limit_exceeded"
    assert run["attention"]["task_key"] == f"{run['id']}:stop:answer-3"
    failed = tasks(report, "stop")[-1]
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "continuation_limit_exceeded"
    assert failed["decision"] == {"continue": True, "feedback": FEEDBACK}
    # Never accepted silently: no answer was delivered.
    replies = messages(report, "assistant")
    assert replies and all(m["sim"].get("stop") != "accepted" for m in replies)
    assert report["chat"]["status"] == "waiting"
    assert report["simulation"]["status"] == "attention"


def test_max_continuations_zero_allows_no_continuation(tmp_path: Path) -> None:
    doc = {
        "profile": profile(stop=stop_hook(max_continuations=0)),
        "turns": [{"user": "go", "model": say("ok")}],
    }
    report, (run_id,) = simulate(tmp_path, doc, verify=Tool(cont()))
    attention = only_run(report)["attention"]
    assert attention["reason"] == "continuation_limit_exceeded"
    assert attention["task_key"] == f"{run_id}:stop:answer-1"
    assert messages(report, "feedback") == []


def test_a_tool_only_execution_can_acknowledge_stop(tmp_path: Path) -> None:
    verify = Tool()
    doc = {
        "profile": profile(stop=stop_hook(), turn_start=hook("verify")),
        "turns": [{"tool_only": True, "tool_calls": [{"name": "sync", "result": "synced 3"}]}],
    }
    report, _ = simulate(tmp_path, doc, verify=verify)
    run = only_run(report)
    assert (run["kind"], run["state"]) == ("tool_only", "completed")
    assert verify.events() == ["stop"]
    assert verify.inputs[0]["output_preview"] == "synced 3"


def test_a_tool_only_execution_asking_to_continue_fails_with_hook_requires_model(
    tmp_path: Path,
) -> None:
    doc = {
        "profile": profile(stop=stop_hook()),
        "turns": [{"tool_only": True, "tool_calls": [{"name": "sync", "result": "ok"}]}],
    }
    report, _ = simulate(tmp_path, doc, verify=Tool(cont()))
    run = only_run(report)
    assert run["state"] == "attention_hold"
    assert run["attention"]["reason"] == "hook_requires_model"
    assert tasks(report)[0]["error"]["code"] == "hook_requires_model"
    assert messages(report, "feedback") == []


def test_a_stop_loop_with_an_error_after_the_script_fails_the_execution(tmp_path: Path) -> None:
    doc = {
        "profile": profile(stop=stop_hook()),
        "turns": [{"user": "go", "model": say("a"), "error": "context length exceeded"}],
    }
    report, _ = simulate(tmp_path, doc, verify=Tool(cont()))
    run = only_run(report)
    assert (run["state"], run["error"]) == ("failed", "context length exceeded")


# -- Failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (RuntimeError("database is down"), "tool_failed"),
        ({"structured_content": {"continue": "no"}}, "invalid_decision"),
        ({"structured_content": {"continue": False, "why": "x"}}, "invalid_decision"),
        ({"structured_content": {"continue": False}, "extra": 1}, "invalid_decision"),
        ({"continue": False}, "invalid_decision"),
        ("not an object", "invalid_decision"),
    ],
    ids=["raises", "not-bool", "extra-field", "extra-result-field", "no-structured", "string"],
)
def test_a_failed_hook_task_leaves_a_failed_task_and_an_attention_hold(
    tmp_path: Path, answer: Any, code: str
) -> None:
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "go", "model": say("ok")}]}
    report, _ = simulate(tmp_path, doc, verify=Tool(answer))
    run = only_run(report)
    assert run["state"] == "attention_hold"
    assert run["attention"]["reason"] == code
    (task,) = tasks(report)
    assert (task["status"], task["error"]["code"]) == ("failed", code)
    lines = [line for line, _ in transcript_lines(report)]
    assert any(f"FAILED ({code})" in line for line in lines)
    assert f"  belt sim resume {run['id']} --executor verify=TARGET" in lines


@pytest.mark.parametrize(
    ("feedback", "rule"),
    [
        ("   ", "must be nonblank"),
        ("x" * (16 * 1024 + 1), "above the limit of 16384"),
        ("stop\x00now", "must not contain NUL"),
    ],
    ids=["blank", "over-16KiB", "nul"],
)
def test_invalid_feedback_is_an_invalid_decision(tmp_path: Path, feedback: str, rule: str) -> None:
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "go", "model": say("ok")}]}
    report, _ = simulate(tmp_path, doc, verify=Tool(cont(feedback)))
    run = only_run(report)
    assert run["attention"]["reason"] == "invalid_decision"
    assert rule in run["attention"]["detail"]
    assert run["attention"]["detail"].startswith("result.structured_content.feedback:")


def test_feedback_of_exactly_16_kib_is_accepted(tmp_path: Path) -> None:
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "go", "model": say("ok")}]}
    report, _ = simulate(tmp_path, doc, verify=Tool(cont("x" * 16 * 1024), ACK))
    assert only_run(report)["state"] == "completed"


@pytest.mark.parametrize("event", ["turn_start", "pre_compact", "post_compact"])
def test_the_other_events_cannot_ask_to_continue(tmp_path: Path, event: str) -> None:
    doc = {
        "profile": profile(**{event: hook()}),
        "agent": {"context_bytes": 100, "compact_at": 0.5},
        "turns": [
            {"user": "go", "model": [{"say": "f", "tool_calls": [write_ok(100)]}, {"say": "ok"}]}
        ],
    }
    report, _ = simulate(tmp_path, doc, check=Tool(cont()))
    run = only_run(report)
    assert run["attention"]["reason"] == "invalid_decision"
    assert run["attention"]["event"] == event
    assert "only stop may ask to continue" in run["attention"]["detail"]


def test_a_hook_task_no_executor_claims_times_out(tmp_path: Path) -> None:
    doc = {
        "profile": profile(stop=stop_hook(timeout_ms=30)),
        "turns": [{"user": "go", "model": say("ok")}],
    }
    report, _ = simulate(tmp_path, doc)
    run = only_run(report)
    assert run["attention"]["reason"] == "timeout"
    assert "no executor claimed the task within 30 ms" in run["attention"]["detail"]
    assert "belt executor run --tool verify=" in run["attention"]["detail"]


def test_a_tool_that_answers_after_the_deadline_times_out(tmp_path: Path) -> None:
    def slow(task_input: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.1)
        return cont()

    doc = {
        "profile": profile(stop=stop_hook(timeout_ms=20)),
        "turns": [{"user": "go", "model": say("ok")}],
    }
    report, _ = simulate(tmp_path, doc, verify=slow)
    (task,) = tasks(report)
    assert task["error"]["code"] == "timeout"
    assert task["decision"] is None
    assert messages(report, "feedback") == []


def test_resume_retries_the_same_task_and_goes_on(tmp_path: Path) -> None:
    doc = {
        "profile": profile(stop=stop_hook()),
        "turns": [{"user": "go", "model": say("ok")}, {"user": "next", "model": say("ok")}],
    }
    report, (run_id,) = simulate(tmp_path, doc, verify=Tool(RuntimeError("flaky")))
    (failed,) = tasks(report)
    report = resume(run_id, verify=Tool())
    first = tasks(report)[0]
    assert (first["id"], first["task_key"]) == (failed["id"], failed["task_key"])
    assert (first["attempt"], first["status"]) == (2, "completed")
    assert [h["status"] for h in first["history"]] == ["failed"]
    assert [r["state"] for r in report["runs"]] == ["completed", "completed"]
    assert report["simulation"]["status"] == "finished"


def test_resume_of_a_run_not_on_hold_is_a_conflict(tmp_path: Path) -> None:
    doc = {"profile": profile(stop=stop_hook()), "turns": [{"user": "go", "model": say("ok")}]}
    _, (run_id,) = simulate(tmp_path, doc, verify=Tool())
    with pytest.raises(Conflict, match="not on an attention hold"):
        resume_run(run_id=run_id)


def test_a_hold_at_turn_start_resumes_into_the_first_request(tmp_path: Path) -> None:
    doc = {
        "profile": profile(turn_start=hook()),
        "turns": [{"user": "go", "model": say("ok")}],
    }
    # Held by a failing tool (deterministic), retried with a working one and a deadline (5 s)
    # that no slow machine misses.
    report, (run_id,) = simulate(tmp_path, doc, check=Tool(RuntimeError("down")))
    assert only_run(report)["attention"]["reason"] == "tool_failed"
    assert messages(report, "assistant") == []
    report = resume(run_id, check=Tool())
    assert texts(report, "assistant") == ["ok"]
    assert only_run(report)["state"] == "completed"


# -- Force stop -------------------------------------------------------------------------------


def test_force_stop_cancels_a_pending_hook_task(tmp_path: Path) -> None:
    doc = {
        "profile": profile(stop=stop_hook(timeout_ms=60_000)),
        "turns": [{"user": "go", "model": say("ok")}],
    }
    loaded = read_scenario(write(tmp_path, doc))
    assert isinstance(loaded, LoadedNexusScenario)
    store = open_store()
    outcome: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: outcome.update(result=start_simulation(store, loaded, Options()))
    )
    thread.start()
    try:
        for _ in range(2000):
            if store.tagged(PENDING_TAG):
                break
            time.sleep(0.005)
        (task_id,) = store.tagged(PENDING_TAG)
        run_id = store.read("hooktask", task_id)["run_id"]
        with pytest.raises(Conflict, match="is working"):
            stop_run(run_id=run_id)
        stopped = stop_run(run_id=run_id, force=True)
    finally:
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert stopped["state"] == "canceled"
    assert stopped["stopped"]["cancelled_tasks"] == [f"{run_id}:stop:answer-1"]
    report = show_run(run_id=run_id)
    (task,) = report["hook_tasks"]
    assert (task["status"], task["error"]["code"]) == ("cancelled", "cancelled")
    assert store.tagged(PENDING_TAG) == []
    assert report["simulation"]["status"] == "canceled"
    assert outcome["result"][1] == [run_id]
    orders = [m["order"] for m in report["chat"]["chat_messages"]]
    assert orders == list(range(len(orders)))


def test_a_hook_cannot_keep_a_force_stopped_execution_alive(tmp_path: Path) -> None:
    def stop_then_continue(task_input: dict[str, Any]) -> dict[str, Any]:
        stop_run(run_id=task_input["run_public_id"], force=True)
        return cont()

    doc = {
        "profile": profile(stop=stop_hook()),
        "turns": [{"user": "go", "model": say("ok")}, {"user": "never", "model": say("x")}],
    }
    report, _ = simulate(tmp_path, doc, verify=stop_then_continue)
    run = only_run(report)
    assert run["state"] == "canceled"
    assert tasks(report)[0]["status"] == "cancelled"
    assert messages(report, "feedback") == []
    assert len(messages(report, "assistant")) == 1
    assert report["simulation"]["status"] == "canceled"
    orders = [m["order"] for m in report["chat"]["chat_messages"]]
    assert orders == list(range(len(orders)))


def test_stopping_a_held_run_ends_it_for_good(tmp_path: Path) -> None:
    doc = {
        "profile": profile(stop=stop_hook(timeout_ms=20)),
        "turns": [{"user": "go", "model": say("ok")}],
    }
    _, (run_id,) = simulate(tmp_path, doc)
    assert stop_run(run_id=run_id)["state"] == "canceled"
    with pytest.raises(Conflict):
        resume_run(run_id=run_id)
    with pytest.raises(Conflict, match="already canceled"):
        stop_run(run_id=run_id, force=True)
    lines = [line for line, _ in transcript_lines(show_run(run_id=run_id))]
    assert any("stopped by user; stop bypassed" in line for line in lines)


# -- Approval ----------------------------------------------------------------------------------


def simulate_in_background(
    tmp_path: Path, doc: dict[str, Any], **tools: Callable[[dict[str, Any]], Any]
) -> tuple[threading.Thread, dict[str, Any]]:
    loaded = read_scenario(write(tmp_path, doc))
    outcome: dict[str, Any] = {}

    def run() -> None:
        options = Options(worker=worker(tools), wait=True)  # --wait: it waits for approvals
        outcome["result"] = start_simulation(open_store(), loaded, options)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def approval_gate() -> dict[str, Any]:
    store = open_store()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for run_id in store.list_ids("run"):
            from belt.records.interrupts import list_interrupts

            pending = list_interrupts(store=store, run_id=run_id)
            if pending:
                return pending[0]
        time.sleep(0.01)
    raise AssertionError("no approval was asked for")


@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_an_ask_hook_task_waits_for_its_approval(tmp_path: Path, decision: str) -> None:
    from belt.records.interrupts import resolve_interrupt

    verify = Tool(ACK)
    doc = {
        "profile": {"approval_mode": "ask", "lifecycle_hooks": {"stop": stop_hook()}},
        "turns": [{"user": "go", "model": say("ok")}],
    }
    thread, outcome = simulate_in_background(tmp_path, doc, verify=verify)
    try:
        gate = approval_gate()
        assert (gate["reason"], gate["source"]) == ("tool_approval", "nexus:stop")
        assert gate["meta"]["tool_name"] == "verify"
        (task,) = [open_store().read("hooktask", gate["resource_id"])]
        assert task["status"] == "awaiting_approval"
        assert task["tool"] == "verify" and verify.inputs == []  # nobody may claim it yet
        assert open_store().tagged(PENDING_TAG) == []
        resolve_interrupt(interrupt_id=gate["id"], decision=decision)
    finally:
        thread.join(60)
    sim, _ = outcome["result"]
    report = build_report(open_store(), sim)
    (task,) = tasks(report)
    assert task["approval"]["interrupt_id"] == gate["id"]
    if decision == "allow":
        assert len(verify.inputs) == 1
        assert (task["status"], only_run(report)["state"]) == ("completed", "completed")
    else:
        assert verify.inputs == []
        assert (task["status"], task["error"]["code"]) == ("failed", "approval_denied")
        run = only_run(report)
        assert (run["state"], run["attention"]["reason"]) == ("attention_hold", "approval_denied")


def test_an_ask_hook_task_nobody_approves_holds_the_execution_until_resumed(
    tmp_path: Path,
) -> None:
    from belt.records.interrupts import resolve_interrupt

    verify = Tool(ACK)
    doc = {
        "profile": {"approval_mode": "ask", "lifecycle_hooks": {"stop": stop_hook()}},
        "turns": [{"user": "go", "model": say("ok")}],
    }
    store = open_store()
    options = Options(worker=worker({"verify": verify}))
    sim, _ = start_simulation(store, read_scenario(write(tmp_path, doc)), options)
    report = build_report(store, sim)
    run = only_run(report)
    (task,) = tasks(report)
    assert (run["state"], report["simulation"]["status"]) == ("input_required", "held")
    assert (task["status"], verify.inputs) == ("awaiting_approval", [])
    assert report["executions"][0]["state"] == "input_required"
    with pytest.raises(Conflict, match="still waits for 1 approval"):
        resume_simulation(store, run["id"], Options(worker=worker({"verify": verify})))
    resolve_interrupt(interrupt_id=task["approval"]["interrupt_id"], decision="allow")
    sim, executed = resume_simulation(store, run["id"], Options(worker=worker({"verify": verify})))
    report = build_report(store, sim)
    assert executed == [run["id"]]
    assert (only_run(report)["state"], report["simulation"]["status"]) == ("completed", "finished")
    assert [t["status"] for t in tasks(report)] == ["completed"]
    assert len(verify.inputs) == 1
