"""The guard of `belt serve` against a real headless Chromium: a page of a second origin, and a
page whose name is rebound to 127.0.0.1, try what issue 21 found open; nothing happens.

What is asserted is the server's state (the gate still pending, the profile unchanged, no chat
begun, no code imported), after the server has refused every request the page made.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from belt.records.interrupts import create_interrupt, get_interrupt
from belt.records.profile import PROFILE_PATH, read_profile
from belt.server.app import create_app
from belt.store import Store
from tests.browser import chromium, missing
from tests.foreign import FOREIGN
from tests.loopback import CLIENT
from tests.servers import running
from tests.test_server_guard import MARKER_MODULE, agent_run, refusals
from tests.waiting import eventually

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

ATTACK = """<!doctype html><title>a page of another site</title><script>
const target = %(target)s, gate = %(gate)s, chat = %(chat)s;
const run = %(run)s;
const resolve = target + "/interrupts/" + gate + "/resolve";
navigator.sendBeacon(resolve, JSON.stringify({decision: "allow"}));
Promise.allSettled([
  fetch(resolve, {method: "POST", mode: "no-cors", body: JSON.stringify({decision: "allow"})}),
  fetch(target + "/agents/run", {method: "POST", mode: "no-cors", body: JSON.stringify(run)}),
  fetch(target + "/agents/run", {
    method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(run),
  }),
  fetch(target + %(profile)s, {
    method: "PUT", headers: {"content-type": "application/json"}, body: "{}",
  }),
  fetch(target + "/chats/" + chat + "/stop", {method: "POST", mode: "no-cors"}),
  fetch(target + "/chats/" + chat).then(reply => reply.text()),
]).then(results => { document.title = "done " + results.map(r => r.status).join(" "); });
</script>"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module, in which FOREIGN names this machine: the page of a second
    origin is on 127.0.0.1 and unaffected; the rebound page is on FOREIGN."""
    with chromium(flags=[f"--host-resolver-rules=MAP {FOREIGN} 127.0.0.1"]) as context:
        yield context


@pytest.fixture
def guarded(store: Store) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    reported: list[dict[str, Any]] = []
    with running(create_app(store=store, sweep_interval=0, report=reported.append)) as url:
        yield url, reported


def test_a_page_of_a_second_origin_changes_nothing(
    guarded: tuple[str, list[dict[str, Any]]], store: Store, tmp_path: Path, page: Any
) -> None:
    url, reported = guarded
    module = tmp_path / "marker_hook.py"
    module.write_text(MARKER_MODULE)
    hooks = [{"event": "agent.start", "type": "webhook", "handler": f"py:{module}:decide"}]
    gate = create_interrupt(store=store, run_id="ar_page", chat_id="ch_page", event="agent.start")
    mine = CLIENT.post(f"{url}/agents/run", json=agent_run(), timeout=30)
    chat_id = mine.json()["data"]["assistant_message"]["chat_id"]
    page_html = ATTACK % {
        "target": json.dumps(url),
        "gate": json.dumps(gate["id"]),
        "chat": json.dumps(chat_id),
        "run": json.dumps(agent_run(hooks)),
        "profile": json.dumps(PROFILE_PATH),
    }

    async def attack(request: Any) -> HTMLResponse:
        return HTMLResponse(page_html)

    expected = Counter(
        [
            f"POST /interrupts/{gate['id']}/resolve",  # the beacon
            f"POST /interrupts/{gate['id']}/resolve",
            "POST /agents/run",
            "OPTIONS /agents/run",  # the preflight of a JSON post: refused, so never sent
            f"OPTIONS {PROFILE_PATH}",
            f"POST /chats/{chat_id}/stop",
            f"GET /chats/{chat_id}",
        ]
    )
    other_site = Starlette(routes=[Route("/", attack)])
    with running(other_site) as elsewhere:
        page.goto(elsewhere + "/")
        page.wait_for_function("document.title.startsWith('done')")

        def all_refused() -> bool:
            seen = Counter(line["target"] for line in refusals(reported))
            return not expected - seen

        eventually(all_refused, "every request of the page was refused")
    assert {line["status"] for line in refusals(reported)} == {403}
    assert get_interrupt(store=store, interrupt_id=gate["id"])["status"] == "pending"
    assert read_profile(store)["revision"] == 0
    assert len(store.list_ids("sim")) == 1
    assert not (tmp_path / "MARKER").exists()


def test_a_page_rebound_to_loopback_reads_and_resolves_nothing(
    guarded: tuple[str, list[dict[str, Any]]], store: Store, page: Any
) -> None:
    url, reported = guarded
    port = httpx.URL(url).port
    gate = create_interrupt(store=store, run_id="ar_bind", chat_id="ch_bind", event="agent.start")
    mine = CLIENT.post(f"{url}/agents/run", json=agent_run(), timeout=30)
    chat_id = mine.json()["data"]["assistant_message"]["chat_id"]
    # The page's name now points at this machine: its requests are same-origin to it.
    shell = page.goto(f"http://{FOREIGN}:{port}/")
    assert shell is not None and shell.status == 403
    assert "loopback" in page.content()
    read = page.evaluate(
        "async chat => { const r = await fetch('/chats/' + chat);"
        " return [r.status, await r.text()]; }",
        chat_id,
    )
    assert read[0] == 403 and chat_id not in read[1]
    resolved = page.evaluate(
        "async gate => (await fetch('/interrupts/' + gate + '/resolve', {method: 'POST',"
        " headers: {'content-type': 'application/json'},"
        " body: JSON.stringify({decision: 'allow'})})).status",
        gate["id"],
    )
    assert resolved == 403
    # (Chromium may also ask for a favicon; it is refused too.)
    targets = [line["target"] for line in refusals(reported) if "favicon" not in line["target"]]
    assert targets == ["GET /", f"GET /chats/{chat_id}", f"POST /interrupts/{gate['id']}/resolve"]
    assert get_interrupt(store=store, interrupt_id=gate["id"])["status"] == "pending"
