"""A pytest plugin for hook tests, registered as ``belt`` (entry point ``pytest11``).

``belt_scenario`` runs a scenario (a file or a dict; a handler may be a callable) in a fresh store
and returns a :class:`ScenarioRun` to query; ``belt_serve`` starts ``belt serve`` on a free port.
A failed test ends with its scenarios' transcripts; ``--belt-isolate`` runs each in a worker.
"""

from __future__ import annotations

import copy
import itertools
import re
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest

from belt.display.render import merged_excerpt_lines, snapshot_lines, transcript_lines
from belt.errors import BeltError
from belt.reading.matching import value_matcher
from belt.records.journal import JOURNAL, SERVE, ServeLine
from belt.store import Store
from belt.testing.snapshot import DIRECTORY as SNAPSHOTS
from belt.testing.snapshot import compare, on_virtual_clock, snapshot_path, snapshot_text
from belt.testing.workers import run_all
from belt.usercode.loader import find_named_file, import_deadline

if TYPE_CHECKING:
    from belt.testing.expect import Outcome
    from belt.testing.suite import ScenarioResult
    from belt.wire.dto import InterruptJSON

handlers = SimpleNamespace()  # the callables given to belt, as py:belt.testing.plugin:handlers.X
_numbers = itertools.count(1)
REGISTERED = re.compile(rf"py:{re.escape(__name__)}:handlers\.(\w+?)_\d+\b")
_lock = threading.Lock()

Target = str | Callable[..., Any]


def register(func: Callable[..., Any]) -> str:
    """Make ``func`` reachable as an in-process handler; returns its ``py:`` reference."""
    base = re.sub(r"\W", "_", getattr(func, "__name__", "handler")).strip("_") or "handler"
    with _lock:
        name = f"{base}_{next(_numbers)}"
        setattr(handlers, name, func)
    return f"py:{__name__}:handlers.{name}"


def unregister(reference: str) -> None:
    """Forget a callable :func:`register` made reachable."""
    name = reference.rpartition(".")[2]
    with _lock:
        vars(handlers).pop(name, None)


class PathWarning(FutureWarning):
    """A file a test names was found from the current directory only (the next release won't)."""


class ExpectationFailed(AssertionError):
    """An expectation that did not hold, reported at the test's line without belt's source."""


@dataclass(frozen=True)
class FailureRepr:
    """A failed expectation as pytest shows it: the test's line, then what belt found; its own
    ``reprcrash`` (where, and the first line that pytest's short summary and JUnit read)."""

    path: str
    lineno: int
    statement: str
    text: str

    @property
    def reprcrash(self) -> FailureRepr:
        """Itself: it has the ``path``, ``lineno`` and ``message`` pytest reads of a crash."""
        return self

    @property
    def message(self) -> str:
        """The first line of what belt found."""
        return self.text.splitlines()[0] if self.text else "an expectation failed"

    def toterminal(self, tw: Any) -> None:
        """Write the report (pytest calls this with its terminal writer)."""
        first, *rest = str(self).splitlines()
        tw.line(first, bold=True)
        for line in rest:
            tw.line(line, red=line.startswith("expected"))

    def __str__(self) -> str:
        return "\n".join([f"{self.path}:{self.lineno}: {self.statement}", "", self.text])


def failure_repr(excinfo: pytest.ExceptionInfo[BaseException]) -> FailureRepr:
    """An ExpectationFailed's report, placed at the innermost frame outside belt."""
    package = str(Path(__file__).resolve().parent.parent)
    frames = [e for e in excinfo.traceback if not str(e.path).startswith(package)]
    entry = frames[-1] if frames else excinfo.traceback[-1]
    statement = str(entry.statement).strip() if entry.statement else ""
    return FailureRepr(str(entry.path), entry.lineno + 1, statement, str(excinfo.value))


@dataclass(eq=False, repr=False)
class ScenarioRun:
    """One scenario the fixture ran: its report, and readable queries of it."""

    result: ScenarioResult
    virtual_clock: bool = field(default=False, kw_only=True)
    snapshot_file: Path | None = field(default=None, kw_only=True)
    update_snapshots: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        from belt.testing.expect import Facts  # noqa: PLC0415 - start-up: pytest loads this plugin

        if self.result.report is None:
            raise ValueError("a scenario that did not run has no report")
        self.report = self.result.report
        self.facts = Facts(self.report)

    @property
    def snapshot(self) -> str:
        """The record as ``belt test --snapshot`` stores it (``belt.testing.snapshot``)."""
        text = snapshot_text(self.report, virtual_clock=self.virtual_clock)
        # A callable's reference is numbered in the order the process registered it.
        return REGISTERED.sub(lambda m: f"py:{__name__}:handlers.{m.group(1)}", text)

    def assert_snapshot(self, path: str | Path | None = None) -> None:
        """Compare the record with its stored snapshot; AssertionError naming what changed.

        ``path``: by default ``__snapshots__/FILE.json`` beside a scenario file, or
        ``__snapshots__/TEST.json`` beside the test for a dict."""
        if (where := Path(path) if path is not None else self.snapshot_file) is None:
            raise ValueError("give the snapshot's path")
        comparison = compare(where, self.snapshot, update=self.update_snapshots)
        if comparison.failed:
            lines = [text for text, _ in snapshot_lines(comparison.to_json(), update=UPDATE_OPTION)]
            raise AssertionError("\n".join(lines))

    @property
    def transcript(self) -> str:
        """The transcript as ``belt sim show`` prints it."""
        return "\n".join(text for text, _ in transcript_lines(self.report))

    def rows(self, **fields: object) -> list[dict[str, object]]:
        """The transcript rows whose fields equal or match (globs, ``re:``) the ones given."""
        return [item.fields for item in self.facts.rows() if _fits(item.fields, fields)]

    @property
    def state(self) -> str | None:
        """The state of the last run of the scenario's own chat."""
        return str(run["state"]) if (run := self.facts.run(None)) else None

    @property
    def states(self) -> list[str]:
        """The state of each run of the scenario's own chat, in turn order."""
        return [str(run["state"]) for run in self.facts.own_runs]

    @property
    def continuations(self) -> int:
        """Nexus: the stop continuations of the last execution."""
        from belt.testing.expect import run_continuations  # noqa: PLC0415 - start-up: pytest loads this plugin

        return run_continuations(run) if (run := self.facts.run(None)) else 0

    @property
    def hold(self) -> str | None:
        """Why the last run is held (``hook_gate``, ``timeout``...), or None when it is not."""
        from belt.testing.expect import run_hold  # noqa: PLC0415 - start-up: pytest loads this plugin

        hold = run_hold(run) if (run := self.facts.run(None)) else None
        return str(hold) if hold is not None else None

    def hook_runs(self, event: str | None = None, **fields: object) -> list[dict[str, object]]:
        """The hook runs, in order; only those on ``event`` and fitting ``fields`` when given."""
        wanted = fields if event is None else {**fields, "event": event}
        return [item.fields for item in self.facts.hook_runs() if _fits(item.fields, wanted)]

    def decisions(self, event: str, **fields: object) -> list[str]:
        """The decision of every hook run on ``event``, in order."""
        return [str(run["decision"]) for run in self.hook_runs(event, **fields)]

    def fired(self, event: str) -> int:
        """How many times the scenario's own chat reached the boundary of ``event``."""
        return self.facts.fired(event, None)

    def tool_calls(self, name: str | None = None, **arguments: object) -> list[dict[str, object]]:
        """The tool calls, in order; only those of ``name`` whose arguments fit when given."""
        calls = [item.fields for item in self.facts.tools()]
        named = [call for call in calls if name is None or call["tool"] == name]
        return [call for call in named if _fits(call["arguments"], arguments)]

    def tool_status(self, name: str, **arguments: object) -> str:
        """The status of the first call of ``name`` whose arguments fit (LookupError: none)."""
        if not (calls := self.tool_calls(name, **arguments)):
            made = ", ".join(str(c["tool"]) for c in self.tool_calls()) or "none"
            wanted = arguments or "any arguments"
            raise LookupError(f"no call of {name} with {wanted}; made: {made}")
        return str(calls[0]["status"])

    def injections(self, turn: int) -> list[str]:
        """The text of every injection in the context of model turn ``turn`` (1, 2, ...)."""
        found = self.facts.injections()
        return [str(item.fields["injection"]) for item in found if turn in item.fields["turns"]]

    def injections_by_turn(self) -> dict[int, list[str]]:
        """For each model turn that had any, the text of the injections in its context."""
        turns = {turn for item in self.facts.injections() for turn in item.fields["turns"]}
        return {turn: self.injections(turn) for turn in sorted(turns)}

    @property
    def interrupts(self) -> list[InterruptJSON]:
        """The interrupts gates opened (InterruptDTOs), settled or not."""
        return list(self.report.get("interrupts") or [])

    def expect(self, **expectation: Any) -> None:
        """Check one expectation of ``[[expect]]``; AssertionError saying what happened instead."""
        from belt.testing.expect import check, check_expectations  # noqa: PLC0415 - start-up: pytest loads this plugin
        from belt.wire.validate import Findings  # noqa: PLC0415 - start-up: pytest loads this plugin

        findings = Findings()
        compiled = check_expectations([expectation], self.facts.speaks.name, findings)
        if not findings.ok:
            raise ValueError("; ".join(findings.problems))
        outcome = check(compiled[0], self.facts)
        if not outcome.passed:
            raise ExpectationFailed(self.explain_all([outcome]))

    def explain_all(self, outcomes: list[Outcome]) -> str:
        """Failed expectations, what happened instead, then one transcript excerpt for them all."""
        lines = []
        for outcome in outcomes:
            lines += [f"expected {outcome.expectation.text}", f"found: {outcome.found}"]
        excerpts = [self.result.excerpt(outcome) for outcome in outcomes]
        lines.append("transcript:")
        lines += [f"  {text}" for text, _ in merged_excerpt_lines(self.facts.speaks.name, excerpts)]
        return "\n".join(lines)


def _fits(fields: dict[str, object], wanted: dict[str, object]) -> bool:
    """True when every wanted key is in ``fields`` and matches (strings as globs or ``re:``)."""
    from belt.wire.validate import Findings  # noqa: PLC0415 - start-up: pytest loads this plugin

    for key, pattern in wanted.items():
        matcher = value_matcher(pattern, key, Findings()) or (lambda found: found == pattern)  # noqa: B023
        if key not in fields or not matcher(fields[key]):
            return False
    return True


def find_file(path: str | Path, directory: Path, spelling: str) -> Path:
    """A file a test names, relative to the test file's ``directory`` (InvalidInput if none)."""
    where = spelling.partition("(")[0]
    found = find_named_file(str(path), directory, where=where, spell=spelling.format)
    if found.warning:
        warnings.warn(found.warning, PathWarning, stacklevel=3)
    return found.path


@dataclass
class ScenarioRunner:
    """The ``belt_scenario`` fixture: call it with a scenario to run it."""

    directory: Path
    name: str
    update_snapshots: bool = False  # pytest --belt-snapshot-update
    keep: Path | None = None  # pytest --belt-keep DIR
    isolate: bool = False  # pytest --belt-isolate
    runs: list[ScenarioRun] = field(default_factory=list)
    references: list[str] = field(default_factory=list)

    def __call__(
        self,
        scenario: str | Path | dict[str, object],
        *,
        routes: dict[str, Target] | None = None,
        executors: dict[str, Target] | None = None,
        hooks_file: str | Path | None = None,
        check: bool = True,
        allow_network: bool = False,
    ) -> ScenarioRun:
        """Run ``scenario`` (a file, or a dict in the shape of a scenario file) in a fresh store.

        ``routes`` and ``executors`` take callables or targets; with ``check``, the scenario's own
        ``[[expect]]`` tables must hold; a target off this machine fails unless ``allow_network``.
        """
        from belt.declaring.declarations import read_document  # noqa: PLC0415 - start-up: pytest loads this plugin
        from belt.engine.scenario import scenario_from_document  # noqa: PLC0415 - start-up: pytest loads this plugin
        from belt.testing.suite import run_loaded  # noqa: PLC0415 - start-up: pytest loads this plugin

        try:
            if isinstance(scenario, dict):
                document: Any = copy.deepcopy(scenario)
                source, directory = self.name, self.directory
                safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name.removesuffix(" (scenario)"))
                snapshot_file = self.directory / SNAPSHOTS / f"{safe[:100]}.json"
            else:
                scenario = find_file(scenario, self.directory, 'belt_scenario("{}")')
                document = read_document(scenario, kind="scenario")
                source, directory = str(scenario), scenario.parent
                snapshot_file = snapshot_path(scenario)
            if hooks_file is not None:
                spelling = 'belt_scenario(..., hooks_file="{}")'
                hooks_file = find_file(hooks_file, self.directory, spelling)
            if isinstance(document, dict):  # its callables registered as handlers
                for hook in (document.get("agent") or {}).get("hooks") or []:
                    if isinstance(hook, dict) and callable(hook.get("handler")):
                        hook["handler"] = self.target(hook["handler"])
                if executors:
                    given = {tool: self.target(target) for tool, target in executors.items()}
                    document["executors"] = {**(document.get("executors") or {}), **given}
            loaded = scenario_from_document(document, source, directory, hooks_file=hooks_file)
        except BeltError as exc:
            problems = "".join(f"\n  {problem}" for problem in exc.problems)
            pytest.fail(f"{exc.message}{problems}", pytrace=False)
        for warning in getattr(loaded, "warnings", []):
            warnings.warn(warning, PathWarning, stacklevel=2)
        specs = [f"{prefix}={self.target(target)}" for prefix, target in (routes or {}).items()]
        running = partial(
            run_loaded, source, loaded, routes=specs, allow_network=allow_network, keep=self.keep
        )
        result = self.isolated(running) if self.isolate else running()
        if result.status == "error":
            pytest.fail(f"the scenario could not run: {result.error}", pytrace=False)
        run = ScenarioRun(
            result,
            virtual_clock=on_virtual_clock(result.report or {}, document),
            snapshot_file=snapshot_file,
            update_snapshots=self.update_snapshots,
        )
        self.runs.append(run)
        if check and result.failures:
            raise ExpectationFailed(run.explain_all(result.failures))
        return run

    def isolated(self, run: Callable[[], ScenarioResult]) -> ScenarioResult:
        """``run`` in a supervised worker process; a worker ended or harmed fails the test."""
        from belt.testing.suite import IMPORT_TIMEOUT  # noqa: PLC0415 - start-up: pytest loads this plugin

        def step() -> ScenarioResult:
            with import_deadline(IMPORT_TIMEOUT):
                return run()

        (result,) = run_all(step, [()], jobs=1, lost=lambda item, cause: cause, whole=True)
        if isinstance(result, str):
            pytest.fail(f"the scenario could not run: {result}", pytrace=False)
        return cast("ScenarioResult", result)

    def target(self, target: Target) -> str:
        """A target as given, or a callable's ``py:`` reference (registered for this test)."""
        if not callable(target):
            return str(target)
        self.references.append(reference := register(target))
        return reference

    def close(self) -> None:
        """Forget the callables this test registered."""
        for reference in self.references:
            unregister(reference)


@pytest.fixture
def belt_scenario(request: pytest.FixtureRequest) -> Iterator[ScenarioRunner]:
    """Run scenarios (files or dicts) in fresh stores; see :class:`ScenarioRunner`."""
    runner = ScenarioRunner(
        Path(request.path).parent,
        f"{request.node.name} (scenario)",
        update_snapshots=bool(request.config.getoption("belt_snapshot_update")),
        keep=request.config.getoption("belt_keep"),
        isolate=bool(request.config.getoption("belt_isolate")),
    )
    with closing(runner):
        yield runner


@dataclass
class Served:
    """One ``belt serve`` the fixture started: where it listens, and its journal."""

    url: str
    store: Store

    @property
    def hooks_url(self) -> str:
        """The URL of its hook route (``/hooks``)."""
        return f"{self.url}/hooks"

    def journal(self) -> list[ServeLine]:
        """Every hook request it answered, with its answer, in order."""
        return cast(list[ServeLine], self.store.read_log(JOURNAL, SERVE))


@dataclass
class ServeStarter:
    """The ``belt_serve`` fixture: call it to start a server; all stop when the test ends."""

    directory: Path = field(default_factory=Path)  # the test file's: relative paths start here
    stops: ExitStack = field(default_factory=ExitStack)

    def __call__(
        self,
        *,
        policy: str | Path | None = None,
        handler: Target | None = None,
        secret: str | None = None,
    ) -> Served:
        """Start ``belt serve`` with a policy file, a handler (a callable or ``MODULE:FUNC``), or
        neither (allow all)."""
        import uvicorn  # noqa: PLC0415 - start-up: pytest loads this plugin

        from belt.handlers.inprocess import load_handler, locate_handler  # noqa: PLC0415 - start-up: pytest loads this plugin
        from belt.rules.policy import load_policy  # noqa: PLC0415 - start-up: pytest loads this plugin
        from belt.server.app import create_app  # noqa: PLC0415 - start-up: pytest loads this plugin
        from belt.server.deciders import handler_decider, policy_decider  # noqa: PLC0415 - start-up: pytest loads this plugin
        from belt.server.listen import bind  # noqa: PLC0415 - start-up: pytest loads this plugin

        if policy is not None and handler is not None:
            raise ValueError("give policy or handler, not both")
        decide = None
        try:
            if policy is not None:
                where = find_file(policy, self.directory, 'belt_serve(policy="{}")')
                decide = policy_decider(load_policy(where))
            elif callable(handler):
                decide = handler_decider(handler)
            elif handler is not None:
                spec = "py:" + handler.removeprefix("py:")
                place = locate_handler(spec, self.directory, where="belt_serve")
                if place.warning:
                    warnings.warn(place.warning, PathWarning, stacklevel=2)
                decide = handler_decider(
                    load_handler(place.spec, where="belt_serve", root=place.root)
                )
        except BeltError as exc:
            pytest.fail(exc.message, pytrace=False)
        # The stops run last to first: the server, its thread, its socket, its directory.
        home = tempfile.TemporaryDirectory(prefix="belt-serve-", ignore_cleanup_errors=True)
        store = Store(Path(self.stops.enter_context(home)), shapes=True)
        app = create_app(decide=decide, store=store, secret=secret, sweep_interval=0)
        sock = self.stops.enter_context(bind("127.0.0.1", 0))
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on", ws="none"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        self.stops.callback(thread.join, 10)
        self.stops.callback(setattr, server, "should_exit", True)
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("belt serve did not start")
            time.sleep(0.005)
        return Served(f"http://127.0.0.1:{sock.getsockname()[1]}", store)


@pytest.fixture
def belt_serve(request: pytest.FixtureRequest) -> Iterator[ServeStarter]:
    """Start ``belt serve`` on free ports; see :class:`ServeStarter`."""
    starter = ServeStarter(Path(request.path).parent)
    with starter.stops:  # every server this test started stops
        yield starter


UPDATE_OPTION = "pytest --belt-snapshot-update"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--belt-snapshot-update``, ``--belt-keep DIR`` and ``--belt-isolate``."""
    group = parser.getgroup("belt")
    group.addoption(
        "--belt-snapshot-update",
        action="store_true",
        help="belt: write the snapshots run.assert_snapshot() compares, instead of comparing",
    )
    group.addoption(
        "--belt-keep",
        metavar="DIR",
        type=Path,
        help="belt: keep each scenario's records on disk, a state directory of its own under "
        "DIR, as belt test --keep does (run.result.kept names it), instead of in memory",
    )
    group.addoption(
        "--belt-isolate",
        action="store_true",
        help="belt: run each belt_scenario in a supervised worker process, as belt test does: a "
        "handler that ends or harms it (os._exit, a signal, a crash) fails that test only",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Report a failed expectation as what belt found; a failed test ends with its transcripts."""
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(ExpectationFailed):
        report.longrepr = failure_repr(call.excinfo)  # type: ignore[assignment]
    runner = getattr(item, "funcargs", {}).get("belt_scenario")
    if report.when == "call" and report.failed and isinstance(runner, ScenarioRunner):
        for number, run in enumerate(runner.runs, start=1):
            title = "belt transcript" if len(runner.runs) == 1 else f"belt transcript {number}"
            report.sections.append((title, run.transcript))
    return report
