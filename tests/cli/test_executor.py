"""`belt executor run`, and `belt sim` on Nexus scenarios, as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from belt.errors import ExitCode
from belt.records.hooktasks import HOOKTASK, PENDING_TAG
from belt.store import open_store
from tests.cli.runner import belt

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples"
VERIFY = f"verify=cmd:{EXAMPLES / 'nexus-verify.sh'}"
ACK = f"execution_check=cmd:{EXAMPLES / 'nexus-ack.sh'}"


def scenario(tmp_path: Path, *, timeout_ms: int = 5000, rounds: int = 1) -> Path:
    says = ["It should work now.", "Ran them: all tests pass."][:rounds]
    path = tmp_path / "stop.toml"
    path.write_text(
        'dialect = "nexus"\n'
        '[profile]\napproval_mode = "auto"\n'
        "[profile.lifecycle_hooks.stop]\n"
        f'tool = "verify"\ntimeout_ms = {timeout_ms}\nmax_continuations = 1\n'
        '[[turns]]\nuser = "Fix the test."\n'
        + "".join(f'[[turns.model]]\nsay = "{say}"\n' for say in says)
    )
    return path


def test_the_stop_loop_example_runs_with_its_shell_script() -> None:
    result = belt("sim", "run", str(EXAMPLES / "nexus-stop-loop.toml"), "--executor", VERIFY)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("stop → verify: continue" in line for line in lines)
    assert any("[stop: accepted]" in line for line in lines)
    live = result.stderr.splitlines()
    assert [line.split()[1:4] for line in live] == [
        ["turn_start", live[0].split()[2], "acknowledged"],
        ["stop", live[1].split()[2], "continue"],
        ["stop", live[2].split()[2], "acknowledged"],
    ]
    assert live[1].split()[2].endswith(":stop:answer-1")


def test_the_tour_example_runs_every_kind_of_execution() -> None:
    result = belt("sim", "run", str(EXAMPLES / "nexus-tour.toml"), "--executor", ACK, "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert [r["kind"] for r in report["runs"]] == [
        "input",
        "mail",
        "regeneration",
        "background",
        "tool_only",
        "standalone",
    ]
    assert {r["state"] for r in report["runs"]} == {"completed"}
    events = [t["event"] for t in report["hook_tasks"]]
    assert events.count("pre_compact") == events.count("post_compact") == 1


def test_an_attention_hold_exits_1_and_shows_how_to_go_on(tmp_path: Path) -> None:
    result = belt("sim", "run", str(scenario(tmp_path)), "--executor", VERIFY)
    assert result.exit_code == 1
    assert "stop → verify: FAILED (continuation_limit_exceeded)" in result.stdout
    lines = result.stdout.splitlines()
    hold = next(line for line in lines if line.startswith("⚠ run "))
    run_id = hold.split()[2]
    assert f"  belt sim resume {run_id} --executor verify=TARGET" in lines
    assert f"  belt sim stop {run_id}" in lines

    shown = belt("sim", "show", run_id, "--json")
    assert shown.exit_code == 0
    report = shown.json()
    (run,) = report["runs"]
    assert run["state"] == "attention_hold"
    assert run["attention"]["reason"] == "continuation_limit_exceeded"
    assert [t["status"] for t in report["hook_tasks"]] == ["completed", "failed"]

    stopped = belt("sim", "stop", run_id, "--force")
    assert stopped.exit_code == 0
    assert stopped.stdout.strip() == f"run {run_id} canceled"


@pytest.mark.parametrize(
    ("body", "timeout_ms", "shown"),
    [
        (
            "echo 'verification service down' >&2\nexit 2\n",
            10_000,
            "FAILED (tool_failed): the command exited with 2: verification service down",
        ),
        ("sleep 30\n", 300, "FAILED (timeout): the tool did not finish within 300 ms"),
        ("echo ok\n", 10_000, "FAILED (invalid_decision): stdout is not JSON"),
    ],
    ids=["non-zero-exit", "past-deadline", "not-json"],
)
def test_a_failing_cmd_tool_puts_the_run_on_hold(
    tmp_path: Path, body: str, timeout_ms: int, shown: str
) -> None:
    tool = tmp_path / "verify.sh"
    tool.write_text("#!/bin/sh\ncat >/dev/null\n" + body)
    tool.chmod(0o755)
    # Where the tool fails at once, a generous deadline: a slow machine must not turn its
    # failure into a timeout.
    path = scenario(tmp_path, timeout_ms=timeout_ms)
    result = belt("sim", "run", str(path), "--executor", f"verify=cmd:{tool}")
    assert result.exit_code == 1
    assert shown in result.stdout
    assert "⚠ run ar_" in result.stdout


def test_sim_run_tells_who_it_is_waiting_for(tmp_path: Path) -> None:
    result = belt("sim", "run", str(scenario(tmp_path, timeout_ms=20)))
    assert result.exit_code == 1
    assert "waiting up to 20 ms for an executor to serve stop task" in result.stderr
    assert "(timeout): no executor claimed the task within 20 ms" in result.stdout


def test_executor_flags_are_checked(tmp_path: Path) -> None:
    platform = tmp_path / "p.toml"
    platform.write_text('[[turns]]\nuser = "x"\n[[turns.model]]\nsay = "y"\n')
    result = belt("sim", "run", str(platform), "--executor", VERIFY)
    assert result.exit_code == ExitCode.USAGE
    assert "--executor serves Nexus hook tasks" in result.stderr
    result = belt("sim", "run", str(scenario(tmp_path)), "--fail-closed")
    assert result.exit_code == ExitCode.USAGE
    result = belt("sim", "run", str(scenario(tmp_path)), "--executor", "verify")
    assert result.exit_code == ExitCode.USAGE
    result = belt("executor", "run", "--tool", "verify=ftp://x", "--once")
    assert result.exit_code == ExitCode.USAGE
    result = belt("executor", "run")
    assert result.exit_code == ExitCode.USAGE


def test_executor_once_with_an_empty_inbox_serves_nothing() -> None:
    result = belt("executor", "run", "--tool", VERIFY, "--once")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == "served 0 task(s)"


def wait_for_pending(deadline: float = 30.0) -> str:
    store = open_store()
    until = time.monotonic() + deadline
    while time.monotonic() < until:
        pending = store.tagged(PENDING_TAG)
        if pending:
            return pending[0]
        time.sleep(0.01)
    raise AssertionError("the simulation never put a hook task in the inbox")


def test_a_separate_executor_process_serves_a_waiting_simulation(
    tmp_path: Path, belt_home: Path
) -> None:
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    path = scenario(tmp_path, timeout_ms=60_000, rounds=2)
    sim = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", str(path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        served = 0
        for _ in range(2):
            task_id = wait_for_pending()
            worker = subprocess.run(
                [sys.executable, "-m", "belt", "executor", "run", "--tool", VERIFY, "--once"],
                capture_output=True,
                env=env,
                cwd=ROOT,
                timeout=60,
            )
            assert worker.returncode == 0, worker.stderr
            (line,) = worker.stdout.decode().splitlines()
            task = open_store().read(HOOKTASK, task_id)
            assert task["task_key"] in line
            served += 1
        stdout, stderr = sim.communicate(timeout=60)
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.communicate()
    assert sim.returncode == 0, stderr.decode()
    report = json.loads(stdout)
    (run,) = report["runs"]
    assert run["state"] == "completed"
    assert [(t["task_key"].rsplit(":", 1)[1], t["status"]) for t in report["hook_tasks"]] == [
        ("answer-1", "completed"),
        ("answer-2", "completed"),
    ]
    assert [t["decision"]["continue"] for t in report["hook_tasks"]] == [True, False]
    assert {t["claim"]["by"].split(":")[-1] for t in report["hook_tasks"]} != {str(sim.pid)}


def test_executor_json_prints_one_object_per_task(tmp_path: Path, belt_home: Path) -> None:
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    path = scenario(tmp_path, timeout_ms=60_000, rounds=2)
    sim = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    records = []
    try:
        for _ in range(2):
            wait_for_pending()
            result = belt("executor", "run", "--tool", VERIFY, "--once", "--json")
            assert result.exit_code == 0
            records += [json.loads(line) for line in result.stdout.splitlines()]
        assert sim.wait(timeout=60) == 0
    finally:
        if sim.poll() is None:
            sim.kill()
            sim.wait()
    assert [(r["kind"], r["event"], r["outcome"]) for r in records] == [
        ("task", "stop", "continue"),
        ("task", "stop", "acknowledged"),
    ]
    assert records[0]["feedback"] == "Run the tests and report whether they pass."


BLOCKER = """\
import os, sys, time
from pathlib import Path
here = Path(sys.argv[1])
sys.stdin.read()
with open(here / "runs", "a") as log:
    log.write(f"start {os.getpid()}\\n")
until = time.monotonic() + 60
while not (here / "go").exists() and time.monotonic() < until:
    time.sleep(0.01)
with open(here / "runs", "a") as log:
    log.write("done\\n")
print('{"structured_content": {"continue": false}}')
"""


def gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie its new parent has not reaped runs no more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat.rpartition(b")")[2].split()[0] == b"Z"


def test_a_killed_workers_claim_goes_to_another_worker_and_the_task_runs_once(
    tmp_path: Path, belt_home: Path
) -> None:
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    (tmp_path / "blocker.py").write_text(BLOCKER)
    tool = f"verify=cmd:{sys.executable} {tmp_path / 'blocker.py'} {tmp_path}"
    runs = tmp_path / "runs"

    def started() -> list[str]:
        lines = runs.read_text().splitlines() if runs.exists() else []
        return [line.split()[1] for line in lines if line.startswith("start")]

    def worker(*flags: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "belt", "executor", "run", "--tool", tool, *flags]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    sim = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", str(scenario(tmp_path, timeout_ms=60_000))]
        + ["--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    first = worker()
    second = None
    try:
        wait_for_pending()
        until = time.monotonic() + 60
        while not started() and time.monotonic() < until:
            time.sleep(0.01)
        (first_tool,) = started()  # the first worker holds the claim, its tool running
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        second = worker("--once")
        while len(started()) < 2 and time.monotonic() < until:
            time.sleep(0.01)
        assert len(started()) == 2, runs.read_text()
        # The first run was stopped before the task went back to the inbox.
        assert gone(int(first_tool))
        (tmp_path / "go").touch()
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err.decode()
        stdout, stderr = sim.communicate(timeout=60)
    finally:
        for process in (sim, first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()
    assert sim.returncode == 0, stderr.decode()
    assert runs.read_text().splitlines().count("done") == 1
    report = json.loads(stdout)
    (run,) = report["runs"]
    assert run["state"] == "completed"
    (task,) = report["hook_tasks"]
    assert (task["status"], task["attempt"]) == ("completed", 2)
    assert task["history"][0]["error"]["code"] == "worker_gone"
    assert task["claim"]["pid"] == second.pid
