"""The declaration file that `belt hooks add|list|remove|export` edit."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from belt.declaring.hookfile import add_hook, default_path, read_hooks, remove_hook, render
from belt.errors import InvalidInput, NotFound
from tests.racers import race


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_default_file_lives_in_belt_home_0600_in_a_0700_directory(belt_home: Path) -> None:
    assert not belt_home.exists()
    add_hook(event="agent.start", handler_type="gate")
    assert default_path() == belt_home / "hooks.json"
    assert mode(belt_home) == 0o700
    assert mode(belt_home / "hooks.json") == 0o600
    # The edit lock lives in the state directory too, never beside a user's file.
    assert sorted(p.name for p in belt_home.iterdir()) == ["hooks.json", "locks"]


def test_default_file_that_does_not_exist_holds_no_hooks() -> None:
    assert read_hooks() == []


def test_an_explicit_file_that_does_not_exist_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no such file"):
        read_hooks(tmp_path / "nope.json")


def test_added_hooks_are_written_in_order_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "hooks.json"
    first = add_hook(
        event="agent.tool_call",
        handler_type="webhook",
        handler="https://example.com/hooks/tool-call",
        timeout=10,
        file=path,
    )
    second = add_hook(
        event="agent.tool_call",
        handler_type="gate",
        timeout=600,
        default_resolution="deny",
        file=path,
    )
    assert (first[0], second[0]) == (0, 1)
    assert json.loads(path.read_text()) == {
        "hooks": [
            {
                "event": "agent.tool_call",
                "type": "webhook",
                "handler": "https://example.com/hooks/tool-call",
                "timeout": 10,
            },
            {
                "event": "agent.tool_call",
                "type": "gate",
                "timeout": 600,
                "default_resolution": "deny",
            },
        ]
    }
    assert [hook.type for hook in read_hooks(path)] == ["webhook", "gate"]


def test_a_toml_file_is_written_as_toml(tmp_path: Path) -> None:
    path = tmp_path / "hooks.toml"
    add_hook(
        event="agent.turn_start",
        handler_type="task",
        handler="my-team/auditor@latest",
        async_=True,
        file=path,
    )
    assert tomllib.loads(path.read_text()) == {
        "hooks": [
            {
                "event": "agent.turn_start",
                "type": "task",
                "handler": "my-team/auditor@latest",
                "async": True,
            }
        ]
    }
    assert read_hooks(path)[0].async_ is True


def test_an_invalid_hook_is_refused_with_the_index_it_would_get(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    add_hook(event="agent.start", handler_type="gate", file=path)
    before = path.read_text()
    with pytest.raises(InvalidInput) as caught:
        add_hook(
            event="agent.complete",
            handler_type="webhook",
            handler="https://example.com",
            timeout=301,
            file=path,
        )
    assert caught.value.message == (
        "hook not added: hooks[1].timeout: 301 is above the webhook maximum of 300"
    )
    assert path.read_text() == before


def test_every_problem_of_a_refused_hook_is_reported(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        add_hook(
            event="agent.complete",
            handler_type="gate",
            handler="https://example.com/hook",
            file=tmp_path / "hooks.json",
        )
    assert caught.value.message.startswith("hook not added: hooks[0].handler:")
    assert caught.value.problems == [
        "hooks[0].event: a gate cannot attach to agent.complete (gates attach to agent.start, "
        "agent.turn_start, agent.tool_call)"
    ]
    assert not (tmp_path / "hooks.json").exists()


def test_remove_by_index(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    add_hook(event="agent.start", handler_type="gate", file=path)
    add_hook(event="agent.turn_start", handler_type="builtin", handler="belt:suggest", file=path)
    removed = remove_hook(0, path)
    assert removed.event == "agent.start"
    assert [hook.handler for hook in read_hooks(path)] == ["belt:suggest"]


@pytest.mark.parametrize("index", [1, -1])
def test_remove_out_of_range_is_not_found(tmp_path: Path, index: int) -> None:
    path = tmp_path / "hooks.json"
    add_hook(event="agent.start", handler_type="gate", file=path)
    with pytest.raises(NotFound, match=f"no hook at index {index} in .* \\(it holds 1\\)"):
        remove_hook(index, path)
    assert len(read_hooks(path)) == 1


def test_a_broken_declaration_file_is_reported_with_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    path.write_text(
        json.dumps({"hooks": [{"event": "agent.start"}, {"event": "x", "type": "gate"}]})
    )
    with pytest.raises(InvalidInput) as caught:
        read_hooks(path)
    assert caught.value.message == f"{path}: 2 problem(s)"
    assert caught.value.problems == [
        "hooks[0].type: is required (one of webhook, task, gate, builtin)",
        "hooks[1].event: 'x' is not a lifecycle event (expected one of agent.start, "
        "agent.turn_start, agent.tool_call, agent.tool_result, agent.turn_complete, "
        "agent.pre_compact, agent.post_compact, agent.error, agent.complete, agent.idle)",
    ]


def test_render_json_and_toml_hold_the_same_hooks(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    add_hook(event="agent.start", handler_type="gate", default_resolution="deny", file=path)
    hooks = read_hooks(path)
    assert json.loads(render(hooks, "json")) == tomllib.loads(render(hooks, "toml"))


def test_twenty_concurrent_adds_all_land(tmp_path: Path) -> None:
    """Twenty ``belt hooks add`` processes released together: none loses another's hook."""
    path = tmp_path / "hooks.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    commands = [
        ["hooks", "add", "agent.complete", "--webhook", f"https://example.com/h{n}",
         "--file", str(path)]
        for n in range(20)
    ]  # fmt: skip
    preload = ["belt.declaring.hookfile", "belt.deliveries.effects", "typer._adapters"]
    outputs = race(commands, env, preload=preload)
    assert [code for code, _, _ in outputs] == [0] * 20, outputs
    handlers = sorted(hook.handler or "" for hook in read_hooks(path))
    assert handlers == sorted(f"https://example.com/h{n}" for n in range(20))
    indexes = sorted(out.split("hooks[")[1].split("]")[0] for _, out, _ in outputs)
    assert indexes == sorted(str(n) for n in range(20))


def test_an_edit_through_a_symlink_writes_the_target_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real" / "hooks.json"
    real.parent.mkdir()
    add_hook(event="agent.start", handler_type="gate", file=real)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    add_hook(event="agent.complete", handler_type="builtin", handler="belt:extract", file=link)
    assert link.is_symlink()
    assert [hook.type.value for hook in read_hooks(real)] == ["gate", "builtin"]
    remove_hook(0, file=link)
    assert link.is_symlink()
    assert [hook.type.value for hook in read_hooks(real)] == ["builtin"]


def test_an_edit_through_a_dangling_link_creates_nothing(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    link = tmp_path / "link.json"
    link.symlink_to(elsewhere / "deep" / "hooks.json")
    through_dir = tmp_path / "dir-link"
    through_dir.symlink_to(elsewhere / "dir")
    for file in (link, through_dir / "hooks.json"):
        with pytest.raises(NotFound, match="a symbolic link to .*, which does not exist"):
            add_hook(event="agent.start", handler_type="gate", file=file)
        with pytest.raises(NotFound):
            remove_hook(0, file=file)
    assert not elsewhere.exists()
    assert link.is_symlink() and through_dir.is_symlink()
    # A file that does not exist yet, with no link on its way, is still created.
    add_hook(event="agent.start", handler_type="gate", file=tmp_path / "new" / "hooks.json")
    assert len(read_hooks(tmp_path / "new" / "hooks.json")) == 1


def test_a_fifo_or_a_directory_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="is a FIFO"):
        add_hook(event="agent.start", handler_type="gate", file=fifo)
    with pytest.raises(InvalidInput, match="is a directory"):
        read_hooks(tmp_path)


def test_a_full_disk_is_a_clean_error_and_the_file_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "hooks.json"
    add_hook(event="agent.start", handler_type="gate", file=path)
    before = path.read_bytes()
    # A file-size limit makes the write fail with EFBIG, as a full disk fails it with ENOSPC.
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
        "from belt.cli import main\n"
        "sys.argv = ['belt', 'hooks', 'add', 'agent.complete', '--builtin', 'belt:extract',"
        f" '--file', {str(path)!r}]\n"
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
    assert done.stderr.startswith(f"error: {path}: cannot write (File too large)")
    assert "Traceback" not in done.stderr
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["hooks.json"]
