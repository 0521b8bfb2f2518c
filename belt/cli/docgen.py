"""Generate docs/cli.md: every command's help, as plain text, by walking the command tree.

Run ``python -m belt.cli.docgen > docs/cli.md`` (``make docs``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import typer

from belt.cli import app as belt_app
from belt.cli.helptext import keep_lines
from belt.cli.rho import app as rho_app
from belt.errors import REMOTE_ANSWERS

PAGE_WIDTH = {"terminal_width": 100, "max_content_width": 100}  # the page's, not a terminal's

HEADER = """\
# Command reference

Every command of `belt` and `rho`, with the help that `--help` prints. This page is generated
from the commands themselves (`make docs`); edit the help texts in `belt/cli/`, not this file.
"""


REMOTE_INTRO = """\
## Exit codes when a command talks to a remote

Every command that talks to a remote (`--api` on the interrupt, chat and rho commands,
`belt trigger --to URL`, `belt replay --to URL`, and `belt check` of a URL where nothing
answered) maps what came back to an exit code by one table (`REMOTE_ANSWERS` in
`belt/errors.py`); the error line names the URL (a webhook by its host) and the status.
"""


JSON_ERRORS = """\
## Errors with --json

With `--json`, a command that fails prints one JSON object on stdout, where its JSON would have
gone, and nothing else there; it exits with the same code as without `--json`:

```json
{"error":"s.toml: turns[0].usr: unknown key; did you mean 'user'?","code":5,"where":"s.toml"}
```

| key | what it holds |
|---|---|
| `error` | the message, as the error line says it |
| `code` | the exit code |
| `where` | the file (or option, for a mistake of the command line) the error is about, when known |
| `hint` | what to try, when belt has a hint |
| `problems` | the other findings (every further problem of a file), when there are any |

- The object is one line, so a stream (`--json` that prints one object per line: `belt test`,
  `belt interrupt watch`, `belt executor run`, `belt serve`) ends with it as its last line.
- A mistake of the command line (an unknown option, a bad value, a missing argument) is such
  an object too, with exit 2, when the command takes `--json` and the command line holds it.
- stderr keeps the plain line (`error: …`, then its problems and hint) for a person watching;
  a script reads stdout.
- A command whose JSON is the report of what it checked or ran (`hooks validate`, `hooks
  doctor`, `check`, `test`, `trigger`, `replay`, `sim run`) prints that report when what it
  checked fails, and exits with the code that says so. An error once its JSON document is
  printed (a `--junit-xml` file that cannot be written after `belt check`'s report, a
  `--to URL` that did not answer) is not printed as a second document: the report says what
  failed, and stderr has the line.
- Ctrl-C prints no object: one line on stderr, and exit 130.
"""


def walk(command: Any, name: str, parent: Any = None) -> Iterator[tuple[str, Any, Any]]:
    """Yield (command path, command, context) for a command and all its subcommands."""
    ctx = command.make_context(name, [], parent=parent, resilient_parsing=True, **PAGE_WIDTH)
    yield ctx.command_path, command, ctx
    if not hasattr(command, "list_commands"):
        return
    for sub_name in command.list_commands(ctx):
        sub = command.get_command(ctx, sub_name)
        if sub is not None and not sub.hidden:
            yield from walk(sub, sub_name, ctx)


def plain_help(command: Any, ctx: Any) -> str:
    """The help a command prints, without rich panels or colour."""
    command.rich_markup_mode = None
    help_text, epilog = command.help, command.epilog
    command.help = keep_lines(help_text) if help_text else help_text
    command.epilog = keep_lines(epilog) if epilog else epilog
    try:
        return str(command.get_help(ctx)).rstrip()
    finally:
        command.help, command.epilog = help_text, epilog


def render() -> str:
    """The whole of docs/cli.md."""
    answers = [f"| {int(kind.exit_code)} | {answer} |" for answer, _, kind in REMOTE_ANSWERS]
    remote = [REMOTE_INTRO, "| exit | what the remote answered |", "|---|---|", *answers, ""]
    sections = [HEADER, "\n".join(remote), JSON_ERRORS]
    for app, name in ((belt_app, "belt"), (rho_app, "rho")):
        for path, command, ctx in walk(typer.main.get_command(app), name):
            sections.append(f"## {path}\n\n```text\n{plain_help(command, ctx)}\n```\n")
    return "\n".join(sections)


if __name__ == "__main__":
    sys.stdout.write(render())
