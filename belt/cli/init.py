"""``belt init``: write a hook, a scenario, properties and a pytest test that pass as written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from belt.cli.options import JsonFlag, argument, option
from belt.display import output
from belt.scaffold import Framework
from belt.scaffold import init as write


def init(
    directory: Annotated[
        Path,
        argument(
            "Where to write (made when missing; default: the current directory).",
            metavar="DIR",
            show_default=False,
        ),
    ] = Path("."),
    nexus: Annotated[
        bool,
        option(
            "A Nexus/rho hook: an executor tool and a Nexus scenario "
            "(default: an inference.sh webhook hook).",
            "--nexus",
        ),
    ] = False,
    framework: Annotated[
        Framework,
        option(
            "The hook as a py: function only (py), or that function served by the "
            "standard library's http.server (stdlib) or by a Starlette app (starlette)."
        ),
    ] = Framework.py,
    json_: JsonFlag = False,
) -> None:
    """Write a working start: a hook, a scenario, properties, a pytest test and a README.

    The hook (handler.py; with --nexus, the executor tool tool.py) denies delete_file outside
    /tmp/ (with --nexus, asks for another round until the answer says the tests pass);
    scenario.toml runs it with expectations, props.toml holds the properties `belt check
    --props` checks (not with --nexus), test_handler.py (test_tool.py) runs the scenario with
    the pytest plugin, and README.md lists the next commands. `belt test DIR`, `belt check` on
    the hook and `pytest DIR` pass at once on what it writes, with nothing running: a stdlib or
    starlette server wraps the very function the scenario names as py:. It never writes over a
    file: when one it would write is there, it names it, writes nothing and exits 4. A DIR that
    is a file is exit 5. --json prints what it wrote and the next commands.

    Examples:

        belt init my-hook

        belt init my-hook --nexus --framework starlette
    """
    written = write(directory=directory, nexus=nexus, framework=framework)
    if output.json_printed(json_, written.to_json()):
        return
    where = "this directory" if str(directory) == "." else f"{directory}/"
    output.success(f"wrote {len(written.files)} files in {where}")
    width = max(len(item.name) for item in written.files)
    for item in written.files:
        output.echo(f"  {item.name.ljust(width)}  {item.about}")
    output.echo("next:")
    for command in written.next:
        output.echo(f"  {command}")
