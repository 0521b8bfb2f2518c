"""How ``belt serve`` ends: on Ctrl-C (SIGINT) or SIGTERM, with one line and a documented code.

Only the standard library: ``belt serve`` enters ``stopping_on_signals`` before it imports the
server, so a SIGTERM while it loads ends it as one while it serves does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from belt.errors import ExitCode, Interrupted


class Stopped(Interrupted):
    """``belt serve`` stopped on a signal, as asked: one line; exit 130 for Ctrl-C (SIGINT), 0
    for SIGTERM (the way a service manager asks a service to stop, so a stop it asked for is
    not counted as a failure).

    ``threads_left`` says whether threads Python would wait for at exit are still running (a
    ``--handler`` call cut off goes on in its thread until it returns): then the process must
    end without waiting for them.
    """

    def __init__(self, message: str, *, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.threads_left = any(
            thread.is_alive() and not thread.daemon and thread is not threading.main_thread()
            for thread in threading.enumerate()
        )


class Terminated(BaseException):
    """SIGTERM arrived while ``belt serve`` ran (a BaseException, as KeyboardInterrupt is for
    SIGINT: nothing that catches Exception may hold it)."""


def terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler of ``stopping_on_signals``."""
    raise Terminated


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """For the ``with`` block, SIGTERM raises Terminated in the main thread, as SIGINT raises
    KeyboardInterrupt (uvicorn takes both over while it serves, stops gracefully, and raises
    the signal again once stopped); either one leaving the block becomes ``Stopped``. The
    handler SIGTERM had is put back after; nothing changes outside the main thread."""
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
