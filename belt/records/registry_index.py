"""The registry's search index: one SQLite file per owner, derived from the store's entries.

The file (``<store root>/search/registry/<owner>.sqlite3``) is a copy of an owner's entries shaped
for ranking; the entries in the store are the truth. ``belt.records.registry`` decides when the
copy is stale and rebuilds it; this module only keeps the file and answers queries:

- ``meta`` holds the file's ``format`` and ``journal``: the size of the owner's entry index in
  the store when the copy was last brought up to date (see docs/builtins.md, "Freshness"), and
  the number of rows and of their tokens;
- ``entries`` holds one row per entry (id, normalised name, kind, tags, text, version, and the
  agents whose extraction it is) and ``fts`` the FTS5 table of the same rows, sharing rowids;
- ``postings`` holds, for each term, the rows that hold it, how often (weighted by column) and
  each row's length in tokens, as three little-endian arrays: all a query reads to count the
  terms an entry shares and to score it, one row per term of the query.

An index kept open for queries (``reader``) keeps what its queries read (its journal, decoded
postings and each term's shares of the scores, the counts, rows, the rowids of ids; each
bounded) for the next while SQLite's ``data_version`` says no other connection changed the
file, and forgets it with any change of its own.

A file that SQLite reports as corrupt or not a database, or that lacks belt's tables, raises
``IndexDamaged``; the caller discards it and builds a new one. Text is tokenised by FTS5's
``porter unicode61 remove_diacritics 2`` (the probe, an in-memory FTS5 table, tokenises queries
and rows alike) and ranked, for a search and a suggestion alike, first by the number of the
query's terms an entry shares, so no entry that shares more of them is ever lost behind entries
that share fewer, then by BM25 as FTS5's ``bm25()`` computes it.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import re
import sqlite3
import sys
import threading
import unicodedata
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice, repeat
from pathlib import Path
from typing import Any

from belt.errors import BeltError, Conflict
from belt.store.files import SAFE_FLAGS, UnsafeFile, check_regular_or_missing, make_dirs
from belt.store.store import damaged

FORMAT = 3
"""The layout of the index file; a file of another format is discarded and rebuilt (2: the
``fts_terms`` table, and ``agents`` holds the agents whose extraction an entry is; 3: the
``postings`` table and the counts of rows and tokens in ``meta``, no ``fts_terms``)."""

TOKENIZER = "porter unicode61 remove_diacritics 2"
"""FTS5 tokenizer: Unicode word characters, case and diacritics folded, English stems."""

WEIGHTS = (4.0, 2.0, 1.0)
"""BM25 column weights of name, tags and text: a word in the name counts four times."""
_WEIGHTS_SQL = ", ".join(str(weight) for weight in WEIGHTS)

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


class Stale(Exception):
    """The index, as a query read it, reflects another state of the owner's entries than the
    one the query was asked against (its ``journal`` differs): bring it level and ask again."""


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
        self._changes: _Changes | None = None
        self._kept = _Kept()

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

    def _kept_journal(self) -> int:
        """``journal`` in a read transaction (``_reading``), read once for a state of the file."""
        kept = self._kept
        if kept.journal is None:
            kept.journal = self.journal()
        return kept.journal

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
            self._run("DELETE FROM postings")
            self._run("UPDATE meta SET value = 0 WHERE key IN ('rows', 'tokens')")
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
        journal: int | None = None,
    ) -> list[Hit]:
        """The best ``limit`` entries for ``words`` that share at least ``min_terms`` distinct
        terms with the query (all of them if it has fewer), excluding ``exclude_ids`` and the
        entries that are ``exclude_agent``'s extraction. With ``journal``, ``Stale`` unless
        the file reflects that journal, read in the query's own transaction.

        One order for a search (``min_terms`` 1) and a suggestion (above 1), so a suggestion
        is what a search of the same words lists first, less what it excludes: an entry
        sharing more of the query's terms comes first, BM25 ranking those that share as many,
        so none is lost behind entries that share fewer. Ties go to the older entry.

        The score is ``-bm25()`` of the query (its words quoted and joined with OR) as FTS5
        computes it, from the ``postings`` of the query's terms: how many entries hold each,
        and how often (weighted by column) each entry holds it in how many tokens. Only the
        entries of the groups a query takes from are scored.
        """
        if not words:
            return []
        word_terms = PROBE.terms(words)
        if not any(word_terms):
            return []
        needed = max(1, min(min_terms, len(set().union(*word_terms))))
        excluded = set(exclude_ids)
        try:
            return self._search(words, word_terms, limit, needed, excluded, exclude_agent, journal)
        except ZeroDivisionError:  # counts no file belt wrote has: no tokens, yet postings
            raise IndexDamaged(self.path, "its counts of rows and tokens disagree") from None

    def _search(
        self,
        words: Sequence[str],
        word_terms: Sequence[frozenset[str]],
        limit: int,
        needed: int,
        excluded: set[str],
        exclude_agent: str | None,
        journal: int | None = None,
    ) -> list[Hit]:
        query_terms = len(set().union(*word_terms))
        hits: list[Hit] = []
        with self._reading():
            if journal is not None and self._kept_journal() != journal:
                raise Stale
            ranked = self._scorer(words, word_terms).ranked(needed, limit + len(excluded))
            # The excluded ids are left out by rowid, so only the entries returned, and those an
            # agent's exclusion turns down, have their rows read (a few at a time).
            if excluded:
                left_out = self._rowids_of(excluded)
                ranked = (item for item in ranked if item[0] not in left_out)
            batch = limit
            while len(hits) < limit:
                wanted = list(islice(ranked, batch))
                if not wanted:
                    break
                batch *= 2  # an agent's exclusion turned some down: read further at once
                rows = self._rows([rowid for rowid, _, _ in wanted])
                for rowid, score, matched in wanted:
                    row = rows[rowid]
                    if row.id in excluded or (
                        exclude_agent is not None and exclude_agent in row.agents
                    ):
                        continue
                    hits.append(Hit(row=row, score=score, matched=matched, terms=query_terms))
                    if len(hits) == limit:
                        break
        return hits

    def _scorer(self, words: Sequence[str], word_terms: Sequence[frozenset[str]]) -> _Scorer:
        """What scoring the query needs: the postings of its terms, the registry's size in
        entries and tokens, and FTS5's own ``-bm25()`` of each word it reads as several terms
        (a character its tables do not know as a letter splits it: a phrase, whose tokens must
        be adjacent, which the postings do not say)."""
        terms = sorted(set().union(*word_terms))
        kept = self._kept
        postings = kept.postings_of(terms)
        missing = [term for term in terms if term not in postings]
        if missing:
            read = self._postings(missing)
            for term in missing:
                postings[term] = kept.keep_posting(term, read.get(term, EMPTY))
        if kept.stats is None:
            stats = dict(self._all("SELECT key, value FROM meta WHERE key IN ('rows', 'tokens')"))
            rows, tokens = stats.get("rows"), stats.get("tokens")
            if not isinstance(rows, int) or not isinstance(tokens, int) or rows < 0 or tokens < 0:
                raise IndexDamaged(self.path, "meta has no counts of rows and tokens")
            kept.stats = (rows, tokens)
        rows, tokens = kept.stats
        phrases: list[_Posting | dict[int, float]] = []
        names: list[str | None] = []
        for word, terms_of_word in zip(words, word_terms, strict=True):
            if len(terms_of_word) == 1:
                term = next(iter(terms_of_word))
                phrases.append(postings[term])
                names.append(term)
            elif terms_of_word:
                phrases.append(self._phrase_shares(word))
                names.append(None)
        held = [postings[term].docs for term in terms]
        return _Scorer(phrases, held, rows=rows, tokens=tokens, names=names, kept=kept)

    def _phrase_shares(self, word: str) -> dict[int, float]:
        """FTS5's ``-bm25()`` of one word alone, by rowid: its share of an entry's score."""
        found = self._all(
            f"SELECT rowid, -bm25(fts, {_WEIGHTS_SQL}) FROM fts WHERE fts MATCH ?",
            (match_expression([word]),),
        )
        return {int(rowid): float(share) for rowid, share in found}

    def _rows(self, rowids: Sequence[int]) -> dict[int, Row]:
        """The rows of ``rowids``, by rowid; IndexDamaged if one is missing or not as written."""
        kept = self._kept
        rows = kept.rows_of(rowids)
        missing = [rowid for rowid in dict.fromkeys(rowids) if rowid not in rows]
        if not missing:
            return rows
        found = self._all(
            "SELECT rowid, id, name_key, name, kind, tags, text, version, agents FROM entries "
            "WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        )
        try:
            read = {int(record[0]): _row(record[1:]) for record in found}
        except (TypeError, ValueError) as exc:
            raise IndexDamaged(self.path, f"a row is not as belt wrote it: {exc}") from None
        if len(read) != len(missing):
            raise IndexDamaged(self.path, "a term's postings name an entry that has no row")
        for rowid, row in read.items():
            rows[rowid] = kept.keep_row(rowid, row)
        return rows

    def _rowids_of(self, ids: set[str]) -> set[int]:
        """The rowids of the entries of ``ids`` (those the index holds)."""
        kept = self._kept
        found, missing = kept.rowids_of(ids)
        if missing:
            read = dict(
                self._all(
                    "SELECT id, rowid FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(missing)),),
                )
            )
            for entry_id in missing:
                rowid = read.get(entry_id)
                kept.keep_rowid(entry_id, None if rowid is None else int(rowid))
                if rowid is not None:
                    found.add(int(rowid))
        return found

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """One read transaction: the postings, counts and rows a query reads agree. What an
        earlier query read is used again while the file is unchanged: SQLite's
        ``data_version`` of this connection (read in the same transaction, so for the same
        state of the file) changes with every change another connection commits, as its own
        page cache assumes, and this connection's own changes forget it (``_Transaction``)."""
        self._run("BEGIN")
        try:
            row = self._run("PRAGMA data_version").fetchone()
            self._kept.check(None if row is None else row[0])
            yield
        finally:
            if self._db.in_transaction:
                self._run("COMMIT")

    # Internals

    def _check_schema(self) -> None:
        tables = {
            str(name)
            for (name,) in self._run("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            self._create_schema()
            return
        if not {"meta", "entries", "fts", "postings"} <= tables:
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
            self._run(
                "CREATE TABLE IF NOT EXISTS postings (term TEXT PRIMARY KEY, docs BLOB NOT NULL, "
                "freqs BLOB NOT NULL, lengths BLOB NOT NULL) WITHOUT ROWID"
            )
            self._run(
                "INSERT OR IGNORE INTO meta VALUES ('format', ?), ('journal', -1), ('rows', 0), "
                "('tokens', 0)",
                (FORMAT,),
            )

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
        rowid = int(cursor.lastrowid or 0)
        self._run(
            "INSERT INTO fts (rowid, name, tags, text) VALUES (?, ?, ?, ?)",
            (rowid, row.name, " ".join(row.tags), row.text),
        )
        self._pending().added[rowid] = row

    def _remove(self, entry_id: str) -> None:
        found = self._run(
            "SELECT rowid, name, tags, text FROM entries WHERE id = ?", (entry_id,)
        ).fetchone()
        if found is not None:
            rowid = int(found[0])
            try:
                tags = json.loads(str(found[2]))
                columns = (str(found[1]), " ".join(str(tag) for tag in tags), str(found[3]))
            except (TypeError, ValueError) as exc:
                raise IndexDamaged(self.path, f"a row is not as belt wrote it: {exc}") from None
            self._run("DELETE FROM fts WHERE rowid = ?", (rowid,))
            self._run("DELETE FROM entries WHERE rowid = ?", (rowid,))
            changes = self._pending()
            if changes.added.pop(rowid, None) is None:  # else its postings were never written
                changes.removed.append((rowid, columns))

    def _pending(self) -> _Changes:
        if self._changes is None:
            raise AssertionError("rows change only in a transaction")
        return self._changes

    def _write_postings(self, changes: _Changes) -> None:
        """Bring ``postings`` and the counts of rows and tokens level with ``changes``, each
        term's postings read and written once."""
        gone, gone_lengths = PROBE.postings(changes.removed)
        new, new_lengths = PROBE.postings(
            [(rowid, _columns(row)) for rowid, row in changes.added.items()]
        )
        terms = sorted(gone.keys() | new.keys())
        for start in range(0, len(terms), COUNT_BATCH):
            batch = terms[start : start + COUNT_BATCH]
            stored = self._postings(batch)
            for term in batch:
                posting = stored.get(term) or _Posting(array("q"), array("i"), array("i"))
                posting.drop(gone.get(term, ([], []))[0])
                docs, freqs = new.get(term, ([], []))
                posting.add(docs, freqs, [new_lengths[rowid] for rowid in docs])
                if not posting.docs:
                    self._run("DELETE FROM postings WHERE term = ?", (term,))
                    continue
                self._run(
                    "INSERT OR REPLACE INTO postings VALUES (?, ?, ?, ?)", (term, *posting.blobs())
                )
        rows = len(changes.added) - len(changes.removed)
        tokens = sum(new_lengths.values()) - sum(gone_lengths.values())
        self._run("UPDATE meta SET value = value + ? WHERE key = 'rows'", (rows,))
        self._run("UPDATE meta SET value = value + ? WHERE key = 'tokens'", (tokens,))

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

    def _postings(self, terms: list[str]) -> dict[str, _Posting]:
        """The stored postings of ``terms`` (a term no entry holds is missing); a blob that
        does not decode is a damaged index."""
        found = self._all(
            "SELECT term, docs, freqs, lengths FROM postings "
            "WHERE term IN (SELECT value FROM json_each(?))",
            (json.dumps(terms),),
        )
        try:
            return {str(term): _Posting.decode(*blobs) for term, *blobs in found}
        except (TypeError, ValueError) as exc:
            raise IndexDamaged(self.path, f"postings are not as belt wrote them: {exc}") from None

    def _all(
        self, sql: str, parameters: Sequence[object] | dict[str, object] = ()
    ) -> list[tuple[Any, ...]]:
        """Every row of a query; an error while reading them is reported as ``_run`` does."""
        try:
            return self._db.execute(sql, parameters).fetchall()
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None


class _Transaction:
    """BEGIN IMMEDIATE … COMMIT, rolled back if the block raises."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index

    def __enter__(self) -> None:
        self.index._kept.forget()
        self.index._run("BEGIN IMMEDIATE")
        self.index._changes = _Changes(added={}, removed=[])

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.index._kept.forget()
        changes, self.index._changes = self.index._changes, None
        if kind is None:
            try:
                if changes is not None and (changes.added or changes.removed):
                    self.index._write_postings(changes)
                self.index._run("COMMIT")
                return
            except BaseException:
                if self.index._db.in_transaction:
                    self.index._db.rollback()
                raise
        if self.index._db.in_transaction:
            self.index._db.rollback()


K1 = 1.2
B = 0.75
"""FTS5's BM25 parameters (``k1`` and ``b`` of fts5_aux.c), which the scores are computed with."""


def _array(typecode: str, blob: bytes) -> array[int]:
    """A little-endian blob as an array (the file reads the same on any machine)."""
    values = array(typecode)
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def _blob(values: array[int]) -> bytes:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


@dataclass(frozen=True)
class _Posting:
    """One term's postings: the entries that hold it (rowids, ascending), how often each holds
    it (weighted by column, as ``bm25()`` counts) and each entry's length in tokens."""

    docs: array[int]
    freqs: array[int]
    lengths: array[int]

    @classmethod
    def decode(cls, docs: bytes, freqs: bytes, lengths: bytes) -> _Posting:
        """The postings as stored; ValueError if the three lists do not agree."""
        posting = cls(_array("q", docs), _array("i", freqs), _array("i", lengths))
        if not len(posting.docs) == len(posting.freqs) == len(posting.lengths):
            raise ValueError("their lists differ in length")
        return posting

    def drop(self, rowids: Iterable[int]) -> None:
        """Take ``rowids`` out (those it holds)."""
        for rowid in rowids:
            at = bisect_left(self.docs, rowid)
            if at < len(self.docs) and self.docs[at] == rowid:
                del self.docs[at], self.freqs[at], self.lengths[at]

    def add(self, docs: Sequence[int], freqs: Sequence[int], lengths: Sequence[int]) -> None:
        """Put rows in (rowids it does not hold), keeping the rowids ascending."""
        for rowid, freq, length in zip(docs, freqs, lengths, strict=True):
            if not self.docs or rowid > self.docs[-1]:  # the usual case: a new row is the last
                self.docs.append(rowid)
                self.freqs.append(freq)
                self.lengths.append(length)
                continue
            at = bisect_left(self.docs, rowid)
            self.docs.insert(at, rowid)
            self.freqs.insert(at, freq)
            self.lengths.insert(at, length)

    def blobs(self) -> tuple[bytes, bytes, bytes]:
        """The postings as stored."""
        return _blob(self.docs), _blob(self.freqs), _blob(self.lengths)


EMPTY = _Posting(array("q"), array("i"), array("i"))
"""The postings of a term no entry holds (never changed: those a change writes are read afresh)."""

MAX_KEPT_POSTINGS = 262_144
"""How many (entry, term) pairs of postings an open index keeps between queries (16 bytes
each, and 8 more for the pair's share of the entry's score once a query has computed it),
the least recently used term's forgotten first."""
MAX_KEPT_TERMS = 8_192
"""How many terms' postings (those of terms no entry holds included) it keeps."""
MAX_KEPT_ROWS = 256
"""How many rows it keeps (a row's text is at most ``registry.MAX_TEXT_CHARS``)."""
MAX_KEPT_IDS = 4_096
"""How many entry ids' rowids (or that the index has no such entry) it keeps."""


class _Kept:
    """What an open index read for earlier queries, for the same state of its file: its
    journal, decoded postings, the counts of rows and tokens, rows, and the rowids of ids. Each
    part is bounded, the least recently used forgotten first."""

    def __init__(self) -> None:
        self.version: object = None
        self.journal: int | None = None
        self.stats: tuple[int, int] | None = None
        self.postings: dict[str, _Posting] = {}
        self.shares: dict[str, array[float]] = {}
        self.size = 0
        self.rows: dict[int, Row] = {}
        self.rowids: dict[str, int | None] = {}

    def check(self, version: object) -> None:
        """Forget everything unless ``version`` is the file's version it was read at."""
        if version is None or version != self.version:
            self.forget()
            self.version = version

    def forget(self) -> None:
        """Forget everything (the file changed, or is about to)."""
        self.version = None
        self.journal = None
        self.stats = None
        self.postings = {}
        self.shares = {}
        self.size = 0
        self.rows = {}
        self.rowids = {}

    def postings_of(self, terms: Iterable[str]) -> dict[str, _Posting]:
        """The postings kept of ``terms`` (those kept), each now the most recently used."""
        kept = self.postings
        found: dict[str, _Posting] = {}
        for term in terms:
            posting = kept.pop(term, None)
            if posting is not None:
                kept[term] = found[term] = posting
        return found

    def keep_posting(self, term: str, posting: _Posting) -> _Posting:
        """Keep ``posting`` as ``term``'s (if it fits at all), forgetting the oldest."""
        size = len(posting.docs)
        if size > MAX_KEPT_POSTINGS:
            return posting
        kept = self.postings
        kept[term] = posting
        self.size += size
        while self.size > MAX_KEPT_POSTINGS or len(kept) > MAX_KEPT_TERMS:
            oldest = next(iter(kept))
            self.size -= len(kept.pop(oldest).docs)
            self.shares.pop(oldest, None)
        return posting

    def keep_shares(self, term: str, shares: array[float]) -> None:
        """Keep a kept term's shares of the scores of the entries holding it, as long as its
        postings are kept (so they are bounded alike)."""
        if term in self.postings:
            self.shares[term] = shares

    def rows_of(self, rowids: Iterable[int]) -> dict[int, Row]:
        """The rows kept of ``rowids``, each now the most recently used."""
        kept = self.rows
        found: dict[int, Row] = {}
        for rowid in rowids:
            row = kept.pop(rowid, None)
            if row is not None:
                kept[rowid] = found[rowid] = row
        return found

    def keep_row(self, rowid: int, row: Row) -> Row:
        """Keep ``row`` (and its id's rowid), forgetting the oldest."""
        self.rows[rowid] = row
        while len(self.rows) > MAX_KEPT_ROWS:
            del self.rows[next(iter(self.rows))]
        self.keep_rowid(row.id, rowid)
        return row

    def rowids_of(self, ids: Iterable[str]) -> tuple[set[int], list[str]]:
        """The rowids kept of ``ids`` (a kept None, no entry, adds none), and the ids of which
        none is kept."""
        kept = self.rowids
        found: set[int] = set()
        missing: list[str] = []
        for entry_id in ids:
            if entry_id not in kept:
                missing.append(entry_id)
                continue
            rowid = kept[entry_id] = kept.pop(entry_id)
            if rowid is not None:
                found.add(rowid)
        return found, missing

    def keep_rowid(self, entry_id: str, rowid: int | None) -> None:
        """Keep the rowid of ``entry_id`` (None: the index has no such entry)."""
        self.rowids[entry_id] = rowid
        while len(self.rowids) > MAX_KEPT_IDS:
            del self.rowids[next(iter(self.rowids))]


SHORT_POSTINGS = 32
"""A term held by at most this many entries has its shares of a search's scores computed and
added one by one (the dicts and the kept shares of longer postings cost more than they save)."""


class _Scorer:
    """Scores entries for one query as FTS5's ``bm25()`` does, negated (fts5_aux.c): the sum,
    over the query's phrases in order, of IDF × f·(k1 + 1) / (f + k1·(1 − b + b·D / avgdl)),
    f being the phrase's weighted frequency in the entry, D the entry's tokens, avgdl the
    tokens per entry, IDF log((N − n + 0.5) / (n + 0.5)) (at least 10⁻⁶) for the N entries of
    which n hold the phrase. Each step is the same floating-point operation as FTS5's."""

    def __init__(
        self,
        phrases: Sequence[_Posting | dict[int, float]],
        held: Sequence[Sequence[int]],
        *,
        rows: int,
        tokens: int,
        names: Sequence[str | None] = (),
        kept: _Kept | None = None,
    ) -> None:
        self.phrases = phrases
        self.held = held
        self.names = names
        self.kept = kept
        self.avgdl = float(tokens) / float(rows) if rows else 1.0
        self.idf = [
            _idf(rows, len(phrase.docs)) if isinstance(phrase, _Posting) else 0.0
            for phrase in phrases
        ]

    def scores(self, rowids: Sequence[int] | None = None) -> dict[int, float]:
        """The scores of ``rowids`` (None: of every entry holding a phrase), each the sum of
        its shares over the phrases in the query's order (a phrase an entry does not hold adds
        0.0 in FTS5's sum, which changes nothing, so it is left out here)."""
        scores: dict[int, float] = {} if rowids is None else dict.fromkeys(rowids, 0.0)
        for number, phrase in enumerate(self.phrases):
            if isinstance(phrase, dict):
                if rowids is None:
                    _add(scores, dict(phrase))
                    continue
                for rowid in scores:
                    share = phrase.get(rowid)
                    if share is not None:
                        scores[rowid] = scores[rowid] + share
                continue
            if rowids is None and len(phrase.docs) > SHORT_POSTINGS:  # no places to look up
                _add(scores, dict(zip(phrase.docs, self._shares(number), strict=True)))
                continue
            if rowids is None:  # a few entries: their shares computed and added one by one
                idf, avgdl, k1_plus_1, one_minus_b = self.idf[number], self.avgdl, K1 + 1.0, 1 - B
                for rowid, freq, length in zip(
                    phrase.docs, phrase.freqs, phrase.lengths, strict=True
                ):
                    f = float(freq)
                    scores[rowid] = scores.get(rowid, 0.0) + idf * (
                        (f * k1_plus_1) / (f + K1 * (one_minus_b + B * float(length) / avgdl))
                    )
                continue
            docs, size = phrase.docs, len(phrase.docs)
            keys = list(scores)
            places = [
                at
                for rowid, at in zip(keys, map(bisect_left, repeat(docs), keys), strict=True)
                if at < size and docs[at] == rowid
            ]
            shares = self._kept_shares(number)
            if shares is not None:
                for at in places:
                    rowid = docs[at]
                    scores[rowid] = scores[rowid] + shares[at]
                continue
            idf, avgdl, k1_plus_1, one_minus_b = self.idf[number], self.avgdl, K1 + 1.0, 1 - B
            freqs, lengths = phrase.freqs, phrase.lengths
            for at in places:
                rowid = docs[at]
                f = float(freqs[at])
                scores[rowid] = scores[rowid] + idf * (
                    (f * k1_plus_1) / (f + K1 * (one_minus_b + B * float(lengths[at]) / avgdl))
                )
        return scores

    def _kept_shares(self, number: int) -> array[float] | None:
        """The shares of phrase ``number`` in its postings' order, if an earlier query of the
        same state of the file computed them."""
        name = self.names[number] if number < len(self.names) else None
        return None if self.kept is None or name is None else self.kept.shares.get(name)

    def _shares(self, number: int) -> array[float]:
        """The shares of phrase ``number`` (one term's postings) in its postings' order, each
        entry's ``idf * f·(k1 + 1) / (f + k1·(1 − b + b·D / avgdl))``: computed once for a
        state of the file while its postings are kept."""
        shares = self._kept_shares(number)
        if shares is not None:
            return shares
        phrase = self.phrases[number]
        assert isinstance(phrase, _Posting)
        idf, avgdl, k1_plus_1, one_minus_b = self.idf[number], self.avgdl, K1 + 1.0, 1 - B
        shares = array(
            "d",
            [
                idf * ((f * k1_plus_1) / (f + K1 * (one_minus_b + B * float(length) / avgdl)))
                for f, length in zip(map(float, phrase.freqs), phrase.lengths, strict=True)
            ],
        )
        name = self.names[number] if number < len(self.names) else None
        if self.kept is not None and name is not None:
            self.kept.keep_shares(name, shares)
        return shares

    def ranked(self, needed: int, first: int) -> Iterator[tuple[int, float, int]]:
        """The one order of a search and a suggestion (rowid, score, terms held): the entries
        holding at least ``needed`` of the query's terms, those holding more first, then by
        score, ties to the older. Only the groups read are scored, and in each only the best
        ``first`` sorted unless more are read."""
        counts: Counter[int] = Counter()
        for docs in self.held:
            counts.update(docs)
        groups: dict[int, list[int]] = {}
        for rowid, matched in counts.items():
            if matched >= needed:
                groups.setdefault(matched, []).append(rowid)
        everyone: dict[int, float] | None = None
        for matched in sorted(groups, reverse=True):
            group = groups[matched]
            if len(group) * 2 > len(counts):
                # Most entries (a one-word query: all of them): scoring every entry at once
                # adds each phrase's shares in bulk, cheaper than looking each entry up.
                if everyone is None:
                    everyone = self.scores()
                # An entry holding a phrase's terms apart, and no other phrase, scores 0.0.
                scores = {rowid: everyone.get(rowid, 0.0) for rowid in group}
            else:
                scores = self.scores(group)
            for rowid, score in _best_first(scores, first):
                yield rowid, score, matched


def _add(scores: dict[int, float], shares: dict[int, float]) -> None:
    """Add one phrase's ``shares`` (by rowid; changed here) to ``scores``: an entry scored
    already gets the sum, its score first, as FTS5 adds; one not scored yet gets its share
    (FTS5's 0.0 + share is the share itself). Dict operations that run in C, but for the
    entries holding several of the query's phrases (few, against those holding one)."""
    for rowid in shares.keys() & scores.keys():
        shares[rowid] = scores[rowid] + shares[rowid]
    scores.update(shares)


def _idf(rows: int, holders: int) -> float:
    idf = math.log((rows - holders + 0.5) / (holders + 0.5))
    return idf if idf > 0.0 else 1e-6


def _best_first(scores: dict[int, float], first: int) -> Iterator[tuple[int, float]]:
    """Entries by score, highest first, ties to the older (lower rowid); only the best
    ``first`` are sorted unless more are read."""
    if not len(scores) > first > 0:
        for negated, rowid in sorted((-score, rowid) for rowid, score in scores.items()):
            yield rowid, -negated
        return
    cut = heapq.nlargest(first, scores.values())[-1]
    best = sorted((-score, rowid) for rowid, score in scores.items() if score >= cut)
    for negated, rowid in best:
        yield rowid, -negated
    rest = sorted((-score, rowid) for rowid, score in scores.items() if score < cut)
    for negated, rowid in rest:
        yield rowid, -negated


@dataclass
class _Changes:
    """The rows one transaction adds and removes, whose postings are written when it commits:
    each term's postings once, however many of its rows changed."""

    added: dict[int, Row]
    removed: list[tuple[int, tuple[str, str, str]]]


COUNT_BATCH = 2_000
"""How many rows the probe tokenises at once when their postings are written."""

MAX_KNOWN_WORDS = 10_000
"""How many words' terms the probe remembers (words of up to ``MAX_KNOWN_CHARS`` characters)."""
MAX_KNOWN_CHARS = 64


class Probe:
    """Tokenises text with the index's tokenizer, in a private in-memory FTS5 table, so the
    terms of a query compare exactly as the index's terms (stems included). One per process,
    created on first use; safe across threads and forks. The terms of a short word are
    remembered (a tokenizer's answer never changes), the oldest forgotten first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._known: dict[str, frozenset[str]] = {}

    def terms(self, texts: Sequence[str]) -> list[frozenset[str]]:
        """The distinct terms of each text."""
        with self._lock:
            known = self._known
            unknown = list(dict.fromkeys(text for text in texts if text not in known))
            found = dict(zip(unknown, self._tokenise(unknown), strict=True)) if unknown else {}
            for text, terms in found.items():
                if len(text) <= MAX_KNOWN_CHARS:
                    known[text] = terms
            while len(known) > MAX_KNOWN_WORDS:
                del known[next(iter(known))]
            return [found[text] if text in found else known[text] for text in texts]

    def postings(
        self, rows: Sequence[tuple[int, tuple[str, str, str]]]
    ) -> tuple[dict[str, tuple[list[int], list[int]]], dict[int, int]]:
        """For rows of (rowid, (name, tags, text) as ``fts`` holds them): each term's rows
        and how often each holds it, weighted by column as ``bm25()`` counts (``WEIGHTS``),
        and each row's length in tokens."""
        held: dict[str, tuple[list[int], list[int]]] = {}
        lengths: dict[int, int] = {}
        weight = " ".join(
            f"WHEN '{column}' THEN {int(value)}"
            for column, value in zip(("name", "tags", "text"), WEIGHTS, strict=True)
        )
        with self._lock:
            for start in range(0, len(rows), COUNT_BATCH):
                db = self._connection()
                try:
                    db.execute("BEGIN")
                    try:
                        db.executemany(
                            "INSERT INTO probe_row (rowid, name, tags, text) VALUES (?, ?, ?, ?)",
                            (
                                (rowid, *columns)
                                for rowid, columns in rows[start : start + COUNT_BATCH]
                            ),
                        )
                        for doc, count in db.execute(
                            "SELECT doc, count(*) FROM probe_row_terms GROUP BY doc"
                        ):
                            lengths[int(doc)] = int(count)
                        for term, docs, freqs in db.execute(
                            "SELECT term, group_concat(doc), group_concat(freq) FROM ("
                            f"SELECT term, doc, sum(CASE col {weight} END) AS freq "
                            "FROM probe_row_terms GROUP BY term, doc) GROUP BY term"
                        ):
                            rowids, counts = held.setdefault(str(term), ([], []))
                            rowids.extend(map(int, str(docs).split(",")))
                            counts.extend(map(int, str(freqs).split(",")))
                    finally:
                        db.execute("ROLLBACK")
                except sqlite3.Error as exc:
                    self._db = None
                    raise BeltError(f"tokenising text for the registry failed: {exc}") from None
        return held, lengths

    def _tokenise(self, texts: Sequence[str]) -> list[frozenset[str]]:
        db = self._connection()
        try:
            # Written in a transaction that is rolled back: nothing is left to delete.
            db.execute("BEGIN")
            try:
                db.executemany("INSERT INTO probe (rowid, body) VALUES (?, ?)", enumerate(texts))
                found: list[set[str]] = [set() for _ in texts]
                for doc, term in db.execute("SELECT DISTINCT doc, term FROM probe_terms"):
                    found[int(doc)].add(str(term))
                return [frozenset(terms) for terms in found]
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
            db.execute(
                "CREATE VIRTUAL TABLE probe_row "
                f"USING fts5(name, tags, text, tokenize='{TOKENIZER}')"
            )
            db.execute("CREATE VIRTUAL TABLE probe_row_terms USING fts5vocab(probe_row, instance)")
            self._db, self._pid = db, os.getpid()
        return self._db


PROBE = Probe()


MAX_READERS = 4
"""How many index files one thread keeps open between queries."""

READER_CACHE_KIB = 8_192
"""The page cache of an index kept open for queries, in KiB (SQLite's default is 2,000): the
pages of a registry of 10,000 entries that queries read stay in memory between them."""


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
    index._run(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
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


def _columns(row: Row) -> tuple[str, str, str]:
    """A row's name, tags and text as the ``fts`` table holds them."""
    return row.name, " ".join(row.tags), row.text


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
