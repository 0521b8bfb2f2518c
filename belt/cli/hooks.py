"""``belt hooks``: the event catalogue, builtins, and declaring and checking hooks."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from belt.cli.options import JsonFlag, argument, option
from belt.display import output
from belt.errors import ExitCode, UsageError
from belt.wire.enums import Dialect, InterruptResolution

if TYPE_CHECKING:
    from belt.wire.platform import LifecycleHookConfig

app = typer.Typer(help="Declare and check lifecycle hooks.", no_args_is_help=True)

FileOption = Annotated[
    Path | None,
    option("Declaration file to use (default: hooks.json in the state directory).", "--file"),
]


FormatChoice = StrEnum("FormatChoice", "json toml")  # formats a declaration file is written in


@app.command()
def events(json_: JsonFlag = False) -> None:
    """List the lifecycle events, what carries their data, and whether a gate can attach.

    Examples:

        belt hooks events
        belt hooks events --json
    """
    from belt.wire.catalogue import EVENTS  # start-up: belt --help

    listed = [
        {**e.definition(), "fires": e.fires, "data": e.data_fields}
        | {"effect": e.effect, "emitted": e.emitted}
        for e in EVENTS.values()
    ]
    if not output.json_printed(json_, listed):
        output.table(
            ["event", "can_gate", "data", "when it fires", "decision effect"],
            [
                [e.event, "yes" if e.can_gate else "no", ", ".join(e.data_fields) or "-"]
                + [e.fires, e.effect]
                for e in EVENTS.values()
            ],
        )


@app.command()
def builtins(json_: JsonFlag = False) -> None:
    """List the builtin handlers and the events each may attach to.

    Examples:

        belt hooks builtins
    """
    from belt.wire.catalogue import BUILTINS  # start-up: belt --help

    if not output.json_printed(json_, [b.definition() for b in BUILTINS.values()]):
        output.table(
            ["builtin", "events", "what it does"],
            [[b.name, ", ".join(b.events), b.description] for b in BUILTINS.values()],
        )


@app.command()
def validate(
    files: Annotated[list[Path], argument("Declaration files (JSON or TOML).")],
    dialect: Annotated[
        Dialect | None, option("Read the files as this dialect instead of detecting it.")
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Check declaration files of either dialect; every problem names its path and rule.

    A scenario file (one with turns) is checked as `belt sim run` reads it, in the dialect it
    says, and its hooks as a declaration's; another file of belt's (a policy, a model script,
    a props file) is named with the command that reads it (exit 5).

    Examples:

        belt hooks validate examples/hooks.toml examples/nexus-hooks.toml

        belt hooks validate examples/guarded-agent.toml
    """
    from belt.declaring import declarations, doctor  # start-up: pydantic

    reports = doctor.validate_files(files, dialect)
    kinds = {doctor.SCENARIO: "scenario"}
    summaries = [{**r.summary(), "kind": kinds.get(r.shape, "hooks")} for r in reports]
    if not output.json_printed(json_, summaries):
        for report in reports:
            for warning in report.findings.warnings:
                output.warning(f"{report.path}: {warning}")
            for problem in report.findings.problems:
                output.error(f"{report.path}: {problem}")
            if report.ok:
                scenario = report.shape == doctor.SCENARIO
                kind = f"{report.dialect or '?'}{' scenario' if scenario else ''}"
                tail = f": {doctor.SCENARIO_COMMANDS}" if scenario else ""
                output.success(f"ok  {report.path} ({kind}, {report.hook_count()} hook(s)){tail}")
    if code := declarations.exit_code(reports):
        raise typer.Exit(int(code))


@app.command()
def doctor(
    files: Annotated[
        list[Path] | None,
        argument("Declaration or scenario files (default: hooks.json in the state directory)."),
    ] = None,
    strict: Annotated[bool, option("Exit 1 when it finds a trap (a warning).", "--strict")] = False,
    json_: JsonFlag = False,
) -> None:
    """Find the traps a valid declaration can hold, and declared hooks never delivered.

    Each trap is a warning with its fix: the command exits 0 with warnings, 1 with --strict
    (for CI), and 5 when a file is invalid. A webhook counts as delivered only for deliveries
    to its own URL: a run's hook call to it, or a request belt serve journalled at its host,
    port and path.

    Examples:

        belt hooks doctor examples/hooks.toml
    """
    from belt.declaring.doctor import examine  # start-up: pydantic
    from belt.declaring.hookfile import resolve_path  # start-up: pydantic
    from belt.store import open_store  # start-up: belt --help

    examined = examine(files or [resolve_path(None)], open_store())
    if not output.json_printed(json_, examined.summary()):
        for declaration in examined.invalid:
            for problem in declaration.findings.problems:
                output.error(f"{declaration.path}: {problem}")
        for trap in examined.traps:
            output.warning(f"{trap.file}: {trap.where}: {trap.message}")
            output.echo(f"  fix: {trap.fix}", stderr=True)
        if not examined.history:
            output.echo(
                "no hook deliveries on record yet: which declared hooks never ran is known once "
                "runs or belt serve have delivered some",
                stderr=True,
            )
        if not examined.traps and not examined.invalid:
            output.success(f"no traps in {', '.join(examined.files)}")
    if examined.invalid:
        raise typer.Exit(int(ExitCode.INVALID_INPUT))
    if examined.traps and strict:
        raise typer.Exit(int(ExitCode.FAILURE))


@app.command()
def add(
    event: Annotated[str, argument("Lifecycle event, e.g. agent.tool_call.")],
    webhook: Annotated[str | None, option("Webhook URL to POST the payload to.")] = None,
    task: Annotated[str | None, option("Agent ref (namespace/name[@version]) to run.")] = None,
    gate: Annotated[bool, option("Pause the run for a person.", "--gate")] = False,
    builtin: Annotated[str | None, option("Builtin handler name.")] = None,
    async_: Annotated[bool, option("Run without blocking.", "--async")] = False,
    timeout: Annotated[int | None, option("Timeout in seconds.")] = None,
    default_resolution: Annotated[
        InterruptResolution | None, option("Gate only: resolution on expiry.")
    ] = None,
    file: FileOption = None,
) -> None:
    """Add a hook to a declaration file (checked before it is written).

    Examples:

        belt hooks add agent.tool_call --webhook http://127.0.0.1:8787/hooks --timeout 10
        belt hooks add agent.tool_call --gate --default-resolution deny
    """
    from belt.declaring.hookfile import add_hook, resolve_path  # start-up: pydantic

    given = {"webhook": webhook, "task": task, "gate": True if gate else None, "builtin": builtin}
    chosen = [(kind, value) for kind, value in given.items() if value is not None]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --webhook URL, --task REF, --gate, --builtin NAME")
    kind, value = chosen[0]
    index, hook = add_hook(
        event=event,
        handler_type=kind,
        handler=None if kind == "gate" else str(value),
        async_=async_,
        timeout=timeout,
        default_resolution=default_resolution,
        file=file,
    )
    output.success(f"added hooks[{index}] to {resolve_path(file)}: {describe_hook(hook)}")


@app.command("list")
def list_(file: FileOption = None, json_: JsonFlag = False) -> None:
    """List the hooks of a declaration file with their indexes.

    Examples:

        belt hooks list
        belt hooks list --file examples/hooks.toml
    """
    from belt.declaring.hookfile import read_hooks, resolve_path  # start-up: pydantic

    hooks = read_hooks(file)
    output.listing(
        json_,
        [shown(hook) for hook in hooks],
        ["#", "event", "type", "handler", "async", "timeout", "default"],
        [
            [index, hook.event.value, hook.type.value, shown(hook).get("handler") or "-"]
            + ["yes" if hook.runs_async else ("ignored" if hook.async_ else "no")]
            + [f"{hook.effective_timeout()}s"]
            + [hook.default_resolution.value if hook.default_resolution else ""]
            for index, hook in enumerate(hooks)
        ],
        empty=f"no hooks in {resolve_path(file)}",
    )


@app.command()
def remove(
    index: Annotated[int, argument("Index as `belt hooks list` shows it.")], file: FileOption = None
) -> None:
    """Remove one hook from a declaration file.

    Examples:

        belt hooks remove 0
    """
    from belt.declaring.hookfile import remove_hook, resolve_path  # start-up: pydantic

    hook = remove_hook(index, file)
    output.success(f"removed hooks[{index}] from {resolve_path(file)}: {describe_hook(hook)}")


@app.command()
def export(
    file: FileOption = None,
    format_: Annotated[FormatChoice, option("Output format.", "--format")] = FormatChoice.json,
) -> None:
    """Print the declaration file's hooks as JSON or TOML, ready to paste or pipe.

    Examples:

        belt hooks export --format toml
    """
    from belt.declaring.hookfile import read_hooks, render  # start-up: pydantic

    output.block(render(read_hooks(file), format_.value).rstrip("\n"))


def shown(hook: LifecycleHookConfig) -> dict[str, object]:
    """A hook's declaration as printed: a webhook named by its host only (never credentials)."""
    from belt.deliveries.effects import handler_label  # start-up: pydantic

    wire = hook.to_wire()
    if hook.handler is not None and hook.type.value == "webhook":
        wire["handler"] = handler_label(hook.type, hook.handler)
    return wire


def describe_hook(config: LifecycleHookConfig) -> str:
    """A one-line human description of a hook declaration."""
    hook = shown(config)
    ignored = "(async ignored: a gate always holds the run)" if hook["type"] == "gate" else ""
    parts = [
        f"{hook['event']} → {hook['type']}",
        hook.get("handler"),
        hook.get("async") and (ignored or "(async)"),
        "timeout" in hook and f"timeout {hook['timeout']}s",
        "default_resolution" in hook and f"default {hook['default_resolution']}",
    ]
    return " ".join(str(part) for part in parts if part)
