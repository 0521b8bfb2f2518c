"""``belt init``: a working start in a directory, never written over a file that is there.

Each file (``plan``) passes as written. The templates are the files in ``templates/<dialect>/``
(``.tmpl`` keeps the tools that read belt's own code away from them); a README's ``{{name}}``
markers are filled in here.
"""

from __future__ import annotations

import os
import re
import shlex
from contextlib import suppress
from dataclasses import dataclass
from enum import StrEnum
from importlib.resources import files as resource_files
from pathlib import Path
from typing import Any, NamedTuple

from belt.errors import Conflict, InvalidInput

# What the hook is written on: a ``py:`` function, or that function served over HTTP.
Framework = StrEnum("Framework", "py stdlib starlette")


class Planned(NamedTuple):
    """One file ``belt init`` writes: its name in the directory, its text, what it is."""

    name: str
    text: str
    about: str


class Step(NamedTuple):
    """One of the next commands: what to type in the directory written, and why."""

    command: str
    why: str


NEXT: dict[str, tuple[Step, ...]] = {
    "platform": (
        Step("belt test .", "the scenario and its expectations: PASS"),
        Step(
            "belt check py:handler.py:decide --props props.toml",
            "generated payloads, path attacks first",
        ),
        Step("pytest", "the tests written with belt's pytest plugin"),
        Step(
            "belt trigger agent.tool_call --to py:handler.py:decide "
            '--set data.arguments=\'{"path": "/tmp/../etc/passwd"}\'',
            "one payload, and what the platform would do with the answer",
        ),
    ),
    "nexus": (  # dialect: belt init --nexus writes a Nexus start
        Step("belt test .", "the scenario and its expectations: PASS"),
        Step(
            "belt check --executor verify=py:tool.py:verify",
            "generated task inputs on the four boundaries",
        ),
        Step("pytest", "the tests written with belt's pytest plugin"),
    ),
}
"""The commands a README (and ``belt init`` itself) suggests, run from the directory; a test
runs each of them there on what was written."""

SHORT = 56
"""The longest command a README shows with its comment beside it."""


def plan(*, nexus: bool, framework: Framework, name: str) -> list[Planned]:
    """The files of a start, in the order they are written; ``name`` titles the README."""
    dialect = "nexus" if nexus else "platform"  # dialect: what --nexus asks for
    stem = "tool" if nexus else "handler"
    hook = "the hook's executor tool, `verify`" if nexus else "the hook, `decide`"
    served = {
        Framework.py: "a `py:` function",
        Framework.stdlib: "served by the standard library's http.server",
        Framework.starlette: "served by a Starlette (ASGI) app",
    }[framework]
    files = {
        f"{stem}.py": f"{hook} ({served})",
        "scenario.toml": "a scripted run with expectations (`belt test`)",
        "props.toml": "what every answer must be (`belt check --props`)",
        f"test_{stem}.py": "the tests for pytest, with `belt_scenario`",
        "README.md": "what each file is, and the next commands",
    }
    if nexus:  # properties speak of the inference.sh decisions
        del files["props.toml"]
    fields = {
        "name": name,
        "files": "\n".join(f"| `{file}` | {about} |" for file, about in files.items()),
        "next": _commands(NEXT[dialect]),
        "serve": _template(dialect, f"serve-{framework}.md").rstrip("\n"),
    }
    template = {f"{stem}.py": f"{stem}-{framework}.py"}
    return [
        Planned(file, _fill(_template(dialect, template.get(file, file)), fields), about)
        for file, about in files.items()
    ]


@dataclass(frozen=True)
class Written:
    """What ``init`` wrote: the directory as given, its files, and the commands to run next."""

    directory: Path
    dialect: str
    framework: Framework
    files: list[Planned]
    next: list[str]

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document."""
        return {
            "directory": str(self.directory),
            "dialect": self.dialect,
            "framework": self.framework.value,
            "files": [{"path": str(self.directory / f.name), "about": f.about} for f in self.files],
            "next": self.next,
        }


def init(*, directory: Path, nexus: bool = False, framework: Framework = Framework.py) -> Written:
    """Write a start into ``directory`` (made when missing). A file that would be written and
    exists already is Conflict (exit 4) and nothing is written; a directory that is a file is
    InvalidInput (exit 5), as is one that cannot be made or written in."""
    chain = (directory, *directory.parents)
    made = [p for p in reversed(chain) if not os.path.lexists(p)]  # outermost first
    nearest = next((p for p in chain if os.path.lexists(p)), directory)
    if os.path.lexists(nearest) and not nearest.is_dir():
        what = "it" if nearest == directory else str(nearest)
        raise InvalidInput(f"{directory}: {what} is a file, not a directory")
    name = directory.resolve().name or "hook"
    planned = plan(nexus=nexus, framework=framework, name=name)
    there = [directory / p.name for p in planned if os.path.lexists(directory / p.name)]
    if there:
        raise _exists(there)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"{directory}: cannot make the directory: {exc.strerror}") from None
    written: list[Path] = []
    path = directory
    try:
        for item in planned:
            path = directory / item.name
            with open(path, "x", encoding="utf-8") as handle:  # "x": never over a file
                written.append(path)
                handle.write(item.text)
    except OSError as exc:
        for path in reversed(written):
            path.unlink(missing_ok=True)
        for made_directory in reversed(made):
            with suppress(OSError):  # something else is in it now: it stays
                made_directory.rmdir()
        if isinstance(exc, FileExistsError):  # it appeared since the check
            raise _exists([path]) from None
        raise InvalidInput(
            f"{path}: cannot write it: {exc.strerror}; nothing was written"
        ) from None
    here = False
    with suppress(OSError):
        here = directory.resolve() == Path.cwd().resolve()
    steps = [] if here else [f"cd {shlex.quote(str(directory))}"]
    return Written(
        directory=directory,
        dialect=(dialect := "nexus" if nexus else "platform"),  # dialect: what --nexus asked for
        framework=framework,
        files=planned,
        next=steps + [step.command for step in NEXT[dialect]],
    )


def _exists(paths: list[Path]) -> Conflict:
    names = ", ".join(str(p) for p in paths)
    return Conflict(
        f"{names}: already there; belt init writes no file over another, so it wrote nothing",
        hint="give another directory (belt init DIR), or move the file away",
    )


def _template(dialect: str, name: str) -> str:
    return (resource_files(__name__) / "templates" / dialect / f"{name}.tmpl").read_text(
        encoding="utf-8"
    )


def _commands(steps: tuple[Step, ...]) -> str:
    """The commands as lines of a shell block, each with why as a comment: beside it, or on the
    line before one too long to have it beside."""
    short = [step.command for step in steps if len(step.command) <= SHORT]
    width = max(map(len, short), default=0)
    return "\n".join(
        f"{step.command.ljust(width)}  # {step.why}"
        if step.command in short
        else f"# {step.why}:\n{step.command}"
        for step in steps
    )


def _fill(text: str, fields: dict[str, str]) -> str:
    """``text`` with each ``{{name}}`` replaced by its field (a marker without one is a bug)."""
    return re.sub(r"\{\{(\w+)\}\}", lambda match: fields[match.group(1)], text)
