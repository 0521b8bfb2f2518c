"""The registry's search index: one SQLite FTS5 file per owner, derived from the store's entries.

``<store root>/search/registry/<owner>.sqlite3`` is a copy of an owner's entries shaped for
ranking (tables ``meta``, ``entries``, ``fts`` and its vocabulary ``vocab``); the store is the
truth, and ``belt.records.registry`` decides when the copy is stale (``meta``'s ``journal``,
docs/builtins.md "Freshness"). A query is plain words, each quoted, so no text reaches FTS5 as
syntax; a damaged file raises ``IndexDamaged`` and the caller rebuilds it.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from belt.errors import BeltError, Conflict
from belt.store.files import SAFE_FLAGS, UnsafeFile, check_regular_or_missing, make_dirs
from belt.store.store import damaged

FORMAT = 6
"""The layout of the index file; a file of another format is rebuilt."""

TOKENIZER = "porter unicode61 remove_diacritics 2"
"""FTS5 tokenizer: Unicode word characters, case and diacritics folded, English stems."""

WEIGHTS = (4.0, 2.0, 1.0)
"""``bm25()`` column weights of name, tags and text: a word in the name counts four times."""
_BM25 = f"-bm25(fts, {', '.join(str(weight) for weight in WEIGHTS)})"

EVERY_TERM_ROWS = 512
"""Terms held by at most this many entries in all: the query reads every entry holding one."""
RARER_ROWS = 32
"""Else it reads the entries of its rarest terms while they add up to at most this many, so a
query costs the same however large the registry (``_shortlists``)."""
WIDER = 8
"""A shortlist with no answer widens to ``RARER_ROWS * WIDER`` entries, then to all."""
OPTIMIZE_ROWS = 100
"""A change of this many rows merges FTS5's index into one segment afterwards."""
MAX_QUERY_CHARS = 10_000
MAX_QUERY_WORDS = 32
BUSY_SECONDS = 30.0
"""How long a query waits for another process's write to the same index file."""

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just let me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own please same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    also could get hello hi like make may might must ok okay thank thanks us want yes
    aren couldn didn doesn don hadn hasn haven isn ll mustn re shan shouldn ve wasn weren won
    wouldn
    """.split()
)
"""Common English words (and halves of contractions) left out of queries, never of the index."""

SCHEMA = (  # IF NOT EXISTS: another process may have created them since this one looked
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)",
    "CREATE TABLE IF NOT EXISTS entries (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
    "name_key TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, tags TEXT NOT NULL, "
    "text TEXT NOT NULL, version INTEGER NOT NULL, agents TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS entries_name ON entries (name_key)",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(name, tags, text, tokenize='{TOKENIZER}')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS vocab USING fts5vocab(fts, row)",
    f"INSERT OR IGNORE INTO meta VALUES ('format', {FORMAT}), ('journal', -1)",
)
_WORD = re.compile(r"[^\W_]+")
_SIDECARS = ("-journal", "-wal", "-shm")
_DAMAGED_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


class IndexDamaged(BeltError):
    """The index file cannot be used as it is; it is derived, so the caller rebuilds it."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(
            f"{path}: the registry search index is damaged ({why})",
            hint="belt rebuilds it from the store; if this persists, delete the file",
        )


class Stale(Exception):
    """The index's ``journal`` is not the one the query was asked against: bring it level."""


@dataclass(frozen=True)
class Row:
    """One entry as the index keeps it."""

    id: str
    name_key: str
    name: str
    kind: str
    tags: tuple[str, ...]
    text: str
    version: int
    agents: tuple[str, ...]
    """The agents whose extraction the entry is: never suggested to them."""


@dataclass(frozen=True)
class Hit:
    """One entry a query found: its score (``-bm25()``, higher is better) and terms held."""

    row: Row
    score: float
    matched: int
    terms: int


def query_words(text: str) -> list[str]:
    """The words of a free-text query (runs of letters and digits): folded, distinct, bounded."""
    words: dict[str, None] = {}
    for found in _WORD.finditer(text[:MAX_QUERY_CHARS]):
        word = unicodedata.normalize("NFKC", found.group()).casefold()
        if len(word) > 1 and word not in STOPWORDS:
            words[word] = None
            if len(words) == MAX_QUERY_WORDS:
                break
    return list(words)


def quoted(word: str) -> str:
    """``word`` as an FTS5 string: whatever it holds, FTS5 reads it as text."""
    return '"' + word.replace('"', '""') + '"'


class Probe:
    """Tokenises words as the index does (stems included) in an in-memory FTS5 table, so
    ``backup`` and ``backups`` are one term of a query; remembers ``MAX_KNOWN`` words."""

    MAX_KNOWN = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._known: dict[str, tuple[str, ...]] = {}

    def terms(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """The terms of each word, in order."""
        with self._lock:
            unknown = [word for word in dict.fromkeys(words) if word not in self._known]
            if unknown:
                if len(self._known) + len(unknown) > self.MAX_KNOWN:
                    self._known.clear()
                self._known.update(zip(unknown, self._tokenise(unknown), strict=True))
            return [self._known[word] for word in words]

    def _tokenise(self, words: list[str]) -> list[tuple[str, ...]]:
        if self._db is None or self._pid != os.getpid():
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            try:  # SQLite without FTS5 says so here
                db.execute(f"CREATE VIRTUAL TABLE probe USING fts5(body, tokenize='{TOKENIZER}')")
                db.execute("CREATE VIRTUAL TABLE probe_terms USING fts5vocab(probe, instance)")
            except sqlite3.Error as exc:
                raise _failure(Path(":memory:"), exc) from None
            self._db, self._pid = db, os.getpid()
        db = self._db
        found = [list[str]() for _ in words]
        db.execute("BEGIN")  # rolled back: nothing is left to delete
        try:
            db.executemany("INSERT INTO probe (rowid, body) VALUES (?, ?)", enumerate(words))
            for doc, term in db.execute("SELECT doc, term FROM probe_terms ORDER BY doc, offset"):
                found[int(doc)].append(str(term))
        finally:
            db.execute("ROLLBACK")
        return [tuple(terms) for terms in found]


PROBE = Probe()


def query_phrases(words: Sequence[str]) -> list[str]:
    """One quoted word per distinct term of ``words`` (a word of no term is left out)."""
    phrases: dict[tuple[str, ...], str] = {}
    for word, terms in zip(words, PROBE.terms(words), strict=True):
        if terms:
            phrases.setdefault(terms, quoted(word))
    return list(phrases.values())


@dataclass(eq=False)
class SearchIndex:
    """An open connection to one owner's index file; close it after use."""

    path: Path
    db: sqlite3.Connection

    @classmethod
    def open(cls, path: Path, *, durable: bool) -> SearchIndex:
        """Open (creating it 0600) and check the file; IndexDamaged if unusable, InvalidInput
        (exit 5) if it or a side file is not a regular file (SQLite would follow a link)."""
        for name in ("", *_SIDECARS):
            try:
                check_regular_or_missing(Path(f"{path}{name}"))
            except UnsafeFile as exc:
                raise damaged(Path(f"{path}{name}"), exc.why) from None
        if not path.exists():
            make_dirs(path.parent)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | SAFE_FLAGS, 0o600))
        try:
            index = cls(path, sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None))
        except sqlite3.Error as exc:
            raise _failure(path, exc) from None
        try:
            index._run(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
            index._run("PRAGMA cache_size = -8192")
            index._check_schema()
        except BaseException:
            index.close()
            raise
        return index

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    def journal(self) -> int:
        """The size of the owner's entry index this copy reflects (-1: never filled)."""
        row = self._run("SELECT value FROM meta WHERE key = 'journal'").fetchone()
        if row is None or not isinstance(row[0], int):
            raise IndexDamaged(self.path, "meta has no journal")
        return int(row[0])

    def id_for_name(self, name_key: str) -> str | None:
        """The id of the entry with this normalised name, if any (the oldest if several)."""
        row = self._run(
            "SELECT id FROM entries WHERE name_key = ? ORDER BY rowid LIMIT 1", (name_key,)
        ).fetchone()
        return None if row is None else str(row[0])

    # Changes (the caller holds the owner's lock), each in one transaction

    def put(
        self,
        rows: Sequence[Row],
        *,
        journal: int,
        removed: str | None = None,
        replace: bool = False,
    ) -> None:
        """Add or replace ``rows`` (every row, with ``replace``), remove ``removed``, record
        ``journal``; a big change then merges FTS5's index into one segment."""
        with self._transaction():
            if replace:
                self._run("DELETE FROM entries")
                self._run("DELETE FROM fts")
            for row in rows:
                self._insert(row, rowid=None if replace else self._remove(row.id))
            if removed is not None:
                self._remove(removed)
            if replace or len(rows) >= OPTIMIZE_ROWS:
                self._run("INSERT INTO fts (fts) VALUES ('optimize')")
            self._run("UPDATE meta SET value = ? WHERE key = 'journal'", (journal,))

    # Queries

    def search(
        self,
        phrases: Sequence[str],
        *,
        limit: int,
        min_terms: int = 1,
        exclude_ids: Sequence[str] = (),
        exclude_agent: str | None = None,
        journal: int | None = None,
        relevant: int | None = None,
    ) -> list[Hit]:
        """The best ``limit`` entries holding ``min_terms`` of ``phrases``, less the excluded;
        ``Stale`` unless the file reflects ``journal``. Order: more terms held, ``bm25()``, the
        older; a shortlist where none holds ``relevant`` terms gives way to a wider one."""
        if not phrases:
            return []
        needed = max(1, min(min_terms, len(phrases)))
        relevant = needed if relevant is None else max(1, min(relevant, len(phrases)))
        excluded = frozenset(exclude_ids)
        self._run("BEGIN")
        try:
            if journal is not None and self.journal() != journal:
                raise Stale
            for rarer in _shortlists(self._counts(phrases)):
                held = self._held(phrases, rarer, needed)
                shortlisted = [phrases[number] for number in sorted(rarer)]
                best = sorted(self._ranks(shortlisted, held, excluded, exclude_agent))[:limit]
                if best and -best[0][0] >= relevant:
                    break
            try:
                return [
                    Hit(row=_row(record), score=-score, matched=-count, terms=len(phrases))
                    for count, score, _, record in best
                ]
            except (TypeError, ValueError) as exc:
                raise IndexDamaged(self.path, f"a row is not as belt wrote it: {exc}") from None
        finally:
            if self.db.in_transaction:
                self._run("COMMIT")

    def _counts(self, phrases: Sequence[str]) -> list[int]:
        """How many entries each of ``phrases`` matches (``vocab`` for a phrase of one term)."""
        terms = PROBE.terms([phrase[1:-1].replace('""', '"') for phrase in phrases])
        single = json.dumps([found[0] for found in terms if len(found) == 1])
        vocab = "SELECT term, doc FROM vocab WHERE term IN (SELECT value FROM json_each(?))"
        kept = dict(self._run(vocab, (single,)).fetchall())
        matching = "SELECT count(*) FROM fts WHERE fts MATCH ?"
        return [
            int(kept.get(found[0], 0))
            if len(found) == 1
            else int(self._run(matching, (phrase,)).fetchone()[0])
            for phrase, found in zip(phrases, terms, strict=True)
        ]

    def _held(self, phrases: Sequence[str], rarer: Sequence[int], needed: int) -> dict[int, int]:
        """Terms held by each entry holding one of the ``rarer`` and at least ``needed``, counted
        by SQLite (the other phrases are looked up in those entries alone)."""
        either = " OR ".join(phrases[number] for number in rarer)
        asked = [
            phrase if number in rarer else f"({either}) AND {phrase}"
            for number, phrase in enumerate(phrases)
        ]
        held = " UNION ALL ".join(["SELECT rowid FROM fts WHERE fts MATCH ?"] * len(asked))
        query = f"SELECT rowid, count(*) FROM ({held}) GROUP BY rowid HAVING count(*) >= ?"
        return {int(rowid): int(count) for rowid, count in self._run(query, [*asked, needed])}

    def _ranks(
        self,
        phrases: Sequence[str],
        held: Mapping[int, int],
        excluded: frozenset[str],
        exclude_agent: str | None,
    ) -> list[tuple[int, float, int, Sequence[object]]]:
        """Each entry ``held`` not excluded, as (-terms held, ``bm25()``, rowid, row)."""
        found = self._run(
            f"SELECT fts.rowid, {_BM25}, e.id, e.name_key, e.name, e.kind, e.tags, e.text, "
            "e.version, e.agents FROM fts CROSS JOIN entries AS e ON e.rowid = fts.rowid "
            "WHERE fts MATCH ? AND +fts.rowid IN (SELECT value FROM json_each(?))",
            (" OR ".join(phrases), json.dumps(list(held))),
        ).fetchall()
        agent = f" {exclude_agent} " if exclude_agent else None
        return [
            (-held[int(rowid)], -float(score), int(rowid), record)
            for rowid, score, *record in found
            if record[0] not in excluded and (agent is None or agent not in str(record[7]))
        ]

    # Internals

    def _check_schema(self) -> None:
        tables = {
            name for (name,) in self._run("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            with self._transaction():
                for statement in SCHEMA:
                    self._run(statement)
            return
        if not {"meta", "entries", "fts", "vocab"} <= tables:
            raise IndexDamaged(self.path, "it lacks belt's tables")
        row = self._run("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or row[0] != FORMAT:
            raise IndexDamaged(
                self.path, f"its format is {None if row is None else row[0]!r}, not {FORMAT}"
            )

    def _insert(self, row: Row, *, rowid: int | None = None) -> None:
        tags, agents = json.dumps(list(row.tags)), "".join(f" {agent} " for agent in row.agents)
        cursor = self._run(
            "INSERT INTO entries (rowid, id, name_key, name, kind, tags, text, version, agents) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rowid, row.id, row.name_key, row.name, row.kind, tags, row.text, row.version, agents),
        )
        self._run(
            "INSERT INTO fts (rowid, name, tags, text) VALUES (?, ?, ?, ?)",
            (cursor.lastrowid, row.name, " ".join(row.tags), row.text),
        )

    def _remove(self, entry_id: str) -> int | None:
        """Remove the row of ``entry_id``; its rowid, if it had one."""
        found = self._run("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if found is None:
            return None
        self._run("DELETE FROM fts WHERE rowid = ?", (found[0],))
        self._run("DELETE FROM entries WHERE rowid = ?", (found[0],))
        return int(found[0])

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._run("BEGIN IMMEDIATE")
        try:
            yield
            self._run("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                self.db.rollback()
            raise

    def _run(self, sql: str, parameters: Sequence[object] = ()) -> sqlite3.Cursor:
        try:
            return self.db.execute(sql, parameters)
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None


MAX_READERS = 4
"""How many index files one thread keeps open between queries."""


class _Readers(threading.local):
    """This thread's open indexes, by path: each with the identity of the file it opened."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.open: dict[Path, tuple[tuple[int, int], SearchIndex]] = {}


_READERS = _Readers()


def reader(path: Path, *, durable: bool) -> SearchIndex | None:
    """An open index of ``path`` for queries (None without a file), kept open by this thread
    while ``path`` is the file it opened, never across a fork; never close it (``forget`` it)."""
    readers = _READERS
    if readers.pid != os.getpid():
        readers.pid, readers.open = os.getpid(), {}  # the parent's connections are its own
    try:
        info = os.stat(path)
    except FileNotFoundError:
        forget(path)
        return None
    except OSError as exc:
        raise IndexDamaged(path, exc.strerror or str(exc)) from None
    identity = (info.st_dev, info.st_ino)
    kept = readers.open.pop(path, None)
    if kept is not None and kept[0] == identity:
        readers.open[path] = kept  # the most recently used last
        return kept[1]
    if kept is not None:
        kept[1].close()
    index = SearchIndex.open(path, durable=durable)
    readers.open[path] = (identity, index)
    while len(readers.open) > MAX_READERS:
        readers.open.pop(next(iter(readers.open)))[1].close()
    return index


def forget(path: Path) -> None:
    """Close this thread's open index of ``path``, if any."""
    kept = _READERS.open.pop(path, None)
    if kept is not None and _READERS.pid == os.getpid():
        kept[1].close()


def discard(path: Path) -> None:
    """Delete an index file and SQLite's side files (the caller holds the owner's lock)."""
    for name in ("", *_SIDECARS):
        Path(f"{path}{name}").unlink(missing_ok=True)


def _shortlists(counts: Sequence[int]) -> list[list[int]]:
    """The query's terms (by number) its answer may be read from, narrowest first, given how
    many entries hold each (``EVERY_TERM_ROWS``, ``RARER_ROWS``, ``WIDER``)."""
    order = sorted(range(len(counts)), key=lambda number: counts[number])
    if sum(counts) <= EVERY_TERM_ROWS:
        return [order]
    totals = list(accumulate(counts[number] for number in order))
    ends = {
        next((end for end in range(1, len(order)) if totals[end] > cap), len(order))
        for cap in (RARER_ROWS, RARER_ROWS * WIDER)
    }
    return [order[:end] for end in sorted({*ends, len(order)})]


def _row(record: Sequence[object]) -> Row:
    id_, name_key, name, kind, tags, text, version, agents = map(str, record)
    listed = json.loads(tags)
    tagged = tuple(str(tag) for tag in listed) if isinstance(listed, list) else ()
    return Row(id_, name_key, name, kind, tagged, text, int(version), tuple(agents.split()))


def _failure(path: Path, exc: sqlite3.Error) -> Exception:
    if "no such module: fts5" in str(exc):
        return BeltError(
            f"the registry's search needs SQLite's FTS5, and this Python's SQLite "
            f"{sqlite3.sqlite_version} lacks it ({exc})",
            hint="use a Python whose sqlite3 module is built with FTS5 (python.org and most "
            "distributions' builds are)",
        )
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # 0: SQLITE_OK, neither below
    if isinstance(exc, sqlite3.DatabaseError) and code in _DAMAGED_CODES:
        return IndexDamaged(path, str(exc))
    if code in _BUSY_CODES:
        return Conflict(
            f"{path}: the registry index is busy (another process held it for "
            f"{BUSY_SECONDS:.0f} s)",
            hint="retry when the other belt process has finished",
        )
    return BeltError(f"{path}: the registry index failed: {exc}")
