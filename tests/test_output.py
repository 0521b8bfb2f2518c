"""Terminal output: control characters from outside never reach the terminal raw."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.display import output

HOSTILE = "a\x1b[2J\x1b]0;PWNED\x07b\r\nerror: fake\x9b31m\x7f\ud800 rm\u202etxt.exe"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The bidirectional controls: U+202E and the rest reorder what a terminal shows."""


def raw_controls(text: str) -> list[str]:
    """Control characters (other than the line ends belt writes), lone surrogates and
    bidirectional controls."""
    return [
        c
        for c in text
        if (ord(c) < 32 and c != "\n")
        or 0x7F <= ord(c) <= 0x9F
        or 0xD800 <= ord(c) <= 0xDFFF
        or c in BIDI
    ]


def test_clean_shows_every_control_character_as_a_visible_escape() -> None:
    assert output.clean(HOSTILE) == (
        "a\\x1b[2J\\x1b]0;PWNED\\x07b\\r\\nerror: fake\\x9b31m\\x7f\\ud800 rm\\u202etxt.exe"
    )
    assert output.clean("naïve — ✓ 😀 עברית العربية") == "naïve — ✓ 😀 עברית العربية"
    assert output.clean(BIDI) == "".join(f"\\u{ord(c):04x}" for c in BIDI)


@pytest.mark.parametrize(
    "render",
    [
        lambda text: output.echo(text),
        lambda text: output.echo(text, stderr=True),
        lambda text: output.error(text),
        lambda text: output.warning(text),
        lambda text: output.success(text),
        lambda text: output.lines([(text, "red")]),
        lambda text: output.key_values([("reason", text), ("data", {"k": text})]),
        lambda text: output.table(["c"], [[text]]),
    ],
)
def test_every_human_output_function_escapes(render, capsys: pytest.CaptureFixture[str]) -> None:
    render(HOSTILE)
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "PWNED" in printed
    assert raw_controls(printed) == []
    # One logical line stays one line: the \r\n inside the text cannot start another.
    assert "\nerror: fake" not in printed


def test_a_colour_terminal_gets_escapes_and_no_markup(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr(output, "is_terminal", lambda stream: True)
    output.lines([(HOSTILE + " [bold]x[/]", "red")])
    output.table(["c"], [["[/] not markup"]])
    printed = capsys.readouterr().out
    assert "\\x1b]0;PWNED" in printed
    assert "[bold]x[/]" in printed and "[/] not markup" in printed


def test_json_output_stays_json_and_escapes_c1(capsys: pytest.CaptureFixture[str]) -> None:
    value = {"reason": "x\x9b31m\x7f\x1b", "lone": "\udc80", "bidi": BIDI}
    output.print_json(value)
    output.print_json_line(value)
    document, line = capsys.readouterr().out.split("\n}\n")
    assert "\\u009b" in line and "\\u007f" in line and "\\u001b" in line
    assert raw_controls(document + line.strip()) == []
    assert json.loads(document + "\n}") == json.loads(line)
    assert json.loads(line)["reason"] == "x\x9b31m\x7f\x1b"
    assert json.loads(line)["bidi"] == BIDI and "\\u202e" in line


def test_a_block_keeps_its_lines_and_escapes_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    output.block("line one\n\tline two\x1b[2J")
    assert capsys.readouterr().out == "line one\n\tline two\\x1b[2J\n"


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_any_text_prints_as_one_line_without_raw_controls(text: str) -> None:
    cleaned = output.clean(text)
    assert raw_controls(cleaned) == []
    assert "\n" not in cleaned
    cleaned.encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(BIDI) | st.text(max_size=5) | st.characters(), max_size=30).map(
        "".join
    )
)
def test_text_full_of_bidi_controls_prints_none_raw(text: str) -> None:
    for shown in (
        output.clean(text),
        output.clean_block(text).replace("\t", ""),  # a block keeps its lines and tabs
        output.json_text({"text": text}),
        output.json_text([text], indent=2),
    ):
        assert raw_controls(shown.replace("\n", "")) == []
    assert json.loads(output.json_text({"text": text}))["text"] == text


@pytest.mark.parametrize("items", [[], [{"a": 1}], [{"a": [1, {"b": HOSTILE}]}, 2, "x"]])
def test_a_streamed_json_document_is_the_one_print_json_prints(
    capsys: pytest.CaptureFixture[str], items: list[object]
) -> None:
    head = {"id": "rp_1", "nested": {"k": [1, 2]}}
    tail = {"summary": {"n": len(items)}, "problems": []}
    output.print_json({**head, "rows": items, **tail})
    whole = capsys.readouterr().out
    output.print_json_stream(head, "rows", iter(items), lambda: tail)
    assert capsys.readouterr().out == whole


def test_a_streamed_table_prints_each_page_as_it_comes(capsys: pytest.CaptureFixture[str]) -> None:
    printed: list[str] = []

    def rows() -> Iterator[list[str]]:
        for number in range(5):
            # Each page is printed before the next row is made.
            printed.append(capsys.readouterr().out)
            yield [str(number), HOSTILE if number == 4 else "x" * number]

    assert output.table_stream(["n", "text"], rows(), page=2) == 5
    printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] == printed[3] == ""
    assert printed[2].splitlines() == ["n  text", "0", "1  x"]
    assert printed[4].splitlines() == ["2  xx", "3  xxx"]
    assert raw_controls(printed[5]) == [] and printed[5].startswith("4  a\\x1b")


@pytest.mark.parametrize("columns", [40, 120])
def test_a_streamed_table_on_a_narrow_terminal_turns_to_blocks(
    columns: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output, "is_terminal", lambda stream: True)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("TERM", "xterm")
    rows = [["agent.tool_call", "delete_file", "/srv/data/a-rather-long/path.txt"]] * 3
    assert output.table_stream(["event", "tool", "file"], rows, page=2) == 3
    printed = capsys.readouterr().out
    if columns == 120:
        assert printed.splitlines()[2].split(" │ ") == [*rows[0]]
        return
    block = "event: agent.tool_call\ntool:  delete_file\nfile:  /srv/data/a-rather-long/path.txt\n"
    assert printed == "\n".join([block] * 3)


def test_a_console_is_made_once_for_each_stream_and_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(output, "is_terminal", lambda stream: True)
    first = output.console()
    assert output.console() is first
    assert output.console(stderr=True) is not first
    monkeypatch.setenv("NO_COLOR", "1")
    plain = output.console()
    assert plain is not first and plain.no_color


def test_a_stream_is_asked_once_whether_it_is_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stream(io.StringIO):
        asked = 0

        def isatty(self) -> bool:
            self.asked += 1
            return False

    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = Stream()
    monkeypatch.setattr(sys, "stdout", stream)
    output.lines([("a", "red")])
    output.lines([("b", "")])
    assert stream.getvalue() == "a\nb\n"
    assert stream.asked == 1
