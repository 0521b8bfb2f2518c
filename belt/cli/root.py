"""The ``belt`` command: one Typer app joining one module per command group (the console entry
point, ``belt.cli:main``, imports it once Ctrl-C is in hand)."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from belt import __version__
from belt.cli import helptext
from belt.cli.options import JsonFlag, VerboseFlag, option
from belt.display import output
from belt.errors import BeltError, ExitCode, Interrupted, UsageError, exit_code_lines


class BeltGroup(TyperGroup):
    """Root group: turns a BeltError into a one-line message and its exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        adopt(self)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line; a completion request registers typer's shell classes first."""
        # typer does so only with its completion options, which would import pydantic on every start
        program = kwargs.get("prog_name") or self.name
        var = kwargs.get("complete_var") or f"_{program}_COMPLETE".replace("-", "_").upper()
        if os.environ.get(var):
            from typer.completion import get_completion_inspect_parameters

            get_completion_inspect_parameters()
        return super().main(*args, **kwargs)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """A group named with nothing after it prints its help and exits 0 (as `belt --help`)."""
        ctx.meta.setdefault(ARGV, list(args))  # the whole command line, for its usage errors
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            show_help(ctx)
        return list(super().parse_args(ctx, args))

    def get_params(self, ctx: Any) -> list[Any]:
        """The group's parameters, its help option included, as ``plain_flags`` leaves them."""
        return plain_flags(super().get_params(ctx), self.get_help_option(ctx))

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a BeltError, a usage error under --json and Ctrl-C exit ``report``ed."""
        verbose = bool(ctx.find_root().params.get("verbose"))
        if ctx.parent is None:
            output.forget_document()
        error: BeltError
        failed = None
        try:
            return super().invoke(ctx)
        except typer.TyperException as usage:  # the command line's own error (click's)
            failed = getattr(usage, "ctx", None)
            if not wants_json(ctx, failed):
                raise
            kind = UsageError if usage.exit_code == ExitCode.USAGE else BeltError
            error = kind(usage.format_message(), where=parameter_named(usage))
        except KeyboardInterrupt:
            error = Interrupted("interrupted")
        except typer.Abort as abort:  # a prompt's Ctrl-C, or its end of input
            if isinstance(abort.__context__, KeyboardInterrupt):
                error = Interrupted("interrupted")
            else:
                error = BeltError("no answer: the input ended at a question")
        except RuntimeError as wrapped:  # after Abort, one: a Ctrl-C in a __set_name__ (console)
            if not isinstance(wrapped.__cause__, KeyboardInterrupt):
                raise
            error = Interrupted("interrupted")
        except BeltError as exc:
            error = exc
        json_ = wants_json(ctx, failed)
        if json_ and error.where is None:
            error.where = place_named(error.message, ctx.meta.get(ARGV, ()))
        report(error, verbose=verbose, json_=json_)
        raise typer.Exit(int(error.exit_code)) from None

    def list_commands(self, ctx: Any) -> list[str]:
        """Subcommand names: those built already, then the lazy ones."""
        built = super().list_commands(ctx)
        return [*built, *(name for name in LAZY.get(self.name or "", {}) if name not in built)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """A subcommand, built on first use, its flags shown without a type."""
        command = super().get_command(ctx, cmd_name)
        target = LAZY.get(self.name or "", {}).get(cmd_name)
        if command is None and target is not None:
            command = self.commands[cmd_name] = adopt(build_command(cmd_name, target))
        if command is not None:
            for sub in walk(command):
                plain_flags(sub.get_params(ctx), sub.get_help_option(ctx))
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Resolve a subcommand (all built for an unknown name, so typo hints see them)."""
        if args and self.get_command(ctx, args[0]) is None:
            for known in self.list_commands(ctx):
                self.get_command(ctx, known)
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and not rest and command.no_args_is_help:
            if not ctx.resilient_parsing:
                show_help(command.make_context(name, [], parent=ctx, resilient_parsing=True))
        return name, command, rest


# Subcommands built only when a command line names them, by group: {"belt": {name: target}}.
# Building every group's click commands (and importing their modules) on each start would make
# `belt version` pay for every command belt has.
LAZY: dict[str, dict[str, str]] = {}


def lazy_command(program: str, name: str, target: str) -> None:
    """Register ``program NAME``, built on first use from ``target`` ("module:app_or_function")."""
    LAZY.setdefault(program, {})[name] = target


def build_command(name: str, target: str) -> Any:
    """The click command for a lazy registration."""
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


def adopt(command: Any) -> Any:
    """``command``, it and its subcommands given belt's help text and JSON errors."""
    for each in walk(command):
        helptext.tidy(each)
        remember_json(each)
    return command


def walk(command: Any) -> list[Any]:
    """``command`` and every subcommand below it built so far."""
    subcommands = getattr(command, "commands", {}).values()
    return [command, *(each for sub in subcommands for each in walk(sub))]


def plain_flags(params: list[Any], help_option: Any) -> list[Any]:
    """``params``, flags shown without rich help's ``<bool>``; the help option's default False."""
    # not None, which typer would coerce with pydantic, slow to import
    for param in params:
        if getattr(param, "is_flag", False) and not param.count:
            param.metavar = ""
            if param is help_option and param.default is None:
                param.default = False
    return params


def show_help(ctx: Any) -> None:
    """Print the help of ``ctx``'s command on stdout and exit 0."""
    if text := ctx.get_help():  # rich help prints itself and returns ""
        typer.echo(text, color=ctx.color)
    ctx.exit(0)


ARGV = "belt.argv"
"""``ctx.meta`` key: the arguments the root group parsed (the whole command line)."""
JSON = "belt.json"
"""``ctx.meta`` key: set once a command's ``--json`` flag was given (``remember_json``)."""


def remember_json(command: Any) -> None:
    """Have ``command``'s ``--json`` flag (none has a callback of its own) note in ``ctx.meta``,
    shared by every context of one command line, that its errors are to be JSON."""
    for param in command.params:
        if "--json" in getattr(param, "opts", ()):
            param.callback = _note_json


def _note_json(ctx: Any, param: Any, value: Any) -> Any:
    if value:
        ctx.meta[JSON] = True
    return value


def wants_json(ctx: Any, failed: Any = None) -> bool:
    """Whether an error is printed as JSON: ``--json`` was given, or the command line ``failed``
    to parse (its flags unread) holds it and its command has it."""
    if ctx.meta.get(JSON):
        return True
    command = getattr(failed, "command", None)
    if command is None or "--json" not in ctx.meta.get(ARGV, ()):
        return False
    return any("--json" in getattr(param, "opts", ()) for param in command.params)


def place_named(message: str, argv: Sequence[str]) -> str | None:
    """The file a message begins with (``FILE: rule``): one the command line names, or one that
    exists; None when it begins with no such name."""
    named, sep, _ = message.partition(": ")
    if not sep or not named or named.startswith("-"):
        return None
    normal = (os.path.normpath(arg) for arg in argv if "\x00" not in arg)
    # lexists is False for a name no file can have (a NUL in it, too long)
    return named if named in argv or named in normal or os.path.lexists(named) else None


def parameter_named(usage: Exception) -> str | None:
    """The option or argument a usage error is about (``--timeout``), when it names one."""
    param = getattr(usage, "param", None)
    long = (opt for opt in getattr(param, "opts", []) if opt.startswith("--"))
    return next(long, getattr(param, "name", None))


def report(exc: BeltError, *, verbose: bool, json_: bool = False) -> None:
    """Print a BeltError: a line on stderr (with its problems and hint); with ``json_``, also one
    JSON object on stdout, unless the command printed its JSON document there already."""
    if isinstance(exc, Interrupted):  # Ctrl-C is not an error: one line, never a traceback
        line = f"{exc.message}; {exc.hint}" if exc.hint else exc.message
        output.styled(line, "yellow", stderr=True)
        return
    if json_ and not output.printed_document():
        output.print_json_line(exc.to_json())
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    output.error(exc.message)
    for problem in getattr(exc, "problems", []):
        output.echo(f"  {problem}", stderr=True)
    if exc.hint:
        output.styled(f"hint: {exc.hint}", "yellow", stderr=True)


PROGRAM: dict[str, Any] = {"cls": BeltGroup, "no_args_is_help": True, "add_completion": False}
PROGRAM |= {
    "pretty_exceptions_enable": False,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}
"""The settings of a program's Typer app (``belt``'s and ``rho``'s)."""

app = typer.Typer(
    name="belt",
    help="Declare, check, serve and simulate agent lifecycle hooks.",
    epilog="Exit codes:\n\n" + "\n".join(f"  {line}" for line in exit_code_lines()),
    **PROGRAM,
)


def print_version(value: bool) -> None:
    """``--version``: print the installed package's version (the source's, if not installed)."""
    if value:
        # importlib.metadata takes longer to import than the rest of `belt version`: only here.
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("belt")
        except PackageNotFoundError:
            installed = __version__
        typer.echo(f"belt {installed}")
        raise typer.Exit()


@app.callback()
def root(
    verbose: VerboseFlag = False,
    version: Annotated[
        bool,
        option(
            "Print belt's version and exit.",
            "--version",
            callback=print_version,
            is_eager=True,
            expose_value=False,
        ),
    ] = False,
) -> None:
    """Declare, check, serve and simulate agent lifecycle hooks.

    Hooks in the inference.sh dialect (webhook, task, gate, builtin) and the Nexus/rho
    dialect (executor tools on four boundaries). State lives in $BELT_HOME.
    """


@app.command()
def version(json_: JsonFlag = False) -> None:
    """Print belt's version.

    Examples:

        belt version
        belt version --json
    """
    # The source's version, which a test holds equal to the installed package's (--version):
    # reading the package metadata would more than double the time `belt version` takes.

    if not output.json_printed(json_, {"version": __version__}):
        output.echo(f"belt {__version__}")


for _name, _attribute in {
    "init": "init", "hooks": "app", "interrupt": "app", "chat": "app", "sim": "app",
    "completion": "completion", "serve": "serve", "trigger": "trigger", "executor": "app",
    "registry": "app", "test": "test", "replay": "replay", "check": "check",
}.items():  # fmt: skip
    lazy_command("belt", _name, f"belt.cli.{_name}:{_attribute}")
