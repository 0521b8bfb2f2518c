"""Loading a user's Python callable from a ``MODULE:FUNC`` reference.

Whatever a module's top-level code raises (``SystemExit`` too) is an error naming the option it
came from. Inside ``import_deadline(seconds)`` an import that does not finish in time is an error,
left to run (Python cannot stop it), and refused at once ever after in the process. belt's own
heavy imports run in ``collector_paused``: the GC's passes over what lives as long as the process
would free nothing (a sixth of the CPU time of a one-scenario `belt test`).
"""

from __future__ import annotations

import contextvars
import functools
import gc
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from belt.errors import InvalidInput, NotFound, UsageError

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "belt_import_deadline", default=None
)
# Modules (by module_key) not imported again in this process (they overran their deadline here
# or in the supervisor's template), with what their import did.
_REFUSED: dict[str, str] = {}
# Dotted modules whose import returned: while in sys.modules they need no thread or deadline.
_WHOLE: set[str] = set()


def module_key(reference: str) -> str:
    """What ``MODULE:FUNC`` is known by: the path of a file module, the name of a dotted one."""
    module = reference.removeprefix("py:").partition(":")[0]
    return str(Path(module)) if is_file_reference(module) else module


def refuse(key: str, reason: str) -> None:
    """Refuse every later import of the module ``key`` in this process, saying why."""
    _REFUSED.setdefault(key, reason)


def refusals() -> dict[str, str]:
    """The modules refused (``refuse``), with why."""
    return dict(_REFUSED)


@contextmanager
def import_deadline(seconds: float) -> Iterator[None]:
    """Give each import of a user's module in the block (on this thread) ``seconds``."""
    token = _DEADLINE.set(seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


_FROZE = False  # whether ``collector_paused`` has frozen what the process holds (``frozen``)


def frozen() -> bool:
    """Whether the process's objects are frozen (``gc.get_freeze_count`` walks them: 6-9 ms)."""
    return _FROZE or gc.get_freeze_count() > 0


@contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector paused in the block, what it imported then frozen (belt's own)."""
    modules = len(sys.modules)
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > modules:
            global _FROZE
            gc.freeze()
            _FROZE = True
        if collecting:
            gc.enable()


def load_callable(
    spec: str, *, option: str = "--handler", root: str | None = None
) -> Callable[..., Any]:
    """Import ``MODULE:FUNC`` (a dotted module or a .py file), from ``root`` if given."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(
            f"{option} {spec!r}: expected MODULE:FUNC (e.g. examples/handler.py:decide)"
        )
    if is_file_reference(module_name):
        path = Path(module_name)
        if not path.is_file():
            raise NotFound(f"{option}: {path}: no such file")
        module = _file_module(path, option)
    else:
        if root is None and "" not in sys.path:  # like `python -m`: from the working directory
            root = str(Path.cwd())
        if root is not None and root not in sys.path:
            sys.path.insert(0, root)
        module = _guarded(lambda: _import_module(module_name, option), module_name, option)
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise NotFound(f"{option}: {module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise InvalidInput(f"{option}: {spec} is not callable")
    return cast("Callable[..., Any]", found)


def is_file_reference(module: str) -> bool:
    """Whether the MODULE of ``MODULE:FUNC`` is a path to a file, not a dotted name."""
    return module.endswith(".py") or "/" in module


# -- files named in files -------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """A file a document names: its absolute path, and a warning when found from the cwd only."""

    path: Path
    warning: str | None = None


def find_named_file(
    written: str, directory: Path, *, where: str, spell: Callable[[str], str] = str
) -> Found:
    """The file ``written`` names in a document of ``directory``; InvalidInput if none."""
    path = Path(written)
    if path.is_absolute():
        if path.is_file():
            return Found(path)
        raise InvalidInput(f"{where}: {written}: no such file")
    base = os.path.abspath(directory)
    beside = Path(base, path)
    if beside.is_file():
        return Found(Path(os.path.normpath(beside)))
    here = Path(os.path.abspath(path))
    if here.is_file() and os.path.normpath(here) != os.path.normpath(beside):
        new = spell(Path(os.path.relpath(here, base)).as_posix())
        return Found(
            here,
            f"{where}: {spell(written)} was found from the current directory, which this "
            f"release still tries and the next will not; a path is read from the directory of "
            f"the file that names it ({directory}): write {new}",
        )
    shown = (directory / path).as_posix() if str(directory) not in ("", ".") else written
    raise InvalidInput(
        f"{where}: {shown}: no such file",
        hint=f"a path is read from the directory of the file that names it ({base})",
    )


def locate_module(module: str, directory: Path) -> tuple[Path | None, str | None]:
    """(a top-level module's file, None), (None, its package's directory) or (None, None)."""
    top = module.partition(".")[0]
    base = Path(os.path.abspath(directory))
    if "." not in module and (base / f"{top}.py").is_file():
        return base / f"{top}.py", None
    return None, (str(base) if (base / top / "__init__.py").is_file() else None)


_FILES: dict[str, tuple[tuple[int, int], Any]] = {}  # by real path, with (mtime, size) then


def _file_module(path: Path, option: str) -> Any:
    """The module of a ``.py`` file, executed once per process (again when the file changed)."""
    key = os.path.realpath(path)
    try:
        info = os.stat(key)
        stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
    except OSError:
        stamp = None
    if (known := _FILES.get(key)) is not None and known[0] == stamp:
        return known[1]
    module = _guarded(lambda: _import_file(path, option), str(path), option)
    if stamp is not None:
        _FILES[key] = (stamp, module)
    return module


def _guarded(load: Callable[[], Any], what: str, option: str) -> Any:
    """``load()`` (an import of ``what``), its top-level code's exits and hangs made errors."""
    seconds = _DEADLINE.get()
    whole = what in _WHOLE and what in sys.modules
    if what in _REFUSED and not whole:
        raise InvalidInput(
            f"{option}: importing {what} {_REFUSED[what]} earlier in this run; "
            "it is not tried again"
        )

    def loaded() -> Any:
        value = load()
        if what in sys.modules:  # a dotted module (a file's is keyed by its path)
            _WHOLE.add(what)  # even one left to run past its deadline, once it returns
        return value

    if seconds is None or whole:
        try:
            return loaded()
        except SystemExit as exc:
            raise _failed(option, what, exc) from None
    if (outcome := in_thread(loaded, seconds, name=f"belt-import {what}")) is None:
        refuse(what, f"did not finish within {seconds:g} s")
        raise InvalidInput(
            f"{option}: importing {what} did not finish within {seconds:g} s",
            hint="a handler module's top-level code must not wait (it runs on import)",
        )
    ok, value = outcome
    if ok:
        return value
    if isinstance(value, (SystemExit, KeyboardInterrupt)):
        raise _failed(option, what, value) from None
    raise value


def in_thread(func: Callable[[], Any], seconds: float, *, name: str) -> tuple[bool, Any] | None:
    """``func()`` in a daemon thread for ``seconds``: (ok, value), or None if still running."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, func()))
        except BaseException as exc:  # whatever it raises is its outcome
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join(seconds)
    return outcome[0] if outcome else None


def _failed(option: str, what: str, exc: BaseException) -> InvalidInput:
    """A module's top-level code exited or was interrupted on import: an error naming it."""
    how = f"it raised {type(exc).__name__}"
    if isinstance(exc, SystemExit):
        how = f"it called sys.exit({exc.code!r})"
    return InvalidInput(f"{option}: importing {what} failed: {how}")


def _import_module(module_name: str, option: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name and module_name.startswith(exc.name):
            raise NotFound(f"{option}: no module named {module_name!r}") from exc
        raise InvalidInput(f"{option}: importing {module_name} failed: {exc}") from exc


def _import_file(path: Path, option: str) -> Any:
    name = f"belt_handler_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InvalidInput(f"{option}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        if sys.modules.get(name) is module:
            del sys.modules[name]
        if not isinstance(exc, Exception):
            raise
        raise InvalidInput(f"{option}: importing {path} failed: {exc}") from exc
    return module


def fd_identity(fd: int) -> tuple[int, int] | None:
    """Which file ``fd`` is (None: it is closed). User code can close a descriptor belt handed it
    and the next file opened takes its number: belt compares this before it trusts one again."""
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def call_user(func: Callable[..., Any], argument: Any) -> Any:
    """``func(argument)``, an awaitable it returns run to its end in an event loop of its own."""
    value = func(argument)
    if inspect.isawaitable(value):
        import asyncio  # noqa: PLC0415 - start-up: an async handler only

        value = asyncio.run(_awaited(value))
    return value


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def asks_for(func: Callable[..., Any], model: type) -> bool:
    """Whether the first parameter of ``func`` is annotated with ``model`` (or a subclass)."""
    # A callable object may not be hashable: then it is read each time.
    return (_asks_for if isinstance(func, Hashable) else _read_annotation)(func, model)


def _read_annotation(func: Callable[..., Any], model: type) -> bool:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # a builtin or an object without a signature
        return False
    with suppress(Exception):  # strings resolved where it was defined (else read as written)
        signature = inspect.signature(func, eval_str=True)
    parameters = list(signature.parameters.values())
    if not parameters or parameters[0].annotation is inspect.Parameter.empty:
        return False
    annotation = parameters[0].annotation
    if isinstance(annotation, type):
        return issubclass(annotation, model)
    written = annotation if isinstance(annotation, str) else repr(annotation)
    return written.split("[", 1)[0].strip().rsplit(".", 1)[-1] == model.__name__


_asks_for = functools.lru_cache(maxsize=256)(_read_annotation)
