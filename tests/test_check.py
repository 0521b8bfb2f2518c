"""``belt check``: the examples' handlers pass; a handler with one defect fails the right check,
and its reproducer, run as printed, shows the same defect."""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from belt.check import generate
from belt.check.report import CheckReport, CheckResult, failure_lines
from belt.check.run import run_check
from belt.check.subjects import PLATFORM_EVENTS
from belt.cli import app
from belt.errors import InvalidInput, Unreachable, UsageError
from belt.outgoing.transport import using
from belt.reading.strictjson import decode
from belt.wire.platform import LifecycleHookPayload
from tests import checked
from tests.cli.runner import Result, belt
from tests.servers import running

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
CHECKED = f"py:{Path(checked.__file__)}"
BELT_BIN = str(Path(sys.executable).parent)


@pytest.fixture(scope="module")
def webhooks() -> Iterator[str]:
    with running(checked.app()) as url:
        yield url


@pytest.fixture(scope="module")
def module_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A state directory for the checks the module's fixtures share (each test's own is set
    after them), so that they keep their Hypothesis caches there, not in the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BELT_HOME", str(tmp_path_factory.mktemp("belt-home")))
        yield


@pytest.fixture(scope="module")
def crash(tmp_path_factory: pytest.TempPathFactory, module_home: None) -> CheckReport:
    """One check of the handler that crashes on a path that is not ASCII, its failure saved
    (``--save``), shared."""
    saved = tmp_path_factory.mktemp("crash") / "saved"
    return run_check(
        f"{CHECKED}:unicode_crash", events=["agent.tool_call"], examples=30, seed=1, save=saved
    )


@pytest.fixture(scope="module")
def blocked(webhooks: str, module_home: None) -> CheckReport:
    """One check of the webhook that answers block, shared."""
    return run_check(f"{webhooks}/block", events=["agent.tool_call"], examples=5, seed=1)


@pytest.fixture(scope="module")
def leaked(tmp_path_factory: pytest.TempPathFactory, module_home: None) -> tuple[CheckReport, Path]:
    """One check of the handler that lets /etc/passwd through, against a property that says
    deletes outside /tmp/ are denied, its failure saved under the directory given with it."""
    props = tmp_path_factory.mktemp("leaked") / "props.toml"
    props.write_text(
        '[[property]]\nname = "no deletes outside /tmp/"\ntool = "delete_file"\n'
        'unless = { path = "/tmp/*" }\ndecision = "deny"\n'
    )
    saved = props.with_name("saved")
    report = run_check(
        f"{CHECKED}:leaky",
        events=["agent.tool_call"],
        props=props,
        examples=40,
        seed=1,
        save=saved,
    )
    return report, saved


def result(report: CheckReport, check: str, event: str = "agent.tool_call") -> CheckResult:
    found = [r for r in report.results if r.check == check and r.event == event]
    assert len(found) == 1, [(r.check, r.event) for r in report.results]
    return found[0]


def failed(report: CheckReport) -> list[tuple[str, str]]:
    return [(r.check, r.event) for r in report.results if r.status == "fail"]


def in_a_shell(command: str) -> subprocess.CompletedProcess[str]:
    """Run a printed reproducer as a user would, in a shell, with this belt on PATH."""
    env = {**os.environ, "PATH": f"{BELT_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        command, shell=True, capture_output=True, text=True, env=env, timeout=60, cwd=ROOT
    )


def reproduce(command: str) -> Result:
    """Run a printed ``belt`` reproducer in-process, its words split as a shell splits them
    (``in_a_shell`` runs one as printed, in a shell and a process of its own, in
    test_the_unicode_crash_reproducer_shows_the_crash)."""
    program, *words = shlex.split(command)
    assert program == "belt", command
    return belt(*words)


# -- what is generated ----------------------------------------------------------------------------


platform_payloads = functools.cache(generate.payloads)
"""One strategy per event, drawn from by every example (building it anew in each cost more than
the drawing)."""


@pytest.mark.parametrize("event", PLATFORM_EVENTS)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_payloads_are_valid_payloads_of_their_event(event: str, data: Any) -> None:
    payload = data.draw(platform_payloads(event))
    LifecycleHookPayload.model_validate(payload)
    assert payload["event"] == event
    # Strict JSON a handler's reader takes, within the size and depth limits.
    text = json.dumps(payload, ensure_ascii=False)
    assert decode(text) == payload
    if event == "agent.start":
        assert payload["turn_count"] == 0
    if event == "agent.tool_call":
        arguments = payload["data"]["arguments"]
        size = len(json.dumps(arguments, ensure_ascii=False).encode())
        assert size <= generate.ARGUMENTS_MAX_BYTES


# -- the examples pass ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target", ["py:examples/handler.py:decide", "py:examples/tests/hooks.py:guard"]
)
def test_the_examples_handlers_pass_every_check(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    report = run_check(target, examples=8, seed=3)
    assert report.exit_code == 0
    assert not failed(report)
    assert {r.event for r in report.results} >= {"agent.tool_call", "agent.complete"}
    assert result(report, "answers").cases == 9  # the spec's sample and 8 generated
    assert result(report, "answers").latency() is not None


def test_the_examples_nexus_tools_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    report = run_check(
        "examples/nexus-hooks.toml",
        executors=[
            "execution_check=cmd:examples/nexus-ack.sh",
            "verify_before_finish=cmd:examples/nexus-verify.sh",
        ],
        examples=3,
        seed=1,
    )
    assert report.exit_code == 0, [(r.check, r.failure) for r in report.results]
    assert {r.event for r in report.results} == {"turn_start", "stop"}
    assert result(report, "result", "stop").cases == 4


def test_the_spec_policy_property_holds_for_the_examples_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    props = tmp_path / "props.toml"
    props.write_text(
        '[[property]]\nname = "no deletes outside /tmp/"\ntool = "delete_file"\n'
        'unless = { path = "path:/tmp/*" }\ndecision = "deny"\n'
    )
    report = run_check(
        "py:examples/tests/hooks.py:guard",
        events=["agent.tool_call"],
        props=props,
        examples=30,
        seed=5,
    )
    prop = result(report, "property")
    assert prop.status == "pass"
    assert prop.cases > 0


# -- one defect each ------------------------------------------------------------------------------


def test_a_handler_that_crashes_on_a_unicode_path_fails_answers(crash: CheckReport) -> None:
    report = crash
    assert failed(report) == [("answers", "agent.tool_call")]
    failure = result(report, "answers").failure
    assert failure is not None
    assert "UnicodeEncodeError" in failure.detail
    path = failure.payload["data"]["arguments"]["path"]
    assert not path.isascii()
    # Shrunk: the path is as short as a crash allows, the rest of the payload minimal.
    assert len(path) <= 3
    assert failure.payload["data"]["tool"] in ("delete_file", "0")
    LifecycleHookPayload.model_validate(failure.payload)
    assert failure.reproducer.startswith("belt trigger agent.tool_call --to py:")


def test_the_unicode_crash_reproducer_shows_the_crash(crash: CheckReport) -> None:
    failure = result(crash, "answers").failure
    assert failure is not None
    done = in_a_shell(failure.reproducer)
    # The handler answered, by raising: a failure (1), not an unreachable one (6).
    assert done.returncode == 1, done.stderr
    assert "UnicodeEncodeError" in done.stdout + done.stderr


def test_a_webhook_answering_block_fails_body(blocked: CheckReport) -> None:
    report = blocked
    assert failed(report) == [("body", "agent.tool_call")]
    failure = result(report, "body").failure
    assert failure is not None
    assert "not a LifecycleHookResponse" in failure.detail
    assert "decision" in failure.detail
    # The spec's sample fails too, yet the failure is shrunk from generated payloads.
    assert failure.payload["data"] == {"tool": "delete_file", "arguments": {}}
    assert failure.payload["agent_id"] == "ag_000000"
    # What no case reached is said to be skipped, not passed.
    deterministic = result(report, "deterministic")
    assert deterministic.status == "skip"
    assert deterministic.skipped == "not reached: an earlier check failed on every case"


def test_the_block_reproducer_shows_the_invalid_body(blocked: CheckReport) -> None:
    failure = result(blocked, "body").failure
    assert failure is not None
    done = reproduce(failure.reproducer)
    # It answered 200 with a body that is not a response: 1 (docs/cli.md's table), not 6.
    assert done.exit_code == 1, done.stderr
    assert "not a LifecycleHookResponse" in done.stdout + done.stderr


def test_a_webhook_that_hangs_on_large_arguments_fails_answers(
    webhooks: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    # /slow answers small arguments at once and hangs on large ones until the client gives up,
    # so a deadline that a small case meets even on a loaded machine tells them apart: 1 s (at a
    # load average of 12 on 2 cores a small case once took 0.57 s). No --max-time: how far a
    # loaded machine gets within it is not what is checked. A case that timed out is reported
    # as it is: shrinking it would cost the whole deadline for each smaller case tried.
    # Arguments of at most 16 KiB (still four times what /slow hangs on), so that the reproducer
    # of a barely shrunk case stays within what one command-line argument may hold (128 KiB on
    # Linux), whichever case of the batch comes first.
    monkeypatch.setattr(generate, "ARGUMENTS_MAX_BYTES", 16 * 1024)
    report = run_check(
        f"{webhooks}/slow", events=["agent.tool_call"], examples=40, seed=2, timeout=1
    )
    answers = result(report, "answers")
    assert answers.status == "fail"
    assert answers.failure is not None
    assert "did not answer within 1 s" in answers.failure.detail
    assert "shrinking" not in answers.failure.detail
    arguments = answers.failure.payload["data"]["arguments"]
    assert len(json.dumps(arguments)) > checked.LARGE
    # The reproducer gives belt trigger the same deadline, and run as printed it times out too.
    assert answers.failure.reproducer.endswith(" --timeout 1")
    done = reproduce(answers.failure.reproducer)
    assert done.exit_code == 6, done.stdout + done.stderr
    assert "did not answer within 1 s" in done.stderr


def test_a_webhook_that_accepts_unsigned_requests_fails_signature(webhooks: str) -> None:
    report = run_check(
        f"{webhooks}/unsigned",
        events=["agent.tool_call"],
        examples=3,
        seed=1,
        secret=checked.SECRET,
    )
    assert failed(report) == [("signature", "agent.tool_call")]
    signature = result(report, "signature")
    assert signature.failure is not None
    assert signature.failure.detail.startswith("accepts unsigned requests")
    for case in ("a tampered body", "another secret", "stale timestamp", "in the future"):
        assert case in signature.failure.detail
    assert "--secret" not in signature.failure.reproducer
    done = reproduce(signature.failure.reproducer)
    assert done.exit_code == 0, done.stderr  # the unsigned request is accepted
    assert "HTTP 200" in done.stdout


def test_a_verifying_webhook_passes_the_signature_cases(webhooks: str) -> None:
    report = run_check(
        f"{webhooks}/verified",
        events=["agent.tool_call", "agent.start"],
        examples=5,
        seed=1,
        secret=checked.SECRET,
    )
    assert report.exit_code == 0, [(r.check, r.failure) for r in report.results]
    # The Standard Webhooks cases and the near misses (one byte off, a prefix, another id or
    # timestamp, a v1a, entry), all handled as the spec says.
    assert result(report, "signature").cases == 15
    assert result(report, "redelivery").cases == 6


def test_a_webhook_refusing_a_repeated_webhook_id_fails_redelivery_only(webhooks: str) -> None:
    report = run_check(
        f"{webhooks}/once",
        events=["agent.tool_call"],
        examples=3,
        seed=1,
        secret=checked.SECRET,
    )
    # Each signature case has a webhook-id of its own: none is refused for being a replay.
    assert failed(report) == [("redelivery", "agent.tool_call")]
    redelivery = result(report, "redelivery").failure
    assert redelivery is not None
    assert "same webhook-id" in redelivery.detail and "HTTP 409" in redelivery.detail
    assert result(report, "signature").status == "pass"


def test_a_handler_that_lets_etc_passwd_through_fails_the_property(
    leaked: tuple[CheckReport, Path],
) -> None:
    report, _ = leaked
    assert failed(report) == [("property", "agent.tool_call")]
    prop = result(report, "property")
    assert prop.title == "no deletes outside /tmp/"
    assert prop.failure is not None
    assert prop.failure.detail == "expected deny, got allow"
    data = prop.failure.payload["data"]
    assert data["tool"] == "delete_file"
    assert not str(data["arguments"].get("path", "")).startswith(("/tmp/", "/var/"))
    done = reproduce(prop.failure.reproducer)
    assert done.exit_code == 0, done.stderr
    assert "allow" in done.stdout


# -- warnings -------------------------------------------------------------------------------------


def test_a_deny_on_an_observe_only_event_warns_and_passes() -> None:
    report = run_check(
        f"{CHECKED}:deny_everything",
        events=["agent.complete", "agent.tool_call"],
        examples=3,
        seed=1,
    )
    assert report.exit_code == 0
    complete = result(report, "decision", "agent.complete")
    assert complete.status == "warn"
    assert list(complete.warnings) == ["agent.complete: observe only, the decision is ignored"]
    assert result(report, "decision", "agent.tool_call").status == "pass"


def test_a_suspend_from_a_webhook_warns() -> None:
    report = run_check(f"{CHECKED}:suspends", events=["agent.tool_call"], examples=2, seed=1)
    decision = result(report, "decision")
    assert decision.status == "warn"
    assert "suspend is for gate hooks only" in next(iter(decision.warnings))


def test_an_inject_from_an_async_hook_warns(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.json"
    hooks.write_text(
        json.dumps(
            [
                {
                    "event": "agent.turn_start",
                    "type": "webhook",
                    "handler": "https://hooks.example.com/start",
                    "async": True,
                }
            ]
        )
    )
    report = run_check(
        str(hooks),
        routes=["https://hooks.example.com=py:examples/tests/hooks.py:guard"],
        examples=2,
        seed=1,
    )
    decision = result(report, "decision", "agent.turn_start")
    assert decision.status == "warn"
    assert "an async hook never injects" in next(iter(decision.warnings))


def test_a_handler_deciding_by_turns_warns_on_determinism() -> None:
    report = run_check(f"{CHECKED}:flip", events=["agent.tool_call"], examples=30, seed=1)
    deterministic = result(report, "deterministic")
    assert deterministic.status == "warn"
    assert "the same payload got" in next(iter(deterministic.warnings))


def test_a_failure_that_does_not_happen_again_is_reported_as_flaky() -> None:
    report = run_check(f"{CHECKED}:fails_once", events=["agent.start"], examples=5, seed=1)
    failure = result(report, "answers", "agent.start").failure
    assert failure is not None
    assert "only this once" in failure.detail
    assert failure.flaky is True


def test_a_reported_case_that_does_not_fail_again_when_sent_once_more_says_so() -> None:
    report = run_check(f"{CHECKED}:fails_first", events=["agent.start"], examples=5, seed=1)
    failure = result(report, "answers", "agent.start").failure
    assert failure is not None
    assert "only the first time" in failure.detail
    assert (failure.again, failure.flaky) == (False, True)
    assert failure.to_json()["failed_again"] is False
    assert "sent once more, it did not fail again" in "\n".join(failure_lines(report))
    assert report.exit_code == 1  # it failed once: still a failure


def test_a_reported_case_that_fails_again_when_sent_once_more_says_so(crash: CheckReport) -> None:
    failure = result(crash, "answers").failure
    assert failure is not None
    assert (failure.again, failure.flaky) == (True, False)
    assert failure.note == ""


def test_unknown_keys_in_the_answer_warn() -> None:
    report = run_check(f"{CHECKED}:extra_keys", events=["agent.tool_call"], examples=2, seed=1)
    body = result(report, "body")
    assert body.status == "warn"
    assert list(body.warnings) == ["verdict: unknown key in the answer, ignored"]


# -- Nexus ----------------------------------------------------------------------------------------


def test_a_tool_continuing_outside_stop_fails_result() -> None:
    report = run_check(
        None, executors=[f"check={CHECKED}:nexus_continue_everywhere"], examples=3, seed=1
    )
    assert sorted(failed(report)) == [
        ("result", "post_compact"),
        ("result", "pre_compact"),
        ("result", "turn_start"),
    ]
    turn_start = result(report, "result", "turn_start")
    assert turn_start.cases >= 1 and turn_start.failed >= 1
    failure = turn_start.failure
    assert failure is not None
    assert "only stop may ask to continue" in failure.detail
    assert failure.reproducer.startswith("python -c ")


def test_blank_feedback_on_stop_fails_result() -> None:
    report = run_check(
        None,
        executors=[f"check={CHECKED}:nexus_blank_feedback"],
        events=["stop"],
        examples=3,
        seed=1,
    )
    failure = result(report, "result", "stop").failure
    assert failure is not None
    assert "must be nonblank" in failure.detail


def test_an_http_executor_tool_is_checked_and_reproduced_with_curl(webhooks: str) -> None:
    report = run_check(
        None, executors=[f"verify={webhooks}/nexus"], events=["stop"], examples=3, seed=1
    )
    assert failed(report) == [("result", "stop")]
    failure = result(report, "result", "stop").failure
    assert failure is not None
    assert failure.reproducer.startswith(f"curl -sS -X POST {webhooks}/nexus ")
    done = in_a_shell(failure.reproducer)
    assert '"feedback": " "' in done.stdout or '"feedback":" "' in done.stdout


def test_nexus_inputs_carry_the_fields_of_their_boundary(tmp_path: Path) -> None:
    log = tmp_path / "seen.jsonl"

    def keep(task: dict[str, Any]) -> dict[str, Any]:
        # Called in belt check's worker processes: what it saw is written down for this one.
        with log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(task) + "\n")
        return checked.nexus_ack(task)

    from belt.testing.plugin import register, unregister

    reference = register(keep)
    try:
        report = run_check(None, executors=[f"keep={reference}"], examples=20, seed=4)
    finally:
        unregister(reference)
    assert report.exit_code == 0
    from belt.wire.nexus import HookTaskInput

    seen = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for task in seen:
        HookTaskInput.model_validate(task)
    stops = [t for t in seen if t["event"] == "stop"]
    assert stops and all("output_preview" in t for t in stops)
    assert any("compaction_trigger" in t for t in seen if t["event"] == "pre_compact")


# -- the run's bounds and its settings ------------------------------------------------------------


def test_the_same_seed_gives_the_same_failure(
    crash: CheckReport, capfd: pytest.CaptureFixture[str]
) -> None:
    """And a check inside a test session leaves its Hypothesis home alone and prints nothing."""
    from hypothesis import configuration

    before = configuration.storage_directory(intent_to_write=False).home_directory
    again = run_check(f"{CHECKED}:unicode_crash", events=["agent.tool_call"], examples=30, seed=1)
    after = configuration.storage_directory(intent_to_write=False).home_directory
    assert after == before
    assert capfd.readouterr() == ("", "")
    first, second = result(crash, "answers").failure, result(again, "answers").failure
    assert first is not None and second is not None
    assert first.payload == second.payload


def test_hypothesis_writes_nothing_in_the_working_directory_and_prints_nothing(
    tmp_path: Path,
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    done = subprocess.run(
        [f"{BELT_BIN}/belt", "check", f"{CHECKED}:unicode_crash", "--event", "agent.tool_call"]
        + ["--examples", "20", "--seed", "1"],
        cwd=work,
        env={**os.environ, "BELT_HOME": str(home), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert list(work.iterdir()) == []  # no .hypothesis: its caches go under BELT_HOME
    assert (home / "hypothesis").is_dir()
    # Its table of Unicode categories, not the one of what UTF-8 encodes: that one takes 1.5 s
    # of CPU to build in a new state directory (as in CI), on the clock of --max-time.
    tables = [path.name for path in (home / "hypothesis").rglob("*.json.gz")]
    assert tables == ["charmap.json.gz"]
    assert "Falsifying" not in done.stdout + done.stderr
    assert "hypothesis" not in (done.stdout + done.stderr).lower()


def test_only_the_given_target_is_sent_to(tmp_path: Path) -> None:
    log = tmp_path / "seen.jsonl"

    def keep(payload: dict[str, Any]) -> None:
        with log.open("a", encoding="utf-8") as handle:  # in a worker process of belt check
            handle.write(json.dumps(payload) + "\n")

    from belt.testing.plugin import register, unregister

    reference = register(keep)
    try:
        report = run_check(reference, events=["agent.error"], examples=10, seed=1)
    finally:
        unregister(reference)
    # The spec's sample and 10 generated payloads, each delivered twice (the redelivery).
    seen = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert len(seen) == 22 == 2 * report.cases
    assert all(p["event"] == "agent.error" and "error" in p["data"] for p in seen)


def test_generation_stops_when_max_time_has_passed() -> None:
    from belt.check.run import Explorer

    report = CheckReport(target="t", seed=1, examples=200)
    passed = Explorer(report, seed=1, examples=200, deadline=time.monotonic() - 1)
    assert passed.generate(generate.payloads("agent.tool_call"), 1, 200) == []
    ahead = Explorer(report, seed=1, examples=200, deadline=time.monotonic() + 600)
    assert len(ahead.generate(generate.payloads("agent.tool_call"), 1, 20)) == 20


def test_max_time_stops_the_run_and_names_what_was_not_checked() -> None:
    report = run_check(f"{CHECKED}:guard", examples=5, seed=1, max_time=0.001)
    assert report.stopped is not None and "--max-time" in report.stopped
    assert "not checked: agent.complete → " + f"{CHECKED}:guard" in report.notes


def test_shrinking_stops_at_its_time_bound_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from belt.check import run as check_run

    monkeypatch.setattr(check_run, "SHRINK_SECONDS_MAX", 0.0)
    report = run_check(f"{CHECKED}:unicode_crash", events=["agent.tool_call"], examples=30, seed=1)
    failure = result(report, "answers").failure
    assert failure is not None
    assert "UnicodeEncodeError" in failure.detail
    assert failure.detail.endswith(
        "(shrinking stopped at its bound of 300 cases or 0 s: the smallest found)"
    )


def test_the_pacer_keeps_requests_apart() -> None:
    from belt.check.run import Pacer

    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    pacer = Pacer(20, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        pacer.wait()
    assert slept == pytest.approx([0.05] * 4)
    now[0] += 1  # idle for a while: the next request need not wait
    pacer.wait()
    assert len(slept) == 4


def test_only_off_machine_webhooks_are_paced(webhooks: str) -> None:
    from belt.check import run as check_run

    waits: list[None] = []
    original = check_run.Pacer.wait
    check_run.Pacer.wait = lambda self: waits.append(None)  # type: ignore[method-assign]
    import httpx

    remote = httpx.MockTransport(lambda request: httpx.Response(200))
    try:
        run_check(f"{webhooks}/unsigned", events=["agent.start"], examples=2, seed=1)
        assert waits == []
        with using(remote):
            report = run_check(
                "https://hooks.example.com/x",
                events=["agent.start"],
                examples=2,
                seed=1,
                allow_network=True,
            )
    finally:
        check_run.Pacer.wait = original  # type: ignore[method-assign]
    assert report.exit_code == 0
    # The reachability probe, then each case and its redelivery: every one waited its turn.
    assert len(waits) == 1 + 2 * report.cases


def test_a_url_off_this_machine_needs_allow_network() -> None:
    with pytest.raises(InvalidInput, match="sends only to this machine") as caught:
        run_check("https://hooks.example.com/x", examples=1)
    assert "hooks.example.com" in caught.value.problems[0]


def test_a_hooks_file_webhook_off_this_machine_is_named_with_the_route_that_serves_it() -> None:
    with pytest.raises(InvalidInput) as caught:
        run_check(str(EXAMPLES / "hooks.json"), examples=1)
    assert caught.value.problems == [
        "agent.tool_call: the webhook https://example.com is not on this machine; serve it here "
        "with --route https://example.com=TARGET (py:MODULE:FUNC or a loopback URL), or give "
        "--allow-network"
    ]


def test_an_unreachable_webhook_is_exit_6() -> None:
    from belt.server.listen import bind

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(Unreachable):
        run_check(f"http://127.0.0.1:{port}/hook", examples=1)


def test_bad_options_are_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="--examples 0"):
        run_check(f"{CHECKED}:guard", examples=0)
    with pytest.raises(InvalidInput, match="--event 'agent.nope'"):
        run_check(f"{CHECKED}:guard", events=["agent.nope"])
    props = tmp_path / "props.toml"
    props.write_text('[[property]]\ntool = "delete_file"\ndecisoin = "deny"\n')
    with pytest.raises(InvalidInput) as caught:
        run_check(f"{CHECKED}:guard", props=props)
    assert any("property[0].decisoin: unknown key" in p for p in caught.value.problems)
    assert any("property[0].decision: is required" in p for p in caught.value.problems)
    with pytest.raises(UsageError):
        run_check(None)
    with pytest.raises(UsageError, match="^--executor 'nope': expected NAME=TARGET"):
        run_check(None, executors=["nope"])


def test_a_nexus_file_without_its_executor_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="--executor execution_check=TARGET"):
        run_check(str(EXAMPLES / "nexus-hooks.toml"))


# -- the command ----------------------------------------------------------------------------------


def test_the_command_exits_1_on_a_failure_and_prints_the_reproducer(tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    runner = CliRunner()
    outcome = runner.invoke(
        app,
        [
            "check",
            f"{CHECKED}:unicode_crash",
            "--event",
            "agent.tool_call",
            "--examples",
            "30",
            "--seed",
            "1",
            "--junit-xml",
            str(junit),
        ],
    )
    assert outcome.exit_code == 1, outcome.output
    assert "fail  answers" in outcome.output
    assert "reproduce: belt trigger agent.tool_call --to py:" in outcome.output
    assert "--seed 1 repeats it" in outcome.output
    xml = junit.read_text(encoding="utf-8")
    assert "<failure" in xml and "UnicodeEncodeError" in xml


def test_the_command_json_is_one_document_and_exit_0_on_a_pass() -> None:
    outcome = CliRunner().invoke(
        app,
        ["check", f"{CHECKED}:guard", "--event", "agent.tool_call", "--examples", "3", "--json"],
    )
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.stdout)
    assert document["passed"] is True
    assert {c["check"] for c in document["checks"]} == {
        "answers",
        "body",
        "decision",
        "deterministic",
        "redelivery",
    }
    assert set(document["checks"][0]["latency_ms"]) == {"p50", "p95", "p99", "max"}


def test_the_command_exit_codes_for_bad_input_and_an_unreachable_target() -> None:
    runner = CliRunner()
    off = runner.invoke(app, ["check", "https://hooks.example.com/x"])
    assert off.exit_code == 5
    assert "--allow-network" in off.output
    from belt.server.listen import bind

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()
    gone = runner.invoke(app, ["check", f"http://127.0.0.1:{port}/hook", "--examples", "1"])
    assert gone.exit_code == 6


# -- --save ---------------------------------------------------------------------------------------


def test_save_writes_a_scenario_that_belt_test_fails_until_the_bug_is_fixed(
    leaked: tuple[CheckReport, Path],
) -> None:
    report, saved = leaked
    prop = result(report, "property")
    assert prop.saved is not None
    scenario = json.loads(Path(prop.saved).read_text(encoding="utf-8"))
    assert scenario["expect"][0]["decision"] == "deny"
    from belt.testing.suite import run_suite

    broken = run_suite(paths=[saved], routes=[])
    assert int(broken.exit_code) == 1
    # The same scenario with the defect fixed (the guard in its place), in a directory beside
    # the shared one (the handler's path is relative to it), passes.
    text = Path(prop.saved).read_text(encoding="utf-8")
    beside = saved.with_name("fixed")
    beside.mkdir()
    (beside / Path(prop.saved).name).write_text(text.replace(":leaky", ":guard"), "utf-8")
    fixed = run_suite(paths=[beside], routes=[])
    assert int(fixed.exit_code) == 0, [r.to_json() for r in fixed.results]


def test_save_writes_a_crash_as_a_scenario_whose_hook_fails(crash: CheckReport) -> None:
    answers = result(crash, "answers")
    assert answers.saved is not None and answers.failure is not None
    saved = Path(answers.saved).parent
    scenario = json.loads(Path(answers.saved).read_text(encoding="utf-8"))
    call = scenario["turns"][0]["model"][0]["tool_calls"][0]
    assert call["arguments"] == answers.failure.payload["data"]["arguments"]
    from belt.testing.suite import run_suite

    suite = run_suite(paths=[saved], routes=[])
    assert int(suite.exit_code) == 1
    assert "UnicodeEncodeError" in json.dumps([r.to_json() for r in suite.results])


# -- the pytest helper ----------------------------------------------------------------------------


def test_the_pytest_helper_passes_a_good_handler_and_fails_a_bad_one() -> None:
    from belt.testing.check import check_handler

    report = check_handler(checked.guard, events=["agent.tool_call"], examples=5)
    assert report.exit_code == 0
    with pytest.raises(AssertionError) as caught:
        check_handler(checked.unicode_crash, events=["agent.tool_call"], examples=30)
    assert "answers" in str(caught.value)
    assert "reproduce: belt trigger agent.tool_call" in str(caught.value)


def test_the_reproducer_quotes_survive_the_shell(crash: CheckReport) -> None:
    failure = result(crash, "answers").failure
    assert failure is not None
    words = shlex.split(failure.reproducer)
    assert json.loads(words[words.index("--payload") + 1]) == failure.payload


def test_check_imports_no_hypothesis_on_the_start_up_path(tmp_path: Path) -> None:
    from tests.test_startup import probed

    for command in (["version"], ["check", "--help"]):
        modules, _ = probed(*command, home=tmp_path)
        assert "hypothesis" not in {module.split(".")[0] for module in modules}
