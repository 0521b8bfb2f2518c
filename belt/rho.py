"""rho's config file: lifecycle hooks kept at ``plugins["rho.lifecycle_hooks"].configuration``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from belt.declarations import (
    RHO_PLUGIN,
    Dialect,
    check_document,
    parse_text,
    read_document,
    read_text,
)
from belt.errors import InvalidInput, UsageError
from belt.paths import state_dir, write_private

STDIN = "<stdin>"


@dataclass
class Configured:
    """What ``rho extensions configure`` stored, and where."""

    extension: str
    file: Path
    configuration: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        """A JSON-ready report."""
        return {
            "extension": self.extension,
            "file": str(self.file),
            "configuration": self.configuration,
        }


def config_path() -> Path:
    """rho's config file in the state directory."""
    return state_dir() / "rho" / "config.json"


def read_config(path: Path) -> dict[str, Any]:
    """rho's whole config file; a file that does not exist yet is empty."""
    if not path.exists():
        return {}
    doc = read_document(path)
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path}: expected a JSON object", hint="fix or remove the file")
    return doc


def read_input(file: Path | None) -> tuple[str, str]:
    """The text to configure and its name: ``file``, or stdin when ``file`` is None or ``-``."""
    if file is not None and str(file) != "-":
        return read_text(file), str(file)
    if sys.stdin.isatty():
        raise UsageError(
            "give the configuration with --file FILE or on stdin",
            hint="echo '{\"stop\": {...}}' | rho extensions configure rho.lifecycle_hooks",
        )
    text = sys.stdin.read()
    if not text.strip():
        raise InvalidInput(f"{STDIN}: empty input; expected a lifecycle_hooks object")
    return text, STDIN


def configure_lifecycle_hooks(*, file: Path | None = None) -> Configured:
    """Check a lifecycle_hooks object and store it in rho's config file; returns what is stored."""
    text, source = read_input(file)
    declaration = check_document(parse_text(text, source), source, Dialect.NEXUS)
    problems = declaration.findings.problems
    if problems or declaration.lifecycle_hooks is None:
        if len(problems) == 1:
            raise InvalidInput(f"{source}: {problems[0]}")
        raise InvalidInput(f"{source}: {len(problems)} problems", problems=problems)
    configuration = declaration.lifecycle_hooks.to_wire()

    path = config_path()
    config = read_config(path)
    plugins = config.setdefault("plugins", {})
    if not isinstance(plugins, dict):
        raise InvalidInput(f"{path}: plugins: expected an object", hint="fix or remove the file")
    entry = plugins.setdefault(RHO_PLUGIN, {})
    if not isinstance(entry, dict):
        raise InvalidInput(
            f'{path}: plugins["{RHO_PLUGIN}"]: expected an object', hint="fix or remove the file"
        )
    entry["configuration"] = configuration
    write_private(path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return Configured(RHO_PLUGIN, path, configuration)
