"""The README's commands run as written: each `belt` line of its shell blocks names real
commands and options with no placeholder for an id, and the ones that need no server run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from belt.cli import app
from tests.cli.runner import belt
from tests.cli.test_help import parsed

ROOT = Path(__file__).parent.parent.parent
README = (ROOT / "README.md").read_text()
PLACEHOLDERS = ("…", "RUN_ID", "CHAT_ID", " ID ", "ar_...", "re_...")


def readme_commands() -> list[str]:
    """Every command line of the README's ``sh`` blocks that runs belt (continuations joined,
    comments kept for the placeholder check)."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "belt":
                commands.append(line)
    return commands


COMMANDS = readme_commands()


def test_the_readme_has_belt_commands() -> None:
    assert len(COMMANDS) >= 20
    assert "belt sim show --last --json" in " ".join(COMMANDS)


@pytest.mark.parametrize("line", COMMANDS)
def test_each_readme_command_parses_and_names_no_placeholder(line: str) -> None:
    words = [w for w in shlex.split(line, comments=True) if w != "&"]
    parsed(app, "belt", words[1:])
    command = line.split("#")[0]
    for placeholder in PLACEHOLDERS:
        assert placeholder not in command, (placeholder, line)


def from_directory(
    where: str, words: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> list[str]:
    """A README command's words as run from ``where``: the repository's root as written, or
    another directory with its ``examples/`` paths spelled from the root (the files those
    examples name are read from their own directories, whatever the current one)."""
    if where == "root":
        monkeypatch.chdir(ROOT)
        return words
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    monkeypatch.chdir(elsewhere)
    return [re.sub(r"(^|=)(py:)?examples/", rf"\g<1>\g<2>{ROOT}/examples/", w) for w in words]


DIRECTORIES = pytest.mark.parametrize("where", ["root", "elsewhere"])


@DIRECTORIES
def test_the_readme_route_example_runs_from_any_directory(
    where: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (line,) = [c for c in COMMANDS if c.startswith("belt test") and "--route" in c]
    words = shlex.split(line, comments=True)[1:]
    result = belt(*from_directory(where, words, monkeypatch, tmp_path))
    assert result.exit_code == 0, result.stderr
    assert re.search(r"^\d+ scenario\(s\): \d+ passed in ", result.stdout, re.M), result.stdout
    assert "FAIL" not in result.stdout


@DIRECTORIES
def test_the_readme_show_and_resume_last_run_after_a_simulation(
    where: str, monkeypatch: pytest.MonkeyPatch, served: str, tmp_path: Path
) -> None:
    # The README's `belt serve --policy examples/policy.toml &`, on a port of the test's own.
    route = f"http://127.0.0.1:8787={served}"
    words = ["sim", "run", "examples/guarded-agent.toml", "--route", route, "--strict"]
    simulated = belt(*from_directory(where, words, monkeypatch, tmp_path))
    assert simulated.exit_code == 0, simulated.stderr
    for wanted in ("belt sim show --last --json", "belt sim resume --last"):
        (line,) = [c for c in COMMANDS if c.startswith(wanted)]
        result = belt(*shlex.split(line, comments=True)[1:])
        # The demo's run holds at its gate: show prints it, resume says what it waits for.
        assert result.exit_code in (0, 4), (line, result.stderr)
        assert "no simulated runs" not in result.stderr


@DIRECTORIES
def test_the_readme_props_example_holds_for_the_example_handler_and_not_for_one_that_allows_all(
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Hypothesis's caches (its Unicode tables) built once for the session, not once per store.
    shared = tmp_path_factory.getbasetemp() / "hypothesis"
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(shared))
    (line,) = [c for c in COMMANDS if "--props examples/props.toml" in c]
    words = [*shlex.split(line, comments=True)[1:], "--examples", "10", "--seed", "1"]
    args = from_directory(where, words, monkeypatch, tmp_path)
    result = belt(*args)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert re.search(r"pass  property +no deletes outside /tmp/ \([1-9]", result.stdout)
    assert re.search(r"pass  property +deletes under /tmp/ go through \([1-9]", result.stdout)

    (tmp_path / "allow_all.py").write_text("def decide(payload):\n    return None\n")
    target = f"py:{tmp_path / 'allow_all.py'}:decide"
    result = belt(*[target if a.startswith("py:") else a for a in args])
    assert result.exit_code == 1, result.stdout + result.stderr
    assert re.search(r"fail  property +no deletes outside /tmp/", result.stdout), result.stdout
