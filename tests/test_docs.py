"""Generated docs are current, and the examples in the docs are valid declarations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from belt.cli.docgen import render
from belt.declaring.declarations import check_document, parse_text
from belt.wire.catalogue import BUILTINS, EVENTS
from belt.wire.nexus import NexusEvent

ROOT = Path(__file__).parent.parent
HOOKS_MD = (ROOT / "docs" / "hooks.md").read_text()
# Fenced json/toml blocks in docs/hooks.md are declarations that must validate; examples of
# mistakes are fenced as text.
BLOCKS = re.findall(r"```(json|toml)\n(.*?)```", HOOKS_MD, flags=re.S)


def test_cli_reference_is_current() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == render(), (
        "docs/cli.md is stale: run `make docs`"
    )


def test_cli_reference_covers_both_programs() -> None:
    text = render()
    assert "## belt hooks validate\n" in text
    assert "## rho extensions configure\n" in text


def test_hooks_guide_has_examples() -> None:
    assert {kind for kind, _ in BLOCKS} == {"json", "toml"}


@pytest.mark.parametrize(
    ("kind", "text"), BLOCKS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(BLOCKS)]
)
def test_hooks_guide_examples_validate(kind: str, text: str) -> None:
    doc = parse_text(text, f"docs/hooks.md.{kind}", fmt=kind)
    declaration = check_document(doc, "docs/hooks.md")
    assert declaration.findings.problems == []


@pytest.mark.parametrize("name", [*EVENTS, *BUILTINS, *NexusEvent])
def test_hooks_guide_names_every_event_and_builtin(name: str) -> None:
    assert f"`{name}`" in HOOKS_MD
