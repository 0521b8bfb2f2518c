"""Every command of belt and rho, including ones added later, has help text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from belt.cli import app as belt_app
from belt.cli.rho import app as rho_app


def command_paths(
    command: Any, path: tuple[str, ...], parent: Any = None
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (path, command) below ``command``, as click resolves them (lazy ones included)."""
    yield path, command
    if not hasattr(command, "list_commands"):
        return
    ctx = command.make_context(path[-1], [], parent=parent, resilient_parsing=True)
    for name in command.list_commands(ctx):
        yield from command_paths(command.get_command(ctx, name), (*path, name), ctx)


ALL = [
    (app, path, command)
    for app, name in ((belt_app, "belt"), (rho_app, "rho"))
    for path, command in command_paths(typer.main.get_command(app), (name,))
]


def test_the_walk_finds_the_commands_of_both_programs() -> None:
    paths = {" ".join(path) for _, path, _ in ALL}
    assert {
        "belt",
        "belt version",
        "belt completion",
        "belt hooks validate",
        "rho extensions configure",
    } <= paths


@pytest.mark.parametrize(
    ("app", "path", "command"), ALL, ids=[" ".join(path) for _, path, _ in ALL]
)
def test_command_has_help(app: typer.Typer, path: tuple[str, ...], command: Any) -> None:
    summary = (command.help or "").strip()
    assert summary, f"{' '.join(path)} has no help text"
    result = CliRunner().invoke(app, [*path[1:], "--help"], prog_name=path[0])
    assert result.exit_code == 0, result.output
    assert summary.splitlines()[0] in " ".join(result.stdout.split())
