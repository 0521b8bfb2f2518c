"""The local registry of what a team knows (knowledge, skills, apps), for belt:suggest and extract.

An entry (kind ``registry-entry``, listed in ``registry-entries/<owner>``) keeps every version of
its text and where each came from. docs/builtins.md gives the rules (ranking, relevance, same
meaning, the directory format). A change is made under the owner's lock: the store's objects,
then the entry index (an append), then the search index (``belt.records.registry_index``), which
records the entry index's size it reflects; a reader that finds another size rebuilds it.
"""

from __future__ import annotations

import re
import sys
import tomllib
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing, suppress
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, TypeVar, cast

from belt.errors import BeltError, InvalidInput, NotFound, UsageError
from belt.reading.didyoumean import did_you_mean
from belt.reading.inputs import read_bytes
from belt.records.ids import new_id
from belt.records.names import find_id
from belt.records.registry_index import (
    IndexDamaged,
    Row,
    SearchIndex,
    Stale,
    discard,
    forget,
    query_phrases,
    query_words,
    reader,
)
from belt.store import Store, check_id, open_store
from belt.store.clock import timestamp, utcnow
from belt.store.shapes import derive, fits

DEFAULT_OWNER = "local"
"""The team a local registry belongs to, and a scenario's agent unless it names another."""

KINDS = tuple("observation concept rule preference gotcha pattern reference skill app".split())
"""Every kind of entry: knowledge (what a review saves), skills and apps."""

ENTRY = "registry-entry"
ENTRIES = "registry-entries"
_OWNER_LOCK = "registry-owner"


class EntryVersion(TypedDict):
    """One version of an entry, as it was saved."""

    version: int
    kind: str
    tags: list[str]
    text: str
    created_at: str
    origin: dict[str, str]
    """``Origin.to_json``: ``by`` a person (its ``source``) or an agent (``agent``, ``chat``,
    ``branch``)."""


class RegistryEntry(TypedDict):
    """One entry (kind ``registry-entry``): its latest version's fields and every version.
    ``_checked`` derives its field checks from this, in this order (its identity first)."""

    id: str
    owner: str
    name: str
    kind: str
    text: str
    tags: list[str]
    versions: list[EntryVersion]
    origin: dict[str, str]
    created_at: str
    updated_at: str
    version: int
    removed_at: NotRequired[str | None]


MAX_NAME_CHARS = 120
MAX_TAGS = 20
MAX_TAG_CHARS = 40
MAX_TEXT_CHARS = 20_000
MAX_SOURCE_CHARS = 1_000
MAX_DIRECTORY_FILES = 1_000
MAX_LIMIT = 100

MIN_SHARED_TERMS = 2
"""A suggestion shares this many distinct terms with the prompt (or all of a shorter one's)."""

FILE_KEYS = ("name", "kind", "tags", "text")

CANDIDATE_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
        "kind": {"type": "string", "enum": list(KINDS)},
        "tags": {
            "type": "array",
            "maxItems": MAX_TAGS,
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS},
        },
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS},
    },
    "required": ["name", "kind", "text"],
    "additionalProperties": False,
}
"""The keys and limits ``check_candidate`` applies, as JSON Schema."""
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode's category Cc, all of it

Action = Literal["created", "versioned", "skipped"]
T = TypeVar("T")


@dataclass(frozen=True)
class Origin:
    """Where a version came from: a person (by hand or from a file) or an agent's review."""

    by: Literal["person", "agent"]
    source: str | None = None
    agent: str | None = None
    chat: str | None = None
    branch: str | None = None

    @classmethod
    def person(cls, source: str = "cli") -> Origin:
        """Added by a person, through ``source``: ``cli`` or the file it was loaded from."""
        if not isinstance(source, str) or not source or len(source) > MAX_SOURCE_CHARS:
            raise InvalidInput(f"origin source: 1 to {MAX_SOURCE_CHARS} characters")
        return cls(by="person", source=source)

    @classmethod
    def extraction(cls, *, agent: str, chat: str, branch: str) -> Origin:
        """Extracted by ``agent``'s review of ``chat``, in the review branch ``branch``."""
        for value, what in ((agent, "agent id"), (chat, "chat id"), (branch, "branch id")):
            check_id(value, what=what)
        return cls(by="agent", agent=agent, chat=chat, branch=branch)

    def to_json(self) -> dict[str, str]:
        """The origin as stored: its fields that are set."""
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class Candidate:
    """An entry to save, checked by ``make_candidate`` or ``check_candidate``."""

    name: str
    kind: str
    text: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class SaveOutcome:
    """What saving a candidate did, to which entry, and its version afterwards."""

    action: Action
    id: str
    name: str
    kind: str
    version: int

    def to_json(self) -> dict[str, object]:
        """The outcome as ``--json`` prints it and a review's record lists it."""
        return asdict(self)

    @classmethod
    def of(cls, action: Action, entry: RegistryEntry) -> SaveOutcome:
        """What ``action`` left ``entry`` as."""
        return cls(action, entry["id"], entry["name"], entry["kind"], entry["version"])


@dataclass(frozen=True)
class Loaded:
    """One file of a registry directory and what loading it did."""

    file: str
    outcome: SaveOutcome

    def to_json(self) -> dict[str, object]:
        """The file and its outcome."""
        return {"file": self.file, **self.outcome.to_json()}


@dataclass(frozen=True)
class Match:
    """An entry found for a query: its BM25 score (higher is better) and shared terms."""

    id: str
    name: str
    kind: str
    tags: tuple[str, ...]
    version: int
    relevance: float
    """The score as a share of the query's best, 0 to 1 (BM25 scores have no fixed scale)."""
    score: float
    matched_terms: int
    query_terms: int
    text: str

    def to_json(self) -> dict[str, object]:
        """The match as ``--json`` prints it (its fields in order, tags as a list)."""
        return {**asdict(self), "tags": list(self.tags)}


def normalise(text: str) -> str:
    """``text`` compared for identity: NFKC, case-folded, whitespace runs made one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def same_meaning(a: str, b: str) -> bool:
    """True when two texts are identical after ``normalise``: a new version would add nothing."""
    return normalise(a) == normalise(b)


def check_candidate(raw: Mapping[str, object], *, where: str) -> Candidate:
    """A candidate from a mapping; InvalidInput (exit 5) lists each ``WHERE: KEY: why``."""
    problems: list[str] = []
    if (candidate := _candidate(raw, where, problems)) is not None:
        return candidate
    if not where and len(problems) == 1:
        raise InvalidInput(problems[0])
    message = f"{where}: not a valid registry entry" if where else "not a valid registry entry"
    raise InvalidInput(message, problems=problems)


def make_candidate(*, name: str, kind: str, text: str, tags: Sequence[str] = ()) -> Candidate:
    """A checked candidate from separate values; InvalidInput (exit 5) if any is wrong."""
    return check_candidate({"name": name, "kind": kind, "text": text, "tags": list(tags)}, where="")


def _candidate(raw: Mapping[str, object], where: str, problems: list[str]) -> Candidate | None:
    before = len(problems)
    prefix = f"{where}: " if where else ""

    def problem(key: str, why: str) -> None:
        problems.append(f"{prefix}{key}: {why}")

    keys, kinds = ", ".join(FILE_KEYS), ", ".join(KINDS)
    if not isinstance(raw, Mapping):
        problems.append(f"{prefix}expected a table of {keys}")
        return None
    for key in raw:
        if key not in FILE_KEYS:
            problem(str(key), f"unknown key (expected {keys}){did_you_mean(key, FILE_KEYS)}")
    name = _text_value(raw, "name", problem)
    kind = raw.get("kind")
    if kind is None:
        problem("kind", f"missing (one of {kinds})")
    elif kind not in KINDS:
        problem("kind", f"{_show(kind)} is not one of {kinds}{did_you_mean(kind, KINDS)}")
    text = _text_value(raw, "text", problem)
    tags = _tags(raw.get("tags", []), problem)
    if len(problems) > before or name is None or text is None or not isinstance(kind, str):
        return None
    return Candidate(name=name, kind=kind, text=text, tags=tags)


def _text_value(
    raw: Mapping[str, object], key: str, problem: Callable[[str, str], None]
) -> str | None:
    """The ``name`` (one line, whitespace made single) or ``text`` (stripped) of ``raw``."""
    value, one_line = raw.get(key), key == "name"
    limit = MAX_NAME_CHARS if one_line else MAX_TEXT_CHARS
    if not isinstance(value, str):
        problem(key, "missing" if value is None else f"expected a string, got {_describe(value)}")
        return None
    value = value.replace("\r\n", "\n")
    cleaned = " ".join(value.split()) if one_line else value.strip()
    if why := _unprintable(value, one_line=one_line):
        problem(key, why)
    elif not cleaned:
        problem(key, "is empty")
    elif len(cleaned) > limit:
        problem(key, f"{len(cleaned)} characters, above the maximum of {limit}")
    else:
        return cleaned
    return None


def _tags(value: object, problem: Callable[[str, str], None]) -> tuple[str, ...]:
    if not isinstance(value, list):
        problem("tags", f"expected a list of strings, got {_describe(value)}")
        return ()
    if len(value) > MAX_TAGS:
        problem("tags", f"{len(value)} tags, above the maximum of {MAX_TAGS}")
        return ()
    tags: dict[str, None] = {}
    for number, tag in enumerate(value):
        where = f"tags[{number}]"
        if not isinstance(tag, str):
            problem(where, f"expected a string, got {_describe(tag)}")
            continue
        folded = unicodedata.normalize("NFKC", tag.strip()).casefold()
        if not folded:
            problem(where, "is empty")
        elif len(folded) > MAX_TAG_CHARS:
            problem(where, f"{len(folded)} characters, above the maximum of {MAX_TAG_CHARS}")
        elif any(ch.isspace() or ch == "," for ch in folded) or _unprintable(folded):
            problem(where, f"{_show(tag)}: a tag has no spaces, commas or control characters")
        else:
            tags[folded] = None
    return tuple(tags)


def _unprintable(value: str, *, one_line: bool = True) -> str | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (it holds a lone surrogate)"
    allowed = "" if one_line else "\n\t"
    found = next((c for c in _CONTROLS.findall(value) if c not in allowed), None)
    return None if found is None else f"holds the control character U+{ord(found):04X}"


def _describe(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _damaged(store: Store, entry_id: str, why: str) -> InvalidInput:
    return InvalidInput(
        f"{store.path(ENTRY, entry_id)}: damaged registry entry: {why}",
        hint="belt leaves a damaged file as it is; move it aside or restore it, then retry",
    )


def _checked(store: Store, entry_id: str, data: Mapping[str, Any]) -> RegistryEntry:
    required, _ = derive(RegistryEntry)
    for key, kinds in required.items():
        if key == "version":
            version = data.get("version", 0)
            if not fits(version, kinds) or version < 1:
                raise _damaged(store, entry_id, "version is not a positive whole number")
        elif not fits(data.get(key), kinds):
            raise _damaged(store, entry_id, f"{key} is not a {kinds[0].__name__}")
    if data["kind"] not in KINDS:
        raise _damaged(store, entry_id, f"kind {data['kind']!r} is not one of {', '.join(KINDS)}")
    if data["id"] != entry_id:
        raise _damaged(store, entry_id, f"it holds entry {data['id']!r}")
    if not all(isinstance(tag, str) for tag in data["tags"]):
        raise _damaged(store, entry_id, "tags are not all strings")
    if len(data["versions"]) != version:
        raise _damaged(store, entry_id, f"it has {len(data['versions'])} versions, not {version}")
    for number, item in enumerate(data["versions"], start=1):
        if (
            not isinstance(item, dict)
            or item.get("version") != number
            or not isinstance(item.get("text"), str)
            or not isinstance(item.get("origin"), dict)
        ):
            raise _damaged(store, entry_id, f"versions[{number - 1}] is not a version")
    return cast(RegistryEntry, data)


def _read(store: Store, entry_id: str) -> RegistryEntry:
    return _checked(store, entry_id, store.read(ENTRY, entry_id))


def get_entry(store: Store | None, *, entry_id: str) -> RegistryEntry:
    """One live entry named by its id, short id or a unique prefix (exit 3, or 4 if ambiguous)."""
    store = open_store(store)

    def missing(ref: str) -> NotFound:
        hint = "list the entries with `belt registry list`"
        return NotFound(f"no registry entry {ref}", hint=hint)

    plural = "registry entries"
    entry_id = find_id(
        store, ENTRY, entry_id, what="registry entry", plural=plural, missing=missing
    )
    try:
        entry = _read(store, entry_id)
    except NotFound:
        raise NotFound(f"no registry entry {entry_id}") from None
    if entry.get("removed_at"):
        raise NotFound(f"no registry entry {entry_id} (it was removed)")
    return entry


def list_entries(
    store: Store | None, *, owner: str = DEFAULT_OWNER, kind: str | None = None
) -> list[RegistryEntry]:
    """An owner's entries (optionally of one kind), oldest first; a damaged one is exit 5."""
    store = open_store(store)
    check_id(owner, what="owner")
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    return [entry for entry in _entries(store, owner) if kind is None or entry["kind"] == kind]


def _entries(store: Store, owner: str) -> list[RegistryEntry]:
    entries: list[RegistryEntry] = []
    problems: list[str] = []
    for entry_id in store.members(ENTRIES, owner):
        try:
            entry = _read(store, entry_id)
        except NotFound:
            problems.append(f"{store.path(ENTRY, entry_id)}: listed for {owner} but missing")
            continue
        except InvalidInput as exc:
            problems.append(exc.message)
            continue
        if (owned_by := entry["owner"]) != owner:
            where = store.path(ENTRY, entry_id)
            problems.append(f"{where}: listed for {owner} but owned by {owned_by!r}")
        elif not entry.get("removed_at"):
            entries.append(entry)
    if problems:
        raise InvalidInput(
            f"the registry of {owner} has {len(problems)} damaged "
            f"entr{'y' if len(problems) == 1 else 'ies'}",
            problems=problems,
            hint="belt leaves a damaged file as it is; move it aside or restore it, then retry",
        )
    return entries


def index_path(store: Store, owner: str) -> Path:
    """The search index file of ``owner`` under the store's root."""
    return store.root / "search" / "registry" / f"{check_id(owner, what='owner')}.sqlite3"


def extracted_by(entry: RegistryEntry) -> set[str]:
    """The agents whose review created ``entry`` or wrote its current version."""
    origins = (entry["versions"][0]["origin"], entry["versions"][-1]["origin"])
    agents = {origin.get("agent") for origin in origins if origin.get("by") == "agent"}
    return {agent for agent in agents if isinstance(agent, str)}


def _index_row(entry: RegistryEntry) -> Row:
    return Row(
        id=entry["id"],
        name_key=normalise(entry["name"]),
        name=entry["name"],
        kind=entry["kind"],
        tags=tuple(entry["tags"]),
        text=entry["text"],
        version=entry["version"],
        agents=tuple(sorted(extracted_by(entry))),
    )


def _change(store: Store, owner: str, change: Callable[[SearchIndex], T]) -> T:
    """``change`` under the owner's lock, the index brought level first (rebuilt if damaged)."""
    path = index_path(store, owner)

    def changed() -> T:
        with closing(SearchIndex.open(path, durable=store.fsync)) as index:
            size = store.index_size(ENTRIES, owner)
            if index.journal() != size:
                rows = [_index_row(entry) for entry in _entries(store, owner)]
                index.put(rows, journal=size, replace=True)
            return change(index)

    with store.lock(_OWNER_LOCK, owner):
        with suppress(IndexDamaged):
            return changed()
        discard(path)
        return changed()


def _record(
    index: SearchIndex, journal: int, entries: list[RegistryEntry], removed: str | None
) -> None:
    """Bring the index level with what was just written; if it cannot, the next reader rebuilds."""
    try:
        if removed is not None or entries:
            index.put([_index_row(entry) for entry in entries], journal=journal, removed=removed)
    except IndexDamaged:
        index.close()
        discard(index.path)
    except BeltError:
        pass


def _query(store: Store, owner: str, ask: Callable[[SearchIndex, int | None], list[T]]) -> list[T]:
    """``ask`` the owner's index, given the journal it must have (``Stale`` on another: it is
    brought level and asked again with none); a damaged file is rebuilt once. The index is kept
    open by this thread: never close it."""
    path = index_path(store, owner)
    for attempt in (1, 2):
        try:
            if (size := store.index_size(ENTRIES, owner)) == 0:
                return []  # the owner never had an entry
            with suppress(IndexDamaged, Stale):
                if (index := reader(path, durable=store.fsync)) is not None:
                    return ask(index, size)
            forget(path)
            _change(store, owner, lambda index: None)
            index = reader(path, durable=store.fsync)
            return [] if index is None else ask(index, None)
        except IndexDamaged:
            forget(path)
            if attempt == 2:
                raise
            with store.lock(_OWNER_LOCK, owner):
                discard(path)
    raise AssertionError("unreachable")


def save_candidate(
    store: Store | None,
    *,
    owner: str,
    candidate: Candidate,
    origin: Origin,
    now: datetime | None = None,
) -> SaveOutcome:
    """Save ``candidate``: created (a new name), versioned (new text) or skipped (same meaning)."""
    return save_candidates(store, owner=owner, candidates=[(candidate, origin)], now=now)[0]


def save_candidates(
    store: Store | None,
    *,
    owner: str,
    candidates: Sequence[tuple[Candidate, Origin]],
    now: datetime | None = None,
) -> list[SaveOutcome]:
    """Save each candidate in order as ``save_candidate`` does, under one hold of the lock."""
    store = open_store(store)
    check_id(owner, what="owner")
    checked = [
        (make_candidate(name=c.name, kind=c.kind, text=c.text, tags=c.tags), origin)
        for c, origin in candidates
    ]
    stamp = timestamp(now or utcnow())

    def save(index: SearchIndex) -> list[SaveOutcome]:
        # Every name is looked up before the store changes: a damaged index is found while the
        # change can still be tried again from the start.
        ids = {key: index.id_for_name(key) for key in {normalise(c.name) for c, _ in checked}}
        saved: dict[str, RegistryEntry] = {}
        outcomes: list[SaveOutcome] = []
        try:
            for candidate, origin in checked:
                key = normalise(candidate.name)
                outcome, entry = _save_one(store, owner, candidate, origin, stamp, ids[key])
                ids[key] = outcome.id
                if entry is not None:
                    saved[outcome.id] = entry
                outcomes.append(outcome)
        finally:
            _record(index, store.index_size(ENTRIES, owner), list(saved.values()), None)
        return outcomes

    return _change(store, owner, save)


def _save_one(
    store: Store, owner: str, candidate: Candidate, origin: Origin, stamp: str, existing: str | None
) -> tuple[SaveOutcome, RegistryEntry | None]:
    version: EntryVersion = {
        "version": 1,
        "kind": candidate.kind,
        "tags": list(candidate.tags),
        "text": candidate.text,
        "created_at": stamp,
        "origin": origin.to_json(),
    }
    if existing is None:
        entry: RegistryEntry = {  # the order of its file and of `belt registry show --json`
            "id": new_id("re"),
            "owner": owner,
            "name": candidate.name,
            "kind": candidate.kind,
            "tags": list(candidate.tags),
            "text": candidate.text,
            "version": 1,
            "origin": origin.to_json(),
            "versions": [version],
            "created_at": stamp,
            "updated_at": stamp,
            "removed_at": None,
        }
        store.create(ENTRY, entry["id"], entry)
        store.link(ENTRIES, owner, entry["id"])
        return SaveOutcome.of("created", entry), entry
    entry = _read(store, existing)
    if same_meaning(entry["text"], candidate.text):
        return SaveOutcome.of("skipped", entry), None

    def add_version(data: RegistryEntry) -> RegistryEntry:
        current = _checked(store, existing, data)
        number = current["version"] + 1
        current["versions"].append({**version, "version": number})
        current |= {"kind": candidate.kind, "tags": list(candidate.tags), "text": candidate.text}
        current |= {"version": number, "updated_at": stamp}
        return current

    # The index line first: if belt stops between the two, readers see a stale index.
    store.link(ENTRIES, owner, existing)
    entry = store.update(ENTRY, existing, add_version)
    return SaveOutcome.of("versioned", entry), entry


def add_entry(
    store: Store | None,
    *,
    owner: str = DEFAULT_OWNER,
    name: str,
    kind: str,
    tags: Sequence[str] = (),
    file: Path | None = None,
    now: datetime | None = None,
) -> SaveOutcome:
    """``belt registry add``: save an entry whose text is read from ``file`` or stdin."""
    candidate = make_candidate(name=name, kind=kind, text=read_entry_text(file), tags=tags)
    return save_candidate(store, owner=owner, candidate=candidate, origin=Origin.person(), now=now)


def read_entry_text(file: Path | None) -> str:
    """An entry's text from ``file`` (``-`` or None: stdin), bounded and decoded as UTF-8."""
    limit = MAX_TEXT_CHARS * 4
    if file is None or str(file) == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("give the entry's text with --file FILE or on stdin")
        raw, source = sys.stdin.buffer.read(limit + 1), "stdin"
    else:
        # A regular file only (a FIFO or a device is refused before it is read), capped.
        try:
            raw, source = read_bytes(file, kind="registry entry"), str(file)
        except NotFound:
            raise NotFound(f"--file: no such file {file}", where=str(file)) from None
    if len(raw) > limit:
        raise InvalidInput(f"{source}: above the maximum of {MAX_TEXT_CHARS} characters")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text (byte {exc.start})") from None


def remove_entry(
    store: Store | None, *, entry_id: str, now: datetime | None = None
) -> RegistryEntry:
    """Remove an entry from its owner's registry; its file stays, marked removed (exit 3)."""
    store = open_store(store)
    found = get_entry(store, entry_id=entry_id)
    entry_id, owner = found["id"], check_id(found["owner"], what="owner")
    stamp = timestamp(now or utcnow())

    def remove(index: SearchIndex) -> RegistryEntry:
        get_entry(store, entry_id=entry_id)  # a racing remover got here first: exit 3
        # Out of the entry index first: a reader then rebuilds without it, whatever follows.
        store.unlink(ENTRIES, owner, entry_id)
        changes = {"removed_at": stamp, "updated_at": stamp}
        entry = cast(RegistryEntry, store.merge(ENTRY, entry_id, changes))
        _record(index, store.index_size(ENTRIES, owner), [], entry_id)
        return entry

    return _change(store, owner, remove)


def search(
    store: Store | None, *, owner: str = DEFAULT_OWNER, query: str, limit: int = 10
) -> list[Match]:
    """``owner``'s entries that share a term with ``query``, best first (any text is a query)."""
    return _ranked(store, owner, query, limit, "query", min_terms=1, relevant=MIN_SHARED_TERMS)


def suggest(
    store: Store | None,
    *,
    owner: str,
    prompt: str,
    exclude_ids: Sequence[str] = (),
    exclude_origin_agent: str | None = None,
    limit: int = 3,
) -> list[Match]:
    """Up to ``limit`` entries sharing ``MIN_SHARED_TERMS`` terms with ``prompt``, as ranked by
    ``search``, less ``exclude_ids`` and ``exclude_origin_agent``'s extractions."""
    if exclude_origin_agent is not None:
        check_id(exclude_origin_agent, what="agent id")
    if not all(isinstance(item, str) for item in exclude_ids):
        raise InvalidInput("exclude_ids holds ids (strings)")
    excluding = {"exclude_ids": exclude_ids, "exclude_agent": exclude_origin_agent}
    return _ranked(store, owner, prompt, limit, "prompt", min_terms=MIN_SHARED_TERMS, **excluding)


def _ranked(
    store: Store | None, owner: str, text: str, limit: int, what: str, **options: Any
) -> list[Match]:
    """The ranking behind ``search`` and ``suggest``, each match's relevance against the best."""
    store = open_store(store)
    check_id(owner, what="owner")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit {limit!r} is not a whole number from 1 to {MAX_LIMIT}")
    if not isinstance(text, str):
        raise InvalidInput(f"a {what} is text")
    phrases = query_phrases(query_words(text))
    if not phrases:
        return []
    hits = _query(
        store,
        owner,
        lambda index, journal: index.search(phrases, limit=limit, journal=journal, **options),
    )
    best = max((hit.score for hit in hits), default=0.0)
    return [
        Match(
            id=hit.row.id,
            name=hit.row.name,
            kind=hit.row.kind,
            tags=hit.row.tags,
            text=hit.row.text,
            version=hit.row.version,
            score=float(f"{hit.score:.4g}"),
            matched_terms=hit.matched,
            query_terms=hit.terms,
            relevance=round(hit.score / best, 2) if best > 0 else 0.0,
        )
        for hit in hits
    ]


def load_directory(
    store: Store | None,
    path: Path | str,
    *,
    owner: str = DEFAULT_OWNER,
    now: datetime | None = None,
) -> list[Loaded]:
    """Save every ``*.toml`` file of a registry directory; all are checked first (else exit 5)."""
    store = open_store(store)
    check_id(owner, what="owner")
    directory = Path(path)
    if not directory.is_dir():
        raise NotFound(f"{directory}: no such registry directory")
    try:
        files = sorted(f for f in directory.iterdir() if f.suffix == ".toml" and f.name[0] != ".")
    except OSError as exc:
        raise InvalidInput(f"{directory}: cannot list the directory: {exc.strerror}") from None
    if len(files) > MAX_DIRECTORY_FILES:
        raise InvalidInput(
            f"{directory}: {len(files)} entry files, above the maximum of {MAX_DIRECTORY_FILES}"
        )
    problems: list[str] = []
    named: dict[str, tuple[str, Candidate]] = {}  # by normalised name
    for file in files:
        where, document = str(file), _read_entry_file(file, problems)
        candidate = None if document is None else _candidate(document, where, problems)
        if candidate is None:
            continue
        if (key := normalise(candidate.name)) in named:
            problems.append(
                f"{where}: name: {candidate.name!r} is also the name in {named[key][0]}"
            )
        named.setdefault(key, (where, candidate))
    if problems:
        raise InvalidInput(
            f"{directory}: {len(problems)} problem{'s' if len(problems) != 1 else ''} "
            "in the registry directory",
            problems=problems,
        )
    found = [(candidate, Origin.person(where)) for where, candidate in named.values()]
    outcomes = save_candidates(store, owner=owner, candidates=found, now=now)
    return [
        Loaded(where, outcome) for (where, _), outcome in zip(named.values(), outcomes, strict=True)
    ]


def _read_entry_file(file: Path, problems: list[str]) -> dict[str, object] | None:
    try:
        raw = read_bytes(file, kind="registry entry")
    except BeltError as exc:
        problems.append(exc.message)
        return None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        problems.append(f"{file}: not UTF-8 text (byte {exc.start})")
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{file}: invalid TOML: {exc}")
    return None
