"""Screenshots of the inspector page for docs/inspector.md, taken from the example scenarios.

Starts `belt serve --policy examples/policy.toml` over a fresh state directory, plays
examples/guarded-agent.toml against it (its webhooks routed to the server) and
examples/tests/guarded.toml, replays the denied delete with an edited path, and photographs each
view in the system's headless Chromium (as the browser tests drive it) into docs/img/.

Run with `python scripts/screenshots.py` from the repository root (needs the test extras and
Chromium: see the Makefile's `browser` target).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import chromium, missing  # noqa: E402

OUT = ROOT / "docs" / "img"


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """`belt serve` with the example policy on a free port; its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "belt", "serve", "--port", "0", "--policy", "examples/policy.toml"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not found:
        process.kill()
        raise SystemExit(f"belt serve did not start: {line}")
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return process, found.group(1)


def belt(env: dict[str, str], *args: str) -> None:
    """Run a belt command in the example state directory."""
    subprocess.run(
        [sys.executable, "-m", "belt", *args],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def shoot(page: Any, name: str, *, full: bool = False) -> None:
    """Save the page as docs/img/inspector-NAME.png."""
    page.wait_for_timeout(300)
    path = OUT / f"inspector-{name}.png"
    page.screenshot(path=str(path), full_page=full)
    print(f"wrote {path.relative_to(ROOT)}")


def main() -> None:
    """Set the examples up, then photograph the deliveries, a replay, a run and the gates."""
    reason = missing()
    if reason:
        raise SystemExit(f"cannot take screenshots: {reason}")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="belt-shots-") as home:
        env = {**os.environ, "BELT_HOME": home, "NO_COLOR": "1"}
        server, url = start_server(env)
        try:
            belt(env, "sim", "run", "examples/tests/guarded.toml")
            belt(
                env,
                "sim",
                "run",
                "examples/guarded-agent.toml",
                "--route",
                f"http://127.0.0.1:8787={url}",
            )
            deliveries = httpx.get(f"{url}/inspector/deliveries").json()["data"]["items"]
            denied = next(
                d for d in deliveries if d["source"] == "serve" and d["decision"] == "deny"
            )
            gates = httpx.get(f"{url}/inspector/gates").json()["data"]["items"]
            with chromium(device_scale_factor=1) as browser:
                page = browser.new_page()
                page.set_viewport_size({"width": 1280, "height": 760})
                page.goto(f"{url}/#/deliveries")
                page.wait_for_selector("tr.delivery")
                shoot(page, "deliveries")

                page.goto(f"{url}/#/delivery/{denied['id']}")
                page.wait_for_selector("pre.json")
                page.check("input[name=edit]")
                detail = httpx.get(f"{url}/inspector/deliveries/{denied['id']}").json()["data"]
                edited = json.loads(json.dumps(detail["request"]))
                edited["data"]["arguments"]["path"] = "/tmp/production.db"
                page.fill("textarea[name=payload]", json.dumps(edited, indent=2))
                page.click("button.primary:has-text('Replay')")
                page.wait_for_selector("table.diff")
                page.locator("section.panel").scroll_into_view_if_needed()
                shoot(page, "replay")

                page.goto(f"{url}/#/run/{gates[0]['run_id']}")
                page.wait_for_selector("ol.timeline")
                page.locator("h3", has_text="Timeline").scroll_into_view_if_needed()
                shoot(page, "run")

                page.goto(f"{url}/#/gates")
                page.wait_for_selector(".gate")
                page.locator(".gate button", has_text="Allow with data").click()
                page.fill("textarea[name=data]", '{"by": "ana", "ticket": "OPS-7"}')
                shoot(page, "gates")
                time.sleep(0.1)
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
