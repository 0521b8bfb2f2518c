import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from belt.check.report import trigger_command
from belt.rules.policy import load_policy
from belt.server.app import create_app
from belt.server.deciders import policy_decider
from belt.store import Store
from tests import pyhooks
from tests.cli.runner import belt
from tests.hookapp import HookApp, hook_app
from tests.servers import REFUSED, running
from tests.vectors import SECRET

ROOT = Path(__file__).parent.parent.parent
EXAMPLE_POLICY = ROOT / "examples" / "policy.toml"


@pytest.fixture(scope="module")
def policy_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    decide = policy_decider(load_policy(EXAMPLE_POLICY))
    app = create_app(store=Store(tmp_path_factory.mktemp("s")), decide=decide, sweep_interval=0)
    with running(app) as url:
        yield url


@pytest.fixture(scope="module")
def webhook() -> Iterator[HookApp]:
    with hook_app() as app:
        yield app


def test_trigger_prints_status_body_effect_and_transcript_row(policy_url: str) -> None:
    data = '{"data": {"arguments": {"path": "/srv/app.db"}}}'
    result = belt("trigger", "agent.tool_call", "--to", f"{policy_url}/hooks", "--data", data)
    assert result.exit_code == 0, result.stderr
    host = policy_url.removeprefix("http://")
    lines = result.stdout.splitlines()
    assert lines[0] == f"sent        agent.tool_call to {host}"
    assert lines[1].startswith('payload     {"event": "agent.tool_call", "timestamp": "')
    assert lines[1].endswith(
        '"data": {"tool": "delete_file", "arguments": {"path": "/srv/app.db"}}}'
    )
    assert lines[2].startswith("status      HTTP 200 in ")
    assert lines[3] == 'body        {"decision": "deny", "reason": "only /tmp deletions allowed"}'
    assert lines[4] == (
        "effect      agent.tool_call: deny → the tool is not called and completes as failed: "
        "only /tmp deletions allowed"
    )
    assert lines[5].startswith(f"transcript  hook agent.tool_call: {host}  {{")
    assert '"decision": "deny"' in lines[5]


def test_trigger_json_is_one_object(policy_url: str) -> None:
    result = belt("trigger", "agent.tool_call", "--to", f"{policy_url}/hooks", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["status"] == 200
    assert report["ok"] is True
    assert report["response"] == {"decision": "allow"}
    assert report["effect"] == "agent.tool_call: allow → the agent continues"
    assert report["transcript_row"] is None
    assert report["payload"]["data"]["tool"] == "delete_file"


def test_trigger_reads_data_from_a_file(policy_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text('{"data": {"tool": "read_file"}}')
    result = belt("trigger", "agent.tool_call", "--to", f"{policy_url}/hooks", "--data", f"@{data}")
    assert result.exit_code == 0, result.stderr


def test_an_unreachable_handler_exits_6_with_what_to_check() -> None:
    result = belt("trigger", "agent.start", "--to", f"http://{REFUSED}/hook")
    assert result.exit_code == 6
    assert f"error: cannot connect to {REFUSED}" in result.stderr
    assert f"hint: nothing listens on {REFUSED}: start your handler there" in result.stderr
    assert "no response" in result.stdout


def test_an_invalid_body_exits_1_and_json_still_prints_the_report(webhook: HookApp) -> None:
    webhook.decide = lambda name, payload: {"decision": "nope"}
    result = belt("trigger", "agent.start", "--to", f"{webhook.url}/x", "--json")
    assert result.exit_code == 1  # it answered, with something else (docs/cli.md's table)
    report = result.json()
    assert report["ok"] is False
    assert report["body"] == '{"decision": "nope"}'
    assert "not a LifecycleHookResponse" in report["error"]
    assert "not a LifecycleHookResponse" in result.stderr


def test_an_answer_with_an_unknown_key_is_shown_with_a_warning(webhook: HookApp) -> None:
    webhook.decide = lambda name, payload: {"decision": "allow", "colour": "red"}
    result = belt("trigger", "agent.start", "--to", f"{webhook.url}/x")
    assert result.exit_code == 0, result.stderr
    assert "warning     colour: unknown key in the answer, ignored" in result.stdout
    assert belt("trigger", "agent.start", "--to", f"{webhook.url}/x", "--json").json()[
        "warnings"
    ] == ["colour: unknown key in the answer, ignored"]


def test_no_full_url_or_secret_reaches_the_terminal(webhook: HookApp) -> None:
    webhook.decide = lambda name, payload: (500, "")
    secret = SECRET
    url = webhook.url.replace("http://", "http://user:pa55word@") + "/hooks/PATHSECRET?k=QSECRET"
    for flags in ((), ("--json",)):
        result = belt("trigger", "agent.tool_call", "--to", url, "--secret", secret, *flags)
        assert result.exit_code == 1  # an HTTP 500
        seen = result.stdout + result.stderr
        for hidden in ("pa55word", "PATHSECRET", "QSECRET", secret, secret[6:]):
            assert hidden not in seen


def test_timeout_is_the_deadline_of_a_webhook_delivery() -> None:
    with hook_app() as app:
        app.hold = lambda name, payload: True
        result = belt("trigger", "agent.start", "--to", f"{app.url}/held", "--timeout", "0.5")
        assert app.held.is_set()
    assert result.exit_code == 6
    host = app.url.removeprefix("http://")
    assert f"error: {host} did not answer within 0.5 s" in result.stderr
    assert f"hint: the handler at {host} must answer within 0.5 s" in result.stderr


def test_timeout_is_the_deadline_of_a_py_handler_too() -> None:
    pyhooks.release.clear()
    try:
        result = belt(
            "trigger", "agent.start", "--to", "py:tests.pyhooks:block", "--timeout", "0.2", "--json"
        )
    finally:
        pyhooks.release.set()
    assert result.exit_code == 6
    assert result.json()["error"] == "py:tests.pyhooks:block did not answer within 0.2 s"


@pytest.mark.parametrize("timeout", ["0", "-1", "301"])
def test_a_timeout_out_of_bounds_is_refused(timeout: str) -> None:
    result = belt("trigger", "agent.start", "--to", f"http://{REFUSED}/", "--timeout", timeout)
    assert result.exit_code == 5
    assert f"--timeout {timeout}: expected more than 0 and at most 300 seconds" in result.stderr


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf"])
def test_a_timeout_that_is_no_number_is_a_usage_error(timeout: str) -> None:
    # As every numeric option of every command: the command line itself is wrong (exit 2).
    result = belt("trigger", "agent.start", "--to", f"http://{REFUSED}/", "--timeout", timeout)
    assert result.exit_code == 2
    text = " ".join(result.stderr.replace("│", " ").split())
    assert f"Invalid value for '--timeout': {timeout} is not a finite number" in text


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("agent.nope", "--to", f"http://{REFUSED}/"), 5, "'agent.nope' is not a lifecycle event"),
        (("agent.start", "--to", "ftp://x/"), 5, "--to must be an absolute http"),
        (("agent.start", "--to", f"http://{REFUSED}/", "--data", "[]"), 5, "JSON object"),
        (("agent.start", "--to", f"http://{REFUSED}/", "--secret", "x"), 5, "whsec_"),
    ],
)
def test_bad_arguments_are_refused(args: tuple[str, ...], code: int, message: str) -> None:
    result = belt("trigger", *args)
    assert result.exit_code == code
    assert message in result.stderr


def test_a_hostile_reason_is_escaped_on_the_terminal(webhook: HookApp) -> None:
    webhook.decide = lambda name, payload: {
        "decision": "deny",
        "reason": "\x1b[2J\x1b]0;PWNED\x07\nerror: fake\x9b",
    }
    result = belt("trigger", "agent.tool_call", "--to", f"{webhook.url}/hostile")
    webhook.decide = lambda name, payload: None
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout
    assert "\\x1b]0;PWNED\\x07\\nerror: fake\\x9b" in result.stdout
    assert not any(line.startswith("error: fake") for line in result.stdout.splitlines())


def test_small_refusals_of_trigger(webhook: HookApp, tmp_path: Path) -> None:
    port = belt("trigger", "agent.start", "--to", "http://127.0.0.1:99999/h")
    assert port.exit_code == 5
    assert "--to port 99999 is out of range (1-65535)" in port.stderr
    nan = belt("trigger", "agent.start", "--to", f"{webhook.url}/h", "--data", '{"x": NaN}')
    assert nan.exit_code == 5
    assert "--data: not valid JSON (NaN is not a JSON number (refused))" in nan.stderr
    nul = belt("trigger", "agent.start", "--to", f"{webhook.url}/h", "--data", "@a\x00b")
    assert nul.exit_code == 5
    assert nul.stderr.startswith("error: a\\x00b: a path cannot contain a NUL character")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    piped = belt("trigger", "agent.start", "--to", f"{webhook.url}/h", "--data", f"@{fifo}")
    assert piped.exit_code == 5
    assert "is a FIFO (named pipe), not a regular file" in piped.stderr


PAYLOAD = {
    "event": "agent.tool_call",
    "timestamp": "2026-08-11T14:00:00.123Z",
    "agent_id": "ag_rt",
    "chat_id": "ch_rt",
    "run_id": "ar_rt",
    "turn_count": 2,
    "data": {
        "tool": "run_shell",
        "arguments": {
            "command": "echo 'it''s' \"quoted\" $HOME `id` \\ ; rm -rf /",
            "path": "/tmp/ünï/😀/\u202e/\u2028",
            "nested": {"list": [1, -2.5, True, None, {}, [], ""]},
            "escape": "\x1b[2J\x07\x00\x9b",
        },
    },
}


def test_a_payload_printed_as_a_command_runs_as_printed() -> None:
    # The reproducer `belt check` prints is this command line; split as a shell splits it, it
    # sends exactly the payload again.
    command = trigger_command("agent.tool_call", "py:tests.pyhooks:keep", PAYLOAD)
    assert command.startswith("belt trigger agent.tool_call --to py:tests.pyhooks:keep --payload '")
    assert command.isprintable()  # controls, bidi overrides and separators as JSON escapes
    argv = shlex.split(command)
    pyhooks.received.clear()
    result = belt(*argv[1:], "--json")
    assert result.exit_code == 0, result.stderr
    assert pyhooks.received == [PAYLOAD]
    assert result.json()["payload"] == PAYLOAD
    # In a real shell too (bash, as a user pastes it), and to a webhook.
    with hook_app() as app:
        shell = trigger_command("agent.tool_call", f"{app.url}/hooks", PAYLOAD)
        done = subprocess.run(
            ["bash", "-c", shell.replace("belt", f"{shlex.quote(sys.executable)} -m belt", 1)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert [payload for _, payload in app.received] == [PAYLOAD]


def test_the_payload_sent_is_shown_escaped_and_readable() -> None:
    result = belt(
        "trigger",
        "agent.tool_call",
        "--to",
        "py:tests.pyhooks:allow",
        "--payload",
        json.dumps(PAYLOAD),
    )
    assert result.exit_code == 0, result.stderr
    [line] = [line for line in result.stdout.split("\n") if line.startswith("payload ")]
    for raw in ("\x1b", "\x07", "\x00", "\x9b", "\u202e"):
        assert raw not in result.stdout
    assert "/tmp/ünï/😀/\\u202e/" in line  # readable letters, escaped controls
    assert "\\u001b[2J" in line
    # What is shown is the JSON of the payload: it can be given to --payload as it is.
    assert json.loads(line.removeprefix("payload").strip()) == PAYLOAD
    assert "status      returned in " in result.stdout


def test_payload_set_and_to_py_refusals_have_their_own_exit_codes(tmp_path: Path) -> None:
    to = ("agent.start", "--to", "py:tests.pyhooks:allow")
    cases = [
        ((*to, "--payload", "{"), 5, "--payload: not valid JSON"),
        ((*to, "--payload", "[]"), 5, "--payload: expected a JSON object, got an array"),
        ((*to, "--payload", f"@{tmp_path / 'none.json'}"), 3, "no such file"),
        ((*to, "--payload", "{}", "--data", "{}"), 2, "give one"),
        ((*to, "--payload", '{"event": "agent.start"}'), 5, "not a LifecycleHookPayload"),
        ((*to, "--set", "turn_count"), 2, "expected PATH=JSON"),
        ((*to, "--set", "data.x=bare"), 5, "--set data.x: not valid JSON"),
        ((*to, "--unset", "data.nope"), 5, "the payload has no data.nope"),
        ((*to, "--secret", SECRET), 2, "a py: handler is called in-process, unsigned"),
        (("agent.start", "--to", "py:tests.pyhooks:no_such_zz"), 3, "has no attribute"),
        (("agent.start", "--to", "py:tests_no_such_zz:f"), 3, "no module named"),
        (("agent.start", "--to", "py:nothing"), 2, "expected MODULE:FUNC"),
        (("agent.start", "--to", "py:tests.pyhooks:explode"), 1, "raised ValueError"),
        (("agent.start", "--to", "py:tests.pyhooks:nonsense"), 1, "not a LifecycleHookResponse"),
    ]
    for args, code, message in cases:
        result = belt("trigger", *args)
        assert (result.exit_code, message in result.stderr) == (code, True), (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_py_handlers_status_in_json_is_what_a_webhooks_would_be() -> None:
    statuses = {}
    for func in ("deny", "explode", "nonsense", "number"):
        result = belt("trigger", "agent.start", "--to", f"py:tests.pyhooks:{func}", "--json")
        report = result.json()
        statuses[func] = (result.exit_code, report["status"], report["ok"], report["in_process"])
    assert statuses == {
        "deny": (0, 200, True, True),
        "explode": (1, 500, False, True),
        "nonsense": (1, 500, False, True),
        "number": (1, 500, False, True),
    }


def test_verbose_shows_the_traceback_of_what_a_py_handler_raised() -> None:
    args = ("trigger", "agent.start", "--to", "py:tests.pyhooks:explode")
    quiet, verbose = belt(*args), belt("-v", *args)
    assert (quiet.exit_code, verbose.exit_code) == (1, 1)
    assert "Traceback" not in quiet.stderr
    assert "error: py:tests.pyhooks:explode raised ValueError: boom \\x1b[31mred" in quiet.stderr
    assert 'tests/pyhooks.py", line' in verbose.stderr
    assert 'raise ValueError("boom' in verbose.stderr
    assert "\nValueError: boom \\x1b[31mred\n" in verbose.stderr
    assert "\x1b" not in verbose.stderr


# -- without --to: the belt serve this user runs ---------------------------------------------

SERVED_WITHIN = 30
"""Seconds a `belt serve` child has to start or stop before the test calls it hung."""


@contextmanager
def belt_serve(*args: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """`belt serve --port 0 --sweep-interval 0 ARGS` in a child process group of its own (the
    test's BELT_HOME); the process and its port once it is ready."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", "--sweep-interval", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        ready = proc.stderr.readline()
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", ready)
        assert found, ready
        yield proc, int(found.group(1))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=SERVED_WITHIN)


def running_files(belt_home: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((belt_home / "serves").glob("*.json"))]


def test_without_to_it_sends_to_the_running_serve_and_says_which(belt_home: Path) -> None:
    with belt_serve("--policy", str(EXAMPLE_POLICY)) as (proc, port):
        (record,) = running_files(belt_home)
        assert (record["url"], record["pid"], record["port"]) == (
            f"http://127.0.0.1:{port}",
            proc.pid,
            port,
        )
        assert isinstance(record["started_at"], str)
        path = belt_home / "serves" / f"{proc.pid}.json"
        assert path.stat().st_mode & 0o777 == 0o600
        data = '{"data": {"arguments": {"path": "/srv/app.db"}}}'
        result = belt("trigger", "agent.tool_call", "--data", data)
        assert result.exit_code == 0, result.stderr
        (said,) = result.stderr.splitlines()
        assert said.startswith(f"sending to belt serve on 127.0.0.1:{port} (pid {proc.pid}, ")
        assert said.endswith(f": http://127.0.0.1:{port}/hooks")
        assert result.stdout.splitlines()[0] == f"sent        agent.tool_call to 127.0.0.1:{port}"
        assert "deny" in result.stdout  # the example policy's answer
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=SERVED_WITHIN) == 0
    assert running_files(belt_home) == []
    gone = belt("trigger", "agent.tool_call")
    assert gone.exit_code == 6
    assert gone.stderr.splitlines() == [
        "error: no belt serve of yours is running, and --to does not name a handler",
        "hint: start one in another terminal (belt serve, or belt serve --policy FILE), or give "
        "--to URL|py:MODULE:FUNC",
    ]


def test_a_serve_of_several_workers_is_one_file_removed_at_ctrl_c(belt_home: Path) -> None:
    with belt_serve("--workers", "2") as (proc, port):
        (record,) = running_files(belt_home)
        assert (record["pid"], record["workers"]) == (proc.pid, 2)
        result = belt("trigger", "agent.turn_start")
        assert result.exit_code == 0, result.stderr
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
        assert proc.wait(timeout=SERVED_WITHIN) == 130
    assert running_files(belt_home) == []


def test_the_most_recently_started_serve_is_the_one(belt_home: Path) -> None:
    with belt_serve() as (_, first), belt_serve() as (latest, second):
        result = belt("trigger", "agent.turn_start", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["handler"] == f"127.0.0.1:{second}" != f"127.0.0.1:{first}"
    assert result.stderr.startswith(
        f"sending to belt serve on 127.0.0.1:{second} (pid {latest.pid}"
    )
    assert "(the latest of 2 running; --to picks another)" in result.stderr


def test_a_stale_running_file_is_passed_over(belt_home: Path) -> None:
    from belt.records.serves import announce

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    refused = int(REFUSED.rsplit(":", 1)[1])
    with hook_app() as app:
        answering = int(app.url.rsplit(":", 1)[1])
        for pid, port, started in (
            (ended.pid, answering, "2026-08-11T14:00:02.000Z"),  # its process is gone
            (os.getpid(), refused, "2026-08-11T14:00:01.000Z"),  # its port takes no connection
        ):
            announce(
                {
                    "url": f"http://127.0.0.1:{port}",
                    "host": "127.0.0.1",
                    "port": port,
                    "pid": pid,
                    "started_at": started,
                    "workers": 1,
                    "signed": False,
                    "token": False,
                }
            )
        (belt_home / "serves" / "junk.json").write_text("{not json")
        result = belt("trigger", "agent.turn_start")
    assert result.exit_code == 6
    assert "no belt serve of yours is running" in result.stderr
    assert app.received == []
