"""In-process ``py:MODULE:FUNC`` webhook handlers, and ``--route`` (belt.handlers.inprocess)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.engine.dispatch import Route, parse_route, parse_routes, route_for
from belt.engine.entrypoints import resume_run, run_scenario
from belt.errors import InvalidInput, NotFound, UsageError
from belt.handlers.inprocess import InProcess, read_value, wants_model
from belt.handlers.webhook import encode_payload
from belt.store import open_store
from belt.wire.platform import LifecycleHookPayload
from tests import pyhooks
from tests.cli.runner import belt
from tests.hookapp import hook_app

EXAMPLES = Path(__file__).parent.parent / "examples"
DELETE = {"name": "delete_file", "arguments": {"path": "/etc/passwd"}, "result": "deleted"}


def scenario(tmp_path: Path, hooks: list[dict[str, Any]], *turns: dict[str, Any]) -> Path:
    """A scenario file: one turn calling delete_file unless ``turns`` are given."""
    if not turns:
        turns = ({"user": "go", "model": [{"tool_calls": [DELETE]}, {"say": "done"}]},)
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"agent": {"hooks": hooks}, "turns": list(turns)}))
    return path


def webhook(handler: str, event: str = "agent.tool_call", **extra: Any) -> dict[str, Any]:
    return {"event": event, "type": "webhook", "handler": handler, **extra}


def hook_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        content["event"]["hook"]
        for message in report["chat"]["chat_messages"]
        for content in message["content"]
        if (content.get("event") or {}).get("type") == "hook"
    ]


def tool_call(report: dict[str, Any]) -> dict[str, Any]:
    calls = [
        invocation
        for message in report["chat"]["chat_messages"]
        for invocation in message.get("tool_invocations") or []
    ]
    assert len(calls) == 1
    return calls[0]


def test_a_python_handler_decides_like_a_webhook(tmp_path: Path) -> None:
    report, _ = run_scenario(scenario=scenario(tmp_path, [webhook("py:tests.pyhooks:deny")]))
    call = tool_call(report)
    assert call["status"] == "failed"
    assert call["result"] == "denied by tests.pyhooks"
    [row] = hook_rows(report)
    assert row["handler_type"] == "webhook"
    assert row["handler"] == "py:tests.pyhooks:deny"
    assert row["decision"] == "deny"
    [executed] = report["hook_executions"]
    assert executed["handler"] == "py:tests.pyhooks:deny"
    assert executed["resource_id"] == call["id"]


def test_the_handler_gets_the_payload_as_a_dict_it_cannot_change(tmp_path: Path) -> None:
    pyhooks.received.clear()
    report, _ = run_scenario(scenario=scenario(tmp_path, [webhook("py:tests.pyhooks:record")]))
    [given_payload] = pyhooks.received
    [executed] = report["hook_executions"]
    # The handler changed its copy; the simulation kept the payload it sent.
    assert given_payload["event"] == "changed by the handler"
    assert executed["payload"]["event"] == "agent.tool_call"
    assert executed["payload"]["data"] == {"tool": "delete_file", "arguments": DELETE["arguments"]}
    assert tool_call(report)["status"] == "completed"


def test_an_exception_is_a_handler_failure(tmp_path: Path) -> None:
    report, _ = run_scenario(scenario=scenario(tmp_path, [webhook("py:tests.pyhooks:explode")]))
    [row] = hook_rows(report)
    assert row["error"] == "py:tests.pyhooks:explode raised ValueError: boom \\x1b[31mred"
    assert "decision" not in row
    # A failed hook counts as allow...
    assert tool_call(report)["status"] == "completed"


def test_an_exception_whose_message_raises_is_a_failure_named_by_its_type(tmp_path: Path) -> None:
    path = scenario(tmp_path, [webhook("py:tests.pyhooks:explode_unsayably")])
    report, _ = run_scenario(scenario=path)
    [row] = hook_rows(report)
    assert row["error"] == "py:tests.pyhooks:explode_unsayably raised Unsayable"
    assert tool_call(report)["status"] == "completed"


def test_an_exception_denies_when_fail_closed(tmp_path: Path) -> None:
    path = scenario(tmp_path, [webhook("py:tests.pyhooks:explode")])
    report, _ = run_scenario(scenario=path, fail_closed=True)
    # ...and deny on gate-able events when fail-closed, exactly as a webhook's 500.
    call = tool_call(report)
    assert call["status"] == "failed"
    assert call["result"].startswith("hook failed (fail-closed): py:tests.pyhooks:explode raised")


@pytest.mark.parametrize(
    ("handler", "problem"),
    [
        ("py:tests.pyhooks:nonsense", "decision: Input should be 'allow', 'deny'"),
        ("py:tests.pyhooks:number", "expected a dict, a LifecycleHookResponse or None"),
    ],
)
def test_an_answer_that_is_not_a_response_fails(tmp_path: Path, handler: str, problem: str) -> None:
    report, _ = run_scenario(scenario=scenario(tmp_path, [webhook(handler)]))
    [row] = hook_rows(report)
    assert row["error"].startswith(f"{handler} answered with a body that is not")
    assert problem in row["error"]


def test_an_async_function_and_an_injection(tmp_path: Path) -> None:
    hooks = [
        webhook("py:tests.pyhooks:later"),
        webhook("py:tests.pyhooks:remind", event="agent.turn_start"),
    ]
    report, _ = run_scenario(scenario=scenario(tmp_path, hooks))
    assert tool_call(report)["result"] == "async says no"
    injections = [m for m in report["chat"]["chat_messages"] if m["role"] == "injection"]
    assert [m["sim"]["injection"]["source"] for m in injections] == ["py:tests.pyhooks:remind"] * 2


def test_an_async_hook_runs_in_the_background(tmp_path: Path) -> None:
    pyhooks.received.clear()
    report, _ = run_scenario(
        scenario=scenario(tmp_path, [webhook("py:tests.pyhooks:record", **{"async": True})])
    )
    assert len(pyhooks.received) == 1
    [executed] = report["hook_executions"]
    assert executed["async"] is True
    assert hook_rows(report) == []


def test_the_timeout_is_a_total_deadline(tmp_path: Path) -> None:
    pyhooks.release.clear()
    try:
        path = scenario(tmp_path, [webhook("py:tests.pyhooks:block", timeout=1)])
        report, _ = run_scenario(scenario=path)
    finally:
        pyhooks.release.set()
    [row] = hook_rows(report)
    assert row["error"] == "py:tests.pyhooks:block did not answer within 1 s"
    assert report["runs"][0]["state"] == "completed"


def test_a_handler_that_cannot_be_imported_is_refused_before_anything_is_written(
    tmp_path: Path, belt_home: Path
) -> None:
    path = scenario(tmp_path, [webhook("py:tests.no_such_module:f")])
    with pytest.raises(NotFound, match="no module named 'tests.no_such_module'"):
        run_scenario(scenario=path)
    assert not (belt_home / "store" / "objects" / "sim").exists()
    result = belt("sim", "run", str(path))
    assert result.exit_code == 3
    assert f"{path}: py:tests.no_such_module:f: no module named" in result.stderr


def test_a_malformed_python_handler_is_a_problem_of_the_scenario(tmp_path: Path) -> None:
    result = belt("sim", "run", str(scenario(tmp_path, [webhook("py:nothing")])))
    assert result.exit_code == 5
    assert "agent.hooks[0].handler: 'py:nothing': an in-process handler is py:MODULE:FUNC" in (
        result.stderr
    )


def test_the_platform_refuses_a_python_handler(tmp_path: Path) -> None:
    declaration = tmp_path / "hooks.json"
    declaration.write_text(json.dumps({"hooks": [webhook("py:tests.pyhooks:deny")]}))
    result = belt("hooks", "validate", str(declaration))
    assert result.exit_code == 5
    assert "hooks[0].handler: 'py:tests.pyhooks:deny' is an in-process handler" in result.stderr
    assert "the platform refuses it" in result.stderr


# -- routes ----------------------------------------------------------------------------------------


def test_a_route_sends_a_production_url_to_python(tmp_path: Path) -> None:
    path = scenario(tmp_path, [webhook("https://policy.example.com/hooks?key=s3cret")])
    report, _ = run_scenario(
        scenario=path, routes=["https://policy.example.com=py:tests.pyhooks:deny"]
    )
    assert tool_call(report)["status"] == "failed"
    [row] = hook_rows(report)
    [executed] = report["hook_executions"]
    # The hook is named as declared (by its host); the record says where it went.
    assert row["handler"] == "policy.example.com"
    assert executed["routed_to"] == "py:tests.pyhooks:deny"
    assert "s3cret" not in json.dumps(report)


def test_a_handler_written_for_belt_serve_runs_as_a_route_target(tmp_path: Path) -> None:
    # examples/handler.py:decide reads a LifecycleHookPayload (its first parameter says so), as
    # `belt serve --handler` gives it: one handler serves both ways.
    path = scenario(tmp_path, [webhook("https://policy.example.com/hooks")])
    route = f"https://policy.example.com=py:{EXAMPLES / 'handler.py'}:decide"
    report, _ = run_scenario(scenario=path, routes=[route])
    assert tool_call(report)["status"] == "failed"
    assert tool_call(report)["result"] == "only /tmp deletions allowed"


def test_a_handler_whose_parameter_is_a_payload_model_gets_one(tmp_path: Path) -> None:
    report, _ = run_scenario(scenario=scenario(tmp_path, [webhook("py:tests.pyhooks:model_type")]))
    assert tool_call(report)["result"] == "LifecycleHookPayload agent.tool_call"


def test_a_handler_that_wants_the_model_of_a_payload_that_is_not_one_fails() -> None:
    caller = InProcess({"py:h": pyhooks.model_type})
    try:
        result = caller.deliver("py:h", {"event": "agent.tool_call"}, timeout=5)
    finally:
        caller.close()
    assert result.response is None
    assert result.error is not None
    assert result.error.startswith("py:h wants a LifecycleHookPayload and the payload is not one")


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]

    def __call__(self, payload: LifecycleHookPayload) -> None:
        return None


class _Event(TypedDict):
    event: str


def _mapping(payload: Mapping[str, Any]) -> None: ...


def _typed(payload: _Event) -> None: ...


def _model(payload: LifecycleHookPayload) -> None: ...


def _bare(payload) -> None:  # type: ignore[no-untyped-def]
    ...


def _other(payload: int) -> None: ...


@pytest.mark.parametrize(
    ("func", "model"),
    [
        (pyhooks.deny, False),  # "dict[str, Any]", a string under `from __future__`
        (pyhooks.model_type, True),  # "LifecycleHookPayload", likewise
        (_mapping, False),
        (_typed, False),
        (_model, True),
        (_Unhashable(), True),
        (lambda payload: None, False),
        (_bare, False),
        (_other, False),
        (print, False),
    ],
)
def test_the_first_parameter_says_which_payload_a_handler_gets(func: Any, model: bool) -> None:
    # One convention everywhere: the dict, unless the model is asked for by name.
    assert wants_model(func) is model


def test_a_route_to_a_url_takes_the_prefix_place(tmp_path: Path) -> None:
    with hook_app(lambda name, payload: {"decision": "deny", "reason": name}) as app:
        path = scenario(tmp_path, [webhook("https://policy.example.com/hooks/tool-guard")])
        report, _ = run_scenario(scenario=path, routes=[f"https://policy.example.com={app.url}"])
    assert [name for name, _ in app.received] == ["hooks/tool-guard"]
    assert tool_call(report)["result"] == "hooks/tool-guard"
    assert report["hook_executions"][0]["routed_to"] == app.url.removeprefix("http://")


def test_the_longest_prefix_wins() -> None:
    routes = parse_routes(
        ["https://a.example=py:m:short", "https://a.example/hooks/deep=py:m:long"]
    )
    chosen = route_for(routes, "https://a.example/hooks/deep/x")
    assert chosen == Route("https://a.example/hooks/deep", "py:m:long")
    assert route_for(routes, "https://b.example/hooks") is None


def test_routes_are_kept_with_the_run_for_resume(tmp_path: Path, belt_home: Path) -> None:
    gated = {"user": "first", "model": [{"tool_calls": [DELETE]}, {"say": "ok"}]}
    then = {"user": "second", "model": [{"tool_calls": [DELETE]}, {"say": "ok"}]}
    hooks = [
        webhook("https://policy.example.com/hooks"),
        {"event": "agent.tool_call", "type": "gate"},
    ]
    path = scenario(tmp_path, hooks, gated, then)
    report, _ = run_scenario(
        scenario=path, routes=["https://policy.example.com=py:tests.pyhooks:record"]
    )
    run_id = report["runs"][0]["id"]
    assert report["runs"][0]["state"] == "input_required"
    private = open_store().read_private("hooks", report["simulation"]["id"])
    assert private["routes"] == [
        {"prefix": "https://policy.example.com", "target": "py:tests.pyhooks:record"}
    ]
    [gate] = report["interrupts"]
    assert belt("interrupt", "resolve", gate["id"], "allow").exit_code == 0
    pyhooks.received.clear()
    report, _ = resume_run(run_id=run_id)
    # The second turn's tool call went where the route sends it, in the resuming process.
    assert [p["chat_id"] for p in pyhooks.received] == [report["chat"]["id"]]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("https://a.example", "expected URL_PREFIX=TARGET"),
        ("a.example=py:m:f", "the prefix must start with http:// or https://"),
        ("https://a.example=py:nofunc", "an in-process handler is py:MODULE:FUNC"),
        ("https://a.example=ftp://b.example", "the target must be an absolute http://"),
    ],
)
def test_a_bad_route_is_a_usage_error(spec: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=message):
        parse_route(spec)
    result = belt("sim", "run", str(scenario(tmp_path, [])), "--route", spec)
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_prefix_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="given twice"):
        parse_routes(["https://a.example=py:m:f", "https://a.example=py:m:g"])


def test_a_route_target_that_cannot_be_imported_is_refused(tmp_path: Path) -> None:
    result = belt(
        "sim", "run", str(scenario(tmp_path, [])), "--route", "https://a.example=py:tests.nope:f"
    )
    assert result.exit_code == 3
    assert "--route https://a.example: no module named 'tests.nope'" in result.stderr


def test_a_nexus_scenario_takes_no_routes(tmp_path: Path) -> None:
    path = tmp_path / "nexus.toml"
    path.write_text('dialect = "nexus"\n[[turns]]\nuser = "hi"\n[[turns.model]]\nsay = "hello"\n')
    result = belt("sim", "run", str(path), "--route", "https://a.example=py:m:f")
    assert result.exit_code == 2
    assert "a Nexus scenario's hooks are executor tools" in result.stderr


# -- properties ------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


ANSWERS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20, alphabet=st.characters(codec=None))
    | st.sampled_from([{1, 2}, object(), b"bytes"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["decision", "reason", "inject", "system", "x"]), inner)
    ),
    max_leaves=10,
)


@given(ANSWERS | JSON)
@settings(max_examples=300, deadline=None)
def test_any_answer_is_a_response_or_a_problem(value: Any) -> None:
    answer = read_value(value)
    response, problem = answer.response, answer.problem
    assert (response is None) != (problem is None)
    if response is not None:
        # What is accepted can be stored: JSON with nothing JSON cannot hold.
        json.dumps(response.model_dump(mode="json"), allow_nan=False).encode("utf-8")


def test_an_answer_json_cannot_hold_is_a_failure() -> None:
    for answer in ({"reason": "\ud800"}, {"override": float("nan")}, {"override": {1, 2}}):
        read = read_value(answer)
        assert read.response is None
        assert read.problem is not None and read.problem.startswith(
            "it is not JSON a webhook could send"
        )


DECODING = InProcess()
"""The caller of the property below, one for all its examples."""


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner),
            max_leaves=10,
        ),
        max_size=4,
    )
)
@settings(max_examples=100, deadline=None)
def test_the_handler_gets_what_a_webhook_decodes_from_its_body(payload: dict[str, Any]) -> None:
    received: list[Any] = []
    result = DECODING.call("py:m:keep", received.append, payload, timeout=5)
    try:
        body = encode_payload(payload)
    except UnicodeEncodeError:  # a lone surrogate: no webhook could be sent it
        assert result.error == "the payload cannot be sent as JSON: UnicodeEncodeError"
        return
    assert result.error is None
    # The same values, types and order as json.loads gives of the body (NaN included).
    assert encode_payload(received[0]) == encode_payload(json.loads(body)) == body


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_any_route_spec_parses_or_is_a_usage_error(spec: str) -> None:
    try:
        route = parse_route(spec)
    except UsageError as exc:
        assert exc.message.startswith("--route ")
    else:
        assert route.prefix.startswith(("http://", "https://"))


@given(st.text(max_size=40))
@settings(max_examples=100, deadline=None)
def test_an_exception_message_is_made_printable(message: str) -> None:
    def raising(payload: Any) -> None:
        raise RuntimeError(message)

    caller = InProcess()
    try:
        result = caller.call("py:m:f", raising, {}, timeout=5)
    finally:
        caller.close()
    assert result.error is not None
    assert result.error.isprintable()


def test_a_loaded_handler_is_imported_once_per_simulation() -> None:
    caller = InProcess()
    try:
        first = caller.handler("py:tests.pyhooks:deny")
        assert caller.handler("py:tests.pyhooks:deny") is first
        with pytest.raises((NotFound, InvalidInput)):
            caller.handler("py:tests.pyhooks:missing")
    finally:
        caller.close()


def test_a_simulation_after_another_reuses_its_idle_worker_thread_not_a_busy_one() -> None:
    import threading
    import time

    def ident(payload: Any) -> dict[str, Any]:
        return {"decision": "deny", "reason": str(threading.get_ident())}

    def reason(caller: InProcess) -> str:
        result = caller.call("py:m:ident", ident, {}, timeout=5)
        assert result.response is not None, result.error
        return str(result.response.reason)

    first, second = InProcess(), InProcess()
    try:
        before = reason(first)
    finally:
        first.close()
    try:
        assert reason(second) == before  # the same thread, not a new one
    finally:
        second.close()
    # A worker still in a call when its simulation closes is not handed to the next one.
    pyhooks.release.clear()
    stuck = InProcess()
    blocked = threading.Thread(
        target=stuck.call, args=("py:m:block", pyhooks.block, {}), kwargs={"timeout": 30}
    )
    blocked.start()
    try:
        deadline = time.monotonic() + 30
        while not any(worker.busy for worker in list(stuck._workers.values())):
            assert time.monotonic() < deadline, "the blocking call never started"
            threading.Event().wait(0.005)
        stuck_thread = next(iter(stuck._workers.values())).thread.ident
        stuck.close()
        third = InProcess()
        try:
            assert reason(third) != str(stuck_thread)
        finally:
            third.close()
    finally:
        pyhooks.release.set()
        blocked.join(30)


def test_a_handler_that_closes_its_worker_pipe_fails_that_call_only() -> None:
    import os
    import threading

    caller = InProcess()
    threads: list[threading.Thread] = []

    def worker_ends() -> tuple[int, ...]:
        return next(iter(caller._workers.values())).ends

    def closes_answer_pipe(payload: Any) -> None:
        os.close(worker_ends()[2])  # the end belt reads the answer from

    def closes_call_pipe(payload: Any) -> None:
        os.close(worker_ends()[0])  # the end the worker is handed its calls on

    def which(payload: Any) -> None:
        threads.append(threading.current_thread())

    try:
        assert caller.call("py:m:which", which, {}, timeout=5).error is None
        result = caller.call("py:m:closes", closes_answer_pipe, {}, timeout=5)
        assert result.error == "py:m:closes closed the pipe belt reads its answer from"
        assert caller.call("py:m:which", which, {}, timeout=5).error is None
        # A call that closed the pipe its worker is handed calls on returned: the next call
        # finds the pipe closed and goes to a new worker.
        assert caller.call("py:m:closes", closes_call_pipe, {}, timeout=5).error is None
        assert caller.call("py:m:which", which, {}, timeout=5).error is None
        assert len(set(threads)) == 3  # a new worker thread after each
    finally:
        caller.close()


@pytest.mark.parametrize(
    ("end", "error"),
    [
        (0, None),  # where the worker reads its calls
        (1, None),  # where belt writes them
        (2, "py:m:closes closed the pipe belt reads its answer from"),
        (3, "py:m:closes closed the pipe belt reads its answer from"),  # where the worker answers
    ],
)
def test_a_handler_that_closes_any_end_of_its_pipes_leaves_the_next_call_to_a_new_worker(
    end: int, error: str | None
) -> None:
    import os

    caller = InProcess()
    olds = []

    def closes(payload: Any) -> None:
        olds.append(next(iter(caller._workers.values())))
        os.close(olds[0].ends[end])

    try:
        assert caller.call("py:m:closes", closes, {}, timeout=5).error == error
        assert caller.call("py:m:allow", pyhooks.allow, {}, timeout=5).error is None
        assert next(iter(caller._workers.values())) is not olds[0]
        olds[0].thread.join(5)
        assert not olds[0].thread.is_alive()  # it ended, touching no end again
    finally:
        caller.close()


def test_a_worker_whose_pipe_end_a_handler_closed_never_reads_the_file_that_takes_its_number() -> (
    None
):
    # Another file takes a closed end's number: here the handler's own pipe, holding a byte (put
    # there with dup2, which no other thread can race), as a new worker's pipe did in a run where
    # the old thread read after the next call.
    import os
    import select

    caller = InProcess()
    calls: list[int] = []
    opened: list[int] = []

    def closes_and_reopens(payload: Any) -> None:
        calls.append(1)
        given = next(iter(caller._workers.values())).ends[0]
        read, write = os.pipe()
        os.dup2(read, given)  # closes the worker's end and puts the handler's pipe in its place
        os.close(read)
        opened.extend((given, write))
        os.write(write, b"c")

    try:
        assert caller.call("py:m:closes", closes_and_reopens, {}, timeout=5).error is None
        old = next(iter(caller._workers.values()))
        assert caller.call("py:m:allow", pyhooks.allow, {}, timeout=5).error is None
        old.thread.join(5)
        assert not old.thread.is_alive()
        assert calls == [1]
        assert select.select([opened[0]], [], [], 0)[0] == [opened[0]]  # its byte is unread
        assert next(iter(caller._workers.values())) is not old
    finally:
        caller.close()
        for fd in opened:
            os.close(fd)


def foreign_write_end_in_place_of(fd: int) -> int:
    """User code's mischief: a pipe of its own whose write end takes ``fd``'s number (dup2, which
    no other thread can race); its read end, to see what was written there."""
    import os

    read, write = os.pipe()
    os.dup2(write, fd)
    os.close(write)
    return read


def nothing_written_and_still_open(read: int) -> bool:
    """Whether the foreign pipe's write end is still open and nothing was written to it (a closed
    write end reads as end-of-file, which is readable)."""
    import select

    return select.select([read], [], [], 0)[0] == []


def test_an_import_that_puts_a_file_in_place_of_a_pipe_end_leaves_that_file_alone() -> None:
    # A handler module's top-level code runs in the caller's thread, between two calls.
    import contextlib
    import os

    caller = InProcess(load=lambda spec: pyhooks.allow)
    foreign: list[int] = []

    def loads(spec: str) -> Any:
        old = next(iter(caller._workers.values()))
        foreign.extend((foreign_write_end_in_place_of(old.go), old.go))
        return pyhooks.allow

    try:
        assert caller.deliver("py:m:first", {}, timeout=5).error is None
        old = next(iter(caller._workers.values()))
        caller.load = loads
        assert caller.deliver("py:m:second", {}, timeout=5).error is None
        assert next(iter(caller._workers.values())) is not old
        old.thread.join(5)  # its pipe's writer is gone: it ends, closing only its own ends
        assert not old.thread.is_alive()
        assert nothing_written_and_still_open(foreign[0])
    finally:
        caller.close()
        for fd in foreign:
            with contextlib.suppress(OSError):  # the code before closed one, not its own
                os.close(fd)


def test_an_idle_worker_whose_pipe_end_was_taken_meanwhile_is_not_reused() -> None:
    import contextlib
    import os

    first = InProcess()
    assert first.call("py:m:allow", pyhooks.allow, {}, timeout=5).error is None
    old = next(iter(first._workers.values()))
    first.close()  # idle now, for the next simulation
    read = foreign_write_end_in_place_of(old.go)
    caller = InProcess()
    try:
        assert caller.call("py:m:allow", pyhooks.allow, {}, timeout=5).error is None
        assert next(iter(caller._workers.values())) is not old
        old.thread.join(5)
        assert not old.thread.is_alive()
        assert nothing_written_and_still_open(read)
    finally:
        caller.close()
        for fd in (read, old.go):
            with contextlib.suppress(OSError):  # the code before closed one, not its own
                os.close(fd)


def test_a_forked_process_closes_the_pipes_of_the_idle_workers_it_did_not_get() -> None:
    import os

    caller = InProcess()
    try:
        assert caller.call("py:m:allow", pyhooks.allow, {}, timeout=5).error is None
        ends = next(iter(caller._workers.values())).ends
    finally:
        caller.close()  # its worker waits, idle, for the next simulation
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's exit status is the check
        open_ends = 0
        for fd in ends:
            try:
                os.fstat(fd)
                open_ends += 1
            except OSError:
                pass
        os._exit(open_ends)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
