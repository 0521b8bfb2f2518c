"""Reading hook declaration files of either dialect, in JSON or TOML."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from belt.handlers.inprocess import Located


@dataclass
class Declaration:
    """One checked declaration file."""

    path: str
    dialect: str | None  # a ``belt.dialects`` name (a built-in one as ``Dialect``)
    findings: Findings
    hooks: list[LifecycleHookConfig] = field(default_factory=list)
    lifecycle_hooks: LifecycleHooks | None = None
    shape: str = ""
    failure: ExitCode = ExitCode.INVALID_INPUT
    count: int | None = None  # how many hooks a scenario of a dialect of its own declares
    where: str = "hooks"  # what the positions of its hooks are prefixed with
    located: dict[int, Located] = field(default_factory=dict)  # a scenario's py: hooks, by index

    @property
    def ok(self) -> bool:
        """True when the file holds no error."""
        return self.findings.ok

    @property
    def exit_code(self) -> ExitCode:
        """OK for a clean file, else why it failed (5 invalid, 3 missing)."""
        return ExitCode.OK if self.ok else self.failure

    def hook_count(self) -> int:
        """How many hooks (or Nexus boundaries) the file declares."""
        if self.count is not None:
            return self.count
        if self.dialect == Dialect.PLATFORM:
            return len(self.hooks)
        return len(self.lifecycle_hooks.declared()) if self.lifecycle_hooks else 0

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
    kind = fmt or ("toml" if source.endswith(".toml") else "json")
    if kind == "toml":
        try:
            return decode_toml(text)
        except StrictJSONError as exc:
            raise InvalidInput(f"{source}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            if (found := TOML_POSITION.search(message)) is None:
                raise InvalidInput(f"{source}: invalid TOML: {message}") from exc
            line, column = found.groups()
            raise InvalidInput(
                f"{source}: line {line}, column {column}: invalid TOML: {message[: found.start()]}"
            ) from exc
    try:
        return decode(text, unique_keys=True)
    except StrictJSONError as exc:
        raise InvalidInput(f"{source}: {exc}") from None


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


def detect_dialect(doc: Any) -> tuple[Dialect | None, str]:
    """Guess the built-in dialect of a decoded document from its shape: (dialect, shape)."""
    if isinstance(doc, list):
        return Dialect.PLATFORM, "array"
    if isinstance(doc, dict):
        if "hooks" in doc:
            return Dialect.PLATFORM, "hooks"
        if "lifecycle_hooks" in doc:
            # dialect: the wire formats, told apart by shape (below too)
            return Dialect.NEXUS, "profile" if len(doc) > 1 or "approval_mode" in doc else "wrapped"
        if "plugins" in doc:
            return Dialect.NEXUS, "rho"  # dialect: rho's config file is Nexus's
        if "event" in doc and "type" in doc:
            return Dialect.PLATFORM, "single"
        return Dialect.NEXUS, "bare"  # dialect: a bare lifecycle_hooks table
    return None, ""


def forced_shape(doc: Any, dialect: Dialect) -> str:
    """The shape to read ``doc`` as when ``--dialect`` overrides what its shape suggests."""
    if dialect == Dialect.PLATFORM:
        return "hooks" if isinstance(doc, dict) else "array"
    return "wrapped" if isinstance(doc, dict) and "lifecycle_hooks" in doc else "bare"


def check_document(doc: Any, source: str, dialect: Dialect | None = None) -> Declaration:
    """Check a decoded declaration document of either dialect."""
    detected, shape = detect_dialect(doc)
    chosen = dialect or detected
    if chosen is None:
        findings = Findings()
        findings.error(
            "(document)", f"expected a hooks array or a lifecycle_hooks object, got {describe(doc)}"
        )
        return Declaration(source, None, findings)
    if chosen != detected:
        shape = forced_shape(doc, chosen)
    if chosen == Dialect.PLATFORM:
        if shape != "single" and isinstance(doc, dict):
            rule = "unknown key (a declaration file holds only hooks)"
            findings, hooks = _wrapped(doc, "hooks", rule, check_platform_hooks)
            return Declaration(source, chosen, findings, hooks if findings.ok else [], shape=shape)
        findings, hooks = check_platform_hooks([doc] if shape == "single" else doc)
        return Declaration(source, chosen, findings, hooks, shape=shape)
    if shape == "profile":
        findings, nexus = check_nexus_profile(doc)
    elif shape == "rho":
        findings, nexus = check_rho_config(doc)
    elif shape == "wrapped" and isinstance(doc, dict):
        findings, nexus = _wrapped(doc, "lifecycle_hooks", "unknown key", check_nexus_hooks)
    else:
        findings, nexus = check_nexus_hooks(doc)
    nexus_dialect = Dialect.NEXUS  # dialect: a lifecycle_hooks declaration is Nexus's by shape
    return Declaration(source, nexus_dialect, findings, lifecycle_hooks=nexus, shape=shape)


def _wrapped(
    doc: Mapping[str, object], key: str, rule: str, check: Callable[[Any], tuple[Findings, Any]]
) -> tuple[Findings, Any]:
    """A document of one ``key``: any other named with ``rule``, then ``check`` of its value."""
    findings = Findings()
    for extra in doc:
        if extra != key:
            findings.error(extra, rule + did_you_mean(extra, (key,)))
    inner, checked = check(doc.get(key))
    findings.problems.extend(inner.problems)
    findings.warnings.extend(inner.warnings)
    return findings, checked


RHO_PLUGIN = "rho.lifecycle_hooks"


def check_rho_config(doc: Any) -> tuple[Findings, LifecycleHooks | None]:
    """Check the lifecycle hooks stored in a rho config file's plugins table."""
    findings = Findings()
    plugins = doc.get("plugins") if isinstance(doc, dict) else None
    if not isinstance(plugins, dict):
        findings.error("plugins", f"expected an object, got {describe(plugins)}")
        return findings, None
    if (plugin := plugins.get(RHO_PLUGIN)) is None:
        return findings, LifecycleHooks()
    if not isinstance(plugin, dict):
        findings.error(f'plugins["{RHO_PLUGIN}"]', f"expected an object, got {describe(plugin)}")
        return findings, None
    return check_nexus_hooks(plugin.get("configuration"), f'plugins["{RHO_PLUGIN}"].configuration')


def load_declaration(path: str | Path, dialect: Dialect | None = None) -> Declaration:
    """Read and check one declaration file."""
    return check_document(read_declaration(path), str(path), dialect)


def exit_code(reports: list[Declaration]) -> ExitCode:
    """The exit code of a validation run: the most serious failure among the files."""
    return max((report.exit_code for report in reports), default=ExitCode.OK)
