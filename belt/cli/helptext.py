"""Help texts as belt writes them: prose that wraps at the terminal's width (typer keeps a
docstring's line breaks in every paragraph but the first), examples that keep their lines.
"""

from __future__ import annotations

import inspect
from typing import Any

EXAMPLES_HEADING = "Examples:"
KEEP = "\b"
"""click's mark for a paragraph whose lines its plain formatter must not rewrap."""


def reflow(text: str) -> str:
    """``text``, each prose paragraph on one line; indented blocks and lists kept (idempotent)."""
    head, cut, tail = text.partition("\f")
    paragraphs = [_reflow_paragraph(p) for p in inspect.cleandoc(head).split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p) + cut + tail


def _reflow_paragraph(paragraph: str) -> str:
    lines = [line for line in paragraph.split("\n") if line.strip() != KEEP]
    if not lines:
        return ""
    if lines[0][:1].isspace():
        return "\n".join(lines)  # an indented block: examples, a table
    items: list[str] = []
    listing = False
    for line in lines:
        bullet = line.lstrip().startswith("- ")
        listing = listing or bullet
        if not items or bullet or (line[:1].isspace() and not listing):
            items.append(line.rstrip())  # a list item, or an indented line under a heading
        else:
            items[-1] += " " + line.strip()
    return "\n".join(items)


def keep_lines(text: str) -> str:
    """``text`` marked so that click's plain formatter keeps the lines of indented paragraphs and
    lists (rich help keeps them unmarked, and would print the mark as a blank line)."""

    def kept(paragraph: str) -> bool:
        first = paragraph.lstrip("\n")
        return first[:1].isspace() or first.startswith("- ") or "\n" in first.strip("\n")

    return "\n\n".join(f"{KEEP}\n{p}" if kept(p) else p for p in text.split("\n\n"))


def tidy(command: Any) -> None:
    """Reflow ``command``'s help and move its examples to the epilog, so the help ends with them."""
    if command.help:
        command.help = reflow(command.help)
        head, heading, tail = command.help.partition(f"\n\n{EXAMPLES_HEADING}")
        if heading and not command.epilog:
            # The epilog's first line is blank so that rich help, which dedents the epilog by
            # the margin of its lines after the first, keeps the examples indented.
            command.help, command.epilog = head, f"\n{EXAMPLES_HEADING}{tail}"


def examples(command: Any) -> list[str]:
    """The command lines of a command's examples (the indented lines after their heading)."""
    help_text = f"{command.help or ''}\n\n{command.epilog or ''}"
    _, heading, rest = help_text.partition(EXAMPLES_HEADING)
    if not heading:
        return []
    return [line.strip() for line in rest.split("\n") if line[:1].isspace() and line.strip()]
