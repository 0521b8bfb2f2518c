"""Running a tool's command under a total deadline and an output cap.

Whatever a command does, it costs belt at most its deadline (one clock for the whole run) and
``cap`` bytes: past either, its whole process group is killed, so no child keeps the pipes open.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass

from belt.usercode.supervisor import dies_with

STDERR_KEEP = 4096  # bytes of the end of stderr kept to say why a command failed
CHUNK = 65536
ENVIRON_MAX = 1024 * 1024  # the most of a process's environment read to look for a mark
STOP_WAIT = 2.0  # seconds ``stop_marked`` waits for the processes it killed to be gone


@dataclass
class Finished:
    """How a command ended: its exit code (None when belt stopped it) and what it printed."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    overflowed: bool = False


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def run_bounded(
    args: list[str], data: bytes, *, timeout: float, cap: int, mark: tuple[str, str] | None = None
) -> Finished:
    """Run ``args`` with ``data`` on stdin until it exits, ``timeout`` passes or stdout ``cap``.

    OSError when it cannot start. ``mark`` (NAME, VALUE) goes in its environment (``stop_marked``)
    and has the kernel kill it when the thread that started it dies (Linux)."""
    deadline = time.monotonic() + max(timeout, 0.001)
    env = None if mark is None else {**os.environ, mark[0]: mark[1]}
    process = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
        preexec_fn=None if mark is None else dies_with(os.getpid()),
    )
    assert process.stdin and process.stdout and process.stderr
    stdout, stderr = bytearray(), bytearray()
    pending = memoryview(data)
    selector = selectors.DefaultSelector()

    def stopped(**why: bool) -> Finished:
        _kill_group(process)
        return Finished(None, bytes(stdout[:cap]), bytes(stderr), **why)

    try:
        for stream in (process.stdin, process.stdout, process.stderr):
            os.set_blocking(stream.fileno(), False)
        selector.register(process.stdout, selectors.EVENT_READ, process.stdout)
        selector.register(process.stderr, selectors.EVENT_READ, process.stderr)
        if pending:
            selector.register(process.stdin, selectors.EVENT_WRITE, process.stdin)
        else:
            process.stdin.close()
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return stopped(timed_out=True)
            for key, _ in selector.select(remaining):
                stream = key.data
                if stream is process.stdin:
                    try:
                        written = os.write(process.stdin.fileno(), pending[:CHUNK])
                    except BrokenPipeError:
                        written = len(pending)  # the command does not read its input
                    if not (pending := pending[written:]):
                        selector.unregister(process.stdin)
                        process.stdin.close()
                    continue
                if not (chunk := os.read(stream.fileno(), CHUNK)):
                    selector.unregister(stream)
                elif stream is process.stdout:
                    stdout += chunk
                    if len(stdout) > cap:
                        return stopped(overflowed=True)
                else:
                    stderr = (stderr + chunk)[-STDERR_KEEP:]
        try:
            returncode = process.wait(max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            return stopped(timed_out=True)
        return Finished(returncode, bytes(stdout), bytes(stderr))
    except BaseException:
        _kill_group(process)
        raise
    finally:
        selector.close()
        for stream in (process.stdin, process.stdout, process.stderr):
            stream.close()
        if process.returncode is None:
            process.wait()


def stop_marked(name: str, value: str) -> int:
    """Kill every process carrying ``name=value`` in its environment; how many (0: no /proc)."""
    needle = f"{name}={value}".encode()
    killed: list[int] = []
    until = time.monotonic() + STOP_WAIT
    while time.monotonic() < until:
        if not (found := _marked(needle)):
            break
        for pid in found:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        while any(_running(pid) for pid in found) and time.monotonic() < until:
            time.sleep(0.005)
    return len(killed)


def _marked(needle: bytes) -> list[int]:
    """The processes (not this one) whose environment holds ``needle`` as one entry."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    own = str(os.getpid())
    return [
        int(entry)
        for entry in entries
        if entry.isdigit() and entry != own and needle in _proc(entry, "environ").split(b"\0")
    ]


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed orphan not reaped yet)."""
    fields = _proc(str(pid), "stat").rpartition(b")")[2].split()
    return bool(fields) and fields[0] != b"Z"


def _proc(pid: str, name: str) -> bytes:
    """``/proc/PID/NAME`` (up to ``ENVIRON_MAX`` bytes); empty when gone or another user's."""
    with suppress(OSError), open(f"/proc/{pid}/{name}", "rb") as handle:
        return handle.read(ENVIRON_MAX)
    return b""
