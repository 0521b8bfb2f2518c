"""Property tests over every parser of outside input: a clean BeltError, never another exception.

Declarations (JSON and TOML), policies, ``--data``/``--meta`` options, ``--api`` answers and the
request bodies of ``belt serve`` are fed generated documents and fragments known to break naive
parsers (NaN, 1e999, deep nesting, 5,000-digit integers, lone surrogates, control characters).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from belt.backends.remote import Platform
from belt.declaring.declarations import Declaration, load_declaration, parse_text
from belt.errors import BeltError
from belt.outgoing.transport import using
from belt.reading.inputs import read_json_object_option, read_json_option
from belt.rules.policy import parse_policy
from belt.server.app import create_app
from belt.store import Store
from tests.loopback import CLIENT
from tests.servers import running

FRAGMENTS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "[" * 150,
    "]" * 150,
    "{" * 150,
    '"a":' * 3,
    "9" * 4400,
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\x1b[2J"',
    "\x00",
    "\ud800",
    "null",
    '{"hooks": [',
    '{"event": "agent.start", "type": "gate"}',
    '"lifecycle_hooks": {"stop": {"tool": "t", "timeout_ms": 1, "max_continuations": 1}}',
    "]",
    "}",
    ",",
    '"',
    "\\",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)

json_texts = st.one_of(
    st.text(max_size=200),
    json_values.map(lambda value: json.dumps(value)),
    st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join),
)

toml_texts = st.one_of(
    st.text(max_size=200),
    st.lists(
        st.sampled_from(
            [
                "[[hooks]]\n",
                'event = "agent.start"\n',
                'type = "gate"\n',
                "timeout = nan\n",
                "timeout = inf\n",
                "x = " + "[" * 200 + "]" * 200 + "\n",
                "y = " + "9" * 4400 + "\n",
                ".".join(["k"] * 120) + " = 1\n",
                '[lifecycle_hooks.stop]\ntool = "t"\n',
                'a = "\\ud800"\n',
                "= =\n",
                "[a]\n[a]\n",
            ]
        ),
        max_size=6,
    ).map("".join),
)

SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docs")


def write(folder: Path, text: str, suffix: str) -> Path:
    path = folder / f"doc{suffix}"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


@SETTINGS
@given(json_texts)
def test_json_declarations_load_or_fail_cleanly(folder: Path, text: str) -> None:
    try:
        declaration = load_declaration(write(folder, text, ".json"))
    except BeltError:
        return
    assert isinstance(declaration, Declaration)


@SETTINGS
@given(toml_texts)
def test_toml_declarations_load_or_fail_cleanly(folder: Path, text: str) -> None:
    try:
        declaration = load_declaration(write(folder, text, ".toml"))
    except BeltError:
        return
    assert isinstance(declaration, Declaration)


@SETTINGS
@given(json_values)
def test_policies_of_any_shape_compile_or_fail_cleanly(document: Any) -> None:
    try:
        parse_policy({"rules": [document]} if isinstance(document, dict) else document, "p.json")
    except BeltError:
        pass


@SETTINGS
@given(st.one_of(json_texts, toml_texts))
def test_policy_text_parses_or_fails_cleanly(text: str) -> None:
    try:
        parse_policy(parse_text(text, "p.toml"), "p.toml")
    except BeltError:
        pass


@SETTINGS
@given(json_texts)
def test_json_options_parse_or_fail_cleanly(text: str) -> None:
    for read in (read_json_option, read_json_object_option):
        try:
            value = read(text, option="--data")
        except BeltError:
            continue
        # Whatever is accepted can be written back as strict JSON.
        json.dumps(value, allow_nan=False).encode("utf-8")


@SETTINGS
@given(
    st.integers(min_value=100, max_value=599),
    st.binary(max_size=300) | json_texts.map(lambda text: text.encode("utf-8", "surrogatepass")),
)
def test_api_answers_become_data_or_a_clean_error(status: int, body: bytes) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
    with using(transport), Platform("http://api.example.test") as platform:
        try:
            platform.list_interrupts(run_id="run_1")
        except BeltError:
            pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app = create_app(store=Store(tmp_path_factory.mktemp("store")), sweep_interval=0)
    with running(app) as url:
        yield url


ROUTES = [
    ("POST", "/hooks"),
    ("POST", "/interrupts/int_x/resolve"),
    ("POST", "/chats/chat_1/settings"),
]


@SETTINGS
@given(
    st.sampled_from(ROUTES),
    st.binary(max_size=300) | json_texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
)
def test_serve_answers_any_body_with_json_or_a_problem(
    server: str, route: tuple[str, str], body: bytes
) -> None:
    method, path = route
    sent = {"content-type": "application/json"}
    reply = CLIENT.request(method, server + path, content=body, headers=sent, timeout=30)
    if reply.status_code >= 400:
        assert reply.status_code < 500, reply.text
        assert reply.headers["content-type"] == "application/problem+json"
        assert reply.json()["status"] == reply.status_code
    else:
        assert reply.headers["content-type"] == "application/json"
        reply.json()
