"""belt's own imports point one way (DESIGN.md, "Layers point one way") and form no cycle.

Each module may import only modules of a lower layer, or of its own package. Imports inside
functions count as much as those at the top of a module; imports under ``if TYPE_CHECKING:``
count for the order (a type is a dependency too) but not for cycles (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import belt

ROOT = Path(belt.__file__).parent

LAYERS: dict[str, int] = {
    "belt.errors": 0,
    "belt.paths": 1,
    "belt.text": 1,
    "belt.loader": 1,
    "belt.strictjson": 1,
    "belt.inputs": 2,
    "belt.deadline": 2,
    "belt.wire": 2,
    "belt.store": 2,
    "belt.signing": 2,
    "belt.effects": 3,
    "belt.samples": 3,
    "belt.declarations": 3,
    "belt.records": 4,
    "belt.handlers": 5,
    "belt.executor": 5,
    "belt.policy": 5,
    "belt.hookfile": 5,
    "belt.engine": 6,
    "belt.trigger": 6,
    "belt.replay": 6,
    "belt.server": 7,
    "belt.remote": 7,
    "belt.backend": 8,
    "belt.rho": 8,
    "belt.render": 9,
    "belt.output": 9,
    "belt.cli": 10,
    "belt.testing": 10,
    "belt.__main__": 11,
}
"""The layer of each part: errors, paths ← wire, store ← records ← handlers, executor, policy ←
engine, trigger and replay ← server, remote and the backend ← cli and the pytest plugin
(``output`` and ``render`` for those only)."""

CLI_ONLY = ("belt.output", "belt.render")
LIVE_LINES = "belt.server.live"
"""The server's live lines: the one part of the server that prints (DESIGN.md)."""
FRONT_ENDS = ("belt.cli", "belt.testing")
"""What renders for people: the CLI, and the pytest plugin (its failure reports)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


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


def imports_of(module: str) -> list[tuple[str, int, bool]]:
    """(imported belt module, line, only for type checking) for every import in ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and is_type_checking(node):
            for child in node.body:
                for inner in ast.walk(child):
                    typing_only.add(id(inner))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                names.append(candidate if candidate in MODULES else node.module)
        for name in names:
            if name == "belt" or name.startswith("belt."):
                found.append((name, node.lineno, id(node) in typing_only))
    return found


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        if module != "belt":
            part_of(module)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "belt"))
def test_imports_point_down(module: str) -> None:
    part = part_of(module)
    wrong = []
    for imported, line, _ in imports_of(module):
        if imported == "belt":
            continue
        target = part_of(imported)
        if target == part or (module == LIVE_LINES and imported == "belt.output"):
            continue
        if LAYERS[target] >= LAYERS[part]:
            wrong.append(f"line {line}: {imported} (layer {LAYERS[target]})")
        elif target in CLI_ONLY and part not in FRONT_ENDS:
            wrong.append(f"line {line}: {imported} is for the CLI only")
    assert not wrong, f"{module} (layer {LAYERS[part]}) imports against the order: {wrong}"


def test_there_are_no_import_cycles() -> None:
    graph = {
        module: sorted({name for name, _, typing in imports_of(module) if not typing} - {module})
        for module in MODULES
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in graph.get(module, []):
            if state.get(target) == 1:
                cycle = stack[stack.index(target) :] + [target]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if target in graph and state.get(target) is None:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in graph:
        if state.get(module) is None:
            visit(module)


def test_the_layering_check_catches_an_import_against_the_order() -> None:
    # The checker itself must be able to fail: the store importing the engine is wrong.
    assert LAYERS[part_of("belt.engine.simulation")] > LAYERS[part_of("belt.store.store")]
    assert part_of("belt.records.interrupts") == "belt.records"
