"""Records named on the command line: an id, its short id, or a unique prefix, for every kind."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from belt.errors import Conflict, InvalidInput, NotFound
from belt.records.ids import new_id
from belt.records.names import find_id, names, short_id
from belt.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def test_a_short_id_is_the_eight_characters_after_the_prefix() -> None:
    assert short_id("ar_k2m9x0q4h7c1v8b5n3t6") == "k2m9x0q4"
    assert short_id("ch_1") == "ch_1"  # too short to shorten: itself
    assert short_id("plain") == "plain"


@given(st.sampled_from(["ar", "ch", "re", "int", "sim"]))
def test_every_short_id_and_prefix_names_its_id(prefix: str) -> None:
    record_id = new_id(prefix)
    for ref in (record_id, short_id(record_id), record_id[:5], short_id(record_id)[:3]):
        assert names(ref, record_id)
    assert not names("zz" + short_id(record_id), record_id)


def test_find_id_takes_the_id_its_short_id_or_a_unique_prefix(store: Store) -> None:
    store.create("run", "ar_k2m9x0q4h7c1v8b5n3t6", {"id": "ar_k2m9x0q4h7c1v8b5n3t6"})
    store.create("run", "ar_q0000000000000000000", {"id": "ar_q0000000000000000000"})
    for ref in ("ar_k2m9x0q4h7c1v8b5n3t6", "k2m9x0q4", "k2", "ar_k"):
        assert find_id(store, "run", ref, what="run") == "ar_k2m9x0q4h7c1v8b5n3t6"


def test_an_ambiguous_prefix_is_a_conflict_naming_the_candidates(store: Store) -> None:
    for record_id in ("ar_aa00000000000000000", "ar_ab00000000000000000"):
        store.create("run", record_id, {"id": record_id})
    with pytest.raises(Conflict) as caught:
        find_id(store, "run", "a", what="run")
    assert caught.value.message == (
        "'a' names 2 runs: ar_aa00000000000000000, ar_ab00000000000000000"
    )
    with pytest.raises(Conflict, match="names 2 registry entries"):
        find_id(store, "run", "ar_a", what="registry entry", plural="registry entries")


def test_nothing_named_is_not_found_and_a_hostile_ref_is_invalid(store: Store) -> None:
    with pytest.raises(NotFound, match="no chat nothere"):
        find_id(store, "chat", "nothere", what="chat")
    with pytest.raises(NotFound, match="custom"):
        find_id(store, "chat", "x", what="chat", missing=lambda r: NotFound(f"custom {r}"))
    with pytest.raises(InvalidInput, match="invalid chat id"):
        find_id(store, "chat", "../etc", what="chat")


def test_the_ids_searched_first_decide_a_prefix_they_make_unique(store: Store) -> None:
    for record_id in ("int_aa00000000000000000", "int_ab00000000000000000"):
        store.create("interrupt", record_id, {"id": record_id})
    found = find_id(
        store, "interrupt", "a", what="interrupt", first=lambda: ["int_ab00000000000000000"]
    )
    assert found == "int_ab00000000000000000"
