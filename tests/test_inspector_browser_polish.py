"""The inspector page at desktop widths, in a real headless Chromium: a list's times stay on one
line however crowded the table, and a gate keeps its title once it is resolved."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from belt.engine.entrypoints import run_scenario
from belt.records.interrupts import Settlement
from belt.store import Store
from tests.browser import chromium, missing
from tests.loopback import CLIENT
from tests.test_inspector import gated_scenario, payload

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

# Tool names long enough to crowd the deliveries table: the columns share what is left.
CROWDING = [
    "summarise the quarterly report and send it to the finance team before the end of the day",
    "mcp__filesystem__move_file_to_the_archive_directory_after_review",
]

# How many lines each cell a selector finds (in a row holding a text) takes: the height of its
# text (a Range over the cell's contents, which is the same however the cell is built) in lines
# of the cell's line height. The cells are found and measured in one evaluation: the page
# replaces a list's rows when it refreshes, and a row found in one round trip may be gone by the
# next (a cell out of the document has no line height, so it would read NaN).
LINES = """([selector, text]) => [...document.querySelectorAll(selector)]
  .filter((cell) => cell.closest("tr").textContent.includes(text))
  .map((cell) => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  const height = range.getBoundingClientRect().height;
  return height / parseFloat(getComputedStyle(cell).lineHeight);
})"""


def lines(page: Any, selector: str, text: str = "") -> list[float]:
    """How many lines the text of each cell ``selector`` finds in a row holding ``text`` takes
    (see ``LINES``)."""
    return list(page.evaluate(LINES, [selector, text]))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The module's Chromium in US English, whose times read "10:32:26 AM" (two words, so a
    narrow column could break them), on UTC."""
    with chromium(locale="en-US", timezone_id="UTC") as context:
        yield context


def crowded(served: str, tmp_path: Path) -> None:
    """Deliveries of every kind in the served journal: simulated and served calls of a gated
    run, and calls with long tool names."""
    run_scenario(scenario=gated_scenario(tmp_path, served))
    for tool in CROWDING:
        CLIENT.post(f"{served}/hooks/guard", json=payload(tool=tool))


@pytest.mark.parametrize("width", [1024, 1400, 1920])
def test_the_times_of_a_crowded_list_take_one_line(
    served: str, page: Any, tmp_path: Path, width: int
) -> None:
    crowded(served, tmp_path)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{served}/#/deliveries")
    page.locator("tr.delivery", has_text=CROWDING[0]).wait_for()
    cells = page.locator("tr.delivery td:first-child")
    assert cells.count() >= 10
    assert all(text.endswith(("AM", "PM")) for text in cells.all_inner_texts())
    times = lines(page, "tr.delivery td:first-child")
    assert len(times) >= 10
    assert all(n < 1.5 for n in times), f"a time wraps at {width} px: {times} lines"
    if width <= 1400:  # the crowding is real: the long tool name takes lines of its own
        tool = lines(page, "tr.delivery td.tool", CROWDING[0])
        assert tool and tool[0] >= 2
    page.goto(f"{served}/#/runs")
    page.locator("table.list tbody tr td:first-child").first.wait_for()
    started = lines(page, "table.list tbody tr td:first-child")
    assert started and all(n < 1.5 for n in started)


def head(card: Any) -> tuple[str, str]:
    """A gate card's title (its event) and the whole line it heads."""
    return card.locator(".gate-head strong").inner_text(), card.locator(".gate-head").inner_text()


TITLE = 'agent.tool_call delete_file({"path":"/tmp/old.txt"})'
ANA: Settlement = {"how": "person", "user": "ana", "door": "cli"}


def test_a_gate_keeps_its_title_once_allowed(served: str, page: Any, tmp_path: Path) -> None:
    run_scenario(scenario=gated_scenario(tmp_path, served))
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{served}/#/gates")
    card = page.locator(".gate", has_text="/tmp/old.txt")
    card.locator("button.allow").wait_for()
    event, line = head(card)
    assert event == "agent.tool_call"
    assert line.startswith(TITLE), line
    loads = int(page.locator(".gate-list").get_attribute("data-loads") or 0)
    card.locator("button.allow").click()
    settled = page.locator(".gate.settled", has_text="/tmp/old.txt")
    settled.locator(".outcome").wait_for()
    assert head(settled)[0] == event
    assert head(settled)[1].startswith(TITLE + " resolved allow"), head(settled)[1]
    # Read again when the store changes, the kept card still has the same title.
    page.wait_for_function(
        f"() => Number(document.querySelector('.gate-list').dataset.loads) > {loads}"
    )
    assert head(page.locator(".gate.settled", has_text="/tmp/old.txt"))[0] == event


def test_a_gate_settled_elsewhere_first_keeps_its_title(
    served: str, page: Any, tmp_path: Path, store: Store
) -> None:
    from belt.records.interrupts import resolve_interrupt

    run_scenario(scenario=gated_scenario(tmp_path, served))
    page.goto(f"{served}/#/gates")
    card = page.locator(".gate", has_text="/tmp/old.txt")
    card.locator("button.deny").wait_for()
    assert head(card)[1].startswith(TITLE)
    gate_id = str(card.get_attribute("data-id"))

    def resolved_elsewhere_first(route: Any) -> None:
        resolve_interrupt(store=store, interrupt_id=gate_id, decision="allow", by=ANA)
        route.continue_()

    page.route("**/gates/*/resolve", resolved_elsewhere_first)
    card.locator("button.deny").click()
    settled = page.locator(".gate.settled", has_text="/tmp/old.txt")
    settled.locator(".conflict").wait_for()
    assert head(settled)[0] == "agent.tool_call"
    assert head(settled)[1].startswith(TITLE + " resolved allow by ana via the CLI"), head(settled)[
        1
    ]


SELECT_TOOL = """(tool) => {
  const cells = [...document.querySelectorAll("tr.delivery td.tool")];
  const cell = cells.find((c) => c.textContent === tool);
  cell.closest("tr").dataset.marked = "before the refresh";
  const range = document.createRange();
  range.selectNodeContents(cell);
  getSelection().removeAllRanges();
  getSelection().addRange(range);
}"""


def test_a_refresh_keeps_the_rows_that_did_not_change_and_a_selection_in_them(
    served: str, page: Any
) -> None:
    # A person selects text in a row, to copy it; a new delivery refreshes the list meanwhile.
    CLIENT.post(f"{served}/hooks/guard", json=payload(tool="copy_me"))
    page.goto(f"{served}/#/deliveries")
    page.locator("tr.delivery", has_text="copy_me").wait_for()
    page.evaluate(SELECT_TOOL, "copy_me")
    CLIENT.post(f"{served}/hooks/guard", json=payload(tool="arrived_later"))
    page.locator("tr.delivery", has_text="arrived_later").wait_for()
    # The row is the same element (not one built again), and the selection is still there.
    assert page.locator("tr.delivery[data-marked]", has_text="copy_me").count() == 1
    assert page.evaluate("() => getSelection().toString()") == "copy_me"
    rows = page.locator("tr.delivery td.tool").all_inner_texts()
    assert rows.index("arrived_later") < rows.index("copy_me")  # the newest first, as before


TYPE_DATA = """(selector) => {
  const card = document.querySelector(selector);
  card.dataset.marked = "before the refresh";
  const data = card.querySelector("textarea[name=data]");
  data.focus();
  data.value = '{"by": "m';
  data.setSelectionRange(4, 6);
}"""

TYPED = """(selector) => {
  const card = document.querySelector(`${selector}[data-marked]`);
  const data = card && card.querySelector("textarea[name=data]");
  const focused = document.activeElement === data;
  return data && [data.value, focused, data.selectionStart, data.selectionEnd];
}"""


def typing_in_a_gate_survives_a_refresh(page: Any, card: Any, where: str, again: Any) -> str:
    """A person opens a gate card's "Allow with data…" in ``where`` (a selector of the list or
    view) and types; a refresh of the list (``again`` opens another gate) keeps what they typed,
    where the cursor was, and the card itself (whose selector is returned)."""
    card.get_by_role("button", name="Allow with data…").click()
    selector = f'.gate[data-id="{card.get_attribute("data-id")}"]'
    page.evaluate(TYPE_DATA, selector)
    loads = int(page.locator(where).get_attribute("data-loads") or 0)
    again()
    page.wait_for_function(
        f"() => Number(document.querySelector('{where}').dataset.loads) > {loads}"
    )
    assert page.evaluate(TYPED, selector) == ['{"by": "m', True, 4, 6]
    return selector


def test_a_gates_refresh_keeps_what_a_person_typed_in_a_card(
    served: str, page: Any, tmp_path: Path
) -> None:
    run_scenario(scenario=gated_scenario(tmp_path, served))
    page.goto(f"{served}/#/gates")
    card = page.locator(".gate", has_text="/tmp/old.txt")
    card.locator("button.allow").wait_for()
    selector = typing_in_a_gate_survives_a_refresh(
        page, card, ".gate-list", lambda: run_scenario(scenario=gated_scenario(tmp_path, served))
    )
    page.locator(".gate.pending").nth(1).wait_for()  # the new gate, listed beside it
    assert page.evaluate(TYPED, selector) == ['{"by": "m', True, 4, 6]
    clock = page.locator(".gate[data-marked] .clock")
    shown = clock.inner_text()
    assert shown.endswith(", then allow"), shown
    page.wait_for_function(  # it still ticks
        "(shown) => document.querySelector('.gate[data-marked] .clock').textContent !== shown",
        arg=shown,
    )


def test_a_runs_refresh_keeps_a_gate_card_and_its_typing_and_the_rows_that_did_not_change(
    served: str, page: Any, tmp_path: Path
) -> None:
    report, _ = run_scenario(scenario=gated_scenario(tmp_path, served))
    run_id = report["runs"][0]["id"]
    page.goto(f"{served}/#/runs")
    row = page.locator(f'tr[data-id="{run_id}"]')
    row.wait_for()
    row.evaluate("(row) => { row.dataset.marked = 'before the refresh'; }")
    listed = page.locator("table.list tbody tr").count()
    run_scenario(scenario=gated_scenario(tmp_path, served))
    page.locator("table.list tbody tr").nth(listed).wait_for()
    assert page.locator(f'tr[data-id="{run_id}"][data-marked]').count() == 1
    page.goto(f"{served}/#/run/{run_id}")
    card = page.locator(".run-view .gate")
    card.locator("button.allow").wait_for()
    typing_in_a_gate_survives_a_refresh(
        page, card, ".run-view", lambda: run_scenario(scenario=gated_scenario(tmp_path, served))
    )
