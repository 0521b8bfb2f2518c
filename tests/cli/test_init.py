"""`belt init`: what it writes passes `belt test`, `belt check` and `pytest` at once (run as a
user runs them, in processes of their own, from the directory and from another one), its
servers serve the same policy, and it never writes over a file."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from belt.errors import ExitCode
from belt.scaffold import NEXT, Framework, plan
from tests.cli.runner import belt
from tests.servers import running

BIN = Path(sys.executable).parent
VARIANTS = [(False, f) for f in Framework] + [(True, f) for f in Framework]
IDS = [f"{'nexus' if nexus else 'platform'}-{framework}" for nexus, framework in VARIANTS]
PLATFORM_FILES = ["handler.py", "scenario.toml", "props.toml", "test_handler.py", "README.md"]
NEXUS_FILES = ["tool.py", "scenario.toml", "test_tool.py", "README.md"]


@pytest.fixture
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a user's shell with this belt's bin directory on PATH (the test's
    BELT_HOME included); Hypothesis's caches shared by the session, not built once per check."""
    shared = tmp_path_factory.getbasetemp() / "hypothesis"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return {
        **environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HYPOTHESIS_STORAGE_DIRECTORY": str(shared),
    }


def run(words: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def init_args(nexus: bool, framework: Framework) -> list[str]:
    return [*(["--nexus"] if nexus else []), "--framework", framework.value]


def readme_next(directory: Path) -> list[str]:
    """The commands of the Next block of the README written into ``directory``."""
    readme = (directory / "README.md").read_text()
    block = re.search(r"## Next\n.*?```sh\n(.*?)```", readme, re.S)
    assert block, readme
    return [line for line in block.group(1).splitlines() if not line.startswith("#")]


def passed(words: list[str], done: subprocess.CompletedProcess[str], nexus: bool) -> None:
    """``words`` (belt test, belt check, pytest or belt trigger) passed, and said so."""
    out = done.stdout
    assert done.returncode == 0, (words, out, done.stderr)
    if words[:2] == ["belt", "test"]:
        assert re.search(r"^1 scenario\(s\): 1 passed in ", out, re.M), out
    elif words[:2] == ["belt", "check"]:
        assert re.search(r" 0 failed, 0 warned, 0 skipped", out), out
        if not nexus:  # both properties saw payloads, the path attacks among them
            assert re.search(r"pass  property +no deletes outside /tmp/ \(\d+", out), out
            assert re.search(r"pass  property +deletes under /tmp/ go through \(\d+", out), out
    elif "pytest" in words:
        assert re.search(r"^(=+ )?\d+ passed", out, re.M), out


def what_a_framework_changes(nexus: bool, framework: Framework) -> dict[str, str]:
    """The files of a start that are not the same text for every framework of its dialect."""
    written = {p.name: p.text for p in plan(nexus=nexus, framework=framework, name="my-hook")}
    first = {p.name: p.text for p in plan(nexus=nexus, framework=Framework.py, name="my-hook")}
    return {name: text for name, text in written.items() if first[name] != text}


@pytest.mark.parametrize(("nexus", "framework"), VARIANTS, ids=IDS)
def test_what_init_writes_passes_belt_test_belt_check_and_pytest_from_anywhere(
    nexus: bool,
    framework: Framework,
    tmp_path: Path,
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = tmp_path / "my-hook"
    monkeypatch.chdir(tmp_path)
    done = belt("init", str(directory), *init_args(nexus, framework))
    assert done.exit_code == 0, done.stderr
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        NEXUS_FILES if nexus else PLATFORM_FILES
    )

    # In the directory, in processes of their own found on PATH: the README's next commands,
    # word for word, and those belt init printed.
    commands = readme_next(directory)
    assert [c.split("  #")[0].rstrip() for c in commands] == [
        step.command for step in NEXT["nexus" if nexus else "platform"]
    ]
    assert f"next:\n  cd {directory}\n" in done.stdout
    for command in commands:
        words = shlex.split(command, comments=True)
        passed(words, run(words, directory, env), nexus)

    # From another directory, with the paths spelled from there. What these runs add is how a
    # path is read from elsewhere (a scenario's handler and a test's scenario by find_named_file
    # from the directory of the file naming it, belt check's py:DIR/... by load_callable), from
    # the texts of scenario.toml, props.toml and the test file: the same for every framework of
    # a dialect (only the handler and the README differ, as asserted here). Each framework's
    # handler is imported by the same commands in the directory, above.
    handler = "tool.py" if nexus else "handler.py"
    assert set(what_a_framework_changes(nexus, framework)) <= {handler, "README.md"}
    if framework is not Framework.py:
        return
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    hook = f"py:{directory}/{'tool.py:verify' if nexus else 'handler.py:decide'}"
    check = (
        ["belt", "check", "--executor", f"verify={hook}"]
        if nexus
        else ["belt", "check", hook, "--props", str(directory / "props.toml")]
    )
    for words in (
        ["belt", "test", str(directory)],
        [*check, "--examples", "10", "--seed", "1"],
        [sys.executable, "-m", "pytest", "-q", str(directory)],
    ):
        passed(words, run(words, elsewhere, env), nexus)


@pytest.mark.parametrize("framework", list(Framework))
def test_the_handler_denies_path_attacks_and_allows_what_is_under_tmp(
    framework: Framework, tmp_path: Path
) -> None:
    assert belt("init", str(tmp_path), "--framework", framework.value).exit_code == 0
    decide = load(tmp_path / "handler.py").decide
    for path in ("/tmp/../etc/passwd", "/tmpevil/x", "/etc/passwd", "/tmp", "/tmp/"):
        answer = decide(payload(path))
        assert answer is not None and answer["decision"] == "deny", path
    for path in ("/tmp/old.txt", "/tmp//old.txt", "//tmp/x", "/tmp/./x"):
        assert decide(payload(path)) is None, path
    assert decide({"event": "agent.turn_start", "data": {}}) is None


def payload(path: str) -> dict[str, Any]:
    return {
        "event": "agent.tool_call",
        "data": {"tool": "delete_file", "arguments": {"path": path}},
    }


def load(path: Path) -> ModuleType:
    """The module of a file belt init wrote, imported as a user's server would import it."""
    spec = importlib.util.spec_from_file_location(f"written_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Serve a written module (stdlib: its ``server(0)``; starlette: its ``app``) on a free
    port; gives a function of the module that returns the base URL."""
    stops: list[Any] = []

    def serve(module: ModuleType) -> str:
        if hasattr(module, "app"):
            context = running(module.app)
            url = context.__enter__()
            stops.append(lambda: context.__exit__(None, None, None))
            return url
        httpd = module.server(0)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        stops.append(lambda: (httpd.shutdown(), httpd.server_close(), thread.join()))
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield serve
    for stop in stops:
        stop()


SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.mark.parametrize("framework", [Framework.stdlib, Framework.starlette])
def test_the_written_webhook_server_keeps_the_contract_and_the_props_signatures_included(
    framework: Framework,
    tmp_path: Path,
    served: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path_factory.getbasetemp() / "h"))
    assert belt("init", str(tmp_path), "--framework", framework.value).exit_code == 0
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)  # read when the module is imported
    url = served(load(tmp_path / "handler.py")) + "/hooks"
    props = str(tmp_path / "props.toml")
    args = ["--event", "agent.tool_call", "--examples", "20", "--seed", "1"]
    result = belt("check", url, "--props", props, "--secret", SECRET, *args)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert re.search(r"pass  signature ", result.stdout), result.stdout
    assert re.search(r"pass  property +no deletes outside /tmp/ \(\d+", result.stdout)


@pytest.mark.parametrize("framework", [Framework.stdlib, Framework.starlette])
def test_the_written_executor_tool_server_keeps_the_contract(
    framework: Framework,
    tmp_path: Path,
    served: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path_factory.getbasetemp() / "h"))
    assert belt("init", str(tmp_path), "--nexus", "--framework", framework.value).exit_code == 0
    url = served(load(tmp_path / "tool.py")) + "/verify"
    result = belt("check", "--executor", f"verify={url}", "--examples", "10", "--seed", "1")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "stop → executor verify" in result.stdout
    # The scenario runs against the server too, as the README says.
    scenario = str(tmp_path / "scenario.toml")
    simulated = belt("sim", "run", scenario, "--executor", f"verify={url}", "--json")
    assert simulated.exit_code == 0, simulated.stderr


@pytest.mark.parametrize(("nexus", "framework"), VARIANTS, ids=IDS)
def test_the_written_python_passes_ruff(nexus: bool, framework: Framework, tmp_path: Path) -> None:
    assert belt("init", str(tmp_path), *init_args(nexus, framework)).exit_code == 0
    ruff = str(BIN / "ruff")
    rules = ["--select", "E,W,F,I,B,C4,UP", "--line-length", "100"]
    checked = subprocess.run(
        [ruff, "check", "--isolated", *rules, str(tmp_path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout
    formatted = subprocess.run(
        [ruff, "format", "--isolated", "--line-length", "100", "--check", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert formatted.returncode == 0, formatted.stdout


def test_init_writes_into_the_current_directory_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = belt("init")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PLATFORM_FILES)
    assert result.stdout.startswith("wrote 5 files in this directory\n")
    assert "cd " not in result.stdout  # already there
    assert "\n  belt test .\n" in result.stdout


def test_json_prints_what_it_wrote_and_the_next_commands(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b"
    result = belt("init", str(directory), "--nexus", "--json")
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["directory"] == str(directory)
    assert document["dialect"] == "nexus"
    assert document["framework"] == "py"
    paths = [Path(f["path"]) for f in document["files"]]
    assert sorted(p.name for p in paths) == sorted(NEXUS_FILES)
    assert all(p.is_file() and p.parent == directory for p in paths)
    assert all(f["about"] for f in document["files"])
    assert document["next"] == [f"cd {directory}", *(s.command for s in NEXT["nexus"])]


@pytest.mark.parametrize("existing", PLATFORM_FILES)
def test_a_file_that_is_there_is_named_exit_4_and_nothing_is_written(
    existing: str, tmp_path: Path
) -> None:
    (tmp_path / existing).write_text("mine\n")
    result = belt("init", str(tmp_path))
    assert result.exit_code == ExitCode.CONFLICT
    assert result.stderr.startswith(f"error: {tmp_path / existing}: already there;")
    assert "wrote nothing" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == [existing]
    assert (tmp_path / existing).read_text() == "mine\n"


def test_a_dangling_link_or_a_directory_in_the_way_counts_as_there(tmp_path: Path) -> None:
    (tmp_path / "README.md").symlink_to(tmp_path / "nowhere")
    (tmp_path / "handler.py").mkdir()
    result = belt("init", str(tmp_path))
    assert result.exit_code == ExitCode.CONFLICT
    assert f"{tmp_path / 'handler.py'}, {tmp_path / 'README.md'}: already there" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "handler.py"]
    assert not (tmp_path / "nowhere").exists()


def test_a_second_init_in_the_same_directory_changes_nothing(tmp_path: Path) -> None:
    assert belt("init", str(tmp_path), "--framework", "stdlib").exit_code == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = belt("init", str(tmp_path))
    assert result.exit_code == ExitCode.CONFLICT
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_dir_that_is_a_file_is_exit_5(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    result = belt("init", str(file))
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert result.stderr == f"error: {file}: it is a file, not a directory\n"
    result = belt("init", str(file / "hook"))
    assert result.exit_code == ExitCode.INVALID_INPUT
    assert result.stderr == f"error: {file / 'hook'}: {file} is a file, not a directory\n"
    assert file.read_text() == "mine\n"


def test_a_write_that_fails_leaves_nothing_behind(tmp_path: Path) -> None:
    # A file-size limit makes writes fail with EFBIG, as a full disk fails them with ENOSPC:
    # the hook fits, the scenario after it does not.
    first, second = plan(nexus=False, framework=Framework.py, name="hook")[:2]
    limit = len(first.text.encode()) + 1
    assert len(second.text.encode()) > limit
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from belt.cli import main\n"
        f"sys.argv = ['belt', 'init', {str(tmp_path / 'new' / 'hook')!r}]\n"
        "main()\n"
    )
    # -B: under the limit Python would install a truncated .pyc of each module it compiles (its
    # cache writer takes a short write for a whole one), and every later belt process would
    # fail to import that module ("Aborted.", from marshal's EOFError).
    done = subprocess.run([sys.executable, "-B", "-c", script], capture_output=True, text=True)
    assert done.returncode == ExitCode.INVALID_INPUT, done.stderr
    assert re.fullmatch(
        rf"error: {re.escape(str(tmp_path))}/new/hook/\w+\.\w+: cannot write it: File too "
        r"large; nothing was written\n",
        done.stderr,
    )
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_framework_is_a_usage_error(tmp_path: Path) -> None:
    result = belt("init", str(tmp_path), "--framework", "flask")
    assert result.exit_code == ExitCode.USAGE
    assert "flask" in result.stderr
    assert list(tmp_path.iterdir()) == []
