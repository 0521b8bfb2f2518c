"""``belt interrupt`` against the local store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from belt.interrupts import DTO_FIELDS, create_interrupt, resolve_interrupt
from belt.store import open_store
from tests.cli.runner import belt


def open_gate(run_id: str = "run_1", **kwargs) -> dict:
    kwargs.setdefault("event", "agent.tool_call")
    return create_interrupt(run_id=run_id, chat_id="ch_1", **kwargs)


def test_list_prints_the_pending_interrupts_as_a_table() -> None:
    first = open_gate(timeout=3600)
    second = open_gate(event="agent.start", resource_id=None)
    settled = open_gate()
    resolve_interrupt(interrupt_id=settled["id"], decision="deny")
    open_gate(run_id="run_2")

    result = belt("interrupt", "list", "run_1")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "reason", "source", "resource", "status", "expires", "in"]
    assert len(lines) == 3
    assert lines[1].split()[:5] == [
        first["id"],
        "hook_gate",
        "hook:agent.tool_call",
        "tool_invocation",
        "pending",
    ]
    assert lines[1].split()[5:] in (["59m", "59s"], ["1h", "0m"])
    assert lines[2].split()[:4] == [second["id"], "hook_gate", "hook:agent.start", "hook_event"]
    assert settled["id"] not in result.stdout

    result = belt("interrupt", "list", "run_1", "--all")
    assert result.exit_code == 0
    assert f"{settled['id']}  hook_gate" in result.stdout
    assert "resolved (deny)" in result.stdout


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


def test_create() -> None:
    result = belt(
        "interrupt", "create", "--run", "run_7", "--chat", "ch_7", "--event", "agent.tool_call",
        "--timeout", "600", "--default-resolution", "deny", "--meta", '{"tool": "rm"}', "--json",
    )  # fmt: skip
    assert result.exit_code == 0
    dto = result.json()
    assert list(dto) == list(DTO_FIELDS)
    assert (dto["run_id"], dto["chat_id"], dto["reason"]) == ("run_7", "ch_7", "hook_gate")
    assert (dto["source"], dto["resource_type"]) == ("hook:agent.tool_call", "tool_invocation")
    assert dto["meta"] == {"tool": "rm"}
    created = datetime.fromisoformat(dto["created_at"])
    assert datetime.fromisoformat(dto["expires_at"]) - created == timedelta(seconds=600)
    assert re.search(r"^on expiry +deny$", belt("interrupt", "show", dto["id"]).stdout, re.M)
    assert belt("interrupt", "list", "run_7", "--json").json() == [dto]

    result = belt("interrupt", "create", "--run", "r", "--chat", "c", "--event", "agent.start")
    assert result.exit_code == 0
    assert result.stdout.startswith("opened int_")
    [made] = belt("interrupt", "list", "r", "--json").json()
    assert made["resource_type"] == "hook_event"
    expires = datetime.fromisoformat(made["expires_at"])
    assert expires - datetime.fromisoformat(made["created_at"]) == timedelta(seconds=300)
    assert re.search(r"^on expiry +allow$", belt("interrupt", "show", made["id"]).stdout, re.M)


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
def test_create_refuses(args: list[str], code: int, message: str) -> None:
    result = belt("interrupt", "create", "--run", "r", "--chat", "c", *args)
    assert result.exit_code == code
    assert message in result.stderr
    assert belt("interrupt", "list", "r", "--all", "--json").json() == []


RESOLVER = """
import runpy
import sys

import belt.cli  # start-up done before the start line, so the racers really overlap

sys.argv = ["belt", *sys.argv[1:]]
print("ready", flush=True)
sys.stdin.readline()
runpy.run_module("belt", run_name="__main__", alter_sys=True)
"""


def test_racing_processes_exactly_one_resolves(belt_home: Path) -> None:
    """12 processes released together run `python -m belt interrupt resolve`; 2 more come late.

    A large hook payload makes each resolve take long enough that the racers overlap even on a
    machine with few cores; without the lock, several would succeed.
    """
    dto = open_gate(meta={"event": "agent.tool_call", "data": {"blob": "x" * 4_000_000}})
    env = {**os.environ, "BELT_HOME": str(belt_home)}

    def racer(i: int, *prefix: str) -> subprocess.Popen[str]:
        decision = "allow" if i % 2 else "deny"
        return subprocess.Popen(
            [*prefix, "interrupt", "resolve", dto["id"], decision, "--data", json.dumps(i)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    aligned = [racer(i, sys.executable, "-c", RESOLVER) for i in range(12)]
    for proc in aligned:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in aligned:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    finished = [(proc.wait(timeout=60), *proc.communicate()) for proc in aligned]
    late = [racer(i, sys.executable, "-m", "belt") for i in (12, 13)]
    finished += [(proc.wait(timeout=60), *proc.communicate()) for proc in late]

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
import sys
from belt.cli import main
sys.argv = ["belt", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
heavy = sorted({name.split(".")[0] for name in sys.modules} & {"httpx", "starlette", "uvicorn"})
print("heavy:" + ",".join(heavy))
"""


def test_local_commands_do_not_import_the_network_stack(belt_home: Path) -> None:
    open_gate()
    env = {**os.environ, "BELT_HOME": str(belt_home)}

    def heavy(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", LAZY, *args], env=env, capture_output=True, text=True
        )
        return done.stdout.splitlines()[-1]

    assert heavy("interrupt", "list", "run_1") == "heavy:"
    assert heavy("interrupt", "list", "run_1", "--json") == "heavy:"
    # The same check sees httpx when --api is used, so it can tell the two apart.
    assert heavy("interrupt", "list", "run_1", "--api", "http://127.0.0.1:9") == "heavy:httpx"


def test_meta_must_be_a_json_object() -> None:
    result = belt(
        "interrupt",
        "create",
        "--run",
        "run_1",
        "--chat",
        "chat_1",
        "--event",
        "agent.start",
        "--meta",
        "[1]",
    )
    assert result.exit_code == 5
    assert result.stderr == "error: --meta: expected a JSON object, got an array\n"


def test_a_full_disk_is_a_clean_error_naming_the_file(belt_home: Path) -> None:
    # A file-size limit makes writes fail with EFBIG, as a full disk fails them with ENOSPC.
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
        "from belt.cli import main\n"
        "sys.argv = ['belt', 'interrupt', 'create', '--run', 'run_1', '--chat', 'ch_1',"
        " '--event', 'agent.start']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert re.match(
        rf"error: {re.escape(str(belt_home))}/store/objects/interrupt/int_\w+\.json: "
        r"cannot write \(File too large\); that file is unchanged\n",
        done.stderr,
    )
    assert "Traceback" not in done.stderr
