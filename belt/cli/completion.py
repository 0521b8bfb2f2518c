"""``belt completion``: the shell completion script for bash, zsh or fish."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from belt.cli.options import argument

Shell = StrEnum("Shell", "bash zsh fish")  # the shells belt can complete in


def completion(
    ctx: typer.Context, shell: Annotated[Shell, argument("Shell to complete in.")]
) -> None:
    """Print the completion script for a shell.

    Try it in the current shell: eval "$(belt completion bash)".

    To keep it, save it where your shell loads completions from.

    Examples:

        belt completion bash > ~/.local/share/bash-completion/completions/belt
        belt completion zsh
    """
    from typer.completion import show_callback

    # What typer's --show-completion SHELL prints: the script of the program the command line
    # ran as (belt), which asks belt for completions in $_BELT_COMPLETE; it exits 0.
    show_callback(ctx, ctx.command.params[0], shell.value)
