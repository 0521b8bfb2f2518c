"""Loading a user's callable: whatever its module does on import is an error naming it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from belt.errors import InvalidInput
from belt.usercode.loader import import_deadline, load_callable


def module(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(body + "\ndef decide(payload):\n    return None\n")
    return f"{path}:decide"


def test_a_module_that_exits_on_import_is_an_error_not_an_exit(tmp_path: Path) -> None:
    spec = module(tmp_path, "exits_at_once", "import sys\nsys.exit(3)")
    with pytest.raises(InvalidInput, match=r"--handler: importing .* it called sys.exit\(3\)"):
        load_callable(spec)
    with import_deadline(30), pytest.raises(InvalidInput, match=r"sys.exit\(3\)"):
        load_callable(spec)


def test_under_a_deadline_a_modules_own_keyboard_interrupt_is_its_error(tmp_path: Path) -> None:
    spec = module(tmp_path, "interrupts_at_once", "raise KeyboardInterrupt")
    with import_deadline(30), pytest.raises(InvalidInput, match="it raised KeyboardInterrupt"):
        load_callable(spec)
    # Without one the import runs on this thread, where a KeyboardInterrupt is the user's.
    with pytest.raises(KeyboardInterrupt):
        load_callable(spec)


def test_under_a_deadline_a_module_imports_and_errors_as_it_would(tmp_path: Path) -> None:
    with import_deadline(30):
        assert load_callable(module(tmp_path, "fine_module", "X = 1"))({}) is None
        with pytest.raises(InvalidInput, match="importing .* failed: boom"):
            load_callable(module(tmp_path, "raises_module", "raise ValueError('boom')"))


def test_a_py_file_is_executed_once_per_process_and_again_when_it_changes(tmp_path: Path) -> None:
    counter = "RUNS = []\ndef count(payload):\n    RUNS.append(1)\n    return len(RUNS)\n"
    path = tmp_path / "counting.py"
    path.write_text(counter)
    with import_deadline(30):
        assert [load_callable(f"{path}:count")({}) for _ in range(3)] == [1, 2, 3]
    # The same file by another name is the same module.
    assert load_callable(f"{tmp_path}/../{tmp_path.name}/counting.py:count")({}) == 4
    path.write_text(counter.replace("len(RUNS)", "len(RUNS) * 10"))
    assert load_callable(f"{path}:count")({}) == 10  # changed: executed again, state anew


def test_a_named_file_is_found_from_the_directory_of_the_file_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from belt.usercode.loader import find_named_file

    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "hooks.py").write_text("", encoding="utf-8")
    (tmp_path / "root.py").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    beside = find_named_file("hooks.py", Path("suite"), where="s.toml")
    assert (beside.path, beside.warning) == (tmp_path / "suite" / "hooks.py", None)
    # Found from the current directory only: used, with the spelling from the file's directory.
    here = find_named_file("root.py", Path("suite"), where="s.toml", spell=lambda p: f"py:{p}:f")
    assert here.path == tmp_path / "root.py"
    assert here.warning is not None and here.warning.startswith("s.toml: py:root.py:f was found")
    assert here.warning.endswith("write py:../root.py:f")
    with pytest.raises(InvalidInput, match=r"^s.toml: suite/gone.py: no such file$"):
        find_named_file("gone.py", Path("suite"), where="s.toml")
    with pytest.raises(InvalidInput, match=r"no such file"):
        find_named_file(str(tmp_path / "gone.py"), Path("suite"), where="s.toml")


def test_a_dotted_module_refused_for_hanging_loads_once_its_import_has_returned(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    body = "import os, time\nuntil = time.monotonic() + 30\n"
    body += f"while not os.path.exists({str(release)!r}) and time.monotonic() < until:\n"
    body += "    time.sleep(0.01)\n"
    module(tmp_path, "hangs_then_returns", body)
    spec = "hangs_then_returns:decide"
    with import_deadline(0.3):
        with pytest.raises(InvalidInput, match="did not finish within 0.3 s"):
            load_callable(spec, root=str(tmp_path))
        with pytest.raises(InvalidInput, match="it is not tried again"):
            load_callable(spec, root=str(tmp_path))
        release.touch()  # the import left to run in its thread returns
        for _ in range(3000):
            try:
                decide = load_callable(spec, root=str(tmp_path))
                break
            except InvalidInput:
                time.sleep(0.01)
        else:
            pytest.fail("the module was still refused 30 s after its import could return")
        assert decide({}) is None
