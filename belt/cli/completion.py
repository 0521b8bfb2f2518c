"""``belt completion``: the shell completion script for bash, zsh or fish."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from belt.cli.typer_internals import completion_script

COMPLETE_VAR = "_BELT_COMPLETE"


class Shell(StrEnum):
    """Shells belt can complete in."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(shell: Annotated[Shell, typer.Argument(help="Shell to complete in.")]) -> None:
    """Print the completion script for a shell.

    Try it in the current shell: eval "$(belt completion bash)".

    To keep it, save it where your shell loads completions from.

    Examples:

        belt completion bash > ~/.local/share/bash-completion/completions/belt
        belt completion zsh
    """
    from belt import output

    output.block(completion_script(prog_name="belt", complete_var=COMPLETE_VAR, shell=shell))
