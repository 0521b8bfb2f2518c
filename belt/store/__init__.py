"""The embedded store under the state directory: see ``belt.store.store`` and docs/store.md."""

from __future__ import annotations

from belt.paths import state_dir
from belt.store.memory import MemoryStore
from belt.store.store import SCHEMA_VERSION, Store, check_id

__all__ = ["SCHEMA_VERSION", "MemoryStore", "Store", "check_id", "open_store"]


def open_store(store: Store | None = None) -> Store:
    """``store``, or else the store of this state directory (``$BELT_HOME/store``)."""
    return store if store is not None else Store(state_dir() / "store", shapes=True)
