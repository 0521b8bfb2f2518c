"""``belt check``: generate what the platform may send a handler, hold every answer to the
contract, and shrink each failure to the smallest payload that still shows it.

Hypothesis generates the payloads a batch at a time, the path attacks first; a failing case raises
an exception of its check's own class, so each check shrinks on its own. ``py:`` targets run in
supervised worker processes. Hypothesis keeps no database and prints nothing.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as seeded
from hypothesis.errors import Flaky

from belt.check import generate
from belt.check.props import Property, read_props
from belt.check.report import (
    CheckReport,
    CheckResult,
    Failure,
    curl_command,
    encode,
    executor_command,
    trigger_command,
)
from belt.check.save import save_failures
from belt.check.subjects import Subject, network_problems, subjects_for
from belt.check.writable import require_writable_directory
from belt.deliveries.effects import Outcome, effect_text, outcome, url_host
from belt.display.text import short
from belt.engine.dispatch import parse_routes
from belt.engine.offline import OFFLINE_HINT, on_this_machine
from belt.errors import InvalidInput, remote_error
from belt.executor.inbox import ToolOutcome, check_result
from belt.executor.targets import call_here
from belt.handlers.inprocess import deliver_here, load_handler
from belt.handlers.webhook import TIMED_OUT, WebhookResult, encode_payload, post_body
from belt.outgoing import tracing
from belt.outgoing.signing import secret_key, sign, signed_headers
from belt.paths import state_dir
from belt.usercode.loader import load_callable, module_key
from belt.usercode.supervisor import Preload, Supervisor
from belt.wire.enums import HookDecision

EXAMPLES_DEFAULT, EXAMPLES_MAX = 100, 100_000
# The bounds of shrinking one event's failures: each call of a slow handler is dear.
SHRINK_CALLS_MAX, SHRINK_SECONDS_MAX = 300, 20.0
BATCH = 200  # payloads generated at a time, then sent back to back
WRONG_SECRET = "whsec_YmVsdC1jaGVjazogbm90IHRoZSBzZWNyZXQ="
SKEW_SECONDS = 600  # how far off the stale and future signed timestamps are (the limit is 300)
BODY_PROBLEM = "answered with a body that is not a LifecycleHookResponse"
REMOTE_PER_SECOND = 20  # requests to a webhook that is not on this machine

Failures = list[tuple[str, str]]  # the checks a case failed, each with why
Case = Callable[[Any, bool], Failures]  # (payload, whether it counts) -> its failures
STOPPED = "--max-time passed; the cases up to then are reported"


class CaseFailed(Exception):
    """A generated case failed a check; its class names the check, for Hypothesis to shrink each."""


@functools.cache
def failure_class(check: str) -> type[CaseFailed]:
    """The exception class of one check's failures."""
    return type(f"Failed_{check}", (CaseFailed,), {})


class _Stop(BaseException):
    """Out of time or of shrinking calls: Hypothesis lets a BaseException through at once."""


@dataclass
class Pacer:
    """Keeps requests at most ``per_second`` apart on average (each waits its turn)."""

    per_second: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    next_at: float = 0.0

    def wait(self) -> None:
        """Wait until the next request may go."""
        if (now := self.clock()) < self.next_at:
            self.sleep(self.next_at - now)
        self.next_at = max(now, self.next_at) + 1 / self.per_second


@dataclass
class Sender:
    """Delivers to the subjects of one run, every call within its timeout and before
    ``deadline`` (``--max-time``); webhooks not on this machine are paced."""

    workers: Supervisor
    secret: str | None = None
    deadline: float = float("inf")
    pacer: Pacer = field(default_factory=lambda: Pacer(REMOTE_PER_SECOND))
    hung: dict[tuple[str, str], WebhookResult | None] = field(default_factory=dict)
    """What a call that timed out gave (None for a tool), by target and payload: not sent again."""

    def seconds(self, timeout: float) -> tuple[float, bool]:
        """A call's seconds: its ``timeout``, or what is left of ``--max-time`` (then True)."""
        if (left := self.deadline - time.monotonic()) <= 0:
            raise _Stop("--max-time")
        return (left, True) if left < timeout else (timeout, False)

    def post(self, subject: Subject, body: bytes, headers: dict[str, str]) -> WebhookResult:
        """POST exactly ``body`` and ``headers`` to a webhook subject."""
        if not on_this_machine(subject.target):
            self.pacer.wait()
        seconds, cut = self.seconds(subject.timeout)
        answer = post_body(subject.target, body, headers, timeout=seconds)
        if cut and answer.error is not None and TIMED_OUT in answer.error:
            raise _Stop("--max-time")
        return answer

    def deliver(self, subject: Subject, payload: dict[str, object], msg_id: str) -> WebhookResult:
        """One delivery of ``payload``, signed with ``msg_id`` when there is a secret."""
        if subject.kind == "py":
            return self.call_handler(subject, payload)
        body = encode_payload(payload)
        signed = signed_headers(self.secret, body, msg_id=msg_id) if self.secret else {}
        return self.post(subject, body, {"content-type": "application/json", **signed})

    def call_handler(self, subject: Subject, payload: dict[str, object]) -> WebhookResult:
        """Call a ``py:`` handler subject in a worker process, as a webhook is delivered."""
        if self.hung and (known := self.hung.get((subject.target, encode(payload)))) is not None:
            return known
        seconds, cut = self.seconds(subject.timeout)
        started = time.perf_counter()
        reply = self.workers.call(deliver_here, (subject.target, payload), seconds=seconds)
        took = round((time.perf_counter() - started) * 1000)
        if reply.timed_out and cut:
            raise _Stop("--max-time")
        if reply.timed_out or reply.problem is not None:
            why = f" {TIMED_OUT} {subject.timeout:g} s" if reply.timed_out else f": {reply.problem}"
            answer = WebhookResult(None, "", None, subject.target + why, took)
            if reply.timed_out:
                self.hung[subject.target, encode(payload)] = answer
            return answer
        return cast(WebhookResult, reply.value)

    def call_tool(self, subject: Subject, task_input: dict[str, object]) -> ToolOutcome:
        """Run a Nexus executor subject's tool on ``task_input`` (a ``py:`` one in a worker)."""
        executor = subject.executor
        assert executor is not None
        if self.hung and (subject.target, encode(task_input)) in self.hung:
            return ToolOutcome(timed_out=True)
        seconds, cut = self.seconds(subject.timeout)
        if executor.kind != "py":
            done = executor.call(task_input, seconds)
        else:
            run = partial(call_here, option=f"--executor {executor.name}")
            reply = self.workers.call(run, (executor.spec, task_input), seconds=seconds)
            done = reply.value if reply.problem is None else ToolOutcome(failure=reply.problem)
            done = ToolOutcome(timed_out=True) if reply.timed_out else done
        if done.timed_out and cut:
            raise _Stop("--max-time")
        if done.timed_out:
            self.hung[subject.target, encode(task_input)] = None
        return done


def user_modules(subjects: list[Subject]) -> list[Preload]:
    """The user's modules of the subjects' ``py:`` handlers and tools, preloaded by the workers."""
    wanted: dict[str, Preload] = {}
    for subject in subjects:
        if subject.kind == "py":
            spec, where = subject.target, subject.target
            load = partial(load_handler, spec, where=spec)
        elif subject.executor is not None and subject.executor.kind == "py":
            spec, where = subject.executor.spec, f"--executor {subject.executor.name}"
            load = partial(load_callable, spec, option=where)
        else:
            continue
        key = module_key(spec)
        if key not in wanted or wanted[key].seconds < subject.timeout:
            wanted[key] = Preload(key, load, subject.timeout, where)
    return list(wanted.values())


@dataclass
class Explorer:
    """Runs Hypothesis over one strategy, with belt's bounds and quiet settings."""

    report: CheckReport
    seed: int
    examples: int
    deadline: float
    counted: Callable[[int], None] = lambda cases: None  # told the cases counted after each
    traced: dict[str, str] = field(default_factory=dict)  # the attributes of each case's span
    # The smallest failing case per check: (size, payload, detail).
    found: dict[str, tuple[tuple[int, int], Any, str]] = field(default_factory=dict)
    flaky: set[str] = field(default_factory=set)
    again: dict[str, bool] = field(default_factory=dict)  # did the reported case fail again
    cut: bool = False  # shrinking stopped at its bound

    def record(self, check: str, detail: str, payload: Any) -> None:
        """Keep ``payload`` if it is the smallest failure of ``check`` so far (``data`` first)."""
        whole = _size(payload)
        data = payload.get("data") if isinstance(payload, dict) else None
        size = (whole if data is None else _size(data), whole)
        if check not in self.found or size < self.found[check][0]:
            self.found[check] = (size, payload, detail)

    def timed(self, case: Case, payload: Any, counting: bool) -> Failures:
        """Run one case (``sent``) and record its failures."""
        with tracing.span("belt.check.case", self.traced) as span:
            failures = self.sent(case, payload, counting)
            failed = sorted({check for check, _ in failures}) or None
            attributes = {"belt.check.counted": counting, "belt.check.failed": failed}
            tracing.set_attributes(span, attributes, "case failed" if failed else None)
        if counting:
            self.report.cases += 1
            self.counted(self.report.cases)
        for check, detail in failures:
            self.record(check, detail, payload)
        return failures

    def finish(
        self, subject: Subject, results: dict[str, CheckResult], reproduce: Callable[[Any], str]
    ) -> None:
        """Set each result's failure, with its reproducer, or why it was not reached."""
        for result in results.values():
            reached = result.cases or result.check in self.found or result.check == "signature"
            if not reached and result.skipped is None:
                result.skipped = "not reached: an earlier check failed on every case"
        for check, (_, payload, detail) in self.found.items():
            result = results[check]
            command = reproduce(payload)
            if subject.kind != "executor" and TIMED_OUT in detail:
                # belt trigger, given the same deadline, times out as the check did.
                command += f" --timeout {subject.timeout:g}"
            if self.cut:
                bound = f"{SHRINK_CALLS_MAX} cases or {SHRINK_SECONDS_MAX:g} s"
                detail += f" (shrinking stopped at its bound of {bound}: the smallest found)"
            result.failure = Failure(
                detail, payload, command, flaky=check in self.flaky, again=self.again.get(check)
            )
            result.failed = result.failed or 1

    def explore(self, strategy: Any, sample: Any, case: Case, explicit: Sequence[Any] = ()) -> None:
        """Search for failures, then send each case to be reported once more (``confirm``)."""
        try:
            self.search(strategy, sample, case, explicit)
            self.confirm(case)
        except _Stop:
            self.report.stopped = STOPPED

    def sent(self, case: Case, payload: Any, counting: bool) -> Failures:
        """``case(payload, counting)``, its time counted as the cases' (generation left out)."""
        started = time.perf_counter()
        try:
            return case(payload, counting)
        finally:
            self.report.case_seconds += time.perf_counter() - started

    def confirm(self, case: Case) -> None:
        """Send each check's reported case once more; one that does not fail it again is flaky."""
        failed: dict[str, set[str]] = {}
        for check, (_, payload, _) in list(self.found.items()):
            key = encode(payload)
            if key not in failed:
                if time.monotonic() > self.deadline:
                    return
                failed[key] = {name for name, _ in self.sent(case, payload, False)}
            self.again[check] = check in failed[key]
            if not self.again[check]:
                self.flaky.add(check)

    def search(self, strategy: Any, sample: Any, case: Case, explicit: Sequence[Any]) -> None:
        """Run ``case`` on the sample, ``explicit`` (at most half the first batch), then generated
        batches; a generated failure is shrunk by Hypothesis running its batch again."""
        self.timed(case, sample, True)
        for batch, done in enumerate(range(0, self.examples, BATCH)):
            size = min(BATCH, self.examples - done)
            first = explicit[: size // 2] if batch == 0 else []
            seed = (self.seed + batch) % 2**32
            drawn = size - len(first)
            generated = [*first, *self.generate(strategy, seed, drawn)]
            for index, payload in enumerate(generated):
                if self.out_of_time():
                    return
                failures = self.timed(case, payload, True)
                if failures and index >= len(first):
                    # A case that timed out (a webhook's or a tool's) costs its timeout each time
                    # a smaller one is tried: it is reported as it is.
                    slow = ("did not finish within", TIMED_OUT)
                    if not all(any(s in detail for s in slow) for _, detail in failures):
                        self.shrink(strategy, seed, drawn, case, {check for check, _ in failures})
                    return
            if len(generated) < size and self.out_of_time():
                return  # the deadline passed while the batch was generated

    def out_of_time(self) -> bool:
        """True, and the report says so, once ``--max-time`` has passed."""
        if late := time.monotonic() > self.deadline:
            self.report.stopped = STOPPED
        return late

    @staticmethod
    def run(strategy: Any, test: Callable[[Any], None], seed: int, size: int, shrink: bool) -> None:
        """``test`` on ``size`` examples of ``strategy`` drawn with ``seed``, Hypothesis quiet."""
        phases = (Phase.generate, Phase.target, Phase.shrink) if shrink else (Phase.generate,)
        quiet = settings(max_examples=size, database=None, deadline=None, derandomize=False)
        quiet = settings(quiet, print_blob=False, report_multiple_bugs=True, phases=phases)
        quiet = settings(quiet, verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck))
        quiet(seeded(seed)(given(strategy)(test)))()  # type: ignore[no-untyped-call]

    def generate(self, strategy: Any, seed: int, size: int) -> list[Any]:
        """Up to ``size`` payloads of ``strategy`` as Hypothesis draws them with ``seed``."""
        batch: list[Any] = []

        def keep(payload: Any) -> None:
            if time.monotonic() > self.deadline:
                raise _Stop("--max-time")
            batch.append(payload)

        with contextlib.suppress(_Stop):
            self.run(strategy, keep, seed, size, False)
        return batch

    def shrink(self, strategy: Any, seed: int, size: int, case: Case, failed: set[str]) -> None:
        """Let Hypothesis find a batch's failure (of the checks ``failed``) again and shrink it."""
        state = {"calls": 0, "failing": False}
        until = time.monotonic() + SHRINK_SECONDS_MAX

        def test(payload: Any) -> None:
            if (now := time.monotonic()) > self.deadline:
                raise _Stop("--max-time")
            if state["failing"]:
                state["calls"] += 1
                if state["calls"] > SHRINK_CALLS_MAX or now > until:
                    raise _Stop("shrink")
            if failures := self.timed(case, payload, False):
                state["failing"] = True
                raise failure_class(failures[0][0])(failures[0][1])

        try:
            self.run(strategy, test, seed, size, True)
            # Nothing failed this time: what failed in the batch did not fail again.
            self.flaky.update(failed)
        except _Stop as stop:
            if str(stop) == "--max-time":
                self.report.stopped = STOPPED
            else:
                self.cut = True
        except Exception as exc:  # a check's failure, shrunk: kept by ``timed``
            if not _only_failures(exc):
                raise
            if isinstance(exc, Flaky):
                self.flaky.update(failed)


def _size(value: Any) -> int:
    """The bytes of ``value`` as compact UTF-8 JSON."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))


def _only_failures(exc: BaseException) -> bool:
    """True for an exception (or a group of them) made only of check failures."""
    if isinstance(exc, BaseExceptionGroup):
        _, others = exc.split((CaseFailed, Flaky))
        return others is None
    return isinstance(exc, CaseFailed | Flaky)


def _decision(result: WebhookResult) -> str | None:
    response = result.response if result.error is None else None
    return None if response is None else str(response.effective_decision())


def meaning_warnings(subject: Subject, result: WebhookResult) -> list[str]:
    """What the platform would ignore in a valid answer, and what it does instead."""
    response, event, is_async = result.response, subject.event, subject.declared_async
    if response is None:
        return []
    warnings = []
    if (decision := response.decision) and decision != HookDecision.ALLOW:
        if is_async:
            ignored = f"its {decision} is ignored and the agent continues"
            warnings.append(f"{event}: an async hook never blocks, {ignored}")
        elif outcome(event, decision) == Outcome.IGNORED:
            warnings.append(effect_text(event, decision, None))
    if response.injected and is_async:
        warnings.append(f"{event}: an async hook never injects, its inject/system is dropped")
    return warnings


def results_of(subject: Subject, *names: str) -> dict[str, CheckResult]:
    """The checks ``names`` of one subject, in report order."""
    return {name: CheckResult(name, subject.label, subject.event) for name in names}


def platform_case(subject: Subject, sender: Sender, results: dict[str, CheckResult]) -> Case:
    """One case on an inference.sh subject: the payload delivered twice, with one ``webhook-id``."""

    def case(payload: dict[str, object], counting: bool) -> Failures:
        tally = _tally(results, counting)
        answers, body, meaning = tally["answers"], tally["body"], tally["decision"]
        msg_id = f"msg_{secrets.token_urlsafe(18)}"
        first = sender.deliver(subject, payload, msg_id)
        answers.cases += 1
        answers.latencies.append(first.duration_ms)
        if first.error is not None:
            # An answer in 2xx, or one whose body is not a response, fails the body check.
            answered = first.status is not None and 200 <= first.status < 300
            check = "body" if answered or BODY_PROBLEM in first.error else "answers"
            body.cases += check == "body"
            return _failed(tally, check, first.error)
        body.cases += 1
        for warning in first.warnings:
            body.warn(warning)
        meaning.cases += 1
        for warning in meaning_warnings(subject, first):
            meaning.warn(warning)
        second = sender.deliver(subject, payload, msg_id)
        tally["redelivery"].cases += 1
        answers.latencies.append(second.duration_ms)
        if second.error is not None:
            again = "delivery again (same webhook-id)" if sender.secret else "payload again"
            return _failed(tally, "redelivery", f"the same {again}: {second.error}")
        tally["deterministic"].cases += 1
        if (once := _decision(first)) != (twice := _decision(second)):
            acts = "the platform acts on whichever answer it gets"
            tally["deterministic"].warn(f"the same payload got {once}, then {twice}; {acts}")
        return []

    return case


def _tally(results: dict[str, CheckResult], counting: bool) -> dict[str, CheckResult]:
    """Where a case counts: ``results``, or for a case that does not count, fresh ones."""
    if counting:
        return results
    return {name: CheckResult(name, found.subject, found.event) for name, found in results.items()}


def _failed(tally: dict[str, CheckResult], check: str, detail: str) -> Failures:
    tally[check].failed += 1
    return [(check, detail)]


def property_case(subject: Subject, sender: Sender, prop: Property, result: CheckResult) -> Case:
    """One case of a property: a payload it speaks of must get its decision."""

    def case(payload: dict[str, object], counting: bool) -> Failures:
        if not prop.applies(payload):
            return []
        tally = _tally({"property": result}, counting)
        answer = sender.deliver(subject, payload, f"msg_{secrets.token_urlsafe(18)}")
        tally["property"].cases += 1
        if (got := _decision(answer)) == prop.decision:
            return []
        why = f", got {got}" if got is not None else f"; the call failed: {answer.error}"
        return _failed(tally, "property", f"expected {prop.decision}{why}")

    return case


@dataclass(frozen=True)
class SignatureCase:
    """One request of the Standard Webhooks cases and whether a handler must accept it."""

    name: str
    body: bytes
    headers: dict[str, str]
    accept: bool


def signature_cases(secret: str, payload: dict[str, object], now: int) -> list[SignatureCase]:
    """The Standard Webhooks cases for one payload, signed ``now``.

    Each has a ``webhook-id`` of its own: a handler refusing replays refuses none for being one."""
    body = encode_payload(payload)
    plain = {"content-type": "application/json"}
    turn_count = cast(int, payload.get("turn_count", 0))
    tampered = encode_payload({**payload, "turn_count": turn_count + 1})

    def signed(key: str = secret, moment: int = now) -> dict[str, str]:
        return {**plain, **signed_headers(key, body, now=moment)}

    def without(name: str) -> dict[str, str]:
        return {key: value for key, value in signed().items() if key != name}

    several, another_id = signed(), secrets.token_urlsafe(18)
    other = sign(WRONG_SECRET, several["webhook-id"], now, body)
    several["webhook-signature"] = f"{other} {several['webhook-signature']}"

    def resigned(signature: Callable[[str], str]) -> dict[str, str]:
        """Signed headers, their signature made of the right one's base64 digest."""
        headers = signed()
        digest = headers["webhook-signature"].removeprefix("v1,")
        return {**headers, "webhook-signature": signature(digest)}

    def last_byte_off(digest: str) -> str:
        raw = base64.b64decode(digest)
        return "v1," + base64.b64encode(raw[:-1] + bytes([raw[-1] ^ 0x01])).decode("ascii")

    cases = {
        "a valid signature": signed(),
        "several signatures, one of them valid": several,
        "an unsigned request": plain,
        "a tampered body": signed(),
        "a signature made with another secret": signed(WRONG_SECRET),
        "a stale timestamp (10 minutes old)": signed(moment=now - SKEW_SECONDS),
        "a timestamp 10 minutes in the future": signed(moment=now + SKEW_SECONDS),
        "no webhook-id header": without("webhook-id"),
        "no webhook-timestamp header": without("webhook-timestamp"),
        "no webhook-signature header": without("webhook-signature"),
        # Near misses: a verifier that compares a prefix, leaves the id or the time out of
        # what it signs, or reads any entry that starts with v1 accepts one of these.
        "the signature with its last byte changed": resigned(last_byte_off),
        "the first half of the signature": resigned(lambda sig: "v1," + sig[: len(sig) // 2]),
        "the signature of another webhook-id": {**signed(), "webhook-id": f"msg_{another_id}"},
        "the signature of another timestamp": {**signed(), "webhook-timestamp": str(now - 1)},
        "the signature as a v1a, entry": resigned(lambda digest: "v1a," + digest),
    }
    return [
        SignatureCase(name, tampered if name == "a tampered body" else body, headers, index < 2)
        for index, (name, headers) in enumerate(cases.items())
    ]


def run_signatures(subject: Subject, sender: Sender, secret: str, result: CheckResult) -> None:
    """Send the Standard Webhooks cases; a case handled the wrong way fails the check."""
    payload = generate.spec_sample(subject.event)
    wrong: list[tuple[SignatureCase, str]] = []
    for case in signature_cases(secret, payload, int(time.time())):
        answer = sender.post(subject, case.body, case.headers)
        result.cases += 1
        status, low = answer.status, 200 if case.accept else 400
        if status is None or not low <= status < low + 100:
            result.failed += 1
            got = f"HTTP {status}" if status is not None else (answer.error or "no answer")
            wrong.append((case, f"{case.name}: {got}, expected {low // 100}xx"))
    if wrong:
        first, plain = wrong[0][0], "an unsigned request"
        if first.name == plain:
            reproducer = trigger_command(subject.event, subject.target, payload)
        else:
            reproducer = curl_command(subject.target, first.body, first.headers)
        lead = "accepts unsigned requests although a secret is configured; "
        lead = lead if any(case.name == plain for case, _ in wrong) else ""
        detail = lead + "; ".join(why for _, why in wrong)
        result.failure = Failure(detail, json.loads(first.body), reproducer)


def nexus_case(subject: Subject, results: dict[str, CheckResult], sender: Sender) -> Case:
    """One case on an executor tool: the task input given twice (a retried task reuses it)."""

    def call(task_input: dict[str, object]) -> tuple[ToolOutcome, int]:
        started = time.perf_counter()
        done = sender.call_tool(subject, task_input)
        return done, round((time.perf_counter() - started) * 1000)

    def problem(done: ToolOutcome) -> tuple[str, str] | None:
        if done.timed_out:
            return "answers", f"the tool did not finish within {subject.timeout:g} s"
        if done.failure is not None:
            return "answers", f"the tool failed: {done.failure}"
        if done.invalid is not None:
            return "result", done.invalid
        problems, _ = check_result(done.result, subject.event)
        return ("result", "; ".join(problems)) if problems else None

    def case(task_input: dict[str, object], counting: bool) -> Failures:
        tally = _tally(results, counting)
        first, took = call(task_input)
        tally["answers"].cases += 1
        tally["answers"].latencies.append(took)
        if (found := problem(first)) is not None:
            tally["result"].cases += found[0] == "result"
            return _failed(tally, *found)
        tally["result"].cases += 1
        second, took = call(task_input)
        tally["redelivery"].cases += 1
        tally["answers"].latencies.append(took)
        if (again := problem(second)) is not None:
            return _failed(tally, "redelivery", f"the same task input again: {again[1]}")
        tally["deterministic"].cases += 1
        once, twice = (
            done.result.get("structured_content") if isinstance(done.result, dict) else None
            for done in (first, second)
        )
        if once != twice:
            got = f"got {short(once, 100)}, then {short(twice, 100)}"
            tally["deterministic"].warn(f"the same task input {got}")
        return []

    return case


Progress = Callable[[str, int], None]
"""Told, as a check goes, the event being checked and the number of cases done so far."""


def run_check(
    target: str | None,
    *,
    events: list[str] | None = None,
    executors: list[str] | None = None,
    routes: list[str] | None = None,
    props: str | Path | None = None,
    secret: str | None = None,
    timeout: float | None = None,
    allow_network: bool = False,
    examples: int = EXAMPLES_DEFAULT,
    seed: int | None = None,
    max_time: float | None = None,
    save: Path | None = None,
    beyond_spec: bool = False,
    progress: Progress | None = None,
) -> CheckReport:
    """Check ``target`` (and the executors) against the contract; returns the report."""
    if not 1 <= examples <= EXAMPLES_MAX:
        raise InvalidInput(f"--examples {examples}: expected 1 to {EXAMPLES_MAX}")
    if timeout is not None and not 0 < timeout <= 300:
        raise InvalidInput(f"--timeout {timeout:g}: expected more than 0 and at most 300 seconds")
    if max_time is not None and not 0 < max_time < float("inf"):
        raise InvalidInput(f"--max-time {max_time:g}: expected a finite number of seconds above 0")
    if secret:
        secret_key(secret)
    if save is not None:
        require_writable_directory(save, option="--save")
    properties = read_props(props) if props is not None else []
    routed = parse_routes(routes or [])
    subjects, notes = subjects_for(
        target, events=events or [], executors=executors or [], routes=routed, timeout=timeout
    )
    if not allow_network and (problems := network_problems(subjects)):
        message = "belt check sends only to this machine"
        raise InvalidInput(message, problems=problems, hint=OFFLINE_HINT)
    chosen_seed = seed if seed is not None else secrets.randbelow(2**32)
    shown = target or "executors"
    if shown.startswith(("http://", "https://")):
        shown = url_host(shown, every_port=True)
    report = CheckReport(target=shown, seed=chosen_seed, examples=examples, notes=notes)
    started = time.monotonic()
    deadline = started + max_time if max_time is not None else float("inf")
    try:
        with (
            tracing.span("belt.check", {"belt.check.seed": chosen_seed}) as span,
            Supervisor(preload=partial(user_modules, subjects)) as workers,
            generate.hypothesis_home(state_dir() / "hypothesis"),
        ):
            for error in workers.failed_imports():  # a handler that cannot be imported: 3, 5
                raise error
            sender = Sender(workers, secret, deadline)
            try:
                _reachable(subjects, sender)
                for index, subject in enumerate(subjects):  # until the end or --max-time
                    counted = partial(progress or (lambda event, cases: None), subject.event)
                    counted(report.cases)
                    traced = {"belt.check.event": subject.event, "belt.check.kind": subject.kind}
                    explorer = Explorer(report, chosen_seed, examples, deadline, counted, traced)
                    if subject.kind == "executor":
                        _check_nexus(subject, sender, explorer)
                    else:
                        _check_platform(subject, sender, explorer, properties, save, beyond_spec)
                    if report.stopped:
                        report.notes += [f"not checked: {s.label}" for s in subjects[index + 1 :]]
                        break
            except _Stop:
                report.stopped = STOPPED
            tracing.set_attributes(span, {"belt.check.cases": report.cases})
    finally:
        report.seconds = time.monotonic() - started
    return report


def _reachable(subjects: list[Subject], sender: Sender) -> None:
    """Exit 6 when a webhook cannot be reached at all (tried once, with the spec's sample); any
    answer that came is held to the checks."""
    tried: set[str] = set()
    for subject in subjects:
        if subject.kind != "webhook" or subject.target in tried:
            continue
        tried.add(subject.target)
        msg_id = f"msg_{secrets.token_urlsafe(18)}"
        answer = sender.deliver(subject, generate.spec_sample(subject.event), msg_id)
        error = answer.error or ""
        if answer.status is None and error.startswith(("cannot connect", "request to")):
            hint = "check that the handler is running and listening at that host and port"
            raise remote_error(None, error, hint=hint)


def _check_platform(
    subject: Subject,
    sender: Sender,
    explorer: Explorer,
    properties: list[Property],
    save: Path | None,
    beyond_spec: bool,
) -> None:
    report, examples = explorer.report, explorer.examples
    signed = ["signature"] if sender.secret else []
    results = results_of(
        subject, "answers", "body", "decision", "deterministic", "redelivery", *signed
    )
    reproduce = partial(trigger_command, subject.event, subject.target, secret=sender.secret)
    explorer.explore(
        generate.payloads(subject.event, beyond_spec=beyond_spec),
        generate.spec_sample(subject.event),
        platform_case(subject, sender, results),
        generate.attack_payloads(subject.event),
    )
    explorer.finish(subject, results, reproduce)
    if (signature := results.get("signature")) and subject.kind == "py":
        signature.skipped = "a py: handler is called in-process; there is no request to sign"
    elif signature and sender.secret and not report.stopped:
        try:
            run_signatures(subject, sender, sender.secret, signature)
        except _Stop:
            report.stopped = STOPPED
    found: list[CheckResult] = list(results.values())
    for prop in properties:
        if prop.event != subject.event or report.stopped:
            continue
        result = CheckResult("property", subject.label, subject.event, name=prop.name)
        steered = Explorer(report, explorer.seed, examples, explorer.deadline, explorer.counted)
        steering = (prop.event, prop.tool, prop.arguments, prop.unless)
        steered.explore(
            generate.steered_payloads(*steering, beyond_spec=beyond_spec),
            generate.spec_sample(subject.event),
            property_case(subject, sender, prop, result),
            generate.attack_payloads(*steering),
        )
        steered.finish(subject, {"property": result}, reproduce)
        if result.cases == 0 and result.failure is None:
            result.skipped = "no generated payload matched the property"
        found.append(result)
    if save is not None:
        report.unwritten += save_failures(save, subject, found, properties)
    report.results.extend(found)


def _check_nexus(subject: Subject, sender: Sender, explorer: Explorer) -> None:
    executor = subject.executor
    assert executor is not None
    results = results_of(subject, "answers", "result", "deterministic", "redelivery")
    explorer.explore(
        generate.nexus_inputs(subject.event),
        generate.nexus_sample(subject.event),
        nexus_case(subject, results, sender),
    )
    explorer.finish(subject, results, partial(executor_command, executor.kind, executor.spec))
    explorer.report.results.extend(results.values())
