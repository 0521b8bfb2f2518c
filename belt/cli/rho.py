"""The ``rho`` command: rho's extension settings, kept in belt's state directory."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from belt.cli.options import JsonFlag, VerboseFlag, argument, option
from belt.cli.root import PROGRAM
from belt.display import output

if TYPE_CHECKING:
    from belt.declaring.rhoconfig import Configured

app = typer.Typer(name="rho", **PROGRAM)
extensions = typer.Typer(help="Configure rho's extensions.", no_args_is_help=True)
app.add_typer(extensions, name="extensions")


Extension = StrEnum("Extension", {"lifecycle_hooks": "rho.lifecycle_hooks"})


@app.callback()
def root(verbose: VerboseFlag = False) -> None:
    """Configure rho extensions offline, in belt's state directory.

    The config file is rho/config.json in the state directory ($BELT_HOME).
    """


@extensions.command()
def configure(
    extension: Annotated[Extension, argument("Extension to configure.")],
    file: Annotated[
        Path | None, option("JSON or TOML file holding the object (default: stdin).")
    ] = None,
    api: Annotated[
        str | None,
        option(
            "Profile API base URL: read the whole declaration there and write it back "
            "with these lifecycle_hooks (e.g. `belt serve`)."
        ),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Check a lifecycle_hooks object and store it as the extension's configuration.

    The object declares Nexus hooks on turn_start, pre_compact, post_compact and stop.

    {} or null declares none. It is stored at plugins["rho.lifecycle_hooks"].configuration,
    or with --api in the lifecycle_hooks of the profile that API serves.

    Examples:

        rho extensions configure rho.lifecycle_hooks --file examples/nexus-profile.json
    """
    from belt.declaring.rhoconfig import configure_lifecycle_hooks  # start-up: pydantic

    configured = configure_lifecycle_hooks(file=file, api=api)
    render(configured, json_, f"stored {configured.location}", "{} (no lifecycle hooks declared)")


@extensions.command()
def show(
    extension: Annotated[Extension, argument("Extension to show.")], json_: JsonFlag = False
) -> None:
    """Print the configuration stored for the extension ({} when none is).

    It is read from plugins["rho.lifecycle_hooks"].configuration in the config file. A Nexus
    scenario that declares no lifecycle_hooks of its own runs with these under `belt sim run`
    (never under `belt test`).

    Examples:

        rho extensions show rho.lifecycle_hooks
        rho extensions show rho.lifecycle_hooks --json
    """
    from belt.declaring.rhoconfig import show_lifecycle_hooks  # start-up: pydantic

    shown = show_lifecycle_hooks()
    empty = "{} (no lifecycle hooks stored; set them with `rho extensions configure "
    render(shown, json_, shown.location, empty + "rho.lifecycle_hooks --file FILE`)")


def render(configured: Configured, json_: bool, where: str, empty: str) -> None:
    """With --json its summary; else ``where`` on stderr and a table of the hooks (or ``empty``)."""
    configuration = configured.configuration
    if output.json_printed(json_, configured.summary()):
        return
    output.echo(where, stderr=True)
    if not configuration:
        output.echo(empty)
        return
    output.table(
        ["event", "tool", "timeout_ms", "max_continuations"],
        [
            [event, hook["tool"], hook["timeout_ms"], hook.get("max_continuations", "")]
            for event, hook in configuration.items()
        ],
    )
