"""What `belt version` and `belt hooks validate` import, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"
SERVER_AND_HTTP = {"httpx", "httpcore", "starlette", "uvicorn", "anyio", "h11"}

# Runs belt's console-script entry point, then reports the top-level packages it loaded.
PROBE = """
import json, sys
sys.argv = ["belt", *sys.argv[1:]]
try:
    from belt.cli import main
    main()
finally:
    sys.__stderr__.write("MODULES " + json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def loaded(*args: str, home: Path) -> set[str]:
    """The top-level packages ``belt ARGS`` imports, run in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env={"BELT_HOME": str(home), "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = proc.stderr[proc.stderr.index("MODULES ") + len("MODULES ") :]
    return set(json.loads(report))


def test_the_probe_sees_what_a_command_imports(tmp_path: Path) -> None:
    assert {"belt", "typer", "pydantic"} <= loaded(
        "hooks", "validate", str(EXAMPLES / "hooks.json"), home=tmp_path
    )


def test_version_imports_no_pydantic_rich_http_or_server(tmp_path: Path) -> None:
    modules = loaded("version", home=tmp_path)
    assert "belt" in modules
    assert modules.isdisjoint(SERVER_AND_HTTP | {"pydantic", "pydantic_core", "rich"})


def test_resolving_a_gate_imports_no_event_loop_pydantic_or_server(tmp_path: Path) -> None:
    from belt.records.interrupts import create_interrupt
    from belt.store import Store

    gate = create_interrupt(
        store=Store(tmp_path / "store"), run_id="ar_r", chat_id="ch_c", event="agent.tool_call"
    )
    modules = loaded("interrupt", "resolve", gate["id"], "allow", home=tmp_path)
    assert modules.isdisjoint(SERVER_AND_HTTP | {"asyncio", "pydantic", "rich"})


@pytest.mark.parametrize(
    "files",
    [["hooks.json", "hooks.toml"], ["nexus-profile.json", "nexus-hooks.toml"]],
    ids=["platform", "nexus"],
)
def test_validate_imports_no_http_or_server(tmp_path: Path, files: list[str]) -> None:
    modules = loaded("hooks", "validate", *(str(EXAMPLES / f) for f in files), home=tmp_path)
    assert modules.isdisjoint(SERVER_AND_HTTP)


@pytest.mark.parametrize(
    ("script", "args", "expected"),
    [("belt", ["version"], "belt "), ("rho", ["--help"], "Usage: rho ")],
)
def test_console_scripts_run(tmp_path: Path, script: str, args: list[str], expected: str) -> None:
    path = Path(sys.executable).parent / script
    if not path.exists():
        pytest.skip(f"no {script} console script beside {sys.executable}")
    proc = subprocess.run(
        [str(path), *args],
        capture_output=True,
        text=True,
        env={"BELT_HOME": str(tmp_path), "NO_COLOR": "1", "TERM": "dumb", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout
