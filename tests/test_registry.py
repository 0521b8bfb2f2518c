"""The local registry on real stores: entries and versions, the derived index, search, suggest,
save_candidate and registry directories."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.errors import BeltError, ExitCode, InvalidInput, NotFound, UsageError
from belt.records import registry, registry_index
from belt.records.registry import (
    DEFAULT_OWNER,
    ENTRIES,
    KINDS,
    Candidate,
    Origin,
    check_candidate,
    get_entry,
    index_path,
    list_entries,
    load_directory,
    make_candidate,
    remove_entry,
    same_meaning,
    save_candidate,
    search,
    suggest,
)
from belt.records.registry_index import (
    FORMAT,
    MAX_QUERY_WORDS,
    STOPWORDS,
    query_phrases,
    query_words,
    quoted,
)
from belt.store import Store, open_store
from belt.store.shapes import derive

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples" / "registry"
PERSON = Origin.person()
# Every code point, lone surrogates and control characters included.
ANY_CHARACTER = st.characters(exclude_categories=())


def save(
    store: Store,
    name: str,
    text: str,
    *,
    kind: str = "observation",
    tags: tuple[str, ...] = (),
    owner: str = DEFAULT_OWNER,
    origin: Origin = PERSON,
) -> registry.SaveOutcome:
    candidate = make_candidate(name=name, kind=kind, text=text, tags=tags)
    return save_candidate(store, owner=owner, candidate=candidate, origin=origin)


@contextmanager
def fresh_store() -> Iterator[Store]:
    """A store of its own, for each example a property test tries."""
    with tempfile.TemporaryDirectory(prefix="belt-registry-") as directory:
        yield Store(Path(directory) / "store", fsync=False)


def extraction(agent: str) -> Origin:
    return Origin.extraction(agent=agent, chat="ch_1", branch="ch_review_1")


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "locks" not in p.parts and "search" not in p.parts
    }


@pytest.fixture
def store(belt_home: Path) -> Store:
    """The store of the test's state directory, which the CLI uses too, written without fsync:
    these tests are about what the registry holds and finds, not about durability (an fsync per
    file made a test saving hundreds of entries wait seconds on the disk)."""
    return open_store().without_fsync()


# Entries and versions


def test_a_new_name_creates_an_entry_in_the_store(store: Store) -> None:
    outcome = save(store, "Delete only in /tmp", "Only delete files under /tmp.", tags=("Files",))
    assert outcome.action == "created"
    assert outcome.version == 1
    assert outcome.id.startswith("re_")
    on_disk = json.loads(store.path("registry-entry", outcome.id).read_text())
    assert on_disk["kind"] == "registry-entry"
    entry = on_disk["data"]
    assert entry["owner"] == DEFAULT_OWNER
    assert entry["name"] == "Delete only in /tmp"
    assert entry["tags"] == ["files"]
    assert entry["text"] == "Only delete files under /tmp."
    assert entry["origin"] == {"by": "person", "source": "cli"}
    assert [v["version"] for v in entry["versions"]] == [1]
    assert entry["versions"][0]["created_at"] == entry["created_at"]
    assert store.members(ENTRIES, DEFAULT_OWNER) == [outcome.id]
    # The file's (and `belt registry show --json`'s) order of fields.
    assert list(entry) == [
        *("id", "owner", "name", "kind", "tags", "text", "version", "origin", "versions"),
        *("created_at", "updated_at", "removed_at"),
    ]


def test_the_same_name_and_meaning_is_skipped_and_changes_nothing(store: Store) -> None:
    first = save(store, "Delete only in /tmp", "Only delete files under /tmp.")
    before = snapshot(store.root)
    again = save(store, "  delete ONLY in /tmp ", "only   delete files\nunder /TMP.  ")
    assert again.action == "skipped"
    assert (again.id, again.version) == (first.id, 1)
    assert snapshot(store.root) == before


def test_the_same_name_with_changed_text_adds_a_version_and_keeps_the_old(store: Store) -> None:
    first = save(store, "Backups", "Backups run nightly.", kind="observation")
    agent = extraction("ag_reviewer")
    candidate = make_candidate(
        name="BACKUPS", kind="concept", text="Backups run hourly.", tags=["backup"]
    )
    outcome = save_candidate(store, owner=DEFAULT_OWNER, candidate=candidate, origin=agent)
    assert outcome.action == "versioned"
    assert (outcome.id, outcome.version, outcome.name) == (first.id, 2, "Backups")
    entry = get_entry(store, entry_id=first.id)
    assert entry["text"] == "Backups run hourly."
    assert entry["kind"] == "concept"
    assert entry["tags"] == ["backup"]
    assert entry["origin"] == {"by": "person", "source": "cli"}
    assert [(v["version"], v["text"], v["origin"]["by"]) for v in entry["versions"]] == [
        (1, "Backups run nightly.", "person"),
        (2, "Backups run hourly.", "agent"),
    ]
    assert entry["versions"][1]["origin"] == {
        "by": "agent",
        "agent": "ag_reviewer",
        "chat": "ch_1",
        "branch": "ch_review_1",
    }
    assert store.members(ENTRIES, DEFAULT_OWNER) == [first.id]


def test_same_meaning_ignores_case_and_whitespace_only() -> None:
    assert same_meaning("Keep  backups\n", "keep BACKUPS")
    assert same_meaning("Straße", "STRASSE")
    assert not same_meaning("Keep backups.", "Keep backups")
    assert not same_meaning("keep backups", "keep the backups")


def test_owners_have_separate_registries(store: Store) -> None:
    mine = save(store, "Backups", "Backups run nightly at two.")
    theirs = save(store, "Backups", "Backups run nightly at two.", owner="team-b")
    assert theirs.action == "created"
    assert mine.id != theirs.id
    assert [e["id"] for e in list_entries(store, owner="team-b")] == [theirs.id]
    assert [m.id for m in search(store, owner="team-b", query="nightly backups")] == [theirs.id]
    assert [m.id for m in search(store, query="nightly backups")] == [mine.id]


def test_list_filters_by_kind_and_keeps_creation_order(store: Store) -> None:
    a = save(store, "A", "first text", kind="skill")
    b = save(store, "B", "second text", kind="app")
    save(store, "A", "first text, changed", kind="skill")
    assert [e["id"] for e in list_entries(store)] == [a.id, b.id]
    assert [e["id"] for e in list_entries(store, kind="app")] == [b.id]
    with pytest.raises(InvalidInput):
        list_entries(store, kind="note")


def test_remove_takes_an_entry_out_and_keeps_its_file(store: Store) -> None:
    gone = save(store, "Backups", "Backups run nightly.")
    kept = save(store, "Restores", "Restores come from the nightly backups.")
    removed = remove_entry(store, entry_id=gone.id)
    assert removed["removed_at"]
    assert [e["id"] for e in list_entries(store)] == [kept.id]
    assert [m.id for m in search(store, query="nightly backups")] == [kept.id]
    assert json.loads(store.path("registry-entry", gone.id).read_text())["data"]["removed_at"]
    with pytest.raises(NotFound) as caught:
        get_entry(store, entry_id=gone.id)
    assert caught.value.exit_code == ExitCode.NOT_FOUND
    with pytest.raises(NotFound):
        remove_entry(store, entry_id=gone.id)
    again = save(store, "Backups", "Backups run nightly.")
    assert again.action == "created"
    assert again.id != gone.id


def test_unknown_and_hostile_ids(store: Store) -> None:
    with pytest.raises(NotFound):
        get_entry(store, entry_id="re_nope")
    with pytest.raises(NotFound):
        remove_entry(store, entry_id="re_nope")
    with pytest.raises(InvalidInput):
        get_entry(store, entry_id="../../etc/passwd")
    with pytest.raises(InvalidInput):
        save(store, "x", "y", owner="../team")
    with pytest.raises(InvalidInput):
        Origin.extraction(agent="ag 1", chat="ch_1", branch="ch_2")


# Checking candidates and files


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"name": "n", "kind": "note", "text": "t"}, "x.toml: kind: 'note' is not one of"),
        ({"name": "n", "text": "t"}, "x.toml: kind: missing"),
        ({"name": "n", "kind": "skill"}, "x.toml: text: missing"),
        ({"name": "n", "kind": "skill", "text": "  \n "}, "x.toml: text: is empty"),
        (
            {"name": 3, "kind": "skill", "text": "t"},
            "x.toml: name: expected a string, got a number",
        ),
        ({"name": "a\x1bb", "kind": "skill", "text": "t"}, "x.toml: name: holds the control"),
        ({"name": "n", "kind": "skill", "text": "t\x00"}, "x.toml: text: holds the control"),
        ({"name": "n", "kind": "skill", "text": "a\rb"}, "x.toml: text: holds the control"),
        ({"name": "n", "kind": "skill", "text": "\ud800"}, "x.toml: text: is not valid Unicode"),
        ({"name": "n" * 121, "kind": "skill", "text": "t"}, "x.toml: name: 121 characters"),
        ({"name": "n", "kind": "skill", "text": "t" * 20_001}, "x.toml: text: 20001 characters"),
        ({"name": "n", "kind": "skill", "text": "t", "tags": "a"}, "x.toml: tags: expected a list"),
        ({"name": "n", "kind": "skill", "text": "t", "tags": ["a b"]}, "x.toml: tags[0]: 'a b'"),
        ({"name": "n", "kind": "skill", "text": "t", "tags": [1]}, "x.toml: tags[0]: expected"),
        ({"name": "n", "kind": "skill", "text": "t", "owner": "x"}, "x.toml: owner: unknown key"),
    ],
)
def test_a_bad_candidate_names_where_and_the_key(raw: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_candidate(raw, where="x.toml")
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_every_problem_of_a_candidate_is_listed() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_candidate({"kind": "note", "colour": "red", "tags": [""]}, where="x.toml")
    assert sorted(p.split(":")[1].strip() for p in caught.value.problems) == [
        "colour",
        "kind",
        "name",
        "tags[0]",
        "text",
    ]


def test_text_keeps_newlines_and_tabs_and_reads_crlf_as_newlines() -> None:
    candidate = make_candidate(name="  two   words ", kind="skill", text="a\r\n\tb\n")
    assert (candidate.name, candidate.text) == ("two words", "a\n\tb")


def test_a_candidate_built_directly_is_checked_when_saved(store: Store) -> None:
    with pytest.raises(InvalidInput):
        save_candidate(
            store,
            owner=DEFAULT_OWNER,
            candidate=Candidate(name="n", kind="note", text="t"),
            origin=PERSON,
        )
    assert list_entries(store) == []


# Search: tokenisation and ranking


def test_query_words_fold_case_drop_stopwords_and_never_carry_syntax() -> None:
    assert query_words('Delete the "OLD" files* NEAR(/tmp) AND don\'t') == [
        "delete",
        "old",
        "files",
        "near",
        "tmp",
    ]
    assert query_words("the a of I") == []
    assert len(query_words(" ".join(f"w{n}" for n in range(100)))) == MAX_QUERY_WORDS
    assert [quoted(word) for word in ["a", 'b"c']] == ['"a"', '"b""c"']
    # One phrase per term: a plural and its singular are one term of the query.
    assert query_phrases(query_words("backups backup nightly")) == ['"backups"', '"nightly"']
    assert {"the", "and", "you"} <= STOPWORDS


def test_search_ranks_by_bm25_with_the_name_weighted_above_the_text(store: Store) -> None:
    save(store, "Rotation of keys", "How often the signing secrets change.")
    in_text = save(store, "Signing secrets", "Rotation happens every ninety days.")
    in_name = save(store, "Rotation schedule", "Secrets change every ninety days.")
    save(store, "Unrelated", "Lunch is at noon.")
    save(store, "Also unrelated", "The office closes at six.")
    matches = search(store, query="rotation")
    assert [m.id for m in matches][-1] == in_text.id
    assert in_name.id in [m.id for m in matches[:2]]
    scores = [m.score for m in matches]
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)
    assert all((m.matched_terms, m.query_terms) == (1, 1) for m in matches)


def test_search_stems_and_folds_diacritics(store: Store) -> None:
    entry = save(store, "Café rules", "Deleting files is reviewed.")
    save(store, "Other", "Nothing in common here.")
    assert [m.id for m in search(store, query="CAFE")] == [entry.id]
    assert [m.id for m in search(store, query="delete file")] == [entry.id]
    assert search(store, query="cafeteria") == []


def test_search_with_no_words_or_no_entries_is_empty(store: Store) -> None:
    assert search(store, query="anything") == []
    save(store, "Backups", "Backups run nightly.")
    assert search(store, query="") == []
    assert search(store, query="the and of") == []
    assert search(store, query='"*^():-+') == []


def test_search_limit_is_bounded(store: Store) -> None:
    for number in range(5):
        save(store, f"Backup note {number}", f"Backups note number {number}.")
    assert len(search(store, query="backup", limit=2)) == 2
    for bad in (0, 101, True):
        with pytest.raises(InvalidInput):
            search(store, query="backup", limit=bad)


@pytest.fixture(scope="module")
def query_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two entries whose words include FTS5's syntax, for the queries of the property test below
    (which only reads: one store for all its examples)."""
    store = Store(tmp_path_factory.mktemp("query") / "store", fsync=False)
    save(store, "Delete only in /tmp", "Only delete files under /tmp; ask for anything else.")
    save(store, "Backups", 'Backups run nightly, NEAR the database; AND "OR" * ^ -')
    return store


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.text(ANY_CHARACTER, max_size=300))
def test_any_text_as_a_query_is_answered_without_error(query_store: Store, query: str) -> None:
    found = search(query_store, query=query)
    for match in found + suggest(query_store, owner=DEFAULT_OWNER, prompt=query):
        assert match.score > 0
        assert 1 <= match.matched_terms <= match.query_terms


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.text(ANY_CHARACTER, max_size=40),
    text=st.text(ANY_CHARACTER, max_size=200),
    tags=st.lists(st.text(ANY_CHARACTER, max_size=10), max_size=4),
)
def test_any_entry_is_saved_searchable_and_idempotent_or_refused_cleanly(
    name: str, text: str, tags: list[str]
) -> None:
    with fresh_store() as store:
        try:
            candidate = make_candidate(name=name, kind="concept", text=text, tags=tags)
        except InvalidInput as exc:
            assert exc.exit_code == ExitCode.INVALID_INPUT
            assert list_entries(store) == []
            return
        first = save_candidate(store, owner=DEFAULT_OWNER, candidate=candidate, origin=PERSON)
        assert first.action == "created"
        second = save_candidate(store, owner=DEFAULT_OWNER, candidate=candidate, origin=PERSON)
        assert (second.action, second.id, second.version) == ("skipped", first.id, 1)
        assert len(list_entries(store)) == 1
        for query in (text, name, " ".join(candidate.tags)):
            for match in search(store, query=query):
                assert match.id == first.id


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.sampled_from(["Backups run nightly.", "backups  RUN nightly.", "Backups run hourly."]),
        min_size=1,
        max_size=6,
    )
)
def test_saving_is_idempotent_whatever_came_before(texts: list[str]) -> None:
    with fresh_store() as store:
        for text in texts:
            save(store, "Backups", text)
            entry = list_entries(store)[0]
            again = save(store, "backups", text)
            assert again.action == "skipped"
            assert get_entry(store, entry_id=again.id) == entry
        versions = get_entry(store, entry_id=list_entries(store)[0]["id"])["versions"]
        assert all(not same_meaning(a["text"], b["text"]) for a, b in pairwise(versions))


# Suggest: minimum relevance and exclusions


@pytest.fixture
def examples(store: Store) -> dict[str, str]:
    """The example registry, loaded: entry name → id."""
    return {loaded.outcome.name: loaded.outcome.id for loaded in load_directory(store, EXAMPLES)}


def test_suggest_offers_relevant_entries_at_most_limit(
    store: Store, examples: dict[str, str]
) -> None:
    matches = suggest(
        store, owner=DEFAULT_OWNER, prompt="Delete /var/lib/app/production.db and old backups"
    )
    assert 1 <= len(matches) <= 3
    assert matches[0].id == examples["Where the production database lives"]
    assert all(m.matched_terms >= 2 for m in matches)
    assert len(suggest(store, owner=DEFAULT_OWNER, prompt="delete files", limit=1)) == 1


@pytest.mark.parametrize(
    "prompt",
    [
        "What's the weather like in Lisbon today?",
        "Tell me a joke about penguins",
        "hello",
        "the and of it",
        "",
    ],
)
def test_an_unrelated_prompt_suggests_nothing(
    store: Store, examples: dict[str, str], prompt: str
) -> None:
    assert suggest(store, owner=DEFAULT_OWNER, prompt=prompt) == []


def test_sharing_one_word_of_a_longer_prompt_is_not_enough(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    save(store, "Lunch", "Lunch is at noon.")
    assert search(store, query="nightly weather report")[0].id == entry.id
    assert suggest(store, owner=DEFAULT_OWNER, prompt="nightly weather report") == []
    assert [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt="nightly backups")] == [
        entry.id
    ]
    # A prompt with one term needs only that one; plural and singular are one term.
    assert [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt="backups?")] == [entry.id]
    assert suggest(store, owner=DEFAULT_OWNER, prompt="backup backups weather") == []


def test_suggest_never_offers_excluded_ids(store: Store, examples: dict[str, str]) -> None:
    prompt = "restore the deleted file from the nightly backup"
    first = suggest(store, owner=DEFAULT_OWNER, prompt=prompt)
    assert first
    excluded = [m.id for m in first]
    second = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_ids=excluded)
    assert not {m.id for m in second} & set(excluded)


def test_suggest_never_offers_an_agents_own_extractions(store: Store) -> None:
    mine = save(store, "Tmp rule", "Only delete temp files under /tmp.", origin=extraction("ag_a"))
    theirs = save(store, "Tmp note", "Temp files under /tmp are deleted weekly.")
    prompt = "delete the temp files in /tmp"
    assert {m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt=prompt)} == {
        mine.id,
        theirs.id,
    }
    for_a = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_origin_agent="ag_a")
    assert [m.id for m in for_a] == [theirs.id]
    for_b = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_origin_agent="ag_b")
    assert {m.id for m in for_b} == {mine.id, theirs.id}
    # A version A wrote into someone else's entry is A's extraction too.
    save(store, "Tmp note", "Temp files under /tmp are deleted daily.", origin=extraction("ag_a"))
    assert suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_origin_agent="ag_a") == []


def test_a_persons_newer_version_makes_an_entry_suggestible_to_the_agent_again(
    store: Store,
) -> None:
    prompt = "delete the temp files in /tmp"
    theirs = save(store, "Tmp note", "Temp files under /tmp are deleted weekly.")
    mine = save(store, "Tmp rule", "Only delete temp files under /tmp.", origin=extraction("ag_a"))

    def for_a() -> list[str]:
        found = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_origin_agent="ag_a")
        return [m.id for m in found]

    save(store, "Tmp note", "Temp files under /tmp are deleted daily.", origin=extraction("ag_a"))
    assert for_a() == []
    # A person's newer version: the current text is no longer A's extraction.
    save(store, "Tmp note", "Temp files under /tmp are deleted every night.")
    assert for_a() == [theirs.id]
    assert registry.extracted_by(get_entry(store, entry_id=theirs.id)) == set()
    # An entry A created stays A's, whoever wrote its latest version.
    save(store, "Tmp rule", "Only delete temp files under /tmp, and log it.")
    assert for_a() == [theirs.id]
    assert registry.extracted_by(get_entry(store, entry_id=mine.id)) == {"ag_a"}
    # Another agent's version is that agent's extraction, not A's.
    save(store, "Tmp note", "Temp files under /tmp go at midnight.", origin=extraction("ag_b"))
    assert for_a() == [theirs.id]
    for_b = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_origin_agent="ag_b")
    assert [m.id for m in for_b] == [mine.id]


def test_exclusions_do_not_hide_entries_further_down(store: Store) -> None:
    ids = [
        save(store, f"Temp rule {n}", f"Delete temp files rule {n}.", origin=extraction("ag_a")).id
        for n in range(60)
    ]
    other = save(store, "Temp other", "Delete temp files slowly, with care and a backup.")
    found = suggest(
        store,
        owner=DEFAULT_OWNER,
        prompt="delete temp files",
        exclude_ids=ids[:5],
        exclude_origin_agent="ag_a",
    )
    assert [m.id for m in found] == [other.id]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(
        st.lists(st.sampled_from(["alpha", "bravo", "delta", "echo", "golf", "hotel"]), max_size=6),
        min_size=1,
        max_size=12,
    ),
    limit=st.integers(min_value=1, max_value=5),
)
def test_suggestions_never_put_an_entry_behind_one_sharing_fewer_terms(
    texts: list[list[str]], limit: int
) -> None:
    prompt = "alpha bravo delta echo"
    with tempfile.TemporaryDirectory(prefix="belt-registry-") as directory:
        store = Store(Path(directory) / "store", fsync=False)
        candidates = [
            (
                make_candidate(name=f"n{number}", kind="concept", text=" ".join(["x", *words])),
                PERSON,
            )
            for number, words in enumerate(texts)
        ]
        registry.save_candidates(store, owner=DEFAULT_OWNER, candidates=candidates)
        shared = [len(set(words) & set(prompt.split())) for words in texts]
        found = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, limit=limit)
        counts = [m.matched_terms for m in found]
        assert counts == sorted(counts, reverse=True)
        # Exactly the entries sharing most terms are offered (as many as the limit allows).
        expected = sorted((count for count in shared if count >= 2), reverse=True)[:limit]
        assert counts == expected


def test_a_suggestion_looks_past_a_shortlist_it_offered_lately(store: Store) -> None:
    """In a registry large enough to be answered from its rarer terms, the entries holding the
    rarest word, once offered (and left out for a while), give way to entries holding two of the
    commoner words rather than to nothing."""
    notes = [("Vault rotation {n}", "Rotate the vault keys nightly, step {n}.")] * 3
    notes += [("Rotate note {n}", "Note {n}.")] * 100
    notes += [("Keys note {n}", "Note {n}.")] * 300 + [("Nightly note {n}", "Note {n}.")] * 300
    notes += [
        ("Old keys", "Rotate the old keys yearly."),
        ("Nightly keys", "Keys checked nightly."),
    ]
    outcomes = registry.save_candidates(
        store,
        owner=DEFAULT_OWNER,
        candidates=[
            (make_candidate(name=name.format(n=n), kind="rule", text=text.format(n=n)), PERSON)
            for n, (name, text) in enumerate(notes)
        ],
    )
    prompt = "Rotate the vault keys nightly"
    phrases = query_phrases(query_words(prompt))
    with sqlite3.connect(index_path(store, DEFAULT_OWNER)) as db:
        held = [
            db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (p,)).fetchone()[0]
            for p in phrases
        ]
    assert sorted(held) == [3, 104, 304, 305]  # a shortlist: "vault" alone, then with "rotate"
    assert sum(held) > registry_index.EVERY_TERM_ROWS
    vault = [outcome.id for outcome in outcomes[:3]]
    offered = suggest(store, owner=DEFAULT_OWNER, prompt=prompt)
    assert [m.id for m in offered] == vault
    assert [m.id for m in search(store, query=prompt)[:3]] == vault
    old_keys, nightly_keys = outcomes[-2].id, outcomes[-1].id
    # Left out, they give way to the entries holding "rotate" (entries up to RARER_ROWS * WIDER)
    offered = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_ids=vault)
    assert [(m.id, m.matched_terms) for m in offered] == [(old_keys, 2)]
    # then to every entry holding one of its words.
    offered = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, exclude_ids=[*vault, old_keys])
    assert [(m.id, m.matched_terms) for m in offered] == [(nightly_keys, 2)]


PAYMENTS = (
    "Payments release checklist",
    "Before you deploy, the payments service needs a green canary for an hour. "
    + " ".join(f"step{number}" for number in range(60)),
)
"""An entry holding every word of "deploy the payments service", in a long text only: BM25
alone ranks it below short entries with one of the words in their name."""

SHARED_PROMPTS = [
    "deploy the payments service",
    "restore the deleted file from the nightly backup",
    "clean up the old temp files",
    "Delete /var/lib/app/production.db and old backups",
]


def one_word_distractors(prompts: list[str], per_word: int = 4) -> list[tuple[str, str]]:
    """For each word of each prompt, ``per_word`` short entries with that word alone in their
    name: each shares one word with a prompt, and BM25 ranks it high for that word."""
    words = dict.fromkeys(word for prompt in prompts for word in query_words(prompt))
    return [(f"{word} {number}", f"Note {number}.") for word in words for number in range(per_word)]


def test_search_lists_first_what_suggest_offers_in_the_same_order(store: Store) -> None:
    load_directory(store, EXAMPLES)
    candidates = [
        (make_candidate(name=name, kind="observation", text=text), PERSON)
        for name, text in [*one_word_distractors(SHARED_PROMPTS), PAYMENTS]
    ]
    target = registry.save_candidates(store, owner=DEFAULT_OWNER, candidates=candidates)[-1]
    for prompt in SHARED_PROMPTS:
        offered = [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt=prompt)]
        listed = search(store, query=prompt)
        assert offered, prompt
        assert [m.id for m in listed[: len(offered)]] == offered, prompt
        counts = [m.matched_terms for m in listed]
        assert counts == sorted(counts, reverse=True), prompt
    (first, *rest) = search(store, query="deploy the payments service")
    assert (first.id, first.matched_terms, first.query_terms) == (target.id, 3, 3)
    assert {m.matched_terms for m in rest} == {1}
    # The relevance is still the score against the search's best score, wherever that is.
    assert max(m.relevance for m in [first, *rest]) == 1.0
    assert first.relevance < 1.0


LARGE = 10_000
ROTATE = "Rotate the vault keys after the nightly backup"
WIDENED = "payments keys backup"


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One registry of 10,000 entries, built once for the session and only read: the reported
    shape (60 entries with one word of ``ROTATE`` in their name, which BM25 ranks first; the rest
    with one other word of it each; one entry holding every word of it, 61st by BM25 alone; one
    sharing two words that BM25 ranks above it), the agreement test's distractors and the example
    registry. The workers of a parallel run share it: the first to take the lock builds it (its
    ids written beside it), the others wait and open it."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's directory, above each worker's own
    ids = shared / "registry-large.json"
    with (shared / "registry-large.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ids.exists():
            ids.write_text(json.dumps(build_large(shared / "registry-large")))
    return {"store": Store(shared / "registry-large", fsync=False), **json.loads(ids.read_text())}


def build_large(root: Path) -> dict[str, str]:
    """The large registry in a new store at ``root``; the ids of the entries the tests name."""
    store = Store(root, fsync=False)
    load_directory(store, EXAMPLES)
    distractors = [*one_word_distractors(SHARED_PROMPTS), PAYMENTS]
    filler = " ".join(f"lorem{number}" for number in range(100))
    common = ["rotate", "keys", "nightly", "backup"]
    count = LARGE - len(list(EXAMPLES.glob("*.toml"))) - len(distractors) - 62
    shaped = [(f"Filler {number}", f"{filler} {common[number % 4]}") for number in range(count)]
    shaped += [(f"Vault note {number}", f"Short note {number}.") for number in range(60)]
    shaped.append(
        (
            "Key rotation runbook",
            "When the nightly backup has finished, rotate the vault keys. " + filler * 3,
        )
    )
    shaped.append(("Vault rotate", "Short note about the pair."))
    # Candidates built directly: save_candidates checks each, as it checks any candidate.
    outcomes = registry.save_candidates(
        store,
        owner=DEFAULT_OWNER,
        candidates=[
            (Candidate(name=name, kind="observation", text=text, tags=()), PERSON)
            for name, text in [*distractors, *shaped]
        ],
    )
    assert len(list_entries(store)) == LARGE
    return {
        "payments": outcomes[len(distractors) - 1].id,
        "target": outcomes[-2].id,
        "pair": outcomes[-1].id,
    }


def test_the_entry_holding_every_word_is_suggested_first_at_10000_entries(
    large: dict[str, object],
) -> None:
    store, target, pair = large["store"], large["target"], large["pair"]
    assert isinstance(store, Store)
    ranked = search(store, query=ROTATE, limit=63)
    assert ranked[0].id == target  # BM25 alone ranks it 61st
    assert (ranked[0].matched_terms, ranked[0].query_terms) == (5, 5)
    assert ranked[1].id == pair  # two terms: after it, though BM25 scores it higher
    assert ranked[1].score > ranked[0].score
    assert max(m.score for m in ranked[2:]) > ranked[0].score
    counts = [m.matched_terms for m in ranked]
    assert counts == sorted(counts, reverse=True)
    found = suggest(store, owner=DEFAULT_OWNER, prompt=ROTATE)
    assert [(m.id, m.matched_terms) for m in found[:2]] == [(target, 5), (pair, 2)]
    again = suggest(store, owner=DEFAULT_OWNER, prompt=ROTATE, exclude_ids=[target])
    assert again[0].id == pair


def test_search_lists_first_what_suggest_offers_at_10000_entries(
    large: dict[str, object],
) -> None:
    store = large["store"]
    assert isinstance(store, Store)
    for prompt in [*SHARED_PROMPTS, ROTATE]:
        offered = [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt=prompt)]
        listed = search(store, query=prompt)
        assert offered, prompt
        assert [m.id for m in listed[: len(offered)]] == offered, prompt
        counts = [m.matched_terms for m in listed]
        assert counts == sorted(counts, reverse=True), prompt
    first = search(store, query="deploy the payments service")[0]
    assert (first.id, first.matched_terms, first.query_terms) == (large["payments"], 3, 3)


def rarer_ranking(path: Path, prompt: str) -> list[tuple[str, float, int]]:
    """The documented ranking of a query, from FTS5 directly: the entries holding one of the
    terms it is answered from (all of them; or when the entries holding each add up to more than
    ``EVERY_TERM_ROWS``, its rarer terms up to ``RARER_ROWS`` entries, then up to ``RARER_ROWS *
    WIDER``, then all of them, while no entry holds ``MIN_SHARED_TERMS`` of its terms), those
    holding more of all its terms first, then by ``-bm25()`` of the terms it is answered from,
    ties to the older entry."""
    phrases = query_phrases(query_words(prompt))
    weights = ", ".join(str(weight) for weight in registry_index.WEIGHTS)
    with sqlite3.connect(path) as db:
        matched = [
            {rowid for (rowid,) in db.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (p,))}
            for p in phrases
        ]
        order = sorted(range(len(phrases)), key=lambda number: len(matched[number]))
        total, rarer = sum(map(len, matched)), registry_index.RARER_ROWS
        caps = [rarer, rarer * registry_index.WIDER, total]
        for cap in caps if total > registry_index.EVERY_TERM_ROWS else [total]:
            taken = 1
            while taken < len(order) and (
                sum(len(matched[number]) for number in order[: taken + 1]) <= cap
            ):
                taken += 1
            rows = set().union(*(matched[number] for number in order[:taken]))
            held = {rowid: sum(rowid in each for each in matched) for rowid in rows}
            relevant = min(registry.MIN_SHARED_TERMS, len(phrases))
            if any(count >= relevant for count in held.values()):
                break
        found = db.execute(
            f"SELECT fts.rowid, e.id, -bm25(fts, {weights}) FROM fts JOIN entries AS e "
            "ON e.rowid = fts.rowid WHERE fts MATCH ?",
            (" OR ".join(phrases[number] for number in sorted(order[:taken])),),
        ).fetchall()
    ranked = sorted(found, key=lambda row: (-held[row[0]], -row[2], row[0]))
    return [(str(entry_id), float(score), held[rowid]) for rowid, entry_id, score in ranked]


def test_a_large_registry_is_answered_from_the_entries_holding_the_rarer_terms(
    large: dict[str, object],
) -> None:
    """At 10,000 entries, search lists what the documented rule ranks, in the same order: the
    entries holding the rarer terms (widened while none holds two terms), by terms held, then
    by ``-bm25()`` of those terms."""
    store = large["store"]
    assert isinstance(store, Store)
    path = index_path(store, DEFAULT_OWNER)
    prompts = [*SHARED_PROMPTS, ROTATE, "nightly backup: rotate keys", WIDENED]
    for prompt in prompts:
        found = [(m.id, m.score, m.matched_terms) for m in search(store, query=prompt, limit=100)]
        expected = rarer_ranking(path, prompt)[:100]
        assert found == [(e, float(f"{score:.4g}"), held) for e, score, held in expected], prompt
    # "vault" alone is rare: entries holding only the commoner words are not read.
    assert len(search(store, query=ROTATE, limit=100)) == 62
    # None of the 5 entries holding "payments" holds another word of the prompt: every entry
    # holding one of its words is read, and the one holding two is listed and offered first.
    first = search(store, query=WIDENED, limit=100)[0]
    assert (first.id, first.matched_terms, first.query_terms) == (large["target"], 2, 3)
    assert suggest(store, owner=DEFAULT_OWNER, prompt=WIDENED)[0].id == large["target"]


def test_the_entry_holding_every_word_comes_first_when_every_word_is_common(
    large: dict[str, object],
) -> None:
    """Each of the prompt's words is in about 2,500 entries: the answer is taken from the entries
    holding the rarest of them, and the entry holding all four is offered and listed first."""
    store, target = large["store"], large["target"]
    assert isinstance(store, Store)
    prompt = "nightly backup: rotate keys"
    first = search(store, query=prompt)[0]
    assert (first.id, first.matched_terms, first.query_terms) == (target, 4, 4)
    assert suggest(store, owner=DEFAULT_OWNER, prompt=prompt)[0].id == target


FTS5_SYNTAX = [
    '"',
    "'",
    "*",
    "^",
    "+",
    "-",
    ":",
    "(",
    ")",
    "{",
    "}",
    "AND",
    "OR",
    "NOT",
    "NEAR(",
    "NEAR",
    "name:",
    "{name text}:",
    "text :",
    "key:",
    "fts:",
    "rank:",
    "\x00",
    "\n",
    "\\",
    ",",
    "NEAR(a b, 3)",
    "backups",
    "nightly",
    "vault",
    "1",
    "x*",
    '"unbalanced',
    "((",
    "))",
]


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("hostile") / "store", fsync=False)
    save(store, "Delete only in /tmp", "Only delete files under /tmp; ask for anything else.")
    save(store, "Backups", 'Backups run nightly, NEAR the vault; AND "OR" * ^ - key: 1 2')
    save(store, "Vault 1", "The vault keys rotate after the nightly backup.")
    return store


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(
        st.one_of(st.sampled_from(FTS5_SYNTAX), st.text(ANY_CHARACTER, max_size=12)),
        max_size=20,
    ),
    glue=st.sampled_from(["", " ", "\x00", "\t"]),
)
def test_fts5_syntax_in_a_prompt_is_only_text(
    hostile_store: Store, parts: list[str], glue: str
) -> None:
    """Quotes, NEAR, *, column filters, unbalanced parentheses and NUL in a prompt never reach
    FTS5 as syntax: search and suggest answer, and agree."""
    prompt = glue.join(parts)
    listed = search(hostile_store, query=prompt, limit=10)
    offered = suggest(hostile_store, owner=DEFAULT_OWNER, prompt=prompt, limit=3)
    for match in [*listed, *offered]:
        assert 1 <= match.matched_terms <= match.query_terms
    assert [m.id for m in listed[: len(offered)]] == [m.id for m in offered]


def test_a_huge_prompt_is_read_up_to_its_bound(hostile_store: Store) -> None:
    prompt = "nightly vault " + ('NEAR( "*: ' * 200_000) + " backups"
    (first, *_) = search(hostile_store, query=prompt)
    # Only the first 10,000 characters are read: nightly, vault and near, not backups.
    assert (first.name, first.matched_terms, first.query_terms) == ("Backups", 3, 3)
    assert suggest(hostile_store, owner=DEFAULT_OWNER, prompt="backups " * 1_000_000)


def test_suggest_checks_its_arguments(store: Store) -> None:
    with pytest.raises(InvalidInput):
        suggest(store, owner=DEFAULT_OWNER, prompt="x", exclude_origin_agent="../a")
    with pytest.raises(InvalidInput):
        suggest(store, owner=DEFAULT_OWNER, prompt="x", limit=0)
    with pytest.raises(InvalidInput):
        suggest(store, owner=DEFAULT_OWNER, prompt="x", exclude_ids=[3])  # type: ignore[list-item]


# The derived index: freshness, damage, concurrency


def test_the_index_is_a_0600_file_under_the_store_root(store: Store) -> None:
    save(store, "Backups", "Backups run nightly.")
    path = index_path(store, DEFAULT_OWNER)
    assert path == store.root / "search" / "registry" / "local.sqlite3"
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (FORMAT,)
        journal = db.execute("SELECT value FROM meta WHERE key = 'journal'").fetchone()[0]
    assert journal == store.index_size(ENTRIES, DEFAULT_OWNER)


def test_a_missing_index_is_rebuilt(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    index_path(store, DEFAULT_OWNER).unlink()
    assert [m.id for m in search(store, query="backups")] == [entry.id]
    assert index_path(store, DEFAULT_OWNER).is_file()


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"not a database at all, just text" * 100,
        b"SQLite format 3\x00" + b"\xff" * 4000,
    ],
    ids=["empty", "text", "torn"],
)
def test_a_damaged_index_is_rebuilt(store: Store, damage: bytes) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    index_path(store, DEFAULT_OWNER).write_bytes(damage)
    assert [m.id for m in search(store, query="backups")] == [entry.id]
    second = save(store, "Restores", "Restores come from backups.")
    assert {m.id for m in search(store, query="backups")} == {entry.id, second.id}


def test_an_index_damaged_where_only_a_query_reads_is_rebuilt(store: Store) -> None:
    for number in range(40):
        save(store, f"Note {number}", f"Backups note {number}. " + "filler " * 50)
    path = index_path(store, DEFAULT_OWNER)
    data = bytearray(path.read_bytes())
    for offset in range(2 * 4096, len(data), 4096):  # the header and meta stay readable
        data[offset + 100 : offset + 600] = b"\xa5" * 500
    path.write_bytes(bytes(data))
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (FORMAT,)
        with pytest.raises(sqlite3.DatabaseError):
            db.execute("SELECT rowid FROM fts WHERE fts MATCH 'backups'").fetchall()
    assert len(search(store, query="backups note", limit=100)) == 40


def test_an_index_kept_open_between_searches_follows_a_replaced_file(store: Store) -> None:
    from belt.records import registry_index

    first = save(store, "Backups", "Backups run nightly.")
    assert [m.id for m in search(store, query="backups")] == [first.id]
    path = index_path(store, DEFAULT_OWNER)
    kept = registry_index.reader(path, durable=False)
    assert kept is registry_index.reader(path, durable=False)  # one connection, kept open
    path.unlink()  # as a rebuild by another process does, before it writes a new file
    second = save(store, "Restores", "Restores come from backups.")
    assert {m.id for m in search(store, query="backups")} == {first.id, second.id}
    assert registry_index.reader(path, durable=False) is not kept
    path.write_bytes(b"not a database at all, just text" * 100)  # damaged in place
    assert {m.id for m in search(store, query="backups")} == {first.id, second.id}


def fts5_ranking(path: Path, prompt: str) -> list[tuple[str, float]]:
    """FTS5's own ranking of a query as search and suggest rank: the entries sharing more of its
    terms (counted by FTS5's tokenizer and its vocabulary of the index) first, then by FTS5's
    ``-bm25()``, ties to the older entry."""
    from belt.records import registry_index

    words = query_words(prompt)
    weights = ", ".join(str(weight) for weight in registry_index.WEIGHTS)
    with sqlite3.connect(path) as db:
        db.execute(
            f"CREATE VIRTUAL TABLE temp.q USING fts5(body, tokenize='{registry_index.TOKENIZER}')"
        )
        db.execute("INSERT INTO temp.q (body) VALUES (?)", (" ".join(words),))
        db.execute("CREATE VIRTUAL TABLE temp.qv USING fts5vocab(temp, q, row)")
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, fts, instance)")
        shared = dict(
            db.execute(
                "SELECT doc, COUNT(DISTINCT term) FROM temp.v "
                "WHERE term IN (SELECT term FROM temp.qv) AND col != 'key' GROUP BY doc"
            )
        )
        found = db.execute(
            f"SELECT fts.rowid, e.id, -bm25(fts, {weights}, 0.0) FROM fts JOIN entries AS e "
            "ON e.rowid = fts.rowid WHERE fts MATCH ?",
            ("{name tags text} : (" + " OR ".join(query_phrases(words)) + ")",),
        ).fetchall()
    ranked = sorted(found, key=lambda row: (-shared[row[0]], -row[2], row[0]))
    return [(str(entry_id), float(score)) for _, entry_id, score in ranked[:100]]


VOCABULARY = ["backup", "backups", "nightly", "vault", "keys", "rotate", "restore", "disk", "café"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(
        st.tuples(
            st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3),
            st.lists(st.sampled_from(VOCABULARY), max_size=2),
            st.lists(st.sampled_from([*VOCABULARY, "filler"]), max_size=30),
        ),
        min_size=1,
        max_size=25,
    ),
    removed=st.sets(st.integers(min_value=0, max_value=24), max_size=5),
    prompts=st.lists(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6), max_size=4),
)
def test_search_ranks_by_terms_held_then_fts5s_bm25_after_any_changes(
    texts: list[tuple[list[str], list[str], list[str]]],
    removed: set[int],
    prompts: list[list[str]],
) -> None:
    """Search lists what FTS5 itself ranks (terms held, then ``-bm25()``), in the same order,
    after entries are added, versioned and removed; suggest offers its head."""
    with fresh_store() as store:
        outcomes = registry.save_candidates(
            store,
            owner=DEFAULT_OWNER,
            candidates=[
                (
                    make_candidate(
                        name=" ".join(name), kind="concept", tags=tags, text=" ".join(["x", *text])
                    ),
                    PERSON,
                )
                for name, tags, text in texts
            ],
        )
        for number in sorted(removed):
            if number < len(outcomes) and outcomes[number].action == "created":
                remove_entry(store, entry_id=outcomes[number].id)
        save(store, " ".join(texts[0][0]), "a new version: nightly backups of the vault")
        for words in [*prompts, VOCABULARY]:
            prompt = " ".join(words)
            found = [(m.id, m.score) for m in search(store, query=prompt, limit=100)]
            expected = fts5_ranking(index_path(store, DEFAULT_OWNER), prompt)
            assert found == [(entry_id, float(f"{score:.4g}")) for entry_id, score in expected]
            offered = suggest(store, owner=DEFAULT_OWNER, prompt=prompt, limit=5)
            assert [m.id for m in offered] == [
                m.id
                for m in search(store, query=prompt, limit=100)
                if m.matched_terms >= min(2, m.query_terms)
            ][: len(offered)]


def registry_index_reader(store: Store) -> registry_index.SearchIndex:
    index = registry_index.reader(index_path(store, DEFAULT_OWNER), durable=False)
    assert index is not None
    return index


def test_an_entry_of_no_word_counts_in_the_scores_as_fts5_counts_it(store: Store) -> None:
    save(store, "!!!", "+++ --- ***")
    save(store, "Backups", "Backups run nightly.")
    save(store, "Vault", "The vault keys rotate after the nightly backup.")
    prompt = "nightly backups of the vault"
    found = [
        (hit.row.id, hit.score)
        for hit in registry_index_reader(store).search(query_phrases(query_words(prompt)), limit=10)
    ]
    assert found == fts5_ranking(index_path(store, DEFAULT_OWNER), prompt)
    assert len(found) == 2


def test_an_index_written_change_by_change_is_the_one_a_rebuild_writes(store: Store) -> None:
    first = save(store, "Backups", "Backups run nightly.", tags=("ops",))
    save(store, "Vault", "Rotate the vault keys after the nightly backup.")
    save(store, "Backups", "Backups run nightly, and restores are tested weekly.")
    third = save(store, "Disk", "The backup disk is replaced yearly.")
    remove_entry(store, entry_id=third.id)
    path = index_path(store, DEFAULT_OWNER)

    def rows() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        with sqlite3.connect(path) as db:
            return (
                db.execute("SELECT * FROM entries ORDER BY rowid").fetchall(),
                db.execute("SELECT rowid, * FROM fts ORDER BY rowid").fetchall(),
            )

    written = rows()
    assert [row[1] for row in written[0]] == [first.id, written[0][1][1]]
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = -1 WHERE key = 'journal'")  # stale: rebuilt
    assert [m.id for m in search(store, query="backups")][0] == first.id
    assert rows() == written


def test_the_index_keeps_each_terms_count_of_entries_as_fts5_counts_it(store: Store) -> None:
    # A query's shortlist is chosen by these counts, read from the file rather than counted.
    save(store, "Backups", "Backups run nightly.", tags=("ops", "backup"))
    save(store, "Vault", "Rotate the vault keys after the nightly backup.")
    save(store, "Backups", "Backups run nightly, and restores are tested weekly.")
    disk = save(store, "Disk", "The backup disk is replaced yearly; backups, backups.")
    save(store, "Café", "Les clés du coffre, après la sauvegarde.")
    remove_entry(store, entry_id=disk.id)
    search(store, query="backups")  # brought level with the store
    with sqlite3.connect(index_path(store, DEFAULT_OWNER)) as db:
        db.execute("CREATE VIRTUAL TABLE temp.counted USING fts5vocab(main, fts, row)")
        counted = db.execute("SELECT term, doc FROM temp.counted ORDER BY term").fetchall()
        kept = db.execute("SELECT term, doc FROM vocab ORDER BY term").fetchall()
    assert ("backup", 2) in counted
    assert kept == counted


def test_an_index_without_its_journal_is_rebuilt(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    search(store, query="backups")  # an index kept open, as a long-lived process has
    with sqlite3.connect(index_path(store, DEFAULT_OWNER)) as db:
        db.execute("DELETE FROM meta WHERE key = 'journal'")
    assert [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt="backups nightly")] == [
        entry.id
    ]


ADDER = """
import sys
from pathlib import Path
from belt.records.registry import Origin, make_candidate, save_candidate
from belt.store import Store
candidate = make_candidate(name="Restores", kind="observation", text="Restores come from backups.")
print(save_candidate(Store(Path(sys.argv[1])), owner="local", candidate=candidate,
                     origin=Origin.person("other")).id)
"""


def test_an_entry_another_process_adds_is_found_by_the_index_kept_open(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", fsync=False)
    first = save(store, "Backups", "Backups run nightly.")
    kept = registry_index_reader(store)
    assert [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt="nightly backups")] == [
        first.id
    ]
    added = subprocess.run(
        [sys.executable, "-c", ADDER, str(store.root)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    ).stdout.strip()
    assert registry_index_reader(store) is kept  # the same file, changed in place
    assert {m.id for m in search(store, query="backups")} == {first.id, added}
    assert [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt="restores from backups")] == [
        added
    ]


def test_an_index_kept_open_behind_the_store_is_brought_level_before_it_answers(
    store: Store,
) -> None:
    # The journal a query checks is read in the query's own transaction and kept for that state
    # of the file: an index left behind by a writer that saved an entry but never updated the
    # index (its old file put back in place, the same inode) is brought level all the same.
    first = save(store, "Backups", "Backups run nightly.")
    kept = registry_index_reader(store)
    assert [m.id for m in suggest(store, owner=DEFAULT_OWNER, prompt="nightly backups")] == [
        first.id
    ]
    path = index_path(store, DEFAULT_OWNER)
    before = path.read_bytes()
    added = save(store, "Restores", "Restores from nightly backups.")
    with path.open("r+b") as handle:  # the index as it was before the entry was saved
        handle.write(before)
        handle.truncate()
    assert registry_index_reader(store) is kept
    with sqlite3.connect(path) as db:
        journal = db.execute("SELECT value FROM meta WHERE key = 'journal'").fetchone()[0]
    assert journal < store.index_size(ENTRIES, DEFAULT_OWNER)
    found = suggest(store, owner=DEFAULT_OWNER, prompt="restores from nightly backups")
    assert [m.id for m in found] == [added.id, first.id]
    with sqlite3.connect(path) as db:
        journal = db.execute("SELECT value FROM meta WHERE key = 'journal'").fetchone()[0]
    assert journal == store.index_size(ENTRIES, DEFAULT_OWNER)


def test_a_forked_process_opens_an_index_of_its_own(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    kept = registry_index_reader(store)
    assert [m.id for m in search(store, query="backups")] == [entry.id]
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        try:
            own = registry_index_reader(store)
            found = [m.id for m in search(store, query="backups")]
            os._exit(0 if own is not kept and found == [entry.id] else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert registry_index_reader(store) is kept  # the parent's is untouched, and still works
    assert [m.id for m in search(store, query="backups")] == [entry.id]


def test_an_index_of_another_format_or_shape_is_rebuilt(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    path = index_path(store, DEFAULT_OWNER)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = 99 WHERE key = 'format'")
    assert [m.id for m in search(store, query="backups")] == [entry.id]
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE something (x)")
    assert [m.id for m in search(store, query="backups")] == [entry.id]


def test_a_change_the_index_missed_is_seen_by_the_next_reader(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    # As if belt stopped after writing the store and before updating the index.
    store.link(ENTRIES, DEFAULT_OWNER, entry.id)
    store.update(
        "registry-entry",
        entry.id,
        lambda data: {**data, "text": "Backups run at noon."},
    )
    assert search(store, query="nightly") == []
    assert [m.id for m in search(store, query="noon")] == [entry.id]


def test_a_damaged_entry_is_reported_with_its_path_and_left_alone(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    path = store.path("registry-entry", entry.id)
    path.write_bytes(b'{"belt": "object"')
    index_path(store, DEFAULT_OWNER).unlink()
    for call in (
        lambda: search(store, query="backups"),
        lambda: list_entries(store),
        lambda: save(store, "Other", "Other text."),
    ):
        with pytest.raises(InvalidInput) as caught:
            call()
        assert caught.value.exit_code == ExitCode.INVALID_INPUT
        assert str(path) in " ".join([caught.value.message, *caught.value.problems])
    assert path.read_bytes() == b'{"belt": "object"'


def test_an_entry_of_the_wrong_shape_is_reported_as_damaged(store: Store) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    store.update("registry-entry", entry.id, lambda data: {**data, "versions": "many"})
    with pytest.raises(InvalidInput) as caught:
        get_entry(store, entry_id=entry.id)
    assert str(store.path("registry-entry", entry.id)) in caught.value.message
    assert "versions is not a list" in caught.value.message


@pytest.mark.parametrize("key", sorted(derive(registry.RegistryEntry)[0]))
def test_every_field_the_entry_typeddict_requires_is_checked(store: Store, key: str) -> None:
    entry = save(store, "Backups", "Backups run nightly.")
    store.update("registry-entry", entry.id, lambda data: {k: data[k] for k in data if k != key})
    with pytest.raises(InvalidInput) as caught:
        get_entry(store, entry_id=entry.id)
    why = "version is not a positive whole number" if key == "version" else f"{key} is not a"
    assert f"damaged registry entry: {why}" in caught.value.message


def test_a_damaged_entry_names_its_identity_fields_first(store: Store) -> None:
    # The checks follow RegistryEntry's fields in order: id, owner and name before the version.
    entry = save(store, "Backups", "Backups run nightly.")
    store.update(
        "registry-entry",
        entry.id,
        lambda data: {k: v for k, v in data.items() if k not in ("name", "version")},
    )
    with pytest.raises(InvalidInput) as caught:
        get_entry(store, entry_id=entry.id)
    assert "damaged registry entry: name is not a str" in caught.value.message


WRITER = """
import sys
from pathlib import Path
from belt.records.registry import Origin, make_candidate, save_candidate
from belt.store import Store

store = Store(Path(sys.argv[1]))
worker = sys.argv[2]
for number in range(8):
    for name, text in ((f"note {worker} {number}", f"worker {worker} wrote {number}"),
                       ("shared", f"written by {worker}")):
        candidate = make_candidate(name=name, kind="observation", text=text)
        outcome = save_candidate(store, owner="local", candidate=candidate,
                                 origin=Origin.person("race"))
        print(outcome.action, outcome.id, flush=True)
"""


def test_writers_in_several_processes_keep_store_and_index_consistent(tmp_path: Path) -> None:
    root = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(4)
    ]
    outputs = [worker.communicate(timeout=120) for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 4, outputs
    store = Store(root)
    entries = list_entries(store)
    assert len(entries) == 4 * 8 + 1
    shared = [e for e in entries if e["name"] == "shared"]
    assert len(shared) == 1
    assert shared[0]["version"] == len(shared[0]["versions"]) >= 1
    created = [
        line for out, _ in outputs for line in out.splitlines() if line.startswith("created")
    ]
    assert len(created) == 4 * 8 + 1
    # The index written by four processes is the one a rebuild makes.
    with sqlite3.connect(index_path(store, DEFAULT_OWNER)) as db:
        journal = db.execute("SELECT value FROM meta WHERE key = 'journal'").fetchone()[0]
        indexed = {row[0]: row[1] for row in db.execute("SELECT id, text FROM entries")}
    assert journal == store.index_size(ENTRIES, DEFAULT_OWNER)
    assert indexed == {e["id"]: e["text"] for e in entries}
    for entry in entries:
        assert entry["id"] in [m.id for m in search(store, query=entry["text"], limit=100)]


# Registry directories


def test_the_example_registry_loads_and_loads_again_without_duplicates(store: Store) -> None:
    loaded = load_directory(store, EXAMPLES)
    files = sorted(EXAMPLES.glob("*.toml"))
    assert 8 <= len(loaded) == len(files) <= 15
    assert [item.file for item in loaded] == [str(f) for f in files]
    assert {item.outcome.action for item in loaded} == {"created"}
    assert {e["kind"] for e in list_entries(store)} == set(KINDS)
    entry = get_entry(store, entry_id=loaded[0].outcome.id)
    assert entry["origin"] == {"by": "person", "source": str(files[0])}
    again = load_directory(store, EXAMPLES)
    assert {item.outcome.action for item in again} == {"skipped"}
    assert len(list_entries(store)) == len(files)


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def test_a_changed_file_adds_a_version(store: Store, tmp_path: Path) -> None:
    directory = tmp_path / "registry"
    path = write(directory, "a.toml", 'name = "A"\nkind = "skill"\ntext = "one"\n')
    write(directory, "notes.md", "not an entry")
    first = load_directory(store, directory)
    path.write_text('name = "A"\nkind = "skill"\ntext = "two"\ntags = ["x"]\n')
    second = load_directory(store, str(directory))
    assert [(i.outcome.action, i.outcome.version) for i in first + second] == [
        ("created", 1),
        ("versioned", 2),
    ]


def test_every_problem_in_a_directory_names_the_file_and_key(store: Store, tmp_path: Path) -> None:
    directory = tmp_path / "registry"
    good = write(directory, "good.toml", 'name = "Good"\nkind = "skill"\ntext = "fine"\n')
    kind = write(directory, "kind.toml", 'name = "K"\nkind = "note"\ntext = "t"\n')
    key = write(directory, "key.toml", 'name = "X"\nkind = "app"\ntext = "t"\ncolour = 1\n')
    syntax = write(directory, "syntax.toml", 'name = "S\n')
    twice = write(directory, "twice.toml", 'name = "good"\nkind = "skill"\ntext = "other"\n')
    binary = directory / "binary.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidInput) as caught:
        load_directory(store, directory)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    problems = caught.value.problems
    assert f"{kind}: kind: 'note' is not one of observation, concept" in " ".join(problems)
    assert f"{key}: colour: unknown key" in " ".join(problems)
    assert any(p.startswith(f"{syntax}: invalid TOML") and "line 1" in p for p in problems)
    assert f"{twice}: name: 'good' is also the name in {good}" in problems
    assert f"{binary}: not UTF-8 text (byte 0)" in problems
    assert len(problems) == 5
    assert list_entries(store) == []


def test_a_directory_holds_every_kind_a_review_saves(store: Store, tmp_path: Path) -> None:
    directory = tmp_path / "registry"
    for kind in ("rule", "gotcha", "pattern", "preference", "reference"):
        write(directory, f"{kind}.toml", f'name = "A {kind}"\nkind = "{kind}"\ntext = "t"\n')
    loaded = load_directory(store, directory)
    assert sorted(item.outcome.kind for item in loaded) == sorted(
        ["rule", "gotcha", "pattern", "preference", "reference"]
    )
    assert {"rule", "gotcha", "pattern"} <= set(KINDS)
    assert [e["name"] for e in list_entries(store, kind="gotcha")] == ["A gotcha"]


def test_directory_bounds(store: Store, tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        load_directory(store, tmp_path / "missing")
    directory = tmp_path / "registry"
    big = write(directory, "big.toml", 'name = "B"\nkind = "app"\ntext = """' + "x" * 300_000)
    with pytest.raises(InvalidInput) as caught:
        load_directory(store, directory)
    assert caught.value.problems == [
        f"{big}: larger than the 256 KiB limit for a registry entry file"
    ]
    big.unlink()
    assert load_directory(store, directory) == []


# Text from a file or stdin


def test_entry_text_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "text.md"
    path.write_text("Backups run nightly.\n")
    assert registry.read_entry_text(path) == "Backups run nightly.\n"
    with pytest.raises(NotFound):
        registry.read_entry_text(tmp_path / "missing.md")
    path.write_bytes(b"\xff")
    with pytest.raises(InvalidInput):
        registry.read_entry_text(path)
    path.write_text("x" * (registry.MAX_TEXT_CHARS * 4 + 1))
    with pytest.raises(InvalidInput):
        registry.read_entry_text(path)


def test_entry_text_from_a_terminal_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    with pytest.raises(UsageError):
        registry.read_entry_text(None)


# Layering


def imported_modules(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("module", ["registry.py", "registry_index.py"])
def test_the_registry_imports_only_the_layers_below_it(module: str) -> None:
    allowed = (
        "belt.errors",
        "belt.paths",
        "belt.reading.inputs",
        "belt.wire",
        "belt.store",
        "belt.records",
        "belt.reading.didyoumean",
    )
    belt_imports = [
        name for name in imported_modules(ROOT / "belt" / "records" / module) if "belt" in name
    ]
    assert belt_imports
    assert all(name.startswith(allowed) for name in belt_imports), belt_imports


class WithoutFts5(sqlite3.Connection):
    """A real SQLite connection that answers as a build without FTS5 does."""

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        if "fts5" in sql.lower():
            raise sqlite3.OperationalError("no such module: fts5")
        return super().execute(sql, *args)  # type: ignore[arg-type]


def test_a_sqlite_without_fts5_is_a_clear_error(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(store, "Backups", "Backups run nightly.")
    index_path(store, DEFAULT_OWNER).unlink()
    registry_index.forget(index_path(store, DEFAULT_OWNER))
    real = sqlite3.connect
    monkeypatch.setattr(
        sqlite3, "connect", lambda *args, **kwargs: real(*args, **kwargs, factory=WithoutFts5)
    )
    monkeypatch.setattr(registry_index, "PROBE", registry_index.Probe())
    with pytest.raises(BeltError) as caught:
        search(store, query="backups")
    assert caught.value.exit_code == ExitCode.FAILURE
    assert caught.value.message.startswith(
        f"the registry's search needs SQLite's FTS5, and this Python's SQLite "
        f"{sqlite3.sqlite_version} lacks it"
    )


def test_a_query_that_is_not_text_is_invalid(store: Store) -> None:
    save(store, "Backups", "Backups run nightly.")
    with pytest.raises(InvalidInput):
        search(store, query=42)  # type: ignore[arg-type]


# The documentation says what the code does

BUILTINS_MD = (ROOT / "docs" / "builtins.md").read_text()


def test_the_docs_state_the_rules_the_code_applies() -> None:
    from belt.records import registry_index

    assert f"`{registry_index.TOKENIZER}`" in BUILTINS_MD
    name, tags, text = (f"{weight:g}" for weight in registry_index.WEIGHTS)
    assert f"name **{name}**, tags **{tags}**, text **{text}**" in BUILTINS_MD
    assert f"at least **{registry.MIN_SHARED_TERMS}** distinct terms" in BUILTINS_MD
    assert "shares **more of the prompt's terms** comes first" in BUILTINS_MD
    assert "not over a shortlist that BM25 ranked first" in BUILTINS_MD
    assert f"add up to at most **{registry_index.EVERY_TERM_ROWS}**" in BUILTINS_MD
    assert f"while their counts add up to at most **{registry_index.RARER_ROWS}**" in BUILTINS_MD
    wider = registry_index.RARER_ROWS * registry_index.WIDER
    assert f"while their counts add up to at most **{wider}**" in BUILTINS_MD
    assert "turn counts `t + 1` to `t + 15` go without it" in BUILTINS_MD
    assert f"first {registry_index.MAX_QUERY_WORDS} distinct words" in BUILTINS_MD
    assert f"first {registry_index.MAX_QUERY_CHARS:,} characters" in BUILTINS_MD
    assert f"`{registry.DEFAULT_OWNER}`" in BUILTINS_MD
    for kind in KINDS:
        assert f"| `{kind}` |" in BUILTINS_MD


def test_the_docs_directory_example_is_an_example_file() -> None:
    import tomllib

    block = BUILTINS_MD.split("```toml\n")[1]  # the registry directory's example comes first
    text = block.split("```")[0]
    assert tomllib.loads(text) == tomllib.loads((EXAMPLES / "tmp-only-deletions.toml").read_text())
    check_candidate(tomllib.loads(text), where="docs/builtins.md")
