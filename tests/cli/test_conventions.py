"""Conventions every command keeps: Ctrl-C is exit 130 and one line (real processes, a real
SIGINT); `belt serve`'s ready line and --open; `interrupt review` settles overdue gates first;
`interrupt watch` says what it watches and prints events in the order they happened;
`interrupt resolve --all`."""

from __future__ import annotations

import os
import re
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from belt.outgoing.signing import signed_headers
from belt.records.interrupts import Watch, create_interrupt, resolve_interrupt
from belt.store import open_store
from belt.store.clock import utcnow
from belt.wire.samples import sample_payload
from tests.cli.runner import belt
from tests.terminal import Terminal
from tests.terminal import on_terminal as belt_on_terminal

ROOT = Path(__file__).parent.parent.parent


def open_gate(run_id: str = "ar_run1", **kwargs: object) -> dict:
    return create_interrupt(run_id=run_id, chat_id="ch_chat1", event="agent.tool_call", **kwargs)


def tool_gate(tool: str, run_id: str = "ar_run1", **kwargs: object) -> dict:
    meta = {"event": "agent.tool_call", "data": {"tool": tool, "arguments": {}}}
    return open_gate(run_id, meta=meta, **kwargs)


@contextmanager
def on_terminal(args: list[str], env: dict[str, str] | None = None) -> Iterator[Terminal]:
    """``belt ARGS`` on a pseudo-terminal (stdin, stdout and stderr)."""
    with belt_on_terminal(
        args, env={**os.environ, "TERM": "dumb", **(env or {})}, cwd=ROOT
    ) as terminal:
        yield terminal


# -- Ctrl-C: exit 130 and one line, in every command --------------------------------------------

LONG_RUNNING = {
    "serve": (["serve", "--port", "0", "--sweep-interval", "0"], "listening on "),
    "interrupt watch": (["interrupt", "watch", "--interval", "0.05"], "watching the gates"),
    "executor run": (["executor", "run", "--tool", "verify=cmd:true"], "serving verify"),
}


@pytest.mark.parametrize("name", list(LONG_RUNNING))
def test_ctrl_c_stops_a_long_command_with_exit_130_and_one_line(name: str) -> None:
    args, ready = LONG_RUNNING[name]
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert ready in first, first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, first + err
    assert err.splitlines() == ["interrupted"], err
    assert "Traceback" not in out + err and "Aborted" not in err


SWALLOWING_HOOK = """
import time


class Litter:
    def __del__(self):
        raise KeyboardInterrupt  # in a finalizer: Python cannot raise it, only report it


def decide(payload):
    Litter()
    time.sleep(60)  # the command is stopped long before
"""


def test_a_ctrl_c_swallowed_by_a_finalizer_ends_the_command_with_one_line(
    tmp_path: Path,
) -> None:
    # belt presses a swallowed Ctrl-C again; the command, stopped by it, says "interrupted"
    # itself, and the process ended once more saying it again (two lines) before it noted that.
    (tmp_path / "hook.py").write_text(SWALLOWING_HOOK)
    to = f"py:{tmp_path / 'hook.py'}:decide"
    done = subprocess.run(
        [sys.executable, "-m", "belt", "trigger", "agent.turn_start", "--to", to],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["interrupted"], done.stderr


SET_NAME_PRESSED = """
from belt.cli import console


class Pressed:
    def __set_name__(self, owner, name):
        raise KeyboardInterrupt  # as a Ctrl-C landing here does


def load():
    class Imported:  # a class statement of a module belt imports as it starts (platform's)
        field = Pressed()

    return Imported


console(load, "belt")
"""


def test_a_ctrl_c_in_a_class_statement_being_imported_is_one_line_and_exit_130() -> None:
    # Python 3.11 wraps it in "RuntimeError: Error calling __set_name__", which went past
    # belt's Ctrl-C as a traceback (a fresh clone's sweep of Ctrl-C over belt's start hit it).
    done = subprocess.run(
        [sys.executable, "-c", SET_NAME_PRESSED], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted\n"


def test_ctrl_c_at_the_review_prompt_exits_130_with_one_line() -> None:
    open_gate()
    with on_terminal(["interrupt", "review"]) as terminal:
        terminal.wait_for("[a/d/s/q] ")
        code = terminal.interrupt()
    assert code == 130, terminal.text
    assert terminal.text.rstrip().endswith("\ninterrupted"), terminal.text
    assert "Traceback" not in terminal.text and "Aborted" not in terminal.text
    assert belt("interrupt", "list", "--json").json()[0]["status"] == "pending"


def test_ctrl_c_at_a_confirmation_exits_130_and_settles_nothing() -> None:
    open_gate()
    with on_terminal(["interrupt", "resolve", "--all", "deny"]) as terminal:
        terminal.wait_for("settle 1 pending gate(s) as deny? [y/N]: ")
        code = terminal.interrupt()
    assert code == 130, terminal.text
    assert "interrupted" in terminal.text and "Aborted" not in terminal.text
    assert belt("interrupt", "list", "--json").json()[0]["status"] == "pending"


# -- belt serve: one ready line, --open ---------------------------------------------------------


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`belt serve --port 0 ARGS` in a child process; yields its ready line."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", "--sweep-interval", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stderr is not None
        # A server that hangs before its ready line fails the test rather than hanging it.
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "belt serve printed nothing within 60 s"
        yield proc.stderr.readline()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise


def test_serve_prints_one_ready_line_with_the_urls_and_open_opens_the_inspector(
    tmp_path: Path,
) -> None:
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}.part && mv {opened}.part {opened}\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    with serving("--open", env={"BROWSER": str(browser)}) as line:
        url = re.search(r"listening on (http://127\.0\.0\.1:\d+) ", line)
        assert url, line
        base = url.group(1)
        assert f"hooks {base}/hooks, API {base}, inspector {base}/;" in line
        assert "signing secret" not in line
        assert httpx.get(f"{base}/healthz").status_code == 200
        deadline = time.monotonic() + 60
        while not opened.exists():
            assert time.monotonic() < deadline, "the browser was never started"
            time.sleep(0.02)
    assert opened.read_text() == f"{base}/"


def test_serve_secret_new_prints_the_secret_it_made_and_checks_it() -> None:
    with serving("--secret", "new") as line:
        found = re.search(r"listening on (http://\S+) .*signing secret (whsec_\S+);", line)
        assert found, line
        base, secret = found.groups()
        body = httpx.Request("POST", "/", json=sample_payload("agent.start")).content
        headers = {**signed_headers(secret, body), "content-type": "application/json"}
        signed = httpx.post(f"{base}/hooks", content=body, headers=headers)
        unsigned = httpx.post(
            f"{base}/hooks", content=body, headers={"content-type": "application/json"}
        )
    assert (signed.status_code, unsigned.status_code) == (200, 401)


def test_a_given_secret_is_never_printed() -> None:
    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    with serving("--secret", secret) as line:
        assert "signed requests only" in line
    assert secret not in line and secret[6:] not in line


# -- interrupt review settles overdue gates first ---------------------------------------------


def test_review_settles_overdue_gates_with_their_default_before_it_asks() -> None:
    past = utcnow() - timedelta(hours=1)
    overdue = open_gate(timeout=60, default_resolution="deny", now=past)
    with on_terminal(["interrupt", "review"]) as terminal:
        code = terminal.finish()
    assert code == 0, terminal.text
    assert "settled 1 overdue gate(s) with their default resolution, as the platform " in (
        " ".join(terminal.text.split())
    )
    assert f"{overdue['short_id']} deny" in terminal.text
    assert "[a/d/s/q]" not in terminal.text
    assert belt("interrupt", "show", overdue["id"], "--json").json()["status"] == "expired"


# -- interrupt watch: what it watches, events in order ------------------------------------------


def test_watch_prints_a_looks_events_in_the_order_they_happened() -> None:
    gates = [open_gate() for _ in range(8)]
    watch = Watch(store=open_store())
    assert [event["event"] for event in watch.start()] == ["pending"] * 8
    # Settled in the reverse of their ids' order, one second apart: the look sees them all.
    order = sorted(gates, key=lambda gate: gate["id"], reverse=True)
    start = utcnow()
    for seconds, gate in enumerate(order):
        resolve_interrupt(
            interrupt_id=gate["id"], decision="allow", now=start + timedelta(seconds=seconds)
        )
    events = watch.poll()
    assert [event["interrupt"]["id"] for event in events] == [gate["id"] for gate in order]


def test_watch_says_what_it_watches_when_it_starts() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WATCH_START_LINE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"watching the gates of run ar_run1 in {os.environ['BELT_HOME']}, looked at every 0.5 s: "
        "those pending now, then each as it opens and settles; Ctrl-C stops"
    )


WATCH_START_LINE = """
from belt.cli.interrupt import _watching
print(_watching(["ar_run1"], None, 0.5))
"""


def test_watch_with_api_names_the_platform_by_host_only() -> None:
    from belt.cli.interrupt import _watching

    line = _watching(["ar_run1"], "https://user:pw@api.example.com/v1?key=1", 2)
    assert "at api.example.com, polled every 2 s" in line
    assert "pw" not in line and "key" not in line


# -- interrupt resolve --all ------------------------------------------------------------------


def test_resolve_all_settles_the_gates_the_filters_select() -> None:
    delete = tool_gate("delete_file")
    tool_gate("read_file")
    other_run = tool_gate("delete_file", run_id="ar_run2")
    result = belt(
        "interrupt",
        "resolve",
        "--all",
        "deny",
        "--tool",
        "delete_file",
        "--run",
        "ar_run1",
        "--yes",
    )
    assert result.exit_code == 0, result.stderr
    assert f"{delete['short_id']} resolved: deny" in result.stdout
    assert "resolved 1 of 1 as deny" in result.stderr
    statuses = {
        item["id"]: item["status"] for item in belt("interrupt", "list", "--all", "--json").json()
    }
    assert statuses[delete["id"]] == "resolved"
    assert list(statuses.values()).count("pending") == 2
    assert statuses[other_run["id"]] == "pending"


def test_resolve_all_by_event_and_as_json() -> None:
    tool_gate("delete_file")
    turn = create_interrupt(run_id="ar_run1", chat_id="ch_chat1", event="agent.turn_start")
    result = belt(
        "interrupt", "resolve", "--all", "allow", "--event", "agent.turn_start", "--yes", "--json"
    )
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert [item["id"] for item in document["resolved"]] == [turn["id"]]
    assert document["missed"] == []


def test_resolve_all_piped_without_yes_is_a_usage_error_that_says_to_add_it() -> None:
    tool_gate("delete_file")
    result = belt("interrupt", "resolve", "--all", "deny")
    assert result.exit_code == 2
    assert "1 pending gate(s)" in result.stderr and "add --yes" in result.stderr
    assert belt("interrupt", "list", "--json").json()[0]["status"] == "pending"


def test_resolve_usage_errors_print_commands_without_placeholders() -> None:
    gate = tool_gate("delete_file")
    with_id = belt("interrupt", "resolve", "--all", gate["id"], "deny")
    assert with_id.exit_code == 2
    assert "belt interrupt resolve --all deny, with --run" in with_id.stderr
    no_decision = belt("interrupt", "resolve", gate["id"])
    assert no_decision.exit_code == 2
    assert f"belt interrupt resolve {gate['id']} allow (or deny)" in no_decision.stderr
    for placeholder in ("RUN_ID", "allow|deny", "TOOL"):
        assert placeholder not in with_id.stderr + no_decision.stderr


def test_resolve_all_on_a_terminal_asks_to_confirm_the_count() -> None:
    tool_gate("delete_file")
    tool_gate("read_file")
    with on_terminal(["interrupt", "resolve", "--all", "allow"]) as terminal:
        terminal.wait_for("settle 2 pending gate(s) as allow? [y/N]: ")
        os.write(terminal.primary, b"y\n")
        code = terminal.finish()
    assert code == 0, terminal.text
    assert "resolved 2 of 2 as allow" in terminal.text
    assert belt("interrupt", "list", "--json").json() == []


def test_resolve_all_names_and_skips_gates_settled_meanwhile() -> None:
    from belt.backends.backend import LocalBackend, matching_gates, resolve_each

    first, second = tool_gate("delete_file"), tool_gate("delete_file")
    backend = LocalBackend()
    items = matching_gates(backend, tool="delete_file")
    assert [item["id"] for item in items] == [first["id"], second["id"]]
    resolve_interrupt(interrupt_id=second["id"], decision="allow")
    resolved, missed = resolve_each(backend, items, decision="deny")
    assert [item["id"] for item in resolved] == [first["id"]]
    assert [item["id"] for item, _ in missed] == [second["id"]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["k2m9", "allow", "--all"], "takes no ID"),
        (["--all", "maybe"], "needs allow or deny"),
        (["k2m9"], "give a decision"),
        (["k2m9", "allow", "--tool", "x"], "--tool selects gates for --all"),
    ],
)
def test_resolve_all_usage_mistakes(args: list[str], message: str) -> None:
    result = belt("interrupt", "resolve", *args)
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr


def test_resolve_all_with_nothing_to_settle() -> None:
    result = belt("interrupt", "resolve", "--all", "deny", "--yes")
    assert result.exit_code == 0
    assert "no pending interrupts match" in result.stderr


def test_end_of_input_at_a_confirmation_is_one_line_and_settles_nothing() -> None:
    open_gate()
    with on_terminal(["interrupt", "resolve", "--all", "deny"]) as terminal:
        terminal.wait_for("settle 1 pending gate(s) as deny? [y/N]: ")
        os.write(terminal.primary, b"\x04")  # Ctrl-D: the end of input
        code = terminal.finish()
    assert code == 1, terminal.text
    assert "error: no answer: the input ended at a question" in terminal.text
    assert "Aborted" not in terminal.text
    assert belt("interrupt", "list", "--json").json()[0]["status"] == "pending"


def test_declining_the_confirmation_settles_nothing() -> None:
    open_gate()
    with on_terminal(["interrupt", "resolve", "--all", "deny"]) as terminal:
        terminal.wait_for("settle 1 pending gate(s) as deny? [y/N]: ")
        os.write(terminal.primary, b"n\n")
        code = terminal.finish()
    assert code == 1, terminal.text
    assert "nothing resolved: not confirmed" in terminal.text
    assert belt("interrupt", "list", "--json").json()[0]["status"] == "pending"
