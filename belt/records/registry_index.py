"""The registry's search index: one SQLite FTS5 file per owner, derived from the store's entries.

The file (``<store root>/search/registry/<owner>.sqlite3``) is a copy of an owner's entries shaped
for ranking; the entries in the store are the truth. ``belt.records.registry`` decides when the
copy is stale and rebuilds it; this module only keeps the file and answers queries:

- ``meta`` holds the file's ``format`` and ``journal``: the size of the owner's entry index in
  the store when the copy was last brought up to date (see docs/builtins.md, "Freshness");
- ``entries`` holds one row per entry (id, normalised name, kind, tags, text, version, and the
  agents whose extraction it is) and ``fts`` the FTS5 table searched, sharing its rowids;
  ``fts_terms`` (fts5vocab) lists the terms of every entry, so that a query counts in SQL how
  many of its terms each entry shares.

A file that SQLite reports as corrupt or not a database, or that lacks belt's tables, raises
``IndexDamaged``; the caller discards it and builds a new one. Text is tokenised by FTS5's
``porter unicode61 remove_diacritics 2`` and ranked by ``bm25()``; a thresholded query (a
suggestion) ranks first by the number of the query's terms an entry shares, so no entry that
shares more of them is ever lost behind entries that share fewer.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from belt.errors import BeltError, Conflict
from belt.store.files import SAFE_FLAGS, UnsafeFile, check_regular_or_missing, make_dirs
from belt.store.store import damaged

FORMAT = 2
"""The layout of the index file; a file of another format is discarded and rebuilt (2: the
``fts_terms`` table, and ``agents`` holds the agents whose extraction an entry is)."""

TOKENIZER = "porter unicode61 remove_diacritics 2"
"""FTS5 tokenizer: Unicode word characters, case and diacritics folded, English stems."""

WEIGHTS = (4.0, 2.0, 1.0)
"""BM25 column weights of name, tags and text: a word in the name counts four times."""

MAX_QUERY_CHARS = 10_000
"""Only this many characters of a query (a prompt can be long) are read."""

MAX_QUERY_WORDS = 32
"""Only the first this many distinct words of a query are searched."""

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
"""Common English words (and the halves of contractions such as don't, you're) left out of
queries, never out of the index: they match nearly everything. Words of one character are
left out too."""

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
    """One entry a query found: its BM25 score (higher is better) and the words it shares."""

    row: Row
    score: float
    matched: int
    terms: int


def query_words(text: str) -> list[str]:
    """The words of a free-text query: folded, without stopwords, distinct, bounded in number.

    A word is a run of Unicode letters and digits, so the result never holds FTS5 syntax.
    """
    words: dict[str, None] = {}
    for found in _WORD.finditer(text[:MAX_QUERY_CHARS]):
        word = unicodedata.normalize("NFKC", found.group()).casefold()
        if len(word) > 1 and word not in STOPWORDS:
            words[word] = None
            if len(words) == MAX_QUERY_WORDS:
                break
    return list(words)


def match_expression(words: Sequence[str]) -> str:
    """An FTS5 MATCH expression for any of ``words``, each quoted as a string."""
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


class SearchIndex:
    """An open connection to one owner's index file; close it after use (a ``with`` block)."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._db = connection

    @classmethod
    def open(cls, path: Path, *, durable: bool) -> SearchIndex:
        """Open (creating it 0600 if missing) and check the file; IndexDamaged if unusable,
        InvalidInput (exit 5) if it or a side file is not a regular file (SQLite would follow a
        link out of the store and write through it)."""
        _check_files(path)
        if not path.exists():
            make_dirs(path.parent)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | SAFE_FLAGS, 0o600))
        try:
            connection = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise _failure(path, exc) from None
        index = cls(path, connection)
        try:
            index._run(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
            index._check_schema()
        except BaseException:
            index.close()
            raise
        return index

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # State

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

    # Changes (the caller holds the owner's lock)

    def replace_all(self, rows: Iterable[Row], *, journal: int) -> None:
        """Replace every row with ``rows`` in one transaction, then record ``journal``."""
        with self._transaction():
            self._run("DELETE FROM entries")
            self._run("DELETE FROM fts")
            for row in rows:
                self._insert(row)
            self._set_journal(journal)

    def put(self, rows: Iterable[Row], *, journal: int) -> None:
        """Add or replace rows in one transaction, then record ``journal``."""
        with self._transaction():
            for row in rows:
                found = self._run("SELECT rowid FROM entries WHERE id = ?", (row.id,)).fetchone()
                self._remove(row.id)
                self._insert(row, rowid=None if found is None else int(found[0]))
            self._set_journal(journal)

    def delete(self, entry_id: str, *, journal: int) -> None:
        """Remove one row (if present) in one transaction, then record ``journal``."""
        with self._transaction():
            self._remove(entry_id)
            self._set_journal(journal)

    # Queries

    def search(
        self,
        words: Sequence[str],
        *,
        limit: int,
        min_terms: int = 1,
        exclude_ids: Sequence[str] = (),
        exclude_agent: str | None = None,
    ) -> list[Hit]:
        """The best ``limit`` entries for ``words`` that share at least ``min_terms`` distinct
        terms with the query (all of them if it has fewer), excluding ``exclude_ids`` and the
        entries that are ``exclude_agent``'s extraction.

        With ``min_terms`` 1 (a search) the order is BM25's alone. Above 1 (a suggestion) an
        entry sharing more of the query's terms comes first, BM25 ranking those that share as
        many, so none is lost behind entries that share fewer. Ties go to the older entry.
        """
        if not words:
            return []
        word_terms = PROBE.terms(words)
        query_terms = set().union(*word_terms)
        if not query_terms:
            return []
        needed = max(1, min(min_terms, len(query_terms)))
        parameters: dict[str, object] = {
            "needed": needed,
            "match": match_expression(words),
            "exclude_ids": json.dumps(list(exclude_ids)),
            "agent": exclude_agent,
            "limit": limit,
        }
        shared = self._shared_terms(words, word_terms, parameters)
        weights = ", ".join(str(weight) for weight in WEIGHTS)
        order = "terms DESC, score DESC" if min_terms > 1 else "score DESC"
        # A plain search is in BM25's order alone: only its best ``limit`` are ranked further.
        plain = min_terms == 1 and not exclude_ids and exclude_agent is None
        best_only = "ORDER BY score DESC, rowid LIMIT :limit" if plain else ""
        first, then = ("ranked", "shared") if plain else ("shared", "ranked")
        tables = f"{first} CROSS JOIN {then} ON ranked.rid = shared.rid"
        # Each table is computed once: the terms each entry shares, over the postings of the
        # query's terms, and BM25 over the entries that match any word (bm25() needs them all).
        # The smaller table is read first (CROSS JOIN keeps that order): the entries that share
        # enough terms, or a plain search's best; rows are read in full only for the few
        # returned.
        sql = f"""
            WITH shared AS MATERIALIZED ({shared}),
            ranked AS MATERIALIZED (
                SELECT rowid AS rid, -bm25(fts, {weights}) AS score FROM fts WHERE fts MATCH :match
                {best_only}
            ),
            best AS MATERIALIZED (
                SELECT ranked.rid AS rid, ranked.score AS score, shared.terms AS terms
                FROM {tables}
                CROSS JOIN entries AS e ON e.rowid = shared.rid
                WHERE e.id NOT IN (SELECT value FROM json_each(:exclude_ids))
                  AND (:agent IS NULL OR instr(e.agents, ' ' || :agent || ' ') = 0)
                ORDER BY {order}, rid
                LIMIT :limit
            )
            SELECT e.id, e.name_key, e.name, e.kind, e.tags, e.text, e.version, e.agents,
                   best.score, best.terms
            FROM best JOIN entries AS e ON e.rowid = best.rid
            ORDER BY {order}, best.rid
        """
        found = self._run(sql, parameters).fetchall()
        try:
            return [
                Hit(
                    row=_row(record),
                    score=float(record[8]),
                    matched=int(record[9]),
                    terms=len(query_terms),
                )
                for record in found
            ]
        except (TypeError, ValueError) as exc:
            raise IndexDamaged(self.path, f"a row is not as belt wrote it: {exc}") from None

    @staticmethod
    def _shared_terms(
        words: Sequence[str], word_terms: Sequence[set[str]], parameters: dict[str, object]
    ) -> str:
        """The query of how many of the query's terms each entry shares (at least ``:needed``),
        adding its parameters to ``parameters``.

        Each term's entries are those matching a word that is that term alone (a doclist read
        by FTS5); a word FTS5 reads as several terms is rare (a character its tables do not
        know as a letter splits it), and then every term is counted from the index's list of
        terms instead, which is exact but reads every occurrence.
        """
        if all(len(terms) == 1 for terms in word_terms):
            by_term: dict[str, list[str]] = {}
            for word, terms in zip(words, word_terms, strict=True):
                by_term.setdefault(next(iter(terms)), []).append(word)
            selects = []
            for number, group in enumerate(by_term.values()):
                parameters[f"term{number}"] = match_expression(group)
                selects.append(f"SELECT rowid AS rid FROM fts WHERE fts MATCH :term{number}")
            return (
                f"SELECT rid, count(*) AS terms FROM ({' UNION ALL '.join(selects)}) "
                "GROUP BY rid HAVING count(*) >= :needed"
            )
        parameters["terms"] = json.dumps(sorted(set().union(*word_terms)))
        return (
            "SELECT doc AS rid, count(DISTINCT term) AS terms FROM fts_terms "
            "WHERE term IN (SELECT value FROM json_each(:terms)) "
            "GROUP BY doc HAVING count(DISTINCT term) >= :needed"
        )

    # Internals

    def _check_schema(self) -> None:
        tables = {
            str(name)
            for (name,) in self._run("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            self._create_schema()
            return
        if not {"meta", "entries", "fts", "fts_terms"} <= tables:
            raise IndexDamaged(self.path, "it lacks belt's tables")
        row = self._run("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or row[0] != FORMAT:
            raise IndexDamaged(
                self.path, f"its format is {None if row is None else row[0]!r}, not {FORMAT}"
            )

    def _create_schema(self) -> None:
        # IF NOT EXISTS: another process may have created them since this one looked.
        with self._transaction():
            self._run("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)")
            self._run(
                # ``agents`` before the long columns: a query's exclusions read no text.
                "CREATE TABLE IF NOT EXISTS entries (rowid INTEGER PRIMARY KEY, "
                "id TEXT NOT NULL UNIQUE, agents TEXT NOT NULL, name_key TEXT NOT NULL, "
                "name TEXT NOT NULL, kind TEXT NOT NULL, tags TEXT NOT NULL, "
                "text TEXT NOT NULL, version INTEGER NOT NULL)"
            )
            self._run("CREATE INDEX IF NOT EXISTS entries_name ON entries (name_key)")
            self._run(
                "CREATE VIRTUAL TABLE IF NOT EXISTS fts "
                f"USING fts5(name, tags, text, tokenize='{TOKENIZER}')"
            )
            self._run("CREATE VIRTUAL TABLE IF NOT EXISTS fts_terms USING fts5vocab(fts, instance)")
            self._run("INSERT OR IGNORE INTO meta VALUES ('format', ?), ('journal', -1)", (FORMAT,))

    def _insert(self, row: Row, *, rowid: int | None = None) -> None:
        cursor = self._run(
            "INSERT INTO entries (rowid, id, name_key, name, kind, tags, text, version, agents) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rowid,
                row.id,
                row.name_key,
                row.name,
                row.kind,
                json.dumps(list(row.tags)),
                row.text,
                row.version,
                "".join(f" {agent} " for agent in row.agents),
            ),
        )
        self._run(
            "INSERT INTO fts (rowid, name, tags, text) VALUES (?, ?, ?, ?)",
            (cursor.lastrowid, row.name, " ".join(row.tags), row.text),
        )

    def _remove(self, entry_id: str) -> None:
        found = self._run("SELECT rowid FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if found is not None:
            self._run("DELETE FROM fts WHERE rowid = ?", (found[0],))
            self._run("DELETE FROM entries WHERE rowid = ?", (found[0],))

    def _set_journal(self, journal: int) -> None:
        self._run("UPDATE meta SET value = ? WHERE key = 'journal'", (journal,))

    def _transaction(self) -> _Transaction:
        return _Transaction(self)

    def _run(
        self, sql: str, parameters: Sequence[object] | dict[str, object] = ()
    ) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, parameters)
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None


class _Transaction:
    """BEGIN IMMEDIATE … COMMIT, rolled back if the block raises."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index

    def __enter__(self) -> None:
        self.index._run("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.index._run("COMMIT")
        elif self.index._db.in_transaction:
            self.index._db.rollback()


class Probe:
    """Tokenises text with the index's tokenizer, in a private in-memory FTS5 table, so the
    terms of a query compare exactly as the index's terms (stems included). One per process,
    created on first use; safe across threads and forks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0

    def terms(self, texts: Sequence[str]) -> list[set[str]]:
        """The distinct terms of each text."""
        with self._lock:
            db = self._connection()
            try:
                # Written in a transaction that is rolled back: nothing is left to delete.
                db.execute("BEGIN")
                try:
                    db.executemany(
                        "INSERT INTO probe (rowid, body) VALUES (?, ?)", enumerate(texts)
                    )
                    found: list[set[str]] = [set() for _ in texts]
                    for doc, term in db.execute("SELECT DISTINCT doc, term FROM probe_terms"):
                        found[int(doc)].add(str(term))
                    return found
                finally:
                    db.execute("ROLLBACK")
            except sqlite3.Error as exc:
                self._db = None
                raise BeltError(f"tokenising text for the registry failed: {exc}") from None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None or self._pid != os.getpid():
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            db.execute(f"CREATE VIRTUAL TABLE probe USING fts5(body, tokenize='{TOKENIZER}')")
            db.execute("CREATE VIRTUAL TABLE probe_terms USING fts5vocab(probe, instance)")
            self._db, self._pid = db, os.getpid()
        return self._db


PROBE = Probe()


MAX_READERS = 4
"""How many index files one thread keeps open between queries."""


class _Readers(threading.local):
    """This thread's open indexes, by path: each with the identity of the file it opened."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.open: dict[Path, tuple[tuple[int, int], SearchIndex]] = {}


_READERS = _Readers()


def reader(path: Path, *, durable: bool) -> SearchIndex | None:
    """An open index of ``path`` for queries (None if there is no file), kept open by this
    thread between queries while ``path`` is still the file it opened.

    Opening a connection costs more than a query of a small registry: its schema is parsed and
    its pages read again. A file replaced since (discarded and rebuilt) has another inode, and
    is opened afresh; a connection never crosses a fork. Do not close what this returns; a
    caller that finds it damaged calls ``forget``.
    """
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
        oldest = next(iter(readers.open))
        readers.open.pop(oldest)[1].close()
    return index


def forget(path: Path) -> None:
    """Close this thread's open index of ``path``, if any."""
    kept = _READERS.open.pop(path, None)
    if kept is not None and _READERS.pid == os.getpid():
        kept[1].close()


def _check_files(path: Path) -> None:
    for name in ("", *_SIDECARS):
        where = Path(f"{path}{name}")
        try:
            check_regular_or_missing(where)
        except UnsafeFile as exc:
            raise damaged(where, exc.why) from None


def discard(path: Path) -> None:
    """Delete an index file and SQLite's side files (the caller holds the owner's lock)."""
    for name in ("", *_SIDECARS):
        Path(f"{path}{name}").unlink(missing_ok=True)


def _row(record: Sequence[object]) -> Row:
    tags = json.loads(str(record[4]))
    agents = str(record[7]).split()
    return Row(
        id=str(record[0]),
        name_key=str(record[1]),
        name=str(record[2]),
        kind=str(record[3]),
        tags=tuple(str(tag) for tag in tags) if isinstance(tags, list) else (),
        text=str(record[5]),
        version=int(str(record[6])),
        agents=tuple(agents),
    )


def _failure(path: Path, exc: sqlite3.Error) -> Exception:
    code = getattr(exc, "sqlite_errorcode", None)
    if (
        isinstance(exc, sqlite3.DatabaseError)
        and code is not None
        and code & 0xFF in _DAMAGED_CODES
    ):
        return IndexDamaged(path, str(exc))
    if code is not None and code & 0xFF in _BUSY_CODES:
        return Conflict(
            f"{path}: the registry index is busy (another process held it for "
            f"{BUSY_SECONDS:.0f} s)",
            hint="retry when the other belt process has finished",
        )
    return BeltError(f"{path}: the registry index failed: {exc}")
