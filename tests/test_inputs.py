"""Reading named files, standard input and ``JSON|@FILE`` options, each capped."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from belt.errors import InvalidInput, NotFound
from belt.reading import inputs
from belt.reading.inputs import read_json_object_option, read_json_option, read_stream, read_text


def test_read_json_option(tmp_path: Path) -> None:
    assert read_json_option('{"a": [1]}', option="--data") == {"a": [1]}
    assert read_json_option("null", option="--data") is None
    (tmp_path / "d.json").write_text('"from a file"')
    assert read_json_option(f"@{tmp_path / 'd.json'}", option="--data") == "from a file"
    with pytest.raises(NotFound, match="no such file"):
        read_json_option(f"@{tmp_path / 'nope.json'}", option="--data")
    with pytest.raises(InvalidInput, match="--data: not valid JSON"):
        read_json_option("{oops", option="--data")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InvalidInput, match="bad.json: not valid JSON"):
        read_json_option(f"@{tmp_path / 'bad.json'}", option="--data")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"x": NaN}', "NaN is not a JSON number"),
        ("[Infinity]", "Infinity is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("1e999", "the number 1e999 is not finite"),
        ("[" * 5000 + "]" * 5000, "nested deeper than 100 levels"),
        ("9" * 5000, "an integer has 5000 digits"),
        ('"\\ud800"', "lone surrogate \\ud800"),
        ('{"\\udfff": 1}', "lone surrogate \\udfff"),
        ('"\udcff"', "lone surrogate \\udcff"),
    ],
)
def test_hostile_json_options_are_refused_by_name(text: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_json_option(text, option="--data")
    assert caught.value.message.startswith("--data: not valid JSON (")
    assert reason in caught.value.message


def test_a_surrogate_pair_is_one_character_not_a_lone_surrogate() -> None:
    assert read_json_option('"\\ud83d\\ude00"', option="--data") == "\U0001f600"
    assert read_json_option('"\\\\ud800"', option="--data") == "\\ud800"


def test_meta_and_data_must_be_objects_where_a_command_says_so() -> None:
    assert read_json_object_option('{"a": 1}', option="--meta") == {"a": 1}
    with pytest.raises(InvalidInput, match="--meta: expected a JSON object, got an array"):
        read_json_object_option("[1]", option="--meta")


def test_a_named_path_must_be_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="is a FIFO"):
        read_text(fifo, kind="declaration")
    with pytest.raises(InvalidInput, match="is a character device, not a regular file"):
        read_text("/dev/zero", kind="declaration")
    with pytest.raises(InvalidInput, match="is a directory, not a regular file"):
        read_text(tmp_path, kind="declaration")
    with pytest.raises(InvalidInput, match="is a character device"):
        read_json_option("@/dev/zero", option="--data")
    with pytest.raises(InvalidInput, match="a path cannot contain a NUL"):
        read_text("a\x00b.json", kind="declaration")


def test_a_file_over_its_cap_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (inputs.LIMITS["declaration"] + 1))
    with pytest.raises(InvalidInput, match="larger than the 1024 KiB limit for a declaration"):
        read_text(big, kind="declaration")
    big.write_bytes(b" " * inputs.LIMITS["declaration"])
    assert len(read_text(big, kind="declaration")) == inputs.LIMITS["declaration"]


def test_standard_input_is_read_with_the_same_cap() -> None:
    limit = inputs.LIMITS["declaration"]
    assert read_stream(io.BytesIO(b"{}"), kind="declaration", source="<stdin>") == "{}"
    with pytest.raises(InvalidInput, match="<stdin>: more than the 1024 KiB limit"):
        read_stream(io.BytesIO(b"x" * (limit + 1)), kind="declaration", source="<stdin>")
    with pytest.raises(InvalidInput, match="<stdin>: not UTF-8 text"):
        read_stream(io.BytesIO(b"\xff"), kind="declaration", source="<stdin>")


def test_a_byte_order_mark_at_the_start_is_not_part_of_the_text(tmp_path: Path) -> None:
    marked = tmp_path / "marked.json"
    marked.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert read_text(marked, kind="declaration") == '{"a": 1}'
    assert read_json_option(f"@{marked}", option="--data") == {"a": 1}
    assert read_stream(io.BytesIO(b"\xef\xbb\xbf{}"), kind="option", source="<stdin>") == "{}"
    # Only the first character is a mark; one further in is text, and refused as JSON.
    marked.write_bytes(b'{"a": 1}\xef\xbb\xbf')
    with pytest.raises(InvalidInput, match="not valid JSON"):
        read_json_option(f"@{marked}", option="--data")


@given(
    st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=4), max_size=4),
    st.text(max_size=8),
    st.integers(),
    st.integers(),
)
@settings(max_examples=100, deadline=None)
def test_an_object_repeating_a_key_is_refused_by_name(
    others: dict[str, Any], key: str, first: int, second: int
) -> None:
    pairs = [json.dumps(key) + ": " + json.dumps(first)]
    pairs += [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in others.items() if k != key]
    pairs.append(json.dumps(key) + ": " + json.dumps(second))
    text = '{"nested": {' + ", ".join(pairs) + "}}"
    with pytest.raises(InvalidInput) as caught:
        read_json_option(text, option="--data")
    assert f"the key {json.dumps(key)} is repeated in one object" in caught.value.message
    # Without the repeat the same object is read as written.
    unique = '{"nested": {' + ", ".join(pairs[1:]) + "}}"
    assert read_json_option(unique, option="--data")["nested"][key] == second
