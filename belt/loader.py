"""Loading a user's Python callable from a ``MODULE:FUNC`` reference.

Shared by everything that calls user code: ``belt serve --handler``, executor ``py:`` tools, and
in-process hook handlers. ``option`` names where the reference came from, so an error message
says which option to fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from belt.errors import InvalidInput, NotFound, UsageError


def load_callable(spec: str, *, option: str = "--handler") -> Callable[..., Any]:
    """Import ``MODULE:FUNC`` (a dotted module, or a path to a .py file) and return the callable."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(
            f"{option} {spec!r}: expected MODULE:FUNC (e.g. examples/handler.py:decide)"
        )
    if module_name.endswith(".py") or "/" in module_name:
        module = _import_file(Path(module_name), option)
    else:
        # Like `python -m`, let a module in the working directory be found.
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise NotFound(f"{option}: no module named {module_name!r}") from exc
            raise InvalidInput(f"{option}: importing {module_name} failed: {exc}") from exc
        except Exception as exc:
            raise InvalidInput(f"{option}: importing {module_name} failed: {exc}") from exc
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise NotFound(f"{option}: {module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise InvalidInput(f"{option}: {spec} is not callable")
    func: Callable[..., Any] = found
    return func


def _import_file(path: Path, option: str) -> Any:
    if not path.is_file():
        raise NotFound(f"{option}: {path}: no such file")
    name = f"belt_handler_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InvalidInput(f"{option}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise InvalidInput(f"{option}: importing {path} failed: {exc}") from exc
    return module
