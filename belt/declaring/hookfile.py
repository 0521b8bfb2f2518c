"""The hooks declaration file that ``belt hooks add|list|remove|export`` edit."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import tomli_w

from belt.declaring.declarations import check_document, read_document
from belt.errors import InvalidInput, NotFound
from belt.paths import state_dir, write_private
from belt.store.locking import file_lock
from belt.wire.enums import Dialect
from belt.wire.platform import LifecycleHookConfig
from belt.wire.validate import check_platform_hooks

DEFAULT_NAME = "hooks.json"


def default_path() -> Path:
    """The default declaration file in the state directory."""
    return state_dir() / DEFAULT_NAME


def resolve_path(file: str | Path | None) -> Path:
    """The file to work on: ``file`` when given, else the default one."""
    return Path(file) if file else default_path()


@contextmanager
def editing(path: Path) -> Iterator[list[LifecycleHookConfig]]:
    """Hold the edit lock of a declaration file (through any symlink) and yield its hooks, written
    back to the real file in the format its suffix names when the block ends without an error."""
    target = Path(os.path.realpath(path))  # the file a symlink at ``path`` points to
    if not os.path.lexists(target) and Path(os.path.abspath(path)) != target:
        # A link (at the name, or a directory on the way) to nothing: writing would create the
        # file it names and the directories above it, wherever the link points.
        raise NotFound(
            f"{path}: a symbolic link to {target}, which does not exist",
            hint="create the file the link points to, or give the path of the file itself",
        )
    key = hashlib.sha256(os.fsencode(target)).hexdigest()[:32]
    with file_lock(state_dir() / "locks" / "hookfiles" / f"{key}.lock"):
        yield (hooks := read_hooks(target) if target.exists() else [])
        write_private(target, render(hooks, "toml" if target.suffix == ".toml" else "json"))


def read_hooks(file: str | Path | None = None) -> list[LifecycleHookConfig]:
    """The checked hooks of a declaration file; a file that does not exist yet holds none."""
    path = resolve_path(file)
    if not path.exists():
        if file is not None:
            raise NotFound(f"{path}: no such file", hint="create it with `belt hooks add --file`")
        return []
    declaration = check_document(read_document(path), str(path), Dialect.PLATFORM)
    if not declaration.ok:
        raise InvalidInput(
            f"{path}: {len(declaration.findings.problems)} problem(s)",
            problems=declaration.findings.problems,
            hint=f"fix the file or check it with `belt hooks validate {path}`",
        )
    return declaration.hooks


def render(hooks: list[LifecycleHookConfig], fmt: str) -> str:
    """The declaration file text of ``hooks`` in ``json`` or ``toml``."""
    items = [hook.to_wire() for hook in hooks]
    if fmt == "toml":
        return tomli_w.dumps({"hooks": items})
    return json.dumps({"hooks": items}, indent=2) + "\n"


def add_hook(
    *,
    event: str,
    handler_type: str,
    handler: str | None = None,
    async_: bool = False,
    timeout: int | None = None,
    default_resolution: str | None = None,
    file: str | Path | None = None,
) -> tuple[int, LifecycleHookConfig]:
    """Append one checked hook to the file; returns its index and the stored declaration."""
    path = resolve_path(file)
    given: dict[str, object] = {"event": event, "type": handler_type, "async": async_ or None}
    given |= {"handler": handler, "timeout": timeout, "default_resolution": default_resolution}
    findings, checked = check_platform_hooks([{k: v for k, v in given.items() if v is not None}])
    with editing(path) as hooks:
        index = len(hooks)
        if not findings.ok:
            problems = [p.replace("hooks[0]", f"hooks[{index}]", 1) for p in findings.problems]
            raise InvalidInput(f"hook not added: {problems[0]}", problems=problems[1:])
        hooks.append(checked[0])
    return index, checked[0]


def remove_hook(index: int, file: str | Path | None = None) -> LifecycleHookConfig:
    """Remove the hook at ``index`` (as ``belt hooks list`` numbers them); returns it."""
    path = resolve_path(file)
    if file is not None and not path.exists():
        read_hooks(file)  # NotFound, with the hint to create it
    with editing(path) as hooks:
        if not 0 <= index < len(hooks):
            raise NotFound(
                f"no hook at index {index} in {path} (it holds {len(hooks)})",
                hint="see the indexes with `belt hooks list`",
            )
        return hooks.pop(index)
