"""The one exception root of belt and the exit codes it maps to."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes; every command exits with one of these."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    INVALID_INPUT = 5
    UNREACHABLE = 6
    INTERRUPTED = 130


# What each exit code means, as `belt --help` and docs/cli.md list them (the one list).
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.FAILURE: "failure: a check, a test, a hook or a handler failed",
    ExitCode.USAGE: "usage: the command line is wrong",
    ExitCode.NOT_FOUND: "not found: no such interrupt, run, chat, entry or file",
    ExitCode.CONFLICT: "conflict: already settled, or another process holds the run",
    ExitCode.INVALID_INPUT: "invalid input: a file, payload or answer is malformed",
    ExitCode.UNREACHABLE: "unreachable: a platform or hook handler did not answer",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_code_lines() -> list[str]:
    """One line per exit code and its meaning, for help texts."""
    return [f"{int(code):>3}  {EXIT_CODE_MEANINGS[code]}" for code in ExitCode]


class BeltError(Exception):
    """Root of every error belt reports to a user (one line, no traceback without -v)."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(BeltError):
    """The command line itself is wrong."""

    exit_code = ExitCode.USAGE


class NotFound(BeltError):
    """A named object (interrupt, run, chat, file) does not exist."""

    exit_code = ExitCode.NOT_FOUND


class Conflict(BeltError):
    """The object exists but is in a state that forbids the operation."""

    exit_code = ExitCode.CONFLICT


class InvalidInput(BeltError):
    """A file, payload, response or argument is malformed; ``problems`` lists every finding."""

    exit_code = ExitCode.INVALID_INPUT

    def __init__(
        self, message: str, *, problems: list[str] | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems or []


class Unreachable(BeltError):
    """A remote platform or hook handler could not be reached or failed."""

    exit_code = ExitCode.UNREACHABLE


class Interrupted(BeltError):
    """Ctrl-C stopped the command; the message says where things were left."""

    exit_code = ExitCode.INTERRUPTED


# One mapping between belt's errors and HTTP statuses, shared by `belt serve` (which answers an
# error with its status) and the platform clients (which turn a status back into an error): the
# one table, read both ways.
_STATUS_OF: tuple[tuple[type[BeltError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (InvalidInput, 422),
    (UsageError, 400),
    (Unreachable, 502),
)
_KIND_OF: dict[int, type[BeltError]] = {status: kind for kind, status in _STATUS_OF}
_AUTH_STATUSES = (401, 403)


def http_status(exc: BeltError) -> int:
    """The HTTP status a server answers ``exc`` with (500 for anything unmapped)."""
    for kind, status in _STATUS_OF:
        if isinstance(exc, kind):
            return status
    return 500


def error_for_status(
    status: int,
    message: str,
    *,
    problems: list[str] | None = None,
    hint: str | None = None,
    auth_hint: str | None = None,
) -> BeltError:
    """The BeltError a client raises for an HTTP error ``status``: the kind ``http_status``
    answers it for, any other 5xx as Unreachable, 401 and 403 with ``auth_hint``."""
    kind = _KIND_OF.get(status)
    if kind is InvalidInput:
        return InvalidInput(message, problems=problems, hint=hint)
    if kind is not None:
        return kind(message, hint=hint)
    if status in _AUTH_STATUSES:
        return BeltError(message, hint=auth_hint or hint)
    if status >= 500:
        return Unreachable(message, hint=hint)
    return BeltError(message, hint=hint)
