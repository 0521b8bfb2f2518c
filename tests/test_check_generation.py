"""``belt check`` generates what the platform sends, then (with ``--beyond-spec``) what it might
not; paths are attacked early; ``--save`` writes scenarios that ``belt test`` runs and that fail
for the reason the check failed."""

from __future__ import annotations

import functools
import json
import posixpath
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from belt.check import generate
from belt.check.props import read_props
from belt.check.report import CheckReport, CheckResult, Failure
from belt.check.run import EXAMPLES_DEFAULT, Explorer
from belt.check.save import SAVED_EVENTS, scenario
from belt.check.subjects import PLATFORM_EVENTS, Subject
from belt.wire.catalogue import EVENTS
from belt.wire.platform import LifecycleHookPayload
from tests.cli.runner import belt

ROOT = Path(__file__).parent.parent
PROPS = ROOT / "examples" / "props.toml"
FEW = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
QUIET = settings(max_examples=150, database=None, deadline=None)
FOUND = settings(
    QUIET, max_examples=2000, derandomize=True, phases=[Phase.explicit, Phase.generate]
)
"""For a test that asks only whether an example exists: the first found, not shrunk (shrinking a
payload costs ten times finding it), from a fixed seed and with room to look (the search ends at
the first found), so that a rare value is found on every run or on none. Unshrunk, it may be
large, and Hypothesis warns of the cost of its repr: `UNSHRUNK` lets that warning be."""
UNSHRUNK = pytest.mark.filterwarnings("ignore:Generating overly large repr")
TYPES: dict[str, type] = {"string": str, "object": dict}

STARTS_WITH_TMP = """
def decide(payload):
    data = payload.get("data") or {}
    if data.get("tool") == "delete_file":
        path = str((data.get("arguments") or {}).get("path", ""))
        if path.startswith("/tmp"):
            return {"decision": "allow"}
        return {"decision": "deny"}
    return None
"""
NORMALISED = """
import posixpath

def decide(payload):
    data = payload.get("data") or {}
    if data.get("tool") == "delete_file":
        path = posixpath.normpath(str((data.get("arguments") or {}).get("path", "")))
        if path.startswith(("/tmp/", "//tmp/")):
            return {"decision": "allow"}
        return {"decision": "deny"}
    return None
"""


def assert_sent_by_the_platform(payload: dict[str, Any], event: str) -> None:
    """What the spec says of a payload of ``event``, and that a saved scenario can hold it."""
    LifecycleHookPayload.model_validate(payload)
    assert payload["event"] == event
    data = payload.get("data") or {}
    for name, kind in EVENTS[event].data_fields.items():
        assert isinstance(data[name], TYPES[kind]), (name, data)
    if "tool" in data:
        assert generate.is_tool_name(data["tool"]), data["tool"]
    if event == "agent.tool_result":
        assert data["status"] == "completed"
    if event == "agent.start":
        assert payload["turn_count"] == 0
    if event not in SAVED_EVENTS:
        return
    subject = Subject(event, "py:hook.py:decide", 5.0)
    failed = CheckResult("answers", subject.label, event)
    failed.failure = Failure("the handler raised", payload, "belt trigger …")
    written = scenario(subject, failed, None, Path("saved"))
    assert isinstance(written, dict), written


# -- what the spec fixes --------------------------------------------------------------------------


# Each strategy is built once and drawn from by every example: building one anew per example
# (its validation, its cached properties) cost four times the drawing.
platform_payloads = functools.cache(generate.payloads)


@functools.cache
def steered_to_a_path(tool: str | None) -> st.SearchStrategy[dict[str, object]]:
    wanted: dict[tuple[str, ...], Any] = {("path",): "*"}
    unless: dict[tuple[str, ...], Any] = {("path",): "path:/tmp/*"}
    return generate.steered_payloads("agent.tool_call", tool, wanted, unless)


@pytest.mark.parametrize("event", PLATFORM_EVENTS)
@FEW
@given(data=st.data())
def test_every_generated_payload_is_one_the_platform_sends(event: str, data: Any) -> None:
    assert_sent_by_the_platform(data.draw(platform_payloads(event)), event)


@pytest.mark.parametrize("tool", [None, "*", "delete_*", "re:^d", "?", "rm *"])
@FEW
@given(data=st.data())
def test_payloads_steered_to_a_property_are_ones_the_platform_sends(
    tool: str | None, data: Any
) -> None:
    payload = data.draw(steered_to_a_path(tool))
    assert_sent_by_the_platform(payload, "agent.tool_call")


def test_the_attacks_sent_first_are_payloads_the_platform_sends() -> None:
    for prop in read_props(PROPS):
        explicit = generate.attack_payloads(prop.event, prop.tool, prop.arguments, prop.unless)
        assert explicit
        for payload in explicit:
            assert_sent_by_the_platform(payload, "agent.tool_call")
    for payload in generate.attack_payloads("agent.tool_call"):
        assert_sent_by_the_platform(payload, "agent.tool_call")


@pytest.mark.parametrize(
    ("event", "beyond"),
    [
        ("agent.tool_call", lambda payload: payload["data"]["tool"] == ""),
        ("agent.tool_call", lambda payload: not payload["data"]["tool"].isascii()),
        ("agent.tool_result", lambda payload: payload["data"]["tool"] == ""),
        ("agent.tool_result", lambda payload: payload["data"]["status"] != "completed"),
    ],
)
@UNSHRUNK
def test_values_beyond_the_spec_come_only_when_asked_for(
    event: str, beyond: Callable[[dict[str, Any]], bool]
) -> None:
    with pytest.raises(NoSuchExample):
        find(generate.payloads(event), beyond, settings=QUIET)
    found = find(generate.payloads(event, beyond_spec=True), beyond, settings=FOUND)
    LifecycleHookPayload.model_validate(found)


def test_a_handler_relying_on_the_spec_passes_unless_beyond_spec_is_asked_for(
    tmp_path: Path,
) -> None:
    handler = tmp_path / "strict.py"
    handler.write_text(
        textwrap.dedent(
            """
            def decide(payload):
                data = payload.get("data") or {}
                if payload["event"] == "agent.tool_result" and data["status"] != "completed":
                    raise ValueError("the spec says completed")
                if "tool" in data and not data["tool"]:
                    raise ValueError("a tool has a name")
            """
        )
    )
    command = ["check", f"py:{handler}:decide", "--event", "agent.tool_result"]
    command += ["--event", "agent.tool_call", "--seed", "4", "--examples", "60"]
    within = belt(*command)
    assert within.exit_code == 0, within.stdout
    beyond = belt(*command, "--beyond-spec")
    assert beyond.exit_code == 1, beyond.stdout
    assert "fail  answers" in beyond.stdout
    assert "ValueError" in beyond.stdout


# -- paths, attacked early ------------------------------------------------------------------------


KINDS: dict[str, Callable[[str], bool]] = {
    "..": lambda path: "/../" in path or path.endswith("/.."),
    "prefix": lambda path: path.startswith("/tmpevil/"),
    "//": lambda path: "//" in path,
    "trailing /": lambda path: path.endswith("/") and not path.endswith("//"),
    ".": lambda path: "/./" in path or path.endswith("/."),
    "case": lambda path: path.startswith(("/TMP/", "/Tmp/")),
    "look-alike": lambda path: path.startswith("/tm") and not path.isascii(),
}


def kinds_among(paths: list[Any]) -> set[str]:
    return {kind for kind, test in KINDS.items() for path in paths if test(str(path))}


def test_a_property_on_a_path_sees_every_kind_of_attack_within_its_first_50_cases() -> None:
    prop = read_props(PROPS)[0]
    strategy = generate.steered_payloads(prop.event, prop.tool, prop.arguments, prop.unless)
    explicit = generate.attack_payloads(prop.event, prop.tool, prop.arguments, prop.unless)
    for seed in (1, 2, 3):
        report = CheckReport(target="py:hook.py:decide", seed=seed, examples=EXAMPLES_DEFAULT)
        sent: list[dict[str, Any]] = []

        def case(
            payload: dict[str, Any], counting: bool, sent: list[dict[str, Any]] = sent
        ) -> list[tuple[str, str]]:
            if counting:
                sent.append(payload)
            return []

        explorer = Explorer(report, seed, EXAMPLES_DEFAULT, float("inf"))
        explorer.explore(strategy, generate.spec_sample(prop.event), case, explicit)
        assert len(sent) == 1 + EXAMPLES_DEFAULT
        first = [payload["data"]["arguments"].get("path") for payload in sent[:50]]
        assert kinds_among(first) == set(KINDS), first
        assert "/tmp/../etc/passwd" in first and "/tmpevil/x" in first


def test_a_tool_calls_path_is_attacked_within_the_first_50_cases_of_every_check(
    tmp_path: Path,
) -> None:
    handler = tmp_path / "recording.py"
    handler.write_text(
        textwrap.dedent(
            """
            import json
            from pathlib import Path

            SEEN = Path(__file__).with_name("seen.jsonl")

            def decide(payload):
                arguments = (payload.get("data") or {}).get("arguments") or {}
                with SEEN.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(arguments.get("path")) + "\\n")
            """
        )
    )
    outcome = belt(
        "check", f"py:{handler}:decide", "--event", "agent.tool_call", "--seed", "9", "--json"
    )
    assert outcome.exit_code == 0, outcome.stdout
    calls = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
    # Each case is delivered twice (the second time as a redelivery).
    cases = calls[::2]
    assert calls[1::2] == cases
    assert len(cases) == 1 + EXAMPLES_DEFAULT
    assert kinds_among(cases[:50]) == set(KINDS), cases[:50]


# Seeds 1 to 20 all find it (docs/check.md); three of them here, for the suite's time.
@pytest.mark.parametrize("seed", [1, 3, 10])
def test_a_handler_that_trusts_startswith_tmp_is_found_with_the_example_props(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """And each failure it saves (``--save``) fails ``belt test`` with the same decision until
    the handler is fixed."""
    monkeypatch.chdir(tmp_path)
    Path("hook.py").write_text(STARTS_WITH_TMP)
    checked = belt(
        "check",
        "py:hook.py:decide",
        "--event",
        "agent.tool_call",
        "--props",
        str(PROPS),
        "--seed",
        str(seed),
        "--save",
        "saved",
        "--json",
    )
    assert checked.exit_code == 1, checked.stdout
    report = checked.json()
    assert report["examples"] == EXAMPLES_DEFAULT
    failed = {c["title"]: c for c in report["checks"] if c["status"] == "fail"}
    assert set(failed) == {"no deletes outside /tmp/", "deletes under /tmp/ go through"}
    outside = failed["no deletes outside /tmp/"]["failure"]
    assert outside["detail"] == "expected deny, got allow"
    path = outside["payload"]["data"]["arguments"]["path"]
    assert path.startswith("/tmp") and not posixpath.normpath(path).startswith("/tmp/")

    # --save, then belt test.
    assert {c["check"] for c in failed.values()} == {"property"}
    saved = sorted(Path("saved").iterdir())
    assert sorted(Path(c["saved"]) for c in failed.values()) == saved
    for check in failed.values():
        document = json.loads(Path(check["saved"]).read_text(encoding="utf-8"))
        # The handler is named relative to the saved scenario, as a scenario's paths are read.
        assert document["agent"]["hooks"][0]["handler"] == "py:../hook.py:decide"

    tested = belt("test", "saved", "--json")
    assert tested.exit_code == 1, tested.stdout
    results = {Path(r["scenario"]).name: r for r in map(json.loads, tested.stdout.splitlines())}
    assert len(results) == len(failed)
    for check in failed.values():
        result = results[Path(check["saved"]).name]
        assert result["status"] == "fail" and not result["invalid"]
        (broken,) = result["failures"]
        # "expected deny, got allow": the same expectation, and the same wrong decision.
        wanted, got = check["failure"]["detail"].removeprefix("expected ").split(", got ")
        assert broken["expectation"]["decision"] == wanted
        path = check["failure"]["payload"]["data"]["arguments"]["path"]
        assert (
            f"{got} on delete_file({json.dumps({'path': path}, ensure_ascii=False)})"
            in broken["found"]
        )

    Path("hook.py").write_text(NORMALISED)
    fixed = belt("test", "saved")
    assert fixed.exit_code == 0, fixed.stdout
    assert fixed.stdout.splitlines()[-1].startswith(
        f"{len(failed)} scenario(s): {len(failed)} passed"
    )


# -- --save, then belt test -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "field"), [("agent.tool_result", "result"), ("agent.error", "error")]
)
def test_a_failure_on_a_tool_result_or_an_error_is_saved_and_fails_belt_test(
    event: str, field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("hook.py").write_text(
        textwrap.dedent(
            f"""
            def decide(payload):
                text = (payload.get("data") or {{}}).get("{field}") or ""
                if len(text) > 3:
                    raise ValueError("too long: " + text[:10])
            """
        )
    )
    checked = belt(
        "check", "py:hook.py:decide", "--event", event, "--seed", "2", "--save", "saved", "--json"
    )
    assert checked.exit_code == 1, checked.stdout
    answers = next(c for c in checked.json()["checks"] if c["check"] == "answers")
    assert answers["status"] == "fail"
    document = json.loads(Path(answers["saved"]).read_text(encoding="utf-8"))
    assert document["agent"]["hooks"][0]["event"] == event
    tested = belt("test", "saved")
    assert tested.exit_code == 1, tested.stdout
    assert "ValueError" in tested.stdout and "too long" in tested.stdout

    Path("hook.py").write_text("def decide(payload):\n    return None\n")
    assert belt("test", "saved").exit_code == 0


def test_a_failure_a_scenario_cannot_hold_is_not_saved_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("hook.py").write_text(
        "def decide(payload):\n"
        "    if (payload.get('data') or {}).get('tool') == '':\n"
        "        raise ValueError('no name')\n"
    )
    command = ["check", "py:hook.py:decide", "--event", "agent.tool_call", "--seed", "1"]
    checked = belt(*command, "--beyond-spec", "--save", "saved")
    assert checked.exit_code == 1, checked.stdout
    assert "not saved: a scenario cannot hold this payload" in checked.stdout
    assert "at least 1 character" in checked.stdout
    assert not Path("saved").exists()
    document = belt(*command, "--beyond-spec", "--save", "saved", "--json").json()
    answers = next(c for c in document["checks"] if c["check"] == "answers")
    assert answers["failure"]["payload"]["data"]["tool"] == ""
    assert "saved" not in answers and "cannot hold" in answers["not_saved"]
