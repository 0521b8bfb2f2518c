"""Reading declaration files: formats, shapes, dialect detection, the specs' own examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from belt.declaring.declarations import (
    Dialect,
    check_document,
    exit_code,
    load_declaration,
    read_document,
)
from belt.declaring.doctor import validate_files
from belt.errors import ExitCode, InvalidInput, NotFound
from belt.wire.validate import check_decision

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).parent.parent / "examples"
DECLARATION_EXAMPLES = ["hooks.json", "hooks.toml", "nexus-profile.json", "nexus-hooks.toml"]

# What the official Python SDK's builders produce (lifecycle_hook(...).build(), learning_hooks).
SDK_BUILT: list[dict[str, Any]] = [
    {
        "event": "agent.tool_call",
        "type": "webhook",
        "handler": "https://example.com/hooks/tool-call",
        "timeout": 10,
    },
    {
        "event": "agent.turn_start",
        "type": "task",
        "handler": "my-team/auditor@latest",
        "async": True,
    },
]
LEARNING_HOOKS: list[dict[str, Any]] = [
    {"event": "agent.turn_start", "type": "builtin", "handler": "belt:suggest"},
    {"event": "agent.complete", "type": "builtin", "handler": "belt:extract"},
    {"event": "agent.pre_compact", "type": "builtin", "handler": "belt:extract"},
]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "path", sorted((DATA / "inference-sh").glob("*.json")), ids=lambda p: p.name
)
def test_inference_sh_spec_examples_validate_as_written(path: Path) -> None:
    declaration = load_declaration(path)
    assert declaration.findings.problems == []
    assert declaration.findings.warnings == []
    assert declaration.dialect == Dialect.PLATFORM
    doc = json.loads(path.read_text())
    written = doc if isinstance(doc, list) else [doc]
    assert [hook.to_wire() for hook in declaration.hooks] == written


def test_nexus_spec_example_validates_as_written() -> None:
    path = DATA / "nexus" / "lifecycle-hooks.json"
    declaration = load_declaration(path)
    assert declaration.findings.problems == []
    assert declaration.dialect == Dialect.NEXUS
    assert declaration.lifecycle_hooks is not None
    assert declaration.lifecycle_hooks.to_wire() == json.loads(path.read_text())
    assert declaration.hook_count() == 4


@pytest.mark.parametrize(
    ("name", "event"),
    [("decision-acknowledge.json", "turn_start"), ("decision-continue.json", "stop")],
)
def test_nexus_spec_decisions_validate_as_written(name: str, event: str) -> None:
    raw = json.loads((DATA / "nexus" / name).read_text())
    findings, result = check_decision(raw, event)
    assert findings.problems == []
    assert result is not None
    assert result.model_dump(by_alias=True, exclude_none=True) == raw


@pytest.mark.parametrize("hooks", [SDK_BUILT, LEARNING_HOOKS], ids=["builder", "learning_hooks"])
def test_sdk_built_declarations_validate_as_written(hooks: list[dict[str, Any]]) -> None:
    for doc in (hooks, {"hooks": hooks}):
        declaration = check_document(doc, "sdk")
        assert declaration.findings.problems == []
        assert [hook.to_wire() for hook in declaration.hooks] == hooks


@pytest.mark.parametrize("name", DECLARATION_EXAMPLES)
def test_examples_validate(name: str) -> None:
    declaration = load_declaration(EXAMPLES / name)
    assert declaration.findings.problems == []
    assert declaration.hook_count() > 0


@pytest.mark.parametrize(
    ("doc", "dialect", "shape"),
    [
        ([], Dialect.PLATFORM, "array"),
        ({"hooks": []}, Dialect.PLATFORM, "hooks"),
        ({"event": "agent.start", "type": "gate"}, Dialect.PLATFORM, "single"),
        ({"lifecycle_hooks": {}}, Dialect.NEXUS, "wrapped"),
        ({"lifecycle_hooks": {}, "approval_mode": "ask"}, Dialect.NEXUS, "profile"),
        ({"plugins": {}}, Dialect.NEXUS, "rho"),
        ({"stop": None}, Dialect.NEXUS, "bare"),
        ({}, Dialect.NEXUS, "bare"),
    ],
)
def test_dialect_and_shape_are_detected(doc: Any, dialect: Dialect, shape: str) -> None:
    declaration = check_document(doc, "doc")
    assert (declaration.dialect, declaration.shape) == (dialect, shape)
    assert declaration.ok


def test_platform_toml_hooks_tables(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "hooks.toml",
        '[[hooks]]\nevent = "agent.tool_call"\ntype = "webhook"\n'
        'handler = "https://example.com/hooks/tool-call"\ntimeout = 10\n\n'
        '[[hooks]]\nevent = "agent.turn_start"\ntype = "task"\n'
        'handler = "my-team/auditor@latest"\nasync = true\n',
    )
    declaration = load_declaration(path)
    assert declaration.findings.problems == []
    assert [hook.to_wire() for hook in declaration.hooks] == SDK_BUILT


def test_nexus_toml_lifecycle_hooks_tables(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nexus.toml",
        '[lifecycle_hooks.stop]\ntool = "check"\ntimeout_ms = 30000\nmax_continuations = 2\n',
    )
    declaration = load_declaration(path)
    assert declaration.findings.problems == []
    assert declaration.dialect == Dialect.NEXUS
    assert declaration.lifecycle_hooks is not None
    assert declaration.lifecycle_hooks.to_wire() == {
        "stop": {"tool": "check", "timeout_ms": 30000, "max_continuations": 2}
    }


def test_nexus_profile_file_needs_approval_mode() -> None:
    doc = {"lifecycle_hooks": {"turn_start": {"tool": "t", "timeout_ms": 5}}, "tools": []}
    declaration = check_document(doc, "profile.json")
    assert declaration.findings.problems == [
        "approval_mode: is required when the configuration declares lifecycle hooks"
    ]


def test_rho_config_file_is_read_at_its_plugin_path() -> None:
    doc = {"plugins": {"rho.lifecycle_hooks": {"configuration": {"stop": {"tool": "t"}}}}}
    declaration = check_document(doc, "config.json")
    assert declaration.shape == "rho"
    assert declaration.findings.problems == [
        'plugins["rho.lifecycle_hooks"].configuration.stop.timeout_ms: is required '
        "(1 through 300000)",
        'plugins["rho.lifecycle_hooks"].configuration.stop.max_continuations: is required on '
        "stop (0 through 20)",
    ]


def test_unknown_top_level_keys_are_errors() -> None:
    platform = check_document({"hooks": [], "agent": "x"}, "a.json")
    wrapped = check_document({"lifecycle_hooks": {}, "hooks": []}, "b.json", Dialect.NEXUS)
    assert platform.findings.problems == [
        "agent: unknown key (a declaration file holds only hooks)"
    ]
    assert wrapped.findings.problems == ["hooks: unknown key"]


def test_dialect_override_reads_a_platform_file_as_nexus() -> None:
    declaration = check_document({"hooks": []}, "hooks.json", Dialect.NEXUS)
    assert declaration.dialect == Dialect.NEXUS
    assert declaration.findings.problems == [
        "lifecycle_hooks.hooks: unknown event (allowed: turn_start, pre_compact, post_compact, "
        "stop)"
    ]


def test_dialect_override_reads_a_nexus_file_as_platform() -> None:
    declaration = check_document({"stop": None}, "nexus.json", Dialect.PLATFORM)
    assert declaration.dialect == Dialect.PLATFORM
    assert declaration.findings.problems == [
        "stop: unknown key (a declaration file holds only hooks)",
        "hooks: expected an array of hooks, got null",
    ]


@pytest.mark.parametrize("dialect", [None, Dialect.PLATFORM, Dialect.NEXUS])
@pytest.mark.parametrize("doc", [5, "hooks"])
def test_a_document_that_is_not_a_container_is_an_error(doc: Any, dialect: Any) -> None:
    declaration = check_document(doc, "odd.json", dialect)
    assert not declaration.ok
    assert len(declaration.findings.problems) == 1


def test_a_null_document_is_an_error_unless_read_as_nexus() -> None:
    assert check_document(None, "null.json").findings.problems == [
        "(document): expected a hooks array or a lifecycle_hooks object, got null"
    ]
    nexus = check_document(None, "null.json", Dialect.NEXUS)
    assert nexus.ok
    assert nexus.hook_count() == 0


def test_broken_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.json", '{\n  "hooks": [\n    {"event": }\n  ]\n}\n')
    with pytest.raises(InvalidInput) as caught:
        read_document(path)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert caught.value.message == f"{path}: line 3, column 15: invalid JSON: Expecting value"


def test_broken_toml_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.toml", '[[hooks]]\nevent = "agent.start"\ntype = gate\n')
    with pytest.raises(InvalidInput) as caught:
        read_document(path)
    assert caught.value.message == f"{path}: line 3, column 8: invalid TOML: Invalid value"


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound) as caught:
        read_document(tmp_path / "nope.json")
    assert caught.value.exit_code == ExitCode.NOT_FOUND


def test_non_utf8_file_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"hooks": [], "x": "\xe9"}')
    with pytest.raises(InvalidInput, match="not UTF-8 text"):
        read_document(path)


def test_validate_files_reports_every_file_and_the_worst_exit_code(tmp_path: Path) -> None:
    good = write(tmp_path, "good.json", json.dumps(LEARNING_HOOKS))
    broken = write(tmp_path, "broken.json", "[")
    missing = tmp_path / "missing.json"
    reports = validate_files([good, missing, broken])
    assert [r.ok for r in reports] == [True, False, False]
    assert reports[1].findings.problems == ["no such file"]
    assert reports[2].findings.problems == ["line 1, column 2: invalid JSON: Expecting value"]
    assert exit_code(reports) == ExitCode.INVALID_INPUT
    assert exit_code(reports[:2]) == ExitCode.NOT_FOUND
    assert exit_code(reports[:1]) == ExitCode.OK


def test_summary_of_a_valid_and_an_invalid_file() -> None:
    good = check_document(LEARNING_HOOKS, "good.json")
    bad = check_document([{"event": "agent.idle", "type": "gate"}], "bad.json")
    assert good.summary() == {
        "file": "good.json",
        "dialect": "platform",
        "valid": True,
        "errors": [],
        "warnings": [],
        "hooks": LEARNING_HOOKS,
    }
    assert bad.summary()["valid"] is False
    assert bad.summary()["warnings"] == [
        "hooks[0].event: agent.idle is defined but never emitted; this hook never fires"
    ]
    assert "hooks" not in bad.summary()
