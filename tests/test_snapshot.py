"""belt test --snapshot: a scenario's record, stored in a stable form and compared on each run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from belt.testing.snapshot import snapshot_of, snapshot_path, snapshot_text, unified
from belt.testing.suite import run_suite
from tests.cli.runner import belt

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "tests"


def _examples(tmp_path: Path) -> Path:
    """A copy of examples/tests (its scenarios and hooks), so snapshots are written there."""
    copy = tmp_path / "tests"
    shutil.copytree(EXAMPLES, copy, ignore=shutil.ignore_patterns("__snapshots__", "__pycache__"))
    return copy


def _snapshots(directory: Path) -> dict[str, bytes]:
    """Every snapshot under ``directory``, by its path there."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("__snapshots__/*"))
    }


def test_every_example_writes_byte_identical_snapshots_twice(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)  # the examples name their hooks from their own directory
    copy = _examples(tmp_path)
    first = run_suite(paths=[copy], snapshot="update")
    assert first.exit_code == 0, [(r.name, r.status, r.error) for r in first.results]
    written = _snapshots(copy)
    scenarios = [Path(result.name) for result in first.results]
    assert len(scenarios) >= 2  # examples/tests has more than one scenario
    assert sorted(written) == sorted(
        str(snapshot_path(path).relative_to(copy)) for path in scenarios
    )
    for directory in copy.rglob("__snapshots__"):
        shutil.rmtree(directory)

    second = run_suite(paths=[copy], snapshot="update")
    assert second.exit_code == 0
    assert _snapshots(copy) == written
    checked = run_suite(paths=[copy], snapshot="check")
    assert checked.exit_code == 0
    assert {r.snapshot.status for r in checked.results if r.snapshot} == {"same"}
    for text in written.values():
        assert text.endswith(b"}\n")
        document = json.loads(text)
        assert "duration_ms" not in text.decode() and "latency_ms" not in text.decode()
        assert document["simulation"]["id"] == "<sim:1>"


def test_ids_become_names_in_order_of_first_appearance(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(ROOT)
    suite = run_suite(paths=[EXAMPLES / "guarded.toml"])
    report = suite.results[0].report
    assert report is not None
    stable = snapshot_of(report, virtual_clock=False)
    text = json.dumps(stable)
    assert "ar_" not in text and "int_" not in text and "msg_" not in text
    assert stable["chat"]["id"] == "<chat:1>"
    assert stable["runs"][0]["id"] == "<run:1>"
    interrupt = stable["interrupts"][0]
    assert interrupt["id"] == interrupt["short_id"] == "<int:1>"
    assert interrupt["run_id"] == "<run:1>"
    # On wall time every timestamp is written <time>; a virtual clock keeps them.
    assert interrupt["created_at"] == interrupt["expires_at"] == "<time>"
    kept = snapshot_of(report, virtual_clock=True)
    assert kept["interrupts"][0]["expires_at"] == report["interrupts"][0]["expires_at"]
    assert kept["clock"] == "virtual" and stable["clock"] == "wall"
    assert "source" not in stable["simulation"]


def test_a_scenario_on_a_virtual_clock_keeps_its_times(tmp_path: Path) -> None:
    scenario = tmp_path / "clocked.toml"
    hooks = (EXAMPLES / "hooks.py").as_posix()
    text = (EXAMPLES / "guarded.toml").read_text(encoding="utf-8")
    text = text.replace("py:hooks.py", f"py:{hooks}")
    scenario.write_text('clock = "2026-08-11T14:00:00Z"\n\n' + text, encoding="utf-8")
    run_suite(paths=[scenario], snapshot="update")
    first = snapshot_path(scenario).read_bytes()
    snapshot_path(scenario).unlink()
    run_suite(paths=[scenario], snapshot="update")
    assert snapshot_path(scenario).read_bytes() == first
    document = json.loads(first)
    assert document["clock"] == "virtual"
    assert document["interrupts"][0]["created_at"].startswith("2026-08-11T14:00")
    assert "<time>" not in first.decode()


def test_async_hooks_are_listed_in_a_stable_order(tmp_path: Path) -> None:
    # Async hooks finish whenever they do, so their records interleave with the others in no
    # fixed order; the snapshot lists them last, in the order of their stable form.
    (tmp_path / "late.py").write_text(
        "def late(payload):\n    return None\n",
        encoding="utf-8",
    )
    handler = f"py:{(tmp_path / 'late.py').as_posix()}:late"
    hooks = "".join(
        f'[[agent.hooks]]\nevent = "{event}"\ntype = "webhook"\nasync = true\n'
        f'handler = "{handler}"\n\n'
        for event in ("agent.tool_call", "agent.turn_complete")
    )
    scenario = tmp_path / "late.toml"
    scenario.write_text(
        hooks
        + '[[agent.hooks]]\nevent = "agent.tool_call"\ntype = "gate"\ntimeout = 600\n\n'
        + '[[turns]]\nuser = "go"\n  [[turns.resolve]]\n  decision = "allow"\n'
        + '  [[turns.model]]\n  tool_calls = [ { name = "a" }, { name = "b" } ]\n'
        + '  [[turns.model]]\n  say = "done"\n\n[[expect]]\nrun_state = "completed"\n',
        encoding="utf-8",
    )
    texts = set()
    for _ in range(3):
        suite = run_suite(paths=[scenario])
        report = suite.results[0].report
        assert suite.exit_code == 0 and report is not None
        assert any(e["async"] for e in report["hook_executions"])
        texts.add(snapshot_text(report, virtual_clock=False))
    assert len(texts) == 1
    listed = json.loads(texts.pop())["hook_executions"]
    flags = [execution["async"] for execution in listed]
    assert flags == sorted(flags)  # every sync record before the async ones


def test_a_missing_snapshot_fails_with_the_command_that_writes_it(tmp_path: Path) -> None:
    copy = _examples(tmp_path)
    scenario = copy / "guarded.toml"  # its hook is the copy's hooks.py, beside it
    missing = belt("test", str(scenario), "--snapshot")
    assert missing.exit_code == 1, missing.stderr
    assert "no snapshot" in missing.stdout
    assert f"run `belt test {scenario} --snapshot-update` to write it" in missing.stdout
    assert not snapshot_path(scenario).exists()

    written = belt("test", str(scenario), "--snapshot-update")
    assert written.exit_code == 0, written.stdout + written.stderr
    assert snapshot_path(scenario).is_file()
    same = belt("test", str(scenario), "--snapshot", "--json")
    assert same.exit_code == 0, same.stdout
    assert json.loads(same.stdout.splitlines()[0])["snapshot"]["status"] == "same"


def test_an_edited_policy_fails_with_a_diff_naming_the_decision(tmp_path: Path) -> None:
    copy = _examples(tmp_path)
    scenario = copy / "guarded.toml"  # its hook is the copy's hooks.py, beside it
    hooks = copy / "hooks.py"
    assert run_suite(paths=[scenario], snapshot="update").exit_code == 0
    stored = snapshot_path(scenario).read_bytes()
    # The edited policy lets the database delete through to the gate: `belt test` runs hooks in
    # worker processes of its own, which import the file as it is now.
    policy = hooks.read_text(encoding="utf-8")
    edited = policy.replace('startswith(("/tmp/", "//tmp/"))', 'startswith("/")')
    assert edited != policy
    hooks.write_text(edited, encoding="utf-8")

    changed = belt("test", str(scenario), "--snapshot")
    assert changed.exit_code == 1
    out = changed.stdout
    assert "snapshot differs" in out
    assert f"the record differs from its snapshot {snapshot_path(scenario)}" in out
    first_change = out.split("the record differs from its snapshot", 1)[1].splitlines()[1]
    assert first_change.strip() == (
        'hook_executions[1] (agent.tool_call delete_file).decision: "deny" → "allow"'
    )
    assert '-      "decision": "deny",' in out
    assert '+      "decision": "allow",' in out
    assert snapshot_path(scenario).read_bytes() == stored  # --snapshot never writes

    as_json = belt("test", str(scenario), "--snapshot", "--json")
    comparison = json.loads(as_json.stdout.splitlines()[0])["snapshot"]
    assert comparison["status"] == "changed"
    assert comparison["changes"][0].endswith('decision: "deny" → "allow"')
    assert any(line.startswith("@@") for line in comparison["diff"])

    # The hint is the command that writes this scenario's snapshot, run as printed.
    update = re.search(r"run `(belt test [^`]+ --snapshot-update)`", out)
    assert update is not None and "--snapshot-update" in update.group(1)
    belt(*shlex.split(update.group(1))[1:])
    assert snapshot_path(scenario).read_bytes() != stored
    assert "snapshot differs" not in belt("test", str(scenario), "--snapshot").stdout


def test_a_minified_stored_snapshot_is_cut_around_the_change_not_printed_whole(
    tmp_path: Path,
) -> None:
    # A stored snapshot written minified, 4.5 MB on one line: the diff shows a window of it.
    copy = _examples(tmp_path)
    scenario = copy / "guarded.toml"
    assert run_suite(paths=[scenario], snapshot="update").exit_code == 0
    record = json.loads(snapshot_path(scenario).read_text(encoding="utf-8"))
    record["padding"] = "x" * 4_500_000
    minified = json.dumps(record, separators=(",", ":"), sort_keys=True)
    snapshot_path(scenario).write_text(minified + "\n", encoding="utf-8")

    changed = belt("test", str(scenario), "--snapshot")
    assert changed.exit_code == 1, changed.stderr
    assert "snapshot differs" in changed.stdout
    assert max(len(line) for line in changed.stdout.splitlines()) < 400
    cut = [line for line in changed.stdout.splitlines() if "[cut: " in line]
    assert cut == [
        f"  -{minified[:120]}…  [cut: columns 1-120 of {len(minified)}, "
        "first difference at column 2]"
    ]
    as_json = belt("test", str(scenario), "--snapshot", "--json")
    diff = json.loads(as_json.stdout.splitlines()[0])["snapshot"]["diff"]
    assert f"-{minified[:120]}…  [cut: columns 1-120 of {len(minified)}, " in "\n".join(diff)
    assert max(len(line) for line in diff) < 400


def test_a_long_changed_line_is_shown_around_its_first_difference() -> None:
    before = '{"hook_executions":[' + ",".join(
        f'{{"decision":"deny","i":{i}}}' for i in range(20_000)
    )
    after = before.replace('"deny","i":12345}', '"allow","i":12345}')
    column = before.index('deny","i":12345}')  # counted from 0
    lines = unified(f"a\n{before}\nz\n", f"a\n{after}\nz\n", Path("s.json"))
    assert lines[:3] == ["--- s.json (stored)", "+++ s.json (this run)", "@@ -1,3 +1,3 @@"]
    assert lines[3] == " a" and lines[6] == " z"
    removed, added = lines[4], lines[5]
    where = f"columns {column - 59}-{column + 60}"
    assert removed == (
        f"-…{before[column - 60 : column + 60]}…  [cut: {where} of {len(before)}, "
        f"first difference at column {column + 1}]"
    )
    assert added == (
        f"+…{after[column - 60 : column + 60]}…  [cut: {where} of {len(after)}, "
        f"first difference at column {column + 1}]"
    )
    assert '"deny","i":12345}' in removed and '"allow","i":12345}' in added
    # A line no longer than 200 characters is shown whole.
    short = unified("a\n" + "x" * 200 + "\n", "a\n" + "y" * 200 + "\n", Path("t.json"))
    assert short[-2:] == ["-" + "x" * 200, "+" + "y" * 200]


def test_snapshot_files_are_not_read_as_scenarios(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(ROOT)
    copy = _examples(tmp_path)
    (copy / "__snapshots__").mkdir()
    # A snapshot that looked like a test scenario would be run (and fail) if it were found.
    (copy / "__snapshots__" / "x.json").write_text('{"expect": [{"run_state": "failed"}]}')
    suite = run_suite(paths=[copy])
    names = [Path(r.name).name for r in suite.results]
    assert "guarded.toml" in names and "x.json" not in names


PLUGIN_TEST = """
def guard(payload):
    if payload["data"]["arguments"]["path"].startswith("/etc/"):
        return {"decision": "DECISION", "reason": "not /etc"}

def test_guard(belt_scenario):
    run = belt_scenario({
        "agent": {"hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": guard}]},
        "turns": [{"user": "clean up", "model": [
            {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/etc/passwd"}}]},
            {"say": "done"},
        ]}],
    })
    run.assert_snapshot()
"""


def test_the_pytest_plugin_compares_and_updates_snapshots(pytester: Any) -> None:
    def session(decision: str, *args: str) -> Any:
        pytester.makepyfile(test_user=PLUGIN_TEST.replace("DECISION", decision))
        return pytester.runpytest_inprocess(
            "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args
        )

    missing = session("deny")
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(["*no snapshot at *__snapshots__/test_guard.json*"])
    missing.stdout.fnmatch_lines(["*run `pytest --belt-snapshot-update` to write it*"])
    session("deny", "--belt-snapshot-update").assert_outcomes(passed=1)
    stored = pytester.path / "__snapshots__" / "test_guard.json"
    written = stored.read_bytes()
    session("deny").assert_outcomes(passed=1)

    changed = session("stop")
    changed.assert_outcomes(failed=1)
    text = changed.stdout.str()
    assert 'hook_executions[0] (agent.tool_call delete_file).decision: "deny" → "stop"' in text
    # The callable's reference is numbered by the process that registers it: left out.
    assert b'"py:belt.testing.plugin:handlers.guard"' in written
    assert stored.read_bytes() == written


def test_snapshots_in_worker_processes_and_the_junit_report(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import xml.etree.ElementTree as ElementTree

    monkeypatch.chdir(ROOT)
    copy = _examples(tmp_path)
    report = tmp_path / "junit.xml"
    missing = run_suite(paths=[copy], snapshot="check", junit_xml=report)
    assert missing.exit_code == 1
    assert {r.snapshot.status for r in missing.results if r.snapshot} == {"missing"}
    failures = ElementTree.parse(report).getroot().iter("failure")
    snapshots = [f for f in failures if f.get("type") == "snapshot"]
    assert len(snapshots) == len(missing.results)
    assert (snapshots[0].get("message") or "").startswith("no snapshot at ")

    assert run_suite(paths=[copy], snapshot="update").exit_code == 0
    same = run_suite(paths=[copy], snapshot="check", jobs=2)  # compared in the workers
    assert same.exit_code == 0
    assert {r.snapshot.status for r in same.results if r.snapshot} == {"same"}


def test_a_simulation_started_on_a_virtual_clock_keeps_its_times_whatever_its_file_says() -> None:
    from belt.testing.snapshot import on_virtual_clock

    wall = {"simulation": {"dialect": "platform"}}
    assert not on_virtual_clock(wall, {"turns": []})
    assert on_virtual_clock(wall, {"clock": "2026-08-11T14:00:00Z"})
    # `belt sim run --clock` starts one for a scenario that names none: its report says so.
    clocked = {"simulation": {"dialect": "platform", "clock": "2026-08-11T14:00:00.000Z"}}
    assert on_virtual_clock(clocked, {"turns": []})


def test_a_snapshot_that_cannot_be_read_is_that_scenarios_error(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(ROOT)
    copy = _examples(tmp_path)
    snapshot_path(copy / "guarded.toml").mkdir(parents=True)  # a directory where the file goes
    big = snapshot_path(copy / "budgets.toml")
    with big.open("wb") as handle:  # over the cap, and never read whole
        handle.truncate(16 * 1024 * 1024 + 1)
    suite = run_suite(paths=[copy], snapshot="check")
    by_name = {Path(r.name).name: r for r in suite.results}
    guarded, budgets = by_name["guarded.toml"], by_name["budgets.toml"]
    assert guarded.status == "error"
    assert (
        guarded.error
        == f"{snapshot_path(copy / 'guarded.toml')}: is a directory, not a regular file"
    )
    assert budgets.status == "error" and "larger than the 16384 KiB limit" in (budgets.error or "")
    assert by_name["expiry.toml"].status == "fail"  # the others still ran: no snapshot yet
    assert suite.exit_code == 1


def test_a_nexus_scenario_on_a_virtual_clock_snapshots_the_same_twice(tmp_path: Path) -> None:
    # A Nexus hook task waits for a real executor, so its times are wall time even on a
    # virtual clock: they are written <time>, and every other time is kept.
    path = tmp_path / "nexus.json"
    path.write_text(
        json.dumps(
            {
                "dialect": "nexus",
                "clock": "2026-08-11T14:00:00Z",
                "profile": {
                    "approval_mode": "auto",
                    "lifecycle_hooks": {
                        "stop": {"tool": "verify", "timeout_ms": 30000, "max_continuations": 2}
                    },
                },
                "executors": {"verify": "py:tests.pyhooks:continue_once"},
                "turns": [
                    {"user": "fix it", "model": [{"say": "Fixed."}, {"say": "Checked: fixed."}]}
                ],
                "expect": [{"run_state": "completed"}],
            }
        ),
        encoding="utf-8",
    )
    texts = set()
    for _ in range(2):
        suite = run_suite(paths=[path], snapshot="update")
        assert suite.exit_code == 0, [(r.status, r.error) for r in suite.results]
        texts.add(snapshot_path(path).read_bytes())
        snapshot_path(path).unlink()
    assert len(texts) == 1
    document = json.loads(texts.pop())
    assert document["clock"] == "virtual" and len(document["hook_tasks"]) == 2
    assert {task["created_at"] for task in document["hook_tasks"]} == {"<time>"}
    assert document["chat"]["created_at"].startswith("2026-08-11T14:00")
