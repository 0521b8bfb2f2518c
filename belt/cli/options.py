"""Options several command groups share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

VerboseFlag = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Show tracebacks for errors, and in transcripts the hook calls that changed nothing.",
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
ApiOption = Annotated[
    str | None,
    typer.Option(
        "--api",
        envvar="BELT_API_URL",
        metavar="URL",
        help="Talk to this platform API (or `belt serve`) instead of the local store.",
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        metavar="KEY",
        show_default=False,
        help="Bearer key for --api (default: $INFSH_API_KEY, else $INFERENCE_API_KEY).",
    ),
]
Executors = Annotated[
    list[str] | None,
    typer.Option(
        "--executor",
        help="Serve Nexus hook tasks in-process: NAME=TARGET (cmd:COMMAND, py:MODULE:FUNC, URL).",
        show_default=False,
    ),
]
Routes = Annotated[
    list[str] | None,
    typer.Option(
        "--route",
        metavar="URL_PREFIX=TARGET",
        help="Deliver webhooks whose URL starts with URL_PREFIX to TARGET instead: "
        "py:MODULE:FUNC, or a URL that takes the prefix's place.",
        show_default=False,
    ),
]
