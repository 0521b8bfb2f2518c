"""The ``belt`` command: one Typer app joining one module per command group."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from belt.cli import typer_internals
from belt.cli.options import VerboseFlag
from belt.errors import BeltError


class BeltGroup(typer_internals.OnDemandCompletion):
    """Root group: turns a BeltError into a one-line message and its exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        typer_internals.adopt(self)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; report belt's own errors without a traceback unless -v."""
        try:
            return super().invoke(ctx)
        except BeltError as exc:
            report(exc, verbose=bool(ctx.find_root().params.get("verbose")))
            raise typer.Exit(int(exc.exit_code)) from None

    def list_commands(self, ctx: Any) -> list[str]:
        """Subcommand names: those built already, then the lazy ones."""
        built = super().list_commands(ctx)
        return [*built, *(name for name in LAZY.get(self.name or "", {}) if name not in built)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """A subcommand, built on first use."""
        command = super().get_command(ctx, cmd_name)
        target = LAZY.get(self.name or "", {}).get(cmd_name)
        if command is None and target is not None:
            command = self.commands[cmd_name] = typer_internals.adopt(
                build_command(cmd_name, target)
            )
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Resolve a subcommand; for an unknown name, build all so typo hints can see them."""
        if args and self.get_command(ctx, args[0]) is None:
            for name in self.list_commands(ctx):
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)


# Subcommands built only when a command line names them, by group: {"belt": {name: target}}.
# Building every group's click commands (and importing their modules) on each start would make
# `belt version` pay for every command belt has.
LAZY: dict[str, dict[str, str]] = {}


def lazy_command(program: str, name: str, target: str) -> None:
    """Register ``program NAME``, built on first use from ``target``: "module:attribute".

    The attribute is a Typer app (a command group, as ``add_typer`` would add it) or a command
    function (as ``app.command()`` would add it).
    """
    LAZY.setdefault(program, {})[name] = target


def build_command(name: str, target: str) -> Any:
    """The click command for a lazy registration."""
    import importlib

    module_name, _, attribute = target.partition(":")
    obj = getattr(importlib.import_module(module_name), attribute)
    command: Any
    if isinstance(obj, typer.Typer):
        command = typer.main.get_group(obj)
    else:
        single = typer.Typer(add_completion=False)  # belt has `belt completion`
        single.command(name=name)(obj)
        command = typer.main.get_command(single)
    command.name = name
    return command


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
    verbose: VerboseFlag = False,
) -> None:
    """Declare, check, serve and simulate agent lifecycle hooks.

    Hooks in the inference.sh dialect (webhook, task, gate, builtin) and the Nexus/rho
    dialect (executor tools on four boundaries). State lives in $BELT_HOME.
    """


@app.command()
def version(json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Print belt's version."""
    from belt import __version__, output

    if json_:
        output.print_json({"version": __version__})
        return
    output.echo(f"belt {__version__}")


def _register() -> None:
    # Register each group or command lazily so that start-up stays cheap as commands grow.
    lazy_command("belt", "hooks", "belt.cli.hooks:app")
    lazy_command("belt", "interrupt", "belt.cli.interrupt:app")
    lazy_command("belt", "chat", "belt.cli.chat:app")
    lazy_command("belt", "sim", "belt.cli.sim:app")
    lazy_command("belt", "completion", "belt.cli.completion:completion")
    lazy_command("belt", "serve", "belt.cli.serve:serve")
    lazy_command("belt", "trigger", "belt.cli.trigger:trigger")
    lazy_command("belt", "executor", "belt.cli.executor:app")
    lazy_command("belt", "registry", "belt.cli.registry:app")
    lazy_command("belt", "test", "belt.cli.test:test")
    lazy_command("belt", "replay", "belt.cli.replay:replay")


_register()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="belt")
