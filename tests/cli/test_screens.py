"""What a person sees on a terminal of their width: tables that fit, or one record per block;
progress on long work, and nothing of it when piped."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from belt.records.names import short_id
from belt.wire.catalogue import BUILTINS, EVENTS
from tests.cli.runner import belt
from tests.cli.test_ids import ANSI, held_run
from tests.terminal import on_terminal


def seen_at(args: list[str], columns: int) -> tuple[str, int]:
    """``belt ARGS`` on a pseudo-terminal ``columns`` wide: what it printed, its exit code."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(COLUMNS=str(columns), LINES="40", TERM="xterm")
    with on_terminal(args, env=env) as terminal:
        code = terminal.finish()
        text = ANSI.sub("", terminal.text)
    return text, code


def records(text: str) -> list[dict[str, str]]:
    """The blocks of ``key: value`` lines, a blank line between two."""
    found = []
    for chunk in text.strip().split("\n\n"):
        fields = {}
        for line in chunk.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        found.append(fields)
    return found


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_interrupt_list_all_is_a_table_where_it_fits_and_blocks_where_not(
    tmp_path: Path, columns: int
) -> None:
    report = held_run(tmp_path)
    gate = report["chat"]["pending_interrupts"][0]
    out, code = seen_at(["interrupt", "list", "--all"], columns)
    assert code == 0, out
    assert all(len(line) <= columns for line in out.splitlines()), out
    if columns == 120:
        header = out.splitlines()[0]
        assert re.search(r"^id\s+┃ event\s+┃ holds", header), out
        assert re.search(rf"^{gate['short_id']} +│ agent\.tool_call +│", out, re.M), out
        return
    (record,) = records(out)
    assert record["id"] == gate["short_id"]
    assert record["event"] == "agent.tool_call"
    assert record["run"] == short_id(gate["run_id"])
    assert record["chat"] == short_id(gate["chat_id"])
    assert record["status"] == "pending"
    assert record["then"] == "allow"
    assert "holds" in record and "expires in" in record


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_no_event_or_builtin_name_is_cut_at_any_width(columns: int) -> None:
    for args, names in (
        (["hooks", "events"], list(EVENTS)),
        (["hooks", "builtins"], [*BUILTINS, *(e for b in BUILTINS.values() for e in b.events)]),
    ):
        out, code = seen_at(args, columns)
        assert code == 0, out
        assert all(len(line) <= columns for line in out.splitlines()), out
        words = set(re.findall(r"[\w.:]+", out))
        for name in names:
            assert name in words, (name, out)


def test_piped_tables_are_full_plain_rows_as_before(tmp_path: Path) -> None:
    report = held_run(tmp_path)
    gate = report["chat"]["pending_interrupts"][0]
    listed = belt("interrupt", "list", "--all")
    assert listed.exit_code == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["id", "event", "holds"]
    assert row.split()[:2] == [gate["id"], "agent.tool_call"]
    assert ":" not in header


# -- progress on long work ----------------------------------------------------------------------


def waiting_handler(tmp_path: Path) -> tuple[str, Path]:
    """A py: handler that allows every event, once ``go`` exists (each case waits for it)."""
    go = tmp_path / "go"
    handler = tmp_path / "slow.py"
    handler.write_text(
        "import pathlib, time\n\n\n"
        "def decide(payload):\n"
        f"    while not pathlib.Path({str(go)!r}).exists():\n"
        "        time.sleep(0.01)\n"
        "    return None\n"
    )
    return f"py:{handler}:decide", go


CHECK = ["--event", "agent.tool_call", "--examples", "20", "--seed", "7"]


def test_belt_check_on_a_terminal_shows_its_progress_then_clears_it(tmp_path: Path) -> None:
    target, go = waiting_handler(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(COLUMNS="100", TERM="xterm")
    with on_terminal(["check", target, *CHECK], env=env) as terminal:
        terminal.wait_for("checking agent.tool_call: 0 cases done, ", timeout=30)
        go.touch()
        code = terminal.finish()
        text = terminal.text
    assert code == 0, text
    progress, _, rest = text.rpartition("\x1b[2K")
    assert "checking agent.tool_call: " in progress
    assert "cases done" not in rest  # cleared before the report
    assert re.search(r"^\d+ checks: \d+ passed, 0 failed", ANSI.sub("", rest), re.M), text


def test_belt_check_piped_prints_no_progress(tmp_path: Path) -> None:
    target, go = waiting_handler(tmp_path)
    go.touch()
    result = belt("check", target, *CHECK)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert "cases done" not in result.stdout and "\r" not in result.stdout
    assert re.search(r"^\d+ checks: \d+ passed, 0 failed", result.stdout, re.M), result.stdout


def waiting_suite(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """A directory of ``count`` scenarios whose hook waits for ``go`` (``waiting_handler``)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    handler, go = waiting_handler(tmp_path)
    for number in range(count):
        (suite / f"s{number}.toml").write_text(
            f'[agent]\nname = "a{number}"\n\n'
            "[[agent.hooks]]\n"
            'event = "agent.tool_call"\ntype = "webhook"\n'
            f"handler = {handler!r}\n\n"
            '[[turns]]\nuser = "Tidy up"\n\n'
            "  [[turns.model]]\n"
            '  tool_calls = [ { name = "delete_file", arguments = { path = "/tmp/a" }, '
            'result = "deleted" } ]\n\n'
            '  [[turns.model]]\n  say = "Done."\n\n'
            '[[expect]]\nevent = "agent.tool_call"\nfired = 1\n'
        )
    return suite, go


def test_belt_test_j_on_a_terminal_shows_the_scenarios_done(tmp_path: Path) -> None:
    suite, go = waiting_suite(tmp_path, 3)
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(COLUMNS="100", TERM="xterm")
    with on_terminal(["test", str(suite), "-j", "2"], env=env) as terminal:
        terminal.wait_for("running scenarios: 0 of 3 done (-j 2)", timeout=30)
        go.touch()
        code = terminal.finish()
        text = terminal.text
    assert code == 0, text
    progress, _, rest = text.rpartition("\x1b[2K")
    assert "running scenarios: 3 of 3 done (-j 2)" in progress, text
    assert "running scenarios" not in rest  # cleared before the summary
    assert "3 passed" in ANSI.sub("", text), text


def test_belt_test_j_piped_prints_no_progress(tmp_path: Path) -> None:
    suite, go = waiting_suite(tmp_path, 3)
    go.touch()
    parallel = belt("test", str(suite), "-j", "2")
    assert parallel.exit_code == 0, parallel.stderr
    assert "running scenarios" not in parallel.stdout + parallel.stderr
    assert "\r" not in parallel.stdout + parallel.stderr
    serial = belt("test", str(suite))
    # The same lines as one job prints, but for the times.
    times = re.compile(r"\d+(\.\d+)? ?m?s")
    assert times.sub("T", parallel.stdout) == times.sub("T", serial.stdout)
    assert parallel.stderr == serial.stderr == ""
