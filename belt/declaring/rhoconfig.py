"""rho's config file: lifecycle hooks kept at ``plugins["rho.lifecycle_hooks"].configuration``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from belt.backends.backend import open_backend
from belt.declaring.declarations import RHO_PLUGIN, check_document, parse_text
from belt.deliveries.effects import url_host
from belt.errors import InvalidInput, NotFound, UsageError
from belt.paths import write_private
from belt.reading.inputs import read_stream, read_text
from belt.records.profile import (
    PROFILE_PATH,
    read_rho_config,
    rho_config_path,
    stored_lifecycle_hooks,
)
from belt.wire.enums import Dialect

STDIN = "<stdin>"


@dataclass
class Configured:
    """What ``rho extensions configure`` stored, and where (a file, or a profile API's host)."""

    file: Path | None
    configuration: dict[str, Any]
    api: str | None = None

    def summary(self) -> dict[str, object]:
        """A JSON-ready report."""
        where: dict[str, object] = {"api": self.api} if self.api else {"file": str(self.file)}
        return {"extension": RHO_PLUGIN, **where, "configuration": self.configuration}

    @property
    def location(self) -> str:
        """Where the configuration was stored, for a person."""
        if self.api:
            return f"the profile at {self.api} (lifecycle_hooks of {PROFILE_PATH})"
        return f'plugins["{RHO_PLUGIN}"].configuration in {self.file}'


def read_input(file: Path | None) -> tuple[str, str]:
    """The text to configure and its name: ``file``, or stdin when ``file`` is None or ``-``."""
    if file is not None and str(file) != "-":
        return read_text(file, kind="declaration"), str(file)
    if sys.stdin.isatty():
        raise UsageError(
            "give the configuration with --file FILE or on stdin",
            hint="echo '{\"stop\": {...}}' | rho extensions configure rho.lifecycle_hooks",
        )

    text = read_stream(sys.stdin.buffer, kind="declaration", source=STDIN)
    if not text.strip():
        raise InvalidInput(f"{STDIN}: empty input; expected a lifecycle_hooks object")
    return text, STDIN


def configure_lifecycle_hooks(*, file: Path | None = None, api: str | None = None) -> Configured:
    """Check a lifecycle_hooks object; store it in rho's config file or the ``api``'s profile."""
    text, source = read_input(file)
    # rho is Nexus's own command line: what it configures is a Nexus declaration.
    declaration = check_document(parse_text(text, source), source, Dialect.NEXUS)  # dialect: rho
    problems = declaration.findings.problems
    if problems or declaration.lifecycle_hooks is None:
        if len(problems) == 1:
            raise InvalidInput(f"{source}: {problems[0]}")
        raise InvalidInput(f"{source}: {len(problems)} problems", problems=problems)
    configuration = declaration.lifecycle_hooks.to_wire()
    if api:
        return configure_through_api(api, configuration)

    path = rho_config_path(create=True)
    config = read_rho_config(path)
    fix = "fix or remove the file"
    plugins = config.setdefault("plugins", {})
    if not isinstance(plugins, dict):
        raise InvalidInput(f"{path}: plugins: expected an object", hint=fix)
    entry = plugins.setdefault(RHO_PLUGIN, {})
    if not isinstance(entry, dict):
        raise InvalidInput(f'{path}: plugins["{RHO_PLUGIN}"]: expected an object', hint=fix)
    entry["configuration"] = configuration
    write_private(path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return Configured(path, configuration)


def show_lifecycle_hooks() -> Configured:
    """What rho's config file holds for the extension (``{}`` when nothing is stored)."""
    stored = stored_lifecycle_hooks()
    return Configured(stored.file, stored.configuration)


def configure_through_api(api: str, configuration: dict[str, object]) -> Configured:
    """Read the whole declaration from a profile API, set its lifecycle_hooks, and write it."""
    with open_backend(api) as backend:
        try:
            declaration = backend.get_profile()
        except NotFound as exc:
            exc.hint = f"is {url_host(api)} a Nexus profile API (or `belt serve`)?"
            raise
        declaration["lifecycle_hooks"] = configuration
        stored = backend.put_profile(declaration)
    hooks = stored.get("lifecycle_hooks")
    return Configured(None, hooks if isinstance(hooks, dict) else {}, api=url_host(api))
