"""The validation rules of both dialects: every finding names its path and its rule.

Rules run on the raw decoded document, so every problem is reported; a clean one becomes models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import UnionType
from typing import Annotated, Any, TypeGuard, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel

from belt.display.text import describe, printable, short
from belt.reading.didyoumean import did_you_mean
from belt.wire.catalogue import BUILTINS, EVENTS, GATEABLE_EVENTS
from belt.wire.nexus import (
    FEEDBACK_MAX_BYTES,
    MAX_CONTINUATIONS_MAX,
    TIMEOUT_MS_MAX,
    HookDecisionResult,
    LifecycleHooks,
    NexusEvent,
    NexusHook,
)
from belt.wire.platform import (
    ContextInjection,
    HookHandlerType,
    LifecycleHookConfig,
    LifecycleHookResponse,
    timeout_bounds,
)


def keys_of(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys an object of ``model`` may hold on the wire (each field's alias, else its name)."""
    return tuple(info.alias or name for name, info in model.model_fields.items())


HOOK_KEYS = keys_of(LifecycleHookConfig)
NEXUS_HOOK_KEYS = keys_of(NexusHook)
DECISION_KEYS = keys_of(HookDecisionResult)
AGENT_REF = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[A-Za-z0-9][A-Za-z0-9._-]*)?$"
)


@dataclass
class Findings:
    """Problems (errors) and warnings found in one document, each prefixed by its path."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def error(self, path: str, rule: str) -> None:
        """Record an error at ``path``."""
        self.problems.append(f"{path}: {rule}")

    def warn(self, path: str, rule: str) -> None:
        """Record a warning at ``path``."""
        self.warnings.append(f"{path}: {rule}")

    @property
    def ok(self) -> bool:
        """True when no error was found."""
        return not self.problems

    def unknown_keys(
        self, raw: Mapping[str, object], allowed: Sequence[str], path: str, noun: str = "key"
    ) -> None:
        """Record an error for each key of ``raw`` (at ``path``, maybe "") not ``allowed``."""
        for key in raw:
            if key not in allowed:
                self.error(
                    f"{path}.{key}" if path else key,
                    f"unknown {noun} (allowed: {', '.join(allowed)}){did_you_mean(key, allowed)}",
                )


def not_one_of(value: object, what: str, choices: Sequence[str] | Mapping[str, object]) -> str:
    """The rule a value that is none of ``choices`` breaks, with the closest choice."""
    near = did_you_mean(value, choices)
    return f"{value!r} is not {what} (expected one of {', '.join(choices)}){near}"


def is_int(value: object) -> TypeGuard[int]:
    """True for a JSON integer (booleans are not integers here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_webhook_url(url: str) -> str | None:
    """Return why ``url`` is not an absolute http(s) URL, or None when it is."""
    if any(ch.isspace() or ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in url):
        return "must be a URL without spaces, control characters or lone surrogates"
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must be an absolute http:// or https:// URL"
    if not parts.hostname:
        return "must be an absolute URL with a host"
    if not parts.hostname.isascii() or "xn--" in parts.hostname:
        # An internationalised name must survive IDNA encoding, as the HTTP client will do it.
        import httpx  # noqa: PLC0415 - loaded only for an internationalised host

        try:
            httpx.URL(url).host  # noqa: B018 (decoding the host is the check)
        except (httpx.InvalidURL, UnicodeError) as exc:
            return f"has a host that is not a valid domain name ({exc})"
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        shown = parts.netloc.rpartition(":")[2]
        if not shown.isascii() or not shown.isdigit():
            return f"port {shown!r} is not a port number (1-65535)"
        return f"port {shown} is out of range (1-65535)"
    return None


# Webhook handlers of scenarios only, decided in-process: py:MODULE:FUNC and policy:FILE.
IN_PROCESS_PREFIX = "py:"
POLICY_PREFIX = "policy:"


def in_process_problem(handler: str, *, allowed: bool) -> str | None:
    """Why a ``py:`` or ``policy:`` webhook handler cannot be used here, or None when it can."""
    policy = handler.startswith(POLICY_PREFIX)
    if not allowed:
        what = "a policy file as a handler" if policy else "an in-process handler"
        return (
            f"{handler!r} is {what}, a belt extension for scenarios (belt test, belt sim run); the "
            "platform refuses it: a webhook handler is an absolute http(s) URL"
        )
    if policy:
        if handler[len(POLICY_PREFIX) :].strip():
            return None
        return f"{handler!r}: a policy handler is policy:FILE (e.g. policy:policy.toml)"
    module, sep, func = handler[len(IN_PROCESS_PREFIX) :].partition(":")
    if not sep or not module.strip() or not func.strip():
        return f"{handler!r}: an in-process handler is py:MODULE:FUNC (e.g. py:hooks.py:decide)"
    return None


def check_platform_hook(raw: Any, path: str, findings: Findings, *, in_process: bool) -> None:
    """Check one inference.sh hook declaration (``in_process``: ``py:``/``policy:`` allowed)."""
    if not isinstance(raw, dict):
        findings.error(path, f"expected an object, got {describe(raw)}")
        return
    findings.unknown_keys(raw, HOOK_KEYS, path)
    event, kind, kinds = raw.get("event"), raw.get("type"), [t.value for t in HookHandlerType]
    if event is None:
        findings.error(f"{path}.event", "is required")
    elif not isinstance(event, str) or event not in EVENTS:
        findings.error(f"{path}.event", not_one_of(event, "a lifecycle event", EVENTS))
        event = None
    elif not EVENTS[event].emitted:
        never = "is defined but never emitted; this hook never fires"
        findings.warn(f"{path}.event", f"{event} {never}")
    if kind not in kinds:
        rule = not_one_of(kind, "a handler type", kinds) if kind is not None else None
        findings.error(f"{path}.type", rule or f"is required (one of {', '.join(kinds)})")
        return
    handler, hpath = raw.get("handler"), f"{path}.handler"
    if kind == HookHandlerType.GATE:  # no handler, ``async`` ignored, only where a run can be held
        if "handler" in raw:
            findings.error(hpath, "a gate has no handler; remove it")
        if raw.get("async") is True:
            ignored = "(a gate always suspends the run); it is ignored"
            findings.warn(f"{path}.async", f"async is not used for gate hooks {ignored}")
        if event is not None and event not in GATEABLE_EVENTS:
            gateable = f"(gates attach to {', '.join(GATEABLE_EVENTS)})"
            findings.error(f"{path}.event", f"a gate cannot attach to {event} {gateable}")
    elif handler is None:
        what = {"webhook": "a webhook URL", "task": "an agent ref", "builtin": "a builtin name"}
        findings.error(hpath, f"is required for a {kind} hook ({what[kind]})")
    elif not isinstance(handler, str):
        findings.error(hpath, f"must be a string, got {describe(handler)}")
    elif kind == HookHandlerType.WEBHOOK:
        if handler.startswith((IN_PROCESS_PREFIX, POLICY_PREFIX)):
            reason = in_process_problem(handler, allowed=in_process)
        else:
            reason = check_webhook_url(handler)
        if reason:
            findings.error(hpath, reason)
    elif kind == HookHandlerType.TASK:
        if not AGENT_REF.match(handler):
            findings.error(hpath, f"{handler!r} is not an agent ref (namespace/name[@version])")
    elif (builtin := BUILTINS.get(handler)) is None:
        findings.error(hpath, not_one_of(handler, "a builtin", BUILTINS))
    elif event is not None and event not in builtin.events:
        allowed = ", ".join(builtin.events)
        findings.error(f"{path}.event", f"{handler} cannot attach to {event} (allowed: {allowed})")
    if "async" in raw and not isinstance(raw["async"], bool):
        findings.error(f"{path}.async", f"must be true or false, got {describe(raw['async'])}")
    if "timeout" in raw:
        timeout, maximum, tpath = raw["timeout"], timeout_bounds(kind)[1], f"{path}.timeout"
        if not is_int(timeout):
            findings.error(tpath, f"must be a whole number of seconds, got {describe(timeout)}")
        elif timeout < 1:
            findings.error(tpath, f"{timeout} must be at least 1 second")
        elif timeout > maximum:
            findings.error(tpath, f"{timeout} is above the {kind} maximum of {maximum}")
    if "default_resolution" in raw:
        rpath, resolution = f"{path}.default_resolution", raw["default_resolution"]
        if kind != HookHandlerType.GATE:
            findings.error(rpath, "is only allowed on gate hooks")
        elif resolution not in ("allow", "deny"):
            findings.error(rpath, f"{resolution!r} must be 'allow' or 'deny'")


RESPONSE_KEYS = keys_of(LifecycleHookResponse)
INJECTION_KEYS = keys_of(ContextInjection)
MAX_UNKNOWN_KEY_WARNINGS = 10


def check_response(document: Mapping[str, object]) -> tuple[LifecycleHookResponse, list[str]]:
    """An inference.sh answer read as the platform does, and a warning per key it ignores.

    A known key of the wrong shape raises ValidationError."""
    known = {key: value for key, value in document.items() if key in RESPONSE_KEYS}
    unknown = [(str(key), key, RESPONSE_KEYS) for key in document if key not in RESPONSE_KEYS]
    if isinstance(inject := known.get("inject"), dict):
        known["inject"] = {key: value for key, value in inject.items() if key in INJECTION_KEYS}
        unknown += [(f"inject.{k}", k, INJECTION_KEYS) for k in inject if k not in INJECTION_KEYS]
    response = LifecycleHookResponse.model_validate(known)
    warnings = [
        f"{short(printable(path), 60)}: unknown key in the answer, ignored{did_you_mean(key, keys)}"
        for path, key, keys in unknown[:MAX_UNKNOWN_KEY_WARNINGS]
    ]
    if (more := len(unknown) - MAX_UNKNOWN_KEY_WARNINGS) > 0:
        warnings.append(f"… and {more} more unknown keys, ignored")
    return response, warnings


def check_platform_hooks(
    items: Any, base: str = "hooks", *, in_process: bool = False
) -> tuple[Findings, list[LifecycleHookConfig]]:
    """Check an inference.sh ``hooks`` array: findings and, when clean, the models."""
    if not isinstance(items, list):
        return Findings([f"{base}: expected an array of hooks, got {describe(items)}"]), []
    findings = Findings()
    for index, raw in enumerate(items):
        check_platform_hook(raw, f"{base}[{index}]", findings, in_process=in_process)
    return findings, [LifecycleHookConfig.model_validate(raw) for raw in items if findings.ok]


def check_nexus_hooks(
    raw: Any, base: str = "lifecycle_hooks"
) -> tuple[Findings, LifecycleHooks | None]:
    """Check a Nexus ``lifecycle_hooks`` object; return findings and, when clean, the model."""
    if raw is None:
        return Findings(), LifecycleHooks()
    if not isinstance(raw, dict):
        return Findings([f"{base}: expected an object or null, got {describe(raw)}"]), None
    findings = Findings()
    events = [e.value for e in NexusEvent]
    for event, entry in raw.items():
        path = f"{base}.{event}"
        if event not in events:
            near = did_you_mean(event, events)
            findings.error(path, f"unknown event (allowed: {', '.join(events)}){near}")
        if event not in events or entry is None:
            continue
        if not isinstance(entry, dict):
            findings.error(path, f"expected an object, got {describe(entry)}")
            continue
        findings.unknown_keys(entry, NEXUS_HOOK_KEYS, path)
        if (tool := entry.get("tool")) is None:
            findings.error(f"{path}.tool", "is required (the executor tool to run)")
        elif not isinstance(tool, str) or not tool.strip():
            findings.error(f"{path}.tool", "must be a nonblank string")
        limits = {"timeout_ms": ("", 1, TIMEOUT_MS_MAX)}
        if event == NexusEvent.STOP:
            limits["max_continuations"] = (" on stop", 0, MAX_CONTINUATIONS_MAX)
        for key, (where, low, high) in limits.items():
            value, at = entry.get(key), f"{path}.{key}"
            if value is None:
                findings.error(at, f"is required{where} ({low} through {high})")
            elif not is_int(value) or not low <= value <= high:
                findings.error(at, f"{value!r} must be a whole number {low} through {high}")
        if event != NexusEvent.STOP and "max_continuations" in entry:
            findings.error(f"{path}.max_continuations", "is only allowed on stop")
    return findings, LifecycleHooks.model_validate(raw) if findings.ok else None


def check_nexus_profile(raw: Any, base: str = "") -> tuple[Findings, LifecycleHooks | None]:
    """Check a whole Nexus configuration declaration: its hooks and its approval mode."""
    if not isinstance(raw, dict):
        return Findings(
            [f"{base or 'configuration'}: expected an object, got {describe(raw)}"]
        ), None
    prefix = f"{base}." if base else ""
    findings, hooks = check_nexus_hooks(raw.get("lifecycle_hooks"), f"{prefix}lifecycle_hooks")
    if hooks is not None and hooks.declared():
        mode, mpath = raw.get("approval_mode"), f"{prefix}approval_mode"
        if mode is None:
            findings.error(mpath, "is required when the configuration declares lifecycle hooks")
        elif not isinstance(mode, str) or not mode.strip():
            findings.error(mpath, "must be a nonblank string")
    return findings, hooks if findings.ok else None


def check_decision(
    raw: Any, event: NexusEvent | str, base: str = "structured_content"
) -> tuple[Findings, HookDecisionResult | None]:
    """Check a Nexus hook task's decision for ``event``."""
    if not isinstance(raw, dict):
        return Findings([f"{base}: expected an object, got {describe(raw)}"]), None
    findings = Findings()
    for key in raw:
        if key not in DECISION_KEYS:
            near = did_you_mean(key, DECISION_KEYS)
            findings.error(f"{base}.{key}", f"additional result fields are refused{near}")
    cpath, fpath, feedback = f"{base}.continue", f"{base}.feedback", raw.get("feedback")
    if "continue" not in raw:
        findings.error(cpath, "is required (true or false)")
    elif not isinstance(raw["continue"], bool):
        findings.error(cpath, f"must be true or false, got {describe(raw['continue'])}")
    elif raw["continue"]:
        if event != NexusEvent.STOP:
            findings.error(cpath, f"only stop may ask to continue; {event} acknowledges")
        elif feedback is None:
            findings.error(fpath, "is required when continue is true")
        elif not isinstance(feedback, str):
            findings.error(fpath, f"must be a string, got {describe(feedback)}")
        elif not feedback.strip():
            findings.error(fpath, "must be nonblank")
        elif "\x00" in feedback:
            findings.error(fpath, "must not contain NUL")
        elif (size := len(feedback.encode("utf-8"))) > FEEDBACK_MAX_BYTES:
            most = FEEDBACK_MAX_BYTES
            findings.error(fpath, f"is {size} bytes, above the limit of {most} (16 KiB)")
    elif "feedback" in raw:
        findings.error(fpath, "is only allowed with continue: true")
    return findings, HookDecisionResult.model_validate(raw) if findings.ok else None


def format_loc(loc: tuple[int | str, ...], base: str = "") -> str:
    """Render a pydantic error location as a path such as ``turns[0].model[1].say``."""
    path = base
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "(document)"


def model_problems(exc: Any, base: str = "", *, model: Any = None) -> list[str]:
    """A pydantic ValidationError as ``path: rule`` lines (an unknown key of ``model`` hinted)."""
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key"
            if model is not None and loc:
                message += did_you_mean(loc[-1], fields_at(model, loc[:-1]))
        lines.append(f"{format_loc(loc, base)}: {message}")
    return lines


def fields_at(model: Any, loc: tuple[int | str, ...]) -> list[str]:
    """The keys (alias, else name) an object at ``loc`` of ``model`` may hold."""
    kinds = _members(model)
    for part in loc:
        # pydantic names the member of a union it tried
        named = [kind for kind in kinds if _is_model(kind) and kind.__name__ == part]
        kinds = named or [inner for kind in kinds for inner in _members(_step(kind, part))]
    return [key for kind in kinds if _is_model(kind) for key in keys_of(kind)]


def _members(kind: Any) -> list[Any]:
    """The types a value of ``kind`` may be: Annotated unwrapped, unions and optionals split."""
    if kind is None:
        return []
    if get_origin(kind) is Annotated:
        return _members(get_args(kind)[0])
    if get_origin(kind) in (Union, UnionType):
        return [member for arg in get_args(kind) for member in _members(arg)]
    return [kind]


def _step(kind: Any, part: int | str) -> Any:
    """The type of ``part`` (a field, a key or an index) within a value of ``kind``."""
    if _is_model(kind):
        fields = kind.model_fields.items()
        return next((info.annotation for name, info in fields if part in (name, info.alias)), None)
    origin, args = get_origin(kind), get_args(kind)
    if origin in (list, tuple, set, frozenset, Sequence) and args and isinstance(part, int):
        return args[0]
    return args[1] if origin in (dict, Mapping) and len(args) == 2 else None


def _is_model(kind: Any) -> bool:
    return get_origin(kind) is None and isinstance(kind, type) and issubclass(kind, BaseModel)
