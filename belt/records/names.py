"""How a person names a record on the command line: its id, its short id, or a unique prefix
(``find_id``, the same for every kind; an ambiguous prefix is exit 4 with the candidates).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from belt.errors import Conflict, NotFound
from belt.store import Store, check_id

SHORT_LENGTH = 8


def short_id(record_id: str) -> str:
    """The short id a terminal shows: ``k2m9x0q4`` of ``int_k2m9x0q4h7c1v8b5n3t6``."""
    _, sep, rest = record_id.partition("_")
    return rest[:SHORT_LENGTH] if sep and len(rest) > SHORT_LENGTH else record_id


def names(ref: str, record_id: str) -> bool:
    """True when ``ref`` is a prefix of ``record_id`` or of what follows its ``_``."""
    return record_id.startswith(ref) or record_id.partition("_")[2].startswith(ref)


def find_id(
    store: Store,
    kind: str,
    ref: str,
    *,
    what: str,
    plural: str | None = None,
    first: Callable[[], Iterable[str]] | None = None,
    missing: Callable[[str], NotFound] | None = None,
) -> str:
    """The id of the record of ``kind`` that ``ref`` names (exit 5, 3, or 4); a prefix unique
    among ``first`` ids wins."""
    check_id(ref, what=f"{what} id")
    if store.exists(kind, ref):
        return ref
    if first is not None and (preferred := sorted(i for i in first() if names(ref, i))):
        return _one(ref, preferred, plural or f"{what}s")
    if not (found := sorted(i for i in store.list_ids(kind) if names(ref, i))):
        raise missing(ref) if missing is not None else NotFound(f"no {what} {ref}")
    return _one(ref, found, plural or f"{what}s")


def _one(ref: str, found: list[str], plural: str) -> str:
    if len(found) == 1:
        return found[0]
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise Conflict(
        f"{ref!r} names {len(found)} {plural}: {shown}", hint="give more of the id, or the whole id"
    )


def named_or_given(find: Callable[[Store, str], str], store: Store, ref: str) -> str:
    """The stored record ``ref`` names through ``find`` (exit 4 if several), else ``ref``."""
    try:
        return find(store, ref)
    except NotFound:
        return ref
