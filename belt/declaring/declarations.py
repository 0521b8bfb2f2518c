"""Reading hook declaration files of either dialect, in JSON or TOML."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from belt.display.text import describe
from belt.errors import ExitCode, InvalidInput
from belt.reading import inputs
from belt.reading.didyoumean import did_you_mean
from belt.reading.strictjson import StrictJSONError, decode, decode_toml
from belt.wire.enums import Dialect
from belt.wire.nexus import LifecycleHooks
from belt.wire.platform import LifecycleHookConfig
from belt.wire.validate import (
    Findings,
    check_nexus_hooks,
    check_nexus_profile,
    check_platform_hooks,
)


@dataclass
class Declaration:
    """One checked declaration file."""

    path: str
    dialect: str | None  # a ``belt.dialects`` name (a built-in one as ``Dialect``)
    findings: Findings
    hooks: list[LifecycleHookConfig] = field(default_factory=list)
    lifecycle_hooks: LifecycleHooks | None = None
    shape: str = ""
    failure: ExitCode = ExitCode.INVALID_INPUT  # why it is not ok (5 invalid, 3 missing)
    count: int | None = None  # how many hooks a scenario of a dialect of its own declares
    where: str = "hooks"  # what the positions of its hooks are prefixed with
    located: dict[int, Any] = field(default_factory=dict)  # a scenario's py: hooks, Located

    @property
    def ok(self) -> bool:
        """True when the file holds no error."""
        return self.findings.ok

    def hook_count(self) -> int:
        """How many hooks (or Nexus boundaries) the file declares."""
        if self.count is not None:
            return self.count
        return len(self.lifecycle_hooks.declared()) if self.lifecycle_hooks else len(self.hooks)

    def summary(self) -> dict[str, object]:
        """A JSON-ready report of this file."""
        out: dict[str, object] = {
            "file": self.path,
            "dialect": str(self.dialect) if self.dialect else None,
            "valid": self.ok,
            "errors": self.findings.problems,
            "warnings": self.findings.warnings,
        }
        if self.ok and self.dialect == Dialect.PLATFORM:
            out["hooks"] = [hook.to_wire() for hook in self.hooks]
        elif self.ok and self.lifecycle_hooks is not None:
            out["lifecycle_hooks"] = self.lifecycle_hooks.to_wire()
        return out


TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def parse_text(text: str, source: str, *, fmt: str | None = None) -> Any:
    """Decode JSON or TOML text strictly (exit 5 naming the source, and line and column)."""
    toml = (fmt or ("toml" if source.endswith(".toml") else "json")) == "toml"
    try:
        return decode_toml(text) if toml else decode(text, unique_keys=True)
    except StrictJSONError as exc:
        raise InvalidInput(f"{source}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        reason, at = str(exc), ""
        if found := TOML_POSITION.search(reason):
            reason, at = reason[: found.start()], f"line {found[1]}, column {found[2]}: "
        raise InvalidInput(f"{source}: {at}invalid TOML: {reason}") from exc


def read_document(path: str | Path, *, kind: str = "declaration") -> Any:
    """Read and decode a JSON or TOML file; a missing file exits 3, a broken one 5."""
    return parse_text(inputs.read_text(path, kind=kind), str(path))


def read_declaration(path: str | Path) -> Any:
    """Read a declaration file: an empty one (or an empty TOML table) is an error naming it."""
    text, source = inputs.read_text(path, kind="declaration"), str(path)
    if not text.strip():
        raise InvalidInput(f"{source}: the file is empty; it declares no hooks")
    doc = parse_text(text, source)
    if doc == {} and source.endswith(".toml"):
        raise InvalidInput(f"{source}: the file declares nothing (no hooks table)")
    return doc


NEXUS_SHAPES = ("profile", "wrapped", "rho", "bare")  # dialect: lifecycle_hooks are Nexus's
HOOKS_ONLY = "unknown key (a declaration file holds only hooks)"


def shape_of(doc: Any) -> str:
    """How a decoded document declares hooks, told by its keys ("" when it cannot)."""
    if not isinstance(doc, dict):
        return "array" if isinstance(doc, list) else ""
    if "hooks" in doc:
        return "hooks"
    if "lifecycle_hooks" in doc:
        return "profile" if len(doc) > 1 else "wrapped"
    if "plugins" in doc:
        return "rho"  # dialect: rho's config file is Nexus's
    return "single" if "event" in doc and "type" in doc else "bare"


def check_document(doc: Any, source: str, dialect: Dialect | None = None) -> Declaration:
    """Check a decoded declaration document of either dialect (``dialect``: read as that one)."""
    shape = shape_of(doc)
    # dialect (this line and the return below): a document's shape tells its dialect
    detected = shape and (Dialect.NEXUS if shape in NEXUS_SHAPES else Dialect.PLATFORM)
    if not (chosen := dialect or detected):
        wanted = "(document): expected a hooks array or a lifecycle_hooks object"
        return Declaration(source, None, Findings([f"{wanted}, got {describe(doc)}"]))
    if chosen != detected:  # read as the dialect given, whatever its keys suggest
        table = isinstance(doc, dict)
        wrapped = "wrapped" if table and "lifecycle_hooks" in doc else "bare"
        shape = ("hooks" if table else "array") if chosen == Dialect.PLATFORM else wrapped
    checks: dict[str, Callable[[Any], tuple[Findings, Any]]] = {
        "array": check_platform_hooks,
        "single": lambda doc: check_platform_hooks([doc]),
        "hooks": lambda doc: _wrapped(doc, "hooks", HOOKS_ONLY, check_platform_hooks),
        "profile": check_nexus_profile,
        "rho": check_rho_config,
        "wrapped": lambda doc: _wrapped(doc, "lifecycle_hooks", "unknown key", check_nexus_hooks),
        "bare": check_nexus_hooks,
    }
    findings, checked = checks[shape](doc)
    if shape in NEXUS_SHAPES:
        return Declaration(source, Dialect.NEXUS, findings, lifecycle_hooks=checked, shape=shape)
    return Declaration(source, Dialect.PLATFORM, findings, checked or [], shape=shape)


def _wrapped(
    doc: Mapping[str, object], key: str, rule: str, check: Callable[[Any], tuple[Findings, Any]]
) -> tuple[Findings, Any]:
    """A document of one ``key``: any other named with ``rule``, then ``check`` of its value."""
    findings, checked = check(doc.get(key))
    findings.problems[:0] = [f"{k}: {rule}{did_you_mean(k, (key,))}" for k in doc if k != key]
    return findings, checked if findings.ok else None


RHO_PLUGIN = "rho.lifecycle_hooks"


def check_rho_config(doc: Any) -> tuple[Findings, LifecycleHooks | None]:
    """Check the lifecycle hooks stored in a rho config file's plugins table."""
    plugins = doc.get("plugins") if isinstance(doc, dict) else None
    if not isinstance(plugins, dict):
        return Findings([f"plugins: expected an object, got {describe(plugins)}"]), None
    where = f'plugins["{RHO_PLUGIN}"]'
    if (plugin := plugins.get(RHO_PLUGIN)) is None:
        return Findings(), LifecycleHooks()
    if not isinstance(plugin, dict):
        return Findings([f"{where}: expected an object, got {describe(plugin)}"]), None
    return check_nexus_hooks(plugin.get("configuration"), f"{where}.configuration")


def load_declaration(path: str | Path, dialect: Dialect | None = None) -> Declaration:
    """Read and check one declaration file."""
    return check_document(read_declaration(path), str(path), dialect)


def exit_code(reports: list[Declaration]) -> ExitCode:
    """The exit code of a validation run: the most serious failure among the files."""
    return max((report.failure for report in reports if not report.ok), default=ExitCode.OK)
