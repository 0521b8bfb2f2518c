"""`belt sim`: exit codes, the terminal transcript, --json, and a killed simulation."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runner import belt
from tests.hookapp import hook_app
from tests.racers import race

DELETE = {
    "name": "delete_file",
    "arguments": {"path": "/var/lib/app/production.db"},
    "result": "ok",
}


def scenario(tmp_path: Path, hooks: list[dict[str, Any]], turns: list[dict[str, Any]]) -> str:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"agent": {"name": "cli", "hooks": hooks}, "turns": turns}))
    return str(path)


def gated(tmp_path: Path) -> str:
    turn = {
        "user": "clean up",
        "model": [{"say": "deleting", "tool_calls": [DELETE]}, {"say": "ok"}],
    }
    return scenario(tmp_path, [{"event": "agent.tool_call", "type": "gate"}], [turn])


def test_a_run_stopped_at_a_gate_exits_0_and_says_how_to_go_on(tmp_path: Path) -> None:
    result = belt("sim", "run", gated(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert "user       clean up" in result.stdout
    assert "delete_file" in result.stdout and "[awaiting_approval]" in result.stdout
    assert "belt interrupt resolve int_" in result.stdout
    assert "belt sim resume ar_" in result.stdout


def test_gate_resolve_resume_round_trip_through_the_cli(tmp_path: Path) -> None:
    held = belt("sim", "run", gated(tmp_path), "--json")
    assert held.exit_code == 0
    report = held.json()
    assert set(report) >= {"chat", "runs", "interrupts", "hook_executions"}
    run_id = report["runs"][0]["id"]
    interrupt_id = report["chat"]["pending_interrupts"][0]["id"]

    early = belt("sim", "resume", run_id)
    assert early.exit_code == 4
    assert interrupt_id in early.stderr

    assert belt("interrupt", "resolve", interrupt_id, "allow").exit_code == 0
    resumed = belt("sim", "resume", run_id, "--json")
    assert resumed.exit_code == 0
    assert resumed.json()["runs"][0]["state"] == "completed"

    shown = belt("sim", "show", run_id)
    assert shown.exit_code == 0
    assert "[completed]" in shown.stdout
    listed = belt("sim", "list", "--json")
    assert listed.exit_code == 0
    assert [r["id"] for r in listed.json()] == [run_id]


def test_a_failed_run_exits_1(tmp_path: Path) -> None:
    path = scenario(tmp_path, [], [{"user": "x", "error": "model overloaded"}])
    result = belt("sim", "run", path)
    assert result.exit_code == 1
    assert "run failed: model overloaded" in result.stdout


def test_hook_rows_name_the_webhook_by_host_only(tmp_path: Path) -> None:
    with hook_app(lambda n, p: {"decision": "deny", "reason": "path not allowed"}) as app:
        url = f"{app.url}/hooks/tool-call?key=abc123"
        hook = {"event": "agent.tool_call", "type": "webhook", "handler": url}
        turn = {"user": "x", "model": [{"say": "a", "tool_calls": [DELETE]}, {"say": "b"}]}
        result = belt("sim", "run", scenario(tmp_path, [hook], [turn]))
    assert result.exit_code == 0
    host = app.url.removeprefix("http://")
    assert f"hook   agent.tool_call: {host} (webhook) → deny (path not allowed)" in result.stdout
    assert "abc123" not in result.stdout + result.stderr
    assert "/hooks/tool-call" not in result.stdout + result.stderr


def test_bad_scenarios_exit_5_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[agent]\nname = "x"\ncontext_window = -1\n[[turns]]\nuser = "x"\n')
    result = belt("sim", "run", str(path))
    assert result.exit_code == 5
    assert "agent.context_window" in result.stderr
    assert "Traceback" not in result.stderr

    broken = tmp_path / "broken.toml"
    broken.write_text("[agent\n")
    result = belt("sim", "run", str(broken))
    assert result.exit_code == 5
    assert "line 1" in result.stderr


def test_unknown_runs_exit_3(tmp_path: Path) -> None:
    for command in (["show", "ar_nope"], ["resume", "ar_nope"], ["stop", "ar_nope"]):
        result = belt("sim", *command)
        assert result.exit_code == 3, command
        assert "ar_nope" in result.stderr


def test_stop_cancels_a_held_run_once(tmp_path: Path) -> None:
    run_id = belt("sim", "run", gated(tmp_path), "--json").json()["runs"][0]["id"]
    stopped = belt("sim", "stop", run_id)
    assert stopped.exit_code == 0
    assert "canceled" in stopped.stdout
    again = belt("sim", "stop", run_id)
    assert again.exit_code == 4


def test_a_killed_simulation_keeps_everything_it_recorded(tmp_path: Path, belt_home: Path) -> None:
    with hook_app(lambda n, p: {"decision": "deny", "reason": "recorded before the kill"}) as app:
        app.hold = lambda name, payload: name == "turn" and payload["turn_count"] == 1
        hooks = [
            {"event": "agent.tool_call", "type": "webhook", "handler": f"{app.url}/tool"},
            {"event": "agent.turn_start", "type": "webhook", "handler": f"{app.url}/turn"},
        ]
        app.decide = lambda name, payload: (
            None if name == "turn" else {"decision": "deny", "reason": "recorded before the kill"}
        )
        turn = {"user": "x", "model": [{"say": "a", "tool_calls": [DELETE]}, {"say": "b"}]}
        proc = subprocess.Popen(
            [sys.executable, "-m", "belt", "sim", "run", scenario(tmp_path, hooks, [turn])],
            env={**os.environ, "BELT_HOME": str(belt_home)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert app.held.wait(30), "the simulation never reached its second turn"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(10)

    listed = belt("sim", "list", "--json")
    assert listed.exit_code == 0
    (run,) = listed.json()
    assert run["state"] == "working"
    shown = belt("sim", "show", run["id"], "--json")
    assert shown.exit_code == 0
    report = shown.json()
    messages = report["chat"]["chat_messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "event", "tool"]
    invocation = messages[1]["tool_invocations"][0]
    assert (invocation["status"], invocation["result"]) == ("failed", "recorded before the kill")
    assert [e["hook_event"] for e in report["hook_executions"]] == [
        "agent.turn_start",
        "agent.tool_call",
    ]
    assert report["runs"][0]["interrupted"] is True
    assert "interrupted" in belt("sim", "show", run["id"]).stdout

    # The run goes on from its last durable point: the turn whose turn_start was interrupted.
    resumed = belt("sim", "resume", run["id"], "--json")
    assert resumed.exit_code == 0, resumed.stderr
    report = resumed.json()
    assert report["runs"][0]["state"] == "completed"
    assert "interrupted" not in report["runs"][0]
    roles = [m["role"] for m in report["chat"]["chat_messages"]]
    assert roles == ["user", "assistant", "event", "tool", "event", "assistant"]
    assert [m["role"] for m in report["chat"]["chat_messages"]].count("tool") == 1
    assert belt("sim", "stop", run["id"]).exit_code == 4


def stop_from_another_process(run_id: str, belt_home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "belt", "sim", "stop", run_id, "--force"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def only_run_id() -> str:
    from belt.store import open_store

    (run_id,) = open_store().list_ids("run")
    return run_id


def test_a_forced_stop_from_another_process_wins_over_a_running_platform_hook(
    tmp_path: Path, belt_home: Path
) -> None:
    import threading

    from belt.engine.entrypoints import run_scenario, show_run

    with hook_app() as app:
        app.hold = lambda name, payload: payload["event"] == "agent.tool_call"
        hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": f"{app.url}/h"}]
        turns = [
            {"user": "clean up", "model": [{"say": "deleting", "tool_calls": [DELETE]}, {}]},
            {"user": "never", "model": [{"say": "x"}]},
        ]
        path = scenario(tmp_path, hooks, turns)
        thread = threading.Thread(target=run_scenario, kwargs={"scenario": Path(path)})
        thread.start()
        try:
            assert app.held.wait(30)
            stopped = stop_from_another_process(only_run_id(), belt_home)
        finally:
            app.released.set()
            thread.join(60)
    assert stopped.returncode == 0, stopped.stderr
    report = show_run(run_id=only_run_id())
    (run,) = report["runs"]
    assert run["state"] == "canceled"
    assert report["simulation"]["status"] == "canceled"
    (assistant,) = [m for m in report["chat"]["chat_messages"] if m["role"] == "assistant"]
    assert [i["status"] for i in assistant["tool_invocations"]] == ["cancelled"]
    assert [m for m in report["chat"]["chat_messages"] if m["role"] == "tool"] == []


def test_a_forced_stop_from_another_process_wins_over_a_running_nexus_hook(
    tmp_path: Path, belt_home: Path
) -> None:
    import threading

    from belt.engine.entrypoints import show_run, start_simulation
    from belt.engine.scenario import read_scenario
    from belt.engine.simulation import Options
    from belt.executor.targets import Target
    from belt.executor.worker import Worker
    from belt.store import open_store

    running, release = threading.Event(), threading.Event()

    def verify(task_input: dict[str, Any]) -> dict[str, Any]:
        running.set()
        release.wait(60)
        return {"structured_content": {"continue": True, "feedback": "again"}}

    doc = {
        "dialect": "nexus",
        "profile": {
            "approval_mode": "auto",
            "lifecycle_hooks": {
                "stop": {"tool": "verify", "timeout_ms": 60_000, "max_continuations": 2}
            },
        },
        "turns": [
            {"user": "go", "model": [{"say": "ok"}]},
            {"user": "never", "model": [{"say": "x"}]},
        ],
    }
    path = tmp_path / "nexus.json"
    path.write_text(json.dumps(doc))
    worker = Worker(open_store(), {"verify": Target("verify", "py", "verify", verify)})
    options = Options(worker=worker)
    thread = threading.Thread(
        target=start_simulation, args=(open_store(), read_scenario(path), options)
    )
    thread.start()
    try:
        assert running.wait(30)
        stopped = stop_from_another_process(only_run_id(), belt_home)
    finally:
        release.set()
        thread.join(60)
    assert stopped.returncode == 0, stopped.stderr
    report = show_run(run_id=only_run_id())
    (run,) = report["runs"]
    assert run["state"] == "canceled"
    assert report["simulation"]["status"] == "canceled"
    assert [m for m in report["chat"]["chat_messages"] if m["role"] == "feedback"] == []
    assert [t["status"] for t in report["hook_tasks"]] == ["cancelled"]


def test_of_many_racing_resumers_exactly_one_continues_the_run(
    tmp_path: Path, belt_home: Path
) -> None:
    env = {**os.environ, "BELT_HOME": str(belt_home), "NO_COLOR": "1"}
    with hook_app(**{"complete": 0.5}) as app:
        hooks = [
            {"event": "agent.tool_call", "type": "gate"},
            {"event": "agent.complete", "type": "webhook", "handler": f"{app.url}/complete"},
        ]
        turn = {"user": "clean up", "model": [{"say": "deleting", "tool_calls": [DELETE]}, {}]}
        held = belt("sim", "run", scenario(tmp_path, hooks, [turn]), "--json").json()
        run_id = held["runs"][0]["id"]
        gate_id = held["chat"]["pending_interrupts"][0]["id"]
        assert belt("interrupt", "resolve", gate_id, "allow").exit_code == 0
        outcomes = race([["sim", "resume", run_id]] * 6, env)
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 4, 4, 4, 4, 4], outcomes
    report = belt("sim", "show", run_id, "--json").json()
    assert report["runs"][0]["state"] == "completed"
    assert [m["role"] for m in report["chat"]["chat_messages"]].count("tool") == 1
    assert app.events() == ["agent.complete"]


def held_simulation(tmp_path: Path) -> dict[str, Any]:
    held = belt("sim", "run", gated(tmp_path), "--json")
    assert held.exit_code == 0
    report: dict[str, Any] = held.json()
    return report


def damage(path: Path, change: Any) -> bytes:
    document = json.loads(path.read_text())
    change(document["data"])
    raw = json.dumps(document).encode()
    path.write_bytes(raw)
    return raw


@pytest.mark.parametrize(
    ("kind", "change", "why"),
    [
        ("chat", lambda d: d.update(turn_count="three"), "its turn_count is not a whole number"),
        ("chat", lambda d: d.pop("id"), "its id is missing"),
        ("run", lambda d: d.update(state=7), "its state is not a string"),
        ("run", lambda d: d.update(execution=[1]), "its execution is not an object or null"),
        ("sim", lambda d: d.pop("next_turn"), "its next_turn is missing"),
        ("scenario", lambda d: d.update(dialect=[1]), "it is not the scenario belt stored"),
    ],
    ids=["chat-mistyped", "chat-missing", "run-mistyped", "run-state", "sim-missing", "scenario"],
)
def test_a_record_of_the_wrong_shape_is_reported_and_never_written_over(
    tmp_path: Path, belt_home: Path, kind: str, change: Any, why: str
) -> None:
    report = held_simulation(tmp_path)
    run_id = report["runs"][0]["id"]
    sim_id = report["simulation"]["id"]
    ids = {"chat": report["chat"]["id"], "run": run_id, "sim": sim_id, "scenario": sim_id}
    path = belt_home / "store" / "objects" / kind / f"{ids[kind]}.json"
    raw = damage(path, change)
    gate_id = report["chat"]["pending_interrupts"][0]["id"]
    assert belt("interrupt", "resolve", gate_id, "allow").exit_code == 0
    commands = [("sim", "resume", run_id), ("sim", "stop", run_id), ("sim", "show", run_id)]
    if kind == "scenario":
        commands = commands[:1]  # stop and show never read the scenario
    for command in commands:
        result = belt(*command)
        assert result.exit_code == 5, (command, result.stdout, result.stderr)
        assert str(path) in result.stderr and why in result.stderr
        assert path.read_bytes() == raw
    if kind == "chat":
        result = belt("chat", "settings", ids["chat"], "--disable-hooks")
        assert result.exit_code == 5 and path.read_bytes() == raw


def test_a_deeply_nested_store_file_is_reported_not_a_traceback(
    tmp_path: Path, belt_home: Path
) -> None:
    report = held_simulation(tmp_path)
    path = belt_home / "store" / "objects" / "run" / f"{report['runs'][0]['id']}.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    result = belt("sim", "show", report["runs"][0]["id"])
    assert result.exit_code == 5
    assert "nested too deeply" in result.stderr


def test_a_damaged_index_is_reported_before_a_resume_acts(tmp_path: Path, belt_home: Path) -> None:
    report = held_simulation(tmp_path)
    run_id = report["runs"][0]["id"]
    index = belt_home / "store" / "index" / "sim-runs" / f"{report['simulation']['id']}.jsonl"
    index.write_bytes(index.read_bytes() + b"not json\n")
    raw = index.read_bytes()
    gate_id = report["chat"]["pending_interrupts"][0]["id"]
    assert belt("interrupt", "resolve", gate_id, "allow").exit_code == 0
    run_file = belt_home / "store" / "objects" / "run" / f"{run_id}.json"
    before = run_file.read_bytes()
    result = belt("sim", "resume", run_id)
    assert result.exit_code == 5
    assert str(index) in result.stderr
    assert index.read_bytes() == raw
    assert json.loads(run_file.read_bytes())["data"]["state"] == "input_required"
    assert (
        json.loads(before)["data"]["execution"]
        == json.loads(run_file.read_bytes())["data"]["execution"]
    )


def test_a_deleted_message_index_is_a_clear_error(tmp_path: Path, belt_home: Path) -> None:
    report = held_simulation(tmp_path)
    run_id = report["runs"][0]["id"]
    (belt_home / "store" / "index" / "chat-messages" / f"{report['chat']['id']}.jsonl").unlink()
    gate_id = report["chat"]["pending_interrupts"][0]["id"]
    assert belt("interrupt", "resolve", gate_id, "allow").exit_code == 0
    result = belt("sim", "resume", run_id)
    assert result.exit_code == 5
    assert "does not list message" in result.stderr


@pytest.mark.parametrize(
    ("private", "why"),
    [
        ({"routes": []}, "its hooks is missing"),
        ({"hooks": "all"}, "its hooks is not an array"),
        ({"hooks": [{"event": "agent.nope", "type": "gate"}]}, "a hook is not a hook declaration"),
        ({"hooks": [], "routes": ["x"]}, "a route is not an object with a prefix and a target"),
    ],
    ids=["hooks-missing", "hooks-mistyped", "hook-invalid", "route-invalid"],
)
def test_a_damaged_private_hooks_record_is_reported_on_resume(
    tmp_path: Path, belt_home: Path, private: dict[str, Any], why: str
) -> None:
    report = held_simulation(tmp_path)
    run_id = report["runs"][0]["id"]
    path = belt_home / "store" / "private" / "hooks" / f"{report['simulation']['id']}.json"
    document = json.loads(path.read_text())
    document["data"] = private
    path.write_text(json.dumps(document))
    raw = path.read_bytes()
    gate_id = report["chat"]["pending_interrupts"][0]["id"]
    assert belt("interrupt", "resolve", gate_id, "allow").exit_code == 0
    result = belt("sim", "resume", run_id)
    assert result.exit_code == 5, result.stderr
    assert str(path) in result.stderr and why in result.stderr
    assert "Traceback" not in result.stderr
    assert path.read_bytes() == raw


REFUSE_EACH = """
import json
import os
import sys
from pathlib import Path

from tests.cli.runner import belt

what, run_id, *paths = sys.argv[1:]
seen = []
for path in map(Path, paths):
    kept = path.with_name(path.name + ".kept")
    path.rename(kept)
    if what == "FIFO":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    for command in (("sim", "show", run_id), ("sim", "resume", run_id)):
        result = belt(*command)
        seen.append([command, str(path), result.exit_code, result.stderr])
    path.unlink()
    kept.rename(path)
print(json.dumps(seen))
"""


def refused_each(what: str, run_id: str, paths: list[Path]) -> list[Any]:
    """Each path in turn made a ``what``, then ``belt sim show`` and ``resume`` run on it, in one
    process of its own with at most 2 GiB of memory (a file read whole fails there instead of
    exhausting the machine) and a minute to finish (a FIFO opened for reading waits forever):
    [command, path, exit code, stderr] of each."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    done = subprocess.run(
        [sys.executable, "-c", REFUSE_EACH, what, run_id, *map(str, paths)],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )
    assert done.returncode == 0, done.stderr
    seen: list[Any] = json.loads(done.stdout)
    return seen


@pytest.mark.parametrize("what", ["link to /dev/zero", "FIFO"])
def test_a_run_file_that_is_a_fifo_or_a_link_to_dev_zero_is_refused_by_name(
    tmp_path: Path, belt_home: Path, what: str
) -> None:
    report = held_simulation(tmp_path)
    run_id = report["runs"][0]["id"]
    gate_id = report["chat"]["pending_interrupts"][0]["id"]
    assert belt("interrupt", "resolve", gate_id, "allow").exit_code == 0
    paths = [
        belt_home / "store" / "objects" / "run" / f"{run_id}.json",
        belt_home / "store" / "logs" / "events" / f"{run_id}.jsonl",
        belt_home / "store" / "index" / "chat-messages" / f"{report['chat']['id']}.jsonl",
    ]
    seen = refused_each(what, run_id, paths)
    assert [(command, path) for command, path, _, _ in seen] == [
        (["sim", command, run_id], str(path)) for path in paths for command in ("show", "resume")
    ]
    for command, path, code, stderr in seen:
        assert code == 5, (command, path, stderr)
        assert path in stderr, stderr
        assert "Traceback" not in stderr
    assert belt("sim", "show", run_id).exit_code == 0


def test_bidi_controls_never_reach_the_terminal_raw_in_sim_show_and_list(tmp_path: Path) -> None:
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    call = {"name": f"rm{bidi}gpj.exe", "arguments": {"path": f"/{bidi}"}, "result": bidi}
    turn = {"user": f"do {bidi}", "model": [{"say": f"ok {bidi}", "tool_calls": [call]}]}
    path = tmp_path / "bidi.json"
    path.write_text(json.dumps({"agent": {"name": f"agent{bidi}", "hooks": []}, "turns": [turn]}))
    ran = belt("sim", "run", str(path))
    assert ran.exit_code == 0, ran.stderr
    run_id = only_run_id()
    for args in (("sim", "show", run_id), ("sim", "list"), ("sim", "list", "--all")):
        result = belt(*args)
        assert result.exit_code == 0, (args, result.stderr)
        shown = result.stdout + result.stderr
        assert [char for char in shown if char in bidi] == [], args
        assert "\\u202e" in shown, (args, shown)
    assert [char for char in ran.stdout + ran.stderr if char in bidi] == []


GUARDED = Path(__file__).parents[2] / "examples" / "guarded-agent.toml"


def nothing_listens(port: int) -> str:
    """The hint of a refused connection to a loopback port where no belt serve of the user
    listened (not a question about belt serve)."""
    return (
        f"nothing listens on 127.0.0.1:{port}: start your handler there, or fix the port in its URL"
    )


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port bound but not listening for as long as the block runs: every connection
    to it is refused, and no other process can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_the_guarded_example_without_its_server_ends_with_the_hook_summary(
    tmp_path: Path,
) -> None:
    # examples/guarded-agent.toml with nothing answering its webhook: `--route` sends the
    # example's 127.0.0.1:8787 to a port that refuses, whatever runs on 8787 on this machine.
    with refused_port() as port:
        route = f"http://127.0.0.1:8787=http://127.0.0.1:{port}"
        plain = belt("sim", "run", str(GUARDED), "--route", route)
        strict = belt("sim", "run", str(GUARDED), "--route", route, "--strict")
        as_json = belt("sim", "run", str(GUARDED), "--route", route, "--json")
    assert plain.exit_code == 0, plain.stderr
    tail = plain.stdout.rstrip().splitlines()[-3:]
    assert tail[0] == "hooks: 3 call(s), 2 failed (2 counted as allow)"
    assert tail[1].startswith(
        "  127.0.0.1:8787 (webhook): 2 of 2 failed, counted as allow; first: "
        f"cannot connect to 127.0.0.1:{port}: "
    )
    assert tail[2] == f"    {nothing_listens(port)}"
    assert strict.exit_code == 1, strict.stdout
    assert strict.stdout.rstrip().splitlines()[-3:] == tail
    summary = as_json.json()["hook_summary"]
    assert (summary["calls"], summary["failed"]) == (3, 2)
    assert (summary["counted_allow"], summary["counted_deny"]) == (2, 0)
    webhook, gate = summary["handlers"]
    assert (webhook["handler"], webhook["calls"], webhook["failed"]) == ("127.0.0.1:8787", 2, 2)
    assert webhook["fix"] == nothing_listens(port)
    assert (gate["handler"], gate["calls"], gate["failed"], gate["first_error"]) == (
        "gate",
        1,
        0,
        None,
    )
    assert [(f["event"], f["counted_as"]) for f in summary["failures"]] == [
        ("agent.turn_start", "allow"),
        ("agent.tool_call", "allow"),
    ]


def test_fail_closed_failures_are_counted_as_deny_in_the_summary(tmp_path: Path) -> None:
    with refused_port() as port:
        hook = {
            "event": "agent.tool_call",
            "type": "webhook",
            "handler": f"http://127.0.0.1:{port}/",
        }
        turn = {"user": "x", "model": [{"say": "a", "tool_calls": [DELETE]}, {"say": "b"}]}
        path = scenario(tmp_path, [hook], [turn])
        result = belt("sim", "run", path, "--fail-closed")
    assert result.exit_code == 0, result.stderr
    assert "hooks: 1 call(s), 1 failed (1 counted as deny)" in result.stdout
    assert "1 of 1 failed, counted as deny; first: cannot connect to" in result.stdout


def test_a_run_whose_hooks_all_answered_says_so_and_strict_exits_0(tmp_path: Path) -> None:
    with hook_app(lambda n, p: {"decision": "allow"}) as app:
        hook = {"event": "agent.tool_call", "type": "webhook", "handler": f"{app.url}/hook"}
        turn = {"user": "x", "model": [{"say": "a", "tool_calls": [DELETE]}, {"say": "b"}]}
        result = belt("sim", "run", scenario(tmp_path, [hook], [turn]), "--strict")
    assert result.exit_code == 0, result.stdout
    assert result.stdout.rstrip().splitlines()[-1] == "hooks: 1 call(s), none failed"
    nothing = belt("sim", "run", scenario(tmp_path, [], [{"user": "x"}]), "--strict")
    assert nothing.exit_code == 0
    assert "hooks:" not in nothing.stdout


def test_sim_resume_ends_with_the_summary_and_strict_exits_1_on_a_failed_call(
    tmp_path: Path,
) -> None:
    with refused_port() as port:
        hooks = [
            {"event": "agent.tool_call", "type": "webhook", "handler": f"http://127.0.0.1:{port}/"},
            {"event": "agent.tool_call", "type": "gate"},
        ]
        turn = {"user": "x", "model": [{"say": "a", "tool_calls": [DELETE]}, {"say": "b"}]}
        held = belt("sim", "run", scenario(tmp_path, hooks, [turn]), "--json")
        report = held.json()
        run_id = report["runs"][0]["id"]
        interrupt_id = report["chat"]["pending_interrupts"][0]["id"]
        assert belt("interrupt", "resolve", interrupt_id, "allow").exit_code == 0
        resumed = belt("sim", "resume", run_id, "--strict")
    assert resumed.exit_code == 1, resumed.stdout
    assert "hooks: 2 call(s), 1 failed (1 counted as allow)" in resumed.stdout
    assert nothing_listens(port) in resumed.stdout


def test_a_scenario_whose_file_name_is_not_utf8_is_a_clean_error(
    tmp_path: Path, belt_home: Path
) -> None:
    name = os.fsdecode(b"bad\xff.toml")
    (tmp_path / name).write_text('[agent]\nname = "a"\n\n[[turns]]\nuser = "hi"\n')
    result = belt("sim", "run", str(tmp_path / name))
    assert result.exit_code == 5
    assert "the file name is not UTF-8" in result.stderr
    assert "bad\\udcff.toml" in result.stderr
    assert "Traceback" not in result.stderr


# -- a Nexus scenario and the lifecycle hooks rho stored --------------------------------------

NEXUS_TOOLS = Path(__file__).parents[1] / "nexus_tools.py"
STORED = {"stop": {"tool": "verify", "timeout_ms": 30000, "max_continuations": 3}}
VERIFY = f"verify=py:{NEXUS_TOOLS}:continue_until_third_answer"


def rho_configure(hooks: dict[str, Any]) -> None:
    """Store ``hooks`` as rho's lifecycle_hooks, as a user does (a bare object, on stdin)."""
    from tests.cli.test_rho import configure

    result = configure(input=json.dumps(hooks))
    assert result.exit_code == 0, result.stderr


def nexus_scenario(tmp_path: Path, profile: str = "") -> Path:
    """A Nexus TOML scenario whose model needs two stop continuations; ``profile`` is the body
    of its [profile] table (none when empty)."""
    path = tmp_path / "my-nexus.toml"
    table = f"[profile]\n{profile}\n" if profile else ""
    path.write_text(
        f'dialect = "nexus"\n{table}\n[[turns]]\nuser = "Fix it."\n'
        + "".join(f'  [[turns.model]]\n  say = "answer {n}"\n' for n in (1, 2, 3))
    )
    return path


def test_a_nexus_scenario_without_hooks_runs_with_those_rho_stored(
    tmp_path: Path, belt_home: Path
) -> None:
    rho_configure(STORED)
    config = belt_home / "rho" / "config.json"
    path = nexus_scenario(tmp_path, 'approval_mode = "auto"')
    result = belt("sim", "run", str(path), "--executor", VERIFY, "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    hooks_from = {"source": "rho", "extension": "rho.lifecycle_hooks", "file": str(config)}
    assert report["simulation"]["hooks_from"] == hooks_from
    assert report["simulation"]["profile"] == {"approval_mode": "auto", "lifecycle_hooks": STORED}
    (run,) = report["runs"]
    assert run["hooks"] == STORED
    assert run["approval_mode"] == "auto"
    assert run["profile"] == {"source": "scenario", "revision": 1, "hooks_from": hooks_from}
    assert [t["task_key"].rsplit(":", 1)[1] for t in report["hook_tasks"]] == [
        "answer-1",
        "answer-2",
        "answer-3",
    ]
    assert run["execution"]["continuations"] == 2
    assert (
        f'lifecycle hooks: plugins["rho.lifecycle_hooks"].configuration in {config} (stored by '
        "`rho extensions configure`; the scenario declares none)\n"
    ) in result.stderr

    human = belt("sim", "run", str(path), "--executor", VERIFY)
    assert human.exit_code == 0, human.stderr
    assert "stop → verify (30000 ms, max 3)  [scenario profile r1, hooks stored by rho]" in (
        human.stdout
    )
    assert f'lifecycle hooks: plugins["rho.lifecycle_hooks"].configuration in {config}' in (
        human.stderr
    )
    shown = belt("sim", "show", "--last", "--json")
    assert shown.json()["simulation"]["hooks_from"] == hooks_from


@pytest.mark.parametrize("profile", ["", 'name = "no mode"'])
def test_stored_hooks_without_an_approval_mode_are_one_error_saying_where_it_goes(
    tmp_path: Path, belt_home: Path, profile: str
) -> None:
    rho_configure(STORED)
    path = nexus_scenario(tmp_path, profile)
    result = belt("sim", "run", str(path), "--executor", VERIFY)
    assert result.exit_code == 5, result.stdout
    assert result.stderr == (
        f"error: {path}: the lifecycle hooks rho stored ({belt_home / 'rho' / 'config.json'}) "
        f'need an approval mode: add approval_mode = "auto" (or "ask") under [profile] in '
        f"{path}\n"
    )
    assert result.stdout == ""


def test_a_bare_hooks_file_without_an_approval_mode_is_one_error_saying_where_it_goes(
    tmp_path: Path,
) -> None:
    hooks = tmp_path / "my.json"
    hooks.write_text(json.dumps(STORED))
    path = nexus_scenario(tmp_path)
    result = belt("sim", "run", str(path), "--hooks", str(hooks))
    assert result.exit_code == 5
    assert result.stderr == (
        f"error: {path}: the lifecycle hooks of {hooks} need an approval mode: add "
        f'approval_mode = "auto" (or "ask") under [profile] in {path}\n'
    )
    doc = tmp_path / "my-nexus.json"
    doc.write_text(json.dumps({"dialect": "nexus", "turns": [{"user": "x", "model": [{}]}]}))
    result = belt("sim", "run", str(doc), "--hooks", str(hooks))
    assert result.exit_code == 5
    assert result.stderr.endswith(f'add "approval_mode": "auto" (or "ask") to "profile" in {doc}\n')


def test_the_same_bare_hooks_file_runs_with_the_scenarios_approval_mode(tmp_path: Path) -> None:
    hooks = tmp_path / "my.json"
    hooks.write_text(json.dumps(STORED))
    path = nexus_scenario(tmp_path, 'approval_mode = "auto"')
    result = belt("sim", "run", str(path), "--hooks", str(hooks), "--executor", VERIFY, "--json")
    assert result.exit_code == 0, result.stderr
    (run,) = result.json()["runs"]
    assert run["hooks"] == STORED
    assert run["execution"]["continuations"] == 2


@pytest.mark.parametrize(
    ("profile", "hooks"),
    [
        ('approval_mode = "auto"\nlifecycle_hooks = {}', {}),
        (
            'approval_mode = "auto"\n[profile.lifecycle_hooks.turn_start]\ntool = "verify"\n'
            "timeout_ms = 30000",
            {"turn_start": {"tool": "verify", "timeout_ms": 30000}},
        ),
    ],
)
def test_a_scenario_that_declares_its_own_hooks_ignores_those_rho_stored(
    tmp_path: Path, profile: str, hooks: dict[str, Any]
) -> None:
    rho_configure(STORED)
    path = str(nexus_scenario(tmp_path, profile))
    result = belt("sim", "run", path, "--executor", VERIFY, "--json")
    assert result.exit_code == 0, result.stderr
    # The notice names rho in words (a run's random id may hold the letters "rho").
    assert "rho stored" not in result.stderr and "stored by rho" not in result.stderr
    report = result.json()
    assert report["simulation"]["hooks_from"] is None
    assert [run["hooks"] for run in report["runs"]] == ([hooks] if hooks else [])


def test_hooks_given_with_hooks_win_over_those_rho_stored(tmp_path: Path) -> None:
    rho_configure(STORED)
    hooks = tmp_path / "mine.json"
    hooks.write_text(json.dumps({"turn_start": {"tool": "verify", "timeout_ms": 30000}}))
    path = nexus_scenario(tmp_path, 'approval_mode = "auto"')
    result = belt("sim", "run", str(path), "--hooks", str(hooks), "--executor", VERIFY, "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["simulation"]["hooks_from"] is None
    assert report["runs"][0]["hooks"] == {"turn_start": {"tool": "verify", "timeout_ms": 30000}}


def test_a_broken_stored_configuration_is_an_error_naming_the_file(
    tmp_path: Path, belt_home: Path
) -> None:
    config = belt_home / "rho" / "config.json"
    config.parent.mkdir(parents=True)
    bad = {"stop": {"tool": "verify", "timeout_ms": 30000}}
    config.write_text(json.dumps({"plugins": {"rho.lifecycle_hooks": {"configuration": bad}}}))
    result = belt("sim", "run", str(nexus_scenario(tmp_path, 'approval_mode = "auto"')))
    assert result.exit_code == 5
    assert result.stderr.splitlines()[0] == (
        f'error: {config}: plugins["rho.lifecycle_hooks"].configuration.stop.max_continuations: '
        "is required on stop (0 through 20)"
    )
    assert "Traceback" not in result.stderr


def test_belt_test_never_reads_the_stored_configuration(tmp_path: Path) -> None:
    rho_configure(STORED)
    tests = tmp_path / "tests"
    tests.mkdir()
    path = nexus_scenario(tests, 'approval_mode = "auto"')
    executors = f'[executors]\nverify = "py:{NEXUS_TOOLS}:continue_until_third_answer"\n'
    expect = '[[expect]]\nevent = "stop"\nfired = 0\n'
    path.write_text(f"{path.read_text()}\n{executors}\n{expect}")
    result = belt("test", str(tests), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    (outcome,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert (outcome["status"], outcome["failures"]) == ("pass", [])
    # The same file under `belt sim run` does run with them: the stop hook fires.
    ran = belt("sim", "run", str(path), "--json")
    assert ran.exit_code == 0, ran.stderr
    assert len(ran.json()["hook_tasks"]) == 3


# -- no silent wait at a Nexus approval, no silent miss in an answer ------------------------------


def ask_scenario(tmp_path: Path) -> Path:
    """A Nexus scenario whose stop hook needs approval (approval_mode = "ask") and that nobody
    approves; its tool is a py: file of the test's own."""
    tools = tmp_path / "tools.py"
    tools.write_text(
        "def ack(task_input):\n    return {'structured_content': {'continue': False}}\n"
    )
    path = tmp_path / "ask.toml"
    path.write_text(
        'dialect = "nexus"\n[profile]\napproval_mode = "ask"\n'
        '[profile.lifecycle_hooks.stop]\ntool = "verify"\ntimeout_ms = 30000\n'
        f'max_continuations = 1\n[executors]\nverify = "py:{tools}:ack"\n'
        '[[turns]]\nuser = "go"\nmodel = [{say = "ok"}]\n'
    )
    return path


def belt_process(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """belt in a process of its own (stderr not a terminal), which a hang cannot outlive."""
    return subprocess.run(
        [sys.executable, "-m", "belt", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=timeout,
    )


def test_a_nexus_approval_nobody_gives_holds_the_run_like_a_gate(tmp_path: Path) -> None:
    path = ask_scenario(tmp_path)
    held = belt_process("sim", "run", str(path), timeout=30)
    assert held.returncode == 0, held.stderr
    shown = belt("sim", "show", "--last", "--json").json()
    (run,) = shown["runs"]
    (interrupt,) = shown["chat"]["pending_interrupts"]
    assert (run["state"], shown["simulation"]["status"]) == ("input_required", "held")
    assert interrupt["reason"] == "tool_approval"
    tail = held.stdout.rstrip().splitlines()[-6:]
    assert tail[0] == f"⏸ run {run['id']} is waiting for 1 hook task approval(s):"
    assert tail[1].startswith(f"  {interrupt['id']}  stop → verify [{run['id']}:stop:answer-1]")
    assert tail[2:5] == [
        "resolve each approval, then resume:",
        f"  belt interrupt resolve {interrupt['id']} allow   # or deny",
        f"  belt sim resume {run['id']}",
    ]
    early = belt("sim", "resume", run["id"])
    assert early.exit_code == 4
    assert f"still waits for 1 approval(s): {interrupt['id']}" in early.stderr
    assert belt("interrupt", "resolve", interrupt["id"], "allow").exit_code == 0
    resumed = belt("sim", "resume", run["id"], "--json")
    assert resumed.exit_code == 0, resumed.stderr
    report = resumed.json()
    assert report["runs"][0]["state"] == "completed"
    assert [t["status"] for t in report["hook_tasks"]] == ["completed"]


def test_with_wait_a_nexus_approval_is_waited_for_in_plain_lines_off_a_terminal(
    tmp_path: Path,
) -> None:
    path = ask_scenario(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", str(path), "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        interrupt_id = None
        for _ in range(600):
            listed = belt("interrupt", "list", "--json").json()
            if listed:
                interrupt_id = listed[0]["id"]
                break
            time.sleep(0.05)
        assert interrupt_id is not None, "no approval was asked for"
        assert belt("interrupt", "resolve", interrupt_id, "allow").exit_code == 0
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    assert "completed" in stdout
    waited = [line for line in stderr.splitlines() if "waiting for approval" in line]
    assert len(waited) == 1
    assert f"`belt interrupt resolve {interrupt_id} allow` (or deny)" in waited[0]
    assert "it expires at " in waited[0] and "\r" not in stderr


def misspelt_handler(tmp_path: Path) -> Path:
    """A scenario whose tool_call hook answers {"verdict": "deny"} and whose complete hook
    answers a deny that agent.complete cannot take."""
    handler = tmp_path / "handler.py"
    handler.write_text(
        "def misspelt(payload):\n    return {'verdict': 'deny'}\n\n"
        "def late(payload):\n    return {'decision': 'deny', 'reason': 'too late'}\n"
    )
    hooks = [
        {"event": "agent.tool_call", "type": "webhook", "handler": f"py:{handler}:misspelt"},
        {"event": "agent.complete", "type": "webhook", "handler": f"py:{handler}:late"},
    ]
    turn = {"user": "x", "model": [{"say": "a", "tool_calls": [DELETE]}, {"say": "b"}]}
    return Path(scenario(tmp_path, hooks, [turn]))


def test_answer_warnings_are_in_the_run_summary_and_fail_strict(tmp_path: Path) -> None:
    path = str(misspelt_handler(tmp_path))
    plain = belt("sim", "run", path)
    strict = belt("sim", "run", path, "--strict")
    as_json = belt("sim", "run", path, "--json")
    assert plain.exit_code == 0, plain.stderr
    tail = plain.stdout.rstrip().splitlines()[-4:]
    assert tail[0] == "hooks: 2 call(s), none failed"
    assert tail[1] == "answer warnings: 2 (what a handler answered that was not done)"
    assert tail[2].startswith("  agent.tool_call → py:")
    assert tail[2].endswith(":misspelt (webhook): verdict: unknown key in the answer, ignored")
    assert tail[3].endswith(":late (webhook): answered deny: observe only, the decision is ignored")
    assert strict.exit_code == 1
    assert strict.stderr.strip() == "error: --strict: 2 answer warning(s)"
    summary = as_json.json()["hook_summary"]
    assert (summary["failed"], summary["warned"]) == (0, 2)
    assert [(w["event"], w["hook_index"]) for w in summary["warnings"]] == [
        ("agent.tool_call", 0),
        ("agent.complete", 1),
    ]


def test_with_wait_on_a_terminal_a_nexus_approval_is_one_line_kept_current(
    tmp_path: Path,
) -> None:
    from tests.terminal import on_terminal

    path = ask_scenario(tmp_path)
    with on_terminal(["sim", "run", str(path), "--wait"], env=os.environ) as terminal:
        terminal.wait_for(" left to approve stop → verify: belt interrupt resolve ")
        (interrupt,) = belt("interrupt", "list", "--json").json()
        assert belt("interrupt", "resolve", interrupt["id"], "allow").exit_code == 0
        assert terminal.finish() == 0
    seen = terminal.seen.decode(errors="replace")
    # Rewritten in place (carriage return, line cleared), never a new line per update; cleared
    # once the approval is given.
    shown = [part for part in seen.split("\r\x1b[2K") if "left to approve" in part]
    assert shown and all("\n" not in part for part in shown)
    assert shown[0].endswith(f"belt interrupt resolve {interrupt['short_id']} allow|deny")
    assert "waiting for approval" not in seen  # no plain line besides
    assert "acknowledged" in seen
