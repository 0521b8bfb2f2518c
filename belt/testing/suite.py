"""``belt test``: every scenario file with ``[[expect]]`` tables among the paths, run as a suite.

Each scenario runs in a fresh store (in memory, or under ``--keep DIR``) in a supervised worker
process; a file that cannot be read, or a handler that harms its worker, errs that scenario alone.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable, Iterable
from contextlib import closing, nullcontext, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from belt import dialects
from belt.check.writable import cannot_write
from belt.declaring.declarations import read_document
from belt.deliveries.effects import is_in_process
from belt.display.render import snapshot_lines, snapshot_update_command, unfired_text
from belt.engine.dispatch import parse_routes
from belt.engine.entrypoints import simulation_options, start_simulation, with_scenario_executors
from belt.engine.hooksummary import HOOK_FAILURE_HINT
from belt.engine.offline import OFFLINE_HINT, network_problems
from belt.engine.readback import build_report
from belt.errors import BeltError, ExitCode, InvalidInput, NotFound
from belt.handlers.inprocess import load_handler, locate_handler
from belt.outgoing import tracing
from belt.store import MemoryStore, Store
from belt.testing import expect
from belt.testing.coverage import scenario_coverage
from belt.testing.snapshot import DIRECTORY as SNAPSHOTS
from belt.testing.snapshot import Comparison, compare_result
from belt.testing.workers import run_all, shard_of
from belt.usercode.loader import import_deadline, module_key
from belt.usercode.supervisor import Preload

if TYPE_CHECKING:
    from belt.dialects.simreport import SimReport

SUFFIXES = (".toml", ".json")
DEFAULT_PATH = Path("tests")
EXCERPT_CONTEXT, EXCERPT_MAX = 3, 16  # messages around what a failed expectation is about
IMPORT_TIMEOUT = 30.0  # seconds the import of each py: module a scenario names may take


@dataclass
class ScenarioResult:
    """How one scenario of the suite went: ``pass``, ``fail`` or ``error``."""

    name: str
    status: str
    seconds: float = 0.0
    outcomes: list[expect.Outcome] = field(default_factory=list)
    error: str | None = None
    problems: list[str] = field(default_factory=list)
    invalid: bool = False
    report: SimReport | None = None
    hook_failures: list[expect.HookFailure] = field(default_factory=list)  # unnamed
    coverage: list[dict[str, object]] = field(default_factory=list)  # belt.testing.coverage's
    unfired: list[dict[str, object]] = field(default_factory=list)  # --fail-under-hooks
    kept: str | None = None  # --keep DIR: the state directory that holds its records
    snapshot: Comparison | None = None  # --snapshot
    warnings: list[str] = field(default_factory=list)  # a path found from the current directory

    @property
    def failures(self) -> list[expect.Outcome]:
        """The expectations that did not hold."""
        return [outcome for outcome in self.outcomes if not outcome.passed]

    def excerpt(self, outcome: expect.Outcome) -> list[dict[str, object]]:
        """The transcript around what a failed expectation is about (else the end of it)."""
        if self.report is None:
            return []
        messages = [dict(m) for m in self.report["chat"]["chat_messages"]]
        position = {str(m.get("id")): i for i, m in enumerate(messages)}
        spots = [position[anchor] for anchor in outcome.anchors if anchor in position]
        if not spots and outcome.runs:
            spots = [i for i, m in enumerate(messages) if m.get("agent_run_id") in outcome.runs]
        if not spots:
            return messages[-EXCERPT_MAX:]
        start = max(0, min(spots) - EXCERPT_CONTEXT)
        end = min(len(messages), max(spots) + EXCERPT_CONTEXT + 1, start + EXCERPT_MAX)
        return messages[start:end]

    def to_json(self, *, coverage: bool = False) -> dict[str, object]:
        """The result as ``belt test --json`` prints it (with ``coverage``, its hooks' too)."""
        return {
            "scenario": self.name,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "expectations": len(self.outcomes),
            "failures": [
                {**outcome.to_json(), "excerpt": self.excerpt(outcome)} for outcome in self.failures
            ],
            "error": self.error,
            "problems": self.problems,
            "invalid": self.invalid,
            "simulation": self.report["simulation"]["id"] if self.report else None,
            "dialect": self.report["simulation"]["dialect"] if self.report else None,
            "hooks": self.report.get("hook_summary") if self.report else None,
            "hook_failures": self.hook_failures,
            "unfired_hooks": self.unfired,
            **({"kept": self.kept} if self.kept else {}),
            **({"snapshot": self.snapshot.to_json()} if self.snapshot else {}),
            **({"warnings": self.warnings} if self.warnings else {}),
            **({"coverage": self.coverage} if coverage else {}),
        }


@dataclass
class SuiteResult:
    """Every scenario's result, and the exit code they make."""

    results: list[ScenarioResult]
    seconds: float
    stopped: bool = False
    shard: tuple[int, int] | None = None  # --shard K/N: (K, N)
    selected: int = 0  # the scenarios of every shard after -k (without one, those run)

    @property
    def empty_shard(self) -> bool:
        """A shard with no scenario of a suite that has some (more shards than scenarios)."""
        return self.shard is not None and not self.results and self.selected > 0

    @property
    def coverage(self) -> list[dict[str, object]]:
        """Every scenario's hooks and what their calls produced, in the order they ran."""
        return [entry for result in self.results for entry in result.coverage]

    def counted(self, status: str) -> int:
        """How many scenarios ended with ``status``."""
        return sum(1 for result in self.results if result.status == status)

    @property
    def exit_code(self) -> ExitCode:
        """5 for an invalid file or no scenario (an empty shard is fine), else 1 unless all pass."""
        if self.empty_shard:
            return ExitCode.OK
        if not self.results or any(result.invalid for result in self.results):
            return ExitCode.INVALID_INPUT
        if any(result.status != "pass" for result in self.results):
            return ExitCode.FAILURE
        return ExitCode.OK


Report = Callable[[ScenarioResult], None]
Render = Callable[[str, list[dict[str, object]]], list[str]]  # a dialect's excerpt as lines


def candidates(paths: Iterable[Path]) -> list[Path]:
    """The files among ``paths`` that may be scenarios; NotFound (exit 3) for a missing path."""
    files: list[Path] = []
    for path in paths:
        if not path.exists():
            raise NotFound(f"{path}: no such file or directory")
        files += [path] if path.is_file() else _walk(path)
    return files


def read_scenario(path: Path) -> Any:
    """The document of a scenario file with expectations, the InvalidInput reading it raised, or
    None when it is not a test."""
    try:
        document: Any = read_document(path, kind="scenario")
    except InvalidInput as exc:
        return exc
    return document if isinstance(document, dict) and document.get("expect") else None


def _walk(directory: Path) -> list[Path]:
    """The scenario-like files under ``directory``, sorted (not hidden, cached or snapshots)."""
    shown = lambda name: not name.startswith(".") and name not in ("__pycache__", SNAPSHOTS)  # noqa: E731
    files: list[Path] = []
    for top, directories, names in os.walk(directory):
        directories[:] = filter(shown, directories)
        files += [Path(top, name) for name in filter(shown, names) if name.endswith(SUFFIXES)]
    return sorted((file for file in files if file.is_file()), key=lambda path: path.parts)


def shown_name(path: Path) -> str:
    """``path`` as text, bytes that are not UTF-8 as escapes (``b\\xff.json``)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def run_suite(
    *,
    paths: list[Path],
    pattern: str | None = None,
    exitfirst: bool = False,
    routes: list[str] | None = None,
    junit_xml: Path | None = None,
    report: Report | None = None,
    render: Render | None = None,
    allow_network: bool = False,
    fail_unfired: bool = False,
    coverage: bool = False,
    snapshot: str | None = None,
    jobs: int = 1,
    shard: tuple[int, int] | None = None,
    keep: Path | None = None,
    records: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SuiteResult:
    """Run every selected scenario with expectations; ``report`` gets each result as it ends.

    With ``records`` (by default, with one job) a passing scenario keeps its whole record."""
    parse_routes(routes or [])
    with tracing.span("belt.test") as span:
        started = time.perf_counter()
        wanted = (pattern or "").casefold()  # -k: a case-insensitive substring of the name
        files = [
            p for p in candidates(paths or [DEFAULT_PATH]) if wanted in shown_name(p).casefold()
        ]
        results: list[ScenarioResult] = []
        stopped = False
        # Each file is read where it runs (a file that is not a test comes back as None), but
        # a shard is taken of the tests alone, so every file is read first.
        step = partial(
            run_file if shard is None else run_one,
            routes=routes or [],
            allow_network=allow_network,
            fail_unfired=fail_unfired,
            snapshot=snapshot,
            keep=keep,
            trace=tracing.current(),
        )
        items: list[tuple[Any, ...]] = [(path,) for path in files]
        tests = None
        if shard is not None:
            tests = [
                (path, document) for path in files if (document := read_scenario(path)) is not None
            ]
            items = shard_of(tests, shard)
        plan = partial(scenario_modules, [item[0] for item in items], routes or [])
        dialects.get(dialects.PLATFORM).loop()  # the workers start with the platform engine
        whole = jobs <= 1 if records is None else records
        told = progress or (lambda done, total: None)
        told(0, len(items))
        ran = run_all(step, items, jobs=jobs, lost=lost_result, preload=plan, whole=whole)
        for done, result in enumerate(ran, start=1):
            told(done, len(items))
            if result is None:
                continue
            results.append(result)
            if report is not None:
                report(result)
            if stopped := exitfirst and result.status != "pass":
                break
        found = len(results) if tests is None else len(tests)
        suite = SuiteResult(results, time.perf_counter() - started, stopped, shard, found)
        counts = {f"belt.test.{s}": suite.counted(s) for s in ("pass", "fail", "error")}
        tracing.set_attributes(span, {"belt.test.scenarios": found, **counts})
    if junit_xml is not None:
        write_junit(junit_xml, suite, render, coverage=coverage)
    return suite


LOST_HINT = "belt ran the other scenarios in a new worker process"
_REFERENCE = re.compile(rb"""["']py:([^"'\r\n]+)["']""")  # in a scenario file's text


def lost_result(item: tuple[Any, ...], cause: str) -> ScenarioResult:
    """The error result of a scenario whose worker process ended, or was harmed, while it ran."""
    return ScenarioResult(shown_name(item[0]), "error", error=cause, problems=[LOST_HINT])


def scenario_modules(paths: list[Path], routes: list[str]) -> list[Preload]:
    """The user's modules a suite's workers start with: the files' ``py:`` and ``--route``s."""
    named: dict[tuple[str, Path], str] = {}  # (spec, directory): where; a suite names a few
    for route in parse_routes(routes):
        if is_in_process(route.target):
            named.setdefault((route.target, Path.cwd()), f"--route {route.prefix}")
    for path in paths:
        with suppress(OSError):
            for reference in set(_REFERENCE.findall(path.read_bytes())):
                with suppress(UnicodeDecodeError):
                    named.setdefault((f"py:{reference.decode('utf-8')}", path.parent), str(path))
    wanted: dict[str, Preload] = {}
    for (spec, directory), where in named.items():
        try:
            place = locate_handler(spec, directory, where=where)
        except BeltError:
            continue
        key = module_key(place.spec)
        load = partial(load_handler, place.spec, where=where, root=place.root)
        wanted.setdefault(key, Preload(key, load, IMPORT_TIMEOUT, where))
    return list(wanted.values())


def run_file(path: Path, **options: Any) -> ScenarioResult | None:
    """``run_one`` of the scenario file ``path``; None when it is not a test."""
    document = read_scenario(path)
    return None if document is None else run_one(path, document, **options)


def run_one(
    path: Path,
    document: Any,
    *,
    fail_unfired: bool,
    snapshot: str | None,
    trace: dict[str, str] | None = None,
    **options: Any,
) -> ScenarioResult:
    """One scenario of the suite, errors its result (``options``: ``run_loaded``'s); its span is
    a child of ``trace``'s."""
    name = shown_name(path)
    started = time.perf_counter()
    with tracing.span(f"belt.test.scenario {name}", parent=trace) as span:
        with import_deadline(IMPORT_TIMEOUT):
            try:
                if name != str(path):
                    rename = "belt records a scenario by its name, rename it"
                    raise BeltError(f"{name}: the file name is not UTF-8; {rename}")
                if isinstance(document, InvalidInput):
                    raise document
                loaded, expectations = expect.read_tested(document, name, path.parent)
            except BeltError as exc:
                invalid = isinstance(exc, InvalidInput)  # a file that is not a valid scenario
                problems = list(exc.problems) if invalid else []
                seconds = time.perf_counter() - started
                result = ScenarioResult(
                    name, "error", seconds, error=exc.message, problems=problems, invalid=invalid
                )
            else:
                result = run_loaded(
                    name, loaded, started=started, expectations=expectations, **options
                )
        if fail_unfired and result.status != "error":  # a declared hook that never fired fails
            result.unfired = [entry for entry in result.coverage if not entry["fired"]]
            result.status = "fail" if result.unfired else result.status
        if snapshot is not None:
            compare_result(result, path, document, update=snapshot == "update")
        failed = f"scenario {result.status}" if result.status != "pass" else None
        tracing.set_attributes(span, {"belt.test.status": result.status}, failed)
    tracing.flush()  # a worker ends with os._exit, which runs no exit handler
    return result


def run_loaded(
    name: str,
    loaded: Any,
    *,
    routes: list[str],
    started: float | None = None,
    expectations: list[expect.Expectation] | None = None,
    allow_network: bool = False,
    keep: Path | None = None,
) -> ScenarioResult:
    """Run a read scenario in a fresh store (in memory, or under ``keep``), check its expectations.

    Unless ``allow_network``, a target not on this machine is its error."""
    home = kept_home(keep, name) if keep is not None else None
    started = time.perf_counter() if started is None else started
    kept = None if home is None else str(home)
    warnings = list(getattr(loaded, "warnings", []))

    def ended(status: str, **fields: Any) -> ScenarioResult:
        seconds = time.perf_counter() - started
        return ScenarioResult(name, status, seconds, **fields, kept=kept, warnings=warnings)

    try:
        if expectations is None:
            expectations = expect.expectations_of(loaded)
    except BeltError as exc:
        return ended("error", error="; ".join([exc.message, *exc.problems]))
    on_disk = nullcontext(Store(home / "store", shapes=True)) if home is not None else None
    with on_disk or closing(MemoryStore(shapes=True)) as store:  # a store in memory is closed
        try:
            executors = with_scenario_executors(getattr(loaded.scenario, "executors", {}), [])
            loop = dialects.get(loaded.dialect).loop()
            options = simulation_options(
                store, loop, executors=executors, fail_closed=False, report=None, routes=routes
            )
            problems = [] if allow_network else network_problems(loaded, options.routes, executors)
            if problems:
                return ended(
                    "error",
                    error=f"{problems[0]} (belt test runs offline)",
                    problems=[*problems[1:], OFFLINE_HINT],
                    coverage=scenario_coverage(name, loaded, None),
                )
            sim, _ = start_simulation(store, loaded, options)
            report = build_report(store, sim)
        except BeltError as exc:
            detail = "; ".join([exc.message, *exc.problems])
            return ended("error", error=detail, coverage=scenario_coverage(name, loaded, None))
    outcomes = expect.evaluate(expectations, report)
    unnamed: list[expect.HookFailure] = []
    if getattr(loaded.scenario, "hook_errors", "fail") != "allow":
        unnamed = expect.unnamed_failures(expectations, report)
    return ended(
        "pass" if all(outcome.passed for outcome in outcomes) and not unnamed else "fail",
        outcomes=outcomes,
        report=report,
        hook_failures=unnamed,
        coverage=scenario_coverage(name, loaded, report),
    )


def kept_home(keep: Path, name: str) -> Path:
    """A new directory under ``keep`` for scenario ``name`` (``examples_tests_guard.toml-2``)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.")[:100] or "scenario"
    try:
        keep.mkdir(mode=0o700, parents=True, exist_ok=True)
        home, number = keep / base, 1
        while True:
            with suppress(FileExistsError):
                home.mkdir(mode=0o700)
                return home
            number += 1
            home = keep / f"{base}-{number}"
    except OSError as exc:
        raise BeltError(f"--keep {keep}: cannot make a directory there: {exc.strerror}") from None


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold written as escapes."""
    return _NOT_XML.sub(
        lambda m: m.group().encode("unicode_escape", "backslashreplace").decode(), text
    )


def junit_document(
    suite: SuiteResult, render: Render | None = None, *, coverage: bool = False
) -> str:
    """The suite as a JUnit XML report (with ``coverage``, each scenario's hooks as properties)."""
    # Start-up: only --junit-xml needs the XML writer.
    import xml.etree.ElementTree as ElementTree  # noqa: PLC0415 - --junit-xml only

    seconds = f"{suite.seconds:.3f}"
    counts = {"tests": str(len(suite.results))}
    counts |= {"failures": str(suite.counted("fail")), "errors": str(suite.counted("error"))}
    root = ElementTree.Element("testsuites", {"name": "belt test", **counts, "time": seconds})
    name = "belt test" if suite.shard is None else "belt test, shard {}/{}".format(*suite.shard)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    attributes = {"name": name, **counts, "skipped": "0", "time": seconds, "timestamp": stamp}
    attributes["hostname"] = xml_text(socket.gethostname())
    testsuite = ElementTree.SubElement(root, "testsuite", attributes)
    for result in suite.results:
        path = Path(result.name)
        names = (".".join(path.parent.parts) or "belt", path.name, result.name)
        attributes = dict(zip(("classname", "name", "file"), map(xml_text, names), strict=True))
        attributes["time"] = f"{result.seconds:.3f}"
        case = ElementTree.SubElement(testsuite, "testcase", attributes)
        if coverage and result.coverage:
            properties = ElementTree.SubElement(case, "properties")
            for entry in result.coverage:
                hook, value = xml_text(f"hook {entry['where']}"), xml_text(coverage_value(entry))
                ElementTree.SubElement(properties, "property", name=hook, value=value)
        failed: list[tuple[str, str, str, list[str]]] = []  # tag, type, message, text's lines
        if result.status == "error":
            lines = [result.error or "", *result.problems]
            failed.append(("error", "error", result.error or "error", lines))
        for outcome in result.failures:
            lines = [f"{outcome.expectation.where} {outcome.expectation.text}", outcome.found]
            if render is not None and result.report is not None:
                dialect = str(result.report["simulation"].get("dialect"))
                lines += ["", "transcript:", *render(dialect, result.excerpt(outcome))]
            failed.append(("failure", "expectation", lines[0], lines))
        if hooks := result.hook_failures:
            message = f"{len(hooks)} hook call(s) failed and no expectation names them"
            lines = [*(failure["text"] for failure in hooks), HOOK_FAILURE_HINT]
            failed.append(("failure", "hook", message, lines))
        if result.unfired:
            lines = [unfired_text(entry) for entry in result.unfired]
            message = f"{len(result.unfired)} declared hook(s) never fired"
            failed.append(("failure", "coverage", message, lines))
        if result.snapshot is not None and result.snapshot.failed:
            update = snapshot_update_command(result.name)
            lines = [text for text, _ in snapshot_lines(result.snapshot.to_json(), update=update)]
            failed.append(("failure", "snapshot", lines[0], lines))
        for tag, kind, message, lines in failed:
            element = ElementTree.SubElement(case, tag, message=xml_text(message), type=kind)
            element.text = xml_text("\n".join(lines))
    ElementTree.indent(root)
    body = ElementTree.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def coverage_value(entry: dict[str, object]) -> str:
    """One hook's coverage as a JUnit property's value: ``event=... fired=2 allow=1 ...``."""
    parts = [f"event={entry['event']}", f"handler={entry['handler']}", f"fired={entry['fired']}"]
    outcomes, tools = cast(dict[str, int], entry["outcomes"]), cast(dict[str, int], entry["tools"])
    parts += [f"{key}={count}" for key, count in outcomes.items() if count]
    listed = ",".join(f"{tool}:{count}" for tool, count in sorted(tools.items()))
    return " ".join([*parts, f"tools={listed}"] if tools else parts)


def write_junit(
    path: Path, suite: SuiteResult, render: Render | None = None, *, coverage: bool = False
) -> None:
    """Write the JUnit report to ``path`` (InvalidInput, exit 5, when it cannot be written)."""
    try:
        path.write_text(junit_document(suite, render, coverage=coverage), encoding="utf-8")
    except OSError as exc:
        raise cannot_write("--junit-xml", path, exc) from None
