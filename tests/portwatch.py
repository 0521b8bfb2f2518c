"""The suite sends nothing to a fixed port: a watch on 127.0.0.1:8787 for the whole session.

8787 is where `belt serve`, `make demo` and the examples listen, so a developer may have a server
there while the suite runs; a test that reached it would send that server requests and depend on
what answers. Tests use servers on port 0, or `--route` the examples' URL to one.

The process that runs the session (xdist's controller under `-n`, which sees every worker's tests
start and finish) holds a listening socket on the port while the tests run. Every connection to
it is closed at once (the client fails fast) and recorded with its first line and the tests that
were running; any connection fails the session, and the summary names them. When the port is
taken (a server left running), the watch is skipped and the summary says so. Connecting to the
watch is a test's only way to reach the port, so a `belt serve` started on it during the run
finds it taken.

A plugin of the suite (``pytest_plugins`` in conftest.py). ``BELT_TEST_WATCH_PORT`` names another
port to watch: the tests of the watch itself use it on a free port.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from dataclasses import dataclass

import pytest

HOST = "127.0.0.1"
PORT = 8787
"""The port `belt serve` listens on by default, which the examples and `make demo` use."""


@dataclass(frozen=True)
class Arrival:
    """One connection to the watched port: what it sent first, the tests known to be running
    then, and when it came (``time.time()``, the clock of pytest's reports)."""

    first_line: str
    running: tuple[str, ...]
    at: float


class PortWatch:
    """A listening socket that answers no one: each connection is recorded and closed."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.address: tuple[str, int] = sock.getsockname()[:2]
        self.arrivals: list[Arrival] = []
        self.running: dict[str, None] = {}
        self.spans: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self.accept, name="portwatch", daemon=True)
        self.thread.start()

    @classmethod
    def hold(cls, host: str, port: int) -> PortWatch | str:
        """A watch on ``host:port``, or why there cannot be one (the port is taken)."""
        try:
            sock = socket.create_server((host, port))
        except OSError as exc:
            return "it is in use" if exc.errno == errno.EADDRINUSE else str(exc)
        return cls(sock)

    def accept(self) -> None:
        """Record and close each connection until ``close``."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            at = time.time()
            with self.lock:
                running = tuple(self.running)  # the tests running when it connected
            with conn:
                if self.stopping:
                    return
                conn.settimeout(2.0)
                try:
                    first = conn.recv(1024)
                except OSError:
                    first = b""
            line = first.split(b"\r\n", 1)[0].decode("latin-1") or "(a connection, nothing sent)"
            with self.lock:
                self.arrivals.append(Arrival(line, running, at))

    def started(self, nodeid: str) -> None:
        """``nodeid`` is running."""
        with self.lock:
            self.running[nodeid] = None

    def ran(self, nodeid: str, start: float, stop: float) -> None:
        """A phase of ``nodeid`` ran from ``start`` to ``stop`` (its report's times): under xdist
        a worker's report reaches the controller after the fact, so a connection is matched to
        the tests by these times too, not only by the tests known to be running then."""
        with self.lock:
            first, last = self.spans.get(nodeid, (start, stop))
            self.spans[nodeid] = (min(first, start), max(last, stop))

    def running_at(self, arrival: Arrival) -> list[str]:
        """The tests running when ``arrival`` came: known then, or by their reports' times."""
        with self.lock:
            spans = dict(self.spans)
        timed = [node for node, (start, stop) in spans.items() if start <= arrival.at <= stop]
        return list(dict.fromkeys([*arrival.running, *timed]))

    def finished(self, nodeid: str) -> None:
        """``nodeid`` has finished."""
        with self.lock:
            self.running.pop(nodeid, None)

    def close(self) -> list[Arrival]:
        """Stop watching; every connection that arrived."""
        if not self.stopping:
            self.stopping = True
            try:  # wake the accepting thread
                socket.create_connection(self.address, timeout=5).close()
            except OSError:
                pass
            self.thread.join(10)
            self.sock.close()
        with self.lock:
            return list(self.arrivals)


def watched_port() -> int:
    """The port to watch: ``BELT_TEST_WATCH_PORT``, else 8787."""
    return int(os.environ.get("BELT_TEST_WATCH_PORT", PORT))


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller watches for the whole session
    config.pluginmanager.register(Session(PortWatch.hold(HOST, watched_port())), "portwatch")


class Session:
    """The watch's hooks for one session: it follows the tests, fails the session on any
    connection, and says what it saw (or why it could not watch) in the summary."""

    def __init__(self, watch: PortWatch | str) -> None:
        self.watch = watch
        self.where = f"{HOST}:{watched_port()}"

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if isinstance(self.watch, PortWatch):
            self.watch.started(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if isinstance(self.watch, PortWatch):
            self.watch.ran(report.nodeid, report.start, report.stop)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if isinstance(self.watch, PortWatch):
            self.watch.finished(nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if isinstance(self.watch, PortWatch) and self.watch.close():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if isinstance(self.watch, str):
            terminalreporter.write_line(
                f"port watch: {self.where} not watched ({self.watch}): this run cannot check "
                "that no test sends anything there (stop what listens there to check)"
            )
            return
        arrivals = self.watch.close()
        if not arrivals:
            return
        terminalreporter.section(f"connections to the fixed port {self.where}", red=True)
        for arrival in arrivals:
            running = ", ".join(self.watch.running_at(arrival)) or "no test (between tests)"
            terminalreporter.write_line(f"{arrival.first_line!r} while running: {running}")
        terminalreporter.write_line(
            f"{len(arrivals)} connection(s) to {self.where}, where a developer's `belt serve` "
            "may listen: serve on port 0, or --route the URL to a server of the test's own"
        )

    def pytest_unconfigure(self) -> None:
        if isinstance(self.watch, PortWatch):
            self.watch.close()
