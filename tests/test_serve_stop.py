"""`belt serve` stops cleanly, Ctrl-C is one line everywhere, and the server says what is open.

Real processes, real signals: `.venv/bin/belt serve --port 0` in a child process, stopped with
SIGTERM or SIGINT while a request's body is half sent or a `--handler` call is in flight, idle,
and with `--workers 2`; Ctrl-C sent to `belt` while Python and belt start. Each test waits for
the process with a generous timeout (a stop that hangs fails it) and never measures time.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from belt.server.listen import QuietStop
from belt.store import open_store
from tests.cli.runner import belt
from tests.servers import REFUSED, turn_start
from tests.waiting import eventually

ROOT = Path(__file__).parent.parent
BELT = Path(sys.executable).parent / "belt"
"""The console script, as a user runs it."""

STOPPED_WITHIN = 20
"""Seconds a stopping server has before the test calls it hung (its grace is 1 s; the handler
it cuts off would sleep 600 s, and a request body may take 30 s)."""

NOT_ANSWERED = "not answered: the server stopped, and its 1 s grace ended"
TRACES = ("Traceback", "CancelledError", "Exception in ASGI", "graceful shutdown exceeded")


@dataclass
class Served:
    """A `belt serve` child process, its port, and what it printed once it ended."""

    proc: subprocess.Popen[str]
    port: int
    ready: str
    stdout: str = ""
    stderr: str = ""

    def stop(self, sig: signal.Signals, *, group: bool = False) -> int:
        """Send ``sig`` (to the whole process group with ``group``, as a terminal's Ctrl-C
        does), wait for the process to end, and keep what it printed; its exit code."""
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=STOPPED_WITHIN)
        # Read once it has ended (a worker's resource tracker may keep the pipes a moment
        # longer), through the readers the ready line was read with: they may hold more.
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout = self.proc.stdout.read()
        self.stderr = self.ready + self.proc.stderr.read()
        return code


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """`belt serve --port 0 --sweep-interval 0 ARGS` in a child process of its own group."""
    proc = subprocess.Popen(
        [str(BELT), "serve", "--port", "0", "--sweep-interval", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        ready = proc.stderr.readline()
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", ready)
        assert found, ready
        yield Served(proc, int(found.group(1)), ready)
    finally:
        # Its workers too (they hold its pipes), even once it has ended.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def slow_handler(tmp_path: Path) -> tuple[str, Path]:
    """A ``--handler`` that marks a file when it is called, then sleeps for 600 s."""
    module = tmp_path / "slow.py"
    marker = tmp_path / "called"
    module.write_text(
        textwrap.dedent(
            f"""
            import time
            from pathlib import Path


            def decide(payload):
                Path({str(marker)!r}).touch()
                time.sleep(600)
            """
        )
    )
    return f"py:{module}:decide", marker


def post_hook(port: int) -> socket.socket:
    """Send a whole hook request on a new connection; the connection, to read its answer."""
    body = json.dumps(turn_start()).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=STOPPED_WITHIN)
    sock.sendall(
        f"POST /hooks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def half_sent(port: int) -> socket.socket:
    """A hook request whose head is read and whose body is half sent: the server has asked for
    the body (``100 Continue``) and got its first bytes only."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=STOPPED_WITHIN)
    sock.sendall(
        f"POST /hooks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n".encode()
    )
    assert sock.recv(100).startswith(b"HTTP/1.1 100 "), "the server never asked for the body"
    sock.sendall(b'{"event": "agent.turn_start", ')
    return sock


def answer(sock: socket.socket) -> bytes:
    """What the server sent on ``sock`` until it closed it."""
    received = b""
    with sock:
        while chunk := sock.recv(65536):
            received += chunk
    return received


def assert_clean(served: Served, last_line: str) -> None:
    """No traceback; the ready line first, ``last_line`` last on stderr."""
    for trace in TRACES:
        assert trace not in served.stderr + served.stdout, served.stderr
    lines = served.stderr.splitlines()
    assert lines[0] == served.ready.rstrip("\n")
    assert lines[-1] == last_line, served.stderr


def cut_off_lines(served: Served) -> list[str]:
    return [line for line in served.stdout.splitlines() if "503" in line]


# -- a request in flight at the stop -----------------------------------------------------------


def test_sigterm_with_a_half_sent_body_answers_503_says_so_on_one_line_and_exits_0() -> None:
    with serving() as served:
        sock = half_sent(served.port)
        code = served.stop(signal.SIGTERM)
        reply = answer(sock)
    assert code == 0, served.stderr
    assert_clean(served, "stopped (SIGTERM)")
    assert reply.startswith(b"HTTP/1.1 503 "), reply
    assert NOT_ANSWERED.encode() + b" while its body was still arriving" in reply
    (line,) = cut_off_lines(served)
    assert re.fullmatch(
        rf"\d\d:\d\d:\d\d  -  503  {NOT_ANSWERED} while its body was still arriving  [\d.]+ ms",
        line,
    )
    (record,) = open_store().read_log("journal", "serve")
    assert record["status"] == 503
    assert record["error"] == f"{NOT_ANSWERED} while its body was still arriving"
    assert "request" not in record and record["route"] == "/hooks"


def test_ctrl_c_with_a_handler_call_in_flight_cuts_it_off_journals_it_and_exits_130(
    tmp_path: Path,
) -> None:
    handler, called = slow_handler(tmp_path)
    with serving("--handler", handler) as served:
        sock = post_hook(served.port)
        eventually(called.exists, "the handler was called")
        code = served.stop(signal.SIGINT)
        reply = answer(sock)
    assert code == 130, served.stderr
    assert_clean(served, "interrupted")
    assert reply.startswith(b"HTTP/1.1 503 "), reply
    (line,) = cut_off_lines(served)
    assert f"{NOT_ANSWERED} while the handler was still deciding" in line
    (record,) = open_store().read_log("journal", "serve")
    assert record["status"] == 503
    assert record["error"] == f"{NOT_ANSWERED} while the handler was still deciding"
    assert record["request"] == turn_start()  # what was asked, for `belt replay journal`


def test_an_idle_server_stops_on_sigterm_with_one_line() -> None:
    # Without --allow-host it says nothing more (no warning): the one line is all.
    with serving() as served:
        code = served.stop(signal.SIGTERM)
    assert code == 0, served.stderr
    assert_clean(served, "stopped (SIGTERM)")
    assert served.stderr.splitlines()[1:] == ["stopped (SIGTERM)"]
    assert "warning" not in served.stderr
    assert served.stdout == ""


def test_ctrl_c_pressed_twice_stops_with_one_line_and_no_traceback() -> None:
    with serving() as served:
        served.proc.send_signal(signal.SIGINT)
        code = served.stop(signal.SIGINT)
    assert code == 130, served.stderr
    assert_clean(served, "interrupted")


def test_the_lifespan_cancelled_by_a_second_ctrl_c_is_not_reported_as_a_failed_shutdown() -> None:
    # A second Ctrl-C skips the lifespan's shutdown and the loop cancels its task; Starlette
    # reports that as a failed shutdown, the text of a traceback that uvicorn logs as an error.
    # (Seen in most runs of two quick presses from a script; the test above rarely lands there.)
    cancelled = "Traceback (most recent call last):\n  ...\nasyncio.exceptions.CancelledError\n"
    failed = "Traceback (most recent call last):\n  ...\nValueError: the app's own bug\n"
    quiet = QuietStop()
    assert not quiet.filter(logging.makeLogRecord({"msg": cancelled, "levelno": logging.ERROR}))
    assert quiet.filter(logging.makeLogRecord({"msg": failed, "levelno": logging.ERROR}))


def test_two_workers_stop_on_sigterm_with_a_handler_call_in_flight(tmp_path: Path) -> None:
    handler, called = slow_handler(tmp_path)
    with serving("--workers", "2", "--handler", handler) as served:
        sock = post_hook(served.port)
        eventually(called.exists, "a worker called the handler")
        code = served.stop(signal.SIGTERM)
        reply = answer(sock)
    assert code == 0, served.stderr
    assert_clean(served, "stopped (SIGTERM)")
    assert reply.startswith(b"HTTP/1.1 503 "), reply
    (line,) = cut_off_lines(served)
    assert f"{NOT_ANSWERED} while the handler was still deciding" in line
    (record,) = open_store().read_log("journal", "serve")
    assert record["status"] == 503 and record["request"] == turn_start()


def test_two_workers_stop_on_a_terminals_ctrl_c_even_while_they_start() -> None:
    # A terminal's Ctrl-C reaches every process of the group: the workers, still importing
    # (the ready line comes before they start), must not print a KeyboardInterrupt traceback.
    with serving("--workers", "2") as served:
        children = Path(f"/proc/{served.proc.pid}/task/{served.proc.pid}/children")
        workers = [
            Path(f"/proc/{pid}/cmdline")
            for pid in eventually(
                lambda: [p for p in children.read_text().split() if spawned(p)][1:],
                "both workers were started",
            )
        ]
        code = served.stop(signal.SIGINT, group=True)
    assert code == 130, served.stderr
    assert_clean(served, "interrupted")
    assert served.stderr.splitlines()[1:] == ["interrupted"]
    assert workers


def spawned(pid: str) -> bool:
    """Whether process ``pid`` is a worker multiprocessing started (not its resource tracker)."""
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-inf"])
def test_a_grace_that_is_not_a_number_of_seconds_is_refused(value: str) -> None:
    # In-process, on a port this process holds: were the grace let through, serving would
    # end at once with "cannot listen" (exit 1) rather than go on in the test.
    taken = REFUSED.rsplit(":", 1)[1]
    done = belt("serve", "--port", taken, f"--grace={value}")
    assert done.exit_code == 2, done.stderr
    assert done.stderr == "error: --grace must be a number of seconds from 0\n"


# -- what is open ------------------------------------------------------------------------------


def test_allow_host_without_a_token_warns_who_can_reach_the_api() -> None:
    with serving("--allow-host", "belt.internal", "--allow-host", "dev.box") as served:
        served.stop(signal.SIGTERM)
    assert served.stderr.splitlines()[1:] == [
        "warning: --allow-host without --token: anyone who can reach this machine as "
        f"belt.internal or dev.box on port {served.port} can use the whole API (settle gates, "
        "read the journal, run hooks); add --token TOKEN to require a bearer token",
        "stopped (SIGTERM)",
    ]


def test_allow_host_with_a_token_or_none_at_all_says_nothing_more() -> None:
    # With none at all: test_an_idle_server_stops_on_sigterm_with_one_line.
    with serving("--allow-host", "belt.internal", env={"BELT_SERVE_TOKEN": "tok-3f9"}) as served:
        served.stop(signal.SIGTERM)
    assert served.stderr.splitlines()[1:] == ["stopped (SIGTERM)"]


# -- Ctrl-C while belt starts ------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        [str(BELT), "serve", "--port", "0"],
        # rho reads the configuration from its standard input, which stays open.
        [str(BELT.parent / "rho"), "extensions", "configure", "rho.lifecycle_hooks"],
    ],
    ids=["belt", "rho"],
)
def test_ctrl_c_during_the_imports_is_one_line_and_exit_130(command: list[str]) -> None:
    # -X importtime writes a line as each module is imported: the signal is sent once typer
    # (imported by the command line, after the console script reached belt.cli's entry point)
    # is in, while the rest of the command line (and the server's modules) are still loading.
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            seen = []
            for line in proc.stderr:
                seen.append(line)
                if line.rsplit("|", 1)[-1].strip() == "typer" or "listening on" in line:
                    break
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
            rest = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        said = [line for line in rest.splitlines() if not line.startswith("import time:")]
        assert seen[-1].rsplit("|", 1)[-1].strip() == "typer", "".join(seen)
        assert code == 130, rest
        assert said == ["interrupted"], rest


def test_ctrl_c_right_after_start_is_one_line_and_exit_130_once_belt_runs() -> None:
    # The signal lands anywhere from the interpreter's own start to the end of the command.
    # Before Python installs its SIGINT handler the process dies of the signal (-2, silent);
    # while Python itself starts (its site module, before any code of belt's) Python prints
    # its own "Fatal Python error" or traceback, in frames that are none of belt's. From the
    # moment belt's code runs, a Ctrl-C is "interrupted" and exit 130, or, once the command
    # has ended, too late to change anything (exit 0).
    # The sweep goes on until a signal came after the command's end (exit 0, nothing said), so
    # it has crossed the whole of belt's run however slowly the machine starts processes:
    # 3 ms steps over Python's start, then steps of a quarter of the wait, as many within
    # belt's run on a loaded machine as on a quiet one.
    outcomes = []
    wait = 0.0
    for attempt in itertools.count():
        proc = subprocess.Popen(
            [str(BELT), "hooks", "events"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            proc.communicate(timeout=wait)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        outcomes.append((proc.returncode, err))
        assert "/belt/" not in err, err  # no traceback through belt's code
        if proc.returncode == 130:
            assert err == "interrupted\n", err
        elif proc.returncode == 0:
            assert "agent.start" in out, err
            if not err:
                break  # the command ended before the signal came
            # A Ctrl-C that Python's own start takes and does not raise, before belt's entry
            # point runs: in the editable install's .pth line, in its check of argv[0], in a
            # callback of its import machinery. Python reports it in its own words and goes on.
            assert err.startswith(PYTHON_SWALLOWED) and "KeyboardInterrupt" in err, err
        else:
            # Python's start, before belt: its own words (or none, before its handler). While
            # Python sets up its standard streams, a Ctrl-C is its own "Fatal Python error",
            # whose traceback need not name KeyboardInterrupt (a loaded run saw a TypeError of
            # the io module's import).
            assert proc.returncode in (-signal.SIGINT, 1), err
            python_own = "KeyboardInterrupt" in err or err.startswith("Fatal Python error: ")
            assert err == "" or python_own, err
        wait = 0.003 * (attempt + 1) if attempt < 30 else wait * 1.25
    assert any(code == 130 for code, _ in outcomes), outcomes


PYTHON_SWALLOWED = (
    "Error processing line ",
    "Failed checking if argv[0] is an import path entry",
    "Exception ignored in: <function _get_module_lock.<locals>.cb",
)
"""How Python reports a KeyboardInterrupt it took and did not raise while it starts."""


CONSOLE = """
import atexit, os, signal, sys, time
import typer
from belt.cli import console

def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)  # the KeyboardInterrupt comes first

app = typer.Typer()

def parsed(value):
    if value == "parse":
        ctrl_c()
    return value

@app.command()
def run(when: str = typer.Option(..., callback=parsed)):
    if when == "command":
        ctrl_c()
    if when == "exit":
        atexit.register(ctrl_c)  # while Python ends the process, after the command
    if when == "ignored":
        # Where Python ignores exceptions (a finalizer, a callback of its import machinery) the
        # KeyboardInterrupt is not raised: Python would print "Exception ignored" and go on.
        class Finalized:
            def __del__(self):
                ctrl_c()

        Finalized()
    if when == "ignored-then-on":
        # The same, in a command that would go on until stopped (belt serve starting).
        class Finalized:
            def __del__(self):
                ctrl_c()

        Finalized()
        while True:
            time.sleep(0.01)
    print("ran")

def load():
    if "--when=load" in sys.argv:
        ctrl_c()
    return app

console(load, "demo")
"""


@pytest.mark.parametrize("when", ["load", "parse", "command", "exit", "ignored", "ignored-then-on"])
def test_ctrl_c_at_any_moment_of_a_console_entry_point_is_one_line_and_exit_130(
    when: str,
) -> None:
    # belt.cli.console runs `belt` and `rho`: Ctrl-C while it imports the app, while Typer
    # parses the command line (where Typer alone exits 130 without a word), in the command, and
    # while Python ends the process after it.
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE, f"--when={when}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines()[-1:] == ["interrupted"], done.stderr
    assert "Traceback" not in done.stderr and "Aborted" not in done.stderr, done.stderr
    # A Ctrl-C Python ignored is sent again: it stops the command wherever it is (its output
    # cut anywhere) or comes after it ended.
    if when == "ignored":
        assert "ran\n".startswith(done.stdout), done.stdout
    else:
        assert done.stdout == ("ran\n" if when == "exit" else ""), done.stdout


def test_rho_says_interrupted_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [str(BELT.parent / "rho"), "extensions", "configure", "rho.lifecycle_hooks"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Wait until it reads its standard input (the object to store), then press Ctrl-C.
        syscall = Path(f"/proc/{proc.pid}/syscall")
        eventually(lambda: syscall.read_text().startswith("0 0x0 "), "rho reads its input")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert err == "interrupted\n"


def test_importing_belt_installs_no_signal_handler() -> None:
    script = textwrap.dedent(
        """
        import signal
        watched = (signal.SIGINT, signal.SIGTERM)
        before = [signal.getsignal(s) for s in watched]
        import belt, belt.cli, belt.cli.root, belt.cli.serve, belt.cli.rho
        import belt.testing.plugin, belt.server.listen, belt.server.stopping
        assert [signal.getsignal(s) for s in watched] == before, "a handler was installed"
        print("unchanged")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "unchanged\n"), done.stderr
