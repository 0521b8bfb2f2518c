"""The inspector page driven in a real headless Chromium: live deliveries, detail, an edited
replay, a gate allowed from the page, and hostile text shown as text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import run_scenario
from belt.server.app import create_app
from belt.store import Store
from tests.browser import missing
from tests.hookapp import hook_app
from tests.loopback import CLIENT
from tests.servers import running
from tests.test_inspector import eventually, gated_scenario, payload

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

XSS = "<img src=x onerror=alert(1)>"


def test_a_delivery_appears_live_and_its_detail_shows_the_body(served: str, page: Any) -> None:
    page.goto(f"{served}/#/deliveries")
    page.wait_for_selector("#live.on")
    assert page.locator("tr.delivery").count() == 0
    sent = payload(tool="live_tool", path="/var/lib/live.db")
    CLIENT.post(f"{served}/hooks/guard", json=sent)
    row = page.locator("tr.delivery", has_text="live_tool")
    row.wait_for(timeout=10_000)  # no reload: the stream said the journal grew
    assert "allow" in row.inner_text()
    assert page.locator(".count-line").inner_text().startswith("1 shown of 1 matching")
    row.click()
    page.wait_for_selector("pre.json")
    request_body = page.locator("pre.json").first.inner_text()
    assert json.loads(request_body) == sent
    assert "/hooks/guard" in page.locator("main").inner_text()


def test_an_edited_replay_sends_the_edited_body_and_shows_the_diff(served: str, page: Any) -> None:
    CLIENT.post(f"{served}/hooks/guard", json=payload())
    (delivery,) = CLIENT.get(f"{served}/inspector/deliveries").json()["data"]["items"]
    with hook_app(lambda name, got: {"decision": "allow", "reason": "fine now"}) as hooks:
        page.goto(f"{served}/#/delivery/{delivery['id']}")
        page.select_option("select[name=target]", "url")
        page.fill("input[name=target-value]", hooks.url + "/edited")
        page.check("input[name=edit]")
        edited = payload(path="/tmp/edited-in-the-page")
        page.fill("textarea[name=payload]", "{not json")
        assert page.locator("button.primary", has_text="Replay").is_disabled()
        page.fill("textarea[name=payload]", json.dumps(edited, indent=1))
        page.click("button.primary:has-text('Replay')")
        page.wait_for_selector("table.diff")
        assert hooks.received == [("edited", edited)]
    diff = page.locator("table.diff").inner_text()
    assert "deny" in diff and "allow" in diff and "fine now" in diff
    assert page.locator("table.diff tr.changed", has_text="decision").count() == 1
    assert "Changed: decision" in page.locator(".replay-result").inner_text()


def test_a_gate_is_allowed_from_the_page_and_the_run_goes_on(
    served: str, page: Any, tmp_path: Path
) -> None:
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    page.goto(f"{served}/#/gates")
    card = page.locator(".gate", has_text="delete_file")
    card.wait_for()
    assert "/tmp/old.txt" in card.inner_text()
    assert "then allow" in card.inner_text()
    card.locator("button.allow").click()
    page.wait_for_selector(f".gate.settled .outcome:text('The run {run_id} resumes: ')")

    def completed() -> bool:
        run = CLIENT.get(f"{served}/inspector/runs/{run_id}").json()["data"]["run"]
        return bool(run["state"] == "completed")

    eventually(completed, "the run completed after the page allowed its gate")
    page.goto(f"{served}/#/run/{run_id}")
    page.wait_for_selector("h2 .state.completed")
    assert "deleted /tmp/old.txt" in page.locator("ol.timeline").inner_text()
    assert "none failed" in page.locator(".hook-summary").inner_text()
    assert "allow" in page.locator(".gate").inner_text()


def test_a_second_resolve_in_the_page_says_already_resolved_by_whom(
    served: str, page: Any, tmp_path: Path, store: Store
) -> None:
    from belt.records.interrupts import resolve_interrupt

    run_scenario(scenario=gated_scenario(tmp_path, served))
    page.goto(f"{served}/#/gates")
    card = page.locator(".gate", has_text="delete_file")
    card.wait_for()
    gate_id = card.get_attribute("data-id")

    def resolved_elsewhere_first(route: Any) -> None:
        # Someone else settles the gate between the click and the request reaching the server
        # (resolved before the click, the page's own refresh may take the card away first).
        resolve_interrupt(
            store=store,
            interrupt_id=str(gate_id),
            decision="deny",
            by={"how": "person", "user": "ana", "door": "cli"},
        )
        route.continue_()

    page.route("**/gates/*/resolve", resolved_elsewhere_first)
    card.locator("button.allow").click()
    conflict = page.locator(".conflict")
    conflict.wait_for()
    assert "Already resolved (deny) by ana via the CLI" in conflict.inner_text()
    assert page.locator(".error").count() == 0


def test_a_tool_name_with_html_is_shown_as_text(served: str, page: Any) -> None:
    CLIENT.post(f"{served}/hooks/guard", json=payload(tool=XSS, path=XSS))
    page.goto(f"{served}/#/deliveries")
    row = page.locator("tr.delivery").first
    row.wait_for()
    assert XSS in row.inner_text()
    row.click()
    page.wait_for_selector("pre.json")
    assert XSS in page.locator("h2").inner_text()
    # The view is rendered: had the name been parsed as HTML, its <img> would be in the DOM now
    # (an element exists before its onerror can run); none is, so no handler can ever run.
    assert page.locator("main img").count() == 0
    # The dialog listener is live (the canary reaches it) and nothing reached it before.
    page.evaluate("() => alert('canary')")
    assert page.dialogs == ["canary"]


def test_a_token_in_the_fragment_opens_a_protected_server(page: Any, store: Store) -> None:
    with running(create_app(store=store, token="tok-page-1", sweep_interval=0)) as url:
        CLIENT.post(f"{url}/hooks", json=payload(), headers={"authorization": "Bearer tok-page-1"})
        page.goto(f"{url}/#token=tok-page-1")
        page.locator("tr.delivery").first.wait_for()
        assert "tok-page-1" not in page.url
        other = page.context.new_page()
        other.goto(f"{url}/#/deliveries")
        other.wait_for_selector("#token-form:not([hidden])")
        other.fill("#token-input", "tok-page-1")
        other.click("#token-form button")
        other.locator("tr.delivery").first.wait_for()
        other.close()


def test_a_whole_run_is_replayed_from_its_page(served: str, page: Any, tmp_path: Path) -> None:
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    page.goto(f"{served}/#/run/{run_id}")
    page.click("button:has-text('Replay this run')")
    page.click(".batch button.primary")
    summary = page.locator(".batch .summary")
    summary.wait_for()
    assert "replayed to its own handler: 0 changed" in summary.inner_text()
    webhooks = [e for e in report["hook_executions"] if e["handler_type"] == "webhook"]
    assert page.locator(".batch tbody tr").count() == len(webhooks) == 4
