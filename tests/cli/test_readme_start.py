"""The README's start and its examples leave no trace: the first screen shows `belt init` and its
commands pass as written; `make demo` runs in a home of its own under .venv and the next
command it prints finds the demo's gate there; the learning example keeps the user's registry
as it was."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from belt.cli import app
from tests.cli.test_help import parsed
from tests.terminal import on_terminal

ROOT = Path(__file__).parent.parent.parent
README = (ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent


def sh_block_after(heading: str) -> str:
    """The first ``sh`` block after the line ``heading`` of the README."""
    found = re.search(rf"^{re.escape(heading)}\n.*?```sh\n(.*?)```", README, re.S | re.M)
    assert found, heading
    return found.group(1)


@pytest.fixture
def user(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A user's shell: this belt on PATH, no BELT_HOME, and a home directory (HOME and the XDG
    data directory, where belt's default state would go) of its own, empty."""
    (tmp_path / "home").mkdir()
    (tmp_path / "xdg").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BELT_", "XDG_"))}
    return {
        **env,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path_factory.getbasetemp() / "hypothesis"),
    }


def untouched(user: dict[str, str]) -> None:
    """Nothing was written in the user's home directory or default state directory."""
    assert list(Path(user["HOME"]).iterdir()) == []
    assert list(Path(user["XDG_DATA_HOME"]).iterdir()) == []


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory that looks like the repository to the README and the Makefile: its
    ``examples/`` and ``.venv/bin`` are the real ones, its ``.venv`` a directory of its own."""
    where = tmp_path / "checkout"
    (where / ".venv").mkdir(parents=True)
    (where / "examples").symlink_to(ROOT / "examples")
    (where / ".venv" / "bin").symlink_to(BIN)
    return where


def test_the_first_screen_of_the_readme_shows_belt_init() -> None:
    first_screen = README.splitlines()[:25]
    commands = [line for line in first_screen if line.startswith("belt init")]
    assert commands, "\n".join(first_screen)
    for line in commands:
        parsed(app, "belt", shlex.split(line, comments=True)[1:])


def test_the_readmes_first_hook_passes_as_written(tmp_path: Path, user: dict[str, str]) -> None:
    lines = sh_block_after("## Your first hook").splitlines()
    assert "venv" in lines[0]  # the installation, which this environment has done
    script = "\n".join(["set -e", *lines[1:]])
    assert "belt init" in script and "belt test" in script and "belt check" in script
    assert "\npytest" in script
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=user, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^1 scenario\(s\): 1 passed in ", done.stdout, re.M), done.stdout
    assert re.search(r"\b\d+ passed in ", done.stdout), done.stdout


def test_the_learning_example_runs_in_a_home_of_its_own(
    checkout: Path, user: dict[str, str]
) -> None:
    block = next(
        b for b in re.findall(r"```sh\n(.*?)```", README, re.S) if "learning-agent.toml" in b
    )
    done = subprocess.run(
        ["bash", "-c", f"set -e\n{block}"], cwd=checkout, env=user, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Stale backups stay" in done.stdout  # the entry its review saved, listed
    untouched(user)
    assert (checkout / ".venv" / "learning-home" / "store").is_dir()


def make_dry_run(target: str) -> list[str]:
    """The commands ``make TARGET`` runs, as ``make -n`` prints them (continuations joined)."""
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "--no-print-directory", target],
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.replace("\\\n", " ").splitlines()


@pytest.mark.parametrize(("target", "home"), [("demo", "demo-home"), ("demo-sdk", "demo-sdk-home")])
def test_each_demo_runs_belt_serve_and_its_client_in_a_home_of_its_own_under_venv(
    target: str, home: str
) -> None:
    commands = make_dry_run(target)
    (serving,) = [c for c in commands if "scripts/with-serve.sh" in c]
    # with-serve.sh starts `belt serve` and then the command: both inherit BELT_HOME.
    assert re.match(rf"BELT_HOME=\.venv/{home} (\w+=\S+ )*scripts/with-serve\.sh ", serving)
    emptied = commands.index(f"rm -rf .venv/{home}")
    assert emptied < commands.index(serving)


def test_make_demo_prints_a_next_command_that_finds_the_demos_gate(
    checkout: Path, user: dict[str, str], served: str
) -> None:
    commands = make_dry_run("demo")
    (serving,) = [c for c in commands if "scripts/with-serve.sh" in c]
    assignment, script, *_ = shlex.split(serving)
    home = assignment.removeprefix("BELT_HOME=")
    simulation = shlex.split(serving.split(" -- ", 1)[1])
    echoed = [shlex.split(c)[1] for c in commands if c.startswith("echo ")]
    (suggested,) = [line for line in echoed if "interrupt review --resume" in line]
    next_words = shlex.split(suggested)
    assert next_words[0] == f"BELT_HOME={home}", suggested
    assert next_words[1:] == [".venv/bin/belt", "interrupt", "review", "--resume"]

    # The simulation as the Makefile runs it (in a checkout of its own), its webhooks sent to
    # a policy server of the test's instead of 127.0.0.1:8787.
    env = {**user, "BELT_HOME": home}
    route = ["--route", f"http://127.0.0.1:8787={served}"]
    simulated = subprocess.run(
        [*simulation, *route], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert simulated.returncode == 0, simulated.stderr
    gate = re.search(r"^  (int_\w+)  hook:agent\.tool_call delete_file", simulated.stdout, re.M)
    assert gate, simulated.stdout

    # The next command, typed as printed: it finds that gate (and leaves it pending here).
    with on_terminal(next_words[2:], env={**user, "BELT_HOME": home}, cwd=checkout) as shell:
        shell.wait_for("[a/d/s/q] ")
        assert "delete_file" in shell.text and "/tmp/old.txt" in shell.text, shell.text
        os.write(shell.primary, b"q\n")
        assert shell.finish() == 0, shell.text
    untouched(user)
    assert (checkout / home / "store").is_dir()
