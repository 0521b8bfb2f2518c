"""The statuses belt serve answers errors with, and the one table of a remote's answers."""

from __future__ import annotations

import pytest

from belt.errors import (
    REMOTE_ANSWERS,
    BeltError,
    Conflict,
    ExitCode,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unreachable,
    UsageError,
    http_status,
    remote_error,
)

KINDS = [NotFound, Conflict, InvalidInput, UsageError, Unreachable]


def test_the_statuses_belt_serve_answers_are_distinct() -> None:
    statuses = [http_status(kind("m")) for kind in KINDS]
    assert len(set(statuses)) == len(statuses)
    assert 500 not in statuses


@pytest.mark.parametrize("kind", [NotFound, Conflict])
def test_a_missing_or_conflicting_thing_on_the_server_is_the_same_on_the_client(
    kind: type[BeltError],
) -> None:
    back = remote_error(http_status(kind("it went wrong")), "it went wrong")
    assert type(back) is kind


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (None, Unreachable, ExitCode.UNREACHABLE),
        (404, NotFound, ExitCode.NOT_FOUND),
        (409, Conflict, ExitCode.CONFLICT),
        (401, Unauthorized, ExitCode.UNAUTHORIZED),
        (403, Unauthorized, ExitCode.UNAUTHORIZED),
        (200, BeltError, ExitCode.FAILURE),  # a success body that is not the one asked for
        (302, BeltError, ExitCode.FAILURE),
        (400, BeltError, ExitCode.FAILURE),
        (418, BeltError, ExitCode.FAILURE),
        (422, BeltError, ExitCode.FAILURE),
        (500, BeltError, ExitCode.FAILURE),
        (502, BeltError, ExitCode.FAILURE),
        (503, BeltError, ExitCode.FAILURE),
    ],
)
def test_a_remote_answer_maps_to_one_exit_code(
    status: int | None, kind: type[BeltError], code: ExitCode
) -> None:
    error = remote_error(status, "http://h/x answered", hint="a hint")
    assert type(error) is kind
    assert error.exit_code == code
    assert error.status == status
    assert error.hint == "a hint"
    if status is not None:
        assert error.message == f"http://h/x answered (HTTP {status})"  # the status is named


def test_a_status_the_message_names_is_not_named_twice() -> None:
    assert remote_error(500, "h answered HTTP 500").message == "h answered HTTP 500"


def test_an_answers_problems_are_kept() -> None:
    error = remote_error(422, "m", problems=["hooks[0].event: unknown"])
    assert error.problems == ["hooks[0].event: unknown"]


def test_the_table_has_a_row_for_nothing_answered_and_ends_with_the_rest() -> None:
    assert REMOTE_ANSWERS[0][1] == (None,) and REMOTE_ANSWERS[0][2] is Unreachable
    assert REMOTE_ANSWERS[-1][1] == () and REMOTE_ANSWERS[-1][2] is BeltError
    covered = [status for _, statuses, _ in REMOTE_ANSWERS for status in statuses]
    assert len(covered) == len(set(covered))


def test_an_error_as_json_has_its_message_and_code_and_only_what_it_knows() -> None:
    assert NotFound("no interrupt in_x").to_json() == {"error": "no interrupt in_x", "code": 3}
    error = InvalidInput(
        "s.toml: turns[0].usr: unknown key",
        hint="see docs/scenarios.md",
        problems=["turns[1].x: unknown key"],
        where="s.toml",
    )
    assert error.to_json() == {
        "error": "s.toml: turns[0].usr: unknown key",
        "code": 5,
        "where": "s.toml",
        "hint": "see docs/scenarios.md",
        "problems": ["turns[1].x: unknown key"],
    }


def test_a_remote_error_as_json_has_the_code_of_its_answer() -> None:
    assert remote_error(409, "h answered").to_json()["code"] == ExitCode.CONFLICT
    assert remote_error(None, "cannot reach h").to_json()["code"] == ExitCode.UNREACHABLE
