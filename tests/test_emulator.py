"""The agent routes of `belt serve` over real HTTP: emulated chats, tools, approvals, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.emulator.conversation import parse_run_request
from belt.errors import InvalidInput
from belt.server.agent_routes import NOT_EMULATED, OTHER_NAMESPACES
from belt.server.app import create_app
from belt.store import Store, open_store
from tests.cli.runner import belt
from tests.hookapp import hook_app
from tests.loopback import CLIENT
from tests.servers import running
from tests.waiting import eventually

inferencesh = pytest.importorskip("inferencesh")

MODEL = """
[[rules]]
match = "delete *"
  [[rules.model]]
  say = "Deleting it."
  tool_calls = [
    { name = "delete_file", arguments = { path = "/etc/passwd" }, result = "deleted" },
  ]
  [[rules.model]]
  say = "Done."

[[rules]]
match = "re:^twice"
  [[rules.model]]
  say = "Twice."
  tool_calls = [
    { name = "delete_file", arguments = { path = "/a" }, result = "deleted a" },
  ]
  [[rules.model]]
  say = "Again."
  tool_calls = [
    { name = "delete_file", arguments = { path = "/b" }, result = "deleted b" },
  ]
  [[rules.model]]
  say = "Both gone."

[[rules]]
match = "finish"
  [[rules.model]]
  tool_calls = [ { name = "finish", arguments = { answer = 42 } } ]
  [[rules.model]]
  say = "Finished."

[[rules]]
match = "slow"
  [[rules.model]]
  say = "Working on it."
  tool_calls = [ { name = "lookup", arguments = {} , result = "found" } ]
  [[rules.model]]
  say = "Found it."

[[rules]]
match = "break"
error = "model overloaded"
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.toml"
    path.write_text(MODEL)
    return path


@pytest.fixture
def api(model: Path) -> Iterator[str]:
    with running(create_app(sweep_interval=0, model=model)) as url:
        yield url


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Store]]:
    """One server and its store for the module's tests whose requests are refused or only read
    (nothing they send changes what the next one gets): its URL and its store."""
    root = tmp_path_factory.mktemp("refusing")
    (root / "model.toml").write_text(MODEL)
    store = Store(root / "store", shapes=True)
    with running(create_app(store=store, sweep_interval=0, model=root / "model.toml")) as url:
        yield url, store


def run(api: str, text: str, chat_id: str | None = None, **agent: Any) -> httpx.Response:
    body: dict[str, Any] = {"chat_id": chat_id, "input": {"text": text}}
    if chat_id is None:
        body["agent_config"] = agent.pop("config", {"name": "tester", **agent})
        body["agent_name"] = body["agent_config"].get("name")
    return CLIENT.post(f"{api}/agents/run", json=body, timeout=30)


def started(api: str, text: str, **agent: Any) -> dict[str, Any]:
    reply = run(api, text, **agent)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["success"] is True
    data: dict[str, Any] = body["data"]
    return data


def chat(api: str, chat_id: str) -> dict[str, Any]:
    data: dict[str, Any] = CLIENT.get(f"{api}/chats/{chat_id}").json()["data"]
    return data


def settled(api: str, chat_id: str, status: str = "idle") -> dict[str, Any]:
    found: dict[str, Any] = eventually(
        lambda: (c := chat(api, chat_id))["status"] == status and c, f"chat {status}"
    )
    return found


def invocations(found: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for m in found["chat_messages"] for i in m.get("tool_invocations") or []]


def stream_lines(api: str, chat_id: str, *, replay_only: bool = False) -> list[dict[str, Any]]:
    """The lines of a chat's stream until the server ends it (or, ``replay_only``, until the
    chat event that ends the replay)."""
    lines = []
    with httpx.stream("GET", f"{api}/chats/{chat_id}/stream", timeout=30) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"] == "application/x-ndjson"
        for raw in reply.iter_lines():
            if raw.strip():
                lines.append(json.loads(raw))
            if replay_only and lines and lines[-1].get("event") == "chats":
                break
    return lines


# -- messages and the model script -------------------------------------------------------------


def test_the_plain_model_answers_and_the_chat_keeps_growing(api: str) -> None:
    first = started(api, "hello")
    user, reply = first["user_message"], first["assistant_message"]
    assert (user["role"], user["content"][0]["text"]) == ("user", "hello")
    assert (reply["role"], reply["status"], reply["content"]) == ("assistant", "pending", [])
    chat_id = reply["chat_id"]
    done = settled(api, chat_id)
    answer = done["chat_messages"][-1]
    # The reply's id was set aside when the run began: the answer carries it.
    assert (answer["id"], answer["status"]) == (reply["id"], "ready")
    assert answer["content"][0]["text"] == "You said: hello"

    second = run(api, "and again", chat_id=chat_id)
    assert second.status_code == 200
    done = settled(api, chat_id)
    assert [m["role"] for m in done["chat_messages"]] == ["user", "assistant"] * 2
    assert done["chat_messages"][-1]["content"][0]["text"] == "You said: and again"
    assert CLIENT.get(f"{api}/chats/{chat_id}/status").json()["data"]["status"] == "idle"


def test_a_rule_picks_the_reply_and_a_finish_call_is_the_chats_output(api: str) -> None:
    chat_id = started(api, "finish")["assistant_message"]["chat_id"]
    done = settled(api, chat_id)
    assert done["output"] == {"answer": 42}
    assert done["chat_messages"][-1]["content"][0]["text"] == "Finished."


def test_a_scripted_model_error_fails_the_run_and_the_failure_row_is_the_reply(api: str) -> None:
    reply = started(api, "break")["assistant_message"]
    done = settled(api, reply["chat_id"])
    last = done["chat_messages"][-1]
    assert last["id"] == reply["id"] and last["role"] == "event"
    assert last["content"][0]["event"]["run"]["state"] == "failed"
    assert "model overloaded" in last["content"][0]["text"]


def test_a_message_to_a_busy_chat_is_a_conflict(api: str) -> None:
    gated = {"hooks": [{"event": "agent.tool_call", "type": "gate"}]}
    chat_id = started(api, "delete it", **gated)["assistant_message"]["chat_id"]
    settled(api, chat_id, "awaiting_input")
    refused = run(api, "hello?", chat_id=chat_id)
    assert refused.status_code == 409
    body = refused.json()
    assert body["success"] is False and body["error"]["code"] == "conflict"
    assert body["error"]["message"] == body["detail"]
    assert "awaiting_input" in body["detail"]


# -- tools: gates, approvals, client tools -------------------------------------------------------


def test_a_tool_that_requires_approval_waits_and_is_rejected_with_a_reason(api: str) -> None:
    tools = [{"name": "delete_file", "type": "app", "require_approval": True}]
    chat_id = started(api, "delete it", tools=tools)["assistant_message"]["chat_id"]
    held = settled(api, chat_id, "awaiting_input")
    assert held["active_run"]["state"] == "input_required"
    assert held["active_run"]["interrupt_reason"] == "tool_approval"
    (approval,) = held["pending_interrupts"]
    (call,) = invocations(held)
    assert call["status"] == "awaiting_approval"
    assert (approval["reason"], approval["resource_type"]) == ("tool_approval", "tool_invocation")
    assert approval["resource_id"] == call["id"]
    assert approval["meta"] == {
        "tool_invocation_id": call["id"],
        "tool_name": "delete_file",
        "arguments": {"path": "/etc/passwd"},
    }
    refused = CLIENT.post(f"{api}/tools/{call['id']}/reject", json={"reason": "not today"})
    assert refused.status_code == 200
    done = settled(api, chat_id)
    (call,) = invocations(done)
    assert (call["status"], call["result"]) == ("failed", "rejected: not today")
    again = CLIENT.post(f"{api}/tools/{call['id']}/invoke")
    assert again.status_code == 409
    assert CLIENT.post(f"{api}/tools/ti_nothing/invoke").status_code == 404


def test_always_allow_approves_and_the_chat_stops_asking_for_that_tool(api: str) -> None:
    tools = [{"name": "delete_file", "require_approval": True}]
    chat_id = started(api, "twice", tools=tools)["assistant_message"]["chat_id"]
    held = settled(api, chat_id, "awaiting_input")
    (call,) = invocations(held)
    allowed = CLIENT.post(
        f"{api}/chats/{chat_id}/tools/{call['id']}/always-allow", json={"tool_name": "x"}
    )
    assert allowed.status_code == 200
    done = settled(api, chat_id)
    assert [(i["status"], i["result"]) for i in invocations(done)] == [
        ("completed", "deleted a"),
        ("completed", "deleted b"),
    ]
    assert done["agent_data"]["always_allow"] == ["delete_file"]
    store = open_store()
    reasons = [store.read("interrupt", i)["reason"] for i in store.list_ids("interrupt")]
    assert reasons == ["tool_approval"]


def test_a_gate_and_an_approval_on_one_call_are_settled_in_turn(api: str) -> None:
    agent = {
        "hooks": [{"event": "agent.tool_call", "type": "gate"}],
        "tools": [{"name": "delete_file", "require_approval": True}],
    }
    chat_id = started(api, "delete it", **agent)["assistant_message"]["chat_id"]
    held = settled(api, chat_id, "awaiting_input")
    (gate,) = held["pending_interrupts"]
    assert gate["reason"] == "hook_gate"
    resolved = CLIENT.post(f"{api}/interrupts/{gate['id']}/resolve", json={"decision": "allow"})
    assert resolved.status_code == 200
    approval = eventually(
        lambda: [i for i in chat(api, chat_id)["pending_interrupts"] if i["id"] != gate["id"]],
        "the approval after the gate",
    )[0]
    assert approval["reason"] == "tool_approval"
    assert CLIENT.post(f"{api}/tools/{approval['resource_id']}/invoke").status_code == 200
    done = settled(api, chat_id)
    assert invocations(done)[0]["status"] == "completed"


def test_a_client_tool_keeps_its_run_working_until_its_result_is_posted(api: str) -> None:
    tools = [{"name": "delete_file", "type": "client"}]
    chat_id = started(api, "delete it", tools=tools)["assistant_message"]["chat_id"]

    def waiting() -> dict[str, Any] | None:
        found = chat(api, chat_id)
        run = found["active_run"] or {}
        return found if run.get("interrupt_reason") == "client_tool" else None

    held = eventually(waiting, "the client tool waits")
    assert held["status"] == "busy" and held["active_run"]["state"] == "working"
    assert held["active_run"]["interrupt_reason"] == "client_tool"
    (call,) = invocations(held)
    assert call["type"] == "client"
    # A run waiting for its client is held, not interrupted.
    assert "interrupted" not in held["active_run"]
    bad = CLIENT.post(f"{api}/tools/{call['id']}", json={"result": {"not": "a string"}})
    assert bad.status_code == 422
    assert bad.json()["error"]["code"] == "validation_error"
    posted = CLIENT.post(f"{api}/tools/{call['id']}", json={"result": "moved to trash"})
    assert posted.status_code == 200
    done = settled(api, chat_id)
    (call,) = invocations(done)
    assert (call["status"], call["result"]) == ("completed", "moved to trash")
    tool_row = next(m for m in done["chat_messages"] if m["role"] == "tool")
    assert tool_row["content"][0]["text"] == "moved to trash"
    assert CLIENT.post(f"{api}/tools/{call['id']}", json={"result": "x"}).status_code == 409


def test_stop_cancels_a_run_held_at_a_gate_and_the_chat_takes_messages_again(api: str) -> None:
    gated = {"hooks": [{"event": "agent.tool_call", "type": "gate"}]}
    reply = started(api, "delete it", **gated)["assistant_message"]
    chat_id = reply["chat_id"]
    settled(api, chat_id, "awaiting_input")
    stopped = CLIENT.post(f"{api}/chats/{chat_id}/stop")
    assert stopped.status_code == 200
    assert stopped.json()["data"]["stopped"] == reply["agent_run_id"]
    done = chat(api, chat_id)
    assert done["status"] == "idle" and done["pending_interrupts"] == []
    assert invocations(done)[0]["status"] == "cancelled"
    assert CLIENT.post(f"{api}/chats/{chat_id}/stop").json()["data"]["stopped"] is None
    assert run(api, "hello", chat_id=chat_id).status_code == 200
    settled(api, chat_id)


def test_settings_switch_the_hooks_of_an_emulated_chat_off(api: str) -> None:
    with hook_app() as hooks:
        agent = {"hooks": [{"event": "agent.turn_start", "type": "webhook", "handler": hooks.url}]}
        chat_id = started(api, "hello", **agent)["assistant_message"]["chat_id"]
        settled(api, chat_id)
        assert hooks.events() == ["agent.turn_start"]
        off = CLIENT.post(f"{api}/chats/{chat_id}/settings", json={"disable_hooks": True})
        assert off.status_code == 200
        assert run(api, "again", chat_id=chat_id).status_code == 200
        settled(api, chat_id)
        assert hooks.events() == ["agent.turn_start"]


def test_a_webhook_that_answers_too_late_is_cut_at_its_deadline(api: str) -> None:
    with hook_app(slow=3) as hooks:
        slow = {"event": "agent.turn_start", "type": "webhook", "handler": hooks.url + "/slow"}
        chat_id = started(api, "hello", hooks=[{**slow, "timeout": 1}])["assistant_message"][
            "chat_id"
        ]
        done = settled(api, chat_id)
    (row,) = [m for m in done["chat_messages"] if m["role"] == "event"]
    hook = row["content"][0]["event"]["hook"]
    assert hook["error"].endswith("did not answer within 1 s")
    assert done["chat_messages"][-1]["content"][0]["text"] == "You said: hello"


def test_an_injection_reaches_the_context_and_the_stream(api: str) -> None:
    def decide(name: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"decision": "allow", "inject": {"content": "Be brief.", "ttl_turns": 1}}

    with hook_app(decide) as hooks:
        agent = {"hooks": [{"event": "agent.turn_start", "type": "webhook", "handler": hooks.url}]}
        chat_id = started(api, "hello", **agent)["assistant_message"]["chat_id"]
        done = settled(api, chat_id)
    roles = [m["role"] for m in done["chat_messages"]]
    assert roles == ["user", "event", "injection", "assistant"]
    replay = stream_lines(api, chat_id, replay_only=True)
    events = [line["event"] for line in replay if "event" in line]
    assert events.count("chat_messages") == 4


# -- the stream ----------------------------------------------------------------------------------


def test_the_stream_replays_a_finished_chat_with_deltas_then_the_idle_chat(api: str) -> None:
    chat_id = started(api, "hello there")["assistant_message"]["chat_id"]
    settled(api, chat_id)
    lines = stream_lines(api, chat_id, replay_only=True)
    names = [line["event"] for line in lines]
    assert names[0] == "chat_messages" and names[-1] == "chats"
    deltas = [line["data"] for line in lines if line["event"] == "delta"]
    assert "".join(d["delta"]["response"] for d in deltas) == "You said: hello there"
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    assert all(len(d["delta"]["response"]) <= 4 for d in deltas)
    assert names.index("delta") < len(names) - 2  # deltas come before the answer itself
    final = lines[-1]["data"]
    assert final["active_run"] is None and final["status"] == "idle"
    assert "chat_messages" not in final


def test_a_stream_opened_before_a_message_follows_the_run_and_ends_with_it(api: str) -> None:
    import threading

    chat_id = started(api, "hello")["assistant_message"]["chat_id"]
    settled(api, chat_id)
    lines: list[dict[str, Any]] = []
    client = httpx.Client(timeout=30)
    connected = threading.Event()

    def read() -> None:
        with client.stream("GET", f"{api}/chats/{chat_id}/stream") as reply:
            for raw in reply.iter_lines():
                lines.append(json.loads(raw))
                connected.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert connected.wait(30)
        # The run of this message may begin and end between two looks of the stream: it ends
        # the stream all the same.
        assert run(api, "slow", chat_id=chat_id).status_code == 200
        reader.join(timeout=30)
        assert not reader.is_alive(), "the stream did not end with the run"
    finally:
        client.close()
    chats = [line["data"] for line in lines if line.get("event") == "chats"]
    assert chats[0]["status"] == "idle"
    assert chats[-1]["status"] == "idle" and chats[-1]["active_run"] is None
    texts = [
        line["data"]["content"][0]["text"]
        for line in lines
        if line.get("event") == "chat_messages" and line["data"]["role"] == "assistant"
    ]
    assert texts[-1] == "Found it."


def test_a_silent_stream_sends_heartbeats(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import belt.server.stream

    monkeypatch.setattr(belt.server.stream, "HEARTBEAT", 0.1)
    chat_id = started(api, "hello")["assistant_message"]["chat_id"]
    settled(api, chat_id)
    lines = []
    with httpx.stream("GET", f"{api}/chats/{chat_id}/stream", timeout=30) as reply:
        for raw in reply.iter_lines():
            lines.append(json.loads(raw))
            if lines[-1] == {"type": "heartbeat"}:
                break
    assert lines[-1] == {"type": "heartbeat"}


def test_a_stream_of_an_unknown_chat_is_404(refusing: tuple[str, Store]) -> None:
    api, _ = refusing
    reply = CLIENT.get(f"{api}/chats/ch_nope/stream")
    assert reply.status_code == 404
    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["error"] == {"code": "not_found", "message": "no chat ch_nope"}


# -- what is refused -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"chat_id": None}, "input: expected an object with text"),
        ({"input": {"text": 5}, "agent_config": {}}, "input.text: expected a string"),
        ({"input": {"text": "hi"}}, "agent: a new chat needs its agent"),
        ({"input": {"text": "hi"}, "agent_config": []}, "agent_config: expected an object"),
        ({"input": {"text": "hi"}, "agent_id": "ag_1"}, "agent_id: belt serve has no stored"),
        ({"input": {"text": "hi"}, "agent": "a/b@1", "agent_config": {}}, "name the agent once"),
        ({"input": {"text": "hi"}, "agent": "../etc"}, "agent: expected a template ref"),
        ({"input": {"text": "hi"}, "agent_config": {}, "context": {"a": 1}}, "context: expected"),
        (
            {"input": {"text": "hi"}, "agent_config": {"hooks": [{"event": "agent.nope"}]}},
            "agent_config.hooks[0]",
        ),
        (
            {
                "input": {"text": "hi"},
                "agent_config": {
                    "hooks": [{"event": "agent.start", "type": "webhook", "handler": "ftp://x"}]
                },
            },
            "agent_config.hooks[0].handler",
        ),
        (
            {
                "input": {"text": "hi"},
                "agent_config": {"tools": [{"name": "x", "approval_timeout": -1}]},
            },
            "agent_config.tools[0].approval_timeout",
        ),
        ({"input": {"text": "\ud800"}, "agent_config": {}}, "lone surrogate"),
        ({"chat_id": "../x", "input": {"text": "hi"}}, "invalid chat_id"),
    ],
)
def test_a_bad_request_is_422_naming_the_field_and_writes_nothing(
    refusing: tuple[str, Store], body: dict[str, Any], detail: str
) -> None:
    api, store = refusing
    reply = CLIENT.post(
        f"{api}/agents/run",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert detail in problem["detail"]
    assert problem["error"] == {"code": "validation_error", "message": problem["detail"]}
    assert problem["success"] is False and problem["status"] == 422
    assert store.list_ids("chat") == []


def test_the_sdks_learning_hooks_run_as_builtins(api: str) -> None:
    learning = inferencesh.learning_hooks(suggest=True, learn=True)
    chat_id = started(api, "hello", hooks=learning)["assistant_message"]["chat_id"]
    done = settled(api, chat_id)
    assert done["chat_messages"][-1]["content"][0]["text"] == "You said: hello"
    store = open_store()
    (run_id,) = [i for i in store.list_ids("run") if store.read("run", i)["chat_id"] == chat_id]
    executed = [r["handler"] for r in store.read_log("events", run_id)]
    assert "belt:suggest" in executed and "belt:extract" in executed


def test_an_unknown_chat_is_404_and_a_simulated_one_is_not_emulated(
    api: str, tmp_path: Path
) -> None:
    assert run(api, "hi", chat_id="ch_nope").status_code == 404
    scenario = tmp_path / "s.toml"
    scenario.write_text('[[turns]]\nuser = "hi"\n[[turns.model]]\nsay = "hello"\n')
    assert belt("sim", "run", str(scenario)).exit_code == 0
    (chat_id,) = open_store().list_ids("chat")
    refused = run(api, "hi", chat_id=chat_id)
    assert refused.status_code == 409
    assert "not an emulated chat" in refused.json()["detail"]


def test_an_unknown_template_agent_is_404_with_a_hint(refusing: tuple[str, Store]) -> None:
    api, _ = refusing
    reply = CLIENT.post(f"{api}/agents/run", json={"input": {"text": "hi"}, "agent": "acme/x@1"})
    assert reply.status_code == 404
    assert "started without agent files" in reply.json()["detail"]


@pytest.mark.parametrize(("method", "path"), NOT_EMULATED)
def test_every_route_not_emulated_is_501_naming_it(
    refusing: tuple[str, Store], method: str, path: str
) -> None:
    api, _ = refusing
    concrete = path.replace("{chat_id}", "ch_1").replace("{message_id}", "msg_1")
    concrete = concrete.replace("{agent:path}", "acme/helper").replace("{agent_id}", "ag_1")
    reply = CLIENT.request(method, f"{api}{concrete}", json={})
    assert reply.status_code == 501, reply.text
    problem = reply.json()
    assert problem["route"] == f"{method} {path}"
    assert f"does not emulate {method} {path}" in problem["detail"]
    assert problem["error"]["message"] == problem["detail"]
    assert problem["success"] is False


@pytest.mark.parametrize("namespace", OTHER_NAMESPACES)
def test_the_sdks_other_namespaces_are_501(refusing: tuple[str, Store], namespace: str) -> None:
    api, _ = refusing
    for path in (f"/{namespace}", f"/{namespace}/x/y"):
        reply = CLIENT.post(f"{api}{path}", json={})
        assert reply.status_code == 501
        assert "does not emulate POST" in reply.json()["detail"]
    assert CLIENT.get(f"{api}/nowhere").status_code == 404


def test_the_routes_the_interrupt_commands_use_still_answer(refusing: tuple[str, Store]) -> None:
    api, _ = refusing
    assert CLIENT.get(f"{api}/agents/hook-events").status_code == 200
    assert CLIENT.get(f"{api}/agent-runs/ar_x/interrupts").json()["data"] == []


# -- the request parser holds for any JSON -------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
BODIES = st.fixed_dictionaries(
    {},
    optional={
        "chat_id": st.none() | st.text(max_size=12) | JSON,
        "input": st.fixed_dictionaries({}, optional={"text": st.text(max_size=20) | JSON}) | JSON,
        "agent": st.none() | st.text(max_size=20) | JSON,
        "agent_config": st.fixed_dictionaries(
            {}, optional={"hooks": JSON, "tools": JSON, "name": JSON}
        )
        | JSON,
        "agent_name": JSON,
        "context": JSON,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BODIES)
def test_any_body_is_parsed_or_refused_as_invalid_input(body: dict[str, Any]) -> None:
    try:
        parse_run_request(body)
    except InvalidInput as exc:
        assert exc.message


@pytest.fixture(scope="module")
def shared_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Store]]:
    from belt.store import Store as RawStore

    root = tmp_path_factory.mktemp("hostile")
    store = RawStore(root / "store", shapes=True)
    with running(create_app(store=store, sweep_interval=0)) as url:
        yield url, store


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(BODIES)
def test_any_body_gets_a_success_or_a_problem_both_sdks_read(
    shared_api: tuple[str, Store], body: dict[str, Any]
) -> None:
    url, _ = shared_api
    reply = CLIENT.post(f"{url}/agents/run", json=body, timeout=30)
    document = reply.json()
    if reply.status_code == 200:
        assert document["success"] is True and "assistant_message" in document["data"]
    else:
        assert reply.status_code in (404, 409, 422), reply.text
        assert document["success"] is False
        assert document["error"]["message"] == document["detail"]


def test_the_serve_line_for_a_runs_end_carries_its_hook_summary(model: Path) -> None:
    import socket

    reported: list[dict[str, Any]] = []

    def ended() -> list[str]:
        return [
            str(r["detail"])
            for r in list(reported)
            if r.get("kind") == "api" and " completed" in str(r.get("detail"))
        ]

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = int(sock.getsockname()[1])
        hook = {
            "event": "agent.tool_call",
            "type": "webhook",
            "handler": f"http://127.0.0.1:{port}/",
        }
        with running(create_app(sweep_interval=0, model=model, report=reported.append)) as api:
            data = started(api, "delete it", hooks=[hook])
            [line] = eventually(ended, "the line for the run's end")
    run_id = data["user_message"]["agent_run_id"]
    assert line.startswith(
        f"run {run_id} completed; hooks: 1 call(s), 1 failed (1 counted as allow)"
    )
    assert f"127.0.0.1:{port}: cannot connect to 127.0.0.1:{port}" in line
    assert line.endswith(
        f"nothing listens on 127.0.0.1:{port}: start your handler there, or fix the port in its URL"
    )
