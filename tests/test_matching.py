"""belt.reading.matching: the patterns policies, `belt check` properties and expectations share;
here chiefly ``path:<glob>``, which matches a value once it is normalised as a POSIX path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from belt.check.props import read_props
from belt.engine.scenario import scenario_from_document
from belt.errors import InvalidInput
from belt.reading.matching import Matcher, normal_path, value_matcher
from belt.testing.suite import run_loaded
from belt.wire.validate import Findings

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"


def matcher(pattern: Any) -> Matcher:
    findings = Findings()
    compiled = value_matcher(pattern, "arguments.path", findings)
    assert findings.problems == []
    assert compiled is not None
    return compiled


def refusal(pattern: Any) -> str:
    findings = Findings()
    assert value_matcher(pattern, "rules[0].arguments.path", findings) is None
    [problem] = findings.problems
    return problem


def reference_normal(value: str) -> str:
    """The normal form spelled out segment by segment, to hold ``normal_path`` to."""
    absolute = value.startswith("/")
    kept: list[str] = []
    for segment in value.split("/"):
        if segment in ("", "."):
            continue
        if segment != "..":
            kept.append(segment)
        elif kept and kept[-1] != "..":
            kept.pop()
        elif not absolute:
            kept.append(segment)
    joined = "/".join(kept)
    return "/" + joined if absolute else joined or "."


# -- what path:/tmp/* matches ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "matches"),
    [
        ("/tmp/old.txt", True),
        ("/tmp//old.txt", True),
        ("/tmp/./old.txt", True),
        ("/tmp/a/../old.txt", True),
        ("/tmp/sub/dir/old.txt", True),  # * crosses /, as in every glob
        ("//tmp/old.txt", True),  # a leading // is / (Linux, macOS)
        ("/tmp/old.txt/", True),
        ("/tmp/../etc/passwd", False),
        ("/tmp/a/../../etc/passwd", False),
        ("/tmpevil/x", False),
        ("/tmp", False),
        ("/tmp/", False),
        ("/tmp/.", False),
        ("/tmp/a/..", False),
        ("tmp/old.txt", False),
        ("/TMP/old.txt", False),
        ("", False),
    ],
)
def test_a_path_pattern_matches_the_normal_form_of_the_value(value: str, matches: bool) -> None:
    assert matcher("path:/tmp/*")(value) is matches


def test_a_plain_glob_matches_the_value_as_written() -> None:
    # What path: is for: the glob alone lets a .. climb out of the directory it names.
    assert matcher("/tmp/*")("/tmp/../etc/passwd") is True
    assert matcher("path:/tmp/*")("/tmp/../etc/passwd") is False
    assert matcher("path:/etc/*")("/tmp/../etc/passwd") is True
    assert matcher("path:/etc/passwd")("//etc//./passwd") is True


@pytest.mark.parametrize("value", [None, 1, 1.5, True, ["/tmp/x"], {"path": "/tmp/x"}])
def test_a_path_pattern_never_matches_a_value_that_is_not_a_string(value: Any) -> None:
    assert matcher("path:*")(value) is False


def test_relative_patterns_match_relative_paths() -> None:
    assert matcher("path:*.txt")("a/../b.txt") is True
    assert matcher("path:../*")("a/../../b") is True
    assert matcher("path:.")("a/..") is True
    assert matcher("path:/")("/..") is True


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("path:", "empty path pattern"),
        ("path:/tmp/", "write path:/tmp"),
        ("path://tmp/*", "write path:/tmp/*"),
        ("path:/tmp/./*", "write path:/tmp/*"),
        ("path:/tmp/../*", "write path:/*"),
        ("path:./x", "write path:x"),
        ("path:re:^/tmp/", "a path pattern is a glob, not a regex"),
    ],
)
def test_a_path_pattern_not_in_normal_form_is_refused_by_its_path(pattern: str, says: str) -> None:
    problem = refusal(pattern)
    assert problem.startswith("rules[0].arguments.path: ")
    assert says in problem


def test_the_error_for_a_pattern_of_no_kind_names_path_patterns() -> None:
    assert "a path:<glob>" in refusal({"a": 1})


# -- properties of the normal form and the matcher ------------------------------------------------

SEGMENTS = st.sampled_from(["", ".", "..", "tmp", "etc", "passwd", "a", "tmpevil", "é", "*"])
BUILT = st.lists(SEGMENTS, max_size=12).map("/".join)
"""Paths made of the segments that change a normal form: empty (//), ., .. and names."""


@given(st.one_of(BUILT, st.text()))
@example("//")
@example("///tmp")
@example("a\x00b/../c")
def test_the_normal_form_resolves_each_segment_lexically(value: str) -> None:
    normal = normal_path(value)
    assert normal == reference_normal(value)
    assert normal_path(normal) == normal
    assert "//" not in normal
    assert normal == "/" or not normal.endswith("/")
    segments = normal.split("/")
    assert "." not in segments or normal == "."
    if normal.startswith("/"):
        assert ".." not in segments


@given(st.lists(SEGMENTS, max_size=12))
def test_a_path_built_from_segments_matches_iff_its_normal_form_does(segments: list[str]) -> None:
    value = "/tmp/" + "/".join(segments)
    under = reference_normal(value).startswith("/tmp/")
    assert matcher("path:/tmp/*")(value) is under
    assert matcher("path:/tmp/*")(reference_normal(value)) is under


@given(st.text(), st.sampled_from(["path:/tmp/*", "path:*", "path:/", "path:a/?/[!x]*"]))
def test_a_path_pattern_never_raises_and_depends_only_on_the_normal_form(
    value: str, pattern: str
) -> None:
    compiled = matcher(pattern)
    assert compiled(value) is compiled(normal_path(value))


@given(st.text())
def test_any_text_after_path_is_a_pattern_or_a_refusal(source: str) -> None:
    findings = Findings()
    compiled = value_matcher("path:" + source, "p", findings)
    assert (compiled is None) is (findings.problems != [])
    if compiled is not None and not set("*?[") & set(source):
        assert compiled(source) is True  # a pattern in normal form matches itself


# -- where the patterns are used: properties and expectations -------------------------------------


def delete(path: str) -> dict[str, Any]:
    return {
        "event": "agent.tool_call",
        "data": {"tool": "delete_file", "arguments": {"path": path}},
    }


def test_the_example_properties_ask_a_deny_for_paths_that_leave_tmp() -> None:
    by_name = {prop.name: prop for prop in read_props(EXAMPLES / "props.toml")}
    outside, inside = by_name["no deletes outside /tmp/"], by_name["deletes under /tmp/ go through"]
    for path in ("/tmp/../etc/passwd", "/tmpevil/x", "/etc/passwd", "/tmp"):
        assert outside.applies(delete(path)) and not inside.applies(delete(path)), path
    for path in ("/tmp/old.txt", "/tmp//old.txt", "/tmp/./a/../old.txt"):
        assert inside.applies(delete(path)) and not outside.applies(delete(path)), path


def test_a_bad_path_pattern_in_a_check_file_is_named_by_its_path(tmp_path: Path) -> None:
    props = tmp_path / "props.toml"
    props.write_text('[[property]]\nunless = { path = "path:/tmp/" }\ndecision = "deny"\n')
    with pytest.raises(InvalidInput) as caught:
        read_props(props)
    assert caught.value.message == f"{props}: not a valid check file"
    [problem] = caught.value.problems
    assert problem.startswith("property[0].unless.path: path pattern '/tmp/' is not written")


def test_expectations_take_path_patterns() -> None:
    guard = f"py:{EXAMPLES / 'tests' / 'hooks.py'}:guard"
    paths = ["/tmp/../etc/passwd", "/tmpevil/x", "/tmp//old.txt"]
    calls = [{"name": "delete_file", "arguments": {"path": p}, "result": "gone"} for p in paths]
    document = {
        "agent": {"hooks": [{"event": "agent.tool_call", "type": "webhook", "handler": guard}]},
        "turns": [{"user": "tidy", "model": [{"tool_calls": calls}, {"say": "done"}]}],
        "expect": [
            {"tool": "delete_file", "arguments": {"path": "path:/etc/*"}, "decision": "deny"},
            {
                "tool": "delete_file",
                "arguments": {"path": "path:/tmp/*"},
                "status": "completed",
                "count": 1,
            },
            {"tool": "delete_file", "arguments": {"path": "/tmp/*"}, "count": 2},
            {"tool": "delete_file", "status": "failed", "count": 2},
        ],
    }
    loaded = scenario_from_document(document, "paths.json", ROOT)
    result = run_loaded("paths.json", loaded, routes=[])
    assert result.status == "pass", (result.error, result.failures)
