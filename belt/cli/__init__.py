"""The ``belt`` command: one Typer app joining one module per command group."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from belt.errors import BeltError


class BeltGroup(TyperGroup):
    """Root group: turns a BeltError into a one-line message and its exit code."""

    def invoke(self, ctx: Any) -> Any:
        """Run the command; report belt's own errors without a traceback unless -v."""
        try:
            return super().invoke(ctx)
        except BeltError as exc:
            report(exc, verbose=bool(ctx.params.get("verbose")))
            raise typer.Exit(int(exc.exit_code)) from None


def report(exc: BeltError, *, verbose: bool) -> None:
    """Print a BeltError as a user sees it."""
    from belt import output

    if verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    problems = getattr(exc, "problems", [])
    output.error(exc.message, hint=None if problems else exc.hint)
    for problem in problems:
        output.echo(f"  {problem}", stderr=True)
    if problems and exc.hint:
        output.styled(f"hint: {exc.hint}", "yellow", stderr=True)


app = typer.Typer(
    cls=BeltGroup,
    name="belt",
    help="Declare, check, serve and simulate agent lifecycle hooks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show tracebacks for errors.")
    ] = False,
) -> None:
    """Declare, check, serve and simulate agent lifecycle hooks.

    Hooks in the inference.sh dialect (webhook, task, gate, builtin) and the Nexus/rho
    dialect (executor tools on four boundaries). State lives in $BELT_HOME.
    """


@app.command()
def version() -> None:
    """Print belt's version."""
    from belt import __version__

    sys.stdout.write(f"belt {__version__}\n")


def _register() -> None:
    from belt.cli import hooks

    app.add_typer(hooks.app, name="hooks")


_register()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="belt")
