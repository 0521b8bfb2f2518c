"""``belt`` on a pseudo-terminal, for the tests of what a person sees and types at one."""

from __future__ import annotations

import os
import platform
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

READ_SYSCALL = {"x86_64": 0, "aarch64": 63}
"""read(2)'s number in /proc/PID/syscall, by machine."""


@contextmanager
def on_terminal(
    args: list[str], *, env: Mapping[str, str], cwd: Path | None = None
) -> Iterator[Terminal]:
    """``belt ARGS`` on a pseudo-terminal (stdin, stdout and stderr), with exactly ``env``;
    killed on leaving if it has not ended."""
    primary, secondary = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "belt", *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        cwd=cwd,
        env=dict(env),
    )
    os.close(secondary)
    terminal = Terminal(proc, primary)
    try:
        yield terminal
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class Terminal:
    """What a process printed on its terminal so far, read on demand."""

    def __init__(self, proc: subprocess.Popen[bytes], primary: int) -> None:
        self.proc, self.primary, self.seen = proc, primary, b""

    def wait_for(self, text: str, timeout: float = 60) -> None:
        """Read until ``text`` has been printed (or the process ended: an assertion)."""
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen:
            assert time.monotonic() < deadline, f"never printed {text!r}:\n{self.text}"
            if not self._read(0.2) and self.proc.poll() is not None:
                raise AssertionError(f"ended before printing {text!r}:\n{self.text}")

    def finish(self, timeout: float = 60) -> int:
        """Read to the end; the exit code."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None or self._read(0):
            assert time.monotonic() < deadline, f"did not finish:\n{self.text}"
            self._read(0.2)
        return self.proc.wait()

    def converse(self, reply: Callable[[bytes], bytes | None], timeout: float = 60) -> int:
        """Read to the end, asking ``reply`` after each piece read what to type (given all
        that was printed so far; None: nothing); the exit code."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"belt did not finish in time; it printed:\n{self.text}"
            if self._read(min(remaining, 0.2)):
                typed = reply(self.seen)
                if typed is not None:
                    os.write(self.primary, typed)
            elif self.proc.poll() is not None:
                return self.proc.wait(timeout=max(deadline - time.monotonic(), 1))

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.primary], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.primary, 65536)
        except OSError:  # the terminal closed with the process
            return False
        self.seen += chunk
        return bool(chunk)

    def interrupt(self, timeout: float = 60) -> int:
        """Press Ctrl-C (SIGINT) at a prompt; the exit code.

        A SIGINT that lands after the prompt was written but before the read began only marks
        the signal, and the read then waits for input (a person's Ctrl-C comes while it waits):
        so it is sent again once the process is seen blocked reading its terminal after the
        press (Linux's /proc/PID/syscall; where that cannot be read, after 5 s).
        """
        deadline = time.monotonic() + timeout
        while True:
            self.proc.send_signal(signal.SIGINT)
            pressed = time.monotonic()
            while self.proc.poll() is None and time.monotonic() - pressed < 5:
                if self._reading_stdin():
                    break
                self._read(0.05)
            if self.proc.poll() is not None:
                return self.finish()
            assert time.monotonic() < deadline, f"Ctrl-C never ended it:\n{self.text}"

    def _reading_stdin(self) -> bool:
        """Whether the process is blocked in read(0, ...) now: a SIGINT sent before cannot be
        what it is handling (the kernel wakes a process it signals)."""
        number = READ_SYSCALL.get(platform.machine())
        try:
            with open(f"/proc/{self.proc.pid}/syscall") as status:
                return number is not None and status.read().startswith(f"{number} 0x0 ")
        except OSError:
            return False

    @property
    def text(self) -> str:
        """What was printed, decoded, with the terminal's line ends as newlines."""
        return self.seen.decode(errors="replace").replace("\r\n", "\n")
