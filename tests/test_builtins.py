"""The builtins, simulated on real stores: `belt:suggest`, and `belt:extract` with its branches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.dialects.platform.builtins.suggest import quiet_items
from belt.display.render import transcript_lines
from belt.engine.entrypoints import run_scenario, show_run
from belt.records.registry import list_entries
from belt.store import open_store
from tests.cli.runner import belt

SUGGEST = {"event": "agent.turn_start", "type": "builtin", "handler": "belt:suggest"}
EXTRACT = {"event": "agent.complete", "type": "builtin", "handler": "belt:extract"}
PRE_COMPACT = {"event": "agent.pre_compact", "type": "builtin", "handler": "belt:extract"}
LEARNING_HOOKS = [SUGGEST, EXTRACT, PRE_COMPACT]
"""The three entries learning_hooks(suggest=True, learn=True) gives, in order (WIRE.md)."""

BACKUP = {
    "name": "Back up before deleting",
    "kind": "preference",
    "tags": ["backup", "deletion"],
    "text": "Before deleting a file outside /tmp, copy it to /var/backups with the date.",
}
TMP_ONLY = {
    "name": "Delete only under tmp",
    "kind": "preference",
    "tags": ["deletion", "tmp"],
    "text": "Deleting files is allowed only under /tmp; elsewhere ask first.",
}
SCHEDULES = {
    "name": "Schedules in UTC",
    "kind": "concept",
    "tags": ["schedule", "time"],
    "text": "Write every schedule and timestamp in UTC, never local time.",
}
FINISH = {"name": "finish", "arguments": {}, "result": "ok"}


def write_registry(tmp_path: Path, *entries: dict[str, Any]) -> str:
    directory = tmp_path / "registry"
    directory.mkdir(exist_ok=True)
    for number, entry in enumerate(entries):
        lines = [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
        (directory / f"entry-{number}.toml").write_text("\n".join(lines) + "\n")
    return "registry"


def simulate(tmp_path: Path, name: str = "s.json", **doc: Any) -> dict[str, Any]:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    report, _ = run_scenario(scenario=path)
    return report


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c["event"]["hook"]
        for m in report["chat"]["chat_messages"]
        if m["role"] == "event"
        for c in m["content"]
        if (c.get("event") or {}).get("type") == "hook"
    ]


def injections(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in report["chat"]["chat_messages"] if m["role"] == "injection"]


def said(text: str) -> dict[str, Any]:
    return {"user": text, "model": [{"say": "ok"}]}


# -- belt:suggest ------------------------------------------------------------------------------


def test_suggest_injects_up_to_three_matches_for_one_turn_and_names_them(tmp_path: Path) -> None:
    fourth = {**TMP_ONLY, "name": "Deleting files needs a ticket", "tags": ["deletion"]}
    fifth = {**BACKUP, "name": "Deleting files: keep a backup", "tags": ["backup"]}
    registry = write_registry(tmp_path, BACKUP, TMP_ONLY, fourth, fifth, SCHEDULES)
    turn = {
        "user": "Please delete the old files in /var/log",
        "model": [{"say": "checking", "tool_calls": [FINISH]}, {"say": "done"}],
    }
    report = simulate(tmp_path, agent={"registry": registry, "hooks": [SUGGEST]}, turns=[turn])
    first, *later = injections(report)
    info = first["sim"]["injection"]
    assert 1 <= len(info["items"]) <= 3
    assert (info["ttl_turns"], info["source"], info["dedup_key"]) == (
        1,
        "belt:suggest",
        "belt:suggest",
    )
    entries = {e["id"]: e["name"] for e in list_entries(open_store(), owner="local")}
    text = first["content"][0]["text"]
    assert all(entries[item] in text for item in info["items"])
    assert "Schedules in UTC" not in text
    # For one turn only: the second model turn no longer sees it.
    first_turn, second_turn = [
        m for m in report["chat"]["chat_messages"] if m["role"] == "assistant"
    ]
    assert first["id"] in first_turn["sim"]["injections"]
    assert first["id"] not in second_turn["sim"]["injections"]
    suggestions = [r for r in rows(report) if r["handler"] == "belt:suggest"]
    assert len(suggestions) == len(injections(report))  # a row per suggestion, none without
    assert {(r["handler_type"], r["injected"]) for r in suggestions} == {("builtin", True)}
    # The second turn never offers again what the first put in front of the model.
    for later_injection in later:
        assert not set(later_injection["sim"]["injection"]["items"]) & set(info["items"])


def test_what_suggest_injects_is_what_registry_search_lists_first(tmp_path: Path) -> None:
    """For each prompt, the entries belt:suggest puts in front of the model are the first
    entries `belt registry search` lists for it, in the same order, however many entries with
    one of the prompt's words in their name BM25 alone would rank above them."""
    examples = Path(__file__).parent.parent / "examples" / "registry"
    payments = {
        "name": "Payments release checklist",
        "kind": "rule",
        "tags": ["release"],
        "text": "Before you deploy, the payments service needs a green canary for an hour. "
        + " ".join(f"step{number}" for number in range(60)),
    }
    prompts = [
        "deploy the payments service",
        "restore the deleted file from the nightly backup",
        "Please delete the old files in /var/log",
    ]
    words = dict.fromkeys(w.strip("/.,").lower() for p in prompts for w in p.split())
    distractors = [
        {"name": f"{word} {number}", "kind": "observation", "text": f"Note {number}."}
        for word in words
        if len(word) > 3
        for number in range(4)
    ]
    registry = write_registry(tmp_path, payments, *distractors)
    for example in examples.glob("*.toml"):
        (tmp_path / registry / example.name).write_bytes(example.read_bytes())
    for number, prompt in enumerate(prompts):
        report = simulate(
            tmp_path,
            f"s{number}.json",
            agent={"registry": registry, "hooks": [SUGGEST]},
            turns=[said(prompt)],
        )
        (injection,) = injections(report)
        items = injection["sim"]["injection"]["items"]
        listed = belt("registry", "search", prompt, "--json")
        assert listed.exit_code == 0, listed.stderr
        assert [m["id"] for m in listed.json()[: len(items)]] == items, prompt
        if number == 0:
            assert listed.json()[0]["name"] == payments["name"]


def test_an_unrelated_prompt_suggests_nothing_and_leaves_no_row(tmp_path: Path) -> None:
    registry = write_registry(tmp_path, BACKUP, TMP_ONLY, SCHEDULES)
    report = simulate(
        tmp_path,
        agent={"registry": registry, "hooks": [SUGGEST]},
        turns=[said("What rhymes with orange?")],
    )
    assert injections(report) == []
    assert rows(report) == []
    assert [e["hook_event"] for e in report["hook_executions"]] == ["agent.turn_start"]


def test_a_suggested_entry_rests_for_the_15_turns_after_it_and_may_come_back_after(
    tmp_path: Path,
) -> None:
    registry = write_registry(tmp_path, SCHEDULES)
    turns = [said(f"Set the backup schedule time for job {n}") for n in range(18)]
    report = simulate(tmp_path, agent={"registry": registry, "hooks": [SUGGEST]}, turns=turns)
    suggested_at = [m["sim"]["injection"]["turn"] for m in injections(report)]
    # Suggested at turn 0: not at turns 1 to 15 (15 included), again at turn 16.
    assert suggested_at == [0, 16]


@pytest.mark.parametrize(("turn", "quiet"), [(1, True), (15, True), (16, False), (40, False)])
def test_the_quiet_window_holds_the_15_turns_after_a_suggestion(turn: int, quiet: bool) -> None:
    assert (quiet_items({"re_a": 0}, turn) == ["re_a"]) is quiet
    assert (quiet_items({"re_a": 10}, 10 + turn) == ["re_a"]) is quiet


def test_suggest_remembers_across_a_resume(tmp_path: Path) -> None:
    registry = write_registry(tmp_path, SCHEDULES)
    gate = {"event": "agent.start", "type": "gate"}
    turns = [said(f"Set the backup schedule time for job {n}") for n in range(3)]
    held = simulate(tmp_path, agent={"registry": registry, "hooks": [gate, SUGGEST]}, turns=turns)
    assert held["runs"][0]["state"] == "input_required"
    gate_id = held["chat"]["pending_interrupts"][0]["id"]
    assert belt("interrupt", "resolve", gate_id, "allow").exit_code == 0
    assert belt("sim", "resume", held["runs"][0]["id"]).exit_code == 0
    report = show_run(run_id=held["runs"][0]["id"])
    assert [m["sim"]["injection"]["turn"] for m in injections(report)] == [0]


# -- belt:extract ------------------------------------------------------------------------------


def reviews(report: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = report["reviews"]
    return found


def test_extract_does_not_review_a_run_that_only_called_finish(tmp_path: Path) -> None:
    turn = {"user": "anything to do?", "model": [{"tool_calls": [FINISH]}]}
    report = simulate(
        tmp_path, agent={"hooks": [EXTRACT]}, turns=[turn], reviews=[{"candidates": [BACKUP]}]
    )
    assert reviews(report) == []
    assert list_entries(open_store(), owner="local") == []


def test_extract_reviews_work_in_a_branch_and_saves_what_the_review_returns(
    tmp_path: Path,
) -> None:
    turn = {"user": "clean up", "model": [{"say": "deleted /tmp/a", "tool_calls": [FINISH]}]}
    report = simulate(
        tmp_path,
        agent={"id": "ag_alpha", "hooks": [EXTRACT]},
        turns=[turn],
        reviews=[{"candidates": [BACKUP, TMP_ONLY]}],
    )
    (review,) = reviews(report)
    assert review["runs"][0]["state"] == "completed"
    record = review["review"]
    assert [o["action"] for o in record["outcomes"]] == ["created", "created"]
    chat = open_store().read("chat", review["chat_id"])
    last = report["chat"]["chat_messages"][-1]
    assert chat["parent_id"] == report["chat"]["id"]
    assert chat["graph"]["parent"] == report["chat"]["id"]
    assert chat["graph"]["ancestor"] == record["ancestor"]
    assert record["ancestor"] in [m["id"] for m in report["chat"]["chat_messages"]]
    assert sorted(chat["graph"]["outputs"]) == sorted(o["id"] for o in record["outcomes"])
    assert chat["agent_data"]["disable_hooks"] is True
    entries = list_entries(open_store(), owner="local")
    assert {e["name"] for e in entries} == {BACKUP["name"], TMP_ONLY["name"]}
    origin = entries[0]["origin"]
    assert (origin["agent"], origin["chat"], origin["branch"]) == (
        "ag_alpha",
        report["chat"]["id"],
        review["chat_id"],
    )
    branch = show_run(run_id=review["runs"][0]["id"])
    roles = [m["role"] for m in branch["chat"]["chat_messages"]]
    assert roles[:2] == ["user", "assistant"]  # a copy of the chat's history
    assert roles[-2:] == ["user", "assistant"]  # the review's question and answer
    assert branch["hook_executions"] == []  # the branch fires no hooks
    assert last["order"] >= 0
    lines = [line for line, _ in transcript_lines(report)]
    assert any("created Back up before deleting" in line for line in lines)


def test_a_review_is_asked_as_the_agent_with_no_tools_and_the_answers_schema(
    tmp_path: Path,
) -> None:
    prompt = "You are the ops agent. Delete nothing outside /tmp."
    gotcha = {"name": "Tmp is wiped at boot", "kind": "gotcha", "text": "Nothing in /tmp lasts."}
    turn = {"user": "clean up", "model": [{"say": "deleted /tmp/a"}]}
    report = simulate(
        tmp_path,
        agent={"system_prompt": prompt, "hooks": [EXTRACT]},
        turns=[turn],
        reviews=[{"candidates": [gotcha, {**BACKUP, "kind": "rule"}]}],
    )
    (review,) = reviews(report)
    request = review["review"]["request"]
    assert request["system_prompt"] == prompt
    assert request["tools"] == []
    schema = request["answer_schema"]
    assert schema["required"] == ["candidates"]
    item = schema["properties"]["candidates"]["items"]
    assert {"rule", "preference", "gotcha", "pattern", "reference"} <= set(
        item["properties"]["kind"]["enum"]
    )
    assert item["additionalProperties"] is False
    # The kinds the review asks for are saved.
    assert [(o["action"], o["kind"]) for o in review["review"]["outcomes"]] == [
        ("created", "gotcha"),
        ("created", "rule"),
    ]
    # The branch opens with the agent's system prompt; its model turn says what it was asked with.
    shown = belt("sim", "show", review["runs"][0]["id"], "--json")
    assert shown.exit_code == 0, shown.stderr
    messages = shown.json()["chat"]["chat_messages"]
    assert messages[0]["role"] == "system"
    assert messages[0]["content"][0]["text"] == prompt
    answer = messages[-1]
    assert answer["role"] == "assistant"
    assert answer["sim"]["request"] == request
    assert json.loads(answer["content"][0]["text"])["candidates"][0]["kind"] == "gotcha"
    lines = [line for line, _ in transcript_lines(show_run(run_id=review["runs"][0]["id"]))]
    assert any(line.startswith("system     You are the ops agent") for line in lines)
    assert "  asked    as the agent, 0 tool(s) offered, a JSON-schema answer" in lines


def test_extract_creates_versions_or_skips_as_the_registry_has_it(tmp_path: Path) -> None:
    changed = {**BACKUP, "text": "Copy the file to /var/backups first, always."}
    same = {
        **TMP_ONLY,
        "text": "  deleting files is allowed only under /tmp; ELSEWHERE ask first. ",
    }
    turns = [
        {"user": "one", "model": [{"say": "did one"}]},
        {"user": "two", "model": [{"say": "did two"}]},
    ]
    report = simulate(
        tmp_path,
        agent={"hooks": [EXTRACT]},
        turns=turns,
        reviews=[{"candidates": [BACKUP, TMP_ONLY]}, {"candidates": [changed, same]}],
    )
    first, second = reviews(report)
    assert [o["action"] for o in first["review"]["outcomes"]] == ["created", "created"]
    assert [o["action"] for o in second["review"]["outcomes"]] == ["versioned", "skipped"]
    backup = next(
        e for e in list_entries(open_store(), owner="local") if e["name"] == BACKUP["name"]
    )
    assert backup["version"] == 2


def test_extract_never_saves_from_a_chat_of_another_team(tmp_path: Path) -> None:
    report = simulate(
        tmp_path,
        agent={"owner": "publisher", "hooks": [EXTRACT]},
        chat={"user_team": "customers"},
        turns=[{"user": "hi", "model": [{"say": "hello"}]}],
        reviews=[{"candidates": [BACKUP]}],
    )
    assert reviews(report) == []
    assert list_entries(open_store(), owner="publisher") == []


def test_a_review_with_nothing_scripted_returns_no_candidates_and_says_so(tmp_path: Path) -> None:
    report = simulate(
        tmp_path, agent={"hooks": [EXTRACT]}, turns=[{"user": "hi", "model": [{"say": "hello"}]}]
    )
    (review,) = reviews(report)
    assert review["review"]["outcomes"] == []
    assert "no review scripted" in review["review"]["note"]


def test_an_extraction_is_suggested_to_another_agent_of_the_owner_never_to_its_own(
    tmp_path: Path,
) -> None:
    learned = {**SCHEDULES, "name": "Backup jobs run at 02:00 UTC", "tags": ["backup", "schedule"]}
    simulate(
        tmp_path,
        "a.json",
        agent={"id": "ag_alpha", "hooks": LEARNING_HOOKS},
        turns=[{"user": "schedule the backup job", "model": [{"say": "scheduled"}]}],
        reviews=[{"candidates": [learned]}],
    )
    ask = [said("When does the backup job schedule run?")]
    again = simulate(tmp_path, "a2.json", agent={"id": "ag_alpha", "hooks": [SUGGEST]}, turns=ask)
    assert injections(again) == []
    other = simulate(tmp_path, "b.json", agent={"id": "ag_beta", "hooks": [SUGGEST]}, turns=ask)
    (injection,) = injections(other)
    assert "Backup jobs run at 02:00 UTC" in injection["content"][0]["text"]


def test_the_learning_hooks_of_the_sdks_run_in_a_scenario(tmp_path: Path) -> None:
    registry = write_registry(tmp_path, BACKUP)
    report = simulate(
        tmp_path,
        agent={"registry": registry, "hooks": LEARNING_HOOKS},
        turns=[{"user": "delete the old backup files", "model": [{"say": "deleted them"}]}],
        reviews=[{"candidates": [TMP_ONLY]}],
    )
    assert report["runs"][0]["state"] == "completed"
    assert [e["hook_event"] for e in report["hook_executions"]] == [
        "agent.turn_start",
        "agent.complete",
    ]
    assert len(injections(report)) == 1
    assert len(reviews(report)) == 1


@pytest.mark.parametrize("event", ["agent.tool_call", "agent.start"])
def test_validate_still_refuses_a_builtin_on_an_event_it_does_not_support(
    tmp_path: Path, event: str
) -> None:
    path = tmp_path / "hooks.json"
    path.write_text(
        json.dumps({"hooks": [{"event": event, "type": "builtin", "handler": "belt:extract"}]})
    )
    result = belt("hooks", "validate", str(path))
    assert result.exit_code == 5
    assert f"belt:extract cannot attach to {event}" in result.stdout + result.stderr


def test_review_branches_are_listed_with_all_only(tmp_path: Path) -> None:
    simulate(tmp_path, agent={"hooks": [EXTRACT]}, turns=[{"user": "hi", "model": [{"say": "yo"}]}])
    listed = belt("sim", "list", "--json").json()
    assert [r["kind"] for r in listed] == ["chat"]
    everything = belt("sim", "list", "--all", "--json").json()
    assert sorted(r["kind"] for r in everything) == ["chat", "review"]


def test_the_learning_agent_example_suggests_and_learns() -> None:
    example = Path(__file__).parent.parent / "examples" / "learning-agent.toml"
    report, _ = run_scenario(scenario=example)
    assert report["runs"][0]["state"] == "completed"
    (injection,) = injections(report)
    assert injection["sim"]["injection"]["items"]
    (review,) = reviews(report)
    assert [o["action"] for o in review["review"]["outcomes"]] == ["created"]
