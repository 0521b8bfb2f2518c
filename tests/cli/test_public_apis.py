"""belt stands on the public API of its command-line libraries and of OpenTelemetry: no module
or name of theirs whose name starts with ``_`` is imported, nor a name a public module of theirs
only imported from a private one (what a type checker calls a name it does not export); no
private attribute of their objects is read or written, and none of their methods is replaced on
a class or an object (read from the source, belt/ and tests/ alike), so an ordinary upgrade of
them cannot break belt."""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
import typer.core

ROOT = Path(__file__).parents[2]
LIBRARIES = ("typer", "click", "uvicorn", "starlette", "httpx", "httpcore", "opentelemetry")
SOURCES = sorted(
    path for folder in ("belt", "tests") for path in (ROOT / folder).rglob("*.py") if path.is_file()
)


def private(name: str) -> bool:
    """A name its library keeps to itself: ``_name``, not a dunder."""
    return name.startswith("_") and not name.endswith("__")


def sample_objects() -> list[Any]:
    """A command group, a command, an option, an argument and a context, as typer builds them."""
    app = typer.Typer(add_completion=False)

    @app.command()
    def one(name: Annotated[str, typer.Argument()], loud: bool = False) -> None:
        """One."""

    @app.command()
    def two() -> None:
        """Two."""

    group = typer.main.get_group(app)
    ctx = group.make_context("sample", ["one", "x"])
    command = group.get_command(ctx, "one")
    assert command is not None
    return [app, group, command, *command.params, command.get_help_option(ctx), ctx]


def typer_names() -> tuple[set[str], set[str]]:
    """(the private attribute names of typer's objects, the names of the methods of its
    commands and parameters)."""
    objects = sample_objects()
    names = {name for obj in objects for name in [*dir(type(obj)), *vars(obj)]}
    data = {name for obj in objects for name in vars(obj)}
    methods = {
        name
        for obj in objects
        if isinstance(obj, (typer.core.TyperCommand, typer.core.TyperGroup))
        or isinstance(obj, (typer.core.TyperOption, typer.core.TyperArgument))
        for name in dir(type(obj))
        if name not in data
        and not name.startswith("__")
        and callable(getattr(type(obj), name))
        and not isinstance(getattr(type(obj), name), type)
    }
    return {name for name in names if private(name)}, methods


PRIVATE_ATTRIBUTES, METHODS = typer_names()


def library_modules(tree: ast.AST) -> dict[str, str]:
    """The names a module binds to one of ``LIBRARIES`` (or a module in it): {name: module}."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
    return bound


def dotted(node: ast.AST) -> list[str]:
    """``a.b.c`` as ["a", "b", "c"] (empty when it does not start with a name)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else []


@functools.cache
def unexported(module: str) -> frozenset[str]:
    """The names the public ``module`` imports from a private module without exporting them
    (as ``from ._shared import name``, where ``from ._shared import name as name`` exports)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return frozenset()
    with open(spec.origin, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    exported: set[str] = set()
    hidden: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            exported |= {elt.value for elt in getattr(node.value, "elts", [])}
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            origin = node.module.split(".")
            if any(private(part) for part in origin):
                for alias in node.names:
                    if alias.asname is None or alias.asname != alias.name:
                        hidden.add(alias.asname or alias.name)
    return frozenset(hidden - exported)


def findings(source: str) -> Iterator[str]:
    """Each reach into a library's private parts in ``source``, as ``line: what``."""
    tree = ast.parse(source)
    bound = library_modules(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in LIBRARIES and any(private(part) for part in parts):
                    yield f"{line}: imports {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            parts = node.module.split(".")
            if parts[0] not in LIBRARIES:
                continue
            if any(private(part) for part in parts):
                yield f"{line}: imports from {node.module}"
            for alias in node.names:
                if private(alias.name):
                    yield f"{line}: imports {alias.name} from {node.module}"
                elif alias.name in unexported(node.module):
                    yield f"{line}: imports {alias.name}, which {node.module} does not export"
        elif isinstance(node, ast.Attribute):
            chain = dotted(node)
            if chain and chain[0] in bound and any(private(part) for part in chain[1:]):
                yield f"{line}: uses {'.'.join(chain)}"
            elif node.attr in PRIVATE_ATTRIBUTES:
                yield f"{line}: uses {node.attr}, a private attribute of typer's objects"
            if isinstance(node.ctx, ast.Store) and node.attr in METHODS:
                yield f"{line}: replaces the method {node.attr}"
        elif isinstance(node, ast.Call) and dotted(node.func)[-1:] in (["setattr"], ["MethodType"]):
            name = node.args[1] if len(node.args) > 1 else None
            if dotted(node.func)[-1] == "MethodType":
                yield f"{line}: binds a function as a method (MethodType)"
            elif isinstance(name, ast.Constant) and name.value in METHODS | PRIVATE_ATTRIBUTES:
                yield f"{line}: sets {name.value} with setattr"


def test_the_fence_sees_every_way_of_reaching_in() -> None:
    source = """
import typer._click
import typer
import click as c
from typer import _coercion
from typer._click.exceptions import NoArgsIsHelpError
from typer.core import _TyperParameter
from typer.completion import get_completion_script
from types import MethodType
typer._click.echo("x")
c._compat.x
ctx._protected_args
param.get_runtime_param = MethodType(lambda self: None, param)
command.get_help_option = lambda ctx: None
setattr(command, "parse_args", None)
"""
    found = [finding.split(": ", 1)[1] for finding in findings(source)]
    assert set(found) == {
        "imports typer._click",
        "imports from typer._click.exceptions",
        "imports _coercion from typer",
        "imports _TyperParameter from typer.core",
        "imports get_completion_script, which typer.completion does not export",
        "uses typer._click.echo",
        "uses typer._click",
        "uses c._compat.x",
        "uses c._compat",
        "uses _protected_args, a private attribute of typer's objects",
        "replaces the method get_runtime_param",
        "binds a function as a method (MethodType)",
        "replaces the method get_help_option",
        "sets parse_args with setattr",
    }


def test_public_use_is_not_a_finding() -> None:
    source = """
import typer
from typer.core import TyperGroup
from typer import BadParameter
from typer.completion import show_callback
command.help = "Text."
param.metavar = ""
param.callback = noted
self._cache = {}
typer.main.get_command(app)
"""
    assert list(findings(source)) == []


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_source_reaches_into_a_library(path: Path) -> None:
    found = list(findings(path.read_text(encoding="utf-8")))
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(found)
