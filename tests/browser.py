"""A real headless Chromium for tests of the inspector page, driven by Playwright.

The browser is the system's (``/usr/bin/chromium``, from the distribution's ``chromium``
package, which ``make test`` installs when it can): Playwright's own browser downloads are never
used. Chromium starts with a fresh profile and without any of its background network traffic.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    """The system's Chromium (``BELT_CHROMIUM`` overrides where it is looked for)."""
    found = os.environ.get("BELT_CHROMIUM") or shutil.which("chromium")
    return found if found and os.access(found, os.X_OK) else None


def missing() -> str | None:
    """Why a browser test cannot run here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[test]')"
    if chromium_path() is None:
        return "no Chromium at /usr/bin/chromium (as root: apt-get install -y chromium)"
    return None


@contextmanager
def chromium(*, flags: Sequence[str] = (), **context: Any) -> Iterator[Any]:
    """A Playwright browser context in the system's Chromium, with a fresh profile; ``flags``
    are more command-line flags (``--host-resolver-rules=...``)."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="belt-chromium-") as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile,
            executable_path=chromium_path(),
            headless=True,
            args=[*CHROMIUM_FLAGS, *flags],
            viewport={"width": 1280, "height": 900},
            **context,
        )
        try:
            yield browser
        finally:
            browser.close()
