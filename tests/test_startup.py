"""What `belt version` and `belt hooks validate` import, in a fresh interpreter."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from fnmatch import fnmatch
from importlib.util import find_spec
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"
SERVER_AND_HTTP = {"httpx", "httpcore", "starlette", "uvicorn", "anyio", "h11"}

# Runs belt's console-script entry point, then reports the modules it loaded (and, after them,
# the pydantic models of belt's modules that were built). `belt test` runs its scenarios in
# worker processes: a worker reports what it holds once it ran a scenario file (WORKER ...).
PROBE = """
import json, sys

def report(prefix=""):
    sys.__stderr__.write(prefix + "MODULES " + json.dumps(sorted(sys.modules)))
    if "pydantic" in sys.modules:
        from pydantic import BaseModel
        models = [
            f"{name}.{attribute}"
            for name, module in list(sys.modules.items())
            if name.startswith("belt.") and module is not None
            for attribute, value in vars(module).items()
            if isinstance(value, type) and issubclass(value, BaseModel)
            and value.__module__ == name and value.__pydantic_complete__
        ]
        sys.__stderr__.write("\\nMODELS " + json.dumps(sorted(models)) + "\\nEND\\n")

if sys.argv[1:2] == ["test"]:
    import belt.testing.suite as suite
    run_file = suite.run_file

    def reporting(*args, **kwargs):
        try:
            return run_file(*args, **kwargs)
        finally:
            report("WORKER ")
            sys.__stderr__.flush()

    suite.run_file = reporting
sys.argv = ["belt", *sys.argv[1:]]
try:
    from belt.cli import main
    main()
finally:
    report()
"""


def probed(*args: str, home: Path, cwd: Path | None = None) -> tuple[set[str], set[str]]:
    """The modules ``belt ARGS`` imports, run in a fresh interpreter, and the pydantic models of
    belt's own that it built."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env={"BELT_HOME": str(home), "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
        cwd=cwd,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    # What the process that ran a scenario held: belt test's first worker, else belt's own.
    marker = "WORKER MODULES " if "WORKER MODULES " in proc.stderr else "MODULES "
    report = proc.stderr[proc.stderr.index(marker) + len(marker) :].split("\nEND", 1)[0]
    modules, _, models = report.partition("\nMODELS ")
    return set(json.loads(modules)), set(json.loads(models or "[]"))


def packages(modules: frozenset[str]) -> set[str]:
    """The top-level packages of ``modules``."""
    return {module.split(".")[0] for module in modules}


Probe = Callable[..., tuple[frozenset[str], frozenset[str]]]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    """``probed`` of ``belt ARGS``, run once per command line in this module (each with a state
    directory of its own), in a folder holding the platform scenario and its handler: the same
    command imports the same, so the tests asking about one command share its process."""
    folder = tmp_path_factory.mktemp("probes")
    (folder / "guard.py").write_text("def guard(payload):\n    return None\n")
    (folder / "scenario.toml").write_text(PLATFORM_SCENARIO)

    @functools.cache
    def probe(*args: str) -> tuple[frozenset[str], frozenset[str]]:
        home = tmp_path_factory.mktemp("home")
        modules, models = probed(*args, home=home, cwd=folder)
        return frozenset(modules), frozenset(models)

    return probe


@pytest.fixture(scope="module")
def gate_commands(tmp_path_factory: pytest.TempPathFactory) -> dict[str, frozenset[str]]:
    """What ``belt interrupt list`` imports over a state directory holding one pending gate, and
    then ``belt interrupt resolve`` of that gate."""
    from belt.records.interrupts import create_interrupt
    from belt.store import Store

    home = tmp_path_factory.mktemp("gated")
    gate = create_interrupt(
        store=Store(home / "store"), run_id="ar_r", chat_id="ch_c", event="agent.tool_call"
    )
    listed, _ = probed("interrupt", "list", home=home)
    resolved, _ = probed("interrupt", "resolve", gate["id"], "allow", home=home)
    return {"list": frozenset(listed), "resolve": frozenset(resolved)}


def validate(*files: str) -> tuple[str, ...]:
    """The arguments of ``belt hooks validate`` of ``files`` of examples/."""
    return ("hooks", "validate", *(str(EXAMPLES / name) for name in files))


def test_the_probe_sees_what_a_command_imports(probe: Probe) -> None:
    modules, _ = probe(*validate("hooks.json", "hooks.toml"))
    assert {"belt", "typer", "pydantic"} <= packages(modules)


def test_version_imports_no_pydantic_rich_http_or_server(probe: Probe) -> None:
    modules = packages(probe("version")[0])
    assert "belt" in modules
    assert modules.isdisjoint(SERVER_AND_HTTP | {"pydantic", "pydantic_core", "rich"})


def test_resolving_a_gate_imports_no_event_loop_or_server(
    gate_commands: dict[str, frozenset[str]],
) -> None:
    modules = packages(gate_commands["resolve"])
    # pydantic is loaded: typer coerces a command's arguments with it.
    assert modules.isdisjoint(SERVER_AND_HTTP | {"asyncio", "rich"})


@pytest.mark.parametrize(
    "files",
    [["hooks.json", "hooks.toml"], ["nexus-profile.json", "nexus-hooks.toml"]],
    ids=["platform", "nexus"],
)
def test_validate_imports_no_http_or_server(probe: Probe, files: list[str]) -> None:
    assert packages(probe(*validate(*files))[0]).isdisjoint(SERVER_AND_HTTP)


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
# loads (only a webhook's client needs it), the XML writer (only --junit-xml needs it), the
# process pool (only -j N needs it), the thread pools and the logging they load (only a child
# chat or an async hook needs them), and the registry with its SQLite search index (only a
# review, a belt:suggest hook or an agent's registry directory needs them).
NOT_FOR_A_PLATFORM_RUN = {
    "belt.dialects.nexus",
    "belt.dialects.nexus.execution_loop",
    "belt.executor.inbox",
    "asyncio",
    "ssl",
}
NOT_FOR_A_PLATFORM_RUN |= {"http.client", "http.cookiejar", "urllib.request"}
NOT_FOR_A_PLATFORM_RUN |= {"xml.etree.ElementTree", "multiprocessing", "concurrent.futures.process"}
NOT_FOR_A_PLATFORM_RUN |= {"concurrent.futures", "logging"}
NOT_FOR_A_PLATFORM_RUN |= {"belt.records.registry"}
NOT_FOR_A_PLATFORM_RUN |= {"belt.records.registry_index", "sqlite3"}


@pytest.mark.parametrize("command", [["test"], ["sim", "run"]], ids=["test", "sim-run"])
def test_a_platform_run_loads_no_nexus_engine_event_loop_or_http_client(
    probe: Probe, command: list[str]
) -> None:
    modules, _ = probe(*command, "scenario.toml")
    assert {"belt.dialects.platform.agent_loop", "belt.handlers.inprocess"} <= modules
    assert modules.isdisjoint(NOT_FOR_A_PLATFORM_RUN), modules & NOT_FOR_A_PLATFORM_RUN


def test_a_run_on_two_jobs_forks_its_workers_without_the_process_pool_modules(
    tmp_path: Path,
) -> None:
    (tmp_path / "guard.py").write_text("def guard(payload):\n    return None\n")
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.toml").write_text(PLATFORM_SCENARIO)
    modules, _ = probed(
        "test", "-j", "2", "a.toml", "b.toml", "c.toml", home=tmp_path / "home", cwd=tmp_path
    )
    pool = {"multiprocessing", "concurrent.futures", "concurrent.futures.process", "logging"}
    assert "belt.testing.workers" in modules
    assert modules.isdisjoint(pool), modules & pool


# The models a platform scenario with a py: handler is checked with: its file, its hooks, and
# the hook's answer (its record is a plain dict). Every other model of belt's (the Nexus ones,
# the scenario's parts, which the scenario's model checks within itself, the platform's other
# DTOs) is built on first use, not as its module is imported.
BUILT_FOR_A_PLATFORM_RUN = {
    "belt.engine.scenario.Scenario",
    "belt.engine.scenario.ChatSpec",
    "belt.wire.platform.LifecycleHookConfig",
    "belt.wire.platform.LifecycleHookResponse",
}


@pytest.mark.parametrize("command", [["test"], ["sim", "run"]], ids=["test", "sim-run"])
def test_a_platform_run_builds_only_the_models_it_uses(probe: Probe, command: list[str]) -> None:
    modules, models = probe(*command, "scenario.toml")
    assert {"belt.wire.nexus", "belt.engine.scenario"} <= modules  # imported, yet not built
    assert models == BUILT_FOR_A_PLATFORM_RUN


def test_a_nexus_declaration_builds_the_nexus_model_it_uses(probe: Probe) -> None:
    # Built on first use, a model is built when used (the probe sees it): the one a Nexus
    # declaration is checked with, which checks the hooks within it itself.
    _, models = probe(*validate("nexus-profile.json"))
    assert "belt.wire.nexus.LifecycleHooks" in models
    assert "belt.wire.nexus.NexusHook" not in models


def test_the_scenario_owner_default_is_the_registrys() -> None:
    from belt.engine.scenario import DEFAULT_OWNER, AgentSpec
    from belt.records import registry

    assert DEFAULT_OWNER == registry.DEFAULT_OWNER
    assert AgentSpec().owner == registry.DEFAULT_OWNER


def test_the_collector_is_paused_in_the_block_and_as_it_was_after() -> None:
    import gc

    from belt.usercode.loader import collector_paused

    assert gc.isenabled()
    young = [[] for _ in range(100)]  # what a freeze would take: the count would grow by 100
    frozen = gc.get_freeze_count()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    # Nothing imported: nothing frozen. The count can fall meanwhile (a frozen object another
    # thread of the process let go of leaves it), never grow without a freeze.
    assert gc.get_freeze_count() <= frozen
    assert len(young) == 100
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("an import failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # paused by its caller: left so
    finally:
        gc.enable()


def test_what_the_process_holds_is_frozen_after_an_import_in_the_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import importlib

    from belt.usercode.loader import collector_paused

    (tmp_path / "belt_startup_probe.py").write_text("VALUE = [1, 2, 3]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "belt_startup_probe", raising=False)
    frozen = gc.get_freeze_count()
    try:
        with collector_paused():
            importlib.import_module("belt_startup_probe")
        assert gc.get_freeze_count() > frozen
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        sys.modules.pop("belt_startup_probe", None)


# Whether the process is frozen, before anything froze it, frozen by hand, and after belt's
# imports froze it; then a pool run once they did, with counting the frozen objects refused.
FROZEN_PROBE = """
import gc, json
import belt.usercode.loader as loader
from belt.testing.workers import run_all

before = loader.frozen()
gc.freeze()
by_hand = loader.frozen()
gc.unfreeze()
with loader.collector_paused():
    import colorsys
after = loader.frozen()

def refused():
    raise AssertionError("counted every frozen object")

gc.get_freeze_count = refused
pooled = list(run_all(abs, [(-1,), (-2,), (-3,)], jobs=2))
print(json.dumps([before, by_hand, after, pooled]))
"""


def test_whether_the_process_is_frozen_is_known_without_counting_once_belt_froze_it(
    tmp_path: Path,
) -> None:
    proc = run_probe(FROZEN_PROBE, tmp_path)
    assert json.loads(proc.stdout) == [False, True, True, [1, 2, 3]]


# Runs belt with belt.usercode.loader.collector_paused recording what was imported inside it.
PAUSE_PROBE = """
import contextlib, json, sys
import belt.usercode.loader

inside = set()
paused = belt.usercode.loader.collector_paused

@contextlib.contextmanager
def recording():
    before = set(sys.modules)
    with paused():
        yield
    inside.update(set(sys.modules) - before)

belt.usercode.loader.collector_paused = recording
sys.argv = ["belt", *sys.argv[1:]]
try:
    from belt.cli import main
    main()
finally:
    sys.__stderr__.write("INSIDE " + json.dumps([sorted(inside), sorted(sys.modules)]))
"""


@pytest.mark.parametrize("command", [["test"], ["sim", "run"]], ids=["test", "sim-run"])
def test_the_engine_is_imported_with_the_collector_paused(
    tmp_path: Path, command: list[str]
) -> None:
    # The handler's module imports one module nothing else does.
    guard = "import colorsys\n\n\ndef guard(payload):\n    return None\n"
    (tmp_path / "guard.py").write_text(guard)
    (tmp_path / "scenario.toml").write_text(PLATFORM_SCENARIO)
    proc = subprocess.run(
        [sys.executable, "-c", PAUSE_PROBE, *command, "scenario.toml"],
        capture_output=True,
        text=True,
        env={"BELT_HOME": str(tmp_path / "home"), "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    report = proc.stderr[proc.stderr.index("INSIDE ") + len("INSIDE ") :]
    inside, modules = (set(names) for names in json.loads(report))
    # (pydantic is loaded before: typer coerces the command line's arguments with it)
    assert {"belt.dialects.platform.agent_loop", "belt.engine.scenario"} <= inside
    if command == ["test"]:  # belt test imports a user's module in its worker processes only
        assert "colorsys" not in modules
    else:  # a user's module is imported with the collector as it was
        assert "colorsys" in modules
    assert "colorsys" not in inside


# Runs a pool of two workers with nothing frozen, then with what the process holds frozen.
POOL_PROBE = """
import gc, json
from belt.testing.workers import run_all

unfrozen = list(run_all(abs, [(-1,), (-2,), (-3,)], jobs=2)), gc.get_freeze_count()
gc.freeze()
frozen = list(run_all(abs, [(-1,), (-2,)], jobs=2)), gc.get_freeze_count() > 0
print(json.dumps([unfrozen, frozen]))
"""


def test_a_pool_leaves_the_process_frozen_as_it_found_it(tmp_path: Path) -> None:
    proc = run_probe(POOL_PROBE, tmp_path)
    unfrozen, frozen = json.loads(proc.stdout)
    assert unfrozen == [[1, 2, 3], 0]  # what the pool froze for its workers, thawed after
    assert frozen == [[1, 2], True]  # frozen by belt's imports before: left frozen


def run_probe(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with a state directory of its own; it must succeed."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"BELT_HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


# A comment's words beyond a `noqa: CODE` marker (PLC0415 is the marker of an import inside a
# function).
NOQA = re.compile(r"noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?")


def imports_in_functions(
    node: ast.AST, inside: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements within a function below ``node``, each once (one walk of the
    tree: an expression holds no statement)."""
    for child in ast.iter_child_nodes(node):
        if inside and isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif not isinstance(child, ast.expr):
            function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from imports_in_functions(child, inside or function)


def imports_without_a_reason(root: Path) -> list[str]:
    """Each import of belt's own modules inside a function of the package at ``root`` whose lines
    carry no comment saying why (``path:line``). An import statement holds no string, so each
    ``#`` on its lines begins a comment."""
    bare = set()
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in imports_in_functions(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""] if node.level == 0 else ["belt"]
            else:
                modules = [alias.name for alias in node.names]
            comments = [line.partition("#")[2] for line in lines[node.lineno - 1 : node.end_lineno]]
            ours = any(module.split(".")[0] == "belt" for module in modules)
            if ours and not any(NOQA.sub("", comment).strip(" #-") for comment in comments):
                bare.add(f"{path.relative_to(root.parent)}:{node.lineno}")
    return sorted(bare)


def test_an_import_of_belt_inside_a_function_says_why_on_its_line() -> None:
    # Start-up is kept at a few seams (pyproject's ruff section); an import that still sits in
    # a function says why: what the start-up path or a platform run must not load, a cycle.
    assert imports_without_a_reason(Path(__file__).parent.parent / "belt") == []


def expanded(pattern: str) -> list[str]:
    """The globs ``pattern`` names, its ``{a,b}`` alternatives expanded."""
    alternatives = re.search(r"\{([^{}]*)\}", pattern)
    if alternatives is None:
        return [pattern]
    head, tail = pattern[: alternatives.start()], pattern[alternatives.end() :]
    return [glob for one in alternatives[1].split(",") for glob in expanded(head + one + tail)]


def start_up_side() -> list[str]:
    """The modules pyproject holds to the start-up list, as globs: the negated per-file entry
    that lifts TID253 from every other file."""
    lint = tomllib.loads((EXAMPLES.parent / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    (side,) = [
        p[1:] for p, rules in lint["per-file-ignores"].items() if p[0] == "!" and "TID253" in rules
    ]
    return expanded(side)


def test_the_start_up_side_names_every_module_the_quick_commands_load(
    probe: Probe, gate_commands: dict[str, frozenset[str]]
) -> None:
    # A module moved or added on the path of belt's quick commands is held to the start-up list
    # only once pyproject names it; this says which one is not named.
    loaded = probe("version")[0] | probe("--help")[0] | gate_commands["list"]
    loaded |= gate_commands["resolve"]
    side = start_up_side()
    root = EXAMPLES.parent
    unnamed = []
    for name in sorted(m for m in loaded if m.split(".")[0] == "belt"):
        spec = find_spec(name)
        path = Path(spec.origin).relative_to(root).as_posix() if spec and spec.origin else name
        if not any(fnmatch(path, glob) for glob in side):
            unnamed.append(path)
    assert unnamed == []
