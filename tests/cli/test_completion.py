"""`belt completion SHELL`, the scripts in completions/, and completion answering them."""

from __future__ import annotations

from pathlib import Path

import pytest

from belt.errors import ExitCode
from tests.cli.runner import belt

COMPLETIONS = Path(__file__).parents[2] / "completions"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completions_directory_holds_the_current_scripts(shell: str) -> None:
    result = belt("completion", shell)
    assert result.exit_code == 0
    assert "_BELT_COMPLETE" in result.stdout
    assert result.stdout == (COMPLETIONS / f"belt.{shell}").read_text(), (
        "completions/ is stale: run `make completions`"
    )


def test_unknown_shell_is_a_usage_error() -> None:
    result = belt("completion", "tcsh")
    assert result.exit_code == ExitCode.USAGE


def test_bash_completion_completes_subcommands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_BELT_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "belt hooks va")
    monkeypatch.setenv("COMP_CWORD", "2")
    result = belt()
    assert result.exit_code == 0
    assert result.stdout.split() == ["validate"]


def test_fish_completion_completes_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_BELT_COMPLETE", "complete_fish")
    monkeypatch.setenv("_TYPER_COMPLETE_ARGS", "belt hooks validate --dialect ")
    monkeypatch.setenv("_TYPER_COMPLETE_FISH_ACTION", "get-args")
    result = belt()
    assert result.exit_code == 0
    assert result.stdout.split() == ["platform", "nexus"]
