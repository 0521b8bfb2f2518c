"""Ids a person can paste: short ids and unique prefixes for every kind, `--last`, tables that
never cut an id (on a pseudo-terminal at 60 and 120 columns, and piped), hints with real ids,
and `belt sim run --wait` counting down at its gate."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from belt.errors import NotFound
from belt.records.interrupts import create_interrupt, resolve_interrupt
from belt.records.names import short_id
from belt.server.inspector.deliveries import Deliveries
from belt.store import open_store
from tests.cli.runner import belt
from tests.terminal import on_terminal as belt_on_terminal
from tests.waiting import eventually

DELETE = {"name": "delete_file", "arguments": {"path": "/tmp/old.txt"}, "result": "deleted"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PLACEHOLDERS = ("RUN_ID", "ar_…", "ar_...", " ID ", "int_…", "allow|deny")


def gated(tmp_path: Path, name: str = "gated.json", timeout: int = 3600) -> str:
    path = tmp_path / name
    turn = {
        "user": "clean up",
        "model": [{"say": "deleting", "tool_calls": [DELETE]}, {"say": "ok"}],
    }
    hook = {"event": "agent.tool_call", "type": "gate", "timeout": timeout}
    path.write_text(json.dumps({"agent": {"name": "ids", "hooks": [hook]}, "turns": [turn]}))
    return str(path)


def held_run(tmp_path: Path, name: str = "gated.json") -> dict[str, Any]:
    result = belt("sim", "run", gated(tmp_path, name), "--json")
    assert result.exit_code == 0, result.stderr
    report: dict[str, Any] = result.json()
    return report


# -- short ids, prefixes and --last -----------------------------------------------------------


def test_a_run_is_named_by_its_id_short_id_a_prefix_or_last(tmp_path: Path) -> None:
    first = held_run(tmp_path, "first.json")["runs"][0]["id"]
    second = held_run(tmp_path, "second.json")["runs"][0]["id"]
    for ref in (second, short_id(second), second[:7], short_id(second)[:4]):
        shown = belt("sim", "show", ref, "--json")
        assert shown.exit_code == 0, (ref, shown.stderr)
        assert shown.json()["runs"][0]["id"] == second
    last = belt("sim", "show", "--last", "--json")
    assert last.exit_code == 0, last.stderr
    assert last.json()["runs"][0]["id"] == second
    ambiguous = belt("sim", "show", "ar_")
    assert ambiguous.exit_code == 4
    assert ambiguous.stderr.startswith(f"error: 'ar_' names 2 runs: {min(first, second)}, ")
    assert "hint: give more of the id, or the whole id" in ambiguous.stderr
    missing = belt("sim", "show", "zzzz")
    assert missing.exit_code == 3
    assert missing.stderr.startswith("error: no run zzzz\n")
    both = belt("sim", "show", second, "--last")
    assert both.exit_code == 2
    assert belt("sim", "show").exit_code == 2


def test_a_simulations_id_or_short_id_names_its_latest_run(tmp_path: Path) -> None:
    report = held_run(tmp_path)
    sim_id, run_id = report["simulation"]["id"], report["runs"][0]["id"]
    for ref in (sim_id, short_id(sim_id), "sim_" + short_id(sim_id)[:3]):
        shown = belt("sim", "show", ref, "--json")
        assert shown.exit_code == 0, (ref, shown.stderr)
        assert shown.json()["runs"][-1]["id"] == run_id
    missing = belt("sim", "show", "sim_nothing")
    assert missing.exit_code == 3
    assert missing.stderr.startswith("error: no run sim_nothing\n")


def test_resume_last_and_stop_by_short_id_continue_and_end_that_run(tmp_path: Path) -> None:
    report = held_run(tmp_path)
    run_id = report["runs"][0]["id"]
    gate = report["chat"]["pending_interrupts"][0]["id"]
    assert belt("interrupt", "resolve", short_id(gate), "allow").exit_code == 0
    resumed = belt("sim", "resume", "--last", "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.json()["runs"][0]["state"] == "completed"

    other = held_run(tmp_path, "other.json")["runs"][0]["id"]
    stopped = belt("sim", "stop", short_id(other))
    assert stopped.exit_code == 0, stopped.stderr
    assert stopped.stdout == f"run {other} canceled\n"
    assert run_id != other


def test_last_with_no_runs_is_not_found() -> None:
    result = belt("sim", "resume", "--last")
    assert result.exit_code == 3
    assert result.stderr.startswith("error: no simulated runs yet\n")


def test_interrupt_list_and_replay_take_a_runs_short_id_or_prefix(tmp_path: Path) -> None:
    report = held_run(tmp_path)
    run_id, chat_id = report["runs"][0]["id"], report["chat"]["id"]
    gate_id = report["chat"]["pending_interrupts"][0]["id"]
    for args in ([short_id(run_id)], ["--run", run_id[:6]], ["--chat", short_id(chat_id)]):
        listed = belt("interrupt", "list", *args, "--json")
        assert listed.exit_code == 0, (args, listed.stderr)
        assert [i["id"] for i in listed.json()] == [gate_id]
    policy = tmp_path / "policy.toml"
    policy.write_text("")
    replayed = belt("replay", short_id(run_id), "--policy", str(policy), "--json")
    assert replayed.exit_code == 0, replayed.stderr
    held_run(tmp_path, "again.json")
    ambiguous = belt("replay", "ar_", "--policy", str(policy))
    assert ambiguous.exit_code == 4
    assert "'ar_' names 2 runs" in ambiguous.stderr
    assert belt("interrupt", "list", "--run", "ar_").exit_code == 4


def test_show_and_watch_take_a_runs_short_id_and_replay_a_chats(tmp_path: Path) -> None:
    guard = Path(__file__).parent.parent.parent / "examples" / "tests" / "hooks.py"
    path = tmp_path / "guarded.json"
    hooks = [
        {"event": "agent.tool_call", "type": "webhook", "handler": f"py:{guard}:guard"},
        {"event": "agent.tool_call", "type": "gate", "timeout": 3600},
    ]
    turn = {"user": "clean up", "model": [{"say": "deleting", "tool_calls": [DELETE]}]}
    path.write_text(json.dumps({"agent": {"name": "ids", "hooks": hooks}, "turns": [turn]}))
    result = belt("sim", "run", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    run_id, chat_id = report["runs"][0]["id"], report["chat"]["id"]
    gate_id = report["chat"]["pending_interrupts"][0]["id"]

    shown = belt("interrupt", "show", short_id(gate_id), "--run", short_id(run_id), "--json")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["id"] == gate_id

    policy = tmp_path / "policy.toml"
    policy.write_text("")
    for chat, rows in ((short_id(chat_id), 1), ("ch_elsewhere", 0)):
        replayed = belt("replay", run_id, "--policy", str(policy), "--chat", chat, "--json")
        assert replayed.exit_code == 0, replayed.stderr
        assert len(replayed.json()["rows"]) == rows, chat

    watch = subprocess.Popen(
        [sys.executable, "-m", "belt", "interrupt", "watch", "--run", short_id(run_id), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        ready, _, _ = select.select([watch.stdout], [], [], 60)
        assert ready, "watch printed nothing for the run named by its short id"
        first = json.loads(watch.stdout.readline())
        watch.send_signal(signal.SIGINT)
        watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert (first["event"], first["interrupt"]["id"]) == ("pending", gate_id)


def test_a_delivery_of_a_run_is_named_with_the_runs_short_id(tmp_path: Path) -> None:
    guard = Path(__file__).parent.parent.parent / "examples" / "tests" / "hooks.py"
    path = tmp_path / "guarded.json"
    hooks = [{"event": "agent.tool_call", "type": "webhook", "handler": f"py:{guard}:guard"}]
    turn = {"user": "clean up", "model": [{"say": "deleting", "tool_calls": [DELETE]}]}
    path.write_text(json.dumps({"agent": {"name": "ids", "hooks": hooks}, "turns": [turn]}))
    result = belt("sim", "run", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    run_id = result.json()["runs"][0]["id"]
    deliveries = Deliveries(open_store())
    (row,) = deliveries.query({"source": "sim"}, limit=10)["items"]
    owner, _, offset = row["id"].rpartition(".")
    assert owner == run_id
    for ref in (row["id"], f"{short_id(run_id)}.{offset}", f"{run_id[:6]}.{offset}"):
        assert deliveries.detail(ref)["delivery"]["id"] == row["id"], ref
    with pytest.raises(NotFound):
        deliveries.detail(f"zzzz.{offset}")


def add_entry(name: str, text: str) -> str:
    result = belt("registry", "add", "--kind", "rule", "--name", name, "--json", input=text)
    assert result.exit_code == 0, result.stderr
    entry_id: str = result.json()["id"]
    return entry_id


def test_a_registry_entry_is_named_by_its_short_id_or_a_prefix() -> None:
    entry_id = add_entry("Only /tmp", "Delete only in /tmp.")
    shown = belt("registry", "show", short_id(entry_id), "--json")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["id"] == entry_id
    add_entry("Backups", "Backups run hourly.")
    ambiguous = belt("registry", "rm", "re_")
    assert ambiguous.exit_code == 4
    assert "names 2 registry entries" in ambiguous.stderr
    removed = belt("registry", "rm", entry_id[:8], "--json")
    assert removed.exit_code == 0, removed.stderr
    assert removed.json()["id"] == entry_id


# -- tables on a terminal ----------------------------------------------------------------------


def on_terminal(
    args: list[str],
    *,
    columns: int,
    when: tuple[bytes, Callable[[], None]] | None = None,
    timeout: float = 60,
    no_color: bool = False,
    raw: bool = False,
) -> tuple[str, int]:
    """Run ``belt ARGS`` on a pseudo-terminal ``columns`` wide (colour on, unless ``no_color``
    sets NO_COLOR); calls ``when[1]`` once the output holds ``when[0]``. Its output (escapes
    removed, unless ``raw``) and exit code."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    if no_color:
        env["NO_COLOR"] = "1"
    env.update(COLUMNS=str(columns), LINES="40", TERM="xterm")
    pending = [when] if when is not None else []

    def reply(seen: bytes) -> None:
        if pending and pending[0][0] in ANSI.sub("", seen.decode()).encode():
            pending.pop()[1]()

    with belt_on_terminal(args, env=env) as terminal:
        code = terminal.converse(reply, timeout)
        seen = terminal.seen
    text = seen.decode() if raw else ANSI.sub("", seen.decode())
    return text.replace("\r\n", "\n"), code


@pytest.mark.parametrize("columns", [60, 200])
def test_sim_list_on_a_terminal_shows_whole_short_ids(tmp_path: Path, columns: int) -> None:
    report = held_run(tmp_path)
    run_id, chat_id = report["runs"][0]["id"], report["chat"]["id"]
    printed, code = on_terminal(["sim", "list"], columns=columns, raw=True)
    out = ANSI.sub("", printed)
    assert code == 0, out
    assert "\x1b[" in printed, printed  # colour on a terminal without NO_COLOR
    assert "…" not in out
    if columns == 200:  # the scenario's path (in tmp_path) is long: a table only this wide
        assert re.search(rf"^{short_id(run_id)} ", out, re.M), out
        assert f" {short_id(chat_id)} " in out
    else:  # one block of lines per run
        assert re.search(rf"^run: +{short_id(run_id)}$", out, re.M), out
        assert re.search(rf"^chat: +{short_id(chat_id)}$", out, re.M), out
    assert run_id not in out  # the short id, which names it as input
    # Each line fits but the scenario's path, a word longer than 60 columns, never cut.
    fit = [line for line in out.splitlines() if not line.startswith("scenario:")]
    assert all(len(line) <= columns for line in fit), out
    assert str(tmp_path / "gated.json") in out
    assert belt("sim", "show", short_id(run_id)).exit_code == 0


def test_no_color_on_a_terminal_turns_colour_off_and_keeps_the_terminal_layout(
    tmp_path: Path,
) -> None:
    # With colour (no NO_COLOR) the same command is test_sim_list_on_a_terminal_...[60].
    report = held_run(tmp_path)
    run_id = report["runs"][0]["id"]
    printed, code = on_terminal(["sim", "list"], columns=60, no_color=True, raw=True)
    out = ANSI.sub("", printed)
    assert code == 0, out
    # Short ids, never cut, a block per run on a terminal too narrow for the table, as with
    # colour.
    assert re.search(rf"^run: +{short_id(run_id)}$", out, re.M), out
    assert run_id not in out
    fit = [line for line in out.splitlines() if not line.startswith("scenario:")]
    assert all(len(line) <= 60 for line in fit), out
    # Colour (and every other escape) only without NO_COLOR.
    assert "\x1b[" not in printed, printed


def test_sim_list_piped_shows_whole_ids(tmp_path: Path) -> None:
    report = held_run(tmp_path)
    listed = belt("sim", "list")
    assert listed.exit_code == 0
    (row,) = listed.stdout.splitlines()[1:]
    assert row.split()[0] == report["runs"][0]["id"]
    assert report["chat"]["id"] in row.split()


@pytest.mark.parametrize("columns", [60, 120])
def test_interrupt_list_on_a_terminal_never_cuts_an_id(tmp_path: Path, columns: int) -> None:
    report = held_run(tmp_path)
    gate = report["chat"]["pending_interrupts"][0]
    out, code = on_terminal(["interrupt", "list"], columns=columns)
    assert code == 0, out
    assert "…" not in out
    if columns == 120:
        assert re.search(rf"^{gate['short_id']} ", out, re.M), out
        assert f" {short_id(gate['run_id'])} " in out
    else:  # too narrow for the table: a block of lines
        assert re.search(rf"^id: +{gate['short_id']}$", out, re.M), out
        assert re.search(rf"^run: +{short_id(gate['run_id'])}$", out, re.M), out
    assert all(len(line) <= columns for line in out.splitlines()), out


def test_the_sweep_table_on_a_terminal_shows_short_ids(tmp_path: Path) -> None:
    past = datetime.now(UTC) - timedelta(minutes=1)
    gate = create_interrupt(
        run_id="ar_k2m9x0q4h7c1v8b5n3t6",
        chat_id="ch_1",
        event="agent.tool_call",
        timeout=10,
        now=past,
    )
    out, code = on_terminal(["interrupt", "sweep"], columns=60)
    assert code == 0, out
    assert re.search(rf"^{gate['short_id']} +│ k2m9x0q4 +│ hook:agent.tool_call", out, re.M), out


# -- hints with real ids ------------------------------------------------------------------------


def test_a_held_run_prints_runnable_commands_with_its_real_ids(tmp_path: Path) -> None:
    result = belt("sim", "run", gated(tmp_path))
    assert result.exit_code == 0
    store = open_store()
    (run_id,) = store.list_ids("run")
    (gate_id,) = store.list_ids("interrupt")
    out = result.stdout + result.stderr
    for placeholder in PLACEHOLDERS:
        assert placeholder not in out, placeholder
    assert f"  belt interrupt resolve {gate_id} allow   # or deny" in out
    assert f"  belt sim resume {run_id}\n" in out
    assert f"`belt sim resume {run_id} --wait`" in out
    early = belt("sim", "resume", short_id(run_id))
    assert early.exit_code == 4
    assert f"`belt interrupt resolve {gate_id} allow` (or deny)" in early.stderr
    for placeholder in PLACEHOLDERS:
        assert placeholder not in early.stderr, placeholder


# -- belt sim run --wait --------------------------------------------------------------------------


def resolve_the_gate() -> None:
    store = open_store()
    (gate_id,) = eventually(lambda: store.list_ids("interrupt"), "a gate opened")
    resolve_interrupt(store=store, interrupt_id=gate_id, decision="allow")


def test_wait_prints_the_transcript_then_counts_down_on_a_terminal(tmp_path: Path) -> None:
    out, code = on_terminal(
        ["sim", "run", gated(tmp_path), "--wait"],
        columns=120,
        when=(b" expires in ", resolve_the_gate),
    )
    assert code == 0, out
    store = open_store()
    (run_id,) = store.list_ids("run")
    (gate_id,) = store.list_ids("interrupt")
    waiting_at = out.index(f"waiting at 1 gate(s) of run {run_id}")
    # The transcript up to the gate comes first, once; the countdown names the gate.
    assert out.index("user       clean up") < waiting_at
    assert out.count("user       clean up") == 1, out
    assert re.search(rf"gate {short_id(gate_id)} expires in (59:\d\d|1:00:00), at ", out), out
    assert f"`belt interrupt resolve {short_id(gate_id)} allow`" in out
    # Then the rest, under the run's heading with the state it ended in.
    assert out.index(f"── run {run_id} · completed") > waiting_at
    assert "[completed]" in out[waiting_at:]
    for placeholder in PLACEHOLDERS:
        assert placeholder not in out, placeholder


def test_wait_piped_prints_plain_single_lines(tmp_path: Path, belt_home: Path) -> None:
    env = {**os.environ, "BELT_HOME": str(belt_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", gated(tmp_path), "--wait"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        told = proc.stderr.readline()  # the gates line: the run waits, it can be resolved now
        resolve_the_gate()
        stdout, rest = proc.communicate(timeout=60)
        stderr = told + rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    (run_id,) = open_store().list_ids("run")
    assert "\r" not in stderr and "\x1b" not in stderr and "expires in" not in stderr
    assert stderr.count(f"waiting at 1 gate(s) of run {run_id}") == 1
    assert f"every gate of run {run_id} is settled; going on" in stderr
    assert stdout.count("user       clean up") == 1
    assert f"── run {run_id} · completed" in stdout


def test_ctrl_c_while_waiting_names_the_run_and_the_commands(
    tmp_path: Path, belt_home: Path
) -> None:
    env = {**os.environ, "BELT_HOME": str(belt_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "sim", "run", gated(tmp_path), "--wait", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        told = proc.stderr.readline()  # the gates line: it waits at the gate now
        (run_id,) = open_store().list_ids("run")
        assert f"waiting at 1 gate(s) of run {run_id}" in told
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert f"`belt sim resume {run_id} --wait` waits again" in stderr
    for placeholder in PLACEHOLDERS:
        assert placeholder not in stderr, placeholder
