"""User code runs only in supervised workers (``belt.usercode.supervisor``): whatever a handler does
to the process it runs in, ``belt test`` (at every -j), ``belt check`` and the pytest plugin's
``--belt-isolate`` fail the case that ran it with the cause, replace the worker, run every other
case and account for all of them. The tests run on a handler file in ``tmp_path``, with the
installed ``belt`` as a process of its own where its stderr or its signals are checked, else
in-process (the handlers still run in worker processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import belt.testing.suite as suite_module
from tests.cli.runner import belt as belt_here

pytest_plugins = ("pytester",)

BELT = str(Path(sys.executable).parent / "belt")

HANDLERS = '''
import ctypes, json, os, signal, sys, threading, time
from pathlib import Path

def note(payload):
    """With CALLS set, write the payload down there, one line per call."""
    if os.environ.get("CALLS"):
        with open(os.environ["CALLS"], "a") as handle:
            handle.write(json.dumps(payload, sort_keys=True) + "\\n")

def act(payload):
    """Do what the call's arguments say (``what``)."""
    note(payload)
    misbehave(payload["data"]["arguments"].get("what", "ok"))
    return None

def misbehave(what):
    if what == "exit0":
        os._exit(0)
    if what == "sys_exit":
        sys.exit(3)
    if what == "keyboard_interrupt":
        raise KeyboardInterrupt
    if what == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    if what == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    if what == "crash_in_c":
        ctypes.string_at(0)
    if what == "thread":
        threading.Thread(target=time.sleep, args=(600,), name="lingers", daemon=False).start()
    if what.startswith("close_fd_"):
        os.close(int(what[-1]))
    if what == "close_pipe":
        os.closerange(3, 4096)
    if what == "print":
        print("printed by the handler", flush=True)
    if what == "hang":
        time.sleep(600)
    if what == "hold":
        shared = Path(os.environ["HOLD"])
        (shared / f"started-{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while not (shared / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.01)

def exit_on_four(payload):
    if payload["data"]["arguments"].get("n") == 4:
        os._exit(0)
    return None

def always(what):
    def handler(payload):
        note(payload)
        misbehave(what)
        return None
    return handler

def tool_exits(task):
    os._exit(3)

exits = always("exit0")
closes_stdout = always("close_fd_1")
hangs = always("hang")
'''

CAUSES = {
    "exit0": "the worker process running it exited with status 0",
    "sys_exit": "py:handlers.py:act raised SystemExit: 3",
    "keyboard_interrupt": "py:handlers.py:act raised KeyboardInterrupt",
    "sigterm": "the worker process running it was killed by signal 15 (SIGTERM)",
    "sigkill": "the worker process running it was killed by signal 9 (SIGKILL)",
    "sigstop": "the worker process running it was stopped by signal 19 (SIGSTOP); belt ended it",
    "crash_in_c": "the worker process running it was killed by signal 11 (SIGSEGV)",
    "thread": "it left 1 thread(s) running that are not daemon threads (lingers)",
    "close_fd_0": "it closed or replaced standard input (fd 0) of its worker process",
    "close_fd_1": "it closed or replaced standard output (fd 1) of its worker process",
    "close_fd_2": "it closed or replaced standard error (fd 2) of its worker process",
    "close_pipe": "it closed the pipe between its worker process and belt",
    "hang": "py:handlers.py:act did not answer within 1 s",
}
"""Each misbehaviour, and what the case that ran it says of it (its error, or its failed hook)."""

MISBEHAVIOURS = sorted(CAUSES)


def scenario(what: str, n: int = 0, *, handler: str = "py:handlers.py:act") -> dict[str, Any]:
    """A scenario whose one hook call does ``what``; it passes when the call allows."""
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": handler, "timeout": 1}
    return {
        "agent": {"hooks": [hook]},
        "turns": [
            {
                "user": "go",
                "model": [
                    {"tool_calls": [{"name": "write_file", "arguments": {"what": what, "n": n}}]},
                    {"say": "done"},
                ],
            }
        ],
        "expect": [{"tool": "write_file", "status": "completed"}],
    }


def suite(directory: Path, behaviours: list[str]) -> list[str]:
    """A suite of one scenario per behaviour, in order; their names as belt test shows them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "handlers.py").write_text(HANDLERS)
    names = []
    for n, what in enumerate(behaviours):
        path = directory / f"s{n:02d}_{what}.json"
        path.write_text(json.dumps(scenario(what, n)))
        names.append(str(path))
    return names


def belt(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The installed ``belt ARGS``, a process of its own, in ``cwd``."""
    return subprocess.run(
        [BELT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def rows(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def junit_cases(path: Path) -> list[str]:
    return [case.get("file", "") for case in ElementTree.parse(path).iter("testcase")]


def cause_of(row: dict[str, Any]) -> str:
    """What a scenario's result says went wrong: its error, else its failed hooks."""
    return " ".join([row["error"] or "", *(f["error"] or "" for f in row["hook_failures"])])


# -- belt test -----------------------------------------------------------------------------------


def test_a_hook_that_calls_os_exit_fails_its_scenario_and_the_suite_runs_to_its_end(
    tmp_path: Path,
) -> None:
    # Before: -j 1 stopped after 4 PASS lines with exit 0, no summary, no JUnit file.
    (tmp_path / "handlers.py").write_text(HANDLERS)
    for n in range(8):
        (tmp_path / f"s{n}.json").write_text(
            json.dumps(scenario("ok", n, handler="py:handlers.py:exit_on_four"))
        )
    done = belt("test", ".", "--junit-xml", "report.xml", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:8]] == ["PASS"] * 4 + ["ERROR"] + ["PASS"] * 3
    assert "the worker process running it exited with status 0" in done.stdout
    assert lines[-1].startswith("8 scenario(s): 7 passed, 1 error(s)")
    assert len(junit_cases(tmp_path / "report.xml")) == 8
    assert "Traceback" not in done.stderr


def test_each_misbehaviour_fails_the_scenario_that_ran_it_with_its_cause(tmp_path: Path) -> None:
    # One suite, each misbehaviour between two scenarios that pass (each ran in a process of its
    # own before: the one belt test process below checks the same of every misbehaviour, and that
    # no case's cause lands on a neighbour). At -j 1 (before: a hook that left a thread running
    # kept belt test from ending once it had printed its summary, the thread not a daemon).
    # First, a webhook routed to a handler that ends its process; last, a handler that prints:
    # that goes to stderr, and stdout stays belt's JSON lines.
    behaviours = ["ok", *(each for what in MISBEHAVIOURS for each in (what, "ok")), "print"]
    names = suite(tmp_path, behaviours)
    routed = tmp_path / "a_routed.json"  # before the others
    routed.write_text(json.dumps(scenario("ok", handler="http://hooks.test/guard")))
    route = "--route=http://hooks.test=py:handlers.py:exits"
    done = belt(
        *("test", ".", "--json", "-j", "1", route, "--junit-xml", "report.xml"), cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    first, *found = rows(done.stdout)  # JSON lines only
    assert Path(first["scenario"]).name == routed.name
    assert (first["status"], first["error"]) == ("error", CAUSES["exit0"])
    assert [Path(row["scenario"]).name for row in found] == [Path(n).name for n in names]
    for what, row in zip(behaviours, found, strict=True):
        if what in CAUSES:
            assert row["status"] in ("fail", "error"), row
            assert CAUSES[what] in cause_of(row), row
        else:
            assert row["status"] == "pass", row
    assert len(junit_cases(tmp_path / "report.xml")) == len(names) + 1
    assert "printed by the handler" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_import_past_its_deadline_in_a_worker_fails_each_scenario_naming_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The template imports the modules a file names in its text; these name theirs with a JSON
    # escape, so a worker meets the import itself, and is replaced once the scenario ends.
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(600)\ndef f(p):\n    return None\n")
    hidden = json.dumps(scenario("ok", handler="py:slow.py:f")).replace('"py:', '"py\\u003a')
    for name in ("a.json", "b.json", "c.json"):
        (tmp_path / name).write_text(hidden)
    (tmp_path / "d.json").write_text(json.dumps(scenario("ok", handler="py:handlers.py:act")))
    (tmp_path / "handlers.py").write_text(HANDLERS)
    # A 1 s deadline for each import of a user's module (30 s as installed), in-process.
    monkeypatch.setattr(suite_module, "IMPORT_TIMEOUT", 1.0)
    monkeypatch.chdir(tmp_path)
    done = belt_here("test", ".", "--json")
    assert done.exit_code == 1, done.stderr
    found = rows(done.stdout)
    assert [row["status"] for row in found] == ["error", "error", "error", "pass"]
    assert found[0]["error"].endswith(
        "importing " + str(tmp_path / "slow.py") + " did not finish within 1 s"
    )
    for row in found[1:3]:  # tried once in the run: refused at once in every worker after
        assert row["error"].endswith(
            "did not finish within 1 s earlier in this run; it is not tried again"
        )


def test_a_handler_that_closes_its_workers_pipe_under_j2_fails_without_a_traceback(
    tmp_path: Path,
) -> None:
    # Before: the worker printed an OSError traceback.
    suite(tmp_path, ["ok", "close_pipe", "ok", "ok", "ok"])
    done = belt("test", ".", "--json", "-j", "2", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert [row["status"] for row in rows(done.stdout)] == ["pass", "error", "pass", "pass", "pass"]
    assert CAUSES["close_pipe"] in rows(done.stdout)[1]["error"]
    assert "Traceback" not in done.stderr and "OSError" not in done.stderr


def test_sigterm_of_belt_test_under_j2_ends_its_workers_without_a_traceback(
    tmp_path: Path,
) -> None:
    # Before: each worker printed a BrokenPipeError traceback once belt test was gone.
    suite(tmp_path, ["hold"] * 6)
    shared = tmp_path / "hold"
    shared.mkdir()
    process = subprocess.Popen(
        [BELT, "test", ".", "-j", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOLD": str(shared)},
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(shared.glob("started-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(list(shared.glob("started-*"))) == 2, "two workers under way"
        process.send_signal(signal.SIGTERM)  # belt test alone, as a CI runner cancels it
        (shared / "go").touch()
        _, stderr = process.communicate(timeout=60)  # every worker gone: stderr is closed
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


# -- belt check ----------------------------------------------------------------------------------


def check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, *args: str
) -> tuple[int, Any, str]:
    """``belt check TARGET --event agent.tool_call --json ARGS`` in-process, in ``tmp_path``
    (the handler still runs in worker processes): (exit code, report, stderr)."""
    (tmp_path / "handlers.py").write_text(HANDLERS)
    monkeypatch.chdir(tmp_path)
    done = belt_here("check", target, "--event", "agent.tool_call", "--json", *args)
    report = json.loads(done.stdout) if done.stdout.strip() else None
    return done.exit_code, report, done.stderr


def answers(report: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["check"] == "answers")


def test_belt_check_of_a_handler_that_calls_os_exit_fails_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: belt check exited 0 with no output and no JUnit file.
    code, report, stderr = check(
        tmp_path,
        monkeypatch,
        "py:handlers.py:exits",
        "--examples",
        "5",
        "--junit-xml",
        "report.xml",
    )
    assert code == 1, stderr
    assert report is not None and not report["passed"]
    failure = answers(report)["failure"]
    assert failure["detail"] == (
        "py:handlers.py:exits: the worker process running it exited with status 0"
    )
    assert (tmp_path / "report.xml").exists()


def test_belt_check_of_a_nexus_py_tool_that_ends_its_process_fails_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    monkeypatch.chdir(tmp_path)
    command = ("check", "--executor", "verify=py:handlers.py:tool_exits", "--event", "stop")
    done = belt_here(*command, "--examples", "3", "--json")
    assert done.exit_code == 1, done.stderr
    failure = answers(json.loads(done.stdout))["failure"]
    assert failure["detail"] == (
        "the tool failed: the worker process running it exited with status 3"
    )


def test_belt_check_of_a_handler_that_closes_stdout_fails_without_a_traceback(
    tmp_path: Path,
) -> None:
    # Before: an EBADF traceback, as belt's own output went to the closed fd. A belt process of
    # its own, whose stderr holds whatever any of its processes wrote there.
    (tmp_path / "handlers.py").write_text(HANDLERS)
    command = ("check", "py:handlers.py:closes_stdout", "--event", "agent.tool_call", "--json")
    done = belt(*command, "--examples", "3", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert CAUSES["close_fd_1"] in answers(json.loads(done.stdout))["failure"]["detail"]


def test_belt_check_of_a_module_whose_import_never_returns_is_exit_5_within_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: belt check waited forever, --timeout 2 or not.
    (tmp_path / "blocks.py").write_text(
        "import time\ntime.sleep(600)\ndef f(p):\n    return None\n"
    )
    code, report, stderr = check(tmp_path, monkeypatch, "py:blocks.py:f", "--timeout", "2")
    assert code == 5, stderr
    said = json.dumps(report) + stderr  # --json prints the error as a document too
    assert "py:blocks.py:f: importing blocks.py did not finish within 2 s" in said


def test_a_hanging_handler_is_called_once_per_distinct_case_and_never_shrunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: at --timeout 1, about 27 s for 2 cases: the shrinker called it again and again,
    # each call costing the whole timeout.
    log = tmp_path / "calls.log"
    monkeypatch.setenv("CALLS", str(log))
    code, report, stderr = check(
        tmp_path,
        monkeypatch,
        "py:handlers.py:hangs",
        *("--timeout", "1", "--examples", "2", "--seed", "3"),
    )
    assert code == 1, stderr
    # Every payload hangs: each distinct one is sent once (never again to confirm, redeliver
    # or shrink it), so the calls are the cases the report counts.
    calls = log.read_text().splitlines()
    assert len(calls) == len(set(calls)) == report["cases"]
    failure = answers(report)["failure"]
    assert "did not answer within 1 s" in failure["detail"]
    assert "shrinking" not in failure["detail"]


# -- the pytest plugin -----------------------------------------------------------------------------


def test_belt_isolate_fails_the_test_whose_handler_ends_its_process_and_the_rest_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_user=textwrap.dedent(
            """
            import os

            def scenario(handler):
                return {
                    "agent": {"hooks": [
                        {"event": "agent.tool_call", "type": "webhook", "handler": handler}
                    ]},
                    "turns": [{"user": "go", "model": [
                        {"tool_calls": [{"name": "write_file", "arguments": {}}]}, {"say": "ok"}
                    ]}],
                }

            def allow(payload):
                return None

            def ends(payload):
                os._exit(0)

            def test_before(belt_scenario):
                assert belt_scenario(scenario(allow)).tool_status("write_file") == "completed"

            def test_ends(belt_scenario):
                belt_scenario(scenario(ends))

            def test_after(belt_scenario):
                assert belt_scenario(scenario(allow)).tool_status("write_file") == "completed"
            """
        )
    )
    # belt's plugin from its entry point; the plugins these tests do not use are left out.
    result = pytester.runpytest_subprocess(
        *("-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--belt-isolate"),
        *("-p", "no:hypothesispytest", "-p", "no:anyio"),
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*the scenario could not run: the worker process running it exited with status 0*"]
    )


# -- random misbehaviour ---------------------------------------------------------------------------


@settings(max_examples=4, deadline=None)
@given(
    behaviours=st.lists(st.sampled_from(["ok", *MISBEHAVIOURS]), min_size=2, max_size=5),
    jobs=st.sampled_from(["1", "2"]),
)
def test_random_misbehaviours_leave_every_scenario_accounted_for(
    tmp_path_factory: pytest.TempPathFactory, behaviours: list[str], jobs: str
) -> None:
    directory = tmp_path_factory.mktemp("suite")
    names = suite(directory, behaviours)
    done = belt("test", ".", "--json", "-j", jobs, "--junit-xml", "report.xml", cwd=directory)
    found = rows(done.stdout)
    assert [Path(row["scenario"]).name for row in found] == [Path(n).name for n in names]
    assert len(junit_cases(directory / "report.xml")) == len(names)
    for what, row in zip(behaviours, found, strict=True):
        if what == "ok":
            assert row["status"] == "pass", row
        else:
            assert CAUSES[what] in cause_of(row), row
    assert done.returncode == (1 if set(behaviours) - {"ok"} else 0), done.stderr
    assert "Traceback" not in done.stderr
