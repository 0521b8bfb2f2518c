"""Every numeric option of every command refuses NaN and the infinities, naming the option."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from belt.cli import app as belt_app
from belt.cli.rho import app as rho_app


def float_options(
    command: Any, path: tuple[str, ...], parent: Any = None
) -> Iterator[tuple[tuple[str, ...], str]]:
    """(command path, option) for each option of ``command`` and its subcommands whose value is
    a float (read from the command function's own annotations)."""
    ctx = command.make_context(path[-1], [], parent=parent, resilient_parsing=True)
    if command.callback is not None:
        hints = typing.get_type_hints(command.callback)
        for param in command.params:
            kinds = typing.get_args(hints.get(param.name)) or (hints.get(param.name),)
            if float in kinds and param.opts[0].startswith("--"):
                yield path, param.opts[0]
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            yield from float_options(command.get_command(ctx, name), (*path, name), ctx)


OPTIONS = [
    (app, path, option)
    for app, name in ((belt_app, "belt"), (rho_app, "rho"))
    for path, option in float_options(typer.main.get_command(app), (name,))
]


def test_the_walk_finds_the_numeric_options() -> None:
    found = {(" ".join(path), option) for _, path, option in OPTIONS}
    assert {
        ("belt check", "--max-time"),
        ("belt check", "--timeout"),
        ("belt trigger", "--timeout"),
        ("belt interrupt watch", "--interval"),
        ("belt serve", "--sweep-interval"),
        ("belt serve", "--handler-timeout"),
    } <= found


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400"])
@pytest.mark.parametrize(
    ("app", "path", "option"),
    OPTIONS,
    ids=[f"{' '.join(path)} {option}" for _, path, option in OPTIONS],
)
def test_a_numeric_option_refuses_nan_and_infinities(
    app: typer.Typer, path: tuple[str, ...], option: str, value: str
) -> None:
    # The option comes first, so it is read before anything else the command needs; --port 0
    # keeps belt serve off any fixed port should it ever get past its options.
    extra = ["--port", "0"] if path[-1] == "serve" else []
    result = CliRunner().invoke(app, [*path[1:], option, value, *extra], prog_name=path[0])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.replace("│", " ").split())
    # Refused as the command line's parser words it, or by the command's own range check
    # (belt serve's), each naming the option.
    assert f"Invalid value for '{option}':" in text or f"error: {option} " in text, text


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_max_time_nan_is_refused_before_anything_runs(value: str) -> None:
    result = CliRunner().invoke(
        belt_app, ["check", "py:examples/handler.py:decide", "--max-time", value]
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert f"Invalid value for '--max-time': {value} is not a finite number" in text
    assert "checks:" not in text
