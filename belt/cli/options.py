"""Options several command groups share, declared once."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from belt.errors import InvalidInput, UsageError


def option(help: str, *names: str, **settings: Any) -> Any:
    """``typer.Option``, its help first: an option declared in a line where it fits."""
    return typer.Option(*names, help=help, **settings)


def argument(help: str, **settings: Any) -> Any:
    """``typer.Argument``, its help first."""
    return typer.Argument(help=help, **settings)


VerboseFlag = Annotated[
    bool,
    option(
        "Show tracebacks for errors, and in transcripts the hook calls that changed nothing.",
        "--verbose",
        "-v",
    ),
]
JsonFlag = Annotated[bool, option("Print JSON.", "--json")]
ApiOption = Annotated[
    str | None,
    option(
        "Talk to this platform API (or `belt serve`) instead of the local store.",
        "--api",
        envvar="BELT_API_URL",
        metavar="URL",
    ),
]
ApiKeyOption = Annotated[
    str | None,
    option(
        "Bearer key for --api (default: $INFSH_API_KEY, else $INFERENCE_API_KEY).",
        "--api-key",
        metavar="KEY",
    ),
]
Executors = Annotated[
    list[str] | None,
    option(
        "Serve Nexus hook tasks in-process: NAME=TARGET (cmd:COMMAND, py:MODULE:FUNC, URL).",
        "--executor",
    ),
]
Routes = Annotated[
    list[str] | None,
    option(
        "Deliver webhooks whose URL starts with URL_PREFIX to TARGET instead: "
        "py:MODULE:FUNC, or a URL that takes the prefix's place.",
        "--route",
        metavar="URL_PREFIX=TARGET",
    ),
]


def finite(value: float | None) -> float | None:
    """A float option's callback: NaN and the infinities are a usage error naming the option."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def passed_on(ctx: typer.Context, *unlike: str) -> dict[str, Any]:
    """The command's parameters but ``unlike``, for a core function taking them by name."""
    return {name: value for name, value in ctx.params.items() if name not in unlike}


def moment_option(text: str | None, option: str) -> datetime | None:
    """An RFC 3339 option (``--clock``, ``--at``) as an aware datetime, or a usage error."""
    if text is None:
        return None
    from belt.store.clock import parse_rfc3339  # start-up: belt version

    try:
        return parse_rfc3339(text, option)
    except InvalidInput as exc:
        raise UsageError(exc.message) from None


OtlpOption = Annotated[
    str | None,
    option(
        "Export hook traces over OTLP/HTTP to this collector (its base URL, as "
        "OTEL_EXPORTER_OTLP_ENDPOINT; that variable turns tracing on too). Needs belt[otel].",
        "--otlp",
        metavar="URL",
    ),
]
TraceFileOption = Annotated[
    Path | None,
    option(
        "Append hook traces to FILE as OTLP JSON lines, without a collector. Needs belt[otel].",
        "--trace",
        metavar="FILE",
        dir_okay=False,
    ),
]


def start_tracing(otlp: str | None, trace_file: Path | None) -> None:
    """Turn tracing on when ``--otlp``, ``--trace`` or an OTEL_EXPORTER_OTLP_* variable asks for
    it (docs/tracing.md); without them nothing of OpenTelemetry is imported."""
    if otlp is not None and not otlp.startswith(("http://", "https://")):
        raise UsageError(f"--otlp: {otlp!r} is not an http:// or https:// URL")
    if trace_file is not None:
        from belt.check.writable import require_writable_file  # start-up: belt version

        require_writable_file(trace_file, option="--trace")  # exit 5, before anything runs
    from belt.outgoing import tracing  # start-up: belt version

    tracing.start(otlp=otlp, trace_file=trace_file)
