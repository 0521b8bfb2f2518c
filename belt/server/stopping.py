"""How ``belt serve`` ends on Ctrl-C or SIGTERM: one line and a documented code (standard library
only: entered before the server is imported)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from belt.errors import ExitCode, Interrupted


class Stopped(Interrupted):
    """``belt serve`` stopped on a signal: exit 130 for Ctrl-C, 0 for SIGTERM (a service
    manager's stop); ``threads_left``: non-daemon threads the exit must not wait for."""

    def __init__(self, message: str, *, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.threads_left = any(
            thread.is_alive() and not thread.daemon and thread is not threading.main_thread()
            for thread in threading.enumerate()
        )


class Terminated(BaseException):
    """SIGTERM arrived while ``belt serve`` ran (a BaseException, as KeyboardInterrupt is)."""


def terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler of ``stopping_on_signals``."""
    raise Terminated


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """For the block, SIGTERM raises Terminated in the main thread; it or Ctrl-C leaving the
    block becomes ``Stopped``. SIGTERM's handler is put back after (none is set off the main
    thread)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminated) if main else None
    try:
        yield
    except KeyboardInterrupt:
        raise Stopped("interrupted", exit_code=ExitCode.INTERRUPTED) from None
    except Terminated:
        raise Stopped("stopped (SIGTERM)", exit_code=ExitCode.OK) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
