"""The patterns that policies, scenarios, model scripts and expectations match values with.

A pattern is a shell glob, ``re:<regex>`` (RE2, so matching takes time linear in the value) or
``path:<glob>`` (a glob matched against the value read as a POSIX path in normal form) for
strings, else a JSON value to equal (a boolean never equals a number); a table of key paths to
patterns matches an object's values at those paths. Patterns are compiled once, when the file
that holds them is checked; a bad one is reported to that file's findings under its path.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from belt.display.text import describe

REGEX_PREFIX = "re:"
PATH_PREFIX = "path:"

Matcher = Callable[[Any], bool]


class Problems(Protocol):
    """Where a pattern's problem goes (``belt.wire.validate.Findings``): its path and why."""

    def error(self, path: str, rule: str) -> None:
        """Record a problem at ``path``."""


ArgumentMatchers = tuple[tuple[tuple[str, ...], Matcher], ...]


def arguments_match(matchers: ArgumentMatchers, arguments: Any) -> bool:
    """True when every key path of ``matchers`` is in the object ``arguments`` and matches."""
    if not isinstance(arguments, dict):
        return False
    for key_path, matcher in matchers:
        found, value = lookup(arguments, key_path)
        if not found or not matcher(value):
            return False
    return True


def lookup(document: Any, key_path: tuple[str, ...]) -> tuple[bool, Any]:
    """Follow a key path through objects (and arrays, by index); returns (found, value)."""
    current = document
    for part in key_path:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return False, None
    return True, current


def glob(pattern: str) -> re.Pattern[str]:
    """A case-sensitive compiled shell glob (``*``, ``?``, ``[seq]``) matching whole strings."""
    return re.compile(fnmatch.translate(pattern))


def glob_field(
    raw: Mapping[str, object], key: str, path: str, findings: Problems
) -> re.Pattern[str] | None:
    """The glob of ``raw[key]`` (None when absent, or when it is not a string: a problem)."""
    if (value := raw.get(key)) is not None and not isinstance(value, str):
        findings.error(f"{path}.{key}", f"expected a glob pattern string, got {describe(value)}")
    return glob(value) if isinstance(value, str) else None


def normal_path(value: str) -> str:
    """``value`` as a POSIX path in normal form, lexically (``/tmp/../etc`` is ``/etc``)."""
    normal = posixpath.normpath(value)
    # normpath keeps exactly two leading slashes, whose meaning POSIX leaves to the system;
    # Linux and macOS read them as one, so a policy on /etc/* holds for //etc/passwd too.
    return normal[1:] if normal.startswith("//") else normal


def path_pattern_problem(source: str) -> str | None:
    """Why a ``path:`` glob is refused (not in the normal form values are matched in), or None."""
    if not source:
        return f"empty path pattern (write, say, {PATH_PREFIX}/tmp/* for everything under /tmp)"
    if source.startswith(REGEX_PREFIX):
        return f"a path pattern is a glob, not a regex: {PATH_PREFIX}{source}"
    normal = normal_path(source)
    if normal != source:
        return (
            f"path pattern {source!r} is not written in normal form (no //, . or .. segments, "
            f"no trailing /), as the values it is matched against are: write {PATH_PREFIX}{normal}"
        )
    return None


def same_value(expected: Any, actual: Any) -> bool:
    """Equality of JSON values where a boolean never equals a number."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(same_value(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def argument_matchers(value: Any, path: str, findings: Problems) -> ArgumentMatchers:
    """Compile a table of key path → pattern (a rule's ``arguments``); problems to ``findings``."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        findings.error(path, f"expected a table of key path = pattern, got {describe(value)}")
        return ()
    compiled = [
        (key_path, value_matcher(pattern, f"{path}.{'.'.join(key_path)}", findings))
        for key_path, pattern in key_paths(value)
    ]
    return tuple((key_path, matcher) for key_path, matcher in compiled if matcher is not None)


def key_paths(
    table: Mapping[str, object], prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """Dotted keys and nested tables both name key paths: ``"a.b" = 1`` is ``a = { b = 1 }``."""
    pairs: list[tuple[tuple[str, ...], Any]] = []
    for key, value in table.items():
        key_path = prefix + tuple(key.split("."))
        pairs += key_paths(value, key_path) if isinstance(value, dict) else [(key_path, value)]
    return pairs


def compile_regex(source: str) -> Any:
    """A linear-time (RE2: no backtracking) regex; ValueError says why RE2 cannot run ``source``."""
    import re2  # noqa: PLC0415 - a regex rule only

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None


def _found(regex: Any, value: str) -> bool:
    try:
        return regex.search(value) is not None
    except UnicodeEncodeError:
        # RE2 matches UTF-8; a lone surrogate cannot be encoded (strictly parsed payloads never
        # hold one), and a value that is not Unicode text matches no pattern.
        return False


def value_matcher(pattern: Any, path: str, findings: Problems) -> Matcher | None:
    """Compile one pattern (see the module); None when it is refused (to ``findings``)."""
    if isinstance(pattern, str):
        if pattern.startswith(PATH_PREFIX):
            source = pattern[len(PATH_PREFIX) :]
            if (problem := path_pattern_problem(source)) is not None:
                findings.error(path, problem)
                return None
            compiled = glob(source)  # against the normal form of a string value
            return lambda value: isinstance(value, str) and bool(compiled.match(normal_path(value)))
        if pattern.startswith(REGEX_PREFIX):
            source = pattern[len(REGEX_PREFIX) :]
            try:
                regex = compile_regex(source)
            except ValueError as exc:
                findings.error(path, f"bad regex {source!r}: {exc} (RE2 syntax)")
                return None
            return lambda value: isinstance(value, str) and _found(regex, value)
        compiled = glob(pattern)
        return lambda value: isinstance(value, str) and compiled.match(value) is not None
    if isinstance(pattern, bool | int | float | list):
        return lambda value: same_value(pattern, value)
    findings.error(
        path,
        "expected a glob, a re:<regex>, a path:<glob>, a number, a boolean or an array, "
        f"got {describe(pattern)}",
    )
    return None
