"""Every command of belt and rho, including ones added later, has help text."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from belt import __version__ as belt_version
from belt.cli import app as belt_app
from belt.cli.docgen import render
from belt.cli.helptext import examples, reflow
from belt.cli.rho import app as rho_app
from belt.errors import EXIT_CODE_MEANINGS, ExitCode


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


LEAVES = [
    (app, path, command) for app, path, command in ALL if not hasattr(command, "list_commands")
]


def example_args(line: str, program: str) -> list[str]:
    """The arguments an example gives its program (the part after a pipe into it, before any
    redirection)."""
    words = shlex.split(line)
    while "|" in words:
        words = words[words.index("|") + 1 :]
    for stop in (">", "<", "|"):
        if stop in words:
            words = words[: words.index(stop)]
    assert words[0] == program, line
    return words[1:]


@pytest.mark.parametrize(
    ("app", "path", "command"), LEAVES, ids=[" ".join(path) for _, path, _ in LEAVES]
)
def test_command_help_ends_with_examples_that_parse(
    app: typer.Typer, path: tuple[str, ...], command: Any
) -> None:
    result = CliRunner().invoke(app, [*path[1:], "--help"], prog_name=path[0])
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.stdout, f"{' '.join(path)} --help has no Examples part"
    # The help ends with them: after every panel of arguments and options.
    assert result.stdout.rindex("Examples:") > result.stdout.rindex("╰"), result.stdout
    lines = examples(command)
    assert 1 <= len(lines) <= 2, lines
    for line in lines:
        args = example_args(line, path[0])
        assert args[: len(path) - 1] == list(path[1:]), line
        assert parsed(app, path[0], args).command_path == " ".join(path), line


def parsed(app: typer.Typer, program: str, args: list[str]) -> Any:
    """The context of the command ``args`` name, parsed as a run would parse it first (every
    option and argument must exist and take the value given)."""
    ctx = typer.main.get_command(app).make_context(program, list(args))
    while hasattr(ctx.command, "resolve_command"):
        # A group's options come first; what follows them is its subcommand, then the
        # subcommand's own arguments (ctx.args).
        rest = args[len(args) - len(ctx.args) - 1 :]
        name, sub, rest = ctx.command.resolve_command(ctx, rest)
        ctx = sub.make_context(name, rest, parent=ctx)
        args = rest
    return ctx


def refused(app: typer.Typer, program: str, args: list[str]) -> str:
    """The message of the usage error ``args`` are (exit 2), as ``parsed`` finds it."""
    with pytest.raises(typer.TyperException) as caught:
        parsed(app, program, args)
    assert caught.value.exit_code == ExitCode.USAGE
    return caught.value.format_message()


def test_an_example_that_names_no_such_option_is_caught() -> None:
    message = refused(belt_app, "belt", ["interrupt", "list", "--no-such-option"])
    assert message == "No such option: --no-such-option"
    assert parsed(belt_app, "belt", ["interrupt", "list", "--all"]).params["all_"] is True
    assert parsed(belt_app, "belt", ["-v", "hooks", "validate", "a.toml"]).params == {
        "files": [Path("a.toml")],
        "dialect": None,
        "json_": False,
    }
    assert "'bogus' is not one of" in refused(belt_app, "belt", ["completion", "bogus"])


def test_bare_belt_prints_the_help_and_exits_0() -> None:
    result = CliRunner().invoke(belt_app, [], prog_name="belt")
    assert result.exit_code == 0, result.output
    assert "Usage: belt" in result.stdout
    assert "Commands" in result.stdout


@pytest.mark.parametrize(
    ("app", "path"),
    [(belt_app, ["hooks"]), (belt_app, ["interrupt"]), (belt_app, ["sim"]), (belt_app, ["chat"])]
    + [(belt_app, ["registry"]), (belt_app, ["executor"]), (rho_app, ["extensions"])],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_bare_group_prints_its_help_once_and_exits_0(app: typer.Typer, path: list[str]) -> None:
    program = "rho" if app is rho_app else "belt"
    result = CliRunner().invoke(app, path, prog_name=program)
    assert result.exit_code == 0, result.output
    assert result.stdout.count(f"Usage: {program} {path[0]}") == 1, result.stdout
    assert result.stderr == ""


def test_flags_show_no_type_in_help_and_valued_options_keep_theirs() -> None:
    # typer's rich help prints <bool> after a flag, which takes no value.
    for args in (["--help"], ["interrupt", "list", "--help"], ["hooks", "validate", "-h"]):
        result = CliRunner().invoke(belt_app, args, prog_name="belt", env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.stdout
        assert "--help" in result.stdout
    validate = CliRunner().invoke(belt_app, ["hooks", "validate", "-h"], prog_name="belt")
    assert "<platform|nexus>" in validate.stdout
    assert "<list[Path]>" in validate.stdout


def test_version_flag_prints_the_installed_version() -> None:
    result = CliRunner().invoke(belt_app, ["--version"], prog_name="belt")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"belt {metadata.version('belt')}\n"
    command = CliRunner().invoke(belt_app, ["version", "--json"], prog_name="belt")
    assert json.loads(command.stdout) == {"version": metadata.version("belt")}
    assert belt_version == metadata.version("belt")  # `belt version` prints the source's


def test_top_level_help_and_cli_reference_list_every_exit_code_from_the_table() -> None:
    result = CliRunner().invoke(belt_app, ["--help"], prog_name="belt")
    text = " ".join(result.stdout.split())
    reference = " ".join(render().split())
    for code, meaning in EXIT_CODE_MEANINGS.items():
        assert f"{int(code)} {meaning}" in text
        assert f"{int(code)} {meaning}" in reference
    assert set(EXIT_CODE_MEANINGS) == set(ExitCode)


def test_reflow_joins_prose_and_keeps_examples_and_lists() -> None:
    text = """First line.

    A paragraph broken
    where the source was wide.

    - an item that goes
      on here
    - another

    Examples:

        belt one
        belt two
    """
    assert reflow(text) == (
        "First line.\n\nA paragraph broken where the source was wide.\n\n"
        "- an item that goes on here\n- another\n\nExamples:\n\n    belt one\n    belt two"
    )
    assert reflow(reflow(text)) == reflow(text)


@pytest.mark.parametrize("columns", ["50", "150"])
def test_help_wraps_at_the_terminal_width_without_ragged_breaks(columns: str) -> None:
    result = CliRunner().invoke(
        belt_app, ["interrupt", "review", "--help"], prog_name="belt", env={"COLUMNS": columns}
    )
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines()]
    width = int(columns)
    # The paragraph is one flow: no line of it stops far short of the width except its last.
    start = next(i for i, line in enumerate(lines) if line.startswith("Each gate shows"))
    paragraph = lines[start : lines.index("", start)]
    assert len(paragraph) >= 2
    for line in paragraph[:-1]:
        assert len(line) > width - 20, paragraph
