"""The result of ``belt check``: one entry per check and subject, each pass, fail, warn or skip;
a failed check carries its shrunk payload and a command that sends exactly that payload again."""

from __future__ import annotations

import json
import shlex
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from belt.check.writable import cannot_write
from belt.display.text import printable, short
from belt.errors import ExitCode

MAX_WARNINGS_SHOWN = 5
CHECKS = {
    "answers": "answers 2xx within the timeout",
    "body": "the body is empty or a valid response",
    "decision": "the decision means something for the event",
    "deterministic": "the same payload gets the same decision",
    "redelivery": "a repeated delivery is harmless",
    "signature": "Standard Webhooks signatures are enforced",
    "result": "the result is a valid hook decision",
    "property": "the policy's property holds",
}
"""Each check's name and what it holds the handler to."""


@dataclass
class Failure:
    """A check's smallest failing case: why, the payload, and how to reproduce it."""

    detail: str
    payload: Any
    reproducer: str
    flaky: bool = False
    again: bool | None = None  # did it fail again when sent once more (None: --max-time passed)

    @property
    def note(self) -> str:
        """What the detail line adds when the failure did not happen every time."""
        if self.again is False:
            return " (sent once more, it did not fail again: it may depend on load or timing)"
        return " (it did not fail on every try)" if self.flaky else ""

    def to_json(self) -> dict[str, object]:
        """The failure as JSON."""
        shown = {key: getattr(self, key) for key in ("detail", "payload", "reproducer", "flaky")}
        return {**shown, "failed_again": self.again}


@dataclass
class CheckResult:
    """One check on one subject."""

    check: str
    subject: str
    event: str
    name: str = ""  # a property's
    cases: int = 0
    failed: int = 0
    warned: int = 0
    warnings: dict[str, int] = field(default_factory=dict)
    failure: Failure | None = None
    skipped: str | None = None
    latencies: list[int] = field(default_factory=list)
    saved: str | None = None
    not_saved: str | None = None  # --save: why its failure was not written as a scenario

    @property
    def status(self) -> str:
        """``fail``, ``warn``, ``skip`` or ``pass``."""
        if self.failure is not None:
            return "fail"
        return "warn" if self.warnings else "skip" if self.skipped is not None else "pass"

    @property
    def title(self) -> str:
        """What the check holds the handler to."""
        return self.name or CHECKS[self.check]

    def warn(self, message: str) -> None:
        """Count one warning (the distinct ones are kept, a few of them)."""
        self.warned += 1
        if message in self.warnings or len(self.warnings) < MAX_WARNINGS_SHOWN:
            self.warnings[message] = self.warnings.get(message, 0) + 1

    def latency(self) -> dict[str, int] | None:
        """p50, p95, p99 and max of the answers' latency in milliseconds."""
        if not self.latencies:
            return None
        values = sorted(self.latencies)
        one = len(values) == 1
        cuts = values * 99 if one else statistics.quantiles(values, n=100, method="inclusive")
        shown = {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}
        return {key: round(value) for key, value in shown.items()} | {"max": values[-1]}

    def to_json(self) -> dict[str, object]:
        """The result as ``belt check --json`` prints it."""
        shown = ("check", "title", "subject", "event", "status", "cases", "failed", "warned")
        out: dict[str, object] = {key: getattr(self, key) for key in shown}
        out |= {"warnings": list(self.warnings), "failure": self.failure and self.failure.to_json()}
        extra = {"skipped": self.skipped, "latency_ms": self.latency()}
        extra |= {"saved": self.saved, "not_saved": self.not_saved}
        return out | {key: value for key, value in extra.items() if value is not None}


@dataclass
class CheckReport:
    """Every check of one ``belt check`` run."""

    target: str
    seed: int
    examples: int
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    case_seconds: float = 0.0  # sending cases and checking answers, generation left out
    cases: int = 0
    stopped: str | None = None
    unwritten: list[str] = field(default_factory=list)  # why each --save scenario was not written

    @property
    def exit_code(self) -> ExitCode:
        """5 when a --save scenario was not written, else 1 when a check failed, else 0."""
        if self.unwritten:
            return ExitCode.INVALID_INPUT
        return ExitCode.FAILURE if any(r.status == "fail" for r in self.results) else ExitCode.OK

    def counts(self) -> dict[str, int]:
        """How many checks passed, failed, warned and were skipped."""
        counted = Counter(result.status for result in self.results)
        return dict.fromkeys(("pass", "fail", "warn", "skip"), 0) | counted

    def to_json(self) -> dict[str, object]:
        """The report as one JSON document."""
        out = {key: getattr(self, key) for key in ("target", "seed", "examples")}
        out |= {"passed": self.exit_code == ExitCode.OK, "counts": self.counts()}
        out |= {"cases": self.cases, "seconds": round(self.seconds, 3), "stopped": self.stopped}
        out |= {"notes": self.notes, "unwritten": self.unwritten}
        return out | {"checks": [r.to_json() for r in self.results]}


def failure_lines(report: CheckReport) -> list[str]:
    """Each failed check as plain lines: the subject and check, why, and the reproducer."""
    lines = []
    for result in report.results:
        if (failure := result.failure) is not None:
            lines += [
                f"{printable(result.subject)}: {result.check} failed ({printable(result.title)})",
                f"  {printable(failure.detail)}{failure.note}",
                f"  reproduce: {failure.reproducer}",
            ]
    return lines


def encode(payload: Any) -> str:
    """A payload as one line of JSON that decodes to exactly it, terminal controls escaped."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] for ch in text)


def trigger_command(event: str, target: str, payload: Any, secret: str | None = None) -> str:
    """``belt trigger`` sending exactly ``payload`` to ``target``."""
    words = ["belt", "trigger", event, "--to", target, "--payload", encode(payload)]
    return shlex.join([*words, "--secret", secret] if secret else words)


def executor_command(kind: str, spec: str, task_input: Any) -> str:
    """A shell command that gives an executor tool exactly ``task_input``."""
    body = encode(task_input)
    if kind == "cmd":
        return f"printf '%s' {shlex.quote(body)} | {spec}"
    if kind == "http":
        return shlex.join(
            ["curl", "-sS", "-X", "POST", spec, "-H", "content-type: application/json", "-d", body]
        )
    script = (
        "import json, sys; from belt.usercode.loader import load_callable; "
        f"print(json.dumps(load_callable({spec!r})(json.loads(sys.argv[1]))))"
    )
    return shlex.join(["python", "-c", script, body])


def curl_command(url: str, body: bytes, headers: dict[str, str]) -> str:
    """``curl`` sending exactly ``body`` with ``headers`` (a signature case)."""
    words = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}\\n", "-X", "POST", url]
    words += [word for name, value in headers.items() for word in ("-H", f"{name}: {value}")]
    words += ["--data-binary", body.decode("utf-8", "replace")]
    return shlex.join(words)


def junit_xml(report: CheckReport, path: Path) -> None:
    """Write the report as JUnit XML, a test case per check and subject (exit 5 on failure)."""
    counts = report.counts()
    suite = ET.Element("testsuite", name="belt check", tests=str(len(report.results)))
    suite.attrib |= {"failures": str(counts["fail"]), "skipped": str(counts["skip"])}
    suite.set("time", f"{report.seconds:.3f}")
    for result in report.results:
        case = ET.SubElement(
            suite, "testcase", classname=printable(result.subject), name=printable(result.title)
        )
        if (failed := result.failure) is not None:
            failure = ET.SubElement(case, "failure", message=printable(short(failed.detail, 200)))
            detail = printable(failed.detail + failed.note)
            failure.text = f"{detail}\nreproduce: {failed.reproducer}"
        elif result.skipped is not None:
            ET.SubElement(case, "skipped", message=printable(result.skipped))
        if result.warnings:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(printable(f"warning: {w}") for w in result.warnings)
    try:
        path.write_bytes(ET.tostring(suite, encoding="utf-8", xml_declaration=True))
    except OSError as exc:
        raise cannot_write("--junit-xml", path, exc) from None
