"""``belt serve`` as a user runs it: refusals in-process, serving in a child process."""

from __future__ import annotations

import json
import re
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from belt.outgoing.signing import signed_headers
from belt.server.guard import is_loopback_name as is_loopback
from belt.server.listen import bind
from belt.server.live import render_record
from belt.store import open_store
from belt.wire.samples import sample_payload
from tests.cli.runner import belt
from tests.loopback import CLIENT
from tests.vectors import SECRET

ROOT = Path(__file__).parent.parent.parent
EXAMPLE_POLICY = ROOT / "examples" / "policy.toml"
TOKEN = "tok-cli-9d2e6b"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
def test_a_host_other_than_loopback_needs_a_token(host: str) -> None:
    result = belt("serve", "--host", host)
    assert result.exit_code == 2
    assert f"refusing to listen on {host} without --token" in result.stderr


def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com"))


def test_the_listening_socket_names_tcp_so_connections_get_nodelay() -> None:
    # asyncio sets TCP_NODELAY only on sockets whose proto is TCP; without it a kept-alive
    # response waits ~40 ms on Nagle's algorithm.
    sock = bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_a_bad_policy_is_refused_with_its_path(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\ntool = "x"\n\n[[rules]]\narguments = { path = "re:(" }\n')
    result = belt("serve", "--policy", str(policy))
    assert result.exit_code == 5
    assert f"{policy}: 1 problem(s) in the policy" in result.stderr
    assert "rules[1].arguments.path: bad regex '('" in result.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("--policy", "p.toml", "--handler", "m:f"), 2, "not both"),
        (("--handler", "nomodule_zz:f"), 3, "no module named 'nomodule_zz'"),
        (("--policy", "missing.toml"), 3, "missing.toml: no such file"),
        (("--secret", "s3cr3t"), 5, "secret: expected whsec_"),
        (("--sweep-interval", "-1"), 2, "--sweep-interval"),
        (("--sweep-interval", "1e-9"), 2, "--sweep-interval must be 0 (off) or a number"),
        (("--sweep-interval", "nan"), 2, "--sweep-interval must be 0 (off) or a number"),
        (("--sweep-interval", "inf"), 2, "--sweep-interval must be 0 (off) or a number"),
        (("--token", " "), 2, "--token must be printable ASCII without spaces"),
        (("--token", ""), 2, "--token must be printable ASCII without spaces"),
        (("--port", "99999"), 2, "--port 99999 is not a port number (0-65535"),
        (("--port", "-1"), 2, "--port -1 is not a port number"),
        (("--workers", "0"), 2, "--workers must be 1 or more"),
        (("--handler-timeout", "nan"), 2, "--handler-timeout must be a number"),
        (("--max-connections", "0"), 2, "--max-connections must be 1 or more"),
    ],
)
def test_bad_options_are_refused(args: tuple[str, ...], code: int, message: str) -> None:
    result = belt("serve", *args)
    assert result.exit_code == code
    assert message in result.stderr
    assert "s3cr3t" not in result.stderr


def test_a_port_in_use_is_reported() -> None:
    taken = bind("127.0.0.1", 0)
    try:
        port = taken.getsockname()[1]
        result = belt("serve", "--port", str(port))
    finally:
        taken.close()
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


def lower_open_files(limit: int) -> Callable[[], None]:
    """A preexec function giving the child process at most ``limit`` open files."""

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return lower


@contextmanager
def serve_process(
    *args: str, nofile: int | None = None, verbose: bool = False, env: dict[str, str] | None = None
) -> Iterator[tuple[str, dict[str, str]]]:
    """Run `belt serve --port 0 ARGS` in a child process; yield its URL and, at exit, output."""
    process = subprocess.Popen(
        [sys.executable, "-m", "belt", *(["-v"] if verbose else []), "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        preexec_fn=lower_open_files(nofile) if nofile else None,
    )
    captured: dict[str, str] = {}
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        found = re.search(r"listening on (http://\S+) ", banner)
        assert found, banner + process.stderr.read()
        yield found.group(1), captured
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate()
        captured.update(stdout=out, stderr=banner + err, code=str(process.returncode))


def test_serve_shows_one_live_line_per_hook_and_stops_cleanly_on_ctrl_c() -> None:
    with serve_process("--policy", str(EXAMPLE_POLICY)) as (url, output):
        payload = sample_payload("agent.tool_call", data={"tool": "delete_file", "arguments": {}})
        denied = CLIENT.post(f"{url}/hooks/guard", json=payload)
        allowed = CLIENT.post(f"{url}/hooks", json=sample_payload("agent.turn_start"))
        invalid = CLIENT.post(f"{url}/hooks", json={"event": "agent.start"})
        # A request path cannot write to the terminal.
        escaping = CLIENT.post(f"{url}/hooks/%1b%5b2J%1b%5d0;PWNED%07", json={})
    assert (denied.status_code, allowed.status_code, invalid.status_code) == (200, 200, 422)
    assert escaping.status_code == 422
    assert output["code"] == "130", output["stderr"]
    assert "policy " in output["stderr"] and "sweep every 60 s" in output["stderr"]
    lines = output["stdout"].splitlines()
    assert len(lines) == 4
    clock = r"\d\d:\d\d:\d\d"
    assert re.fullmatch(
        rf"{clock}  \[guard\]  agent\.tool_call  delete_file  deny  "
        rf"only /tmp deletions allowed  \d+\.\d ms",
        lines[0],
    )
    assert re.fullmatch(rf"{clock}  agent\.turn_start  allow \+inject  \d+\.\d ms", lines[1])
    assert re.fullmatch(rf"{clock}  -  422  not a LifecycleHookPayload: .* \d+\.\d ms", lines[2])
    assert "[\\x1b[2J\\x1b]0;PWNED\\x07]" in lines[3]
    assert "\x1b" not in output["stdout"] and "\x07" not in output["stdout"]
    journal = open_store().read_log("journal", "serve")
    assert [record["status"] for record in journal] == [200, 200, 422, 422]


def test_a_live_lines_clock_is_the_records_local_time_to_the_second(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    stamps = [
        "2026-08-11T14:00:00.001Z",
        "2026-08-11T14:00:00.999Z",  # the same second: the clock formatted once is the same
        "2026-08-11T14:00:01.000Z",
        "2026-08-11T16:00:01.500+02:00",  # not a stamp belt made: read in full
        "not a time",
    ]
    for at in stamps:
        render_record(
            {
                "kind": "api",
                "at": at,
                "action": "resolve",
                "target": "in_1",
                "status": 200,
                "detail": "allow",
            }
        )
    shown = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines()]

    def local(at: str) -> str:
        return datetime.fromisoformat(at).astimezone().strftime("%H:%M:%S")

    assert shown == [local(at) for at in stamps[:4]] + ["--:--:--"]


def test_belt_check_with_the_secret_passes_belt_serve_with_it_redelivery_included() -> None:
    # belt check delivers each case twice with the same webhook-id; the server answers the
    # second as it answered the first, and says on its live line that it was a redelivery.
    with serve_process("--secret", SECRET, "--policy", str(EXAMPLE_POLICY)) as (url, output):
        checked = belt(  # in-process: the server is the process here
            "check", f"{url}/hooks", "--secret", SECRET,
            "--event", "agent.tool_call", "--examples", "3", "--seed", "1",
        )  # fmt: skip
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert re.search(r"pass  redelivery .*\(4 cases\)", checked.stdout), checked.stdout
    lines = output["stdout"].splitlines()
    again = [line for line in lines if "(redelivery, answered as the first time)" in line]
    assert len(again) == 4, lines
    journal = open_store().read_log("journal", "serve")
    assert sum(1 for record in journal if record.get("redelivery")) == 4
    assert not [record for record in journal if record["status"] == 409]


@pytest.mark.parametrize("verbose", [False, True])
def test_a_handler_that_raises_is_logged_with_its_type_and_message(verbose: bool) -> None:
    # explode's message holds a terminal escape: it is shown escaped, whole.
    with serve_process("--handler", "py:tests.pyhooks:explode", verbose=verbose) as (url, output):
        reply = CLIENT.post(f"{url}/hooks", json=sample_payload("agent.start"))
    assert reply.status_code == 500
    assert reply.json()["detail"] == "the handler raised ValueError: boom \x1b[31mred"
    [line] = output["stdout"].splitlines()
    assert "  agent.start  500  the handler raised ValueError: boom \\x1b[31mred  " in line
    assert "\x1b" not in output["stdout"] + output["stderr"]
    traceback = "Traceback (most recent call last):"
    if verbose:
        err = output["stderr"]
        assert traceback in err
        assert 'tests/pyhooks.py", line' in err and 'raise ValueError("boom' in err
        assert "\nValueError: boom \\x1b[31mred\n" in err
    else:
        assert traceback not in output["stderr"]


def test_serve_json_prints_one_object_per_line_and_hides_secrets() -> None:
    args = ("--json", "--secret", SECRET, "--token", TOKEN, "--sweep-interval", "0")
    with serve_process(*args) as (url, output):
        body = json.dumps(sample_payload("agent.start")).encode()
        headers = {
            **signed_headers(SECRET, body),
            "authorization": f"Bearer {TOKEN}",
            "content-type": "application/json",
        }
        reply = CLIENT.post(f"{url}/hooks?key=QSECRET", content=body, headers=headers)
        refused = CLIENT.post(f"{url}/hooks", content=body)
    assert (reply.status_code, refused.status_code) == (200, 401)
    assert output["code"] == "130", output["stderr"]
    assert "signed requests only, bearer token required, sweep off" in output["stderr"]
    record, refusal = [json.loads(line) for line in output["stdout"].splitlines()]
    assert (record["kind"], record["event"], record["decision"]) == ("hook", "agent.start", "allow")
    assert (refusal["kind"], refusal["action"], refusal["status"]) == ("api", "refused", 401)
    assert record["response"] == {"decision": "allow"}
    seen = output["stdout"] + output["stderr"]
    for hidden in (SECRET, SECRET[6:], TOKEN, "QSECRET"):
        assert hidden not in seen


def slowloris(url: str, count: int) -> list[socket.socket]:
    """``count`` connections that send part of a request head and then nothing."""
    host, port = url.removeprefix("http://").split(":")
    clients = []
    for _ in range(count):
        try:
            sock = socket.create_connection((host, int(port)), timeout=2)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        except OSError:
            continue
        clients.append(sock)
    return clients


def test_healthz_answers_with_slowloris_clients_past_the_open_file_limit() -> None:
    # The server may hold 320 open files; 500 slow clients would exhaust them without the cap.
    with serve_process("--sweep-interval", "0", nofile=320) as (url, output):
        clients = slowloris(url, 500)
        try:
            health = [CLIENT.get(f"{url}/healthz", timeout=30) for _ in range(5)]
            hook = CLIENT.post(f"{url}/hooks", json=sample_payload("agent.start"), timeout=30)
        finally:
            for sock in clients:
                sock.close()
    assert [reply.status_code for reply in health] == [200] * 5
    assert hook.status_code == 200
    assert output["code"] == "130", output["stderr"][-2000:]
    assert "Traceback" not in output["stderr"]
    assert "Too many open files" not in output["stderr"]


def test_refused_connections_are_one_line_per_burst_not_tracebacks() -> None:
    # A cap above the open-file limit lets accept() fail; each burst is reported once.
    args = ("--sweep-interval", "0", "--max-connections", "5000")
    with serve_process(*args, nofile=64) as (url, output):
        clients = slowloris(url, 100)
        try:
            for sock in clients:
                sock.close()
            # The server answers again once files are free (asyncio retries accept each second).
            replies = []
            for _ in range(100):
                try:
                    replies.append(CLIENT.get(f"{url}/healthz", timeout=5).status_code)
                except httpx.HTTPError:
                    continue
                if replies[-1] == 200:
                    break
        finally:
            for sock in clients:
                sock.close()
    assert replies and replies[-1] == 200
    assert "Traceback" not in output["stderr"]
    refused = [line for line in output["stderr"].splitlines() if "refusing connections" in line]
    assert 1 <= len(refused) <= 3, output["stderr"][-2000:]
    assert refused[0] == (
        "warning: refusing connections: Too many open files (open-file limit reached; "
        "lower --max-connections or raise the limit)"
    )


def test_workers_share_one_port_and_stop_on_ctrl_c() -> None:
    with serve_process("--workers", "2", "--json", "--sweep-interval", "0") as (url, output):
        replies = [
            CLIENT.post(f"{url}/hooks", json=sample_payload("agent.start"), timeout=30)
            for _ in range(4)
        ]
        health = CLIENT.get(f"{url}/healthz", timeout=30)
    assert [reply.status_code for reply in replies] == [200] * 4
    assert health.status_code == 200
    assert "2 workers" in output["stderr"]
    records = [json.loads(line) for line in output["stdout"].splitlines()]
    assert [record["decision"] for record in records] == ["allow"] * 4
