"""What `belt version` and `belt hooks validate` import, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"
SERVER_AND_HTTP = {"httpx", "httpcore", "starlette", "uvicorn", "anyio", "h11"}

# Runs belt's console-script entry point, then reports the modules it loaded.
PROBE = """
import json, sys
sys.argv = ["belt", *sys.argv[1:]]
try:
    from belt.cli import main
    main()
finally:
    sys.__stderr__.write("MODULES " + json.dumps(sorted(sys.modules)))
"""


def imported(*args: str, home: Path, cwd: Path | None = None) -> set[str]:
    """The modules ``belt ARGS`` imports, run in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env={"BELT_HOME": str(home), "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
        cwd=cwd,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = proc.stderr[proc.stderr.index("MODULES ") + len("MODULES ") :]
    return set(json.loads(report))


def loaded(*args: str, home: Path) -> set[str]:
    """The top-level packages ``belt ARGS`` imports, run in a fresh interpreter."""
    return {module.split(".")[0] for module in imported(*args, home=home)}


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


PLATFORM_SCENARIO = """
[agent]
name = "startup"
hooks = [{ event = "agent.tool_call", type = "webhook", handler = "py:guard.py:guard" }]

[[turns]]
user = "go"
model = [
  { say = "working", tool_calls = [{ name = "write_file", arguments = {}, result = "ok" }] },
  { say = "done" },
]

[[expect]]
tool = "write_file"
status = "completed"
"""
# Off the path of a platform scenario with a synchronous py: handler: the Nexus engine (and its
# executor inbox), the event loop (only an async handler needs it), what http.cookiejar
# loads (only a webhook's client needs it), the XML writer (only --junit-xml needs it) and the
# process pool (only -j N needs it).
NOT_FOR_A_PLATFORM_RUN = {"belt.engine.nexus", "belt.executor.inbox", "asyncio", "ssl"}
NOT_FOR_A_PLATFORM_RUN |= {"http.client", "http.cookiejar", "urllib.request"}
NOT_FOR_A_PLATFORM_RUN |= {"xml.etree.ElementTree", "multiprocessing", "concurrent.futures.process"}


@pytest.mark.parametrize("command", [["test"], ["sim", "run"]], ids=["test", "sim-run"])
def test_a_platform_run_loads_no_nexus_engine_event_loop_or_http_client(
    tmp_path: Path, command: list[str]
) -> None:
    (tmp_path / "guard.py").write_text("def guard(payload):\n    return None\n")
    (tmp_path / "scenario.toml").write_text(PLATFORM_SCENARIO)
    modules = imported(*command, "scenario.toml", home=tmp_path / "home", cwd=tmp_path)
    assert {"belt.engine.platform", "belt.handlers.inprocess"} <= modules
    assert modules.isdisjoint(NOT_FOR_A_PLATFORM_RUN), modules & NOT_FOR_A_PLATFORM_RUN
