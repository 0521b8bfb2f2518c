"""The commands the guides in docs/ show are real: each `belt` or `rho` line of their shell blocks
(and each `$ belt ...` line of their sessions) names commands and options that exist and take the
values given, and the shell blocks name no placeholder for an id (docs/cli.md is generated from
the commands themselves and is checked by tests/test_docs.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from belt.cli import app as belt_app
from belt.cli.rho import app as rho_app
from tests.cli.test_help import example_args, parsed, refused

DOCS = Path(__file__).parent.parent.parent / "docs"
GUIDES = sorted(path for path in DOCS.glob("*.md") if path.name != "cli.md")
PLACEHOLDERS = ("…", "RUN_ID", "CHAT_ID", " ID ", "ar_...", "re_...", "int_...")
PROGRAMS = {"belt": belt_app, "rho": rho_app}


def fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """Each fenced block of a page: its language, the line it starts on, its lines."""
    blocks: list[tuple[str, int, list[str]]] = []
    open_block: tuple[str, int, list[str]] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if open_block is None:
                open_block = (line[3:].strip(), number, [])
            else:
                blocks.append(open_block)
                open_block = None
        elif open_block is not None:
            open_block[2].append(line)
    return blocks


def commands_of(text: str, page: str) -> list[tuple[str, str, bool]]:
    """(where, command line, is it from a shell block) for every belt or rho command line of a
    page: the lines of its ``sh`` and ``bash`` blocks (continuations joined), and the ``$ ``
    lines of the sessions shown in its other blocks."""
    found = []
    for language, start, lines in fenced_blocks(text):
        shell = language in ("sh", "bash")
        for line in "\n".join(lines).replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            elif not shell:
                continue
            words = shlex.split(line, comments=True)
            while "|" in words:
                words = words[words.index("|") + 1 :]
            if words and words[0] in PROGRAMS:
                found.append((f"{page}:{start}", line, shell))
    return found


COMMANDS = [c for path in GUIDES for c in commands_of(path.read_text(), path.name)]


def test_the_guides_have_commands_to_check() -> None:
    where = {place.split(":")[0] for place, _, _ in COMMANDS}
    assert {"testing.md", "interrupts.md", "check.md", "scenarios.md"} <= where
    assert len(COMMANDS) >= 30


@pytest.mark.parametrize(("where", "line", "shell"), COMMANDS, ids=[c[1] for c in COMMANDS])
def test_each_command_of_the_guides_parses(where: str, line: str, shell: bool) -> None:
    command = line.split(" #")[0]
    words = shlex.split(command)
    while "|" in words:
        words = words[words.index("|") + 1 :]
    program = words[0]
    args = example_args(shlex.join(word for word in words if word != "&"), program)
    parsed(PROGRAMS[program], program, args)
    if shell:
        for placeholder in PLACEHOLDERS:
            assert placeholder not in command, (where, placeholder, line)


def test_the_commands_of_a_page_are_its_shell_lines_and_session_prompts() -> None:
    page = (
        "```sh\nbelt sim run examples/guarded-agent.toml \\\n  --json   # all of it\n"
        "echo done | belt registry add --kind rule --name x\n```\n"
        "```text\n$ belt test examples/tests\nbelt serve listening on ...\n```\n"
    )
    assert commands_of(page, "page.md") == [
        ("page.md:1", "belt sim run examples/guarded-agent.toml    --json   # all of it", True),
        ("page.md:1", "echo done | belt registry add --kind rule --name x", True),
        ("page.md:6", "belt test examples/tests", False),
    ]
    message = refused(belt_app, "belt", ["sim", "show", "--no-such-option"])
    assert message.startswith("No such option: --no-such-option")
