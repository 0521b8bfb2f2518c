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
