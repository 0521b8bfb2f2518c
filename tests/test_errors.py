"""One table of errors and HTTP statuses, read both ways (belt serve answers, clients raise)."""

from __future__ import annotations

import pytest

from belt.errors import (
    BeltError,
    Conflict,
    ExitCode,
    InvalidInput,
    NotFound,
    Unreachable,
    UsageError,
    error_for_status,
    http_status,
)

KINDS = [NotFound, Conflict, InvalidInput, UsageError, Unreachable]


@pytest.mark.parametrize("kind", KINDS)
def test_an_error_a_server_answers_comes_back_to_the_client_as_itself(
    kind: type[BeltError],
) -> None:
    status = http_status(kind("it went wrong"))
    assert status != 500
    back = error_for_status(status, "it went wrong")
    assert type(back) is kind
    assert back.exit_code == kind.exit_code


def test_the_statuses_belt_serve_answers_are_distinct() -> None:
    statuses = [http_status(kind("m")) for kind in KINDS]
    assert len(set(statuses)) == len(statuses)


def test_a_usage_error_on_the_server_is_a_usage_error_on_the_client() -> None:
    back = error_for_status(http_status(UsageError("--since: not a duration")), "m")
    assert back.exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, BeltError), (403, BeltError), (500, Unreachable), (503, Unreachable), (418, BeltError)],
)
def test_statuses_outside_the_table(status: int, kind: type[BeltError]) -> None:
    error = error_for_status(status, "m", auth_hint="set the key")
    assert type(error) is kind
    if status in (401, 403):
        assert error.hint == "set the key"


def test_invalid_input_keeps_its_problems() -> None:
    error = error_for_status(422, "m", problems=["hooks[0].event: unknown"])
    assert isinstance(error, InvalidInput) and error.problems == ["hooks[0].event: unknown"]
