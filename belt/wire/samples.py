"""Realistic sample hook payloads, one for every event of the catalogue."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from belt.errors import InvalidInput
from belt.reading.didyoumean import did_you_mean
from belt.store.clock import timestamp, utcnow
from belt.wire.catalogue import EVENTS

SAMPLE_IDS = {"agent_id": "ag_sample01", "chat_id": "ch_sample01", "run_id": "ar_sample01"}
SAMPLE_TURN_COUNT = 3


def sample_payload(event: str, /, **overrides: object) -> dict[str, object]:
    """A LifecycleHookPayload for ``event`` with the data its spec row names; keys overridable."""
    if (info := EVENTS.get(event)) is None:
        raise InvalidInput(
            f"{event!r} is not a lifecycle event (expected one of {', '.join(EVENTS)})"
            f"{did_you_mean(event, EVENTS)}",
            hint="`belt hooks events` lists them",
        )
    return {
        "event": event,
        "timestamp": timestamp(utcnow()),
        **SAMPLE_IDS,
        # agent.start fires on the first turn of a chat, so with turn count 0.
        "turn_count": 0 if event == "agent.start" else SAMPLE_TURN_COUNT,
        "data": copy.deepcopy(info.sample_data),
        **overrides,
    }


def deep_merge(base: dict[str, object], patch: Mapping[str, object]) -> dict[str, object]:
    """A copy of ``base`` with ``patch`` merged in: objects merge key by key, the rest replaces."""
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
