"""``belt test`` in memory, in worker processes (``-j``), in shards (``--shard``), ``--keep``;
the pytest plugin under pytest-xdist; ``belt sim run --ephemeral``."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

import belt.testing.suite as suite_module
from belt.declaring.declarations import read_document
from belt.store import Store
from belt.testing.expect import Expectation, Outcome
from belt.testing.suite import ScenarioResult, run_file, run_suite
from belt.testing.workers import (
    chunk_size,
    cores,
    parse_jobs,
    parse_shard,
    portable,
    shard_of,
)
from tests.cli.runner import belt

REPO = Path(__file__).resolve().parents[2]

BARRIER = '''
import os, time
from pathlib import Path

def meet(payload):
    """Deny odd-numbered calls; with BARRIER set, first wait (at most 20 s) until two
    processes have called, so a pass proves two workers ran scenarios at once."""
    shared = os.environ.get("BARRIER")
    if shared:
        Path(shared, str(os.getpid())).touch()
        deadline = time.monotonic() + 20
        while len(os.listdir(shared)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    if payload["data"]["arguments"]["n"] % 2:
        return {"decision": "deny", "reason": "odd"}
    return None
'''


def write_suite(directory: Path, count: int) -> list[str]:
    """``count`` scenarios (odd ones denied; scenario 3 fails an expectation) and one invalid
    file; their names in the suite's order."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "meet.py").write_text(BARRIER)
    hook = {
        "event": "agent.tool_call",
        "type": "webhook",
        "handler": f"py:{directory}/meet.py:meet",
    }
    for number in range(count):
        status = "failed" if number % 2 else "completed"
        if number == 3:
            status = "completed"  # wrong on purpose
        doc = {
            "agent": {"hooks": [hook]},
            "turns": [
                {
                    "user": f"task {number}",
                    "model": [
                        {"tool_calls": [{"name": "write_file", "arguments": {"n": number}}]},
                        {"say": "done"},
                    ],
                }
            ],
            "expect": [{"tool": "write_file", "status": status}],
        }
        (directory / f"s{number:02d}.json").write_text(json.dumps(doc))
    (directory / "s99_invalid.toml").write_text('[[turns]]\nusr = "x"\n[[expect]]\ntool = "x"\n')
    return [str(directory / f"s{n:02d}.json") for n in range(count)] + [
        str(directory / "s99_invalid.toml")
    ]


def run_belt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``belt ARGS`` as a process of its own (workers are forked from it)."""
    return subprocess.run(
        [sys.executable, "-m", "belt", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def without_times(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a result says that does not change from run to run (no times, ids, timestamps)."""
    kept = ("scenario", "status", "expectations", "error", "problems", "invalid", "dialect")
    return [
        {
            **{key: result[key] for key in kept},
            "failures": [(f["expect"], f["text"], f["found"]) for f in result["failures"]],
        }
        for result in results
    ]


def cases(path: Path) -> list[str]:
    return [case.get("file", "") for case in ElementTree.parse(path).iter("testcase")]


def test_j2_runs_two_workers_at_once_and_reports_in_the_serial_order(tmp_path: Path) -> None:
    names = write_suite(tmp_path / "suite", 6)
    # The serial run is the reference (in-process); the run under test is a process of its own.
    serial = belt("test", str(tmp_path / "suite"), "--json", "--junit-xml", str(tmp_path / "1.xml"))
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    parallel = run_belt(
        "test",
        str(tmp_path / "suite"),
        "--json",
        "-j",
        "2",
        "--junit-xml",
        str(tmp_path / "2.xml"),
        env={"BARRIER": str(barrier)},
    )
    assert serial.exit_code == parallel.returncode == 5, parallel.stderr
    assert [r["scenario"] for r in lines(parallel.stdout)] == names
    assert without_times(lines(parallel.stdout)) == without_times(lines(serial.stdout))
    assert [r["status"] for r in lines(parallel.stdout)][:4] == ["pass", "pass", "pass", "fail"]
    # Two processes other than belt's own met at the barrier.
    assert len(os.listdir(barrier)) == 2
    assert cases(tmp_path / "2.xml") == cases(tmp_path / "1.xml") == names


def test_j2_prints_what_j1_prints_transcripts_of_failures_included(tmp_path: Path) -> None:
    write_suite(tmp_path / "suite", 5)
    serial = belt("test", str(tmp_path / "suite"))  # the reference, in-process
    parallel = run_belt("test", str(tmp_path / "suite"), "-j", "2")
    assert serial.exit_code == parallel.returncode == 5

    def steady(text: str) -> str:
        """The output without times and ids."""
        text = re.sub(r"\d+(\.\d+)? ?(s|ms)\b", "T", text)
        return re.sub(r"\b(msg|ch|ar|sim|int|ag)_[a-z0-9]{20}\b", "ID", text)

    assert steady(parallel.stdout) == steady(serial.stdout)
    assert "transcript" in parallel.stdout.lower() or "write_file" in parallel.stdout
    assert "s03.json" in parallel.stdout.split("──", 1)[1]  # the failure is shown in full


def test_j2_with_x_stops_at_the_first_failure_in_the_serial_order(tmp_path: Path) -> None:
    names = write_suite(tmp_path / "suite", 8)
    result = belt("test", str(tmp_path / "suite"), "--json", "-j", "2", "-x")
    assert result.exit_code == 1, result.stderr
    assert [r["scenario"] for r in lines(result.stdout)] == names[:4]


def test_scenarios_handed_out_a_few_at_a_time_come_back_in_order(tmp_path: Path) -> None:
    assert chunk_size(40, 2) == 5
    names = write_suite(tmp_path / "suite", 40)
    result = belt("test", str(tmp_path / "suite"), "--json", "-j", "2")
    assert result.exit_code == 5, result.stderr
    found = lines(result.stdout)
    assert [r["scenario"] for r in found] == names
    assert [r["status"] for r in found].count("fail") == 1


def test_shards_split_the_suite_by_position_and_together_run_it_once(tmp_path: Path) -> None:
    names = write_suite(tmp_path / "suite", 6)
    seen: list[str] = []
    for shard in (1, 2, 3):
        junit = tmp_path / f"shard{shard}.xml"
        result = belt(
            "test",
            str(tmp_path / "suite"),
            "--json",
            "--shard",
            f"{shard}/3",
            "--junit-xml",
            str(junit),
        )
        ran = [r["scenario"] for r in lines(result.stdout)]
        assert ran == names[shard - 1 :: 3]
        assert cases(junit) == ran
        (testsuite,) = ElementTree.parse(junit).iter("testsuite")
        assert testsuite.get("name") == f"belt test, shard {shard}/3"
        seen += ran
    assert sorted(seen) == sorted(names)
    # More shards than scenarios: an empty shard says so and passes; an empty suite does not.
    result = belt("test", names[0], "--shard", "2/2")
    assert result.exit_code == 0
    assert "shard 2/2 has no scenario (the suite has 1)" in result.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert belt("test", str(empty), "--shard", "2/2").exit_code == 5
    # -k selects first; the shard is taken of what it selected.
    result = belt("test", str(tmp_path / "suite"), "--json", "-k", "s0", "--shard", "2/2")
    assert [r["scenario"] for r in lines(result.stdout)] == names[1:6:2]


def test_j2_reads_each_scenario_file_in_the_worker_that_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = write_suite(tmp_path / "suite", 8)
    log = tmp_path / "read.log"

    def reading(path: Path, **kwargs: Any) -> Any:
        """Note which process reads which file (the workers are forked with this in place)."""
        with log.open("a") as handle:
            handle.write(f"{os.getpid()} {Path(path).name}\n")
        return read_document(path, **kwargs)

    monkeypatch.setattr(suite_module, "read_document", reading)
    result = run_suite(paths=[tmp_path / "suite"], jobs=2)
    assert len(result.results) == len(names)
    readers = [line.split() for line in log.read_text().splitlines()]
    assert sorted(name for _, name in readers) == sorted(Path(name).name for name in names)
    assert str(os.getpid()) not in {pid for pid, _ in readers}  # the parent read none of them


def test_files_that_are_not_tests_or_do_not_parse_are_reported_alike_for_any_j(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite"
    names = write_suite(suite, 4)
    (suite / "a_broken.json").write_text('{"turns": [')
    (suite / "b_broken.toml").write_text("[[expect]\n")
    (suite / "c_null.json").write_text("null")
    (suite / "d_no_expect.json").write_text('{"turns": [{"user": "hi"}]}')
    (suite / "e_not_utf8.json").write_bytes(b'{"expect": "\xff"}')
    shown = [str(suite / name) for name in ("a_broken.json", "b_broken.toml", "e_not_utf8.json")]
    outcomes = {}
    for jobs in ("1", "2", "3"):
        junit = tmp_path / f"{jobs}.xml"
        done = belt("test", str(suite), "--json", "-j", jobs, "--junit-xml", str(junit))
        found = lines(done.stdout)
        assert [r["scenario"] for r in found] == shown + names
        assert [r["invalid"] for r in found[:3]] == [True, True, True]
        assert cases(junit) == shown + names
        outcomes[jobs] = (done.exit_code, without_times(found))
    assert outcomes["1"][0] == 5
    assert outcomes["2"] == outcomes["3"] == outcomes["1"]
    # -x stops at the first file that does not parse, for any -j.
    for jobs in ("1", "2"):
        done = belt("test", str(suite), "--json", "-j", jobs, "-x")
        assert done.exit_code == 5
        assert [r["scenario"] for r in lines(done.stdout)] == shown[:1]


HOLD = """
import os, time
from pathlib import Path

def hold(payload):
    \"\"\"Say this process is under way, wait (at most 60 s) until the test says go, then say
    this call ended.\"\"\"
    shared = Path(os.environ["HOLD"])
    call = f"{os.getpid()}-{time.monotonic_ns()}"
    (shared / f"started-{call}").touch()
    deadline = time.monotonic() + 60
    while not (shared / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    (shared / f"ended-{call}").touch()
    return None
"""


@pytest.mark.parametrize("to", ["group", "workers"])
def test_ctrl_c_under_j2_lets_the_running_scenarios_end_and_starts_no_more(
    tmp_path: Path, to: str
) -> None:
    """Ctrl-C reaches every process of the terminal's group. ``workers``: only the workers take
    it, as when belt's own process is slow to take it in on a busy machine; they start nothing
    more and belt stops as if it had taken it itself."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "hold.py").write_text(HOLD)
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": f"py:{suite}/hold.py:hold"}
    for number in range(40):
        doc = {
            "agent": {"hooks": [hook]},
            "turns": [
                {
                    "user": "go",
                    "model": [{"tool_calls": [{"name": "write_file", "arguments": {}}]}, {}],
                }
            ],
            "expect": [{"tool": "write_file", "status": "completed"}],
        }
        (suite / f"s{number:02d}.json").write_text(json.dumps(doc))
    shared = tmp_path / "hold"
    shared.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "belt", "test", str(suite), "--json", "-j", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "HOLD": str(shared)},
        start_new_session=True,  # a group of its own, as a terminal's job is
    )
    try:
        deadline = time.monotonic() + 60
        while len(workers(shared)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(workers(shared)) == 2, "two workers under way"
        if to == "group":
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches every process of the group
        else:
            for pid in workers(shared):
                os.kill(int(pid), signal.SIGINT)
        (shared / "go").touch()
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    # Every scenario that started ran to its end; the rest of the handfuls the workers held
    # (and of those queued for them) did not start: two were under way, and a worker that
    # ended its scenario before it had taken in the Ctrl-C may have begun one more.
    started = {path.name.split("-", 1)[1] for path in shared.glob("started-*")}
    ended = {path.name.split("-", 1)[1] for path in shared.glob("ended-*")}
    assert started == ended
    assert 2 <= len(started) < sum(len(handful) for handful in chunks(40, 2)[:2])
    assert len(lines(stdout)) < 40


def workers(shared: Path) -> set[str]:
    """The processes that have started a held call."""
    return {path.name.split("-")[1] for path in shared.glob("started-*")}


FROZEN = """
import gc

from belt.testing.workers import run_all

assert gc.get_freeze_count() == 0
counts = list(run_all(gc.get_freeze_count, [()] * 6, jobs=2))
print(min(counts), gc.get_freeze_count())
"""


def test_workers_leave_what_the_parent_held_when_it_forked_out_of_their_collections() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FROZEN], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    in_workers, after = (int(word) for word in done.stdout.split())
    assert in_workers > 1000  # the modules it had imported, at least
    assert after == 0  # and the parent collects them again once the workers are gone


ENDS = """
import os

def end(payload):
    if payload["data"]["arguments"]["n"] == 5:
        os._exit(7)  # ends the worker's process, as a crash would
    return None
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_worker_that_ends_its_process_fails_that_scenario_and_the_others_still_run(
    tmp_path: Path, jobs: str
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "ends.py").write_text(ENDS)
    hook = {"event": "agent.tool_call", "type": "webhook", "handler": f"py:{suite}/ends.py:end"}
    for number in range(8):
        doc = {
            "agent": {"hooks": [hook]},
            "turns": [
                {
                    "user": "go",
                    "model": [
                        {"tool_calls": [{"name": "write_file", "arguments": {"n": number}}]},
                        {},
                    ],
                }
            ],
            "expect": [{"tool": "write_file", "status": "completed"}],
        }
        (suite / f"s{number}.json").write_text(json.dumps(doc))
    junit = tmp_path / "report.xml"
    done = run_belt("test", str(suite), "--json", "-j", jobs, "--junit-xml", str(junit))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    # Every scenario is reported, in order; s5 is the error, naming how its worker ended.
    found = lines(done.stdout)
    assert [Path(result["scenario"]).name for result in found] == [f"s{n}.json" for n in range(8)]
    assert [result["status"] for result in found] == ["pass"] * 5 + ["error"] + ["pass"] * 2
    assert found[5]["error"] == "the worker process running it exited with status 7"
    assert len(cases(junit)) == 8


def fail_on_three(number: int) -> int:
    if number == 3:
        raise ValueError("three")
    return number * 10


def test_an_exception_in_a_worker_reaches_the_parent_in_order_with_its_traceback() -> None:
    from belt.testing.workers import run_all

    given = []
    with pytest.raises(ValueError, match="three") as raised:
        for result in run_all(fail_on_three, [(n,) for n in range(40)], jobs=2):
            given.append(result)
    assert given == [0, 10, 20]  # those before it, in order
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "in a worker process" in notes
    assert "fail_on_three" in notes  # the worker's own traceback, as text


def chunks(count: int, jobs: int) -> list[range]:
    """The handfuls in which the supervisor hands ``count`` scenarios out to ``jobs`` workers,
    in order: each ``chunk_size`` of what is left after the ones before."""
    handfuls = []
    start = 0
    while start < count:
        size = chunk_size(count - start, jobs)
        handfuls.append(range(start, start + size))
        start += size
    return handfuls


def test_the_handfuls_shrink_to_one_at_the_end_and_cover_the_suite_once_in_order() -> None:
    for count, jobs in ((1, 2), (7, 2), (40, 2), (120, 2), (1000, 2), (1000, 8)):
        handfuls = chunks(count, jobs)
        assert [i for handful in handfuls for i in handful] == list(range(count))
        sizes = [len(handful) for handful in handfuls]
        assert sizes == sorted(sizes, reverse=True)
        assert max(sizes) <= 16
        assert sizes[-jobs:] == [1] * min(jobs, count)
    assert [len(h) for h in chunks(40, 2)][:4] == [5, 4, 3, 3]


def test_a_passing_result_crosses_to_the_parent_without_the_record_only_a_failure_shows(
    tmp_path: Path,
) -> None:
    names = write_suite(tmp_path / "suite", 4)
    options: dict[str, Any] = {
        "routes": [],
        "allow_network": True,
        "fail_unfired": False,
        "snapshot": None,
        "keep": None,
    }
    passed, failed = (run_file(Path(names[n]), **options) for n in (0, 3))
    assert passed is not None and failed is not None
    assert (passed.status, failed.status) == ("pass", "fail")
    sent = portable(passed)
    assert sent.report is not None and passed.report is not None
    assert set(sent.report) == {"simulation", "hook_summary"} < set(passed.report)
    assert sent.to_json() == passed.to_json()
    kept = portable(failed)
    assert kept.report == failed.report  # its transcript excerpt needs the chat
    assert kept.to_json() == failed.to_json()
    assert all(outcome.expectation.conditions == () for outcome in kept.outcomes)
    # Copies: what the worker's own results hold is left as it was.
    assert all(outcome.expectation.conditions for outcome in failed.outcomes)
    assert passed.report is not sent.report and set(passed.report) > set(sent.report)
    for original, copy in zip(failed.outcomes, kept.outcomes, strict=True):
        conditions = original.expectation.conditions
        assert dataclasses.replace(copy.expectation, conditions=conditions) == original.expectation
        assert dataclasses.replace(copy, expectation=original.expectation) == original
    # portable copies these without their __init__: they must stay plain dataclasses.
    for kind in (ScenarioResult, Outcome, Expectation):
        assert not hasattr(kind, "__post_init__") and "__slots__" not in vars(kind)


@pytest.mark.parametrize(
    ("option", "why"),
    [
        (["-j", "0"], "-j '0': expected a number of worker processes"),
        (["-j", "many"], "-j 'many': expected"),
        (["--shard", "0/2"], "--shard '0/2': expected K/N"),
        (["--shard", "3/2"], "--shard '3/2'"),
        (["--shard", "2"], "--shard '2'"),
    ],
)
def test_jobs_and_shards_that_make_no_sense_are_usage_errors(
    tmp_path: Path, option: list[str], why: str
) -> None:
    write_suite(tmp_path / "suite", 1)
    result = belt("test", str(tmp_path / "suite"), *option)
    assert result.exit_code == 2
    assert why in result.stderr


def test_job_and_shard_arithmetic() -> None:
    assert parse_jobs("auto") == cores() >= 1
    assert parse_jobs("3") == 3
    assert parse_shard("2/5") == (2, 5)
    assert shard_of(list(range(10)), (2, 4)) == [1, 5, 9]
    assert shard_of(list(range(3)), (3, 3)) == [2]
    assert shard_of(list(range(2)), (3, 3)) == []
    assert shard_of([1, 2], None) == [1, 2]
    assert [chunk_size(count, 2) for count in (1, 7, 8, 120, 600)] == [1, 1, 1, 15, 16]


def test_scenarios_run_in_memory_and_keep_writes_each_to_its_own_state_directory(
    tmp_path: Path, belt_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = write_suite(tmp_path / "suite", 2)
    made = temporary_directories(monkeypatch)
    result = belt("test", *names[:2], "--json")
    assert result.exit_code == 0, result.stdout
    assert made == []  # no store on disk, not even a temporary one
    assert not belt_home.exists()
    assert all("kept" not in r for r in lines(result.stdout))

    keep = tmp_path / "kept"
    result = belt("test", *names[:2], names[0], "--json", "--keep", str(keep))
    assert result.exit_code == 0, result.stdout
    kept = [Path(r["kept"]) for r in lines(result.stdout)]
    assert [p.name for p in kept] == [
        f"{str(tmp_path / 'suite').strip('/').replace('/', '_')}_s00.json",
        f"{str(tmp_path / 'suite').strip('/').replace('/', '_')}_s01.json",
        f"{str(tmp_path / 'suite').strip('/').replace('/', '_')}_s00.json-2",
    ]
    for home, record in zip(kept, lines(result.stdout), strict=True):
        assert home.parent == keep
        store = Store(home / "store", shapes=True)
        assert store.list_ids("sim") == [record["simulation"]]
    monkeypatch.setenv("BELT_HOME", str(kept[1]))
    shown = belt("sim", "list", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert record_ids(shown.stdout) == [lines(result.stdout)[1]["simulation"]]


def record_ids(stdout: str) -> list[str]:
    """The simulation ids of the runs ``belt sim list --json`` lists."""
    return sorted({str(row["sim_id"]) for row in json.loads(stdout)})


def test_keep_where_no_directory_can_be_made_is_an_error(tmp_path: Path) -> None:
    names = write_suite(tmp_path / "suite", 1)
    (tmp_path / "file").write_text("")
    result = belt("test", names[0], "--keep", str(tmp_path / "file" / "below"))
    assert result.exit_code == 1
    assert "--keep" in result.stderr and "cannot make a directory there" in result.stderr


PLUGIN_TESTS = """
import os
from pathlib import Path

import pytest

HOOK = {"event": "agent.tool_call", "type": "webhook"}


def deny(payload):
    return {"decision": "deny", "reason": "no"}


@pytest.mark.parametrize("number", range(4))
def test_denied(belt_scenario, number):
    run = belt_scenario(
        {
            "agent": {"hooks": [{**HOOK, "handler": deny}]},
            "turns": [
                {
                    "user": "go",
                    "model": [
                        {"tool_calls": [{"name": "rm", "arguments": {"n": number}}]},
                        {"say": "done"},
                    ],
                }
            ],
            "expect": [{"tool": "rm", "status": "failed"}],
        }
    )
    assert run.decisions("agent.tool_call") == ["deny"]
    assert run.tool_status("rm", n=number) == "failed"
    Path(os.environ["WORKERS"], os.environ["PYTEST_XDIST_WORKER"]).touch()
"""


def test_the_pytest_plugin_works_under_xdist(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_hooks.py").write_text(PLUGIN_TESTS)
    workers = tmp_path / "workers"
    workers.mkdir()
    # Three pytest processes (the controller and two workers), each loading belt's plugin from
    # its entry point; the plugins these tests do not use are left out, a third of the run's
    # CPU. The timeout bounds a hang only: at a load average of 15 on two cores this run took
    # 38 s with them (26 s without), so a suite beside it on a busier machine could reach the
    # 120 s it was.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q"]
        + ["-p", "no:hypothesispytest", "-p", "no:anyio"]
        + ["--belt-keep", str(tmp_path / "kept")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        env={**os.environ, "WORKERS": str(workers)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
    # xdist hands the four tests out to both workers at the start.
    assert sorted(os.listdir(workers)) == ["gw0", "gw1"]
    # --belt-keep DIR: each scenario's records in a state directory of its own there.
    kept = sorted((tmp_path / "kept").iterdir())
    assert [home.name for home in kept] == [f"test_denied_{n}_scenario" for n in range(4)]
    for home in kept:
        assert len(Store(home / "store").list_ids("sim")) == 1


def test_sim_run_ephemeral_writes_nothing_to_the_state_directory(
    tmp_path: Path, belt_home: Path
) -> None:
    names = write_suite(tmp_path / "suite", 2)
    result = belt("sim", "run", names[1], "--ephemeral", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["runs"][-1]["state"] == "completed"
    assert not belt_home.exists()
    refused = belt("sim", "run", names[1], "--ephemeral", "--wait")
    assert refused.exit_code == 2
    assert "--ephemeral and --wait" in refused.stderr


def test_sim_run_ephemeral_at_a_gate_prints_no_command_that_names_the_lost_run(
    tmp_path: Path, belt_home: Path
) -> None:
    gated = tmp_path / "gated.toml"
    gated.write_text(
        '[agent]\nname = "gated"\n\n'
        '[[agent.hooks]]\nevent = "agent.tool_call"\ntype = "gate"\ntimeout = 600\n\n'
        '[[turns]]\nuser = "go"\n\n  [[turns.model]]\n'
        '  tool_calls = [ { name = "rm", arguments = {}, result = "done" } ]\n',
        encoding="utf-8",
    )
    shown = belt("sim", "run", str(gated), "--ephemeral")
    assert shown.exit_code == 0, shown.stderr
    assert "waiting at 1 gate(s)" in shown.stdout
    assert "belt interrupt resolve" not in shown.stdout
    assert "belt sim resume" not in shown.stdout
    assert "again without --ephemeral" in shown.stdout
    report = belt("sim", "run", str(gated), "--ephemeral", "--json").json()
    assert report["simulation"]["ephemeral"] is True
    assert not belt_home.exists()


def test_the_plugin_runs_a_scenario_in_memory(
    belt_scenario: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = temporary_directories(monkeypatch)
    run = belt_scenario(
        {
            "agent": {"hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": deny}]},
            "turns": [
                {"user": "go", "model": [{"tool_calls": [{"name": "rm", "arguments": {}}]}, {}]}
            ],
            "expect": [{"tool": "rm", "status": "failed"}],
        }
    )
    assert run.tool_status("rm") == "failed"
    assert made == []  # no store on disk, not even a temporary one


def temporary_directories(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The temporary directories made from now on (``tempfile.mkdtemp``, which
    ``TemporaryDirectory`` calls), as they are made."""
    made: list[str] = []
    original = tempfile.mkdtemp

    def recording(*args: Any, **kwargs: Any) -> str:
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    return made


def deny(payload: dict[str, Any]) -> dict[str, Any]:
    return {"decision": "deny", "reason": "no"}


def test_a_directory_is_walked_in_path_order_without_hidden_snapshot_or_linked_directories(
    tmp_path: Path,
) -> None:
    from belt.testing.suite import candidates

    suite = tmp_path / "suite"
    for name in (
        "b.toml",
        "a.json",
        "a/z.json",
        "a/b/c.toml",
        "a0.json",
        "A.json",
        "x.json.bak",
        "y.",
        ".hidden.json",
        ".hidden/in.json",
        "__pycache__/in.json",
        "__snapshots__/in.json",
        "sub/deep/one.toml",
    ):
        path = suite / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    (suite / "link.json").symlink_to(suite / "a.json")
    (suite / "dangling.json").symlink_to(suite / "nowhere.json")
    (suite / "linked").symlink_to(suite / "sub", target_is_directory=True)
    found = [path.relative_to(suite).as_posix() for path in candidates([suite])]
    # As sorted() orders the paths: each directory's files where its name sorts.
    assert found == [
        "A.json",
        "a/b/c.toml",
        "a/z.json",
        "a.json",
        "a0.json",
        "b.toml",
        "link.json",
        "sub/deep/one.toml",
    ]
    assert found == sorted(found, key=lambda name: Path(name).parts)


def raise_unloadable(number: int) -> int:
    import types

    # An exception whose class lives in a module only this worker has.
    module = types.ModuleType("belt_test_only_in_the_worker")
    exec("class Odd(Exception):\n    pass\n", module.__dict__)
    module.Odd.__module__ = module.__name__
    sys.modules[module.__name__] = module
    if number == 2:
        raise module.Odd("odd two")
    return number


def test_an_exception_the_parent_cannot_load_reaches_it_as_its_text() -> None:
    from belt.testing.workers import run_all

    given = []
    with pytest.raises(RuntimeError, match="Odd: odd two") as raised:
        for result in run_all(raise_unloadable, [(n,) for n in range(6)], jobs=2):
            given.append(result)
    assert given == [0, 1]
    assert "raise_unloadable" in "\n".join(getattr(raised.value, "__notes__", []))


def read_stdin() -> str:
    import sys as system

    return system.stdin.read()


def test_a_worker_reads_nothing_from_standard_input(tmp_path: Path) -> None:
    from belt.testing.workers import run_all

    read, write = os.pipe()
    os.write(write, b"typed at the terminal")
    os.close(write)
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        assert list(run_all(read_stdin, [(), ()], jobs=2)) == ["", ""]
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read)
