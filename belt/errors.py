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
    UNAUTHORIZED = 7
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
    ExitCode.UNAUTHORIZED: "unauthorized: a platform or hook handler refused the credentials (HTTP "
    "401 or 403)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_code_lines() -> list[str]:
    """One line per exit code and its meaning, for help texts."""
    return [f"{int(code):>3}  {EXIT_CODE_MEANINGS[code]}" for code in ExitCode]


class BeltError(Exception):
    """Root of every error belt reports to a user (one line, no traceback without -v)."""

    exit_code: ExitCode = ExitCode.FAILURE
    status: int | None = None  # the HTTP status of the remote answer it reports, if any

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        problems: list[str] | None = None,
        where: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.problems = problems or []  # every finding, one line each after the message
        self.where = where  # the file, option or URL it is about, if known

    def to_json(self) -> dict[str, object]:
        """The error as ``--json`` prints it."""
        known = {
            "where": self.where,
            "hint": self.hint or None,
            "problems": list(self.problems) or None,
        }
        known = {key: value for key, value in known.items() if value is not None}
        return {"error": self.message, "code": int(self.exit_code), **known}


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


class Unreachable(BeltError):
    """A remote platform or hook handler could not be reached or failed."""

    exit_code = ExitCode.UNREACHABLE


class Unauthorized(BeltError):
    """A remote refused the request's credentials (HTTP 401 or 403)."""

    exit_code = ExitCode.UNAUTHORIZED


class Interrupted(BeltError):
    """Ctrl-C stopped the command; the message says where things were left."""

    exit_code = ExitCode.INTERRUPTED


# The statuses `belt serve` answers belt's errors with (its problem+json answers).
_STATUS_OF: tuple[tuple[type[BeltError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (InvalidInput, 422),
    (UsageError, 400),
    (Unreachable, 502),
)


def http_status(exc: BeltError) -> int:
    """The HTTP status a server answers ``exc`` with (500 for anything unmapped)."""
    return next((status for kind, status in _STATUS_OF if isinstance(exc, kind)), 500)


# How a remote's answer becomes an exit code, for every command that talks to one (docs/cli.md):
# (what came back, its statuses (None: no answer, (): any other), the error raised).
REMOTE_ANSWERS: tuple[tuple[str, tuple[int | None, ...], type[BeltError]], ...] = (
    (
        "nothing answered: the name did not resolve, the connection was refused, or the time "
        "ran out before the answer's status line and headers (a webhook's: before its whole "
        "answer)",
        (None,),
        Unreachable,
    ),
    ("HTTP 404: what was asked for is not there", (404,), NotFound),
    ("HTTP 409: it is in a state that forbids the request (already settled)", (409,), Conflict),
    ("HTTP 401 or 403: the credentials were refused", (401, 403), Unauthorized),
    (
        "anything else that is not the success the spec names: a redirect, another 4xx, a 5xx, "
        "a body that is not the envelope or the answer expected (or that broke off), a "
        "connection closed or reset after the request was sent, with no answer (the handler "
        "or server failed on it)",
        (),
        BeltError,
    ),
)


def remote_error(
    status: int | None, message: str, *, problems: list[str] | None = None, hint: str | None = None
) -> BeltError:
    """The error, by ``REMOTE_ANSWERS``, for a remote's answer of HTTP ``status`` (None: nothing
    answered) that is not the success asked for; the status is added to ``message`` if missing."""
    if status is not None and f"HTTP {status}" not in message:
        message = f"{message} (HTTP {status})"
    kind = next(
        (kind for _, statuses, kind in REMOTE_ANSWERS if status in statuses), REMOTE_ANSWERS[-1][2]
    )
    error = kind(message, hint=hint, problems=problems)
    error.status = status
    return error
