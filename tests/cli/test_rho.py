"""`rho extensions configure rho.lifecycle_hooks` as a user runs it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from belt.cli.rho import app
from belt.errors import ExitCode
from tests import hostile
from tests.cli.runner import Result

EXAMPLES = Path(__file__).parents[2] / "examples"
SPEC_EXAMPLE = Path(__file__).parents[1] / "data" / "nexus" / "lifecycle-hooks.json"
STOP = {"stop": {"tool": "verify", "timeout_ms": 60000, "max_continuations": 2}}


def rho(*args: str, input: str | None = None) -> Result:
    """Invoke ``rho ARGS...`` in-process."""
    result = CliRunner().invoke(app, list(args), input=input, prog_name="rho")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Result(result.exit_code, result.stdout, result.stderr)


def configure(*args: str, input: str | None = None) -> Result:
    return rho("extensions", "configure", "rho.lifecycle_hooks", *args, input=input)


def stored(belt_home: Path) -> object:
    config = json.loads((belt_home / "rho" / "config.json").read_text())
    return config["plugins"]["rho.lifecycle_hooks"]["configuration"]


def test_configure_from_a_file_stores_it_at_the_plugin_path(belt_home: Path) -> None:
    result = configure("--file", str(SPEC_EXAMPLE))
    assert result.exit_code == 0, result.stderr
    assert stored(belt_home) == json.loads(SPEC_EXAMPLE.read_text())
    assert result.stderr == (
        f'stored plugins["rho.lifecycle_hooks"].configuration in '
        f"{belt_home / 'rho' / 'config.json'}\n"
    )
    assert result.stdout.splitlines() == [
        "event         tool             timeout_ms  max_continuations",
        "turn_start    execution_check  30000",
        "pre_compact   execution_check  30000",
        "post_compact  execution_check  30000",
        "stop          execution_check  30000       2",
    ]


def test_config_file_is_0600_in_0700_directories(belt_home: Path) -> None:
    result = configure(input=json.dumps(STOP))
    assert result.exit_code == 0
    assert stat.S_IMODE(belt_home.stat().st_mode) == 0o700
    assert stat.S_IMODE((belt_home / "rho").stat().st_mode) == 0o700
    assert stat.S_IMODE((belt_home / "rho" / "config.json").stat().st_mode) == 0o600


def test_configure_from_stdin_with_json_output(belt_home: Path) -> None:
    result = configure("--json", input=json.dumps(STOP))
    assert result.exit_code == 0
    assert result.json() == {
        "extension": "rho.lifecycle_hooks",
        "file": str(belt_home / "rho" / "config.json"),
        "configuration": STOP,
    }
    assert stored(belt_home) == STOP


def test_configure_from_a_toml_file(belt_home: Path) -> None:
    result = configure("--file", str(EXAMPLES / "nexus-hooks.toml"), "--json")
    assert result.exit_code == 0
    assert result.json()["configuration"] == {
        "turn_start": {"tool": "execution_check", "timeout_ms": 30000},
        "stop": {"tool": "verify_before_finish", "timeout_ms": 60000, "max_continuations": 2},
    }


@pytest.mark.parametrize("text", ["{}", "null"])
def test_empty_or_null_stores_the_default(belt_home: Path, text: str) -> None:
    configure(input=json.dumps(STOP))
    result = configure(input=text)
    assert result.exit_code == 0
    assert result.stdout == "{} (no lifecycle hooks declared)\n"
    assert stored(belt_home) == {}


def test_other_settings_in_the_config_file_are_kept(belt_home: Path) -> None:
    path = belt_home / "rho" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"theme": "dark", "plugins": {"rho.mail": {"configuration": {"on": True}}}})
    )
    result = configure(input=json.dumps(STOP))
    assert result.exit_code == 0
    assert json.loads(path.read_text()) == {
        "theme": "dark",
        "plugins": {
            "rho.mail": {"configuration": {"on": True}},
            "rho.lifecycle_hooks": {"configuration": STOP},
        },
    }


def test_an_invalid_object_is_refused_and_nothing_is_written(belt_home: Path) -> None:
    result = configure(input='{"stop": {"tool": "verify", "timeout_ms": 60000}}')
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert result.stderr == (
        "error: <stdin>: lifecycle_hooks.stop.max_continuations: is required on stop "
        "(0 through 20)\n"
    )
    assert not (belt_home / "rho").exists()


def test_several_problems_are_all_reported(belt_home: Path) -> None:
    result = configure(input='{"turn_start": {"tool": ""}, "finish": {}}')
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert result.stderr.splitlines() == [
        "error: <stdin>: 3 problems",
        "  lifecycle_hooks.turn_start.tool: must be a nonblank string",
        "  lifecycle_hooks.turn_start.timeout_ms: is required (1 through 300000)",
        "  lifecycle_hooks.finish: unknown event (allowed: turn_start, pre_compact, "
        "post_compact, stop)",
    ]


def test_broken_json_on_stdin_names_line_and_column() -> None:
    result = configure(input='{"stop":\n')
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert result.stderr == "error: <stdin>: line 2, column 1: invalid JSON: Expecting value\n"


def test_empty_stdin_is_invalid() -> None:
    result = configure(input="")
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert result.stderr == "error: <stdin>: empty input; expected a lifecycle_hooks object\n"


def test_a_corrupt_config_file_is_reported_and_never_overwritten(belt_home: Path) -> None:
    path = belt_home / "rho" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    result = configure(input=json.dumps(STOP))
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert (
        result.stderr == f"error: {path}: line 1, column 2: invalid JSON: Expecting property "
        "name enclosed in double quotes\n"
    )
    assert path.read_text() == "{not json"


def test_a_missing_file_exits_3(tmp_path: Path) -> None:
    result = configure("--file", str(tmp_path / "nope.json"))
    assert result.exit_code == ExitCode.NOT_FOUND
    assert result.stderr == f"error: {tmp_path / 'nope.json'}: no such file\n"


def test_an_unknown_extension_is_a_usage_error(belt_home: Path) -> None:
    result = rho("extensions", "configure", "rho.mail", input="{}")
    assert result.exit_code == ExitCode.USAGE
    assert "rho.lifecycle_hooks" in result.stderr
    assert not belt_home.exists()


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        (lambda: hostile.answer(b"[" * 50_000 + b"]" * 50_000), "nested deeper than 100 levels"),
        (lambda: hostile.answer(b'{"lifecycle_hooks": NaN}'), "NaN is not a JSON number"),
    ],
)
def test_a_hostile_profile_api_is_a_clear_failure(behaviour, message: str) -> None:
    with hostile.hostile_server(behaviour()) as url:
        result = rho("extensions", "configure", "rho.lifecycle_hooks", "--api", url, input="{}")
    assert result.exit_code == 1, result.stderr  # it answered, with something else
    assert "answered HTTP 200 with a body that is not JSON" in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def show(*args: str) -> Result:
    return rho("extensions", "show", "rho.lifecycle_hooks", *args)


def test_show_with_nothing_stored_prints_the_default_and_writes_nothing(belt_home: Path) -> None:
    result = show()
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "{} (no lifecycle hooks stored; set them with `rho extensions configure "
        "rho.lifecycle_hooks --file FILE`)\n"
    )
    path = belt_home / "rho" / "config.json"
    assert result.stderr == f'plugins["rho.lifecycle_hooks"].configuration in {path}\n'
    result = show("--json")
    assert result.exit_code == 0
    assert result.json() == {
        "extension": "rho.lifecycle_hooks",
        "file": str(path),
        "configuration": {},
    }
    assert not belt_home.exists()


def test_show_prints_what_configure_stored(belt_home: Path) -> None:
    configured = configure("--file", str(SPEC_EXAMPLE), "--json")
    assert configured.exit_code == 0
    result = show("--json")
    assert result.exit_code == 0, result.stderr
    assert result.json() == configured.json()
    result = show()
    assert result.exit_code == 0
    assert result.stdout == configure("--file", str(SPEC_EXAMPLE)).stdout
    assert result.stdout.splitlines()[-1] == "stop          execution_check  30000       2"


def test_show_of_other_settings_only_is_the_default(belt_home: Path) -> None:
    path = belt_home / "rho" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"theme": "dark", "plugins": {"rho.mail": {"configuration": {}}}}))
    result = show("--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["configuration"] == {}


def test_show_of_a_broken_stored_object_names_the_file_and_path(belt_home: Path) -> None:
    path = belt_home / "rho" / "config.json"
    path.parent.mkdir(parents=True)
    hooks = {"stop": {"tool": "verify", "timeout_ms": 0, "max_continuations": 1}}
    path.write_text(json.dumps({"plugins": {"rho.lifecycle_hooks": {"configuration": hooks}}}))
    result = show()
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert result.stderr.splitlines()[0] == (
        f'error: {path}: plugins["rho.lifecycle_hooks"].configuration.stop.timeout_ms: 0 must '
        "be a whole number 1 through 300000"
    )


def test_the_bare_object_rho_accepts_is_a_valid_declaration_for_belt(tmp_path: Path) -> None:
    from tests.cli.runner import belt

    bare = tmp_path / "my.json"
    bare.write_text(json.dumps(STOP))
    assert configure("--file", str(bare)).exit_code == 0
    validated = belt("hooks", "validate", str(bare), "--json")
    assert validated.exit_code == 0, validated.stdout
    assert belt("hooks", "validate", str(bare)).stdout == f"ok  {bare} (nexus, 1 hook(s))\n"
