"""The ``belt`` command line's console entry points; the app is ``belt.cli.root``, whose names
are read here too, loaded on first use.

This module imports nothing Python has not loaded at its start, so that from the first moment
Ctrl-C is belt's: one line and exit 130. Only ``main`` (and ``rho``'s) installs a signal handler.
"""

import importlib
import os
import sys
from contextlib import suppress

# Nothing at the top but what Python loaded before running belt: not even typing (about 10 ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from belt.cli.root import BeltGroup as BeltGroup
    from belt.cli.root import app as app
    from belt.cli.root import lazy_command as lazy_command
    from belt.cli.root import report as report

INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (``ExitCode.INTERRUPTED``)."""


def main() -> "NoReturn":
    """Console-script entry point of ``belt``."""
    console(lambda: importlib.import_module("belt.cli.root").app, "belt")


def rho_main() -> "NoReturn":
    """Console-script entry point of ``rho``."""
    console(lambda: importlib.import_module("belt.cli.rho").app, "rho")


def console(load: "Callable[[], Callable[..., Any]]", prog_name: str) -> "NoReturn":
    """Run the Typer app ``load`` returns as ``prog_name``; Ctrl-C is exit 130 at any moment."""
    sys.unraisablehook = _unraisable
    try:
        load()(prog_name=prog_name)
    except KeyboardInterrupt:
        interrupted()
    except RuntimeError as wrapped:
        # Python 3.11 wraps what a descriptor's __set_name__ raises, a Ctrl-C landing in a
        # class statement of a module being imported among them, in a RuntimeError.
        if isinstance(wrapped.__cause__, KeyboardInterrupt):
            interrupted()
        raise
    except SystemExit as done:
        # Typer turns a KeyboardInterrupt into exit 130 without a word.
        cause = done.__context__.__cause__ if done.__context__ is not None else None
        if done.code == INTERRUPTED and not isinstance(cause, KeyboardInterrupt):
            # The command stopped by a Ctrl-C said so itself (belt's report of an Interrupted,
            # a warning of its own): the press again of a swallowed one must not say it twice.
            _said.append(True)
        elif done.code == INTERRUPTED or _swallowed:
            interrupted()
        exit_on_ctrl_c()
        raise
    if _swallowed:
        interrupted()
    exit_on_ctrl_c()  # a Typer app in standalone mode always exits; this keeps the promise
    raise SystemExit(0)


_swallowed: "list[bool]" = []
"""Whether a Ctrl-C landed where Python ignores exceptions (a callback of its import machinery,
a finalizer): Python would print "Exception ignored" and go on as if nothing was pressed."""


def _unraisable(unraisable: "Any") -> None:
    """``sys.unraisablehook``: a Ctrl-C Python could not raise is kept and sent again."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        _swallowed.append(True)
        _press_again()
        return
    sys.__unraisablehook__(unraisable)


def _press_again() -> None:
    """Send a swallowed Ctrl-C again from another thread, for the main thread to take it."""
    import signal
    import threading

    returned = threading.Event()

    def press() -> None:
        returned.wait()  # not while the thread starts: Thread.start waits in the main thread
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press, daemon=True).start()
    returned.set()


def interrupted() -> "NoReturn":
    """Say ``interrupted`` and exit 130; a second Ctrl-C meanwhile ends the process at once."""
    exit_on_ctrl_c()
    _said.append(True)
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    raise SystemExit(INTERRUPTED)


_said: "list[bool]" = []
"""Whether ``interrupted`` was said already (a second Ctrl-C says nothing more)."""


def exit_on_ctrl_c() -> None:
    """From now on a Ctrl-C ends the process at once, exit 130 and one line (unless ignored)."""
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _exit_now)


def _exit_now(signum: int, frame: object) -> None:
    leave(INTERRUPTED, b"" if _said else b"interrupted\n")


def leave(code: int, last: bytes = b"") -> "NoReturn":
    """End the process now with ``code``, its output written, without waiting for its threads."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe, a closed stream: nothing to add
            stream.flush()
    with suppress(OSError):
        os.write(2, last)
    os._exit(code)


def __getattr__(name: str) -> "Any":
    """The names of ``belt.cli.root`` (the Typer app and its parts), loaded on first use."""
    if name.startswith("__") or name == "root":
        raise AttributeError(name)
    # import_module: a module being imported (root importing its siblings) is taken as it is.
    root = importlib.import_module("belt.cli.root")
    try:
        return getattr(root, name)
    except AttributeError:
        raise AttributeError(f"module 'belt.cli' has no attribute {name!r}") from None
