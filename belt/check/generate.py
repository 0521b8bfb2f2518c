"""Hypothesis strategies for what a platform sends a hook: payloads per event and Nexus inputs.

Everything here is built from Hypothesis's own strategies (``fixed_dictionaries``, ``recursive``,
``from_regex``, ``builds``), so its engine generates the values and shrinks the failures. The
shapes follow the wire models (``LifecycleHookPayload``, ``HookTaskInput``): realistic ids and
RFC 3339 timestamps, ``data`` as each event's row of the spec names it, tool arguments from
empty to ``ARGUMENTS_MAX_BYTES``, any Unicode, nesting to near the strict reader's limit.

This module imports Hypothesis at its top: only ``belt check`` imports it, inside the function
that runs the checks, so no other command pays for it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import string
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import configuration
from hypothesis import strategies as st

from belt.matching import PATH_PREFIX, REGEX_PREFIX
from belt.samples import sample_payload
from belt.store.clock import timestamp
from belt.strictjson import MAX_DEPTH
from belt.wire.catalogue import EVENTS
from belt.wire.nexus import NexusEvent

ARGUMENTS_MAX_BYTES = 256 * 1024
"""The largest tool arguments generated: a quarter of the 1 MiB body a hook server reads."""

DEEP_MAX = MAX_DEPTH - 10
"""The deepest nesting generated in arguments: the envelope adds its own levels, and the whole
payload must stay within the strict reader's ``MAX_DEPTH``."""

OUTPUT_PREVIEW_MAX_CHARS = 512
"""Nexus ``output_preview`` is bounded (2 KiB); up to this many characters are generated."""

ID_CHARS = string.ascii_lowercase + string.digits
TOOLS = ("delete_file", "read_file", "write_file", "run_shell", "http_request", "search", "finish")
PATHS = ("/tmp/old.txt", "/etc/passwd", "/tmp/../etc/passwd", "/", "", "~/.ssh/id_rsa", "C:\\")
PATH_PARTS = ("tmp", "etc", "var", "lib", "home", "app", "..", ".", "passwd", "production.db")

Strategy = st.SearchStrategy[Any]

CHARACTERS = st.characters(exclude_categories=["Cs"])
"""Any character but a lone surrogate: the alphabet of Hypothesis's own ``text()`` (its UTF-8
codec), taken from its table of Unicode categories (a tenth of a second to build), not from the
table of what the codec encodes, which costs 1.5 s of CPU to build the first time in a state
directory (in CI, every time), on the clock of ``--max-time``."""


def texts(min_size: int = 0, max_size: int | None = None) -> st.SearchStrategy[str]:
    """Any text of ``CHARACTERS``."""
    return st.text(CHARACTERS, min_size=min_size, max_size=max_size)


@contextmanager
def hypothesis_home(directory: Path) -> Iterator[None]:
    """Keep Hypothesis's caches (its Unicode tables, the constants it collects from the code)
    in ``directory`` for the block, never in the working directory, and put back the home it
    had (a test session's own); ``HYPOTHESIS_STORAGE_DIRECTORY``, when set, is left to rule."""
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
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(texts(max_size=12), inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def _repeated(piece: str, count: int) -> str:
    return piece * count


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def large_text() -> st.SearchStrategy[str]:
    """Text up to a quarter of ``ARGUMENTS_MAX_BYTES`` characters (a character is up to 4
    bytes): a short piece repeated, so its length shrinks as one integer does."""
    return st.builds(
        _repeated, texts(min_size=1, max_size=4), st.integers(1, ARGUMENTS_MAX_BYTES // 16)
    )


def deep_values() -> Strategy:
    """Objects nested up to ``DEEP_MAX`` levels."""
    return st.builds(_nested, st.integers(1, DEEP_MAX), json_values(max_leaves=2))


def paths() -> st.SearchStrategy[str]:
    """File paths: well-known ones, and paths of known and arbitrary parts."""
    parts = st.sampled_from(PATH_PARTS) | texts(min_size=1, max_size=12)
    built = st.lists(parts, max_size=5).map(lambda items: "/" + "/".join(items))
    return st.sampled_from(PATHS) | built | texts(max_size=40)


def argument_values() -> Strategy:
    """What one tool argument may hold."""
    return paths() | json_values() | large_text() | deep_values()


def _merged(known: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    return {**other, **known}


def arguments() -> st.SearchStrategy[dict[str, Any]]:
    """A tool call's arguments: the common keys (each there or not) with values of their kind,
    and any other keys with any values; empty, small, large, deep."""
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
    return st.builds(_merged, known, others).filter(_within_limit)


def _within_limit(value: dict[str, Any]) -> bool:
    """True when ``value`` encodes to at most ``ARGUMENTS_MAX_BYTES`` (several large values can
    pass it together)."""
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8")) <= ARGUMENTS_MAX_BYTES


def tool_names() -> st.SearchStrategy[str]:
    """Tool names: common ones and any nonempty text."""
    return st.sampled_from(TOOLS) | texts(min_size=1, max_size=64)


def event_data(event: str) -> Strategy:
    """The ``data`` of ``event`` with the fields its spec row names."""
    if event == "agent.tool_call":
        return st.fixed_dictionaries({"tool": tool_names(), "arguments": arguments()})
    if event == "agent.tool_result":
        return st.fixed_dictionaries(
            {
                "tool": tool_names(),
                "status": st.sampled_from(("completed", "failed")) | texts(max_size=12),
                "result": texts(max_size=200) | large_text(),
            }
        )
    if event == "agent.error":
        return st.fixed_dictionaries({"error": texts(max_size=200) | large_text()})
    return st.just({})


def envelope(event: str, data: Strategy) -> st.SearchStrategy[dict[str, Any]]:
    """A LifecycleHookPayload of ``event`` with ``data``; an event without data fields may come
    with ``data`` empty or left out."""
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


def payloads(event: str) -> st.SearchStrategy[dict[str, Any]]:
    """Payloads of one inference.sh event."""
    return envelope(event, event_data(event))


def spec_sample(event: str) -> dict[str, Any]:
    """The spec's own sample of ``event`` (``belt trigger`` sends it too)."""
    return sample_payload(event)


# -- Nexus ----------------------------------------------------------------------------------------


def _task_input(event: str) -> Callable[..., dict[str, Any]]:
    def build(run: str, source: str, conversation: str | None, **extra: Any) -> dict[str, Any]:
        task = {
            "event": event,
            "task_key": f"{run}:{event}:{source}",
            "run_public_id": run,
            "conversation_public_id": conversation,
        }
        task.update({key: value for key, value in extra.items() if value is not None})
        return task

    return build


def _preview(text: str) -> dict[str, Any]:
    return {"output_preview": text, "output_size_bytes": len(text.encode("utf-8"))}


def nexus_inputs(event: str) -> st.SearchStrategy[dict[str, Any]]:
    """Hook task inputs of one Nexus boundary: ``stop`` with a bounded ``output_preview``,
    ``pre_compact`` with or without a mid-turn ``compaction_trigger`` and its overshoot."""
    sources = st.sampled_from(("input", "mail", "regeneration", "answer-1", "compaction-1"))
    base: dict[str, Strategy] = {
        "run": ids("run_"),
        "source": sources | st.text(alphabet=ID_CHARS + "-", min_size=1, max_size=20),
        "conversation": st.none() | ids("conv_"),
    }
    build = _task_input(event)
    if event == NexusEvent.STOP:
        return st.builds(
            lambda preview, **rest: {**build(**rest), **_preview(preview)},
            preview=texts(max_size=OUTPUT_PREVIEW_MAX_CHARS),
            **base,
        )
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
        mid_turn = st.none() | by_tokens | by_bytes
        return st.builds(
            lambda trigger, **rest: {**build(**rest), **(trigger or {})}, trigger=mid_turn, **base
        )
    return st.builds(build, **base)


def nexus_sample(event: str) -> dict[str, Any]:
    """A hook task input of ``event`` as the spec describes it."""
    run = "run_sample01"
    task = _task_input(event)(run, "input", "conv_sample01")
    if event == NexusEvent.STOP:
        task = {**_task_input(event)(run, "answer-1", "conv_sample01"), **_preview("Done.")}
    if event == NexusEvent.PRE_COMPACT:
        task.update(compaction_trigger="byte_limit", overshoot_bytes=2048)
    return task


# -- steering towards a property ------------------------------------------------------------------


def matching_text(pattern: str) -> st.SearchStrategy[str]:
    """Strings a pattern (a glob, ``re:`` and a regex, or ``path:`` and a glob) matches, its
    literal parts reused; a regex Python cannot read steers nothing (any text)."""
    pattern = pattern.removeprefix(PATH_PREFIX)
    if pattern.startswith(REGEX_PREFIX):
        source = pattern[len(REGEX_PREFIX) :]
        try:
            re.compile(source)
        except re.error:
            return texts(max_size=40)
        return st.from_regex(source, alphabet=CHARACTERS)
    return st.from_regex(fnmatch.translate(pattern), fullmatch=True, alphabet=CHARACTERS)


def matching(pattern: Any) -> Strategy:
    """Values a pattern matches: strings for a string pattern, the value itself otherwise."""
    if isinstance(pattern, str):
        return matching_text(pattern)
    return st.just(pattern)


ABSENT = object()
"""A key path left out of the generated arguments."""


def _placed(base: dict[str, Any], placed: dict[tuple[str, ...], Any]) -> dict[str, Any]:
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
) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments whose key paths get values the property's patterns match (``wanted``), and,
    at its ``unless`` paths, values that match those patterns or not (or are left out)."""
    placed: dict[tuple[str, ...], Strategy] = {}
    for key_path, pattern in wanted.items():
        placed[key_path] = matching(pattern) | argument_values()
    for key_path, pattern in unless.items():
        others = placed.get(key_path, argument_values())
        placed[key_path] = matching(pattern) | others | st.just(ABSENT)
    paths_ = list(placed)
    values = st.tuples(*(placed[key_path] for key_path in paths_))
    return st.builds(
        lambda base, chosen: _placed(base, dict(zip(paths_, chosen, strict=True))),
        arguments(),
        values,
    )


def steered_payloads(
    event: str,
    tool: str | None,
    wanted: dict[tuple[str, ...], Any],
    unless: dict[tuple[str, ...], Any],
) -> st.SearchStrategy[dict[str, Any]]:
    """Payloads of ``event`` steered to a property: its tool pattern and argument patterns."""
    if event != "agent.tool_call":
        return payloads(event)
    names = (matching_text(tool) | tool_names()) if tool is not None else tool_names()
    data = st.fixed_dictionaries({"tool": names, "arguments": steered_arguments(wanted, unless)})
    return envelope(event, data)
