"""The Nexus configuration declaration in the store, replaced whole and numbered by a revision,
and the lifecycle hooks rho keeps in ``rho/config.json`` (``rho extensions configure``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

from belt.declaring.declarations import RHO_PLUGIN, check_rho_config, read_document
from belt.errors import InvalidInput
from belt.paths import state_dir
from belt.store.clock import timestamp, utcnow
from belt.store.shapes import record_shape
from belt.wire.validate import check_nexus_profile

if TYPE_CHECKING:
    from belt.store import Store

PROFILE = "profile"
PROFILE_ID = "configuration"
PROFILE_PATH = "/agent_api/v1/profile/configuration"


class Profile(TypedDict):
    """The stored Nexus configuration declaration (kind ``profile``) and its revision."""

    configuration: dict[str, object]
    revision: int
    updated_at: NotRequired[str | None]


record_shape(PROFILE, Profile)


def read_profile(store: Store) -> Profile:
    """The stored declaration with its ``revision`` (0 and ``{}`` when none was stored)."""
    if (record := store.get(PROFILE, PROFILE_ID)) is None:
        return {"configuration": {}, "revision": 0, "updated_at": None}
    return cast(Profile, record)


def write_profile(store: Store, declaration: object) -> Profile:
    """Check and store a whole declaration in place of the last; InvalidInput names each problem."""
    findings, _ = check_nexus_profile(declaration)
    if not findings.ok:
        raise InvalidInput(findings.problems[0], problems=findings.problems[1:])
    configuration = dict(cast(Mapping[str, object], declaration))
    with store.lock(PROFILE, PROFILE_ID):
        revision, at = read_profile(store)["revision"] + 1, timestamp(utcnow())
        record: Profile = {"configuration": configuration, "revision": revision, "updated_at": at}
        store.write(PROFILE, PROFILE_ID, record)
    return record


# -- rho's config file -------------------------------------------------------------------------


def rho_config_path(*, create: bool = False) -> Path:
    """rho's config file in the state directory (which ``create`` makes, 0700, if missing)."""
    return state_dir(create=create) / "rho" / "config.json"


def read_rho_config(path: Path) -> dict[str, object]:
    """rho's whole config file; a file that does not exist yet is empty."""
    if not path.exists():
        return {}
    if not isinstance(doc := read_document(path), dict):
        raise InvalidInput(f"{path}: expected a JSON object", hint="fix or remove the file")
    return doc


@dataclass(frozen=True)
class StoredHooks:
    """The lifecycle_hooks object rho keeps (``{}`` when none is stored) and its config file."""

    configuration: dict[str, object]
    file: Path

    @property
    def location(self) -> str:
        """Where the object is kept, for a person."""
        return f'plugins["{RHO_PLUGIN}"].configuration in {self.file}'

    def origin(self) -> dict[str, str]:
        """Where the hooks came from, for the records (``hooks_from``)."""
        return {"source": "rho", "extension": RHO_PLUGIN, "file": str(self.file)}


def stored_lifecycle_hooks() -> StoredHooks:
    """The lifecycle hooks ``rho extensions configure`` stored, in wire form (``{}`` when none)."""
    path = rho_config_path()
    config = read_rho_config(path)
    if config.get("plugins") is None:
        return StoredHooks({}, path)
    findings, hooks = check_rho_config(config)
    if not findings.ok or hooks is None:
        problems = findings.problems
        raise InvalidInput(
            f"{path}: {problems[0]}",
            problems=problems[1:],
            hint=f"store a valid object with `rho extensions configure {RHO_PLUGIN}`",
        )
    return StoredHooks(hooks.to_wire(), path)
