"""One contract, two backends: the same cases against the local store (``LocalBackend``) and
against the platform client (``belt.backends.remote.Platform``) pointed at `belt serve`'s app over
real HTTP, both over one store. Whatever a command asks, it gets the same shapes and the same errors
whichever backend ``--api`` chose."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from belt.backends.backend import Backend, LocalBackend
from belt.backends.remote import Platform
from belt.errors import BeltError, ExitCode
from belt.records.chats import CHAT, disabled
from belt.records.interrupts import create_interrupt
from belt.server.app import create_app
from belt.store import Store
from tests.servers import running

EXAMPLES = Path(__file__).parent.parent / "examples"
RUN = "ar_contract1"


@pytest.fixture(params=["local", "platform"])
def backend(request: pytest.FixtureRequest, store: Store) -> Iterator[Backend]:
    if request.param == "local":
        yield LocalBackend(store)
        return
    with running(create_app(store=store, sweep_interval=0)) as url, Platform(url) as platform:
        yield platform


def gate(store: Store) -> dict[str, Any]:
    return create_interrupt(
        store=store, run_id=RUN, chat_id="ch_contract1", event="agent.tool_call"
    )


def exit_code(call: Any) -> ExitCode:
    with pytest.raises(BeltError) as caught:
        call()
    return caught.value.exit_code


def test_a_runs_interrupts_are_listed_in_the_order_they_opened(
    backend: Backend, store: Store
) -> None:
    first, second = gate(store), gate(store)
    listed = backend.find_interrupts(run_id=RUN)
    assert [dto for dto, _ in listed] == [first, second]
    assert backend.find_interrupts(run_id="ar_contractnone") == []


def test_a_settled_interrupt_is_listed_only_when_asked_for(backend: Backend, store: Store) -> None:
    settled, pending = gate(store), gate(store)
    backend.resolve_interrupt(interrupt_id=settled["id"], decision="deny")
    assert [dto["id"] for dto, _ in backend.find_interrupts(run_id=RUN)] == [pending["id"]]
    everything = backend.find_interrupts(run_id=RUN, include_settled=True)
    assert [(dto["id"], dto["status"]) for dto, _ in everything] == [
        (settled["id"], "resolved"),
        (pending["id"], "pending"),
    ]


def test_show_gives_the_interrupt_dto(backend: Backend, store: Store) -> None:
    interrupt = gate(store)
    shown, _ = backend.show_interrupt(interrupt_id=interrupt["id"], run_id=RUN)
    assert shown == interrupt


def test_resolve_stores_the_decision_and_its_data(backend: Backend, store: Store) -> None:
    interrupt = gate(store)
    dto = backend.resolve_interrupt(
        interrupt_id=interrupt["id"], decision="allow", data={"approved_by": "ana"}
    )
    assert (dto["status"], dto["resolution"], dto["resolved_data"]) == (
        "resolved",
        "allow",
        {"approved_by": "ana"},
    )
    assert backend.show_interrupt(interrupt_id=interrupt["id"], run_id=RUN)[0] == dto


def test_resolving_twice_is_a_conflict(backend: Backend, store: Store) -> None:
    interrupt = gate(store)
    backend.resolve_interrupt(interrupt_id=interrupt["id"], decision="deny")
    again = exit_code(
        lambda: backend.resolve_interrupt(interrupt_id=interrupt["id"], decision="allow")
    )
    assert again == ExitCode.CONFLICT


def test_an_unknown_interrupt_is_not_found(backend: Backend) -> None:
    missing = "int_contractnothere00"
    assert exit_code(lambda: backend.show_interrupt(interrupt_id=missing, run_id=RUN)) == (
        ExitCode.NOT_FOUND
    )
    assert exit_code(lambda: backend.resolve_interrupt(interrupt_id=missing, decision="deny")) == (
        ExitCode.NOT_FOUND
    )


def test_a_hostile_id_is_refused_as_invalid_input(backend: Backend) -> None:
    hostile = "../../etc/passwd"
    assert exit_code(lambda: backend.resolve_interrupt(interrupt_id=hostile, decision="deny")) == (
        ExitCode.INVALID_INPUT
    )
    assert exit_code(lambda: backend.set_chat_settings(chat_id=hostile, disable_hooks=True)) == (
        ExitCode.INVALID_INPUT
    )


def test_chat_settings_switch_a_chats_hooks_off_and_on(backend: Backend, store: Store) -> None:
    def missing() -> object:
        return backend.set_chat_settings(chat_id="ch_contract2", disable_hooks=True)

    assert exit_code(missing) == ExitCode.NOT_FOUND  # a chat is not made by its settings
    assert not store.exists(CHAT, "ch_contract2")
    store.create(CHAT, "ch_contract2", {"id": "ch_contract2"})
    chat = backend.set_chat_settings(chat_id="ch_contract2", disable_hooks=True)
    assert chat["agent_data"]["disable_hooks"] is True
    assert disabled(store.get(CHAT, "ch_contract2"))
    backend.set_chat_settings(chat_id="ch_contract2", disable_hooks=False)
    assert not disabled(store.get(CHAT, "ch_contract2"))


def test_the_profile_is_stored_whole_and_read_back(backend: Backend) -> None:
    declaration = json.loads((EXAMPLES / "nexus-profile.json").read_text())
    assert backend.put_profile(declaration) == backend.get_profile()
    assert backend.get_profile()["lifecycle_hooks"] == declaration["lifecycle_hooks"]


def test_a_profile_that_breaks_a_rule_is_refused(backend: Backend) -> None:
    before = backend.get_profile()
    bad = {"lifecycle_hooks": [{"event": "no_such_event", "tool": "x"}]}
    # Invalid input here; over the API, a 422 answer, which is exit 1 as every status outside
    # the table of a remote's answers (docs/cli.md) is.
    expected = ExitCode.INVALID_INPUT if isinstance(backend, LocalBackend) else ExitCode.FAILURE
    assert exit_code(lambda: backend.put_profile(bad)) == expected
    assert backend.get_profile() == before
