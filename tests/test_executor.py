"""The executor inbox in the store, and the cmd:, py: and http targets a worker runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from belt.errors import NotFound, UsageError
from belt.executor.inbox import (
    CLAIM_MARK,
    ToolOutcome,
    abandoned,
    cancel_run_tasks,
    claim_task,
    complete_task,
    expire_task,
    release_abandoned,
    run_tasks,
    schedule_task,
    task_id,
    task_key,
)
from belt.executor.process import stop_marked
from belt.executor.targets import parse_tool, parse_tools
from belt.executor.worker import Worker
from belt.records import leases
from belt.records.hooktasks import HOOKTASK, PENDING_TAG, RUN_TASKS
from belt.store import Store, open_store
from belt.wire.nexus import NexusEvent, NexusHook
from tests.servers import REFUSED, running
from tests.waiting import eventually

ACK = {"structured_content": {"continue": False}}
CONTINUE = {"structured_content": {"continue": True, "feedback": "verify first"}}
STOP = NexusHook(tool="verify", timeout_ms=5000, max_continuations=1)


def schedule(
    store: Store,
    *,
    source: str = "answer-1",
    hook: NexusHook = STOP,
    event: NexusEvent = NexusEvent.STOP,
    **extra: Any,
) -> dict[str, Any]:
    key = task_key("ar_1", event, source)
    task_input = {"event": event.value, "task_key": key, "run_public_id": "ar_1"}
    return schedule_task(
        store, key=key, event=event, hook=hook, task_input=task_input, run_id="ar_1", **extra
    )


def finish(store: Store, task: dict[str, Any], outcome: ToolOutcome) -> dict[str, Any]:
    assert claim_task(store, task["id"], worker="w") is not None
    return complete_task(store, task["id"], outcome, duration_ms=1)


# -- the inbox --------------------------------------------------------------------------------


def test_one_event_and_source_pair_has_one_durable_task(store: Store) -> None:
    first = schedule(store)
    assert first["task_key"] == "ar_1:stop:answer-1"
    assert first["id"] == task_id("ar_1:stop:answer-1")
    assert store.tagged(PENDING_TAG) == [first["id"]]
    again = schedule(store)
    assert again == first
    assert schedule(store, source="answer-2")["id"] != first["id"]
    assert [t["task_key"] for t in run_tasks(store, "ar_1")] == [
        "ar_1:stop:answer-1",
        "ar_1:stop:answer-2",
    ]


def test_a_new_task_is_stored_with_its_attempt_fields_in_their_order(store: Store) -> None:
    task = schedule(store)
    stored = json.loads(store.path(HOOKTASK, task["id"]).read_text())["data"]
    assert list(stored)[-10:] == [
        "approval",
        "dispatched_at",
        "deadline",
        "claim",
        "result",
        "decision",
        "error",
        "duration_ms",
        "finished_at",
        "updated_at",
    ]


def test_a_task_its_scheduler_did_not_list_is_listed_when_scheduled_again(store: Store) -> None:
    # A process killed between writing the task and listing it on its run.
    task = schedule(store)
    store.unlink(RUN_TASKS, "ar_1", task["id"])
    assert run_tasks(store, "ar_1") == []
    assert schedule(store)["id"] == task["id"]
    assert [t["id"] for t in run_tasks(store, "ar_1")] == [task["id"]]
    schedule(store)
    assert store.members(RUN_TASKS, "ar_1") == [task["id"]]


def test_a_retry_reuses_the_failed_task_with_a_new_attempt(store: Store) -> None:
    task = schedule(store)
    failed = finish(store, task, ToolOutcome(failure="boom"))
    assert (failed["status"], failed["error"]["code"]) == ("failed", "tool_failed")
    retried = schedule(store)
    assert (retried["id"], retried["status"], retried["attempt"]) == (task["id"], "pending", 2)
    assert retried["error"] is None
    assert [(h["attempt"], h["status"]) for h in retried["history"]] == [(1, "failed")]
    assert store.tagged(PENDING_TAG) == [task["id"]]
    assert len(run_tasks(store, "ar_1")) == 1


def test_a_completed_task_keeps_its_result_when_scheduled_again(store: Store) -> None:
    done = finish(store, schedule(store), ToolOutcome(result=ACK))
    assert schedule(store) == done
    assert store.tagged(PENDING_TAG) == []


def test_exactly_one_of_many_racing_workers_claims_a_task(store: Store) -> None:
    task = schedule(store)
    wins: list[str] = []
    barrier = threading.Barrier(8)

    def claim(name: str) -> None:
        barrier.wait()
        if claim_task(open_store(), task["id"], worker=name) is not None:
            wins.append(name)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1
    claimed = store.read(HOOKTASK, task["id"])
    assert (claimed["status"], claimed["claim"]["by"]) == ("claimed", wins[0])
    # Its marker stays until it finishes, so a claim whose worker dies is found.
    assert store.tagged(PENDING_TAG) == [task["id"]]
    complete_task(store, task["id"], ToolOutcome(result=ACK), duration_ms=1)
    assert store.tagged(PENDING_TAG) == []


def _exited() -> int:
    """The pid of a process that has exited."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def claimed_by(store: Store, task: dict[str, Any], **holder: Any) -> dict[str, Any]:
    """``task`` as claimed by a worker that is ``holder`` (pid, host, started)."""
    claim = {"by": "w9", "at": "2026-12-01T00:00:00.000Z", "mark": "cl_x", **holder}
    return store.update(HOOKTASK, task["id"], lambda t: {**t, "status": "claimed", "claim": claim})


def test_a_claim_names_its_worker_as_a_lease_does(store: Store) -> None:
    task = schedule(store)
    claim = claim_task(store, task["id"], worker="w")
    assert claim is not None
    lease = leases.mine()
    assert {k: claim["claim"][k] for k in ("pid", "host", "started")} == {
        "pid": lease["pid"],
        "host": lease["host"],
        "started": lease["started"],
    }
    assert claim["claim"]["mark"].startswith("cl_")
    assert not abandoned(claim["claim"])


def test_a_claim_whose_worker_died_goes_back_to_the_inbox_as_a_new_attempt(store: Store) -> None:
    task = schedule(store, hook=NexusHook(tool="verify", timeout_ms=60_000, max_continuations=0))
    claimed_by(store, task, pid=_exited(), host=leases.host(), started="1")
    worker = Worker(store, parse_tools(["verify=py:tests.nexus_tools:acknowledge"]))
    (served,) = worker.serve_pending()
    assert (served["status"], served["attempt"]) == ("completed", 2)
    (gone,) = served["history"]
    assert (gone["attempt"], gone["status"], gone["claimed_by"]) == (1, "claimed", "w9")
    assert gone["error"]["code"] == "worker_gone"
    assert gone["error"]["message"].startswith("w9 died holding the claim")
    assert store.tagged(PENDING_TAG) == []


def test_a_claim_of_a_live_worker_or_of_another_host_is_left_to_its_deadline(
    store: Store,
) -> None:
    task = schedule(store)
    holder = subprocess.Popen(["sleep", "60"])
    try:
        started = leases.process_start(holder.pid)
        claimed_by(store, task, pid=holder.pid, host=leases.host(), started=started)
        assert release_abandoned(store, task["id"]) is None
        claimed_by(store, task, pid=_exited(), host="elsewhere", started="1")
        assert release_abandoned(store, task["id"]) is None
        claimed_by(store, task, pid=_exited(), host=leases.host(), mark=None)  # an older claim
        assert release_abandoned(store, task["id"]) is None
        # A pid a later process took is not the worker that claimed it.
        claimed_by(store, task, pid=holder.pid, host=leases.host(), started="1")
        assert release_abandoned(store, task["id"]) is not None
    finally:
        holder.kill()
        holder.wait()
    assert store.read(HOOKTASK, task["id"])["status"] == "pending"


def test_a_result_from_a_released_claim_cannot_complete_the_task(store: Store) -> None:
    task = schedule(store)
    first = claim_task(store, task["id"], worker="w")
    assert first is not None
    done = complete_task(
        store, task["id"], ToolOutcome(result=ACK), duration_ms=1, mark="cl_someone_else"
    )
    assert done["status"] == "claimed"
    done = complete_task(
        store, task["id"], ToolOutcome(result=ACK), duration_ms=1, mark=first["claim"]["mark"]
    )
    assert done["status"] == "completed"


def test_the_processes_of_a_dead_workers_tool_are_killed_with_their_children(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    env = {**os.environ, CLAIM_MARK: "cl_dead"}
    tool = subprocess.Popen(
        ["sh", "-c", f"sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; wait"],
        env=env,
        start_new_session=True,
    )
    bystander = subprocess.Popen(["sleep", "60"], env={**os.environ, CLAIM_MARK: "cl_other"})
    try:
        eventually(lambda: pids.exists() and len(pids.read_text().split()) == 2, "both started")
        assert stop_marked(CLAIM_MARK, "cl_dead") == 2
        tool.wait(timeout=10)
        child = int(pids.read_text().split()[0])
        assert not os.path.exists(f"/proc/{child}") or _zombie(child)
        assert bystander.poll() is None
    finally:
        for process in (tool, bystander):
            process.kill()
            process.wait()


def test_a_marked_tool_dies_with_the_worker_that_ran_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = ["sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"]
    runner = (
        "from belt.executor.process import run_bounded\n"
        f"run_bounded({command!r}, b'', timeout=60, cap=10, mark=('{CLAIM_MARK}', 'cl_t'))\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", runner])
    try:
        tool = int(eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), "run"))
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        # Nobody stops it: the kernel does, as its worker died.
        eventually(lambda: _zombie(tool), "the tool died with its worker", timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        stop_marked(CLAIM_MARK, "cl_t")


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat.rpartition(b")")[2].split()[0] == b"Z"


def test_a_task_past_its_deadline_cannot_be_claimed(store: Store) -> None:
    task = schedule(store, hook=NexusHook(tool="verify", timeout_ms=1, max_continuations=0))
    time.sleep(0.005)
    assert claim_task(store, task["id"], worker="late") is None
    failed = store.read(HOOKTASK, task["id"])
    assert failed["error"]["code"] == "timeout"
    assert "no executor claimed the task within 1 ms" in failed["error"]["message"]


def test_a_claimed_task_past_its_deadline_expires_naming_the_worker(store: Store) -> None:
    task = schedule(store, hook=NexusHook(tool="verify", timeout_ms=1, max_continuations=0))
    store.update(HOOKTASK, task["id"], lambda t: {**t, "status": "claimed", "claim": {"by": "w9"}})
    time.sleep(0.005)
    expired = expire_task(store, task["id"])
    assert expired["error"]["message"] == "w9 claimed the task but did not complete it within 1 ms"


def test_a_late_result_cannot_change_a_cancelled_task(store: Store) -> None:
    task = schedule(store)
    assert claim_task(store, task["id"], worker="w") is not None
    (cancelled,) = cancel_run_tasks(store, "ar_1", "force stop")
    assert cancelled["status"] == "cancelled"
    after = complete_task(store, task["id"], ToolOutcome(result=CONTINUE), duration_ms=1)
    assert after["status"] == "cancelled"
    assert after["decision"] is None
    assert cancel_run_tasks(store, "ar_1", "again") == []


@pytest.mark.parametrize(
    ("kwargs", "result", "code"),
    [
        ({}, CONTINUE, None),
        ({"continuations_used": 1}, CONTINUE, "continuation_limit_exceeded"),
        ({"tool_only": True}, CONTINUE, "hook_requires_model"),
        ({"tool_only": True}, ACK, None),
        ({}, {"structured_content": {"continue": True}}, "invalid_decision"),
        (
            {},
            {"structured_content": ACK["structured_content"], "is_error": False},
            "invalid_decision",
        ),
        ({}, {"structured_content": ACK["structured_content"], "content": ["shown"]}, None),
    ],
    ids=[
        "continue",
        "over-allowance",
        "tool-only",
        "tool-only-ack",
        "no-feedback",
        "extra",
        "content",
    ],
)
def test_a_result_is_checked_with_the_decision_rules(
    store: Store, kwargs: dict[str, Any], result: Any, code: str | None
) -> None:
    task = finish(store, schedule(store, **kwargs), ToolOutcome(result=result))
    assert (task["error"] or {}).get("code") == code
    assert task["status"] == ("failed" if code else "completed")


def test_the_decision_rules_are_those_of_check_decision(store: Store) -> None:
    hook = NexusHook(tool="check", timeout_ms=5000)
    task = schedule(store, hook=hook, event=NexusEvent.TURN_START, source="turn")
    failed = finish(store, task, ToolOutcome(result=CONTINUE))
    assert failed["error"]["message"] == (
        "result.structured_content.continue: only stop may ask to continue; turn_start acknowledges"
    )
    assert failed["result"] == CONTINUE


# -- targets ----------------------------------------------------------------------------------


def script(tmp_path: Path, body: str, name: str = "hook.sh") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_cmd_tool_written_as_a_small_shell_script(tmp_path: Path) -> None:
    # Reads the task input on stdin; asks to continue on the first answer, accepts the next.
    target = parse_tool(
        "verify=cmd:"
        + script(
            tmp_path,
            'input=$(cat)\ncase "$input" in\n'
            '  *\'"task_key": "ar_1:stop:answer-1"\'*)\n'
            '    echo \'{"structured_content": {"continue": true, "feedback": "test it"}}\' ;;\n'
            '  *) echo \'{"structured_content": {"continue": false}}\' ;;\n'
            "esac\n",
        )
    )
    first = target.call({"event": "stop", "task_key": "ar_1:stop:answer-1"}, 5)
    second = target.call({"event": "stop", "task_key": "ar_1:stop:answer-2"}, 5)
    assert first == ToolOutcome(
        result={"structured_content": {"continue": True, "feedback": "test it"}}
    )
    assert second == ToolOutcome(result=ACK)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("echo broken >&2\nexit 3\n", ToolOutcome(failure="the command exited with 3: broken")),
        ("echo not json\n", None),
        ("true\n", ToolOutcome(invalid="stdout is empty; expected the result as JSON")),
    ],
    ids=["non-zero", "not-json", "empty"],
)
def test_cmd_failures(tmp_path: Path, body: str, expected: ToolOutcome | None) -> None:
    outcome = parse_tool("t=cmd:" + script(tmp_path, body)).call({}, 5)
    if expected is None:
        assert outcome.invalid and outcome.invalid.startswith("stdout is not JSON")
    else:
        assert outcome == expected


def test_a_missing_command_is_a_tool_failure(tmp_path: Path) -> None:
    outcome = parse_tool(f"t=cmd:{tmp_path}/missing --flag").call({}, 5)
    assert outcome.failure and outcome.failure.startswith("cannot run")


def test_a_cmd_past_its_deadline_is_killed_with_its_children(tmp_path: Path) -> None:
    started = tmp_path / "started"
    target = parse_tool("t=cmd:" + script(tmp_path, f"touch {started}\nsleep 30\necho late\n"))
    outcome = target.call({}, 0.2)
    assert outcome == ToolOutcome(timed_out=True)
    assert started.exists()


class Answers:
    """An HTTP executor tool: POST /NAME answers what it is told."""

    def __init__(self) -> None:
        self.received: list[Any] = []

    def app(self) -> Starlette:
        async def answer(request: Request) -> Response:
            self.received.append(json.loads(await request.body()))
            name = request.path_params["name"]
            if name == "fail":
                return Response("no", status_code=503)
            if name == "garbage":
                return Response("<html>")
            return Response(json.dumps(ACK), media_type="application/json")

        return Starlette(routes=[Route("/{name}", answer, methods=["POST"])])


@pytest.fixture
def answers() -> Iterator[tuple[Answers, str]]:
    tool = Answers()
    with running(tool.app()) as url:
        yield tool, url


def test_an_http_tool_gets_the_input_posted_and_the_body_is_the_result(
    answers: tuple[Answers, str],
) -> None:
    tool, url = answers
    outcome = parse_tool(f"verify={url}/ok").call({"event": "stop"}, 5)
    assert outcome == ToolOutcome(result=ACK)
    assert tool.received == [{"event": "stop"}]


def test_http_tool_failures_name_the_host_only(answers: tuple[Answers, str]) -> None:
    _, url = answers
    host = url.removeprefix("http://")
    assert parse_tool(f"v={url}/fail?key=s3cret").call({}, 5) == ToolOutcome(
        failure=f"{host} answered HTTP 503"
    )
    garbage = parse_tool(f"v={url}/garbage").call({}, 5)
    assert garbage.invalid and garbage.invalid.startswith(f"the body from {host} is not JSON")
    refused = parse_tool(f"v=http://{REFUSED}/x").call({}, 5)
    assert refused.failure == f"cannot reach {REFUSED}: ConnectError"


def test_a_py_tool_is_called_with_the_input() -> None:
    target = parse_tool("v=py:tests.nexus_tools:continue_until_third_answer")
    assert target.call({"event": "stop", "task_key": "ar_1:stop:answer-3"}, 5).result == ACK
    raising = parse_tool("v=py:json:loads").call({}, 5)
    assert raising.failure and raising.failure.startswith("raised TypeError")


def test_a_py_tool_gets_a_dict_unless_it_asks_for_the_input_model() -> None:
    task = {
        "event": "stop",
        "task_key": "ar_1:stop:answer-1",
        "run_public_id": "ar_1",
        "conversation_public_id": None,
        "output_preview": " ",
        "output_size_bytes": 1,
    }
    model = parse_tool("v=py:tests.nexus_tools:reads_the_model")
    assert model.call(task, 5).result == {
        "structured_content": {"continue": True, "feedback": "Say something."}
    }
    assert parse_tool("v=py:tests.nexus_tools:reads_a_dict").call(task, 5).result == ACK
    # An input the model refuses is the tool's failure, named, not a crash.
    refused = model.call({"event": "stop"}, 5)
    assert refused.failure and refused.failure.startswith("the input is not a HookTaskInput: ")
    assert "task_key" in refused.failure


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("verify", UsageError),
        ("=cmd:x", UsageError),
        ("v=ftp://host/x", UsageError),
        ("v=cmd:", UsageError),
        ("v=py:nomodule", UsageError),
        ("v=py:tests.no_such_module:f", NotFound),
        ("v=py:tests.nexus_tools:missing", NotFound),
    ],
)
def test_bad_tool_specs_are_refused(spec: str, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        parse_tool(spec)
    assert "--handler" not in str(info.value)


def test_a_tool_named_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="given twice"):
        parse_tools(["v=cmd:true", "v=cmd:false"])


def test_a_worker_serves_its_tools_and_reports_others_once(store: Store) -> None:
    records: list[dict[str, Any]] = []
    other = NexusHook(tool="someone_else", timeout_ms=5000)
    schedule(store, hook=other, event=NexusEvent.TURN_START, source="turn")
    mine = schedule(store)
    worker = Worker(store, parse_tools(["verify=py:tests.nexus_tools:acknowledge"]), records.append)
    assert [t["id"] for t in worker.serve_pending()] == [mine["id"]]
    assert worker.serve_pending() == []
    kinds = sorted((r["kind"], r["tool"]) for r in records)
    assert kinds == [("skip", "someone_else"), ("task", "verify")]
    served = next(r for r in records if r["kind"] == "task")
    assert (served["event"], served["task_key"], served["outcome"]) == (
        "stop",
        "ar_1:stop:answer-1",
        "acknowledged",
    )
    assert isinstance(served["duration_ms"], int)


# -- hostile tools ------------------------------------------------------------------------------

HOSTILE_STDOUT = {
    "deep": "'" + "[" * 5000 + "]" * 5000 + "'",
    "huge-integer": "'" + '{"n": ' + "9" * 5000 + "}" + "'",
    "lone-surrogate": "'" + '{"s": "\\ud800"}' + "'",
    "nan": "'" + '{"structured_content": {"continue": false, "x": NaN}}' + "'",
}


@pytest.mark.parametrize("printed", HOSTILE_STDOUT.values(), ids=HOSTILE_STDOUT.keys())
def test_a_cmd_tool_answering_what_json_cannot_hold_is_an_invalid_decision(
    tmp_path: Path, printed: str
) -> None:
    outcome = parse_tool("t=cmd:" + script(tmp_path, f"printf %s {printed}\n")).call({}, 5)
    assert outcome.invalid and outcome.invalid.startswith("stdout is not JSON"), outcome
    assert len(outcome.invalid) < 400


@pytest.mark.parametrize(
    ("func", "field", "start"),
    [
        ("exits", "failure", "raised SystemExit: 3"),
        ("interrupted", "failure", "raised KeyboardInterrupt"),
        ("unsayable", "failure", "raised Unsayable"),
        ("not_a_number", "invalid", "the function returned what JSON cannot hold"),
        ("a_set", "invalid", "the function returned what JSON cannot hold"),
    ],
)
def test_a_py_tool_that_exits_or_answers_garbage_fails_as_a_tool(
    func: str, field: str, start: str
) -> None:
    outcome = parse_tool(f"t=py:tests.nexus_tools:{func}").call({}, 5)
    assert str(getattr(outcome, field)).startswith(start), outcome


def test_a_py_tool_that_never_answers_times_out_at_its_deadline() -> None:
    assert parse_tool("t=py:tests.nexus_tools:hangs").call({}, 0.2) == ToolOutcome(timed_out=True)


def test_a_child_holding_stdout_open_cannot_hold_the_tool_past_its_deadline(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "child.pid"
    body = f"(sleep 60; echo late) &\necho $! > {pid_file}\necho '{{}}'\n"
    # The deadline leaves a loaded machine time to start the shell and its child; the child
    # holds stdout open for 60 s, so only the deadline can end the call.
    outcome = parse_tool("t=cmd:" + script(tmp_path, body)).call({}, 3)
    assert outcome == ToolOutcome(timed_out=True)
    child = int(pid_file.read_text())
    for _ in range(200):  # the group was killed; the child is reaped by init soon after
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the tool's child outlived its deadline")


def test_a_cmd_tool_flooding_stdout_is_stopped_at_the_cap(tmp_path: Path) -> None:
    from belt.executor.targets import OUTPUT_MAX_BYTES

    outcome = parse_tool("t=cmd:" + script(tmp_path, "yes '{\"a\": 1}'\n")).call({}, 10)
    assert outcome.failure == f"stdout passed {OUTPUT_MAX_BYTES} bytes; the tool was stopped"


def test_a_worker_survives_a_hostile_tool_and_serves_the_next_task(
    store: Store, tmp_path: Path
) -> None:
    bad = script(tmp_path, "printf %s " + HOSTILE_STDOUT["deep"] + "\n", "bad.sh")
    first = schedule(store)
    turn = NexusHook(tool="check", timeout_ms=5000)
    second = schedule(store, event=NexusEvent.TURN_START, source="turn", hook=turn)
    worker = Worker(
        store,
        parse_tools([f"verify=cmd:{bad}", "check=py:tests.nexus_tools:acknowledge"]),
    )
    served = {t["id"]: t for t in worker.serve_pending()}
    assert served[first["id"]]["status"] == "failed"
    assert served[first["id"]]["error"]["code"] == "invalid_decision"
    assert served[second["id"]]["status"] == "completed"


@settings(max_examples=60, deadline=None)
@given(answer=st.binary(max_size=300))
def test_any_bytes_a_cmd_tool_prints_give_an_outcome_never_an_exception(answer: bytes) -> None:
    from belt.executor.targets import _decode

    outcome = _decode(answer, "stdout")
    assert (outcome.result is None) != (outcome.invalid is None) or answer.strip() == b"null"


@pytest.mark.parametrize("behaviour", ["slow_head", "slow_body"])
def test_an_http_tool_that_trickles_times_out_at_its_total_deadline(behaviour: str) -> None:
    from tests import hostile

    with hostile.hostile_server(getattr(hostile, behaviour)()) as url:
        outcome = parse_tool(f"t={url}/tool").call({}, 1.0)
    assert outcome == ToolOutcome(timed_out=True)


def test_an_http_tool_answering_without_end_is_stopped_at_the_cap() -> None:
    from belt.executor.targets import OUTPUT_MAX_BYTES
    from tests import hostile

    with hostile.hostile_server(hostile.endless()) as url:
        outcome = parse_tool(f"t={url}/tool").call({}, 30)
    assert outcome.failure and outcome.failure.endswith(f"passed {OUTPUT_MAX_BYTES} bytes")
