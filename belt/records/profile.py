"""The Nexus configuration declaration in the store (PUT /agent_api/v1/profile/configuration).

One declaration per state directory, replaced whole on every write and numbered by a revision, so
an execution can record which profile it captured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from belt.errors import InvalidInput
from belt.store.clock import timestamp, utcnow
from belt.store.shapes import record_shape
from belt.wire.validate import check_nexus_profile

if TYPE_CHECKING:
    from belt.store import Store

PROFILE = "profile"
PROFILE_ID = "configuration"
PROFILE_PATH = "/agent_api/v1/profile/configuration"
"""The route of the profile API that reads and replaces the whole declaration."""


class Profile(TypedDict):
    """The stored Nexus configuration declaration (kind ``profile``) and its revision."""

    configuration: dict[str, Any]
    revision: int
    updated_at: NotRequired[str | None]


record_shape(PROFILE, Profile)


def read_profile(store: Store) -> Profile:
    """The stored declaration with its ``revision`` (0 and ``{}`` when none was stored)."""
    record = store.get(PROFILE, PROFILE_ID)
    if record is None:
        return {"configuration": {}, "revision": 0, "updated_at": None}
    return cast(Profile, record)


def check_profile(declaration: Any) -> dict[str, Any]:
    """Check a whole declaration; InvalidInput names every problem's path."""
    findings, _ = check_nexus_profile(declaration)
    if not findings.ok:
        problems = findings.problems
        raise InvalidInput(problems[0], problems=problems[1:])
    return dict(declaration)


def write_profile(store: Store, declaration: Any) -> Profile:
    """Check and store a whole declaration, replacing the previous one; returns the record."""
    configuration = check_profile(declaration)
    with store.lock(PROFILE, PROFILE_ID):
        revision = read_profile(store)["revision"] + 1
        record: Profile = {
            "configuration": configuration,
            "revision": revision,
            "updated_at": timestamp(utcnow()),
        }
        store.write(PROFILE, PROFILE_ID, dict(record))
    return record
