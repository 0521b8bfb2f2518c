"""The tests stay in their own room: nothing reaches a fixed port (the watch of tests/portwatch.py
proves it for every session), and the example tests pass from any directory."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from belt.testing.suite import run_suite
from tests.portwatch import PORT, PortWatch

ROOT = Path(__file__).parent.parent
EXAMPLE_TESTS = ROOT / "examples" / "tests"


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port: int = sock.getsockname()[1]
    return port


def pytest_in(directory: Path, *args: str, port: int) -> subprocess.CompletedProcess[str]:
    """pytest run in ``directory`` (not the repository) with the port watch on ``port``."""
    env = {**os.environ, "BELT_TEST_WATCH_PORT": str(port), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.portwatch", "-p", "no:cacheprovider", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_watch_records_each_connection_and_closes_it_at_once() -> None:
    watch = PortWatch.hold("127.0.0.1", 0)
    assert isinstance(watch, PortWatch)
    watch.started("tests/test_x.py::test_a")
    with socket.create_connection(watch.address, timeout=10) as client:
        client.sendall(b"POST /hooks/tool-call HTTP/1.1\r\nhost: x\r\n\r\n")
        assert client.recv(1024) == b""  # closed without an answer: the client fails fast
    watch.finished("tests/test_x.py::test_a")
    (arrival,) = watch.close()
    assert arrival.first_line == "POST /hooks/tool-call HTTP/1.1"
    assert arrival.running == ("tests/test_x.py::test_a",)
    assert watch.close() == [arrival]  # closing again changes nothing
    # A port that is taken cannot be watched, and says why.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        assert PortWatch.hold("127.0.0.1", taken.getsockname()[1]) == "it is in use"


SENDS = """
import socket, os

def test_quiet():
    pass

def test_sends_to_the_demo_port():
    port = int(os.environ["BELT_TEST_WATCH_PORT"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(b"POST /hooks/turn-start HTTP/1.1\\r\\n\\r\\n")
        client.recv(1024)
"""


def test_a_session_whose_test_reaches_the_watched_port_fails_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SENDS)
    # Two xdist workers: the controller watches, and sees the workers' tests start and finish.
    done = pytest_in(tmp_path, "-q", "-n", "2", "test_sample.py", port=free_port())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert re.search(
        r"'POST /hooks/turn-start HTTP/1.1' while running: .*"
        r"test_sample.py::test_sends_to_the_demo_port",
        done.stdout,
    ), done.stdout
    assert "1 connection(s) to 127.0.0.1:" in done.stdout
    # The same tests without the one that sends pass, and the summary says nothing.
    quiet = pytest_in(tmp_path, "-q", "test_sample.py::test_quiet", port=free_port())
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "port" not in quiet.stdout.lower()


def test_a_port_in_use_is_not_watched_and_the_summary_says_so(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text("def test_quiet():\n    pass\n")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = pytest_in(tmp_path, "-q", "test_sample.py", port=port)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"port watch: 127.0.0.1:{port} not watched (it is in use)" in done.stdout


def test_the_suite_watches_the_demo_port() -> None:
    assert PORT == 8787
    assert "tests.portwatch" in (ROOT / "tests" / "conftest.py").read_text()


def test_belt_test_of_the_example_tests_passes_under_the_watch() -> None:
    # What `make test` runs after pytest: under this session's watch, anything it sent to 8787
    # would fail the session.
    suite = run_suite(paths=[EXAMPLE_TESTS])
    assert suite.exit_code == 0, [(r.name, r.status, r.error, r.failures) for r in suite.results]


def test_the_example_pytest_tests_pass_from_another_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE_TESTS)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^\d+ passed", done.stdout, re.M), done.stdout


def test_the_readme_installs_pytest_before_it_runs_the_example_tests() -> None:
    # `make demo`'s .venv has belt and its pytest plugin (an entry point), not pytest itself.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("pytest")]
    assert project["entry-points"]["pytest11"] == {"belt": "belt.testing.plugin"}
    lines = (ROOT / "README.md").read_text().splitlines()
    install = lines.index(next(line for line in lines if line.startswith(".venv/bin/pip install")))
    assert lines[install].split("#")[0].split() == [".venv/bin/pip", "install", "pytest"]
    assert lines[install + 1].startswith(".venv/bin/pytest examples/tests ")
