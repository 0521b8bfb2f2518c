"""Hypothesis strategies for what a platform sends a hook: payloads per event and Nexus inputs.

The shapes follow the wire models; values the spec fixes vary only with ``beyond_spec``. Paths are
attacked where handlers break, those attacks sent first. Only ``belt check`` imports this module.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import operator
import os
import re
import string
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial, reduce
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import configuration
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from belt.reading.matching import PATH_PREFIX, REGEX_PREFIX, value_matcher
from belt.reading.strictjson import MAX_DEPTH
from belt.store.clock import timestamp
from belt.wire.catalogue import EVENTS
from belt.wire.nexus import NexusEvent
from belt.wire.samples import sample_payload
from belt.wire.validate import Findings

ARGUMENTS_MAX_BYTES = 256 * 1024  # a quarter of the 1 MiB body a hook server reads
DEEP_MAX = MAX_DEPTH - 10  # the envelope adds its own levels to the strict reader's MAX_DEPTH
OUTPUT_PREVIEW_MAX_CHARS = 512  # of Nexus's output_preview (bounded at 2 KiB)
ID_CHARS = string.ascii_lowercase + string.digits
TOOL_NAME_CHARS = string.ascii_letters + string.digits + "_-"
TOOL_NAME_MAX = 64  # as the models' function calling takes it
TOOLS = ("delete_file", "read_file", "write_file", "run_shell", "http_request", "search", "finish")
TOOL_RESULT_STATUS = "completed"  # the spec fixes the status of every agent.tool_result
FIXED_TIMESTAMP = "2026-08-11T14:00:00Z"  # the explicit examples' (the spec's): a seed repeats
PATHS = ("/tmp/old.txt", "/etc/passwd", "/tmp/../etc/passwd", "/", "", "~/.ssh/id_rsa", "C:\\")

Strategy = st.SearchStrategy[Any]
T = TypeVar("T")

# Any character but a lone surrogate, from Hypothesis's table of categories: text()'s own
# alphabet comes from its codec's table, 1.5 s of CPU to build on the clock of --max-time.
CHARACTERS = st.characters(exclude_categories=["Cs"])


def texts(min_size: int = 0, max_size: int | None = None) -> st.SearchStrategy[str]:
    """Any text of ``CHARACTERS``."""
    return st.text(CHARACTERS, min_size=min_size, max_size=max_size)


@contextmanager
def hypothesis_home(directory: Path) -> Iterator[None]:
    """Keep Hypothesis's caches in ``directory`` (unless HYPOTHESIS_STORAGE_DIRECTORY is set)."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    before = configuration.storage_directory(intent_to_write=False).home_directory
    configuration.set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(before)


def ids(prefix: str) -> st.SearchStrategy[str]:
    """Ids as the platform writes them: a prefix and lowercase letters and digits."""
    return st.text(alphabet=ID_CHARS, min_size=6, max_size=26).map(lambda tail: prefix + tail)


def timestamps() -> st.SearchStrategy[str]:
    """RFC 3339 UTC timestamps, as ``belt.store.clock.timestamp`` writes them."""
    moments = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2040, 12, 31))
    return moments.map(timestamp)


def json_values(max_leaves: int = 12) -> Strategy:
    """Any JSON value a strict reader takes: no NaN, no infinities, no lone surrogates."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**64)
        | st.floats(allow_nan=False, allow_infinity=False)
        | texts(max_size=40)
    )

    def nested(inner: Strategy) -> Strategy:
        return st.lists(inner, max_size=4) | st.dictionaries(texts(max_size=12), inner, max_size=4)

    return st.recursive(scalars, nested, max_leaves=max_leaves)


def large_text() -> st.SearchStrategy[str]:
    """Text of up to ``ARGUMENTS_MAX_BYTES`` bytes: a piece repeated, to shrink as an integer."""
    return st.builds(
        operator.mul, texts(min_size=1, max_size=4), st.integers(1, ARGUMENTS_MAX_BYTES // 16)
    )


def deep_values() -> Strategy:
    """Objects nested up to ``DEEP_MAX`` levels."""
    nest = lambda depth, leaf: reduce(lambda value, _: {"a": value}, range(depth), leaf)  # noqa: E731
    return st.builds(nest, st.integers(1, DEEP_MAX), json_values(max_leaves=2))


def paths() -> st.SearchStrategy[str]:
    """File paths: well-known ones, built ones, and the attacks on ``DEFAULT_PATH_PATTERN``."""
    known = ("tmp", "etc", "var", "lib", "home", "app", "..", ".", "passwd", "production.db")
    parts = st.sampled_from(known) | texts(min_size=1, max_size=12)
    built = st.lists(parts, max_size=5).map(lambda items: "/" + "/".join(items))
    # The attacks last: Hypothesis shrinks towards the first strategies of a union.
    return (
        st.sampled_from(PATHS) | built | texts(max_size=40) | attacked_paths(DEFAULT_PATH_PATTERN)
    )


DEFAULT_PATH_PATTERN = "/tmp/*"  # the spec's own policy example, when no property names one
GLOB_SPECIAL = "*?["
ELSEWHERE, ELSEWHERE_FROM_ETC = "/etc/passwd", "/root/.ssh/id_rsa"  # where a .. attack leads
# Cyrillic letters drawn as the Latin ones (``/tmр`` with a Cyrillic ``р``).
CYRILLIC = "\u0430\u0441\u0435\u04bb\u0456\u0458\u043e\u0440\u0455\u0445\u0443"
LOOKALIKES = dict(zip("acehijopsxy", CYRILLIC, strict=True))
ATTACK_KINDS = ("..", "prefix", "//", "trailing /", ".", "case", "look-alike")


@dataclass(frozen=True)
class PathShape:
    """A path-shaped pattern taken apart: its literal directory (``/tmp`` of ``/tmp/*``, or
    empty) and a value of the rest (``x``)."""

    base: str
    rest: str

    @property
    def inside(self) -> str:
        """A path the pattern matches (``/tmp/x``)."""
        return f"{self.base}/{self.rest}" if self.base else self.rest


def _glob_example(glob_: str) -> str:
    """A value a glob matches: each wildcard made ``x`` (or a set's first character)."""
    out: list[str] = []
    for token in re.findall(r"\[.[^]]*\]|.", glob_, re.DOTALL):
        if token == "?" or token == "*" and out[-1:] != ["x"]:
            out.append("x")
        elif len(token) > 1:  # a set: its first member, or (negated) one it leaves out
            members = token[1:-1]
            out.append(("y" if "x" in members else "x") if members[0] in "!^" else members[0])
        elif token != "*":
            out.append(token)
    return "".join(out) or "x"


def _regex_literal(source: str) -> str:
    """The literal start of a regex (``/tmp/`` of ``^/tmp/.*``), escapes read."""
    source = source.removeprefix("^")
    head = re.findall(r"^(?:\\[\W_]|[^\\.^$*+?{}[\]|()])*", source, re.DOTALL)[0]
    out = [token[-1] for token in re.findall(r"\\?.", head, re.DOTALL)]
    # A quantifier binds the character before it: "/tmp?" says nothing sure of its "p".
    if source[len(head) :][:1] in ("*", "?", "{") and out:
        out.pop()
    return "".join(out)


def path_shape(pattern: Any) -> PathShape | None:
    """The shape of a path-shaped pattern (``path:``, a glob or ``re:`` with a ``/``), else None."""
    if not isinstance(pattern, str):
        return None
    if pattern.startswith(REGEX_PREFIX):
        literal = _regex_literal(pattern[len(REGEX_PREFIX) :])
        return PathShape(literal.rpartition("/")[0], "x") if "/" in literal else None
    glob_ = pattern.removeprefix(PATH_PREFIX)
    if glob_ == pattern and "/" not in pattern:
        return None
    first = min((i for i in map(glob_.find, GLOB_SPECIAL) if i != -1), default=len(glob_))
    cut = glob_.rfind("/", 0, first)  # -1: no directory, the whole glob is the rest
    return PathShape(glob_[: max(cut, 0)], _glob_example(glob_[cut + 1 :]))


def _lookalike(text: str) -> str:
    """``text`` with its last letter that has a Cyrillic double, else its last letter, swapped."""
    fullwidth = {letter: chr(ord(letter) + 0xFEE0) for letter in string.ascii_letters}
    for doubles in (LOOKALIKES, fullwidth):
        index = max((i for i, char in enumerate(text) if char in doubles), default=-1)
        if index >= 0:
            return text[:index] + doubles[text[index]] + text[index + 1 :]
    return text


def _capitalised(path: str) -> str:
    """The last segment of ``path`` with its first letter in the other case."""
    head, _, last = path.rpartition("/")
    return f"{head}/{last[:1].swapcase()}{last[1:]}" if last else path


def attacks_of(shape: PathShape) -> dict[str, list[str]]:
    """Values that look inside a path pattern, or outside it, and are not; by ``ATTACK_KINDS``."""
    base, rest, inside = shape.base, shape.rest, shape.inside
    away = ELSEWHERE_FROM_ETC if base.startswith("/etc") else ELSEWHERE
    if not base:
        # No directory to escape from: the same kinds on a value the pattern matches.
        return {
            "..": [f"{inside}/../..{away}", f"{inside}/.."],
            "prefix": [],
            "//": [inside.replace("/", "//", 1) if "/" in inside else f"/{inside}"],
            "trailing /": [f"{inside}/"],
            ".": [f"./{inside}"],
            "case": [inside.upper()] if inside.upper() != inside else [],
            "look-alike": [_lookalike(inside)] if _lookalike(inside) != inside else [],
        }
    cased = [f"{b}/{rest}" for b in dict.fromkeys((base.upper(), _capitalised(base))) if b != base]
    lookalike = _lookalike(base)
    return {
        "..": [f"{base}/..{away}", f"{inside}/../..{away}", f"{inside}/..", f"{base}/.."],
        "prefix": [f"{base}evil/{rest}", base, f"{base}{rest}"],
        "//": [f"{base}//{rest}", f"/{inside}", f"{base}//..{away}"],
        "trailing /": [f"{base}/", f"{inside}/", f"{inside}//"],
        ".": [f"{base}/./{rest}", f"{base}/.", f"/.{inside}", f"{base}/./..{away}"],
        "case": cased,
        "look-alike": [
            *([f"{lookalike}/{rest}"] if lookalike != base else []),
            # fullwidth solidi, fullwidth full stops, a division slash
            f"{base}/..{away}".replace("/", "\uff0f").replace("\uff0f", "/", 1),
            f"{base}/\uff0e\uff0e{away}",
            f"{base}\u2215{rest}",
        ],
    }


def _interleaved(groups: Iterable[list[T]]) -> list[T]:
    """The first of each group, then the second of each, …"""
    return [item for row in itertools.zip_longest(*groups) for item in row if item is not None]


def path_attacks(pattern: Any) -> list[str]:
    """The attacks on a path-shaped pattern, each kind's first before any kind's second."""
    if (shape := path_shape(pattern)) is None:
        return []
    return list(dict.fromkeys(_interleaved(attacks_of(shape).values())))


def attacked_paths(pattern: Any) -> st.SearchStrategy[str]:
    """The attacks on a path-shaped pattern, and each kind again on other values of its rest."""
    if (shape := path_shape(pattern)) is None:
        return st.nothing()
    rests = st.text(alphabet=ID_CHARS + "._-", min_size=1, max_size=12) | st.just(shape.rest)
    again = st.builds(
        lambda kind, rest: attacks_of(PathShape(shape.base, rest))[kind],
        st.sampled_from(ATTACK_KINDS),
        rests,
    )
    return st.sampled_from(path_attacks(pattern)) | again.filter(bool).flatmap(st.sampled_from)


def argument_values() -> Strategy:
    """What one tool argument may hold."""
    return paths() | json_values() | large_text() | deep_values()


def arguments() -> st.SearchStrategy[dict[str, object]]:
    """A tool call's arguments: the common keys, each there or not, and any others."""
    text = texts(max_size=80)
    known = st.fixed_dictionaries(
        {},
        optional={
            "path": paths(),
            "command": text | large_text(),
            "url": st.sampled_from(("https://example.com/", "http://127.0.0.1/", "")) | text,
            "content": text | large_text(),
            "query": text,
            "recursive": st.booleans() | json_values(),
        },
    )
    others = st.dictionaries(texts(max_size=16), argument_values(), max_size=4)
    return st.builds(lambda known, other: {**other, **known}, known, others).filter(
        # several large values can pass ARGUMENTS_MAX_BYTES together
        lambda value: len(json.dumps(value, ensure_ascii=False).encode()) <= ARGUMENTS_MAX_BYTES
    )


def is_tool_name(value: Any) -> bool:
    """True for a tool name the platform sends: 1 to ``TOOL_NAME_MAX`` characters."""
    return isinstance(value, str) and 0 < len(value) <= TOOL_NAME_MAX


def tool_names(*, beyond_spec: bool = False) -> st.SearchStrategy[str]:
    """Tool names: common ones and any of ``TOOL_NAME_CHARS`` (``beyond_spec``: any text)."""
    named = st.text(alphabet=TOOL_NAME_CHARS, min_size=1, max_size=TOOL_NAME_MAX)
    names = st.sampled_from(TOOLS) | named
    if beyond_spec:
        return names | st.just("") | texts(max_size=TOOL_NAME_MAX * 2)
    return names


def event_data(event: str, *, beyond_spec: bool = False) -> Strategy:
    """The ``data`` of ``event`` with the fields its spec row names."""
    names, said = tool_names(beyond_spec=beyond_spec), texts(max_size=200) | large_text()
    if event == "agent.tool_call":
        return st.fixed_dictionaries({"tool": names, "arguments": arguments()})
    if event == "agent.tool_result":
        # completed, as the spec fixes it; beyond_spec, also failed and any text
        statuses = st.sampled_from((TOOL_RESULT_STATUS, "failed", "")) | texts(max_size=12)
        status = statuses if beyond_spec else st.just(TOOL_RESULT_STATUS)
        return st.fixed_dictionaries({"tool": names, "status": status, "result": said})
    if event == "agent.error":
        return st.fixed_dictionaries({"error": said})
    return st.just({})


def envelope(event: str, data: Strategy) -> st.SearchStrategy[dict[str, object]]:
    """A LifecycleHookPayload of ``event`` with ``data`` (left out or empty when it has none)."""
    required: dict[str, Strategy] = {
        "event": st.just(event),
        "timestamp": timestamps(),
        "agent_id": ids("ag_"),
        "chat_id": ids("ch_"),
        "run_id": ids("ar_"),
        # agent.start fires on the first turn of a chat, with turn count 0.
        "turn_count": st.just(0) if event == "agent.start" else st.integers(0, 10_000),
    }
    if EVENTS[event].data_fields:
        return st.fixed_dictionaries({**required, "data": data})
    return st.fixed_dictionaries(required, optional={"data": data})


def payloads(event: str, *, beyond_spec: bool = False) -> st.SearchStrategy[dict[str, object]]:
    """Payloads of one inference.sh event (``beyond_spec``: what the platform does not send)."""
    return envelope(event, event_data(event, beyond_spec=beyond_spec))


spec_sample = sample_payload
"""The spec's own sample of an event (``belt trigger`` sends it too)."""


def _task_input(
    event: str, run: str, source: str, conversation: str | None, **extra: Any
) -> dict[str, object]:
    task: dict[str, object] = {"event": event, "task_key": f"{run}:{event}:{source}"}
    task |= {"run_public_id": run, "conversation_public_id": conversation}
    return task | {key: value for key, value in extra.items() if value is not None}


def _preview(text: str) -> dict[str, object]:
    return {"output_preview": text, "output_size_bytes": len(text.encode("utf-8"))}


def nexus_inputs(event: str) -> st.SearchStrategy[dict[str, object]]:
    """Hook task inputs of one Nexus boundary (``stop``'s preview, ``pre_compact``'s trigger)."""
    sources = st.sampled_from(("input", "mail", "regeneration", "answer-1", "compaction-1"))
    base: dict[str, Strategy] = {
        "run": ids("run_"),
        "source": sources | st.text(alphabet=ID_CHARS + "-", min_size=1, max_size=20),
        "conversation": st.none() | ids("conv_"),
    }
    build = partial(_task_input, event)
    extra: Strategy = st.just({})  # what the boundary adds to the task input
    if event == NexusEvent.STOP:
        extra = texts(max_size=OUTPUT_PREVIEW_MAX_CHARS).map(_preview)
    if event == NexusEvent.PRE_COMPACT:
        by_tokens = st.fixed_dictionaries(
            {
                "compaction_trigger": st.just("token_limit"),
                "overshoot_bytes": st.integers(0, 10**7),
                "overshoot_tokens": st.integers(1, 10**6),
            }
        )
        by_bytes = st.fixed_dictionaries(
            {"compaction_trigger": st.just("byte_limit"), "overshoot_bytes": st.integers(1, 10**7)}
        )
        extra = (st.none() | by_tokens | by_bytes).map(lambda trigger: trigger or {})
    return st.builds(lambda extra, **rest: {**build(**rest), **extra}, extra=extra, **base)


def nexus_sample(event: str) -> dict[str, object]:
    """A hook task input of ``event`` as the spec describes it."""
    source = "answer-1" if event == NexusEvent.STOP else "input"
    task = _task_input(event, "run_sample01", source, "conv_sample01")
    if event == NexusEvent.STOP:
        task.update(_preview("Done."))
    if event == NexusEvent.PRE_COMPACT:
        task.update(compaction_trigger="byte_limit", overshoot_bytes=2048)
    return task


def matching_text(pattern: str, alphabet: Any = CHARACTERS) -> st.SearchStrategy[str]:
    """Strings a pattern matches, of ``alphabet`` (a string of it gets the pattern's literals).

    A regex Python cannot read steers nothing."""
    pattern = pattern.removeprefix(PATH_PREFIX)
    regex, source = pattern.startswith(REGEX_PREFIX), pattern.removeprefix(REGEX_PREFIX)
    if isinstance(alphabet, str):
        literal = set(_regex_literal(source)) if regex else set(pattern) - set(GLOB_SPECIAL + "]!")
        alphabet = "".join(sorted(set(alphabet) | literal))
    if regex:
        try:
            re.compile(source)
        except re.error:
            return texts(max_size=40)
        strategy = st.from_regex(source, alphabet=alphabet)
    else:
        strategy = st.from_regex(fnmatch.translate(pattern), fullmatch=True, alphabet=alphabet)
    try:
        strategy.validate()
    except InvalidArgument:  # a class of the regex that holds no character of the alphabet
        return matching_text(pattern, CHARACTERS) if alphabet is not CHARACTERS else st.nothing()
    return strategy


def matching(pattern: Any) -> Strategy:
    """Values a pattern matches: strings for a string pattern, the value itself otherwise."""
    return matching_text(pattern) if isinstance(pattern, str) else st.just(pattern)


def example_text(pattern: str) -> str:
    """One string a glob, ``path:`` or ``re:`` pattern matches, made without drawing."""
    if pattern.startswith(REGEX_PREFIX):
        return _regex_literal(pattern[len(REGEX_PREFIX) :]) + "x"
    return shape.inside if (shape := path_shape(pattern)) else _glob_example(pattern)


def example_tool(pattern: str | None) -> str | None:
    """A tool name a property's tool pattern matches (``delete_file`` without one), or None."""
    if pattern is None:
        return TOOLS[0]
    fits = value_matcher(pattern, "tool", Findings()) or (lambda name: False)  # as the property's
    return next((n for n in (example_text(pattern), *TOOLS) if is_tool_name(n) and fits(n)), None)


ABSENT = object()  # a key path left out of the generated arguments


def _placed(base: dict[str, object], placed: dict[tuple[str, ...], Any]) -> dict[str, object]:
    result = dict(base)
    for key_path, value in placed.items():
        if value is ABSENT:
            continue
        current = result
        for part in key_path[:-1]:
            child = current.get(part)
            if not isinstance(child, dict):
                child = current[part] = {}
            current = child
        current[key_path[-1]] = value
    return result


def steered_arguments(
    wanted: dict[tuple[str, ...], Any], unless: dict[tuple[str, ...], Any]
) -> st.SearchStrategy[dict[str, object]]:
    """Arguments whose key paths get values the property's patterns match (``wanted``), or may
    (``unless``, or be left out), or attacks."""
    placed: dict[tuple[str, ...], Strategy] = {}
    for key_path, pattern in wanted.items():
        placed[key_path] = matching(pattern) | argument_values() | attacked_paths(pattern)
    for key_path, pattern in unless.items():
        others = placed.get(key_path, argument_values())
        placed[key_path] = matching(pattern) | others | st.just(ABSENT) | attacked_paths(pattern)
    return st.builds(_placed, arguments(), st.fixed_dictionaries(placed))


def steered_payloads(
    event: str,
    tool: str | None,
    wanted: dict[tuple[str, ...], Any],
    unless: dict[tuple[str, ...], Any],
    *,
    beyond_spec: bool = False,
) -> st.SearchStrategy[dict[str, object]]:
    """Payloads of ``event`` steered to a property: its tool pattern and argument patterns."""
    if event != "agent.tool_call":
        return payloads(event, beyond_spec=beyond_spec)
    names = tool_names(beyond_spec=beyond_spec)
    if tool is not None:  # the names its tool pattern matches, then any others
        matched = matching_text(tool, TOOL_NAME_CHARS)
        names = (matched if beyond_spec else matched.filter(is_tool_name)) | names
    data = st.fixed_dictionaries({"tool": names, "arguments": steered_arguments(wanted, unless)})
    return envelope(event, data)


def attack_payloads(
    event: str,
    tool: str | None = None,
    wanted: dict[tuple[str, ...], Any] | None = None,
    unless: dict[tuple[str, ...], Any] | None = None,
) -> list[dict[str, object]]:
    """The payloads a check sends first: a tool call per attack on each path-shaped pattern.

    The other key paths hold values their patterns match, so that the attack alone decides."""
    if event != "agent.tool_call" or (name := example_tool(tool)) is None:
        return []
    if tool is None and not wanted and not unless:
        wanted = {("path",): DEFAULT_PATH_PATTERN}
    patterns = [*(wanted or {}).items(), *(unless or {}).items()]
    attacks: dict[tuple[str, ...], list[str]] = {}
    for key_path, pattern in patterns:
        found = attacks.setdefault(key_path, [])
        found += [value for value in path_attacks(pattern) if value not in found]
    others = {key_path: example_text(p) if isinstance(p, str) else p for key_path, p in patterns}
    turns = _interleaved([[(key_path, v) for v in values] for key_path, values in attacks.items()])
    return [
        sample_payload(
            event,
            timestamp=FIXED_TIMESTAMP,
            data={"tool": name, "arguments": _placed({}, {**others, key_path: value})},
        )
        for key_path, value in turns
    ]
