"""docs/handlers.md: its skeletons are the files of examples/, and each works as it says."""

from __future__ import annotations

import importlib.util
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from belt.executor.targets import parse_tool
from belt.handlers.webhook import encode_payload
from belt.outgoing.signing import signed_headers
from belt.wire.catalogue import EVENTS
from belt.wire.samples import sample_payload
from tests.cli.runner import belt
from tests.loopback import CLIENT
from tests.servers import running
from tests.vectors import SECRET

ROOT = Path(__file__).parent.parent
DOC = (ROOT / "docs" / "handlers.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, re.S)
WHOLE_FILES = [
    "examples/webhook_stdlib.py",
    "examples/webhook_starlette.py",
    "examples/nexus_stop.py",
]


def load(relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"doc_{Path(relative).stem}", ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("relative", WHOLE_FILES)
def test_each_skeleton_in_the_doc_is_its_file_whole(relative: str) -> None:
    [block] = [block for block in BLOCKS if block.startswith(f"# {relative}:")]
    assert block == (ROOT / relative).read_text()


def test_the_readmes_first_screen_links_the_handler_contract() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:25])
    assert "(docs/handlers.md)" in first_screen


def test_the_body_per_event_table_names_each_samples_data() -> None:
    rows = dict(re.findall(r"^\| `(agent\.\w+)` \| [^|]+ \| ([^|]+) \|$", DOC, re.M))
    assert set(rows) == set(EVENTS) - {"agent.idle"}
    for event, cell in rows.items():
        named = set(re.findall(r"`(\w+)`", cell))
        assert named == set(EVENTS[event].sample_data), event


@pytest.fixture
def stdlib() -> Iterator[tuple[ModuleType, str]]:
    module = load("examples/webhook_stdlib.py")
    server = module.server(0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield module, f"http://127.0.0.1:{server.server_address[1]}/hooks"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def trigger(url: str, *args: str) -> dict[str, Any]:
    result = belt("trigger", *args[:1], "--to", url, *args[1:], "--json")
    report: dict[str, Any] = result.json()
    report["exit_code"] = result.exit_code
    return report


def test_the_stdlib_skeleton_decides_as_the_doc_says(stdlib: tuple[ModuleType, str]) -> None:
    _, url = stdlib
    allowed = trigger(url, "agent.tool_call")  # the sample deletes a file under /tmp/
    assert (allowed["exit_code"], allowed["response"]) == (0, {})
    assert allowed["effect"] == "agent.tool_call: allow → the agent continues"
    denied = trigger(url, "agent.tool_call", "--set", 'data.arguments.path="/etc/passwd"')
    assert denied["response"] == {"decision": "deny", "reason": "only /tmp deletions allowed"}
    for event in EVENTS:
        assert trigger(url, event)["exit_code"] == 0, event
    assert CLIENT.post(url, json=[1]).status_code == 400
    assert CLIENT.post(url, content=b"{nope").status_code == 400


def test_the_stdlib_skeleton_checks_standard_webhooks_signatures(
    stdlib: tuple[ModuleType, str],
) -> None:
    module, url = stdlib
    module.SECRET = SECRET
    signed = trigger(url, "agent.start", "--secret", SECRET)
    assert (signed["exit_code"], signed["status"]) == (0, 200)
    unsigned = trigger(url, "agent.start")
    assert (unsigned["exit_code"], unsigned["status"]) == (7, 401)  # refused: unauthorized
    body = encode_payload(sample_payload("agent.start"))
    headers = {**signed_headers(SECRET, body), "content-type": "application/json"}
    assert CLIENT.post(url, content=body, headers=headers).status_code == 200
    assert CLIENT.post(url, content=body + b" ", headers=headers).status_code == 401
    other = "whsec_" + "A" * 32
    assert CLIENT.post(url, content=body, headers=signed_headers(other, body)).status_code == 401
    # Well past the skeleton's 300 s either way: a stamp is whole seconds and the handler reads
    # its clock later, so one just past 300 s ahead can be within it by the time it is checked.
    stale = signed_headers(SECRET, body, now=int(time.time()) - 330)
    assert CLIENT.post(url, content=body, headers=stale).status_code == 401
    ahead = signed_headers(SECRET, body, now=int(time.time()) + 330)
    assert CLIENT.post(url, content=body, headers=ahead).status_code == 401
    several = dict(headers)
    several["webhook-signature"] = "v1,bm90IGl0 " + headers["webhook-signature"]
    assert CLIENT.post(url, content=body, headers=several).status_code == 200


def test_the_starlette_skeleton_decides_as_the_doc_says() -> None:
    module = load("examples/webhook_starlette.py")
    with running(module.app) as base:
        url = f"{base}/hooks"
        reminded = trigger(url, "agent.turn_start")
        assert reminded["exit_code"] == 0
        assert reminded["injection"] == (
            "injects 'Only files under /tmp/ may be deleted.' on the next turn "
            "(for 1 turn, replaces earlier injections keyed 'delete-policy')"
        )
        denied = trigger(url, "agent.tool_call", "--set", 'data.arguments.path="/etc/passwd"')
        assert denied["response"] == {"decision": "deny", "reason": "only /tmp deletions allowed"}
        assert trigger(url, "agent.tool_call")["response"] == {}
        assert CLIENT.post(url, json="text").status_code == 400
        assert CLIENT.post(url, content=b"x" * (1024 * 1024 + 1)).status_code == 413


def test_the_py_handler_and_the_nexus_tool_of_the_doc_work() -> None:
    guard = trigger(
        "py:examples/tests/hooks.py:guard", "agent.tool_call", "--unset", "data.arguments"
    )
    assert guard["response"] == {"decision": "deny", "reason": "only /tmp deletions allowed"}
    tool = parse_tool("stop_check=py:examples/nexus_stop.py:check")
    task = {
        "event": "stop",
        "task_key": "ar_1:stop:answer-1",
        "run_public_id": "ar_1",
        "conversation_public_id": None,
        "output_preview": "I changed it.",
        "output_size_bytes": 13,
    }
    asked = tool.call(task, 5).result
    feedback = "Run the tests and report whether they pass."
    assert asked == {"structured_content": {"continue": True, "feedback": feedback}}
    done = tool.call({**task, "output_preview": "Done; the tests pass."}, 5).result
    assert done == {"structured_content": {"continue": False}}


ESCAPES = ["/tmp/../etc/passwd", "/tmpevil/x"]
"""Deletes every example handler denies: out of /tmp by `..`, and a prefix without its `/`."""


@pytest.fixture
def example_handlers(stdlib: tuple[ModuleType, str]) -> Iterator[dict[str, str]]:
    """Each example handler, where `belt trigger --to` reaches it."""
    with running(load("examples/webhook_starlette.py").app) as base:
        yield {
            "handler.py": f"py:{ROOT / 'examples' / 'handler.py'}:decide",
            "tests/hooks.py": f"py:{ROOT / 'examples' / 'tests' / 'hooks.py'}:guard",
            "webhook_stdlib.py": stdlib[1],
            "webhook_starlette.py": f"{base}/hooks",
        }


def test_every_example_handler_denies_a_delete_that_leaves_tmp(
    example_handlers: dict[str, str],
) -> None:
    denied = {"decision": "deny", "reason": "only /tmp deletions allowed"}
    for name, target in example_handlers.items():
        for path in ESCAPES:
            where = f"data.arguments.path={json.dumps(path)}"
            answer = trigger(target, "agent.tool_call", "--set", where)
            assert (answer["exit_code"], answer["response"]) == (0, denied), (name, path)
        for path in ("/tmp/old.txt", "/tmp//old.txt"):
            where = f"data.arguments.path={json.dumps(path)}"
            answer = trigger(target, "agent.tool_call", "--set", where)
            assert answer["response"] in ({}, None), (name, path, answer)
