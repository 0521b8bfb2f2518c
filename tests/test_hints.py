"""A failed delivery's hint follows what happened and whose the handler is; its exit code
follows docs/cli.md's table (6 only when nothing answered).

Real servers on port 0: one that closes the connection once it has read the request (a handler
that crashed on it), one that resets it, a refused port, a handler that answers too late, a
500, a body that is not a response; the running-serve files are real files in the test's state
directory.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import hostile
from tests.cli.runner import Result, belt
from tests.hookapp import hook_app
from tests.servers import REFUSED

QUESTION = "is `belt serve` running"
"""The old hint of every refused loopback port, whoever listened there."""


def closing(conn: socket.socket, stop: threading.Event) -> None:
    """Read the request (``hostile_server`` has), then close without a word: a crash."""


def resetting(conn: socket.socket, stop: threading.Event) -> None:
    """Read the request, then close with a reset, as a process killed mid-request does."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def dead_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def serve_file(port: int, pid: int) -> Path:
    """A running-serve file of a serve on 127.0.0.1:``port``, of process ``pid``."""
    from belt.records import serves  # new with the running-serve files

    return serves.announce(
        {
            "url": f"http://127.0.0.1:{port}",
            "host": "127.0.0.1",
            "port": port,
            "pid": pid,
            "started_at": "2026-08-11T14:00:00.000Z",
            "workers": 1,
            "signed": False,
            "token": False,
        }
    )


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port bound and never listening while the block runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def hint_of(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("hint: ")]
    assert len(lines) == 1, result.stderr
    return lines[0].removeprefix("hint: ")


# -- belt trigger: the cause, the hint and the exit code ------------------------------------------


@pytest.mark.parametrize(
    ("behave", "says"),
    [(closing, "closed the connection without answering"), (resetting, "Connection reset")],
    ids=["closed", "reset"],
)
def test_a_handler_that_closes_the_connection_mid_request_failed_it_exit_1(
    behave: hostile.Behaviour, says: str
) -> None:
    with hostile.hostile_server(behave) as url:
        result = belt("trigger", "agent.tool_call", "--to", f"{url}/hooks")
    host = url.removeprefix("http://")
    assert result.exit_code == 1, result.stderr  # it was there and failed: not 6
    assert f"error: {host} closed the connection without answering" in result.stderr
    assert says in result.stderr
    assert hint_of(result) == (
        f"the handler at {host} took the request and closed the connection without an answer: "
        "it probably crashed or exited handling it; check its output"
    )
    assert "running and listening" not in result.stderr


def test_a_refused_port_is_6_and_says_nothing_listens_there() -> None:
    result = belt("trigger", "agent.tool_call", "--to", f"http://{REFUSED}/hooks")
    assert result.exit_code == 6
    assert hint_of(result) == (
        f"nothing listens on {REFUSED}: start your handler there, or fix the port in its URL"
    )
    assert QUESTION not in result.stderr


def test_no_answer_in_time_is_6_and_says_how_long_it_had() -> None:
    with hook_app() as app:
        app.hold = lambda name, payload: True
        result = belt("trigger", "agent.start", "--to", f"{app.url}/h", "--timeout", "0.5")
    host = app.url.removeprefix("http://")
    assert result.exit_code == 6
    assert hint_of(result) == (
        f"the handler at {host} must answer within 0.5 s: check that it does not block"
    )


def test_a_500_is_1_and_points_at_the_handlers_output() -> None:
    with hook_app(lambda name, payload: (500, {"error": "kaput"})) as app:
        result = belt("trigger", "agent.start", "--to", f"{app.url}/h")
    host = app.url.removeprefix("http://")
    assert result.exit_code == 1
    assert hint_of(result) == (
        f"the handler at {host} failed with HTTP 500 (a hook handler must answer 2xx): its "
        "output says why"
    )


def test_an_invalid_body_is_1_and_says_what_to_answer() -> None:
    with hook_app(lambda name, payload: {"decision": "perhaps"}) as app:
        result = belt("trigger", "agent.start", "--to", f"{app.url}/h")
    assert result.exit_code == 1
    assert hint_of(result).startswith("answer a JSON object whose decision, reason, inject")


def test_a_malformed_http_answer_is_1() -> None:
    def not_http(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/2 200 OK\r\n\r\n")

    with hostile.hostile_server(not_http) as url:
        result = belt("trigger", "agent.start", "--to", f"{url}/h")
    assert result.exit_code == 1, result.stderr
    assert f"{url.removeprefix('http://')} sent a malformed answer" in result.stderr


def test_a_hint_names_the_users_belt_serve_when_the_handler_is_it() -> None:
    # A running-serve file of this process (alive) at the handler's address: the 500 came from
    # "the user's belt serve", and the hint names it so.
    with hook_app(lambda name, payload: (500, "")) as app:
        port = int(app.url.rsplit(":", 1)[1])
        serve_file(port, os.getpid())
        result = belt("trigger", "agent.start", "--to", f"{app.url}/h")
    assert result.exit_code == 1
    assert hint_of(result).startswith(
        f"belt serve on 127.0.0.1:{port} (pid {os.getpid()}, started "
    )
    assert "failed with HTTP 500" in hint_of(result)


# -- belt sim: the summary's hint -------------------------------------------------------------


def sim_with_webhook(tmp_path: Path, url: str, *flags: str) -> Result:
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": url}
    call = {"name": "delete_file", "arguments": {"path": "/tmp/x"}, "result": "ok"}
    turn = {"user": "x", "model": [{"say": "a", "tool_calls": [call]}, {"say": "b"}]}
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"agent": {"name": "t", "hooks": [hook]}, "turns": [turn]}))
    return belt("sim", "run", str(path), *flags)


def summary_fix(result: Result) -> Any:
    return result.json()["hook_summary"]["handlers"][0]["fix"]


def test_a_sim_against_a_dead_handler_of_ones_own_does_not_ask_about_belt_serve(
    tmp_path: Path,
) -> None:
    with refused_port() as port:
        result = sim_with_webhook(tmp_path, f"http://127.0.0.1:{port}/hooks", "--json")
        plain = sim_with_webhook(tmp_path, f"http://127.0.0.1:{port}/hooks")
    assert result.exit_code == 0, result.stderr
    assert summary_fix(result) == (
        f"nothing listens on 127.0.0.1:{port}: start your handler there, or fix the port in its URL"
    )
    assert QUESTION not in plain.stdout + plain.stderr
    assert "belt serve" not in plain.stdout


def test_a_sim_against_a_belt_serve_of_the_user_that_was_killed_says_it_stopped(
    tmp_path: Path,
) -> None:
    with refused_port() as port:
        pid = dead_pid()
        serve_file(port, pid)  # left behind by a serve killed outright
        result = sim_with_webhook(tmp_path, f"http://127.0.0.1:{port}/hooks", "--json")
    assert summary_fix(result).startswith(
        f"the belt serve on 127.0.0.1:{port} (pid {pid}, started "
    )
    assert summary_fix(result).endswith(
        f"has stopped: start it again (belt serve --port {port} …), or point the hook at your "
        "handler"
    )


def test_a_refused_default_port_names_belt_serve_as_what_listens_there_by_default(
    tmp_path: Path,
) -> None:
    from belt.handlers.webhook import likely_fix

    assert likely_fix("cannot connect to 127.0.0.1:8787: [Errno 111] Connection refused") == (
        "nothing listens on 127.0.0.1:8787, the port belt serve takes by default: start "
        "`belt serve` (or your handler) there"
    )


def test_a_sim_against_a_handler_that_crashes_mid_request_says_so(tmp_path: Path) -> None:
    with hostile.hostile_server(closing) as url:
        result = sim_with_webhook(tmp_path, f"{url}/hooks", "--json")
    host = url.removeprefix("http://")
    assert result.exit_code == 0, result.stderr
    summary = result.json()["hook_summary"]
    assert (
        summary["handlers"][0]["first_error"] == f"{host} closed the connection without answering"
    )
    assert summary_fix(result).startswith(
        f"the handler at {host} took the request and closed the connection without an answer"
    )


# -- belt replay --to and --api follow the same table -------------------------------------------


def test_replay_to_a_handler_that_closes_the_connection_exits_1(tmp_path: Path) -> None:
    payloads = tmp_path / "payloads.jsonl"
    with hook_app() as app:
        result = belt("trigger", "agent.start", "--to", f"{app.url}/h", "--json")
    payloads.write_text(json.dumps(result.json()["payload"]) + "\n")
    with hostile.hostile_server(closing) as url:
        replayed = belt("replay", str(payloads), "--to", f"{url}/hooks")
    assert replayed.exit_code == 1, replayed.stderr
    assert "closed the connection without answering" in replayed.stderr


def test_api_to_a_server_that_closes_the_connection_exits_1() -> None:
    with hostile.hostile_server(closing) as url:
        result = belt("interrupt", "resolve", "int_1", "allow", "--api", url)
    assert result.exit_code == 1, result.stderr
    assert f"error: {url}/interrupts/int_1/resolve closed the connection without answering" in (
        result.stderr
    )
