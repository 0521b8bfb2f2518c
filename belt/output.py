"""All terminal rendering: the only module that imports rich.

Human output reads well on a terminal and plainly when piped; ``--json`` output is plain JSON.
Colour follows ``NO_COLOR`` and TTY detection.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def _wants_colour(stream: Any) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def console(*, stderr: bool = False) -> Console:
    """A rich console bound to stdout or stderr, plain when not a colour terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    colour = _wants_colour(stream)
    return Console(
        file=stream,
        no_color=not colour,
        highlight=False,
        soft_wrap=not colour,
        force_terminal=colour or None,
        emoji=False,
    )


def print_json(data: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def print_json_line(data: Any) -> None:
    """Print one JSON object on one line (streams)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def echo(text: str = "", *, stderr: bool = False) -> None:
    """Print a plain line to stdout (or stderr)."""
    stream = sys.stderr if stderr else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def styled(text: str, style: str, *, stderr: bool = False) -> None:
    """Print one line in a rich style when colour is on, plainly otherwise."""
    stream = sys.stderr if stderr else sys.stdout
    if not _wants_colour(stream):
        echo(text, stderr=stderr)
        return
    from rich.text import Text

    console(stderr=stderr).print(Text(text, style=style))


def error(message: str, *, hint: str | None = None) -> None:
    """Print an error line (and an optional hint) on stderr."""
    styled(f"error: {message}", "bold red", stderr=True)
    if hint:
        styled(f"hint: {hint}", "yellow", stderr=True)


def warning(message: str) -> None:
    """Print a warning line on stderr."""
    styled(f"warning: {message}", "yellow", stderr=True)


def success(message: str) -> None:
    """Print a success line on stdout."""
    styled(message, "green")


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    """Render rows as a table on a terminal, or as aligned plain text when piped."""
    cells = [["" if value is None else str(value) for value in row] for row in rows]
    if not _wants_colour(sys.stdout):
        if title:
            echo(title)
        widths = [len(c) for c in columns]
        for row in cells:
            widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
        lines = [list(columns), *cells]
        for line in lines:
            echo("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
        return
    from rich.table import Table

    rich_table = Table(title=title, header_style="bold", show_edge=False, pad_edge=False)
    for column in columns:
        rich_table.add_column(column)
    for row in cells:
        rich_table.add_row(*row)
    console().print(rich_table)


def key_values(pairs: Sequence[tuple[str, Any]], *, title: str | None = None) -> None:
    """Render labelled values, one per line."""
    if title:
        styled(title, "bold")
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        if value is None or value == "":
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        echo(f"{key.ljust(width)}  {text}")


def lines(rows: Sequence[tuple[str, str]]) -> None:
    """Print (text, style) lines: styled on a colour terminal, plain otherwise."""
    if not _wants_colour(sys.stdout):
        for text, _style in rows:
            echo(text)
        return
    from rich.text import Text

    out = console()
    for text, style in rows:
        out.print(Text(text, style=style or ""))
