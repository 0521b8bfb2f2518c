"""Generate docs/cli.md: every command's help, as plain text, by walking the command tree.

Run ``python -m belt.cli.docgen > docs/cli.md`` (``make docs``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import typer

from belt.cli import app as belt_app
from belt.cli.helptext import keep_lines

WIDTH = 100

HEADER = """\
# Command reference

Every command of `belt` and `rho`, with the help that `--help` prints. This page is generated
from the commands themselves (`make docs`); edit the help texts in `belt/cli/`, not this file.
"""


def walk(command: Any, name: str, parent: Any = None) -> Iterator[tuple[str, Any, Any]]:
    """Yield (command path, command, context) for a command and all its subcommands."""
    ctx = command.make_context(
        name,
        [],
        parent=parent,
        resilient_parsing=True,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
    )
    yield ctx.command_path, command, ctx
    if not hasattr(command, "list_commands"):
        return
    for sub_name in command.list_commands(ctx):
        sub = command.get_command(ctx, sub_name)
        if sub is not None and not sub.hidden:
            yield from walk(sub, sub_name, ctx)


def plain_help(command: Any, ctx: Any) -> str:
    """The help a command prints, without rich panels or colour (examples, lists and tables
    keep their lines, as rich help keeps them)."""
    command.rich_markup_mode = None
    help_text, epilog = command.help, command.epilog
    command.help = keep_lines(help_text) if help_text else help_text
    command.epilog = keep_lines(epilog) if epilog else epilog
    try:
        return str(command.get_help(ctx)).rstrip()
    finally:
        command.help, command.epilog = help_text, epilog


def render() -> str:
    """The whole of docs/cli.md."""
    from belt.cli.rho import app as rho_app

    sections = [HEADER]
    for app, name in ((belt_app, "belt"), (rho_app, "rho")):
        for path, command, ctx in walk(typer.main.get_command(app), name):
            sections.append(f"## {path}\n\n```text\n{plain_help(command, ctx)}\n```\n")
    return "\n".join(sections)


def main() -> None:
    """Print docs/cli.md on stdout."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
