"""``belt check --junit-xml FILE`` and ``--save DIR``: a path that cannot be written is exit 5
naming it, before any case is sent when that can be known, and after the report is printed
when the write fails later (a full disk): never a traceback, never a green run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from belt.check.writable import require_writable_directory, require_writable_file
from belt.errors import InvalidInput
from tests.cli.runner import belt

ROOT = Path(__file__).parent.parent

COUNTING = """\
import os

def decide(payload):
    with open(os.environ["BELT_TEST_CALLS"], "a") as calls:
        calls.write("called\\n")
    return None
"""

HIDES_THE_SAVE_DIRECTORY = """\
import os, shutil

def decide(payload):
    # A save directory that could be written before the check is gone once it has run: where
    # it was is now a file (as a disk that filled meanwhile, the write fails late).
    target = os.environ["BELT_TEST_SAVE"]
    if os.path.isdir(target):
        shutil.rmtree(target)
        open(target, "w").close()
    raise RuntimeError("fails every case")
"""


@pytest.fixture
def counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A py: handler that notes each call in a file; its spec and that file."""
    (tmp_path / "counting.py").write_text(COUNTING)
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("BELT_TEST_CALLS", str(calls))
    return f"py:{tmp_path / 'counting.py'}:decide", calls


def unwritable(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Paths no file can be written at, whoever runs the test, and why."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return {
        "in a missing directory": (
            tmp_path / "missing" / "report.xml",
            "No such file or directory",
        ),
        "a directory": (tmp_path, "Is a directory"),
        "under a file": (a_file / "report.xml", "Not a directory"),
    }


@pytest.mark.parametrize("case", ["in a missing directory", "a directory", "under a file"])
def test_an_unwritable_junit_xml_is_exit_5_before_any_case(
    tmp_path: Path, counting: tuple[str, Path], case: str
) -> None:
    spec, calls = counting
    path, why = unwritable(tmp_path)[case]
    result = belt("check", spec, "--examples", "3", "--junit-xml", str(path))
    assert result.exit_code == 5, result.stdout + result.stderr
    assert f"error: --junit-xml {path}: cannot write it: {why}" in result.stderr
    assert not calls.exists()  # refused before the handler was called once
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    ("where", "why"),
    [("a-file", "Not a directory"), ("a-file/saved", "Not a directory")],
    ids=["a file", "under a file"],
)
def test_an_unwritable_save_directory_is_exit_5_before_any_case(
    tmp_path: Path, counting: tuple[str, Path], where: str, why: str
) -> None:
    spec, calls = counting
    (tmp_path / "a-file").write_text("")
    path = tmp_path / where
    result = belt("check", spec, "--examples", "3", "--save", str(path))
    assert result.exit_code == 5, result.stdout + result.stderr
    assert f"error: --save {path}: cannot write it: {why}" in result.stderr
    assert not calls.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only directory")
def test_a_read_only_directory_is_refused_for_both(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(InvalidInput, match="cannot write it: Permission denied"):
            require_writable_file(locked / "report.xml", option="--junit-xml")
        with pytest.raises(InvalidInput, match="cannot write it: Permission denied"):
            require_writable_directory(locked / "saved", option="--save")
        with pytest.raises(InvalidInput, match="cannot write it: Permission denied"):
            require_writable_directory(locked, option="--save")
    finally:
        locked.chmod(0o755)


def test_trying_a_path_leaves_nothing_behind(tmp_path: Path) -> None:
    existing = tmp_path / "report.xml"
    existing.write_text("kept")
    require_writable_file(existing, option="--junit-xml")
    require_writable_file(tmp_path / "new.xml", option="--junit-xml")
    require_writable_directory(tmp_path, option="--save")
    require_writable_directory(tmp_path / "a" / "b", option="--save")
    assert existing.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]


def test_a_good_run_with_a_save_directory_creates_none(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    result = belt(
        "check", "py:examples/handler.py:decide", "--event", "agent.tool_call",
        "--examples", "3", "--save", str(saved),
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    assert not saved.exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["lines", "json"])
def test_a_junit_write_that_fails_late_is_exit_5_with_the_report_printed(
    json_flag: list[str],
) -> None:
    # /dev/full opens for writing like any file and fails on the first byte: a full disk.
    done = subprocess.run(
        [
            sys.executable, "-m", "belt", "check", "py:examples/handler.py:decide",
            "--event", "agent.tool_call", "--examples", "3", "--seed", "1",
            "--junit-xml", "/dev/full", *json_flag,
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: --junit-xml /dev/full: cannot write it: No space left on device"
    )
    assert "Traceback" not in done.stderr
    if json_flag:
        assert json.loads(done.stdout)["counts"]["pass"] > 0
    else:
        assert "checks: " in done.stdout and "0 failed" in done.stdout


def test_a_save_that_fails_late_is_exit_5_with_the_report_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hides.py").write_text(HIDES_THE_SAVE_DIRECTORY)
    saved = tmp_path / "saved"
    saved.mkdir()
    monkeypatch.setenv("BELT_TEST_SAVE", str(saved))
    done = subprocess.run(
        [
            sys.executable, "-m", "belt", "check", f"py:{tmp_path / 'hides.py'}:decide",
            "--event", "agent.tool_call", "--examples", "2", "--seed", "1", "--save", str(saved),
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --save {saved}/check-agent-tool-call-")
    assert last.endswith(": cannot write it: File exists")
    assert "Traceback" not in done.stderr
    assert "fail  answers" in done.stdout  # the report, failures and all, came first
    assert "not saved: --save" in done.stdout
    assert saved.is_file()
