"""Shared fixtures: every test gets its own state directory and plain output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.sdk_flow"]
"""The SDK end-to-end tests' fixtures (`sdk_served`, `sdk_handler`) and what they share."""


@pytest.fixture(autouse=True)
def belt_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point BELT_HOME at a fresh directory; plain, wide, colourless output."""
    home = tmp_path / "belt-home"
    monkeypatch.setenv("BELT_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERM", "dumb")
    for var in ("BELT_API_URL", "INFSH_API_KEY", "INFERENCE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    yield home
