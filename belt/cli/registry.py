"""``belt registry``: the local registry of knowledge, skills and apps behind the builtins."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from belt.cli.options import JsonFlag, argument, option
from belt.display import output

if TYPE_CHECKING:
    from belt.records.registry import Match, SaveOutcome

app = typer.Typer(
    help="Add, list, show, search and remove the entries of the local registry.",
    no_args_is_help=True,
)

DEFAULT_OWNER = "local"  # belt.records.registry.DEFAULT_OWNER; a test holds the two equal

OwnerOption = Annotated[str, option("The team whose registry to use.", "--owner", metavar="TEAM")]
EntryId = Annotated[str, argument("The entry: its id, short id or a unique prefix.", metavar="ID")]


# The kinds of registry entries (belt.records.registry.KINDS; a test holds the two equal).
Kind = StrEnum("Kind", "observation concept rule preference gotcha pattern reference skill app")


@app.command()
def add(
    kind: Annotated[Kind, option("What the entry is.")],
    name: Annotated[str, option("The entry's name; the same name adds a version.", metavar="NAME")],
    tags: Annotated[str, option("Comma-separated tags.", metavar="TAG,...")] = "",
    file: Annotated[
        Path | None, option("Read the text from FILE (default: stdin; - is stdin).", metavar="FILE")
    ] = None,
    owner: OwnerOption = DEFAULT_OWNER,
    json_: JsonFlag = False,
) -> None:
    """Add an entry, or a new version of the entry of the same name.

    The text comes from --file or stdin. The same name with the same text (ignoring case and
    whitespace) changes nothing and says so.

    Examples:

        echo 'Never force-push to main.' | belt registry add --kind rule --name no-force-push
    """
    from belt.records.registry import add_entry  # start-up: sqlite3 and its index

    outcome = add_entry(
        None,
        owner=owner,
        name=name,
        kind=kind.value,
        tags=[tag for tag in tags.split(",") if tag.strip()],
        file=file,
    )
    if not output.json_printed(json_, outcome.to_json()):
        output.success(describe_outcome(outcome))


def describe_outcome(outcome: SaveOutcome) -> str:
    """One line saying what saving did."""
    entry, version = f'{outcome.id} "{outcome.name}" ({outcome.kind})', outcome.version
    said = {"created": f"created {entry}", "versioned": f"added version {version} to {entry}"}
    return said.get(outcome.action, f"unchanged: {entry} already says this (version {version})")


@app.command("list")
def list_(
    owner: OwnerOption = DEFAULT_OWNER,
    kind: Annotated[Kind | None, option("Only entries of this kind.")] = None,
    json_: JsonFlag = False,
) -> None:
    """List a team's entries, oldest first.

    Examples:

        belt registry list
        belt registry list --kind rule --json
    """
    from belt.records.registry import list_entries  # start-up: sqlite3 and its index

    entries = list_entries(None, owner=owner, kind=None if kind is None else kind.value)
    output.listing(
        json_,
        [summary(entry) for entry in entries],
        ["id", "kind", "name", "tags", "version", "updated"],
        [
            [e["id"], e["kind"], e["name"], ", ".join(e["tags"]), e["version"], e["updated_at"]]
            for e in entries
        ],
        empty=f"no entries in the registry of {owner}",
        ids=(0,),
    )


def summary(entry: Mapping[str, object]) -> dict[str, object]:
    """An entry without its versions, as ``list --json`` prints it."""
    return {key: value for key, value in entry.items() if key != "versions"}


@app.command()
def show(entry_id: EntryId, json_: JsonFlag = False) -> None:
    """Show an entry: every version, where each came from, and when.

    Examples:

        belt registry show re_k2m9x0q4
    """
    from belt.records.registry import get_entry  # start-up: sqlite3 and its index

    entry = get_entry(None, entry_id=entry_id)
    if output.json_printed(json_, entry):
        return
    output.key_values(
        [
            *((key, entry[key]) for key in ("id", "owner", "name", "kind")),
            ("tags", ", ".join(entry["tags"])),
            ("version", str(entry["version"])),
            ("origin", describe_origin(entry["origin"])),
            ("created", entry["created_at"]),
            ("updated", entry["updated_at"]),
        ]
    )
    for version in reversed(entry["versions"]):
        output.echo()
        output.styled(
            f"version {version['version']}  {version.get('created_at')}  "
            f"{describe_origin(version['origin'])}",
            "bold",
        )
        for line in version["text"].splitlines():
            output.echo(f"  {line}")


def describe_origin(origin: Mapping[str, object]) -> str:
    """Who added a version: a person (and through what), or which agent's review."""
    if origin.get("by") == "agent":
        return (
            f"extracted by agent {origin.get('agent')} "
            f"(chat {origin.get('chat')}, review branch {origin.get('branch')})"
        )
    return f"added by a person ({origin.get('source')})"


@app.command("search")
def search_(
    query: Annotated[str, argument("Free text to search for.", metavar="QUERY")],
    owner: OwnerOption = DEFAULT_OWNER,
    limit: Annotated[int, option("Show at most this many.", min=1, max=100)] = 10,
    json_: JsonFlag = False,
) -> None:
    """Search a team's entries, best first, with how relevant each is.

    An entry matches if it shares a word with QUERY (after stemming; common words such as
    "the" are left out). Entries sharing more of the query's terms come first and BM25 ranks
    those sharing as many: belt:suggest's order, so what it would inject is at the top.
    "terms" is how many of the query's terms an entry shares; "relevance" is its BM25 score as
    a share of the best score (1.00; --json has the score too).

    Examples:

        belt registry search 'force push' --limit 3
    """
    from belt.records.registry import search  # start-up: sqlite3 and its index

    matches = search(None, owner=owner, query=query, limit=limit)
    output.listing(
        json_,
        [match.to_json() for match in matches],
        ["relevance", "terms", "id", "kind", "name"],
        [
            [relevance_text(m), f"{m.matched_terms}/{m.query_terms}", m.id, m.kind, m.name]
            for m in matches
        ],
        empty=f'no entries of {owner} match "{query}"',
        ids=(2,),
    )


def relevance_text(match: Match) -> str:
    """A match's relevance as a person reads it: ``1.00``, ``0.40``, or ``<0.01`` (BM25 near 0)."""
    if match.relevance < 0.01:
        return "<0.01" if match.score > 0 else "0.00"
    return f"{match.relevance:.2f}"


@app.command()
def rm(entry_id: EntryId, json_: JsonFlag = False) -> None:
    """Remove an entry from its team's registry (its file is kept, marked removed).

    Examples:

        belt registry rm re_k2m9x0q4
    """
    from belt.records.registry import remove_entry  # start-up: sqlite3 and its index

    entry = remove_entry(None, entry_id=entry_id)
    if not output.json_printed(json_, summary(entry)):
        output.success(f'removed {entry["id"]} "{entry["name"]}"')
