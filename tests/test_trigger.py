from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.check.report import trigger_command
from belt.deliveries.trigger import build_payload, failure, trigger
from belt.errors import BeltError, ExitCode, InvalidInput, NotFound, UsageError
from belt.reading.inputs import read_json_object_option
from belt.server.app import create_app
from belt.store import Store
from belt.wire.catalogue import EVENTS
from belt.wire.platform import LifecycleHookPayload
from belt.wire.samples import deep_merge, sample_payload
from tests.hookapp import HookApp, hook_app
from tests.servers import REFUSED, running
from tests.vectors import SECRET


@pytest.fixture(scope="module")
def shared() -> Iterator[HookApp]:
    with hook_app() as app:
        yield app


@pytest.fixture
def target(shared: HookApp) -> Iterator[HookApp]:
    shared.received.clear()
    shared.decide = lambda name, payload: None
    yield shared


# Samples


@pytest.mark.parametrize("event", list(EVENTS))
def test_every_event_has_a_valid_sample_with_its_data_fields(event: str) -> None:
    payload = sample_payload(event)
    LifecycleHookPayload.model_validate(payload)
    assert payload["event"] == event
    assert set(payload["data"]) == set(EVENTS[event].data_fields)
    assert payload["turn_count"] == (0 if event == "agent.start" else 3)


def test_samples_name_the_data_the_spec_rows_name() -> None:
    assert sample_payload("agent.tool_call")["data"] == {
        "tool": "delete_file",
        "arguments": {"path": "/tmp/old.txt"},
    }
    assert set(sample_payload("agent.tool_result")["data"]) == {"tool", "status", "result"}
    assert set(sample_payload("agent.error")["data"]) == {"error"}


def test_sample_overrides_replace_top_level_keys() -> None:
    payload = sample_payload("agent.start", chat_id="ch_x", turn_count=7)
    assert (payload["chat_id"], payload["turn_count"]) == ("ch_x", 7)


def test_an_unknown_event_has_no_sample() -> None:
    with pytest.raises(InvalidInput, match="'agent.nope' is not a lifecycle event"):
        sample_payload("agent.nope")


def test_deep_merge_changes_only_what_it_names() -> None:
    base = sample_payload("agent.tool_call")
    merged = deep_merge(base, {"data": {"tool": "x"}, "turn_count": 9})
    assert merged["data"] == {"tool": "x", "arguments": {"path": "/tmp/old.txt"}}
    assert merged["turn_count"] == 9
    assert base["data"]["tool"] == "delete_file"


def test_build_payload_refuses_data_that_breaks_the_payload() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_payload("agent.start", {"turn_count": -2})
    assert caught.value.problems[0].startswith("payload.turn_count:")
    with pytest.raises(InvalidInput, match="changes the event"):
        build_payload("agent.start", {"event": "agent.complete"})


def test_read_data_inline_or_from_a_file(tmp_path: Path) -> None:
    assert read_json_object_option('{"a": 1}', option="--data") == {"a": 1}
    path = tmp_path / "data.json"
    path.write_text('{"data": {"tool": "y"}}')
    assert read_json_object_option(f"@{path}", option="--data") == {"data": {"tool": "y"}}
    with pytest.raises(InvalidInput, match="expected a JSON object, got an array"):
        read_json_object_option("[1]", option="--data")
    with pytest.raises(InvalidInput, match="--data"):
        read_json_object_option("{", option="--data")
    with pytest.raises(NotFound):
        read_json_object_option(f"@{tmp_path / 'missing.json'}", option="--data")


def test_set_and_unset_edit_the_sample_by_dotted_paths() -> None:
    # --data only merges, so the sample's path stayed beside the command; --unset removes it.
    merged = build_payload("agent.tool_call", {"data": {"arguments": {"command": "ls"}}})
    assert merged["data"]["arguments"] == {"path": "/tmp/old.txt", "command": "ls"}
    edited = build_payload(
        "agent.tool_call",
        unsets=["data.arguments.path"],
        sets=['data.arguments.command="rm -rf /"', "turn_count=7", 'data.tool="run_shell"'],
    )
    assert edited["data"] == {"tool": "run_shell", "arguments": {"command": "rm -rf /"}}
    assert edited["turn_count"] == 7
    # A whole value replaces what was there; objects on the way are made; lists are indexed.
    whole = build_payload("agent.tool_call", sets=['data.arguments={"a": [1, {"b": 2}]}'])
    assert whole["data"]["arguments"] == {"a": [1, {"b": 2}]}
    deeper = build_payload(
        "agent.start", sets=["data.extra.deep=true", 'data.list=[0, {"x": 1}]', "data.list.1.x=2"]
    )
    assert deeper["data"] == {"extra": {"deep": True}, "list": [0, {"x": 2}]}


@pytest.mark.parametrize(
    ("sets", "unsets", "error", "message"),
    [
        (["data.tool"], [], UsageError, "expected PATH=JSON"),
        (["data..tool=1"], [], UsageError, "expected a dotted path"),
        (["=1"], [], UsageError, "expected a dotted path"),
        (["data.tool=read_file"], [], InvalidInput, "--set data.tool: not valid JSON"),
        (["data.tool=NaN"], [], InvalidInput, "--set data.tool: not valid JSON"),
        (["data.tool=@/etc/passwd"], [], InvalidInput, "is not JSON"),
        (["data.tool.name=1"], [], InvalidInput, "data.tool is not an object or a list"),
        (['data.arguments={"a": []}', "data.arguments.a.3=1"], [], InvalidInput, "no item 3"),
        (["turn_count=-1"], [], InvalidInput, "with --set/--unset makes it invalid"),
        (['event="agent.start"'], [], InvalidInput, "changes the event"),
        ([], ["data.arguments.nope"], InvalidInput, "the payload has no data.arguments.nope"),
        ([], ["event"], InvalidInput, "makes it invalid"),
        ([], ["data.tool.x"], InvalidInput, "not an object or a list"),
    ],
)
def test_set_and_unset_refuse_what_they_cannot_do(
    sets: list[str], unsets: list[str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        build_payload("agent.tool_call", sets=sets, unsets=unsets)
    assert message in str(getattr(caught.value, "message", caught.value))


def test_a_set_value_that_is_not_json_says_to_quote_a_string() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_payload("agent.tool_call", sets=["data.tool=read_file"])
    assert caught.value.hint == "the value is JSON: a string is quoted, --set 'data.tool=\"text\"'"


def test_a_whole_payload_is_sent_as_given_without_the_sample() -> None:
    given = {
        "event": "agent.tool_call",
        "timestamp": "2026-08-11T14:00:00Z",
        "agent_id": "ag_x",
        "chat_id": "ch_x",
        "run_id": "ar_x",
        "turn_count": 0,
        "data": {"tool": "run_shell", "arguments": {"command": "ls"}},
    }
    assert build_payload("agent.tool_call", payload=given) == given
    assert build_payload("agent.tool_call", payload=given, unsets=["data"]) == {
        key: value for key, value in given.items() if key != "data"
    }
    with pytest.raises(UsageError, match="give one"):
        build_payload("agent.tool_call", {"turn_count": 1}, payload=given)
    with pytest.raises(InvalidInput) as caught:
        build_payload("agent.tool_call", payload={"event": "agent.tool_call", "data": {}})
    assert caught.value.message == "--payload is not a LifecycleHookPayload"
    assert "payload.timestamp: Field required" in caught.value.problems
    with pytest.raises(InvalidInput, match="--payload changes the event to 'agent.start'"):
        build_payload("agent.tool_call", payload={**given, "event": "agent.start"})
    with pytest.raises(InvalidInput, match="is not a lifecycle event"):
        build_payload("agent.nope", payload=given)


def test_a_payload_option_is_read_strictly_and_bounded(tmp_path: Path) -> None:
    assert read_json_object_option('{"a": 1}', option="--payload") == {"a": 1}
    with pytest.raises(InvalidInput, match="--payload: not valid JSON"):
        read_json_object_option('{"a": NaN}', option="--payload")
    with pytest.raises(InvalidInput, match="--payload: expected a JSON object, got an array"):
        read_json_object_option("[]", option="--payload")
    with pytest.raises(InvalidInput, match="--payload: larger than the 1024 KiB limit"):
        read_json_object_option('{"a": "' + "x" * (1024 * 1024) + '"}', option="--payload")
    big = tmp_path / "big.json"
    big.write_text('{"a": "' + "x" * (1024 * 1024) + '"}')
    with pytest.raises(InvalidInput, match="larger than the 1024 KiB limit"):
        read_json_object_option(f"@{big}", option="--payload")
    with pytest.raises(NotFound):
        read_json_object_option(f"@{tmp_path / 'missing.json'}", option="--payload")


_TEXT = st.text(
    st.characters(exclude_categories=("Cs",)), max_size=20
)  # strict JSON: no lone surrogates
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(
    data=st.dictionaries(_TEXT, _JSON, max_size=5),
    to=st.from_regex(r"[a-z_./ '-]{1,20}:[a-z_]{1,10}", fullmatch=True),
)
def test_a_printed_command_gives_back_the_same_payload(data: dict[str, object], to: str) -> None:
    import shlex

    payload = {**sample_payload("agent.tool_call"), "data": data}
    command = trigger_command("agent.tool_call", f"py:{to}", payload)
    assert command.isprintable()
    argv = shlex.split(command)
    assert argv[:5] == ["belt", "trigger", "agent.tool_call", "--to", f"py:{to}"]
    assert argv[5] == "--payload"
    assert read_json_object_option(argv[6], option="--payload") == payload
    assert (
        build_payload(
            "agent.tool_call", payload=read_json_object_option(argv[6], option="--payload")
        )
        == payload
    )


@settings(max_examples=150, deadline=None)
@given(
    sets=st.lists(st.tuples(st.text(max_size=30), st.text(max_size=30)), max_size=3),
    unsets=st.lists(st.text(max_size=30), max_size=2),
)
def test_hostile_set_and_unset_are_a_payload_or_a_one_line_error(
    sets: list[tuple[str, str]], unsets: list[str]
) -> None:
    # Whatever the paths and values, the result is a valid payload or a BeltError (never a
    # traceback), and the sample itself is never changed.
    before = sample_payload("agent.tool_call")
    try:
        built = build_payload(
            "agent.tool_call", sets=[f"{path}={value}" for path, value in sets], unsets=unsets
        )
    except BeltError as exc:
        assert exc.exit_code in (2, 5)
        assert "\n" not in exc.message
    else:
        LifecycleHookPayload.model_validate(built)
    assert sample_payload("agent.tool_call")["data"] == before["data"]


# Triggers


def test_a_deny_on_a_tool_call_is_explained(target: HookApp) -> None:
    target.decide = lambda name, payload: {"decision": "deny", "reason": "path not allowed"}
    report = trigger("agent.tool_call", to=f"{target.url}/guard")
    assert report.ok
    assert report.status == 200
    assert report.body == '{"decision": "deny", "reason": "path not allowed"}'
    assert report.effect == (
        "agent.tool_call: deny → the tool is not called and completes as failed: path not allowed"
    )
    host = target.url.removeprefix("http://")
    assert report.handler == host
    assert report.transcript_row is not None
    assert report.transcript_row["text"] == f"hook agent.tool_call: {host}"
    hook = report.transcript_row["event"]["hook"]
    assert (hook["handler_type"], hook["decision"], hook["reason"]) == (
        "webhook",
        "deny",
        "path not allowed",
    )
    [(name, sent)] = target.received
    assert name == "guard"
    assert sent == report.payload


def test_a_decision_on_an_observe_only_event_is_ignored(target: HookApp) -> None:
    target.decide = lambda name, payload: {"decision": "deny"}
    report = trigger("agent.tool_result", to=f"{target.url}/x")
    assert report.effect == "agent.tool_result: observe only, the decision is ignored"


def test_an_allow_leaves_no_transcript_row(target: HookApp) -> None:
    report = trigger("agent.turn_start", to=f"{target.url}/x")
    assert report.ok
    assert report.body == ""
    assert report.response == {}
    assert report.effect == "agent.turn_start: allow → the agent continues"
    assert report.transcript_row is None


def test_an_injection_and_a_system_note_are_explained_with_their_lifetime(
    target: HookApp,
) -> None:
    target.decide = lambda name, payload: {
        "inject": {"content": "Only /tmp.", "role": "system", "ttl_turns": 5, "dedup_key": "p"},
        "system": "Be careful.",
    }
    report = trigger("agent.turn_start", to=f"{target.url}/x")
    assert report.injection == (
        "injects 'Only /tmp.' on the next turn (role system, for 5 turns, "
        "replaces earlier injections keyed 'p')"
    )
    assert report.system == "adds the permanent system note 'Be careful.' (keyed by this handler)"
    assert report.transcript_row is not None
    assert report.transcript_row["event"]["hook"]["injected"] is True


def test_an_injection_without_ttl_is_permanent(target: HookApp) -> None:
    target.decide = lambda name, payload: {"inject": {"content": "x"}}
    report = trigger("agent.start", to=f"{target.url}/x")
    assert report.injection == "injects 'x' on the next turn (permanent until replaced)"


def test_data_is_deep_merged_into_the_sample(target: HookApp) -> None:
    trigger("agent.tool_call", to=f"{target.url}/x", data={"data": {"tool": "rm"}})
    [(_, sent)] = target.received
    assert sent["data"] == {"tool": "rm", "arguments": {"path": "/tmp/old.txt"}}


def test_a_signed_trigger_passes_belt_serves_signature_check(tmp_path: Path) -> None:
    app = create_app(store=Store(tmp_path), secret=SECRET, sweep_interval=0)
    with running(app) as url:
        signed = trigger("agent.start", to=f"{url}/hooks", secret=SECRET)
        unsigned = trigger("agent.start", to=f"{url}/hooks")
    assert signed.ok
    assert signed.signed
    assert unsigned.status == 401
    assert "missing webhook-id" in unsigned.body


def test_a_failing_handler_is_explained_and_fails(target: HookApp) -> None:
    target.decide = lambda name, payload: (500, {"error": "kaput"})
    report = trigger("agent.tool_call", to=f"{target.url}/x?token=hidden")
    assert not report.ok
    assert report.status == 500
    assert report.body == '{"error": "kaput"}'
    assert (
        report.effect
        == "agent.tool_call: allow → the agent continues (a failed call counts as allow)"
    )
    assert report.transcript_row is not None
    assert "answered HTTP 500" in report.transcript_row["event"]["hook"]["error"]
    error = failure(report)
    assert error.exit_code == ExitCode.FAILURE  # it answered: a 5xx is exit 1, not 6
    assert error.message.endswith("answered HTTP 500")
    assert error.hint is not None and "2xx" in error.hint
    assert "hidden" not in str(report.to_json())


def test_an_invalid_body_fails_and_says_what_to_answer(target: HookApp) -> None:
    target.decide = lambda name, payload: {"decision": "maybe"}
    report = trigger("agent.tool_call", to=f"{target.url}/x")
    assert not report.ok
    assert report.error is not None and "decision: Input should be" in report.error
    hint = failure(report).hint
    assert hint is not None and "other keys are ignored" in hint


def test_an_answer_with_unknown_keys_counts_and_warns(target: HookApp) -> None:
    target.decide = lambda name, payload: {"decision": "deny", "colour": "red"}
    report = trigger("agent.tool_call", to=f"{target.url}/x")
    assert report.ok
    assert report.effect.startswith("agent.tool_call: deny → the tool is not called")
    assert report.warnings == ["colour: unknown key in the answer, ignored"]
    assert report.to_json()["warnings"] == report.warnings
    assert report.transcript_row is not None
    assert "error" not in report.transcript_row["event"]["hook"]


def test_an_unreachable_handler_fails_with_what_to_check() -> None:
    report = trigger("agent.start", to=f"http://{REFUSED}/hook")
    assert report.status is None
    assert report.error is not None and report.error.startswith(f"cannot connect to {REFUSED}")
    error = failure(report)
    assert error.exit_code == ExitCode.UNREACHABLE
    assert (
        error.hint
        == f"nothing listens on {REFUSED}: start your handler there, or fix the port in its URL"
    )


@pytest.mark.parametrize("url", ["ftp://example.com/x", "/relative", "http://"])
def test_a_url_that_is_not_http_is_refused_without_sending(url: str) -> None:
    with pytest.raises(InvalidInput, match="--to"):
        trigger("agent.start", to=url)


def test_a_malformed_secret_is_refused_without_sending(target: HookApp) -> None:
    with pytest.raises(InvalidInput, match="secret"):
        trigger("agent.start", to=f"{target.url}/x", secret="nope")
    assert target.received == []


def test_a_timeout_hint_says_how_long_the_handler_has() -> None:
    from belt.deliveries.trigger import TriggerReport

    report = TriggerReport(
        event="agent.start",
        handler="127.0.0.1:8787",
        payload=sample_payload("agent.start"),
        signed=False,
        status=None,
        body="",
        response=None,
        error="127.0.0.1:8787 did not answer within 30 s",
        duration_ms=30000,
        effect="",
        injection=None,
        system=None,
        transcript_row=None,
    )
    error = failure(report)
    assert error.message == "127.0.0.1:8787 did not answer within 30 s"
    assert error.exit_code == ExitCode.UNREACHABLE
    assert error.hint == (
        "the handler at 127.0.0.1:8787 must answer within 30 s: check that it does not block"
    )
