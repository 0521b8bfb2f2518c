"""``belt interrupt`` against the local store."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from belt.records.interrupts import DTO_FIELDS, create_interrupt, resolve_interrupt
from belt.store import Store, open_store
from tests.cli.runner import belt
from tests.racers import race
from tests.servers import REFUSED
from tests.terminal import on_terminal
from tests.test_interrupts import files_of, run_in_chat


def open_gate(run_id: str = "run_1", **kwargs) -> dict:
    """A gate on ``run_id`` in chat ch_1, opened through the store as a hook would."""
    kwargs.setdefault("event", "agent.tool_call")
    return create_interrupt(run_id=run_id, chat_id="ch_1", **kwargs)


def test_list_of_a_run_prints_its_pending_interrupts_as_a_table() -> None:
    first = open_gate(timeout=3600, meta={"data": {"tool": "rm", "arguments": {"path": "/x"}}})
    second = open_gate(event="agent.start", resource_id=None, default_resolution="deny")
    settled = open_gate()
    resolve_interrupt(interrupt_id=settled["id"], decision="deny")
    open_gate(run_id="run_2")

    result = belt("interrupt", "list", "run_1")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "event", "holds", "expires", "in", "then"]
    assert len(lines) == 3
    # Piped, the ids are whole (a terminal shows the short ids: tests/cli/test_ids.py).
    assert lines[1].split()[:3] == [first["id"], "agent.tool_call", 'rm({"path":']
    assert lines[1].split()[4:] in (["59m", "59s", "allow"], ["1h", "0m", "allow"])
    assert lines[2].split()[:3] == [second["id"], "agent.start", "hook_event"]
    assert lines[2].split()[-1] == "deny"
    assert settled["short_id"] not in result.stdout

    result = belt("interrupt", "list", "run_1", "--all")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].split()[3] == "status"
    assert re.search(rf"^{settled['id']} .* resolved \(deny\) +- +-$", result.stdout, re.M)


def test_list_without_a_run_is_every_runs_inbox_newest_first() -> None:
    now = datetime.now(UTC)
    older = open_gate("run_a", now=now - timedelta(minutes=2))
    newer = create_interrupt(
        run_id="run_b", chat_id="ch_2", event="agent.tool_call", now=now - timedelta(minutes=1)
    )
    done = open_gate("run_c")
    resolve_interrupt(interrupt_id=done["id"], decision="allow")

    result = belt("interrupt", "list")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "event", "holds", "run", "chat", "expires", "in", "then"]
    assert [line.split()[0] for line in lines[1:]] == [newer["id"], older["id"]]
    assert lines[1].split()[3:5] == ["run_b", "ch_2"]
    assert belt("interrupt", "list", "--json").json() == [
        belt("interrupt", "show", i, "--json").json() for i in (newer["id"], older["id"])
    ]
    all_ = belt("interrupt", "list", "--all", "--json").json()
    assert [d["id"] for d in all_] == [done["id"], newer["id"], older["id"]]

    by_chat = belt("interrupt", "list", "--chat", "ch_2")
    assert [line.split()[0] for line in by_chat.stdout.splitlines()[1:]] == [newer["id"]]
    assert by_chat.stdout.splitlines()[0].split()[3] == "run"  # no chat column for one chat
    by_run = belt("interrupt", "list", "--run", "run_a", "--json").json()
    assert [d["id"] for d in by_run] == [older["id"]]
    assert belt("interrupt", "list", "--reason", "tool_approval", "--json").json() == []
    assert len(belt("interrupt", "list", "--reason", "hook_gate", "--json").json()) == 2


def test_list_refuses_what_cannot_be_listed() -> None:
    result = belt("interrupt", "list", "run_a", "--run", "run_b")
    assert result.exit_code == 2
    assert "RUN_ID run_a and --run run_b name different runs" in result.stderr
    assert belt("interrupt", "list", "--reason", "whim").exit_code == 2
    result = belt("interrupt", "list", "--chat", "../x")
    assert result.exit_code == 5
    assert "invalid chat id" in result.stderr
    result = belt("interrupt", "list", "--api", f"http://{REFUSED}")
    assert result.exit_code == 2
    assert "with --api, list needs a run's id" in result.stderr


def test_an_empty_inbox() -> None:
    result = belt("interrupt", "list")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "no pending interrupts" in result.stderr


def test_commands_take_a_short_id_or_a_unique_prefix() -> None:
    dto = open_gate()
    assert belt("interrupt", "show", dto["short_id"], "--json").json() == dto
    assert belt("interrupt", "show", dto["id"][:9], "--json").json() == dto
    result = belt("interrupt", "resolve", dto["short_id"][:4], "deny")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{dto['id']} resolved: deny\n"
    again = belt("interrupt", "resolve", dto["short_id"], "allow")
    assert again.exit_code == 4
    assert "no longer pending" in again.stderr


def test_an_ambiguous_prefix_exits_4_listing_the_candidates() -> None:
    made = [open_gate() for _ in range(40)]
    counts: dict[str, list[str]] = {}
    for dto in made:
        counts.setdefault(dto["short_id"][0], []).append(dto["id"])
    # "i" begins every whole id ("int_…") too, so it would name all 40: take another letter.
    counts.pop("i", None)
    letter, clash = max(counts.items(), key=lambda item: len(item[1]))
    assert len(clash) >= 2  # at least 39 ids over 35 first letters
    for command in (("show", letter), ("resolve", letter, "allow")):
        result = belt("interrupt", *command)
        assert result.exit_code == 4, command
        assert f"'{letter}' names {len(clash)} interrupts" in result.stderr
        assert all(i in result.stderr for i in sorted(clash)[:5])
    assert all(belt("interrupt", "show", i, "--json").json()["status"] == "pending" for i in clash)
    result = belt("interrupt", "show", "zzzzzzzzz")
    assert result.exit_code == 3


def test_list_json_is_the_interrupt_dto_list() -> None:
    dto = open_gate(meta={"event": "agent.tool_call", "data": {"tool": "rm"}})
    result = belt("interrupt", "list", "run_1", "--json")
    assert result.exit_code == 0
    assert result.json() == [dto]
    assert list(result.json()[0]) == list(DTO_FIELDS)


def test_list_of_a_run_without_interrupts() -> None:
    result = belt("interrupt", "list", "run_9")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "no pending interrupts on run run_9" in result.stderr
    result = belt("interrupt", "list", "run_9", "--json")
    assert result.exit_code == 0
    assert result.json() == []


def test_show() -> None:
    dto = open_gate(default_resolution="deny", resource_id="ti_1")
    result = belt("interrupt", "show", dto["id"], "--json")
    assert result.exit_code == 0
    assert result.json() == dto

    result = belt("interrupt", "show", dto["id"])
    assert result.exit_code == 0
    fields = dict(
        line.split(None, 1)
        for line in result.stdout.replace("on expiry", "on_expiry")
        .replace("expires in", "expires_in")
        .replace("short id", "short_id")
        .splitlines()
    )
    assert fields["id"] == dto["id"]
    assert fields["status"] == "pending"
    assert fields["resource"] == "tool_invocation:ti_1"
    assert fields["on_expiry"] == "deny"
    assert fields["expires"] == dto["expires_at"]

    assert belt("interrupt", "show", dto["id"], "--run", "run_1").exit_code == 0
    other = belt("interrupt", "show", dto["id"], "--run", "run_2")
    assert other.exit_code == 3
    assert "is not on run run_2" in other.stderr


def test_show_unknown_and_hostile_ids() -> None:
    result = belt("interrupt", "show", "int_nope")
    assert result.exit_code == 3
    assert "no interrupt int_nope" in result.stderr
    for bad in ("../../etc/passwd", "a/b", "..", "x.json"):
        result = belt("interrupt", "show", bad)
        assert result.exit_code == 5, bad
        assert "invalid interrupt id" in result.stderr
        result = belt("interrupt", "resolve", bad, "allow")
        assert result.exit_code == 5, bad
    assert belt("interrupt", "list", "../run").exit_code == 5
    store_root = open_store().root
    assert not (store_root / "objects").exists()


def test_resolve_with_data(tmp_path: Path) -> None:
    dto = open_gate()
    result = belt("interrupt", "resolve", dto["id"], "allow", "--data", '{"by": "ana"}')
    assert result.exit_code == 0
    assert result.stdout == f"{dto['id']} resolved: allow\n"
    shown = belt("interrupt", "show", dto["id"], "--json").json()
    assert shown["status"] == "resolved"
    assert shown["resolution"] == "allow"
    assert shown["resolved_data"] == {"by": "ana"}
    assert shown["resolved_at"] is not None

    second = open_gate()
    (tmp_path / "why.json").write_text('{"ticket": 7}')
    result = belt(
        "interrupt",
        "resolve",
        second["id"],
        "deny",
        "--data",
        f"@{tmp_path / 'why.json'}",
        "--json",
    )
    assert result.exit_code == 0
    assert result.json()["resolved_data"] == {"ticket": 7}
    assert result.json()["resolution"] == "deny"


def test_resolve_bad_input() -> None:
    dto = open_gate()
    result = belt("interrupt", "resolve", dto["id"], "maybe")
    assert result.exit_code == 2
    result = belt("interrupt", "resolve", dto["id"], "allow", "--data", "{nope")
    assert result.exit_code == 5
    assert "--data: not valid JSON" in result.stderr
    result = belt("interrupt", "resolve", dto["id"], "allow", "--data", "@/nonexistent/x.json")
    assert result.exit_code == 3
    assert belt("interrupt", "show", dto["id"], "--json").json()["status"] == "pending"


def test_resolving_twice_exits_4_and_leaves_the_interrupt_as_it_was() -> None:
    dto = open_gate()
    assert belt("interrupt", "resolve", dto["id"], "deny").exit_code == 0
    path = open_store().path("interrupt", dto["id"])
    before = path.read_bytes()
    result = belt("interrupt", "resolve", dto["id"], "allow", "--data", "1")
    assert result.exit_code == 4
    assert "no longer pending: it is resolved (deny)" in result.stderr
    assert path.read_bytes() == before


def test_resolve_unknown_exits_3() -> None:
    result = belt("interrupt", "resolve", "int_nope", "allow")
    assert result.exit_code == 3
    assert "no interrupt int_nope" in result.stderr


def test_damaged_interrupt_files_exit_5_naming_the_path() -> None:
    dto = open_gate()
    path = open_store().path("interrupt", dto["id"])
    for damage in (b"", b"{", b"\xff\xfe", b"[]", b'{"id": "x"}'):
        path.write_bytes(damage)
        for args in (
            ("show", dto["id"]),
            ("resolve", dto["id"], "allow"),
            ("list", "run_1"),
        ):
            result = belt("interrupt", *args)
            assert result.exit_code == 5, (args, damage)
            assert str(path) in result.stderr
            assert path.read_bytes() == damage


def test_sweep() -> None:
    now = datetime.now(UTC)
    overdue = open_gate(timeout=10, now=now - timedelta(minutes=1), default_resolution="deny")
    fresh = open_gate(timeout=3600)
    result = belt("interrupt", "sweep", "--json")
    assert result.exit_code == 0
    report = result.json()
    assert report["settled"] == 1
    assert [(d["id"], d["status"], d["resolution"]) for d in report["interrupts"]] == [
        (overdue["id"], "expired", "deny")
    ]
    assert belt("interrupt", "show", fresh["id"], "--json").json()["status"] == "pending"
    result = belt("interrupt", "sweep")
    assert result.exit_code == 0
    assert result.stdout == "settled 0 overdue interrupt(s)\n"


GATED = {"event": "agent.tool_call", "type": "gate"}
DELETE = {"name": "delete_file", "arguments": {"path": "/tmp/old.txt"}, "result": "deleted"}
HELD = {
    "agent": {"name": "t", "hooks": [GATED]},
    "turns": [{"user": "delete it", "model": [{"say": "deleting", "tool_calls": [DELETE]}]}],
}


def held_run(tmp_path: Path) -> dict:
    """The run `belt sim run` leaves at a gate (input_required), as ``--json`` reports it."""
    path = tmp_path / "held.json"
    path.write_text(json.dumps(HELD))
    result = belt("sim", "run", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    (run,) = result.json()["runs"]
    assert run["state"] == "input_required"
    return run


def test_create(tmp_path: Path) -> None:
    run = held_run(tmp_path)
    result = belt(
        "interrupt", "create", "--run", run["id"], "--chat", run["chat_id"],
        "--event", "agent.tool_call", "--timeout", "600", "--default-resolution", "deny",
        "--meta", '{"tool": "rm"}', "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    dto = result.json()
    assert list(dto) == list(DTO_FIELDS)
    assert (dto["run_id"], dto["chat_id"], dto["reason"]) == (
        run["id"],
        run["chat_id"],
        "hook_gate",
    )
    assert (dto["source"], dto["resource_type"]) == ("hook:agent.tool_call", "tool_invocation")
    assert dto["meta"] == {"tool": "rm"}
    created = datetime.fromisoformat(dto["created_at"])
    assert datetime.fromisoformat(dto["expires_at"]) - created == timedelta(seconds=600)
    assert re.search(r"^on expiry +deny$", belt("interrupt", "show", dto["id"]).stdout, re.M)
    assert belt("interrupt", "list", run["id"], "--json").json()[-1] == dto

    # The run and its chat named by short ids, as every command names them.
    short_run, short_chat = run["id"][3:11], run["chat_id"][3:11]
    result = belt(
        "interrupt", "create", "--run", short_run, "--chat", short_chat, "--event", "agent.start"
    )
    assert result.exit_code == 0, result.stderr
    assert re.match(rf"opened int_\w+ on run {run['id']}\n", result.stdout)
    made = belt("interrupt", "list", run["id"], "--json").json()[-1]
    assert (made["run_id"], made["chat_id"]) == (run["id"], run["chat_id"])
    assert made["resource_type"] == "hook_event"
    expires = datetime.fromisoformat(made["expires_at"])
    assert expires - datetime.fromisoformat(made["created_at"]) == timedelta(seconds=300)
    assert re.search(r"^on expiry +allow$", belt("interrupt", "show", made["id"]).stdout, re.M)


def create_refused(run_id: str, chat_id: str, code: int, message: str, belt_home: Path) -> None:
    """`belt interrupt create` on RUN_ID and CHAT_ID exits ``code`` with the one-line error
    ``message`` and leaves every file of the store as it was."""
    before = files_of(belt_home)
    result = belt(
        "interrupt", "create", "--run", run_id, "--chat", chat_id, "--event", "agent.tool_call"
    )
    assert result.exit_code == code, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines()[0] == f"error: {message}"
    assert files_of(belt_home) == before


def test_create_refuses_an_unknown_run_or_chat(tmp_path: Path, belt_home: Path) -> None:
    run = held_run(tmp_path)
    create_refused("ar_doesnotexist", "ch_doesnotexist", 3, "no run ar_doesnotexist", belt_home)
    create_refused("ar_doesnotexist", run["chat_id"], 3, "no run ar_doesnotexist", belt_home)
    create_refused(run["id"], "ch_doesnotexist", 3, "no chat ch_doesnotexist", belt_home)


def test_create_refuses_a_run_neither_running_nor_awaiting_a_decision(
    tmp_path: Path, belt_home: Path
) -> None:
    run = held_run(tmp_path)
    assert belt("sim", "stop", run["id"]).exit_code == 0
    create_refused(
        run["id"],
        run["chat_id"],
        4,
        f"run {run['id']} is canceled: a gate opens only on a run that is working or awaiting a "
        "decision (input_required)",
        belt_home,
    )
    path = tmp_path / "done.json"
    path.write_text(json.dumps({"turns": [{"user": "hi", "model": [{"say": "hello"}]}]}))
    (done,) = belt("sim", "run", str(path), "--json").json()["runs"]
    assert done["state"] == "completed"
    create_refused(
        done["id"],
        done["chat_id"],
        4,
        f"run {done['id']} is completed: a gate opens only on a run that is working or awaiting "
        "a decision (input_required)",
        belt_home,
    )


def test_create_refuses_a_chat_the_run_is_not_in(tmp_path: Path, belt_home: Path) -> None:
    run = held_run(tmp_path)
    other = held_run(tmp_path)
    create_refused(
        run["id"],
        other["chat_id"],
        4,
        f"run {run['id']} does not belong to chat {other['chat_id']} "
        f"(its chat is {run['chat_id']})",
        belt_home,
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--event", "agent.complete"], 5, "a gate cannot attach to agent.complete"),
        (["--event", "agent.tool_result"], 5, "a gate cannot attach"),
        (["--event", "nope"], 5, "unknown event"),
        (["--event", "agent.start", "--timeout", "86401"], 5, "1 through 86400"),
        (["--event", "agent.start", "--timeout", "0"], 5, "1 through 86400"),
        (["--event", "agent.start", "--meta", "{"], 5, "--meta: not valid JSON"),
        (["--event", "agent.start", "--default-resolution", "stop"], 2, ""),
    ],
)
def test_create_refuses(args: list[str], code: int, message: str, store: Store) -> None:
    run_id, chat_id = run_in_chat(store)
    result = belt("interrupt", "create", "--run", run_id, "--chat", chat_id, *args)
    assert result.exit_code == code
    assert message in result.stderr
    assert belt("interrupt", "list", run_id, "--all", "--json").json() == []


def test_racing_processes_exactly_one_resolves(belt_home: Path) -> None:
    """12 processes released together run `belt interrupt resolve`; 2 more come late (here).

    A large hook payload makes each resolve take long enough that the racers overlap even on a
    machine with few cores; without the lock, several would succeed.
    """
    dto = open_gate(meta={"event": "agent.tool_call", "data": {"blob": "x" * 4_000_000}})
    env = {**os.environ, "BELT_HOME": str(belt_home)}

    def command(i: int) -> list[str]:
        decision = "allow" if i % 2 else "deny"
        return ["interrupt", "resolve", dto["id"], decision, "--data", json.dumps(i)]

    finished = race([command(i) for i in range(12)], env)
    for i in (12, 13):
        late = belt(*command(i))
        finished.append((late.exit_code, late.stdout, late.stderr))

    codes = sorted(code for code, _, _ in finished)
    assert codes == [0] + [4] * 13, finished
    [(winner, out)] = [(i, out) for i, (code, out, _) in enumerate(finished) if code == 0]
    stored = belt("interrupt", "show", dto["id"], "--json").json()
    assert stored["resolved_data"] == winner
    assert stored["resolution"] == ("allow" if winner % 2 else "deny")
    assert out == f"{dto['id']} resolved: {stored['resolution']}\n"
    for code, _, err in finished:
        if code == 4:
            assert "no longer pending" in err


LAZY = """
import json
import sys
from belt.cli import main
heavy = {"httpx", "starlette", "uvicorn", "rich"}
for command in json.loads(sys.argv[1]):
    sys.argv = ["belt", *command]
    try:
        main()
    except SystemExit:
        pass
    print("heavy:" + ",".join(sorted({name.split(".")[0] for name in sys.modules} & heavy)))
"""


def test_read_and_resolve_paths_import_no_network_stack_or_rich(belt_home: Path) -> None:
    # (pydantic is imported: typer coerces a command's values with it)
    dto = open_gate()
    second = open_gate()
    commands = [
        ["interrupt", "list"],
        ["interrupt", "list", "--all", "--chat", "ch_1", "--reason", "hook_gate"],
        ["interrupt", "list", "run_1"],
        ["interrupt", "list", "run_1", "--json"],
        ["interrupt", "show", dto["short_id"]],
        ["interrupt", "resolve", dto["id"], "allow", "--data", '{"a": 1}'],
        ["interrupt", "resolve", second["short_id"], "deny", "--json"],
        # The same check sees them when they are used, so it can tell the two apart.
        ["interrupt", "list", "run_1", "--api", f"http://{REFUSED}"],
    ]
    # One process runs them in turn, printing what it has imported after each: what a command
    # imports in a fresh process it has imported by then here too, so none imports them while
    # every line before the last is empty.
    done = subprocess.run(
        [sys.executable, "-c", LAZY, json.dumps(commands)],
        env={**os.environ, "BELT_HOME": str(belt_home)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    imported = [line for line in done.stdout.splitlines() if line.startswith("heavy:")]
    assert len(imported) == len(commands), done.stdout
    for command, line in zip(commands[:-1], imported, strict=False):
        assert line == "heavy:", command
    assert "httpx" in imported[-1]


# -- review: a person walks the gates on a real terminal ------------------------------------------

PROMPTS = (b"[a/d/s/q] ", b"Enter for none): ")


def converse(args: list[str], answers: list[str], timeout: float = 60) -> tuple[str, int]:
    """Run ``belt ARGS`` on a pseudo-terminal, typing each answer when belt asks; its output
    (with what the terminal echoed) and exit code."""
    left = list(answers)

    def reply(seen: bytes) -> bytes | None:
        if not seen.endswith(PROMPTS):
            return None
        assert left, f"belt asked more than was answered:\n{seen.decode()}"
        return left.pop(0).encode() + b"\n"

    with on_terminal(args, env={**os.environ, "TERM": "dumb"}) as terminal:
        code = terminal.converse(reply, timeout)
        seen = terminal.seen
    assert not left, f"answers left over: {left}\n{seen.decode()}"
    return seen.decode().replace("\r\n", "\n"), code


def test_review_refuses_without_a_terminal() -> None:
    gate = open_gate()
    result = belt("interrupt", "review")
    assert result.exit_code == 2
    assert "review asks on a terminal" in result.stderr
    assert f"`belt interrupt resolve {gate['short_id']} allow`" in result.stderr
    resolve_interrupt(interrupt_id=gate["id"], decision="deny")
    assert "no gate is pending now" in belt("interrupt", "review").stderr


def test_review_walks_the_gates_and_resolves_each_as_resolve_would() -> None:
    soon = open_gate(
        timeout=60, meta={"data": {"tool": "delete_file", "arguments": {"path": "/tmp/old"}}}
    )
    later = open_gate(run_id="run_2", timeout=3600)
    out, code = converse(["interrupt", "review"], ["x", "a", "{bad", '{"by": "ana"}', "s"])
    assert code == 0, out
    # The gate that expires first comes first, with what it holds.
    assert out.index(soon["short_id"]) < out.index(later["short_id"])
    assert f"1 of 2 · {soon['short_id']} ({soon['id']})" in out
    assert 'agent.tool_call  delete_file({"path": "/tmp/old"})' in out
    assert "expires in" in out and "then allow" in out
    assert "'x' is not an answer" in out
    assert "data: not valid JSON" in out
    assert f"{soon['short_id']} resolved: allow" in out
    assert "reviewed 2: 1 allowed, 0 denied, 1 skipped" in out
    shown = belt("interrupt", "show", soon["id"], "--json").json()
    assert (shown["status"], shown["resolution"]) == ("resolved", "allow")
    assert shown["resolved_data"] == {"by": "ana"}
    assert belt("interrupt", "show", later["id"], "--json").json()["status"] == "pending"


def test_review_quits_and_leaves_the_rest_pending() -> None:
    dto = open_gate()
    out, code = converse(["interrupt", "review"], ["q"])
    assert code == 0, out
    assert "reviewed none; 1 still pending" in out and "no pending interrupts" not in out
    assert belt("interrupt", "show", dto["id"], "--json").json()["status"] == "pending"
    belt("interrupt", "resolve", dto["id"], "deny")
    out, code = converse(["interrupt", "review"], [])  # nothing pending: nothing asked
    assert (code, out.strip()) == (0, "no pending interrupts")


def test_review_resume_continues_a_simulated_run_once_its_gates_are_settled(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "gated.json"
    delete = {"name": "delete_file", "arguments": {"path": "/var/db"}, "result": "ok"}
    turn = {
        "user": "clean up",
        "model": [{"say": "deleting", "tool_calls": [delete]}, {"say": "ok"}],
    }
    scenario.write_text(
        json.dumps(
            {
                "agent": {"name": "cli", "hooks": [{"event": "agent.tool_call", "type": "gate"}]},
                "turns": [turn],
            }
        )
    )
    held = belt("sim", "run", str(scenario), "--json").json()
    run_id = held["runs"][0]["id"]
    [gate] = held["chat"]["pending_interrupts"]

    out, code = converse(["interrupt", "review", "--resume"], ["d", ""])
    assert code == 0, out
    assert "before it" in out and "user       clean up" in out  # the transcript before the gate
    assert f"{gate['short_id']} resolved: deny" in out
    assert f"run {run_id} resumed: completed" in out
    assert belt("sim", "show", run_id, "--json").json()["runs"][0]["state"] == "completed"
    assert belt("interrupt", "show", gate["id"], "--json").json()["resolution"] == "deny"


# -- watch: gates opened and settled by other processes -------------------------------------------


class Lines:
    """Lines a process prints, read with a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        self.fd, self.buffer = proc.stdout.fileno(), b""

    def next(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line in {timeout}s (so far {self.buffer!r})"
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                chunk = os.read(self.fd, 65536)
                assert chunk, f"the process ended (so far {self.buffer!r})"
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


@contextmanager
def watching(belt_home: Path, *args: str) -> Iterator[Lines]:
    """``belt interrupt watch ARGS`` in its own process, stopped with Ctrl-C (SIGINT) at the end,
    which must end it as every command ends on Ctrl-C: exit 130, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", "interrupt", "watch", "--interval", "0.1", *args],
        env={**os.environ, "BELT_HOME": str(belt_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        yield Lines(proc)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err


def other_process(*args: str) -> str:
    """``belt ARGS`` run in this test's process, which is not the watch's; what it printed."""
    done = belt(*args)
    assert done.exit_code == 0, done.stderr
    return done.stdout


def test_watch_json_sees_gates_opened_and_settled_by_other_processes(
    belt_home: Path, store: Store
) -> None:
    run_id, chat_id = run_in_chat(store)
    waiting = open_gate(default_resolution="deny")
    with watching(belt_home, "--json") as lines:
        first = json.loads(lines.next())
        assert (first["event"], first["interrupt"], first["on_expiry"]) == (
            "pending",
            waiting,
            "deny",
        )

        made = other_process(
            "interrupt", "create", "--run", run_id, "--chat", chat_id,
            "--event", "agent.tool_call", "--json",
        )  # fmt: skip
        opened = json.loads(lines.next())
        assert opened["event"] == "opened"
        assert opened["interrupt"] == json.loads(made)

        other_process("interrupt", "resolve", opened["interrupt"]["short_id"], "deny")
        settled = json.loads(lines.next())
        assert settled["event"] == "resolved"
        assert settled["interrupt"]["id"] == opened["interrupt"]["id"]
        assert settled["interrupt"]["resolution"] == "deny"

        other_process("interrupt", "resolve", waiting["id"], "allow")
        assert json.loads(lines.next())["event"] == "resolved"


def test_watch_prints_one_line_per_change(belt_home: Path, store: Store) -> None:
    run_id, chat_id = run_in_chat(store)
    waiting = open_gate(run_id="run_1", default_resolution="deny")
    with watching(belt_home) as lines:
        first = lines.next()  # the gate already waiting: the watch has taken its first look
        assert re.search(rf"  pending +{waiting['short_id']}  .*, then deny$", first), first
        made = json.loads(
            other_process(
                "interrupt", "create", "--run", run_id, "--chat", chat_id,
                "--event", "agent.tool_call", "--meta", '{"data": {"tool": "rm", "arguments": {}}}',
                "--json",
            )
        )  # fmt: skip
        opened = lines.next()
        head = rf"^\d\d:\d\d:\d\d  opened +{made['short_id']}  agent.tool_call rm\(\{{\}}\)"
        assert re.search(head + rf"  run {run_id}  expires in .*, then allow$", opened), opened
        other_process("interrupt", "resolve", made["id"], "allow")
        assert re.search(rf"  resolved +{made['short_id']}  allow  agent.tool_call", lines.next())


def test_watch_with_api_needs_runs() -> None:
    result = belt("interrupt", "watch", "--api", f"http://{REFUSED}")
    assert result.exit_code == 2
    assert "with --api, watch needs --run and a run's whole id" in result.stderr


# -- shell completion of pending interrupt ids -------------------------------------------------


@pytest.mark.parametrize("command", ["resolve", "show"])
def test_completion_offers_the_pending_interrupts(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = open_gate(meta={"data": {"tool": "rm", "arguments": {"p": 1}}})
    second = open_gate(run_id="run_2")
    settled = open_gate()
    resolve_interrupt(interrupt_id=settled["id"], decision="allow")

    def complete(words: str) -> list[str]:
        monkeypatch.setenv("_BELT_COMPLETE", "complete_bash")
        monkeypatch.setenv("COMP_WORDS", words)
        monkeypatch.setenv("COMP_CWORD", str(len(words.split(" ")) - 1))
        result = belt()
        assert result.exit_code == 0
        return result.stdout.split()

    assert sorted(complete(f"belt interrupt {command} ")) == sorted([first["id"], second["id"]])
    # Prefixes long enough that two random ids share them once in 36**6 (two characters after
    # "int_" were shared by the two pending ids about once in 1,300 runs).
    assert complete(f"belt interrupt {command} {first['id'][:10]}") == [first["id"]]
    assert complete(f"belt interrupt {command} {second['short_id'][:6]}") == [second["short_id"]]

    monkeypatch.setenv("_BELT_COMPLETE", "complete_fish")
    monkeypatch.setenv("_TYPER_COMPLETE_ARGS", f"belt interrupt {command} {first['short_id']}")
    monkeypatch.setenv("_TYPER_COMPLETE_FISH_ACTION", "get-args")
    result = belt()
    assert result.exit_code == 0
    assert result.stdout.strip() == f'{first["short_id"]}\tagent.tool_call rm({{"p": 1}})'


def test_verbose_given_to_belt_shows_the_traceback_of_a_subcommand() -> None:
    quiet = belt("interrupt", "show", "int_nope")
    assert quiet.exit_code == 3
    assert "Traceback" not in quiet.stderr
    loud = belt("-v", "interrupt", "show", "int_nope")
    assert loud.exit_code == 3
    assert "Traceback" in loud.stderr and "error: no interrupt int_nope" in loud.stderr


def test_meta_must_be_a_json_object() -> None:
    result = belt(
        "interrupt",
        "create",
        "--run",
        "ar_1",
        "--chat",
        "ch_1",
        "--event",
        "agent.start",
        "--meta",
        "[1]",
    )
    assert result.exit_code == 5
    assert result.stderr == "error: --meta: expected a JSON object, got an array\n"


def test_a_full_disk_is_a_clean_error_naming_the_file(belt_home: Path, store: Store) -> None:
    run_id, chat_id = run_in_chat(store)
    # A file-size limit makes writes fail with EFBIG, as a full disk fails them with ENOSPC.
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
        "from belt.cli import main\n"
        f"sys.argv = ['belt', 'interrupt', 'create', '--run', '{run_id}', '--chat', '{chat_id}',"
        " '--event', 'agent.start']\n"
        "main()\n"
    )
    done = subprocess.run(
        # -B: no truncated .pyc left for later processes (see test_init's full-disk test).
        [sys.executable, "-B", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert re.match(
        rf"error: {re.escape(str(belt_home))}/store/objects/interrupt/int_\w+\.json: "
        r"cannot write \(File too large\); that file is unchanged\n",
        done.stderr,
    )
    assert "Traceback" not in done.stderr


BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Every bidirectional control: raw on a terminal they reorder what it shows (U+202E reverses
what follows, so ``rm\u202etxt.exe`` reads as ``rmexe.txt``)."""


def raw_bidi(text: str) -> list[str]:
    return [char for char in text if char in BIDI]


def test_bidi_controls_never_reach_the_terminal_raw(belt_home: Path) -> None:
    tool = f"rm{BIDI}gpj.exe"
    gate = open_gate(meta={"data": {"tool": tool, "arguments": {"path": f"/tmp/{BIDI}"}}})
    for args in (
        ("interrupt", "list"),
        ("interrupt", "list", "run_1"),
        ("interrupt", "list", "--all"),
        ("interrupt", "show", gate["id"]),
        ("interrupt", "list", "--json"),
        ("interrupt", "show", gate["id"], "--json"),
    ):
        result = belt(*args)
        assert result.exit_code == 0, (args, result.stderr)
        assert raw_bidi(result.stdout + result.stderr) == [], args
        assert "\\u202e" in result.stdout, args
    # The JSON is the same value, the controls written as escapes.
    shown = belt("interrupt", "show", gate["id"], "--json").json()
    assert shown["meta"]["data"]["tool"] == tool
    out, code = converse(["interrupt", "review"], ["q"])
    assert code == 0, out
    assert raw_bidi(out) == [] and "rm\\u061c" in out
    with watching(belt_home) as lines:
        first = lines.next()
        assert raw_bidi(first) == [] and "rm\\u061c" in first, first


def test_an_index_replaced_by_a_directory_is_a_clean_error(belt_home: Path, store: Store) -> None:
    run_id, chat_id = run_in_chat(store)
    open_gate(run_id=run_id)
    index = belt_home / "store" / "index" / "run-interrupts" / f"{run_id}.jsonl"
    index.unlink()
    index.mkdir()
    for args in (
        ("interrupt", "create", "--run", run_id, "--chat", chat_id, "--event", "agent.start"),
        ("interrupt", "list", run_id),
    ):
        result = belt(*args)
        assert result.exit_code == 5, (args, result.stderr)
        assert f"{index}: damaged store file: it is a directory" in result.stderr
    assert index.is_dir() and list(index.iterdir()) == []
