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
PROFILE_PATH = "/agent_api/v1/profile/configuration"


@dataclass
class Configured:
    """What ``rho extensions configure`` stored, and where (a file, or a profile API's host)."""

    extension: str
    file: Path | None
    configuration: dict[str, Any]
    api: str | None = None

    def summary(self) -> dict[str, Any]:
        """A JSON-ready report."""
        where: dict[str, Any] = {"api": self.api} if self.api else {"file": str(self.file)}
        return {"extension": self.extension, **where, "configuration": self.configuration}

    @property
    def location(self) -> str:
        """Where the configuration was stored, for a person."""
        if self.api:
            return f"the profile at {self.api} (lifecycle_hooks of {PROFILE_PATH})"
        return f'plugins["{self.extension}"].configuration in {self.file}'


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
    from belt.inputs import read_stream

    text = read_stream(sys.stdin.buffer, kind="declaration", source=STDIN)
    if not text.strip():
        raise InvalidInput(f"{STDIN}: empty input; expected a lifecycle_hooks object")
    return text, STDIN


def configure_lifecycle_hooks(
    *, file: Path | None = None, api: str | None = None, transport: Any = None
) -> Configured:
    """Check a lifecycle_hooks object; store it in rho's config file or the ``api``'s profile."""
    text, source = read_input(file)
    declaration = check_document(parse_text(text, source), source, Dialect.NEXUS)
    problems = declaration.findings.problems
    if problems or declaration.lifecycle_hooks is None:
        if len(problems) == 1:
            raise InvalidInput(f"{source}: {problems[0]}")
        raise InvalidInput(f"{source}: {len(problems)} problems", problems=problems)
    configuration = declaration.lifecycle_hooks.to_wire()
    if api is not None:
        return configure_through_api(api, configuration, transport=transport)

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


def profile_request(client: Any, host: str, method: str, body: Any = None) -> dict[str, Any]:
    """One request to the profile API; the declaration it answers, or a BeltError."""
    import httpx

    from belt.deadline import BodyTooLarge, DeadlinePassed, deadline, read_capped
    from belt.errors import Unreachable, error_for_status
    from belt.remote import DEFAULT_TIMEOUT, MAX_ANSWER_BYTES, REACH_HINT
    from belt.strictjson import StrictJSONError, decode

    try:
        with deadline(DEFAULT_TIMEOUT), client.stream(method, PROFILE_PATH, json=body) as response:
            raw = read_capped(response, MAX_ANSWER_BYTES)
    except (httpx.TimeoutException, DeadlinePassed):
        raise Unreachable(
            f"{host} did not answer within {DEFAULT_TIMEOUT:g}s", hint=REACH_HINT
        ) from None
    except BodyTooLarge as exc:
        raise Unreachable(f"{host}: {exc}", hint=REACH_HINT) from None
    except httpx.TransportError as exc:
        raise Unreachable(f"cannot reach {host}: {type(exc).__name__}", hint=REACH_HINT) from None
    try:
        document = decode(raw) if raw else None
    except StrictJSONError as exc:
        if response.is_success:
            raise Unreachable(
                f"{host} answered {PROFILE_PATH} with a body that is not JSON ({exc})"
            ) from None
        document = None
    if response.is_success:
        if not isinstance(document, dict):
            raise InvalidInput(
                f"{host} answered {PROFILE_PATH} with something other than an object"
            )
        return document
    problem = document if isinstance(document, dict) else {}
    detail = str(problem.get("detail") or problem.get("title") or response.reason_phrase)
    message = f"{detail} (HTTP {response.status_code} from {host})"
    if response.status_code in (400, 422):
        errors = [str(e) for e in problem.get("errors") or []]
        message = f"{host} refused the profile: {detail}"
        raise error_for_status(response.status_code, message, problems=errors[1:])
    hint = None
    if response.status_code == 404:
        hint = f"is {host} a Nexus profile API (or `belt serve`)?"
    raise error_for_status(response.status_code, message, hint=hint)


def configure_through_api(
    api: str, configuration: dict[str, Any], *, transport: Any = None
) -> Configured:
    """Read the whole declaration from a profile API, set its lifecycle_hooks, and write it."""
    import httpx

    from belt.effects import url_host
    from belt.remote import api_key_from_env
    from belt.wire.validate import check_webhook_url

    reason = check_webhook_url(api)
    if reason:
        raise InvalidInput(f"--api {reason}", hint="for example --api http://127.0.0.1:8787")
    host = url_host(api)
    headers = {"Accept": "application/json"}
    key = api_key_from_env()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    from belt.deadline import transport as deadline_transport
    from belt.remote import DEFAULT_TIMEOUT

    with httpx.Client(
        base_url=api,
        headers=headers,
        transport=transport or deadline_transport(),
        timeout=DEFAULT_TIMEOUT,
        follow_redirects=False,
    ) as client:
        declaration = profile_request(client, host, "GET")
        declaration["lifecycle_hooks"] = configuration
        stored = profile_request(client, host, "PUT", declaration)
    hooks = stored.get("lifecycle_hooks")
    return Configured(RHO_PLUGIN, None, hooks if isinstance(hooks, dict) else {}, api=host)
