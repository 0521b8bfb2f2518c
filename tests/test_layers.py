"""belt's own imports point one way (DESIGN.md, "Layers point one way") and form no cycle.

Each module may import only modules of a lower layer, or of its own package. Imports inside
functions count as much as those at the top of a module; imports under ``if TYPE_CHECKING:``
count for the order (a type is a dependency too) but not for cycles (they never run). Only the
store and the records built on it write to the store (DESIGN.md: records has one owner).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import belt

ROOT = Path(belt.__file__).parent

LAYERS: dict[str, int] = {
    "belt.errors": 0,
    "belt.display": 1,
    "belt.display.text": 1,
    "belt.outgoing": 1,
    "belt.outgoing.tracing": 1,
    "belt.paths": 1,
    "belt.reading": 1,
    "belt.reading.didyoumean": 1,
    "belt.reading.strictjson": 1,
    "belt.scaffold": 1,
    "belt.usercode": 1,
    "belt.usercode.loader": 1,
    "belt.outgoing.signing": 2,
    "belt.reading.inputs": 2,
    "belt.reading.matching": 2,
    "belt.store": 2,
    "belt.usercode.supervisor": 2,
    "belt.wire": 2,
    "belt.declaring": 3,
    "belt.declaring.declarations": 3,
    "belt.deliveries": 3,
    "belt.deliveries.effects": 3,
    "belt.wire.samples": 3,
    "belt.outgoing.transport": 4,
    "belt.records": 4,
    "belt.declaring.hookfile": 5,
    "belt.dialects": 5,
    "belt.executor": 5,
    "belt.handlers": 5,
    "belt.rules": 5,
    "belt.rules.approvals": 5,
    "belt.rules.policy": 5,
    "belt.deliveries.replay": 6,
    "belt.deliveries.trigger": 6,
    "belt.engine": 6,
    "belt.display.render": 7,
    "belt.dialects.nexus": 8,
    "belt.dialects.platform": 8,
    "belt.check": 9,
    "belt.declaring.doctor": 9,
    "belt.deliveries.keep": 9,
    "belt.emulator": 9,
    "belt.backends": 10,
    "belt.backends.remote": 10,
    "belt.server": 10,
    "belt.backends.backend": 11,
    "belt.declaring.rhoconfig": 12,
    "belt.display.output": 12,
    "belt.testing": 13,
    "belt.cli": 14,
    "belt.__main__": 15,
}
"""The layer of each part: errors, paths, the dialect interface ← wire, store ← records ←
handlers, executor, policy ← engine, trigger, replay ← render ← each dialect's package ← the
emulator and the doctor ← server, remote ← the backend ← rho's configuration (through the backend)
← the test framework (``belt test`` and the pytest plugin) ← cli (``output`` and ``render`` for
the front ends only)."""

CLI_ONLY = ("belt.display.output", "belt.display.render")
LIVE_LINES = "belt.server.live"
"""The server's live lines: the one part of the server that prints (DESIGN.md)."""
FRONT_ENDS = ("belt.cli", "belt.testing", "belt.dialects.platform", "belt.dialects.nexus")
"""What renders for people: the CLI, the pytest plugin (its failure reports), and a dialect (the
transcript of its runs)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


@pytest.fixture(autouse=True, scope="module")
def belt_home() -> None:
    """These tests read belt's sources and run none of belt: no state directory per test."""


@cache
def tree_of(module: str) -> ast.Module:
    """The syntax tree of one of belt's modules, parsed once per process."""
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def part_of(module: str) -> str:
    """The entry of LAYERS a module belongs to (its longest matching prefix)."""
    found = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    if not found:
        raise AssertionError(f"{module} has no layer: add it to LAYERS in {__file__}")
    return max(found, key=len)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py" if module in MODULES else False


def absolute(module: str, node: ast.ImportFrom, package: bool) -> str | None:
    """The absolute name ``from … import`` reads from, relative imports resolved against
    ``module`` (a package's ``.`` is the package itself)."""
    if node.level == 0:
        return node.module
    parts = module.split(".")
    base = parts if package else parts[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def dynamic_import(node: ast.Call) -> str | None:
    """The literal module name of ``importlib.import_module("…")`` or ``__import__("…")``."""
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )
    if named and node.args and isinstance(node.args[0], ast.Constant):
        value = node.args[0].value
        return value if isinstance(value, str) else None
    return None


def imports_in(
    module: str, source: str | ast.Module, *, package: bool = False
) -> list[tuple[str, int, bool]]:
    """(imported belt module, line, only for type checking) for every import in ``source``, the
    text (or tree) of ``module``: at the top, in functions, relative, and by ``importlib``."""
    tree = ast.parse(source) if isinstance(source, str) else source
    typing_only: set[int] = set()
    found: list[tuple[str, Any]] = []  # (name, the import or call naming it)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.If) and is_type_checking(node):
            for child in node.body:
                for inner in ast.walk(child):
                    typing_only.add(id(inner))
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, node, package)
            for alias in node.names if base else ():
                candidate = f"{base}.{alias.name}"
                names.append(candidate if candidate in MODULES else str(base))
        elif isinstance(node, ast.Call) and (name := dynamic_import(node)):
            names = [name]
        for name in names:
            if name == "belt" or name.startswith("belt."):
                found.append((name, node))
    return [(name, node.lineno, id(node) in typing_only) for name, node in found]


@cache
def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """``imports_in`` of one of belt's modules, found once per process."""
    return imports_in(module, tree_of(module), package=is_package(module))


def against_the_order(module: str, imports: list[tuple[str, int, bool]]) -> list[str]:
    """The imports of ``module`` that point up or sideways, each as a line of the report."""
    part = part_of(module)
    wrong = []
    for imported, line, _ in imports:
        if imported == "belt":
            continue
        target = part_of(imported)
        if target == part or (module == LIVE_LINES and imported == "belt.display.output"):
            continue
        if LAYERS[target] >= LAYERS[part]:
            wrong.append(f"line {line}: {imported} (layer {LAYERS[target]})")
        elif target in CLI_ONLY and part not in FRONT_ENDS:
            wrong.append(f"line {line}: {imported} is for the CLI only")
    return wrong


def import_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle of ``graph`` (module → modules it imports at run time), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in graph.get(module, []):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target in graph and state.get(target) is None and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in graph:
        if state.get(module) is None and (cycle := visit(module)):
            return cycle
    return None


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        if module != "belt":
            part_of(module)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "belt"))
def test_imports_point_down(module: str) -> None:
    wrong = against_the_order(module, imports_of(module))
    part = part_of(module)
    assert not wrong, f"{module} (layer {LAYERS[part]}) imports against the order: {wrong}"


DIALECT_PACKAGES = ("belt.dialects.platform", "belt.dialects.nexus")
ONE_DIALECTS = {"belt.emulator.conversation": "belt.dialects.platform.agent_loop"}
"""A module outside the dialects' packages that is one dialect's by nature, and what of it it
imports: the emulator drives platform agents."""


def test_only_the_dialects_import_their_internals() -> None:
    """Outside its package a dialect is asked through ``belt.dialects`` (docs/dialects.md)."""
    found = [
        f"{module} line {line}: {imported}"
        for module in MODULES
        if not module.startswith(DIALECT_PACKAGES) and module != "belt"
        for imported, line, _ in imports_of(module)
        if imported.startswith(DIALECT_PACKAGES) and ONE_DIALECTS.get(module) != imported
    ]
    assert not found, f"dialect internals imported outside the dialects: {found}"


def test_there_are_no_import_cycles() -> None:
    graph = {
        module: sorted({name for name, _, typing in imports_of(module) if not typing} - {module})
        for module in MODULES
    }
    cycle = import_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


# -- the checker itself can fail: synthetic sources that break each rule ------------------------


@pytest.mark.parametrize(
    ("module", "source", "package"),
    [
        ("belt.store.store", "from belt.engine.simulation import Simulation\n", False),
        ("belt.store.store", "import belt.engine.simulation\n", False),
        ("belt.store.store", "def f():\n    from belt.engine import api\n", False),
        ("belt.store.store", "from ..engine import simulation\n", False),
        ("belt.store", "from ..engine.simulation import Simulation\n", True),
        (
            "belt.store.store",
            "import importlib\nimportlib.import_module('belt.engine.entrypoints')\n",
            False,
        ),
        (
            "belt.store.store",
            "from importlib import import_module\nimport_module('belt.cli')\n",
            False,
        ),
        ("belt.store.store", "__import__('belt.server.app')\n", False),
        (
            "belt.store.store",
            "if TYPE_CHECKING:\n    from belt.engine.entrypoints import show_run\n",
            False,
        ),
        ("belt.records.runs", "from belt.display.output import console\n", False),
        ("belt.engine.entrypoints", "from belt.server.app import create_app\n", False),
    ],
)
def test_the_checker_finds_an_import_against_the_order(
    module: str, source: str, package: bool
) -> None:
    imports = imports_in(module, source, package=package)
    assert imports, f"the checker saw no import in {source!r}"
    assert against_the_order(module, imports), f"{source!r} in {module} passed the checker"


@pytest.mark.parametrize(
    ("module", "source", "package"),
    [
        ("belt.store.store", "from .files import read_bytes\n", False),
        ("belt.store", "from .store import Store\n", True),
        ("belt.engine.entrypoints", "from ..records import runs\n", False),
        (
            "belt.engine.entrypoints",
            "import importlib\nimportlib.import_module('belt.store')\n",
            False,
        ),
        ("belt.cli.sim", "from belt.display.output import console\n", False),
        ("belt.server.live", "from belt.display.output import console\n", False),
    ],
)
def test_the_checker_lets_an_import_down_the_order_through(
    module: str, source: str, package: bool
) -> None:
    imports = imports_in(module, source, package=package)
    assert imports and not against_the_order(module, imports)


def test_relative_imports_resolve_to_the_module_they_name() -> None:
    assert imports_in("belt.engine.entrypoints", "from ..records.runs import RUN\n") == [
        ("belt.records.runs", 1, False)
    ]
    assert imports_in("belt.store", "from . import files\n", package=True) == [
        ("belt.store.files", 1, False)
    ]


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"belt.a": ["belt.b"], "belt.b": ["belt.c"], "belt.c": ["belt.a"], "belt.d": []}
    assert import_cycle(graph) == ["belt.a", "belt.b", "belt.c", "belt.a"]
    assert import_cycle({"belt.a": ["belt.b"], "belt.b": []}) is None


# -- store writes: the records own them -------------------------------------------------------

STORE_WRITES = frozenset(
    {
        "create",
        "write",
        "update",
        "merge",
        "link",
        "link_all",
        "unlink",
        "append",
        "append_group",
        "write_private",
        "tag",
        "untag",
    }
)
"""The methods of ``belt.store.Store`` that change what is stored."""
STORE_OWNERS = ("belt.records", "belt.store")
"""The parts that may write to the store: the store itself, and the records built on it."""


def store_writes_in(source: str | ast.Module) -> list[str]:
    """Each call of a writing method on a store (``store.…``, ``self.store.…``) in ``source``
    (a text or its tree), as a line of the report."""
    found = []
    for node in ast.walk(ast.parse(source) if isinstance(source, str) else source):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        named = (isinstance(receiver, ast.Name) and receiver.id == "store") or (
            isinstance(receiver, ast.Attribute) and receiver.attr == "store"
        )
        if named and node.func.attr in STORE_WRITES:
            found.append(f"line {node.lineno}: store.{node.func.attr}")
    return found


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m != "belt" and part_of(m) not in STORE_OWNERS)
)
def test_store_writes_go_through_the_records(module: str) -> None:
    writes = store_writes_in(tree_of(module))
    assert not writes, f"{module} writes to the store outside belt/records/: {writes}"


def test_the_checker_finds_a_store_write() -> None:
    source = "store.tag(TAG, run_id)\nself.store.merge(RUN, run_id, {})\nitems.append(1)\n"
    assert store_writes_in(source) == ["line 1: store.tag", "line 2: store.merge"]


def test_no_two_modules_share_a_file_name() -> None:
    """A file name says where a module is: outside ``__init__.py`` and the command modules of
    ``cli/`` (each named after its command), no two of belt's modules share one."""
    seen: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if path.name != "__init__.py" and not module.startswith("belt.cli."):
            seen.setdefault(path.name, []).append(module)
    assert {name: found for name, found in seen.items() if len(found) > 1} == {}


def test_the_top_of_belt_holds_only_its_base() -> None:
    """Every module but the exception root and the state directory sits in a part named for what
    it is for (docs/architecture.md)."""
    loose = sorted(path.name for path in ROOT.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py", "paths.py"]
