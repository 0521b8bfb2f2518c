"""Approval rules (belt.rules.approvals): the language, settling a gate, and what-if over
history."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.errors import BeltError, InvalidInput, NotFound
from belt.records.interrupts import (
    create_interrupt,
    person,
    read_record,
    resolve_interrupt,
    sweep,
)
from belt.rules.approvals import (
    RULE_KEYS,
    Rules,
    load_rules,
    parse_rules,
    rules_of,
    settle,
    store_resolver,
    what_if,
)
from belt.store import Store
from belt.store.clock import parse_timestamp

EXAMPLE = Path(__file__).parent.parent / "examples" / "approvals.toml"


def rules(text: str) -> Rules:
    return parse_rules(text, "rules.toml", "sha256:0")


def gate(
    store: Store,
    tool: str = "read_file",
    arguments: dict[str, Any] | None = None,
    *,
    run_id: str = "ar_one",
    chat_id: str = "ch_one",
    agent_id: str = "ag_writer",
    event: str = "agent.tool_call",
    **options: Any,
) -> dict[str, Any]:
    """A pending hook gate holding a call of ``tool``, with a payload as a gate hook keeps."""
    data = {"tool": tool, "arguments": arguments or {}} if event == "agent.tool_call" else {}
    meta = {"event": event, "agent_id": agent_id, "run_id": run_id, "chat_id": chat_id}
    return create_interrupt(
        store=store,
        run_id=run_id,
        chat_id=chat_id,
        event=event,
        meta={**meta, "turn_count": 1, "timestamp": "", "data": data},
        **options,
    )


def test_the_example_rules_file_loads_with_its_digest() -> None:
    loaded = load_rules(EXAMPLE)
    assert loaded.file == str(EXAMPLE)
    assert loaded.digest == "sha256:" + hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert [rule.name for rule in loaded.rules][:4] == [
        "keys",
        "reads",
        "scratch deletes",
        "other deletes",
    ]


def test_the_first_matching_rule_decides_and_no_match_asks(store: Store) -> None:
    loaded = rules(
        """
        [[rules]]
        name = "scratch"
        tool = "delete_file"
        arguments = { path = "path:/tmp/*" }
        decision = "allow"
        reason = "scratch space"

        [[rules]]
        name = "deletes"
        tool = "delete_*"
        decision = "deny"
        reason = "no deletes"

        [[rules]]
        name = "also scratch"
        tool = "delete_file"
        decision = "allow"
        reason = "never reached"
        """
    )
    scratch = loaded.decide(gate(store, "delete_file", {"path": "/tmp/x"}))
    escape = loaded.decide(gate(store, "delete_file", {"path": "/tmp/../etc/passwd"}))
    other = loaded.decide(gate(store, "send_email"))
    assert (scratch.decision, scratch.rule_name) == ("allow", "scratch")
    assert (escape.decision, escape.rule_name, escape.reason) == ("deny", "deletes", "no deletes")
    assert (other.decision, other.rule, other.reason) == ("ask", None, "no rule matches")


@pytest.mark.parametrize(
    ("condition", "matching", "other"),
    [
        ('event = "agent.turn_start"', {"event": "agent.turn_start"}, {}),
        ('tool = "read_*"', {}, {"tool": "write_file"}),
        ('arguments = { path = "re:^/srv/" }', {"arguments": {"path": "/srv/a"}}, {}),
        ('arguments = { "opts.force" = true }', {"arguments": {"opts": {"force": True}}}, {}),
        ('run_id = "ar_n*"', {"run_id": "ar_night"}, {}),
        ('chat_id = "ch_ops_*"', {"chat_id": "ch_ops_1"}, {}),
        ('agent = "ag_reader"', {"agent_id": "ag_reader"}, {}),
    ],
)
def test_each_condition_matches_its_part_of_the_gate(
    store: Store, condition: str, matching: dict[str, Any], other: dict[str, Any]
) -> None:
    loaded = rules(f'[[rules]]\nname = "r"\n{condition}\ndecision = "deny"\nreason = "why"\n')
    arguments = matching.pop("arguments", None)
    assert loaded.decide(gate(store, arguments=arguments, **matching)).decision == "deny"
    arguments = other.pop("arguments", {"path": "/home/x"})
    assert loaded.decide(gate(store, arguments=arguments, **other)).decision == "ask"


@pytest.mark.parametrize(
    ("hours", "inside", "outside"),
    [
        ("09:00-17:00", "09:00", "17:00"),
        ("22:00-06:00", "23:59", "06:30"),
        ("00:00-24:00", "23:59", None),
    ],
)
def test_hours_match_the_time_of_day_the_gate_opened_in_utc(
    store: Store, hours: str, inside: str, outside: str | None
) -> None:
    loaded = rules(f'[[rules]]\nname = "r"\nhours = "{hours}"\ndecision = "allow"\nreason = "w"\n')
    opened = gate(store, now=parse_timestamp(f"2026-08-11T{inside}:30Z"))
    assert loaded.decide(opened).decision == "allow"
    if outside is not None:
        later = gate(store, now=parse_timestamp(f"2026-08-11T{outside}:00Z"))
        assert loaded.decide(later).decision == "ask"


def test_an_ask_rule_leaves_the_gate_to_a_person_and_stops_the_search(store: Store) -> None:
    loaded = rules(
        '[[rules]]\nname = "mail"\ntool = "send_*"\ndecision = "ask"\nreason = "a person"\n'
        '[[rules]]\nname = "all"\ndecision = "allow"\nreason = "fine"\n'
    )
    verdict = loaded.decide(gate(store, "send_email"))
    assert (verdict.decision, verdict.rule_name) == ("ask", "mail")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[rules]]\nname = "reads"\ntol = "read_*"\ndecision = "allow"\nreason = "r"\n',
            'rules.toml: rules[0] "reads".tol: unknown field (allowed: name, decision, reason, '
            "event, tool, arguments, run_id, chat_id, agent, hours); did you mean 'tool'?",
        ),
        (
            'rules = []\nmode = "x"\n',
            "rules.toml: mode: unknown field (allowed: rules)",
        ),
        ("[[rules]]\nname = 'a'\ndecision = 'allow'\n", 'rules.toml: rules[0] "a".reason:'),
        ("[[rules]]\ndecision = 'allow'\nreason = 'r'\n", "rules.toml: rules[0].name:"),
        # A name the trail could not record: control characters, or too long.
        (
            "[[rules]]\nname = \"a\\u001b[2J\"\ndecision = 'allow'\nreason = 'r'\n",
            "rules.toml: rules[0].name: expected a name (printable, 1 to 1024 characters)",
        ),
        (
            f"[[rules]]\nname = '{'n' * 1025}'\ndecision = 'allow'\nreason = 'r'\n",
            "rules.toml: rules[0].name: expected a name (printable",
        ),
        (
            "[[rules]]\nname = 'a'\ndecision = 'approve'\nreason = 'r'\n",
            'rules.toml: rules[0] "a".decision: expected one of allow, deny, ask',
        ),
        (
            "[[rules]]\nname = 'a'\nevent = 'agent.tool_cal'\ndecision = 'allow'\nreason = 'r'\n",
            "did you mean 'agent.tool_call'?",
        ),
        (
            "[[rules]]\nname = 'a'\narguments = { cmd = 're:(a' }\ndecision = 'deny'\n"
            "reason = 'r'\n",
            'rules.toml: rules[0] "a".arguments.cmd: bad regex',
        ),
        (
            "[[rules]]\nname = 'a'\nhours = '9-17'\ndecision = 'deny'\nreason = 'r'\n",
            'rules.toml: rules[0] "a".hours: expected "HH:MM-HH:MM" (UTC)',
        ),
        (
            "[[rules]]\nname = 'a'\ndecision = 'deny'\nreason = 'r'\n"
            "[[rules]]\nname = 'a'\ndecision = 'allow'\nreason = 'r'\n",
            'rules.toml: rules[1] "a".name: another rule has this name',
        ),
        ("", "rules.toml: rules: expected one or more [[rules]] tables, got none"),
        ("[[rules]\n", "rules.toml: invalid TOML:"),
    ],
)
def test_a_bad_rules_file_is_refused_naming_the_file_the_rule_and_the_field(
    text: str, message: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        rules(text)
    assert refused.value.exit_code == 5
    assert refused.value.message.startswith(message) or message in refused.value.message


def test_every_problem_is_listed_when_there_are_several() -> None:
    with pytest.raises(InvalidInput) as refused:
        rules("[[rules]]\nname = 'a'\nfoo = 1\nbar = 2\ndecision = 'x'\nreason = 'r'\n")
    assert "(and 2 more problem(s))" in refused.value.message
    assert len(refused.value.problems) == 3


def test_a_missing_rules_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        load_rules(tmp_path / "none.toml")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
RULE = st.dictionaries(
    st.sampled_from([*RULE_KEYS, "extra"]),
    JSON
    | st.sampled_from(
        ["allow", "deny", "ask", "read_*", "re:(", "path:/tmp/", "09:00-10:00", "agent.tool_call"]
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_rules_file_or_refused_as_invalid(text: str) -> None:
    try:
        rules(text)
    except InvalidInput as exc:
        assert exc.message.startswith("rules.toml: ")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["rules", "other"]), st.lists(RULE, max_size=3) | JSON))
def test_any_document_is_rules_or_refused_as_invalid(doc: dict[str, Any]) -> None:
    try:
        loaded = rules_of(doc, "rules.toml", "sha256:0")
    except InvalidInput as exc:
        assert exc.message.startswith("rules.toml: ") and "\n" not in exc.message
    else:
        assert all(rule.decision in ("allow", "deny", "ask") for rule in loaded.rules)


def test_settle_resolves_with_the_rule_in_the_trail_and_its_reason_as_data(store: Store) -> None:
    loaded = load_rules(EXAMPLE)
    item = gate(store, "read_file", {"path": "/etc/hosts"})
    outcome = settle(loaded, item, store_resolver(store))
    assert outcome is not None and outcome.settled is not None
    record = read_record(store=store, interrupt_id=item["id"])
    assert (record["status"], record["resolution"]) == ("resolved", "allow")
    assert record["resolved_data"] == {"reason": "reading changes nothing"}
    assert record["resolved_by"] == {
        "how": "rule",
        "file": str(EXAMPLE),
        "rule": "reads",
        "digest": loaded.digest,
    }
    assert "resolved_by" not in outcome.settled  # the trail stays off the wire


def test_settle_leaves_ask_gates_pending_and_skips_gates_settled_meanwhile(store: Store) -> None:
    loaded = load_rules(EXAMPLE)
    left = gate(store, "send_email")
    outcome = settle(loaded, left, store_resolver(store))
    assert outcome is not None and (outcome.settled, outcome.skipped) == (None, None)
    assert read_record(store=store, interrupt_id=left["id"])["status"] == "pending"

    taken = gate(store, "read_file")  # what a watch saw: pending; then a person was first
    resolve_interrupt(store=store, interrupt_id=taken["id"], decision="deny", by=person("cli"))
    skipped = settle(loaded, taken, store_resolver(store))
    assert skipped is not None and skipped.settled is None
    assert skipped.skipped is not None and "is no longer pending" in skipped.skipped
    assert read_record(store=store, interrupt_id=taken["id"])["resolution"] == "deny"


def test_settle_leaves_interrupts_that_wait_for_something_else_than_a_decision(
    store: Store,
) -> None:
    client = create_interrupt(
        store=store,
        run_id="ar_one",
        chat_id="ch_one",
        event="agent.tool_call",
        reason="client_tool",
        source="tool:read_file",
        meta={"tool_name": "read_file", "arguments": {}},
    )
    assert settle(load_rules(EXAMPLE), client, store_resolver(store)) is None


def history(store: Store) -> dict[str, str]:
    """A store of gates settled by a person, a rule and an expiry, named by what they are."""
    loaded = load_rules(EXAMPLE)
    opened = parse_timestamp("2026-08-11T10:00:00Z")
    names: dict[str, str] = {}

    def settled(name: str, tool: str, decision: str, by: Any, reason: str | None = None) -> None:
        item = gate(store, tool, {"path": "/srv/data"}, now=opened)
        resolve_interrupt(
            store=store,
            interrupt_id=item["id"],
            decision=decision,
            data={"reason": reason} if reason else None,
            now=opened + timedelta(minutes=2),
            by=by,
        )
        names[name] = item["id"]

    settled("person denied a read", "read_file", "deny", person("cli"), "that file is private")
    settled("person allowed a read", "read_file", "allow", person("review"))
    settled("person allowed a delete", "delete_file", "allow", person("inspector"), "ticket 12")
    settled("person allowed mail", "send_email", "allow", person("cli"))
    rule = loaded.settlement(loaded.rules[1])
    settled("rule allowed a read", "read_file", "allow", rule)
    expired = gate(store, "read_file", now=opened, timeout=60, default_resolution="deny")
    sweep(store=store, now=opened + timedelta(minutes=5))
    names["expiry denied a read"] = expired["id"]
    gate(store, "read_file")  # pending: not history
    return names


def test_what_if_counts_disagreements_and_the_time_a_person_would_have_saved(store: Store) -> None:
    from belt.rules.approvals import settled_history

    names = history(store)
    report = what_if(load_rules(EXAMPLE), settled_history(store))
    assert report.considered == 6
    assert report.counts == {"allow": 4, "deny": 1, "ask": 1}
    found = [(d["interrupt"], d["would"], d["actual"], d["how"]) for d in report.disagreements]
    # A rule allowing what a person denied first; then the rest (a person's allow the rules
    # would deny, an expiry's deny they would allow), newest first.
    assert set(found[1:]) == {
        (names["person allowed a delete"], "deny", "allow", "person"),
        (names["expiry denied a read"], "allow", "deny", "expiry"),
    }
    assert found[0] == (names["person denied a read"], "allow", "deny", "person")
    first = report.disagreements[0]
    assert first["their_reason"] == "that file is private" and first["rule"] == "reads"
    assert first["allows_denied"] and report.allowed_denied == 1
    assert "via the CLI" in str(first["settled_by"])
    # Three gates a person settled would have been settled by a rule: each waited 2 minutes.
    assert (report.saved_gates, report.saved_seconds) == (3, 360.0)


def test_what_if_since_keeps_the_gates_settled_from_then_on(store: Store) -> None:
    from belt.rules.approvals import settled_history

    history(store)
    report = what_if(
        load_rules(EXAMPLE), settled_history(store), since=parse_timestamp("2026-08-11T10:04:00Z")
    )
    assert report.considered == 1  # only the expiry, settled at 10:05
    assert report.to_json()["would"] == {"allow": 1, "deny": 0, "ask": 0}


def test_a_bad_rules_file_settles_nothing(store: Store, tmp_path: Path) -> None:
    item = gate(store, "read_file")
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text() + '\n[[rules]]\nname = "x"\ntol = "y"\n')
    with pytest.raises(BeltError):
        load_rules(bad)
    assert read_record(store=store, interrupt_id=item["id"])["status"] == "pending"


def test_the_rules_files_the_docs_quote_load_and_the_example_is_quoted_as_it_is() -> None:
    import re

    page = (EXAMPLE.parent.parent / "docs" / "interrupts.md").read_text()
    blocks = [b for b in re.findall(r"```toml\n(.*?)```", page, flags=re.S) if "[[rules]]" in b]
    assert blocks
    for block in blocks:
        assert rules(block).rules
    assert EXAMPLE.read_text() in blocks
