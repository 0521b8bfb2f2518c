"""``belt registry add|list|show|search|rm`` against the local store."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from belt.cli import registry as cli
from belt.errors import InvalidInput
from belt.records import registry
from belt.store import open_store
from tests.cli.runner import Result, belt


def add(name: str, text: str, *args: str) -> str:
    result = belt(
        "registry", "add", "--kind", "preference", "--name", name, *args, "--json", input=text
    )
    assert result.exit_code == 0, result.stderr
    entry_id: str = result.json()["id"]
    return entry_id


def test_the_cli_knows_the_same_kinds_and_default_owner() -> None:
    assert tuple(kind.value for kind in cli.Kind) == registry.KINDS
    assert cli.DEFAULT_OWNER == registry.DEFAULT_OWNER


def test_add_from_stdin_then_again_then_a_new_version() -> None:
    result = belt(
        "registry", "add", "--kind", "preference", "--name", "Delete only in /tmp",
        "--tags", "files, tmp", input="Only delete files under /tmp.\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("created re_")
    assert result.stdout.endswith('"Delete only in /tmp" (preference)\n')
    (entry,) = registry.list_entries(open_store())
    assert entry["tags"] == ["files", "tmp"]
    assert entry["text"] == "Only delete files under /tmp."

    result = belt(
        "registry", "add", "--kind", "preference", "--name", "delete only in /TMP",
        input="only delete files under /tmp.",
    )  # fmt: skip
    assert result.exit_code == 0
    assert result.stdout == (
        f'unchanged: {entry["id"]} "Delete only in /tmp" (preference) already says this '
        "(version 1)\n"
    )

    result = belt(
        "registry", "add", "--kind", "preference", "--name", "Delete only in /tmp", "--json",
        input="Only delete files under /tmp/, never elsewhere.",
    )  # fmt: skip
    assert result.exit_code == 0
    assert result.json() == {
        "action": "versioned",
        "id": entry["id"],
        "name": "Delete only in /tmp",
        "kind": "preference",
        "version": 2,
    }


def test_add_from_a_file_and_for_another_owner(tmp_path: Path) -> None:
    text = tmp_path / "skill.md"
    text.write_text("To restore a file, copy it back from /var/backups/nightly/.\n")
    result = belt(
        "registry", "add", "--kind", "skill", "--name", "Restore", "--file", str(text),
        "--owner", "ops-team",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert registry.list_entries(open_store()) == []
    (entry,) = registry.list_entries(open_store(), owner="ops-team")
    assert entry["kind"] == "skill"
    assert entry["text"] == "To restore a file, copy it back from /var/backups/nightly/."


@pytest.mark.parametrize("kind", ["rule", "gotcha", "pattern"])
def test_add_takes_the_kinds_a_review_saves(kind: str) -> None:
    result = belt(
        "registry", "add", "--kind", kind, "--name", f"A {kind}", "--json", input="Some text."
    )
    assert result.exit_code == 0, result.stderr
    assert result.json()["kind"] == kind
    listed = belt("registry", "list", "--kind", kind, "--json")
    assert listed.exit_code == 0
    assert [entry["name"] for entry in listed.json()] == [f"A {kind}"]


def test_add_refuses_bad_input_and_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    bad_kind = belt("registry", "add", "--kind", "note", "--name", "x", input="text")
    assert bad_kind.exit_code == 2
    assert "--kind" in bad_kind.stderr
    missing = belt("registry", "add", "--kind", "skill", "--name", "x", "--file", "nope.md")
    assert missing.exit_code == 3
    assert "no such file nope.md" in missing.stderr
    empty = belt("registry", "add", "--kind", "skill", "--name", "x", input="  \n")
    assert empty.exit_code == 5
    assert "error: text: is empty" in empty.stderr
    control = belt("registry", "add", "--kind", "skill", "--name", "a\x1b[2Jb", input="t")
    assert control.exit_code == 5
    assert "name: holds the control character U+001B" in control.stderr
    owner = belt("registry", "add", "--kind", "skill", "--name", "x", "--owner", "../x", input="t")
    assert owner.exit_code == 5
    assert "invalid owner" in owner.stderr
    store = open_store()
    assert not (store.root / "objects" / "registry-entry").exists()


def test_list_shows_a_table_json_and_filters_by_kind() -> None:
    empty = belt("registry", "list")
    assert empty.exit_code == 0
    assert empty.stderr == "no entries in the registry of local\n"
    first = add("Delete only in /tmp", "Only delete files under /tmp.", "--tags", "files,tmp")
    second = belt("registry", "add", "--kind", "app", "--name", "disk-usage", input="Sizes.")
    assert second.exit_code == 0

    result = belt("registry", "list")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "kind", "name", "tags", "version", "updated"]
    assert lines[1].startswith(first)
    assert "Delete only in /tmp  files, tmp" in lines[1]
    assert "disk-usage" in lines[2]

    listed = belt("registry", "list", "--kind", "preference", "--json")
    assert listed.exit_code == 0
    (entry,) = listed.json()
    assert entry["id"] == first
    assert "versions" not in entry
    assert entry["text"] == "Only delete files under /tmp."


def test_show_prints_every_version_and_its_origin() -> None:
    entry_id = add("Backups", "Backups run nightly.")
    add("Backups", "Backups run hourly.\nThey are kept a week.")
    result = belt("registry", "show", entry_id)
    assert result.exit_code == 0
    out = result.stdout
    assert f"id       {entry_id}" in out
    assert "version  2" in out
    assert "origin   added by a person (cli)" in out
    assert out.index("version 2  ") < out.index("version 1  ")
    assert "  Backups run hourly.\n  They are kept a week.\n" in out
    assert "  Backups run nightly.\n" in out

    shown = belt("registry", "show", entry_id, "--json")
    assert shown.exit_code == 0
    assert shown.json() == registry.get_entry(open_store(), entry_id=entry_id)

    missing = belt("registry", "show", "re_nope")
    assert missing.exit_code == 3
    assert missing.stderr == (
        "error: no registry entry re_nope\nhint: list the entries with `belt registry list`\n"
    )


def test_show_names_an_agents_extraction() -> None:
    store = open_store()
    outcome = registry.save_candidate(
        store,
        owner="local",
        candidate=registry.make_candidate(name="Tmp", kind="observation", text="Tmp is wiped."),
        origin=registry.Origin.extraction(agent="ag_1", chat="ch_1", branch="ch_2"),
    )
    result = belt("registry", "show", outcome.id)
    assert result.exit_code == 0
    assert "extracted by agent ag_1 (chat ch_1, review branch ch_2)" in result.stdout


def test_search_shows_scores_best_first() -> None:
    in_name = add("Backups", "They run nightly at two.")
    in_text = add("Restores", "Restores come from the nightly backups.")
    add("Lunch", "Lunch is at noon.")
    result = belt("registry", "search", "nightly backups")
    assert result.exit_code == 0
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["relevance", "terms", "id", "kind", "name"]
    assert [row.split()[2] for row in rows] == [in_name, in_text]
    assert [row.split()[1] for row in rows] == ["2/2", "2/2"]
    # A relevance a person reads: the best is 1.00, the others a share of it in two decimals.
    relevances = [row.split()[0] for row in rows]
    assert relevances[0] == "1.00"
    assert relevances[1] != "1.00" and re.fullmatch(r"0\.\d\d", relevances[1]), relevances

    found = belt("registry", "search", "nightly backups", "--json", "--limit", "1")
    assert found.exit_code == 0
    (match,) = found.json()
    assert match["id"] == in_name
    assert match["score"] > 0
    assert match["relevance"] == 1.0
    assert (match["matched_terms"], match["query_terms"]) == (2, 2)

    nothing = belt("registry", "search", 'penguins" OR *')
    assert nothing.exit_code == 0
    assert nothing.stdout == ""
    assert nothing.stderr == 'no entries of local match "penguins" OR *"\n'


def test_search_limit_is_checked() -> None:
    result = belt("registry", "search", "x", "--limit", "0")
    assert result.exit_code == 2


def test_rm_removes_and_a_second_rm_is_not_found() -> None:
    entry_id = add("Backups", "Backups run nightly.")
    result = belt("registry", "rm", entry_id)
    assert result.exit_code == 0
    assert result.stdout == f'removed {entry_id} "Backups"\n'
    assert belt("registry", "list", "--json").json() == []
    again = belt("registry", "rm", entry_id, "--json")
    assert again.exit_code == 3
    assert again.stderr == f"error: no registry entry {entry_id} (it was removed)\n"


def test_rm_json_prints_the_removed_entry() -> None:
    entry_id = add("Backups", "Backups run nightly.")
    result = belt("registry", "rm", entry_id, "--json")
    assert result.exit_code == 0
    assert result.json()["id"] == entry_id
    assert result.json()["removed_at"]


def test_stored_control_characters_are_escaped_when_printed() -> None:
    entry_id = add("Backups", "Backups run nightly.")
    store = open_store()
    store.update(
        "registry-entry",
        entry_id,
        lambda data: {
            **data,
            "owner": "local",
            "name": "Back\x1b[2Jups",
            "versions": [{**data["versions"][0], "text": "bell\x07 here"}],
        },
    )
    for args in (("list",), ("show", entry_id), ("rm", entry_id)):
        result = belt("registry", *args)
        assert result.exit_code == 0, result.stderr
        assert "\x1b" not in result.stdout
        assert "\x07" not in result.stdout
        assert "Back\\x1b[2Jups" in result.stdout


def belt_within_a_minute(*args: str) -> Result:
    """``belt ARGS`` in-process, in a thread given a minute to finish (a FIFO read without care
    would hang it for good), stdin empty; what it raised is raised here."""
    results: list[Result] = []
    raised: list[BaseException] = []

    def run() -> None:
        try:
            results.append(belt(*args, input=""))
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), f"belt {' '.join(args)} still running after a minute"
    if raised:
        raise raised[0]
    return results[0]


def test_add_file_refuses_a_fifo_a_device_and_a_directory(tmp_path: Path, belt_home: Path) -> None:
    fifo = tmp_path / "text.fifo"
    os.mkfifo(fifo)
    for path, why in (
        (fifo, "is a FIFO (named pipe), not a regular file"),
        (Path("/dev/zero"), "is a character device, not a regular file"),
        (tmp_path, "is a directory, not a regular file"),
    ):
        result = belt_within_a_minute(
            "registry", "add", "--kind", "skill", "--name", "x", "--file", str(path)
        )
        assert result.exit_code == 5, result.stderr
        assert f"{path}: {why}" in result.stderr
        assert "Traceback" not in result.stderr
    assert registry.list_entries(open_store()) == []


def test_a_registry_directory_with_a_fifo_names_it_as_a_problem(tmp_path: Path) -> None:
    directory = tmp_path / "registry"
    directory.mkdir()
    (directory / "good.toml").write_text('name = "Good"\nkind = "skill"\ntext = "Do it."\n')
    os.mkfifo(directory / "stuck.toml")
    raised: list[BaseException] = []

    def load() -> None:
        try:
            registry.load_directory(open_store(), directory)
        except BaseException as exc:
            raised.append(exc)

    # In a thread: opening the FIFO to read it would wait for a writer for good.
    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the FIFO was opened to be read"
    (caught,) = raised
    assert isinstance(caught, InvalidInput)
    assert caught.problems == [
        f"{directory / 'stuck.toml'}: is a FIFO (named pipe), not a regular file"
    ]


@pytest.mark.parametrize("what", ["link outside the store", "dangling link", "directory", "FIFO"])
def test_a_search_index_that_is_not_a_regular_file_is_refused_not_written_through(
    tmp_path: Path, belt_home: Path, what: str
) -> None:
    add("Backups", "Backups run nightly from the primary database.")
    index = registry.index_path(open_store(), registry.DEFAULT_OWNER)
    for name in ("", "-journal", "-wal", "-shm"):
        Path(f"{index}{name}").unlink(missing_ok=True)
    outside = tmp_path / "outside.sqlite3"
    if what == "link outside the store":
        outside.write_bytes(b"")
        index.symlink_to(outside)
    elif what == "dangling link":
        index.symlink_to(outside)
    elif what == "directory":
        index.mkdir()
    else:
        os.mkfifo(index)
    text = tmp_path / "restore.md"
    text.write_text("Restore from the nightly backups.\n")
    for command in (
        ("registry", "search", "nightly backups"),
        ("registry", "add", "--kind", "skill", "--name", "Restore", "--file", str(text)),
    ):
        result = belt_within_a_minute(*command)
        assert result.exit_code == 5, (command, result.stderr)
        assert f"{index}: damaged store file" in result.stderr
        assert "Traceback" not in result.stderr
    assert outside.read_bytes() == b"" if what == "link outside the store" else not outside.exists()
    assert [entry["name"] for entry in registry.list_entries(open_store())] == ["Backups"]


def test_an_entry_that_shares_only_common_words_reads_as_below_one_percent() -> None:
    backups = add("Backups", "They run nightly at two.")
    for name in ("Lunch", "Dinner", "Standup"):
        add(name, f"{name} with the team.")
    result = belt("registry", "search", "backups team")
    assert result.exit_code == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert rows[0].split()[:3] == ["1.00", "1/2", backups]
    # "team" is in most entries: BM25 floors its weight, the score is about 1e-06.
    assert {row.split()[0] for row in rows[1:]} == {"<0.01"}
    assert "e-0" not in result.stdout
    found = belt("registry", "search", "backups team", "--json").json()
    assert [m["relevance"] for m in found] == [1.0, 0.0, 0.0, 0.0]
