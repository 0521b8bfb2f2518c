"""Shared fixtures: every test gets its own state directory and plain output."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from belt.store import Store, open_store
from tests.browser import chromium

pytest_plugins = ["tests.sdk_flow", "tests.portwatch"]
"""The SDK end-to-end tests' fixtures (`sdk_served`, `sdk_handler`) and what they share; the watch
on 127.0.0.1:8787 that fails the session if a test sends anything there (tests/portwatch.py)."""

# The suite runs on two workers of a shared machine: Hypothesis's timing checks (a 200 ms
# deadline per example, a health check on slow generation) would fail a test for the machine's
# load, not for what it checks. Tests that want a bound on time use a total deadline of their own.
settings.register_profile("belt-suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("belt-suite")

# Tests press Ctrl-C on the processes they start (SIGINT). A suite started as a background job
# of a shell without job control inherits SIGINT ignored, and so would every process it starts,
# which then cannot be interrupted: a handler here (reset to the default at exec) gives each
# child Python's own KeyboardInterrupt, however the suite was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def outgoing_connections() -> Iterator[None]:
    """The connections belt keeps for the process (``belt.outgoing.transport``), to the servers
    of the tests that called in-process, closed when the session ends: left to the garbage
    collector at exit, each was a ResourceWarning line."""
    yield
    from belt.outgoing import transport

    transport.close()


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


@pytest.fixture
def store(belt_home: Path) -> Store:
    """The store of the test's state directory, which the CLI uses too (a test file that wants
    a store of its own defines ``store`` itself)."""
    return open_store()


@pytest.fixture
def served(store: Store) -> Iterator[str]:
    """`belt serve`'s app with the example policy, over the test's store, on a free port."""
    from belt.rules.policy import load_policy
    from belt.server.app import create_app
    from belt.server.deciders import policy_decider
    from tests.servers import running

    decide = policy_decider(load_policy(Path(__file__).parent.parent / "examples" / "policy.toml"))
    with running(create_app(store=store, decide=decide, sweep_interval=0)) as url:
        yield url


@pytest.fixture
def otlp() -> Iterator[Any]:
    """A real OTLP/HTTP receiver on a free port (tests/otlp_receiver.py), for the test."""
    from tests.otlp_receiver import receiving

    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for a module of browser tests; each test opens its own page."""
    with chromium() as context:
        yield context


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page of the module's Chromium: its dialogs are dismissed and their messages kept (as
    ``page.dialogs``); an error the page's script raised fails the test."""
    opened = browser.new_page()
    dialogs: list[str] = []
    errors: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.dialogs = dialogs
    yield opened
    opened.close()
    assert errors == [], errors


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every text the store decodes as JSON from now on (``belt.store.store``'s ``json.loads``),
    for tests of what it reads without decoding."""
    import json

    texts: list[object] = []
    loads = json.loads

    def counted(text: Any, **kwargs: Any) -> Any:
        texts.append(text)
        return loads(text, **kwargs)

    monkeypatch.setattr("belt.store.store.json.loads", counted)
    return texts
