"""The inspector page says what happened: a gate's card after Allow / Deny, the run id of a
simulated call and of the delivery it caused, a server that is gone; and it is usable 480 px
wide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import run_scenario
from belt.server.app import create_app
from belt.store import Store
from tests.browser import missing
from tests.loopback import CLIENT
from tests.servers import running
from tests.test_inspector import gated_scenario, payload

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

NARROW = {"width": 480, "height": 800}


def two_gates(tmp_path: Path) -> Path:
    """A run that stops at two gates at once: two tool calls of one turn, each gated."""
    calls = [
        {"name": "delete_file", "arguments": {"path": f"/tmp/{name}"}, "result": "deleted"}
        for name in ("first.txt", "second.txt")
    ]
    doc = {
        "agent": {"name": "twice", "hooks": [{"event": "agent.tool_call", "type": "gate"}]},
        "turns": [{"user": "clean", "model": [{"tool_calls": calls}, {"say": "done"}]}],
    }
    path = tmp_path / "two-gates.json"
    path.write_text(json.dumps(doc))
    return path


def test_after_allow_the_card_says_what_happened_and_stays(
    served: str, page: Any, tmp_path: Path
) -> None:
    report, _ = run_scenario(scenario=two_gates(tmp_path))
    run_id = report["runs"][0]["id"]
    page.goto(f"{served}/#/gates")
    first = page.locator(".gate", has_text="first.txt")
    first.wait_for()
    page.wait_for_selector("#count-gates:text('(2)')")
    loads = int(page.locator(".gate-list").get_attribute("data-loads") or 0)
    first.locator("button.allow").click()
    outcome = page.locator(".gate.settled", has_text="first.txt").locator(".outcome")
    outcome.wait_for()
    assert outcome.inner_text() == f"Resolved (allow). The run {run_id} still waits on 1 gate."
    # The list is read again when the store changes: the card of the gate just settled is
    # still there, saying what happened, without its buttons.
    page.wait_for_function(
        f"() => Number(document.querySelector('.gate-list').dataset.loads) > {loads}"
    )
    kept = page.locator(".gate.settled", has_text="first.txt")
    assert kept.count() == 1
    assert "still waits on 1 gate" in kept.inner_text()
    assert kept.locator("button.allow").count() == 0
    page.locator(".gate:not(.settled)", has_text="second.txt").locator("button.deny").click()
    last = page.locator(".gate.settled", has_text="second.txt").locator(".outcome")
    last.wait_for()
    assert (
        last.inner_text() == f"Resolved (deny). The run {run_id} resumes: this server continues it."
    )
    # The card follows the run it resumed: here to its end.
    page.wait_for_selector(".gate.settled .run-now .state.completed")
    page.wait_for_selector("#count-gates:text-is('')", state="attached")
    assert page.locator(".gate.settled").count() == 2
    page.locator(".gate.settled", has_text="first.txt").locator("button.dismiss").click()
    assert page.locator(".gate.settled").count() == 1


def test_a_simulated_call_and_the_delivery_it_caused_carry_the_run_id(
    served: str, page: Any, tmp_path: Path
) -> None:
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    CLIENT.post(f"{served}/hooks/other", json=payload(run_id="ar_elsewhere"))
    page.goto(f"{served}/#/deliveries")
    page.locator("tr.delivery.sim").first.wait_for()
    page.wait_for_selector("tr.delivery.serve[data-run='ar_elsewhere']")
    simulated = page.locator(f"tr.delivery.sim[data-run='{run_id}']")
    caused = page.locator(f"tr.delivery.serve[data-run='{run_id}']")
    # Two turn starts and two tool calls went to belt serve; the gate's row is the run's own.
    assert (simulated.count(), caused.count()) == (5, 4)
    assert "simulated" in simulated.first.inner_text() and run_id in simulated.first.inner_text()
    assert "belt serve" in caused.first.inner_text() and run_id in caused.first.inner_text()
    # A delivery from elsewhere says so: its own run id, no simulated twin.
    assert page.locator("tr.delivery.sim[data-run='ar_elsewhere']").count() == 0


def test_a_server_that_is_gone_is_named_not_failed_to_fetch(page: Any, store: Store) -> None:
    with running(create_app(store=store, sweep_interval=0)) as url:
        page.goto(f"{url}/#/deliveries")
        page.wait_for_selector("#live.on")
    page.evaluate("() => { location.hash = '#/runs'; }")
    alert = page.locator("main .error[role=alert]")
    alert.wait_for()
    text = alert.inner_text()
    assert text.startswith("belt serve is not reachable")
    assert "Failed to fetch" not in text.splitlines()[0]


OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll("body *")].filter((node) => {
    const box = node.getBoundingClientRect();
    return box.width > 0 && (box.right > width + 1 || box.left < -1);
  }).map((node) => `${node.tagName}.${node.className}: ${(node.textContent || "").slice(0, 40)}`);
  return { scroll: document.documentElement.scrollWidth, width, wide };
}"""


def fits(page: Any) -> None:
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["width"], found
    assert found["wide"] == [], found


def reachable(page: Any, locator: Any) -> None:
    """The control is on the screen's width and takes a click."""
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= NARROW["width"], box


def test_the_page_is_usable_480_px_wide(served: str, page: Any, tmp_path: Path) -> None:
    page.set_viewport_size(NARROW)
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    page.goto(f"{served}/#/deliveries")
    page.locator("tr.delivery").first.wait_for()
    fits(page)
    for nav in ("#nav-deliveries", "#nav-runs", "#nav-gates"):
        reachable(page, page.locator(nav))
    reachable(page, page.locator("button", has_text="Replay all that match"))
    page.locator("tr.delivery.sim").first.click()
    page.wait_for_selector("pre.json")
    fits(page)
    reachable(page, page.locator("button.primary", has_text="Replay"))
    page.locator("button.primary", has_text="Replay").click()
    page.wait_for_selector("table.diff")
    fits(page)
    page.goto(f"{served}/#/runs")
    page.locator("table.list tbody tr").first.wait_for()
    fits(page)
    page.goto(f"{served}/#/run/{run_id}")
    page.wait_for_selector("ol.timeline")
    fits(page)
    page.goto(f"{served}/#/gates")
    card = page.locator(".gate", has_text="delete_file")
    card.wait_for()
    fits(page)
    reachable(page, card.locator("button.allow"))
    reachable(page, card.locator("button.deny"))
    card.locator("button.allow").click()
    page.locator(".gate.settled .outcome").wait_for()
    fits(page)


def test_a_refresh_that_cannot_be_made_is_shown_not_thrown(
    served: str, page: Any, tmp_path: Path
) -> None:
    """A change that arrives as the server goes away: the refresh it asks for fails, and the
    view says so, where an error thrown from the refresh went uncaught (and the page's next
    change could not be shown either)."""
    page.goto(f"{served}/#/runs")
    page.wait_for_selector("#live.on")
    page.route("**/inspector/runs*", lambda route: route.abort())
    run_scenario(scenario=gated_scenario(tmp_path, served))
    alert = page.locator("main .error[role=alert]")
    alert.wait_for()
    assert alert.inner_text().startswith("belt serve is not reachable")
